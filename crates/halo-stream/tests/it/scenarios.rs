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
        id: None,
        message: AssistantMessage {
            text: text.into(),
            ..AssistantMessage::default()
        },
        finish_reason: FinishReason::Stop,
        usage: usage(180, 12, 128),
        model: None,
        provider: None,
    }
}

/// Reasoning, text, a streamed tool call, its result, then a final answer over two deltas.
pub fn tool_run() -> HaloAgent {
    let call = ToolCall::new("call_1", "get_weather", r#"{"city":"Paris"}"#);
    let first = ModelResponse {
        id: None,
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
        provider: None,
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
        id: None,
        message: AssistantMessage {
            tool_calls: vec![call],
            ..AssistantMessage::default()
        },
        finish_reason: FinishReason::ToolCalls,
        usage: usage(5000, 20, 0),
        model: None,
        provider: None,
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

/// A writer that asks a named agent (`forecaster`, with the weather tool of its own): the
/// forecaster's steps, tool call and text reach the stream as preliminary outputs of the
/// writer's call, then its answer is the call's output.
pub fn sub_agent() -> HaloAgent {
    let model = ScriptedModel::new()
        .tool_call(
            "forecaster",
            serde_json::json!({"task": "Weather in Paris?"}),
        )
        .tool_call("get_weather", serde_json::json!({"city": "Paris"}))
        .text("Sunny in Paris, 21 °C.")
        .text("The forecaster says: sunny in Paris.");
    let forecaster = agent(model.clone()).as_tool(
        "forecaster",
        "Answers weather questions; give it the question.",
    );
    match HaloAgent::builder(model)
        .system("You write the weather report.")
        .tool(forecaster)
    {
        Ok(builder) => builder.build(),
        Err(e) => panic!("the scenario's tool is valid: {e}"),
    }
}

/// A deploy that needs someone's approval: the run pauses with the call waiting.
pub struct Deploy;

impl Tool for Deploy {
    type Args = GetWeatherArgs;
    fn name(&self) -> &str {
        "deploy"
    }
    fn description(&self) -> &str {
        "Deploys the app to a city's data center."
    }
    fn annotations(&self) -> halo_core::ToolAnnotations {
        halo_core::ToolAnnotations::default().with_needs_approval(true)
    }
    async fn call(&self, args: GetWeatherArgs) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("deployed in {}", args.city)))
    }
}

/// A call that needs approval: the stream ends with `tool-approval-request` and a `finish`
/// whose reason is `tool-calls`.
pub fn approval() -> HaloAgent {
    let call = ToolCall::new("call_1", "deploy", r#"{"city":"Paris"}"#);
    let first = ModelResponse {
        id: None,
        message: AssistantMessage {
            text: "Deploying.".into(),
            tool_calls: vec![call],
            ..AssistantMessage::default()
        },
        finish_reason: FinishReason::ToolCalls,
        usage: usage(100, 10, 0),
        model: None,
        provider: None,
    };
    match HaloAgent::builder(ScriptedModel::new().respond(first))
        .system("You deploy apps.")
        .tool(Deploy)
    {
        Ok(builder) => builder.pause_for_approvals().build(),
        Err(e) => panic!("the scenario's tool is valid: {e}"),
    }
}

/// A triage agent that hands the conversation to the weather desk, which answers.
pub fn handoff() -> HaloAgent {
    let model = ScriptedModel::new()
        .tool_call("transfer_to_weather", serde_json::json!({}))
        .text("Sunny in Paris.");
    let weather = HaloAgent::builder(model.clone())
        .name("weather")
        .system("You answer weather questions.")
        .tool(GetWeather);
    let built = HaloAgent::builder(model)
        .name("triage")
        .system("You route questions.")
        .handoff(halo_core::Handoff::to("weather"))
        .and_then(|triage| Ok((triage.build(), weather?.build())))
        .and_then(|(triage, weather)| triage.with_peers([weather]));
    match built {
        Ok(agent) => agent,
        Err(e) => panic!("the scenario's agents are valid: {e}"),
    }
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
            "sub_agent",
            sub_agent(),
            "Write the weather report for Paris.",
            StreamOptions::new(),
        ),
        (
            "handoff",
            handoff(),
            "Weather in Paris?",
            StreamOptions::new(),
        ),
        (
            "approval",
            approval(),
            "Deploy to Paris.",
            StreamOptions::new().with_message_id("msg_2"),
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
