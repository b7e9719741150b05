//! Scripted agent runs whose UI Message Streams are pinned in `tests/data/<name>.sse` and
//! fed to the `ai` npm package by `tests/node` (`cargo xtask interop`). Shared with
//! `examples/transcript.rs`, which writes them for the Node test.

use futures::StreamExt as _;
use halo_core::testing::ScriptedModel;
use halo_core::{
    AssistantMessage, FinishReason, HaloAgent, ModelError, ModelResponse, ModelStreamEvent,
    Reasoning, Tool, ToolCall, ToolError, ToolOutput, Usage,
};
use halo_stream::StreamOptions;

/// A weather lookup with fixed answers.
pub struct GetWeather;

/// The arguments of [`GetWeather`].
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct GetWeatherArgs {
    /// The city's name.
    pub city: String,
}

impl Tool for GetWeather {
    type Args = GetWeatherArgs;
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "Current weather of a city."
    }
    async fn call(&self, args: GetWeatherArgs) -> Result<ToolOutput, ToolError> {
        match args.city.as_str() {
            "Paris" => Ok(ToolOutput::text("sunny, 21 °C, \"clear skies\"")),
            other => Ok(ToolOutput::error(format!(
                "unknown city `{other}`; try a real city such as Paris"
            ))),
        }
    }
}

fn usage(input: u64, output: u64, cached: u64) -> Usage {
    Usage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        cache_read_tokens: Some(cached),
        ..Usage::default()
    }
}

fn answer(text: &str) -> ModelResponse {
    ModelResponse {
        message: AssistantMessage {
            text: text.into(),
            ..AssistantMessage::default()
        },
        finish_reason: FinishReason::Stop,
        usage: usage(180, 12, 128),
        model: None,
    }
}

/// Reasoning, text, a streamed tool call, its result, then a final answer over two deltas.
pub fn tool_run() -> HaloAgent {
    let call = ToolCall::new("call_1", "get_weather", r#"{"city":"Paris"}"#);
    let first = ModelResponse {
        message: AssistantMessage {
            text: "Let me check.".into(),
            reasoning: vec![Reasoning {
                text: "The user asks about Paris. I should call get_weather.".into(),
                signature: None,
            }],
            tool_calls: vec![call],
        },
        finish_reason: FinishReason::ToolCalls,
        usage: usage(150, 20, 0),
        model: None,
    };
    let final_text = "It is sunny in Paris: 21 °C.\nEnjoy! 🌞";
    let model = ScriptedModel::new()
        .events(vec![
            Ok(ModelStreamEvent::ReasoningDelta(
                "The user asks about Paris. ".into(),
            )),
            Ok(ModelStreamEvent::ReasoningDelta(
                "I should call get_weather.".into(),
            )),
            Ok(ModelStreamEvent::TextDelta("Let me check.".into())),
            Ok(ModelStreamEvent::ToolCallStart {
                index: 0,
                id: "call_1".into(),
                name: "get_weather".into(),
            }),
            Ok(ModelStreamEvent::ToolCallDelta {
                index: 0,
                arguments: r#"{"city":"#.into(),
            }),
            Ok(ModelStreamEvent::ToolCallDelta {
                index: 0,
                arguments: r#""Paris"}"#.into(),
            }),
            Ok(ModelStreamEvent::Finish(first)),
        ])
        .events(vec![
            Ok(ModelStreamEvent::TextDelta("It is sunny in Paris: ".into())),
            Ok(ModelStreamEvent::TextDelta("21 °C.\nEnjoy! 🌞".into())),
            Ok(ModelStreamEvent::Finish(answer(final_text))),
        ]);
    agent(model)
}

/// A tool that fails (an error result the model reads), then an answer.
pub fn tool_error() -> HaloAgent {
    let model = ScriptedModel::new()
        .tool_call("get_weather", serde_json::json!({"city": "Atlantis"}))
        .text("I could not find Atlantis.");
    agent(model)
}

/// A tool call whose argument string is not JSON, then an answer.
pub fn bad_arguments() -> HaloAgent {
    let model = ScriptedModel::new()
        .tool_call_raw("get_weather", "{\"city\": Par")
        .text("Sorry, my tool call was malformed.");
    agent(model)
}

/// A tool call, then an answer whose call reads nothing from the prompt cache although it
/// repeats the first call's 5,000 input tokens: halo-core's ledger reports a cache bust.
pub fn cache_bust() -> HaloAgent {
    let call = ToolCall::new("call_1", "get_weather", r#"{"city":"Paris"}"#);
    let first = ModelResponse {
        message: AssistantMessage {
            tool_calls: vec![call],
            ..AssistantMessage::default()
        },
        finish_reason: FinishReason::ToolCalls,
        usage: usage(5000, 20, 0),
        model: None,
    };
    let mut second = answer("It is sunny in Paris.");
    second.usage = usage(5100, 8, 0);
    agent(ScriptedModel::new().respond(first).respond(second))
}

/// The model fails mid-answer with an HTTP 503.
pub fn model_error() -> HaloAgent {
    let model = ScriptedModel::new().events(vec![
        Ok(ModelStreamEvent::TextDelta("The answer is".into())),
        Err(ModelError::Server {
            status: 503,
            retry_after: None,
            message: "overloaded".into(),
        }),
    ]);
    agent(model)
}

fn agent(model: ScriptedModel) -> HaloAgent {
    match HaloAgent::builder(model)
        .system("You answer weather questions.")
        .tool(GetWeather)
    {
        Ok(builder) => builder.build(),
        Err(e) => panic!("the scenario's tool is valid: {e}"),
    }
}

/// Every scenario: its name, the agent, the user's input and the stream options.
pub fn all() -> Vec<(&'static str, HaloAgent, &'static str, StreamOptions)> {
    vec![
        (
            "tool_run",
            tool_run(),
            "What is the weather in Paris?",
            StreamOptions::new().with_message_id("msg_1"),
        ),
        (
            "tool_error",
            tool_error(),
            "Weather in Atlantis?",
            StreamOptions::new(),
        ),
        (
            "bad_arguments",
            bad_arguments(),
            "Weather in Paris?",
            StreamOptions::new(),
        ),
        (
            "cache_bust",
            cache_bust(),
            "What is the weather in Paris?",
            StreamOptions::new(),
        ),
        (
            "model_error",
            model_error(),
            "What is the answer?",
            StreamOptions::new().with_error_text(|e| e.to_string()),
        ),
    ]
}

/// The whole SSE body of `agent`'s run on `input`.
pub fn transcript(agent: HaloAgent, input: &str, options: StreamOptions) -> String {
    let body = halo_stream::create_halo_stream_with(Box::new(agent), input, options);
    let bytes: Vec<u8> = futures::executor::block_on(
        body.map(|frame| match frame {
            Ok(bytes) => bytes.to_vec(),
            Err(never) => match never {},
        })
        .concat(),
    );
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => panic!("the stream is not UTF-8: {e}"),
    }
}
