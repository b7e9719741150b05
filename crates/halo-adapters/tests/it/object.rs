//! `generate_object` over each provider's simulator, in each mode: the exact request shape
//! each mode sends (OpenAI `response_format: json_schema`, Anthropic `output_config`,
//! Gemini `responseSchema`; the output tool with its forced `tool_choice`; the prompted
//! instruction), the answers read back (plain JSON, a ```json fence, prose around the JSON,
//! a schema violation followed by a correct answer), what `Auto` picks per provider, and
//! the allowed-tools shapes of active tools with the `tools` array left byte-identical.

use halo_adapters::anthropic::{AnthropicAdapter, CacheMode, json_outputs};
use halo_adapters::gemini::{GeminiAdapter, json_with_tools};
use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::sim::SimReply;
use halo_adapters::sim::anthropic::AnthropicSim;
use halo_adapters::sim::gemini::GeminiSim;
use halo_adapters::sim::openai::OpenAiSim;
use halo_core::output::DEFAULT_OUTPUT_TOOL;
use halo_core::tool::{Tool, ToolError, ToolOutput, schema_for};
use halo_core::{
    HaloAgent, ModelAdapter, Output, OutputMode, StepContext, StepHook, StepSettings, async_trait,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A city's weather.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Weather {
    /// The city.
    city: String,
    /// Degrees Celsius.
    celsius: i32,
    /// Wind, when known.
    wind: Option<String>,
}

fn oslo() -> Weather {
    Weather {
        city: "Oslo".into(),
        celsius: -3,
        wind: None,
    }
}

fn oslo_json() -> Value {
    json!({"city": "Oslo", "celsius": -3, "wind": null})
}

struct Lookup;
#[derive(Deserialize, JsonSchema)]
struct City {
    /// The city.
    city: String,
}
impl Tool for Lookup {
    type Args = City;
    fn name(&self) -> &str {
        "lookup"
    }
    fn description(&self) -> &str {
        "Looks up the weather of a city."
    }
    async fn call(&self, a: City) -> Result<ToolOutput, ToolError> {
        Ok(format!("{}: -3 °C", a.city).into())
    }
}

struct Clock;
impl Tool for Clock {
    type Args = halo_core::NoArgs;
    fn name(&self) -> &str {
        "clock"
    }
    fn description(&self) -> &str {
        "Tells the time."
    }
    async fn call(&self, _: halo_core::NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("12:00".into())
    }
}

fn agent(model: impl ModelAdapter + 'static) -> HaloAgent {
    HaloAgent::builder(model)
        .system("You answer weather questions.")
        .tool(Lookup)
        .unwrap()
        .build()
}

/// The schema the prompted mode and the feedback name, as the agent writes it.
fn schema_text() -> String {
    serde_json::to_string(&schema_for::<Weather>()).unwrap()
}

fn openai(sim: &OpenAiSim) -> OpenAiCompatible {
    OpenAiCompatible::openai("gpt-4o-mini")
        .api_key("sk-sim")
        .base_url(sim.base_url())
        .max_retries(0)
        .build()
        .unwrap()
}

fn anthropic(sim: &AnthropicSim, model: &str) -> AnthropicAdapter {
    AnthropicAdapter::builder(model)
        .api_key("sk-ant-sim")
        .base_url(sim.base_url())
        .cache_mode(CacheMode::Off)
        .max_retries(0)
        .build()
        .unwrap()
}

fn gemini(sim: &GeminiSim, model: &str) -> GeminiAdapter {
    GeminiAdapter::builder()
        .api_key("gemini-sim-key")
        .model(model)
        .base_url(sim.base_url())
        .explicit_cache(false)
        .max_retries(0)
        .build()
        .unwrap()
}

// OpenAI.

#[tokio::test]
async fn openai_native_sends_a_strict_json_schema_and_no_tool_calls() {
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([SimReply::json(&oslo_json())]);
    let mut agent = agent(openai(&sim));
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!((out.object, out.mode), (oslo(), OutputMode::Native));

    let body = &sim.requests()[0];
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {
            "name": "response",
            "strict": true,
            "schema": {
                "title": "Weather",
                "description": "A city's weather.",
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city."},
                    "celsius": {"type": "integer", "description": "Degrees Celsius. (format: int32)"},
                    "wind": {"type": ["string", "null"], "description": "Wind, when known."},
                },
                "required": ["celsius", "city", "wind"],
                "additionalProperties": false,
            },
        }})
    );
    assert_eq!(body["tool_choice"], "none");
    assert_eq!(body["tools"][0]["function"]["name"], "lookup");
}

