//! `generate_object` and `generate_text_with_output` over the scripted model, in each mode:
//! the request options and prefix each mode sends, answers in a fence or in prose, a
//! schema violation answered with the error and the schema, an exhausted budget, and the
//! prefix of normal runs left as it was.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use halo_core::output::{
    DEFAULT_OUTPUT_TOOL, NOT_RUN_AFTER_OUTPUT, OUTPUT_ACCEPTED, json_candidates, resolve_mode,
};
use halo_core::testing::ScriptedModel;
use halo_core::{
    AssistantMessage, FinishReason, HaloAgent, HaloError, Message, ModelCapabilities,
    ModelResponse, Output, OutputMode, ResponseFormat, Tool, ToolChoice, ToolError, ToolOutput,
    Usage,
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
}

fn oslo() -> Weather {
    Weather {
        city: "Oslo".into(),
        celsius: -3,
    }
}

/// Looks the weather up; counts its runs.
#[derive(Clone, Default)]
struct Lookup(Arc<AtomicUsize>);

#[derive(Deserialize, JsonSchema)]
struct City {
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
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(format!("{}: -3 °C", a.city).into())
    }
}

fn agent(model: &ScriptedModel) -> HaloAgent {
    HaloAgent::builder(model.clone())
        .system("You answer weather questions.")
        .tool(Lookup::default())
        .unwrap()
        .build()
}

const NATIVE: ModelCapabilities = ModelCapabilities::new()
    .with_native_output_with_tools(true)
    .with_forced_tool(true)
    .with_allowed_tools(true);

fn user_text(m: &Message) -> String {
    match m {
        Message::User { .. } => m.text(),
        _ => panic!("expected a user message, got {m:?}"),
    }
}

