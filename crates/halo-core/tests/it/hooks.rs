//! The tool hook pipeline through the agent loop: before-hook order, rewrite, deny, abort,
//! after-hooks on every result, streaming, and the prefix left alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use halo_core::testing::ScriptedModel;
use halo_core::{
    AgentEvent, HaloAgent, HaloError, Message, Tool, ToolCall, ToolCallDecision, ToolContext,
    ToolError, ToolHook, ToolOutput, ToolResult, async_trait,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Returns `got:TEXT` and counts its calls.
#[derive(Clone, Default)]
struct Echo(Arc<AtomicUsize>);

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to echo.
    text: String,
}

impl Tool for Echo {
    type Args = EchoArgs;
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Echoes text."
    }
    async fn call(&self, a: EchoArgs) -> Result<ToolOutput, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!("got:{}", a.text)))
    }
}

impl Echo {
    fn runs(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// What the hooks did, in order, shared by all hooks of a test.
type Journal = Arc<Mutex<Vec<String>>>;

type Decide = Box<dyn Fn(&ToolCall, &Value) -> ToolCallDecision + Send + Sync>;

/// A hook that writes `NAME before TOOL ARGS` / `NAME after TOOL` to the journal, decides
/// with `decide`, and appends ` [NAME]` to every result.
struct Recorder {
    name: &'static str,
    journal: Journal,
    decide: Decide,
}

impl Recorder {
    fn new(
        name: &'static str,
        journal: &Journal,
        decide: impl Fn(&ToolCall, &Value) -> ToolCallDecision + Send + Sync + 'static,
    ) -> Self {
        Recorder {
            name,
            journal: journal.clone(),
            decide: Box::new(decide),
        }
    }

    fn allow(name: &'static str, journal: &Journal) -> Self {
        Self::new(name, journal, |_, _| ToolCallDecision::Allow)
    }
}

#[async_trait]
impl ToolHook for Recorder {
    async fn before_tool_call(&self, cx: &ToolContext, arguments: &Value) -> ToolCallDecision {
        let call = cx.call();
        self.journal
            .lock()
            .unwrap()
            .push(format!("{} before {} {arguments}", self.name, call.name));
        (self.decide)(call, arguments)
    }

    async fn after_tool_call(&self, cx: &ToolContext, mut result: ToolResult) -> ToolResult {
        let call = cx.call();
        self.journal
            .lock()
            .unwrap()
            .push(format!("{} after {}", self.name, call.name));
        result.content = format!("{} [{}]", result.content, self.name).into();
        result
    }
}

fn journal() -> Journal {
    Arc::default()
}

fn entries(journal: &Journal) -> Vec<String> {
    journal.lock().unwrap().clone()
}

fn builder(model: &ScriptedModel, echo: &Echo) -> halo_core::HaloAgentBuilder {
    HaloAgent::builder(model.clone())
        .system("You are a test agent.")
        .tool(echo.clone())
        .unwrap()
}

/// The last message of a history, as a tool result.
fn last_result(history: &[Message]) -> &ToolResult {
    match history.last() {
        Some(Message::Tool(r)) => r,
        other => panic!("expected a tool result last, got {other:?}"),
    }
}

#[tokio::test]
async fn before_hooks_run_in_order_and_the_first_deny_wins() {
    let model = ScriptedModel::new()
        .tool_call("echo", json!({"text": "hi"}))
        .text("ok");
    let echo = Echo::default();
    let j = journal();
    let mut agent = builder(&model, &echo)
        .hook(Recorder::allow("A", &j))
        .hook(Recorder::new("B", &j, |_, _| {
            ToolCallDecision::Deny("B says no".into())
        }))
        .hook(Recorder::new("C", &j, |_, _| {
            ToolCallDecision::Deny("C says no".into())
        }))
        .build();

    let out = agent.generate_text("go").await.unwrap();
    model.assert_consumed();

    assert_eq!(echo.runs(), 0, "a denied tool must not run");
    assert_eq!(
        entries(&j),
        [
            r#"A before echo {"text":"hi"}"#,
            r#"B before echo {"text":"hi"}"#,
            "A after echo",
            "B after echo",
            "C after echo",
        ]
    );
    let result = &out.steps[0].tool_results[0];
    assert_eq!(result.content, "B says no [A] [B] [C]");
    assert!(result.is_error);
}

#[tokio::test]
async fn a_denial_is_an_error_result_the_model_reads_in_the_next_request() {
    let model = ScriptedModel::new()
        .tool_call("echo", json!({"text": "secret"}))
        .text("understood");
    let echo = Echo::default();
    let mut agent = builder(&model, &echo)
        .hook(Recorder::new("guard", &journal(), |call, args| {
            if args["text"] == "secret" {
                ToolCallDecision::Deny(format!("`{}` may not echo secrets", call.name))
            } else {
                ToolCallDecision::Allow
            }
        }))
        .build();

    agent.generate_text("echo the secret").await.unwrap();
    model.assert_consumed();

    assert_eq!(echo.runs(), 0);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let seen = last_result(&requests[1].history);
    assert_eq!(seen.content, "`echo` may not echo secrets [guard]");
    assert!(seen.is_error);
    assert_eq!(seen.tool_name, "echo");
    assert_eq!(seen.tool_call_id, requests[1].history[1].tool_calls()[0].id);
}

#[tokio::test]
async fn a_rewrite_changes_what_the_tool_gets_but_the_logged_call_keeps_the_raw_bytes() {
    // Odd spacing and key order: the replayed call must keep these exact bytes.
    let raw = r#"{ "text" :  "hello"  }"#;
    let model = ScriptedModel::new().tool_call_raw("echo", raw).text("done");
    let echo = Echo::default();
    let j = journal();
    let mut agent = builder(&model, &echo)
        .hook(Recorder::new("upper", &j, |_, args| {
            let text = args["text"].as_str().unwrap_or_default().to_uppercase();
            ToolCallDecision::Rewrite(json!({ "text": text }))
        }))
        .hook(Recorder::allow("next", &j))
        .build();

    let out = agent.generate_text("say hello").await.unwrap();
    model.assert_consumed();

    assert_eq!(echo.runs(), 1);
    // The next hook sees the rewritten arguments, and so does the tool.
    assert_eq!(
        entries(&j)[..2],
        [
            r#"upper before echo {"text":"hello"}"#,
            r#"next before echo {"text":"HELLO"}"#
        ]
    );
    assert_eq!(
        out.steps[0].tool_results[0].content,
        "got:HELLO [upper] [next]"
    );
    // The step, the log and the next request all keep the model's own argument bytes.
    assert_eq!(out.steps[0].message.tool_calls[0].raw_arguments, raw);
    let logged: Vec<&ToolCall> = agent
        .log()
        .messages()
        .flat_map(|m| m.tool_calls())
        .collect();
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0].raw_arguments, raw);
    let replayed = model.requests()[1].history[1].tool_calls()[0].clone();
    assert_eq!(replayed.raw_arguments, raw);
    assert_eq!(replayed.replay_arguments(), raw);
}