#[tokio::test]
async fn openai_tool_mode_forces_the_output_tool_and_reads_its_arguments() {
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([SimReply::tool_call(DEFAULT_OUTPUT_TOOL, oslo_json())]);
    let mut agent = agent(openai(&sim));
    let out = agent
        .generate_object_with(Output::<Weather>::new().mode(OutputMode::Tool), "Oslo?")
        .await
        .unwrap();
    assert_eq!(out.object, oslo());

    let body = &sim.requests()[0];
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [DEFAULT_OUTPUT_TOOL, "lookup"]);
    assert_eq!(
        body["tools"][0]["function"]["parameters"],
        schema_for::<Weather>()
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "function": {"name": DEFAULT_OUTPUT_TOOL}})
    );
    assert!(body.get("response_format").is_none());
}

#[tokio::test]
async fn openai_native_violation_then_a_correct_answer() {
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::json(&json!({"city": "Oslo", "celsius": "cold", "wind": null})),
        SimReply::json(&oslo_json()),
    ]);
    let mut agent = agent(openai(&sim));
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!((out.object, out.attempts), (oslo(), 2));
    let second = &sim.requests()[1];
    let messages = second["messages"].as_array().unwrap();
    assert_eq!(
        messages[2]["content"],
        r#"{"celsius":"cold","city":"Oslo","wind":null}"#
    );
    assert_eq!(
        messages[3]["content"],
        format!(
            "Your answer cannot be used: it does not fit the JSON Schema: at /celsius: \"cold\" is not of type \"integer\". Answer again with only one JSON value that fits this JSON Schema (no prose, no Markdown code fence):\n{}",
            schema_text()
        )
    );
}

#[tokio::test]
async fn deepseek_auto_prompts_and_reads_a_fenced_answer() {
    let sim = OpenAiSim::deepseek().await.unwrap();
    sim.set_reply_script([SimReply::text(
        "```json\n{\"city\": \"Oslo\", \"celsius\": -3}\n```",
    )]);
    let model = OpenAiCompatible::deepseek("deepseek-chat")
        .api_key("sk-sim")
        .base_url(sim.base_url())
        .max_retries(0)
        .build()
        .unwrap();
    let mut agent = agent(model);
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!((out.object, out.mode), (oslo(), OutputMode::Prompted));
    let body = &sim.requests()[0];
    assert!(body.get("response_format").is_none());
    assert_eq!(body["tool_choice"], "none");
    assert_eq!(
        body["messages"][1]["content"],
        format!(
            "Oslo?\n\nAnswer with one JSON value that fits this JSON Schema, and nothing else (no prose, no Markdown code fence):\n{}",
            schema_text()
        )
    );
}

/// Restricts every step to the tools it names.
struct Only(&'static [&'static str]);

#[async_trait]
impl StepHook for Only {
    async fn prepare_step(&self, _: StepContext<'_>) -> StepSettings {
        StepSettings {
            active_tools: Some(self.0.iter().map(|s| s.to_string()).collect()),
            ..StepSettings::default()
        }
    }
}

fn restricted(model: impl ModelAdapter + 'static) -> HaloAgent {
    HaloAgent::builder(model)
        .tool(Lookup)
        .unwrap()
        .tool(Clock)
        .unwrap()
        .step_hook(Only(&["clock"]))
        .build()
}

#[tokio::test]
async fn openai_active_tools_go_out_as_allowed_tools_and_the_tools_stay_byte_identical() {
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([SimReply::text("hi")]);
    let mut plain = HaloAgent::builder(openai(&sim))
        .tool(Lookup)
        .unwrap()
        .tool(Clock)
        .unwrap()
        .build();
    plain.generate_text("hi").await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("clock", json!({})),
        SimReply::text("12:00"),
    ]);
    let mut agent = restricted(openai(&sim));
    agent.generate_text("time?").await.unwrap();
    let bodies = sim.requests();
    assert_eq!(
        bodies[1]["tool_choice"],
        json!({"type": "allowed_tools", "allowed_tools": {
            "mode": "auto",
            "tools": [{"type": "function", "function": {"name": "clock"}}],
        }})
    );
    assert_eq!(
        bodies[0]["tools"].to_string(),
        bodies[1]["tools"].to_string()
    );
    assert_eq!(bodies[0]["tool_choice"], "auto");

    // DeepSeek documents no allowed-tools form: the plain mode.
    let sim = OpenAiSim::deepseek().await.unwrap();
    sim.set_reply_script([SimReply::text("hi")]);
    let model = OpenAiCompatible::deepseek("deepseek-chat")
        .api_key("sk-sim")
        .base_url(sim.base_url())
        .max_retries(0)
        .build()
        .unwrap();
    restricted(model).generate_text("time?").await.unwrap();
    assert_eq!(sim.requests()[0]["tool_choice"], "auto");
}