#[tokio::test]
async fn native_mode_sends_the_schema_as_response_format_with_tools_suppressed() {
    let model = ScriptedModel::new()
        .with_capabilities(NATIVE)
        .text(r#"{"city":"Oslo","celsius":-3}"#);
    let mut agent = agent(&model);
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!(out.object, oslo());
    assert_eq!((out.mode, out.attempts), (OutputMode::Native, 1));
    assert_eq!(out.raw, r#"{"city":"Oslo","celsius":-3}"#);

    let request = &model.requests()[0];
    let ResponseFormat::Json {
        schema: Some(schema),
    } = &request.options.response_format
    else {
        panic!("expected a JSON schema response format")
    };
    assert_eq!(schema, &halo_core::tool::schema_for::<Weather>());
    assert_eq!(request.options.tool_choice, ToolChoice::None);
    assert_eq!(request.options.active_tools, Some(vec![]));
    // The tools stay in the prefix: its bytes are the agent's.
    assert_eq!(request.tool_names, ["lookup"]);
    assert_eq!(request.fingerprint, agent.prefix().fingerprint());
    // The user's message is sent as written.
    assert_eq!(user_text(&request.history[0]), "Oslo?");
    model.assert_consumed();
}

#[tokio::test]
async fn prompted_mode_reads_json_from_a_fence_and_from_prose() {
    let model = ScriptedModel::new()
        .text("```json\n{\"city\": \"Oslo\", \"celsius\": -3}\n```")
        .text("Sure! Here it is: {\"city\": \"Bergen {west}\", \"celsius\": 4}. Anything else?");
    let mut agent = agent(&model);
    let fenced = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!(fenced.object, oslo());
    assert_eq!(
        fenced.mode,
        OutputMode::Prompted,
        "no capabilities: prompted"
    );
    let prose = agent.generate_object::<Weather>("Bergen?").await.unwrap();
    assert_eq!(
        prose.object,
        Weather {
            city: "Bergen {west}".into(),
            celsius: 4
        }
    );
    assert_eq!(prose.attempts, 1);

    let request = &model.requests()[0];
    assert_eq!(request.options.response_format, ResponseFormat::Text);
    assert_eq!(request.options.tool_choice, ToolChoice::None);
    assert_eq!(request.options.active_tools, Some(vec![]));
    let sent = user_text(&request.history[0]);
    let schema = serde_json::to_string(&halo_core::tool::schema_for::<Weather>()).unwrap();
    assert_eq!(
        sent,
        format!(
            "Oslo?\n\nAnswer with one JSON value that fits this JSON Schema, and nothing else (no prose, no Markdown code fence):\n{schema}"
        )
    );
    assert_eq!(request.fingerprint, agent.prefix().fingerprint());
    model.assert_consumed();
}

#[tokio::test]
async fn a_schema_violation_goes_back_with_the_error_and_the_schema_and_the_next_answer_is_taken() {
    let model = ScriptedModel::new()
        .text(r#"{"city":"Oslo","celsius":"cold"}"#)
        .text(r#"{"city":"Oslo","celsius":-3}"#);
    let mut agent = agent(&model);
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!(out.object, oslo());
    assert_eq!(out.attempts, 2);
    assert_eq!(out.run.steps.len(), 2, "the rejected answer is a step");

    let second = &model.requests()[1];
    assert_eq!(
        second.history.len(),
        3,
        "question, rejected answer, feedback"
    );
    assert_eq!(
        second.history[1],
        Message::assistant(r#"{"city":"Oslo","celsius":"cold"}"#)
    );
    let feedback = user_text(&second.history[2]);
    let schema = serde_json::to_string(&halo_core::tool::schema_for::<Weather>()).unwrap();
    assert_eq!(
        feedback,
        format!(
            "Your answer cannot be used: it does not fit the JSON Schema: at /celsius: \"cold\" is not of type \"integer\". Answer again with only one JSON value that fits this JSON Schema (no prose, no Markdown code fence):\n{schema}"
        )
    );
    // The log: question, rejected answer, feedback, accepted answer.
    let log = agent.log().to_vec();
    assert_eq!(log.len(), 4);
    assert!(
        agent.log().is_injected(2),
        "the feedback is marked injected"
    );
    model.assert_consumed();
}

#[tokio::test]
async fn an_exhausted_budget_is_invalid_object_with_the_last_raw_text() {
    let model = ScriptedModel::new()
        .text("It is cold.")
        .text(r#"{"city":"Oslo"}"#);
    let mut agent = agent(&model);
    let err = agent
        .generate_object_with(Output::<Weather>::new().retries(1), "Oslo?")
        .await
        .unwrap_err();
    let HaloError::InvalidObject {
        attempts,
        message,
        raw,
    } = &err
    else {
        panic!("expected InvalidObject, got {err:?}")
    };
    assert_eq!(*attempts, 2);
    assert_eq!(raw, r#"{"city":"Oslo"}"#);
    assert_eq!(
        message,
        "it does not fit the JSON Schema: \"celsius\" is a required property"
    );
    assert_eq!(
        err.to_string(),
        "the model's answer does not fit the output schema after 2 attempt(s): it does not fit the JSON Schema: \"celsius\" is a required property"
    );
    // The first answer and its feedback are logged; the last answer is not.
    let log = agent.log().to_vec();
    assert_eq!(log.len(), 3);
    assert_eq!(log[1], Message::assistant("It is cold."));
    assert!(
        user_text(&log[2])
            .starts_with("Your answer cannot be used: the answer holds no JSON value.")
    );
    model.assert_consumed();

    // Zero retries: the first answer must fit.
    let model = ScriptedModel::new().text("");
    let mut agent = HaloAgent::builder(model.clone()).build();
    let err = agent
        .generate_object_with(Output::<Weather>::new().retries(0), "Oslo?")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, HaloError::InvalidObject { attempts: 1, message, raw } if message == "the answer is empty" && raw.is_empty()),
        "{err:?}"
    );
}

#[tokio::test]
async fn tool_mode_forces_an_output_tool_in_a_prefix_of_its_own_and_normal_runs_keep_theirs() {
    let model = ScriptedModel::new()
        .text("before")
        .tool_call(DEFAULT_OUTPUT_TOOL, json!({"city": "Oslo", "celsius": -3}))
        .text("after");
    let mut agent = agent(&model);
    agent.generate_text("hello").await.unwrap();
    let out = agent
        .generate_object_with(Output::<Weather>::new().mode(OutputMode::Tool), "Oslo?")
        .await
        .unwrap();
    assert_eq!(out.object, oslo());
    assert_eq!((out.mode, out.attempts), (OutputMode::Tool, 1));
    assert_eq!(out.raw, r#"{"celsius":-3,"city":"Oslo"}"#);
    agent.generate_text("thanks").await.unwrap();

    let requests = model.requests();
    let object = &requests[1];
    assert_eq!(object.tool_names, [DEFAULT_OUTPUT_TOOL, "lookup"]);
    assert_ne!(object.fingerprint, requests[0].fingerprint);
    assert_eq!(
        object.options.tool_choice,
        ToolChoice::Tool(DEFAULT_OUTPUT_TOOL.into())
    );
    assert_eq!(
        object.options.active_tools,
        Some(vec![DEFAULT_OUTPUT_TOOL.to_string()])
    );
    // The normal runs before and after carry the same prefix bytes; the output tool never
    // entered the agent's prefix.
    assert_eq!(requests[0].prefix_bytes, requests[2].prefix_bytes);
    assert_eq!(requests[2].tool_names, ["lookup"]);
    assert_eq!(agent.prefix().tools().len(), 1);
    // One change to the object run's prefix and one back: each one expected miss.
    assert_eq!(agent.stats().prefix_fingerprint_changes, 2);
    // The output tool's call got its result, so the log stays valid for the next run.
    let Message::Tool(result) = &requests[2].history[4] else {
        panic!("expected the output tool's result")
    };
    assert_eq!(
        (result.content.as_str(), result.is_error),
        (OUTPUT_ACCEPTED, false)
    );
    model.assert_consumed();
}

#[tokio::test]
async fn tool_mode_answers_bad_arguments_with_an_error_result_and_takes_the_next_call() {
    let model = ScriptedModel::new()
        .tool_call_raw(DEFAULT_OUTPUT_TOOL, r#"{"city":"Oslo","celsius":-3.5}"#)
        .tool_call(DEFAULT_OUTPUT_TOOL, json!({"city": "Oslo", "celsius": -3}));
    let mut agent = agent(&model);
    let out = agent
        .generate_object_with(Output::<Weather>::new().mode(OutputMode::Tool), "Oslo?")
        .await
        .unwrap();
    assert_eq!(out.object, oslo());
    assert_eq!(out.attempts, 2);
    let second = &model.requests()[1];
    let Message::Tool(result) = &second.history[2] else {
        panic!("expected the error result")
    };
    assert!(result.is_error);
    let schema = serde_json::to_string(&halo_core::tool::schema_for::<Weather>()).unwrap();
    assert_eq!(
        result.content,
        format!(
            "The final result was not accepted: it does not fit the JSON Schema: at /celsius: -3.5 is not of type \"integer\". Call `final_result` again with arguments that fit this JSON Schema:\n{schema}"
        )
    );
    model.assert_consumed();

    // And with the budget spent, the raw argument string is in the error.
    let model = ScriptedModel::new().tool_call_raw(DEFAULT_OUTPUT_TOOL, r#"{"city":"Oslo"}"#);
    let mut agent = self::agent(&model);
    let err = agent
        .generate_object_with(
            Output::<Weather>::new().mode(OutputMode::Tool).retries(0),
            "Oslo?",
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, HaloError::InvalidObject { attempts: 1, raw, .. } if raw == r#"{"city":"Oslo"}"#),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_output_tool_name_must_not_be_taken() {
    let model = ScriptedModel::new();
    let mut agent = agent(&model);
    let err = agent
        .generate_object_with(
            Output::<Weather>::new()
                .mode(OutputMode::Tool)
                .tool_name("lookup"),
            "Oslo?",
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool `lookup` is already in the prefix; tool names must be unique"
    );
    assert!(model.requests().is_empty());
}

#[test]
fn auto_picks_native_then_tool_then_prompted() {
    let none = ModelCapabilities::default();
    let gemini_2 = none.with_native_output(true).with_forced_tool(true);
    let deepseek = none;
    for (caps, tools, mode) in [
        (NATIVE, true, OutputMode::Native),
        (gemini_2, false, OutputMode::Native),
        (gemini_2, true, OutputMode::Tool),
        (none.with_forced_tool(true), false, OutputMode::Tool),
        (deepseek, true, OutputMode::Prompted),
    ] {
        assert_eq!(resolve_mode(OutputMode::Auto, caps, tools), mode);
    }
    assert_eq!(
        resolve_mode(OutputMode::Prompted, NATIVE, true),
        OutputMode::Prompted,
        "an explicit mode is kept"
    );
}

#[tokio::test]
async fn generate_text_with_output_runs_tools_then_ends_with_the_output_tool() {
    let model = ScriptedModel::new()
        .with_capabilities(ModelCapabilities::default().with_forced_tool(true))
        .tool_calls_raw(&[("lookup", r#"{"city":"Oslo"}"#)])
        .tool_calls_raw(&[
            (DEFAULT_OUTPUT_TOOL, r#"{"city":"Oslo","celsius":-3}"#),
            ("lookup", r#"{"city":"Bergen"}"#),
        ]);
    let lookup = Lookup::default();
    let mut agent = HaloAgent::builder(model.clone())
        .tool(lookup.clone())
        .unwrap()
        .build();
    let out = agent
        .generate_text_with_output(Output::<Weather>::new(), "Oslo?")
        .await
        .unwrap();
    assert_eq!(out.object, oslo());
    assert_eq!((out.mode, out.attempts), (OutputMode::Tool, 1));
    assert_eq!(
        lookup.0.load(Ordering::SeqCst),
        1,
        "the call in the output tool's turn did not run"
    );
    let requests = model.requests();
    assert_eq!(requests[0].options.tool_choice, ToolChoice::Required);
    assert_eq!(
        requests[0].options.active_tools, None,
        "every tool is available"
    );
    assert_eq!(out.run.steps[0].tool_results[0].content, "Oslo: -3 °C");
    let last = &out.run.steps[1].tool_results;
    assert_eq!(
        last.iter()
            .map(|r| (r.content.as_str(), r.is_error))
            .collect::<Vec<_>>(),
        [(OUTPUT_ACCEPTED, false), (NOT_RUN_AFTER_OUTPUT, true)]
    );
    model.assert_consumed();
}

#[tokio::test]
async fn generate_text_with_output_in_native_mode_keeps_tools_available() {
    let model = ScriptedModel::new()
        .with_capabilities(NATIVE)
        .tool_calls_raw(&[("lookup", r#"{"city":"Oslo"}"#)])
        .text(r#"{"city":"Oslo","celsius":-3}"#);
    let mut agent = agent(&model);
    let out = agent
        .generate_text_with_output(Output::<Weather>::new(), "Oslo?")
        .await
        .unwrap();
    assert_eq!(out.object, oslo());
    let requests = model.requests();
    for r in &requests {
        assert_eq!(r.options.tool_choice, ToolChoice::Auto);
        assert_eq!(r.options.active_tools, None);
        assert!(matches!(
            r.options.response_format,
            ResponseFormat::Json { schema: Some(_) }
        ));
        assert_eq!(r.fingerprint, agent.prefix().fingerprint());
    }
    model.assert_consumed();
}

#[tokio::test]
async fn a_tool_call_during_generate_object_gets_an_error_result_and_the_answer_follows() {
    let model = ScriptedModel::new()
        .tool_call("lookup", json!({"city": "Oslo"}))
        .text(r#"{"city":"Oslo","celsius":-3}"#);
    let lookup = Lookup::default();
    let mut agent = HaloAgent::builder(model.clone())
        .tool(lookup.clone())
        .unwrap()
        .build();
    let out = agent.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!(out.object, oslo());
    assert_eq!(lookup.0.load(Ordering::SeqCst), 0, "the tool did not run");
    let result = &out.run.steps[0].tool_results[0];
    assert!(result.is_error);
    assert_eq!(
        result.content,
        "`lookup` is not available in this step: no tool is; answer without calling tools"
    );
    model.assert_consumed();
}

#[tokio::test]
async fn a_value_that_is_not_an_object_is_wrapped_where_the_provider_wants_an_object() {
    let model = ScriptedModel::new()
        .tool_call(DEFAULT_OUTPUT_TOOL, json!({"result": ["Oslo", "Bergen"]}))
        .text("[\"Tromsø\"]");
    let mut agent = agent(&model);
    let out = agent
        .generate_object_with(
            Output::<Vec<String>>::new().mode(OutputMode::Tool),
            "cities?",
        )
        .await
        .unwrap();
    assert_eq!(out.object, ["Oslo", "Bergen"]);
    let requests = model.requests();
    let Some(spec) = requests[0]
        .prefix_bytes
        .windows(8)
        .position(|w| w == b"\"result\"")
    else {
        panic!("the output tool's schema wraps the array under `result`")
    };
    assert!(spec > 0);
    let prompted = agent.generate_object::<Vec<String>>("more?").await.unwrap();
    assert_eq!(prompted.object, ["Tromsø"]);
}

#[tokio::test]
async fn a_refusal_is_not_retried() {
    let model = ScriptedModel::new().respond(ModelResponse {
        id: None,
        message: AssistantMessage {
            text: "I can't help with that.".into(),
            ..Default::default()
        },
        finish_reason: FinishReason::ContentFilter,
        usage: Usage::default(),
        model: None,
        provider: None,
    });
    let mut agent = agent(&model);
    let err = agent.generate_object::<Weather>("Oslo?").await.unwrap_err();
    assert!(
        matches!(&err, HaloError::InvalidObject { attempts: 1, raw, message } if raw == "I can't help with that." && message.starts_with("the model refused")),
        "{err:?}"
    );
    model.assert_consumed();
}

#[test]
fn json_is_found_whole_in_fences_and_in_prose() {
    let v = json!({"a": 1});
    assert_eq!(json_candidates(" {\"a\": 1} \n"), [json!({"a": 1})]);
    assert_eq!(
        json_candidates("```json\n{\"a\": 1}\n```"),
        [json!({"a": 1})]
    );
    assert_eq!(
        json_candidates("Here:\n~~~\n{\"a\": 1}\n~~~\nDone."),
        [json!({"a": 1})]
    );
    assert_eq!(
        json_candidates("I think {\"a\": 1} or maybe [2]."),
        [v, json!([2])]
    );
    assert_eq!(
        json_candidates("x {\"s\": \"} {\"} y"),
        [json!({"s": "} {"})],
        "braces inside strings are strings"
    );
    assert_eq!(json_candidates("no json {here"), Vec::<Value>::new());
}