#[tokio::test]
async fn a_rewrite_that_breaks_the_schema_becomes_an_error_result_and_the_tool_does_not_run() {
    let model = ScriptedModel::new()
        .tool_call("echo", json!({"text": "hi"}))
        .text("done");
    let echo = Echo::default();
    let j = journal();
    let mut agent = builder(&model, &echo)
        .hook(Recorder::new("broken", &j, |_, _| {
            ToolCallDecision::Rewrite(json!({"text": 5}))
        }))
        .hook(Recorder::allow("later", &j))
        .build();

    let out = agent.generate_text("go").await.unwrap();
    model.assert_consumed();

    assert_eq!(echo.runs(), 0);
    // The pipeline stops at the bad rewrite: the later hook is not asked.
    assert_eq!(
        entries(&j),
        [
            r#"broken before echo {"text":"hi"}"#,
            "broken after echo",
            "later after echo"
        ]
    );
    let result = &out.steps[0].tool_results[0];
    assert!(result.is_error);
    assert!(
        result
            .content
            .starts_with("`echo` was not run: a tool hook of this session changed its arguments into ones that do not fit its schema (at /text: "),
        "{}",
        result.content
    );
    assert!(
        result.content.contains("your own arguments were valid"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn abort_ends_the_run_with_aborted_and_the_step_is_not_logged() {
    let model = ScriptedModel::new()
        .tool_call("echo", json!({"text": "first"}))
        .tool_calls_raw(&[
            ("echo", r#"{"text":"fine"}"#),
            ("echo", r#"{"text":"stop here"}"#),
        ])
        .text("never read");
    let echo = Echo::default();
    let j = journal();
    let mut agent = builder(&model, &echo)
        .hook(Recorder::new("gate", &j, |_, args| {
            if args["text"] == "stop here" {
                ToolCallDecision::Abort("the user quit".into())
            } else {
                ToolCallDecision::Allow
            }
        }))
        .build();

    let err = agent.generate_text("go").await.unwrap_err();

    match &err {
        HaloError::Aborted { tool, reason } => {
            assert_eq!(tool, "echo");
            assert_eq!(reason, "the user quit");
        }
        other => panic!("expected Aborted, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "the run was aborted at tool `echo`: the user quit"
    );
    // The model was asked twice; the final answer was never requested.
    assert_eq!(model.requests().len(), 2);
    assert_eq!(model.remaining(), 1);
    // "first" and "fine" ran; "stop here" did not, and got no after-hook.
    assert_eq!(echo.runs(), 2);
    assert_eq!(
        entries(&j),
        [
            r#"gate before echo {"text":"first"}"#,
            "gate after echo",
            r#"gate before echo {"text":"fine"}"#,
            "gate after echo",
            r#"gate before echo {"text":"stop here"}"#,
        ]
    );
    // The log holds the input and the complete first step, nothing of the second.
    let log = agent.log().to_vec();
    assert_eq!(log.len(), 3, "{log:?}");
    assert_eq!(log[0], Message::user("go"));
    assert_eq!(log[1].tool_calls()[0].raw_arguments, r#"{"text":"first"}"#);
    assert_eq!(last_result(&log).content, "got:first [gate]");
}

#[tokio::test]
async fn after_hooks_run_in_order_on_every_result_including_errors_and_denials() {
    let model = ScriptedModel::new()
        .tool_calls_raw(&[
            ("echo", r#"{"text":"ok"}"#),
            ("nope", r#"{}"#),
            ("echo", "not json"),
            ("echo", r#"{"wrong":1}"#),
            ("echo", r#"{"text":"deny me"}"#),
        ])
        .text("done");
    let echo = Echo::default();
    let j = journal();
    let mut agent = builder(&model, &echo)
        .hook(Recorder::new("A", &j, |_, args| {
            if args["text"] == "deny me" {
                ToolCallDecision::Deny("denied by A".into())
            } else {
                ToolCallDecision::Allow
            }
        }))
        .hook(Recorder::allow("B", &j))
        .build();

    let out = agent.generate_text("go").await.unwrap();
    model.assert_consumed();

    let results = &out.steps[0].tool_results;
    assert_eq!(results.len(), 5);
    for r in results {
        assert!(r.content.ends_with(" [A] [B]"), "{}", r.content);
    }
    assert_eq!(results[0].content, "got:ok [A] [B]");
    assert!(!results[0].is_error);
    assert!(results[1].content.starts_with("unknown tool `nope`"));
    assert!(results[2].content.contains("are not valid JSON"));
    assert!(results[3].content.contains("do not match its schema"));
    assert_eq!(results[4].content, "denied by A [A] [B]");
    assert!(results[1..].iter().all(|r| r.is_error));
    assert_eq!(echo.runs(), 1);
    // Before-hooks are asked only for calls whose arguments parsed and fit the schema.
    let before: Vec<String> = entries(&j)
        .into_iter()
        .filter(|e| e.contains(" before "))
        .collect();
    assert_eq!(
        before,
        [
            r#"A before echo {"text":"ok"}"#,
            r#"B before echo {"text":"ok"}"#,
            r#"A before echo {"text":"deny me"}"#,
        ]
    );
    let after = entries(&j)
        .into_iter()
        .filter(|e| e.contains(" after "))
        .count();
    assert_eq!(after, 10);
}

/// A compact name for an event, for comparing sequences.
fn event_name(event: &Result<AgentEvent, HaloError>) -> String {
    match event {
        Ok(AgentEvent::StepStart { step }) => format!("start {step}"),
        Ok(AgentEvent::TextDelta(t)) => format!("text {t}"),
        Ok(AgentEvent::ReasoningDelta(t)) => format!("reasoning {t}"),
        Ok(AgentEvent::ToolCallStart { name, .. }) => format!("call-start {name}"),
        Ok(AgentEvent::ToolCallDelta { arguments, .. }) => format!("call-delta {arguments}"),
        Ok(AgentEvent::ToolCall(c)) => format!("call {} {}", c.name, c.raw_arguments),
        Ok(AgentEvent::ToolResult(r)) => format!("result {} {}", r.is_error, r.content),
        Ok(AgentEvent::StepFinish(s)) => format!("step-finish {}", s.tool_results.len()),
        Ok(AgentEvent::Finish(out)) => format!("finish {}", out.text),
        Ok(other) => format!("other {other:?}"),
        Err(e) => format!("error {e}"),
    }
}

#[tokio::test]
async fn hooks_apply_in_stream_text_and_the_events_show_the_hooked_results() {
    let model = ScriptedModel::new()
        .tool_calls_raw(&[("echo", r#"{"text":"a"}"#), ("echo", r#"{"text":"b"}"#)])
        .tool_call("echo", json!({"text": "quit"}))
        .text("never read");
    let echo = Echo::default();
    let j = journal();
    let mut agent = builder(&model, &echo)
        .hook(Recorder::new("policy", &j, |_, args| {
            match args["text"].as_str() {
                Some("a") => ToolCallDecision::Rewrite(json!({"text": "A!"})),
                Some("b") => ToolCallDecision::Deny("b is not allowed".into()),
                Some("quit") => ToolCallDecision::Abort("stop now".into()),
                _ => ToolCallDecision::Allow,
            }
        }))
        .build();

    let events: Vec<_> = agent.stream_text("go").collect().await;
    let names: Vec<String> = events.iter().map(event_name).collect();

    assert_eq!(
        names,
        [
            "start 1",
            "call-start echo",
            r#"call-delta {"text":"a"}"#,
            "call-start echo",
            r#"call-delta {"text":"b"}"#,
            r#"call echo {"text":"a"}"#,
            r#"call echo {"text":"b"}"#,
            "result false got:A! [policy]",
            "result true b is not allowed [policy]",
            "step-finish 2",
            "start 2",
            "call-start echo",
            r#"call-delta {"text":"quit"}"#,
            r#"call echo {"text":"quit"}"#,
            "error the run was aborted at tool `echo`: stop now",
        ]
    );
    assert!(matches!(
        events.last(),
        Some(Err(HaloError::Aborted { .. }))
    ));
    assert_eq!(echo.runs(), 1);
    // The log holds the input and the first step; the aborted step is not in it.
    assert_eq!(agent.log().len(), 4);
}

#[tokio::test]
async fn hooks_do_not_change_the_prefix_fingerprint() {
    let model = ScriptedModel::new()
        .tool_call("echo", json!({"text": "one"}))
        .text("first done")
        .tool_call("echo", json!({"text": "two"}))
        .text("second done");
    let echo = Echo::default();
    let plain = builder(&model, &echo).build();
    let j = journal();
    let mut hooked = builder(&model, &echo)
        .hook(Recorder::allow("A", &j))
        .build();
    assert_eq!(
        plain.prefix().canonical_bytes(),
        hooked.prefix().canonical_bytes()
    );
    let fingerprint = plain.prefix().fingerprint();

    hooked.generate_text("first").await.unwrap();
    hooked.clear_hooks();
    hooked.add_hook(Recorder::new("deny", &j, |_, _| {
        ToolCallDecision::Deny("no".into())
    }));
    let second = hooked.generate_text("second").await.unwrap();
    model.assert_consumed();

    assert_eq!(second.steps[0].tool_results[0].content, "no [deny]");
    assert_eq!(hooked.prefix().fingerprint(), fingerprint);
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(|r| r.fingerprint == fingerprint));
    assert_eq!(hooked.stats().prefix_fingerprint_changes, 0);
}