// Anthropic.

#[tokio::test]
async fn anthropic_native_sends_a_closed_schema_in_output_config() {
    let sim = AnthropicSim::start().await.unwrap();
    sim.set_reply_script([SimReply::text(
        "Here you go: {\"city\": \"Oslo\", \"celsius\": -3} — stay warm.",
    )]);
    let mut agent = agent(anthropic(&sim, "claude-sonnet-4-5"));
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!((out.object, out.mode), (oslo(), OutputMode::Native));
    let body = &sim.requests()[0];
    assert_eq!(
        body["output_config"],
        json!({"format": {"type": "json_schema", "schema": {
            "title": "Weather",
            "description": "A city's weather.",
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city."},
                "celsius": {"type": "integer", "description": "Degrees Celsius. (format: int32)"},
                "wind": {"type": ["string", "null"], "description": "Wind, when known."},
            },
            "required": ["city", "celsius"],
            "additionalProperties": false,
        }}})
    );
    assert_eq!(body["tool_choice"], json!({"type": "none"}));
}

#[tokio::test]
async fn anthropic_tool_mode_on_an_older_model_and_a_violation_then_a_correct_call() {
    let sim = AnthropicSim::start().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call(DEFAULT_OUTPUT_TOOL, json!({"city": "Oslo"})),
        SimReply::tool_call(DEFAULT_OUTPUT_TOOL, oslo_json()),
    ]);
    let mut agent = agent(anthropic(&sim, "claude-3-5-haiku-latest"));
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!(
        (out.object, out.mode, out.attempts),
        (oslo(), OutputMode::Tool, 2)
    );
    let bodies = sim.requests();
    assert_eq!(
        bodies[0]["tool_choice"],
        json!({"type": "tool", "name": DEFAULT_OUTPUT_TOOL})
    );
    assert_eq!(bodies[0]["tools"][0]["name"], DEFAULT_OUTPUT_TOOL);
    assert_eq!(
        bodies[0]["tools"][0]["input_schema"],
        schema_for::<Weather>()
    );
    assert!(bodies[0].get("output_config").is_none());
    // The error result answers the first call, first in the next user message.
    let result = &bodies[1]["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["is_error"], true);
    assert_eq!(
        result["content"],
        format!(
            "The final result was not accepted: it does not fit the JSON Schema: \"celsius\" is a required property. Call `final_result` again with arguments that fit this JSON Schema:\n{}",
            schema_text()
        )
    );
}

#[tokio::test]
async fn anthropic_prompted_reads_prose_and_active_tools_leave_the_request_alone() {
    let sim = AnthropicSim::start().await.unwrap();
    sim.set_reply_script([SimReply::text(
        "The weather: {\"city\": \"Oslo\", \"celsius\": -3}.",
    )]);
    let mut agent = agent(anthropic(&sim, "claude-sonnet-4-5"));
    let out = agent
        .generate_object_with(Output::<Weather>::new().mode(OutputMode::Prompted), "Oslo?")
        .await
        .unwrap();
    assert_eq!(out.object, oslo());
    let body = &sim.requests()[0];
    assert!(body.get("output_config").is_none());
    assert!(
        body["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Oslo?\n\nAnswer with one JSON value that fits this JSON Schema")
    );

    // No allowed-tools mechanism: the default tool choice, the same tools.
    sim.set_reply_script([SimReply::text("12:00")]);
    restricted(anthropic(&sim, "claude-sonnet-4-5"))
        .generate_text("time?")
        .await
        .unwrap();
    let body = sim.requests().pop().unwrap();
    assert!(body.get("tool_choice").is_none());
    assert_eq!(body["tools"].as_array().unwrap().len(), 2);
}

// Gemini.

