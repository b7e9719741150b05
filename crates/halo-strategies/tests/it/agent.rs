//! The strategies inside a `HaloAgent` on halo-core's scripted model: a malformed call
//! repaired and run, an unrepairable one answered with the schema, the retry budget, and a
//! looping model nudged, then stopped.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use halo_core::testing::ScriptedModel;
use halo_core::{
    AgentEvent, DynTool, HaloAgent, HaloError, LoopKind, Message, ToolContext, ToolError,
    ToolOutput, ToolSpec, async_trait,
};
use halo_strategies::{BasicRepair, LoopSuppression};
use serde_json::{Value, json};

/// `read {path}`, counting its runs.
#[derive(Default, Clone)]
struct Read(Arc<AtomicUsize>);

#[async_trait]
impl DynTool for Read {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "read",
            "Reads a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        )
    }
    async fn call_json(&self, args: Value, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(format!("contents of {}", args["path"].as_str().unwrap_or("?")).into())
    }
}

const SCHEMA: &str =
    r#"{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}"#;

fn agent(model: &ScriptedModel, read: &Read) -> HaloAgent {
    HaloAgent::builder(model.clone())
        .tool(read.clone())
        .unwrap()
        .repair(BasicRepair::new())
        .loop_guard(LoopSuppression::default())
        .build()
}