#[tokio::test]
async fn gemini_native_without_tools_sends_a_response_schema() {
    let sim = GeminiSim::start().await.unwrap();
    sim.set_reply_script([SimReply::json(&oslo_json())]);
    let mut agent = HaloAgent::builder(gemini(&sim, "gemini-2.5-flash")).build();
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!((out.object, out.mode), (oslo(), OutputMode::Native));
    let body = &sim.requests()[0];
    assert_eq!(
        body["generationConfig"],
        json!({
            "responseMimeType": "application/json",
            "responseSchema": {
                "title": "Weather",
                "description": "A city's weather.",
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city."},
                    "celsius": {"type": "integer", "description": "Degrees Celsius.", "format": "int32"},
                    "wind": {"type": "string", "nullable": true, "description": "Wind, when known."},
                },
                "required": ["city", "celsius"],
            },
        })
    );
    assert!(body.get("toolConfig").is_none(), "no tools, no tool config");
}

#[tokio::test]
async fn gemini_2_with_tools_uses_the_output_tool_and_gemini_3_goes_native() {
    let sim = GeminiSim::start().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call(
            DEFAULT_OUTPUT_TOOL,
            json!({"city": "Oslo", "celsius": "-3"}),
        ),
        SimReply::tool_call(DEFAULT_OUTPUT_TOOL, oslo_json()),
    ]);
    let mut agent = agent(gemini(&sim, "gemini-2.5-flash"));
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!(
        (out.object, out.mode, out.attempts),
        (oslo(), OutputMode::Tool, 2)
    );
    let body = &sim.requests()[0];
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [DEFAULT_OUTPUT_TOOL]}})
    );
    let declared: Vec<&str> = body["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(declared, [DEFAULT_OUTPUT_TOOL, "lookup"]);
    assert!(body.get("generationConfig").is_none());
    // The error result is a functionResponse with an `error`.
    let response = &sim.requests()[1]["contents"][2]["parts"][0]["functionResponse"];
    assert_eq!(response["name"], DEFAULT_OUTPUT_TOOL);
    assert!(
        response["response"]["error"]
            .as_str()
            .unwrap()
            .starts_with("The final result was not accepted: it does not fit the JSON Schema: at /celsius: \"-3\" is not of type \"integer\"")
    );

    // Gemini 3 combines a response schema with function declarations.
    sim.set_reply_script([SimReply::json(&oslo_json())]);
    let mut agent = self::agent(gemini(&sim, "gemini-3-pro-preview"));
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!(out.mode, OutputMode::Native);
    let body = sim.requests().pop().unwrap();
    assert_eq!(
        body["generationConfig"]["responseMimeType"],
        "application/json"
    );
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "NONE"}})
    );

    // Forced native on Gemini 2 with tools: the simulator answers as the API does.
    let mut agent = self::agent(gemini(&sim, "gemini-2.5-flash"));
    let err = agent
        .generate_object_with(Output::<Weather>::new().mode(OutputMode::Native), "Oslo?")
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "Function calling with a response mime type: 'application/json' is unsupported"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn gemini_active_tools_are_allowed_function_names_in_validated_mode() {
    let sim = GeminiSim::start().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("clock", json!({})),
        SimReply::text("12:00"),
    ]);
    let mut agent = restricted(gemini(&sim, "gemini-2.5-flash"));
    agent.generate_text("time?").await.unwrap();
    let bodies = sim.requests();
    for body in &bodies {
        assert_eq!(
            body["toolConfig"],
            json!({"functionCallingConfig": {"mode": "VALIDATED", "allowedFunctionNames": ["clock"]}})
        );
    }
    assert_eq!(
        bodies[0]["tools"].to_string(),
        bodies[1]["tools"].to_string()
    );
}

#[test]
fn auto_support_by_model_id() {
    assert!(json_outputs("claude-sonnet-4-5"));
    assert!(json_outputs("claude-opus-4-6-20260101"));
    assert!(json_outputs("claude-haiku-4-5-20251001"));
    assert!(!json_outputs("claude-sonnet-4-20250514"));
    assert!(!json_outputs("claude-3-5-haiku-latest"));
    assert!(!json_outputs("gpt-4o"));
    assert!(json_with_tools("gemini-3-pro-preview"));
    assert!(json_with_tools("models/gemini-3.1-flash"));
    assert!(!json_with_tools("gemini-2.5-flash"));
    assert!(!json_with_tools("gemma-3"));
}

/// The `tool_choice` (OpenAI, Anthropic) or `toolConfig` (Gemini) each adapter writes for
/// a choice and a set of active tools, with the `tools` of the body unchanged.
#[test]
fn tool_choice_with_active_tools_per_provider() {
    use halo_core::{GenerationOptions, Message, ModelRequest, StablePrefix, ToolChoice, ToolSpec};
    let spec = |name: &str| ToolSpec::new(name, "A tool.", json!({"type": "object"}));
    let prefix = StablePrefix::new("s")
        .with_tool(spec("a"))
        .unwrap()
        .with_tool(spec("b"))
        .unwrap();
    let history = [Message::user("hi")];
    let openai = OpenAiCompatible::openai("gpt-4o")
        .api_key("sk")
        .build()
        .unwrap();
    let deepseek = OpenAiCompatible::deepseek("deepseek-chat")
        .api_key("sk")
        .build()
        .unwrap();
    let anthropic = AnthropicAdapter::builder("claude-sonnet-4-5")
        .api_key("k")
        .build()
        .unwrap();
    let gemini = GeminiAdapter::builder()
        .api_key("k")
        .explicit_cache(false)
        .build()
        .unwrap();
    let mut tools = Vec::new();
    let mut check = |choice: ToolChoice, active: Option<&[&str]>, want: [Value; 4]| {
        let mut options = GenerationOptions::default().with_tool_choice(choice);
        options.active_tools = active.map(|a| a.iter().map(|s| s.to_string()).collect());
        let request = ModelRequest::new(&prefix, &history, &options);
        let body = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).unwrap();
        let o = body(&openai.request_body(&request).unwrap());
        let d = body(&deepseek.request_body(&request).unwrap());
        let a = body(&anthropic.request_body(&request).unwrap());
        let g = body(&gemini.request_body(&request, None).unwrap());
        tools.push((
            o["tools"].to_string(),
            a["tools"].to_string(),
            g["tools"].to_string(),
        ));
        let got = [
            o["tool_choice"].clone(),
            d["tool_choice"].clone(),
            a.get("tool_choice").cloned().unwrap_or(Value::Null),
            g.get("toolConfig").cloned().unwrap_or(Value::Null),
        ];
        assert_eq!(got, want, "{:?} with {active:?}", options.tool_choice);
    };
    let allowed = |mode: &str| json!({"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": [{"type": "function", "function": {"name": "b"}}]}});
    let gemini_config = |mode: &str, names: &[&str]| {
        let mut c = json!({"functionCallingConfig": {"mode": mode}});
        if !names.is_empty() {
            c["functionCallingConfig"]["allowedFunctionNames"] = json!(names);
        }
        c
    };
    check(
        ToolChoice::Auto,
        None,
        [json!("auto"), json!("auto"), Value::Null, Value::Null],
    );
    check(
        ToolChoice::Auto,
        Some(&["b", "not-a-tool"]),
        [
            allowed("auto"),
            json!("auto"),
            Value::Null,
            gemini_config("VALIDATED", &["b"]),
        ],
    );
    check(
        ToolChoice::Required,
        Some(&["b"]),
        [
            allowed("required"),
            json!("required"),
            json!({"type": "any"}),
            gemini_config("ANY", &["b"]),
        ],
    );
    check(
        ToolChoice::Required,
        Some(&["a", "b"]),
        [
            json!("required"),
            json!("required"),
            json!({"type": "any"}),
            gemini_config("ANY", &[]),
        ],
    );
    check(
        ToolChoice::Auto,
        Some(&[]),
        [
            json!("none"),
            json!("none"),
            json!({"type": "none"}),
            gemini_config("NONE", &[]),
        ],
    );
    check(
        ToolChoice::Tool("a".into()),
        Some(&["a"]),
        [
            json!({"type": "function", "function": {"name": "a"}}),
            json!({"type": "function", "function": {"name": "a"}}),
            json!({"type": "tool", "name": "a"}),
            gemini_config("ANY", &["a"]),
        ],
    );
    // Whatever the choice, the tools are the same bytes.
    assert!(tools.windows(2).all(|w| w[0] == w[1]), "{tools:?}");
}

/// A schema strict mode cannot express without accepting less (a map) goes out as given,
/// `strict: false`; the agent still validates the answer.
#[test]
fn openai_sends_a_map_schema_without_strict() {
    use halo_core::{GenerationOptions, Message, ModelRequest, ResponseFormat, StablePrefix};
    let model = OpenAiCompatible::openai("gpt-4o")
        .api_key("sk")
        .build()
        .unwrap();
    let schema = schema_for::<std::collections::BTreeMap<String, i32>>();
    let mut options = GenerationOptions::default();
    options.response_format = ResponseFormat::Json {
        schema: Some(schema.clone()),
    };
    let history = [Message::user("hi")];
    let prefix = StablePrefix::new("s");
    let request = ModelRequest::new(&prefix, &history, &options);
    let body: Value = serde_json::from_slice(&model.request_body(&request).unwrap()).unwrap();
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema, "strict": false}})
    );
}