#[test]
fn a_malformed_call_is_repaired_run_and_logged_repaired() {
    futures::executor::block_on(async {
        let model = ScriptedModel::new()
            .tool_call_raw("Read", "Sure:\n```json\n{'path': 'a.txt',}\n```")
            .text("done");
        let read = Read::default();
        let mut agent = agent(&model, &read);
        let out = agent.generate_text("read a.txt").await.unwrap();
        let call = &out.steps[0].message.tool_calls[0];
        assert_eq!(
            (call.name.as_str(), call.raw_arguments.as_str()),
            ("read", r#"{"path":"a.txt"}"#)
        );
        let result = &out.steps[0].tool_results[0];
        assert_eq!(
            (result.content.as_str(), result.is_error),
            ("contents of a.txt", false)
        );
        assert_eq!(read.0.load(Ordering::SeqCst), 1);
        assert_eq!(out.stats.tool_call_repairs, 2);
        // The next request carries the repaired call: that is what the log holds.
        let history = &model.requests()[1].history;
        assert_eq!(history[1].tool_calls()[0], *call);
        model.assert_consumed();
    });
}

#[test]
fn repair_is_byte_stable_across_agents() {
    futures::executor::block_on(async {
        let mut requests = Vec::new();
        for _ in 0..2 {
            let model = ScriptedModel::new()
                .tool_call_raw("READ", "{path: 'a.txt', extra: None}")
                .text("done");
            agent(&model, &Read::default())
                .generate_text("go")
                .await
                .unwrap();
            requests.push(serde_json::to_string(&model.requests()[1].history).unwrap());
        }
        assert_eq!(requests[0], requests[1]);
        assert!(
            requests[0].contains(r#"{\"extra\":null,\"path\":\"a.txt\"}"#),
            "{}",
            requests[0]
        );
    });
}

#[test]
fn an_unrepairable_call_gets_an_error_result_quoting_the_schema() {
    futures::executor::block_on(async {
        let model = ScriptedModel::new()
            .tool_call_raw("read", "I will read the file a.txt")
            .tool_call_raw("delete", "{}")
            .text("sorry");
        let read = Read::default();
        let mut agent = agent(&model, &read);
        let out = agent.generate_text("read a.txt").await.unwrap();
        let bad = &out.steps[0].tool_results[0];
        assert!(bad.is_error);
        assert!(
            bad.content
                .starts_with("the arguments of `read` are not valid JSON ("),
            "{}",
            bad.content
        );
        assert!(
            bad.content.ends_with(&format!(
                "call it again with a JSON object that fits its schema: {SCHEMA}"
            )),
            "{}",
            bad.content
        );
        // Left as the model sent it, not turned into `{}`.
        assert_eq!(
            out.steps[0].message.tool_calls[0].raw_arguments,
            "I will read the file a.txt"
        );
        let unknown = &out.steps[1].tool_results[0];
        assert_eq!(
            unknown.content,
            "unknown tool `delete`; the available tools are: read"
        );
        assert_eq!(read.0.load(Ordering::SeqCst), 0);
        assert_eq!(out.stats.tool_call_repairs, 0);
    });
}

#[test]
fn without_a_strategy_calls_reach_dispatch_as_sent() {
    futures::executor::block_on(async {
        let model = ScriptedModel::new()
            .tool_call_raw("Read", r#"{"path":"a"}"#)
            .text("ok");
        let mut agent = HaloAgent::builder(model.clone())
            .tool(Read::default())
            .unwrap()
            .build();
        let out = agent.generate_text("go").await.unwrap();
        assert_eq!(out.steps[0].message.tool_calls[0].name, "Read");
        assert!(
            out.steps[0].tool_results[0]
                .content
                .starts_with("unknown tool `Read`")
        );
    });
}

#[test]
fn calls_that_keep_failing_validation_are_refused_then_the_run_ends() {
    futures::executor::block_on(async {
        let mut model = ScriptedModel::new();
        for i in 0..5 {
            model = model.tool_call("read", json!({ "file": format!("a{i}.txt") }));
        }
        let read = Read::default();
        let mut agent = agent(&model, &read);
        let err = agent.generate_text("read a.txt").await.unwrap_err();
        let HaloError::RetryBudgetExhausted {
            tool,
            attempts,
            message,
            partial,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!((tool.as_str(), *attempts), ("read", 5));
        assert!(
            message.contains("\"path\" is a required property"),
            "{message}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "the run was stopped: `read` was called with invalid arguments 5 times in a row ({message})"
            )
        );
        let results: Vec<&str> = partial
            .steps
            .iter()
            .map(|s| s.tool_results[0].content.as_str())
            .collect();
        assert_eq!(results.len(), 4);
        assert!(
            results[..2]
                .iter()
                .all(|r| r.contains("do not match its schema")),
            "{results:?}"
        );
        for (r, n) in results[2..].iter().zip([3, 4]) {
            assert!(
                r.starts_with(&format!(
                    "`read` was not run: it was called with invalid arguments {n} times in a row"
                )),
                "{r}"
            );
            assert!(
                r.contains(&format!(
                    "Stop calling `read` like this: write arguments that fit its schema, {SCHEMA}"
                )),
                "{r}"
            );
        }
        // The fifth step is not logged: the log holds the input and four complete steps.
        assert_eq!(agent.log().len(), 1 + 4 * 2);
        assert_eq!(read.0.load(Ordering::SeqCst), 0);
        model.assert_consumed();
    });
}

#[test]
fn a_looping_model_is_nudged_then_stopped_with_a_typed_outcome() {
    futures::executor::block_on(async {
        let mut model = ScriptedModel::new();
        for _ in 0..4 {
            model = model.tool_call("read", json!({"path": "a.txt"}));
        }
        let read = Read::default();
        let mut agent = agent(&model, &read);
        let err = agent.generate_text("what is in a.txt?").await.unwrap_err();
        let HaloError::LoopDetected {
            kind,
            message,
            partial,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(*kind, LoopKind::RepeatedCall);
        assert_eq!(
            message,
            "`read` was called with the same arguments 4 times in a row, after 1 nudge"
        );
        assert_eq!(
            err.to_string(),
            format!("the run was stopped in a loop (repeated call): {message}")
        );
        assert_eq!(partial.steps.len(), 4);
        // The nudge entered before the fourth call, marked injected.
        let requests = model.requests();
        let history = &requests[3].history;
        let nudge = history.last().unwrap();
        assert!(matches!(nudge, Message::User { .. }));
        assert!(
            nudge
                .text()
                .starts_with("You have called `read` with the same arguments 3 times in a row."),
            "{}",
            nudge.text()
        );
        assert!(agent.log().is_injected(history.len() - 1));
        assert!(
            !requests[2]
                .history
                .iter()
                .any(|m| matches!(m, Message::User { .. }) && m.text().starts_with("You have"))
        );
        assert_eq!(read.0.load(Ordering::SeqCst), 4);
        model.assert_consumed();
    });
}

#[test]
fn a_nudge_that_works_lets_the_run_finish_and_streams_as_injected() {
    futures::executor::block_on(async {
        let mut model = ScriptedModel::new();
        for _ in 0..3 {
            model = model.tool_call("read", json!({"path": "a.txt"}));
        }
        let model = model
            .tool_call("read", json!({"path": "b.txt"}))
            .text("a and b");
        let mut agent = agent(&model, &Read::default());
        let mut injected = Vec::new();
        let mut finish = None;
        let mut events = std::pin::pin!(agent.stream_text("go"));
        while let Some(event) = events.next().await {
            match event.unwrap() {
                AgentEvent::Injected(text) => injected.push(text),
                AgentEvent::Finish(result) => finish = Some(result),
                _ => {}
            }
        }
        assert_eq!(injected.len(), 1);
        assert!(injected[0].starts_with("You have called `read`"));
        assert_eq!(finish.unwrap().text, "a and b");
        model.assert_consumed();
    });
}