/// OpenAI's refusal (`message.refusal`, `content: null`) is the answer text with a
/// content-filter finish, and an object run ends at once with it.
#[tokio::test]
async fn an_openai_refusal_ends_an_object_run_without_a_retry() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": null, "refusal": "I can't help with that."
            }}],
        })))
        .expect(1)
        .mount(&server)
        .await;
    let model = OpenAiCompatible::openai("gpt-4o")
        .api_key("sk")
        .base_url(format!("{}/v1", server.uri()))
        .max_retries(0)
        .build()
        .unwrap();
    let err = HaloAgent::builder(model)
        .build()
        .generate_object::<Weather>("Oslo?")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, halo_core::HaloError::InvalidObject { attempts: 1, raw, message }
            if raw == "I can't help with that." && message.starts_with("the model refused")),
        "{err:?}"
    );
}

/// What each mode costs on the OpenAI simulator's cache (the documented exact-prefix rule,
/// the schema of a native request ahead of the messages): a prompted object call reads the
/// whole previous request, a native one only the tools before its schema, a tool-mode one
/// only the tools before the output tool; the normal run after each reads its own earlier
/// request again, the prefix bytes unchanged.
#[tokio::test]
async fn each_mode_costs_what_its_module_docs_say_on_the_openai_cache() {
    let sim = OpenAiSim::openai().await.unwrap();
    let system: String = (1..=150)
        .map(|i| {
            format!("Rule {i}: answer with the weather of the city asked about, nothing more.\n")
        })
        .collect();
    let mut agent = HaloAgent::builder(openai(&sim))
        .system(system)
        .tool(Lookup)
        .unwrap()
        .session_id("s1")
        .build();
    let reply = || SimReply::json(&oslo_json());
    sim.set_reply_script([
        SimReply::text("hello"),
        reply(),
        SimReply::text("ok"),
        reply(),
        SimReply::text("ok"),
        SimReply::tool_call(DEFAULT_OUTPUT_TOOL, oslo_json()),
        SimReply::text("ok"),
    ]);
    agent.generate_text("hi").await.unwrap();
    for mode in [OutputMode::Prompted, OutputMode::Native, OutputMode::Tool] {
        agent
            .generate_object_with(Output::<Weather>::new().mode(mode), "Oslo?")
            .await
            .unwrap();
        agent.generate_text("thanks").await.unwrap();
    }
    let records = sim.records();
    let cached: Vec<u64> = records.iter().map(|r| r.cached_tokens).collect();
    let prompt: Vec<u64> = records.iter().map(|r| r.prompt_tokens).collect();
    let step = |n: u64| n / 128 * 128;
    // Prompted: the whole previous request is a prefix of this one.
    assert_eq!(cached[1], step(prompt[0]));
    // The normal runs after each object run read up to the previous call they extend.
    assert_eq!(cached[2], step(prompt[1]));
    // Native: the schema comes after the tools, before the system message: only the tools
    // match, which is below OpenAI's 1,024-token minimum.
    assert_eq!(cached[3], 0);
    let tools = format!("<|tools|>{}<|end|>", sim.requests()[0]["tools"]);
    let tools = halo_adapters::sim::count_tokens(&tools);
    // The tools, and the `<|` that opens the next segment.
    assert!((tools..tools + 4).contains(&records[3].seen_prefix_tokens));
    assert_eq!(
        cached[4],
        step(prompt[2]),
        "the normal prefix is read again"
    );
    // Tool mode: the output tool sorts before `lookup`, so nothing matches.
    assert_eq!(cached[5], 0);
    assert_eq!(cached[6], step(prompt[4]));
    // The prefix bytes of the normal runs never changed: their tools and system agree.
    let bodies = sim.requests();
    for i in [2, 4, 6] {
        assert_eq!(bodies[i]["tools"], bodies[0]["tools"]);
        assert_eq!(bodies[i]["messages"][0], bodies[0]["messages"][0]);
    }
    assert_eq!(
        agent.stats().prefix_fingerprint_changes,
        2,
        "tool mode only"
    );
}
