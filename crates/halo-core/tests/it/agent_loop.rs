//! The tool loop against the scripted model: prefix stability, log integrity, bad input.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use halo_core::testing::ScriptedModel;
use halo_core::{
    FinishReason, HaloAgent, HaloError, Message, ModelError, ModelResponse, NoArgs, Tool,
    ToolError, ToolOutput, Usage,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// Counts calls and returns `count=N`.
#[derive(Default, Clone)]
struct Counter(Arc<AtomicUsize>);

impl Tool for Counter {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "count"
    }
    fn description(&self) -> &str {
        "Increments a counter and returns its value."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(ToolOutput::text(format!("count={n}")))
    }
}

struct Lookup;
#[derive(Deserialize, JsonSchema)]
struct LookupArgs {
    /// The key to look up.
    key: String,
}
impl Tool for Lookup {
    type Args = LookupArgs;
    fn name(&self) -> &str {
        "lookup"
    }
    fn description(&self) -> &str {
        "Looks a key up."
    }
    async fn call(&self, a: LookupArgs) -> Result<ToolOutput, ToolError> {
        match a.key.as_str() {
            "fatal" => Err(ToolError::Fatal("the sandbox is gone".into())),
            "missing" => Err(ToolError::Failed("no such key `missing`".into())),
            k => Ok(ToolOutput::text(format!("value of {k}"))),
        }
    }
}

fn agent(model: &ScriptedModel) -> HaloAgent {
    HaloAgent::builder(model.clone())
        .system("You are a test agent.")
        .few_shot([
            Message::user("example"),
            Message::assistant("example answer"),
        ])
        .tool(Counter::default())
        .unwrap()
        .tool(Lookup)
        .unwrap()
        .max_steps(25)
        .build()
}

/// Every tool call in every request has exactly one result, and every result a call.
fn assert_paired(history: &[Message]) {
    for (i, m) in history.iter().enumerate() {
        for c in m.tool_calls() {
            let n = history
                .iter()
                .filter(|r| matches!(r, Message::Tool(t) if t.tool_call_id == c.id))
                .count();
            assert_eq!(n, 1, "tool call {} has {n} results", c.id);
        }
        if let Message::Tool(r) = m {
            assert!(
                history[..i]
                    .iter()
                    .any(|p| p.tool_calls().iter().any(|c| c.id == r.tool_call_id)),
                "orphan tool result {}",
                r.tool_call_id
            );
        }
    }
}

#[tokio::test]
async fn twenty_step_loop_keeps_prefix_bytes_identical_and_clear_log_keeps_fingerprint() {
    let mut model = ScriptedModel::new();
    for i in 0..19 {
        model = if i % 2 == 0 {
            model.tool_call("count", json!({}))
        } else {
            model.tool_call("lookup", json!({"key": format!("k{i}")}))
        };
    }
    let model = model.text("all done");
    let mut agent = agent(&model);
    let fingerprint = agent.prefix().fingerprint();

    let out = agent.generate_text("run the job").await.unwrap();
    model.assert_consumed();

    assert_eq!(out.text, "all done");
    assert_eq!(out.steps.len(), 20);
    assert_eq!(out.stats.steps, 20);
    assert_eq!(out.stats.tool_calls, 19);
    assert_eq!(out.stats.prefix_fingerprint_changes, 0);
    assert_eq!(out.steps[18].tool_results[0].content, "count=10");
    assert_eq!(out.steps[1].tool_results[0].content, "value of k1");

    let requests = model.requests();
    assert_eq!(requests.len(), 20);
    for (i, r) in requests.iter().enumerate() {
        assert_eq!(
            r.prefix_bytes, requests[0].prefix_bytes,
            "prefix bytes changed at step {i}"
        );
        assert_eq!(r.fingerprint, fingerprint);
        assert_eq!(r.tool_names, ["count", "lookup"]);
        // The history only grows: each request extends the previous one.
        if i > 0 {
            assert!(
                r.history.starts_with(&requests[i - 1].history),
                "history rewritten at step {i}"
            );
            assert_eq!(r.history.len(), requests[i - 1].history.len() + 2);
        }
        assert_paired(&r.history);
    }
    // user + 19 × (assistant + result) + final assistant
    assert_eq!(agent.log().len(), 1 + 19 * 2 + 1);

    agent.clear_log();
    assert!(agent.log().is_empty());
    assert_eq!(agent.prefix().fingerprint(), fingerprint);
}

#[tokio::test]
async fn bad_tool_calls_become_error_results_the_model_reads() {
    let model = ScriptedModel::new()
        .tool_call("no_such_tool", json!({}))
        .tool_call_raw("lookup", "{key: unquoted")
        .tool_call("lookup", json!({"key": 42}))
        .tool_call_raw("lookup", "")
        .tool_call("lookup", json!({"key": "missing"}))
        .tool_call_raw("count", "")
        .tool_call_raw("count", "null")
        .text("recovered");
    let mut agent = agent(&model);
    let out = agent.generate_text("go").await.unwrap();
    model.assert_consumed();
    let results: Vec<(bool, String)> = out
        .steps
        .iter()
        .flat_map(|s| {
            s.tool_results
                .iter()
                .map(|r| (r.is_error, r.content.to_string()))
        })
        .collect();
    assert_eq!(results.len(), 7);
    assert!(
        results[0].0 && results[0].1.starts_with("unknown tool `no_such_tool`"),
        "{:?}",
        results[0]
    );
    assert!(results[0].1.contains("count, lookup"));
    assert!(
        results[1].0 && results[1].1.contains("not valid JSON"),
        "{:?}",
        results[1]
    );
    assert!(
        results[2].0 && results[2].1.contains("do not match its schema"),
        "{:?}",
        results[2]
    );
    assert!(
        results[3].0 && results[3].1.contains("\"key\" is a required property"),
        "{:?}",
        results[3]
    );
    assert_eq!(
        results[4],
        (true, "error: no such key `missing`".to_string())
    );
    assert_eq!(results[5], (false, "count=1".to_string()));
    assert_eq!(results[6], (false, "count=2".to_string()));
    // The model saw each error before its next step.
    let last = model.requests().pop().unwrap();
    let seen: Vec<&Message> = last
        .history
        .iter()
        .filter(|m| matches!(m, Message::Tool(_)))
        .collect();
    assert_eq!(seen.len(), 7);
}

#[tokio::test]
async fn max_steps_is_a_typed_error_with_the_partial_run() {
    let model = ScriptedModel::new()
        .tool_call("count", json!({}))
        .tool_call("count", json!({}))
        .tool_call("count", json!({}));
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Counter::default())
        .unwrap()
        .max_steps(2)
        .build();
    let err = agent.generate_text("loop forever").await.unwrap_err();
    let HaloError::MaxStepsReached { max_steps, partial } = err else {
        panic!("expected MaxStepsReached, got {err:?}");
    };
    assert_eq!(max_steps, 2);
    assert_eq!(partial.steps.len(), 2);
    assert_eq!(model.remaining(), 1);
    // The log keeps the input and both complete steps.
    assert_eq!(agent.log().len(), 5);
    assert_paired(&agent.log().to_vec());
}

#[tokio::test]
async fn model_errors_are_typed_and_leave_only_complete_messages() {
    let model = ScriptedModel::new()
        .tool_call("count", json!({}))
        .error(ModelError::RateLimited {
            retry_after: Some(std::time::Duration::from_secs(3)),
            message: "slow down".into(),
        });
    let mut agent = agent(&model);
    let err = agent.generate_text("go").await.unwrap_err();
    let HaloError::Model(e) = &err else {
        panic!("{err:?}")
    };
    assert!(e.is_retryable());
    assert_eq!(e.retry_after(), Some(std::time::Duration::from_secs(3)));
    assert_eq!(agent.log().len(), 3, "user + assistant + result");
    assert_paired(&agent.log().to_vec());
}

#[tokio::test]
async fn a_fatal_tool_error_ends_the_run_without_logging_the_half_step() {
    let model =
        ScriptedModel::new().tool_calls_raw(&[("count", "{}"), ("lookup", r#"{"key":"fatal"}"#)]);
    let counter = Counter::default();
    let mut agent = HaloAgent::builder(model.clone())
        .tool(counter.clone())
        .unwrap()
        .tool(Lookup)
        .unwrap()
        .build();
    let err = agent.generate_text("go").await.unwrap_err();
    assert!(
        matches!(&err, HaloError::ToolFatal { tool, message } if tool == "lookup" && message == "the sandbox is gone"),
        "{err:?}"
    );
    assert_eq!(counter.0.load(Ordering::SeqCst), 1);
    assert_eq!(agent.log().len(), 1, "only the user message");
}

#[tokio::test]
async fn stats_sum_known_usage_and_count_unknown_cache_info() {
    let usage = |input, read| Usage {
        input_tokens: Some(input),
        output_tokens: Some(10),
        cache_read_tokens: read,
        ..Usage::default()
    };
    let resp = |usage, calls: bool| ModelResponse {
        id: None,
        message: if calls {
            halo_core::AssistantMessage {
                tool_calls: vec![halo_core::ToolCall::new("c1", "count", "{}")],
                ..Default::default()
            }
        } else {
            halo_core::AssistantMessage {
                text: "done".into(),
                ..Default::default()
            }
        },
        finish_reason: if calls {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        },
        usage,
        model: Some("m".into()),
        provider: None,
    };
    let model = ScriptedModel::new()
        .respond(resp(usage(1000, Some(0)), true))
        .respond(resp(usage(1100, None), true))
        .respond(resp(usage(1200, Some(1100)), false));
    let mut agent = agent(&model);
    let out = agent.generate_text("go").await.unwrap();
    let s = out.stats;
    assert_eq!(
        (
            s.steps,
            s.input_tokens,
            s.output_tokens,
            s.cache_read_tokens
        ),
        (3, 3300, 30, 1100)
    );
    assert_eq!(s.calls_without_cache_info, 1);
    assert_eq!(s.cache_reported_input_tokens, 2200);
    assert!((s.cache_hit_ratio() - 0.5).abs() < 1e-9);
    assert_eq!(agent.stats(), s);
}

#[tokio::test]
async fn adding_a_tool_mid_session_is_one_fingerprint_change() {
    let model = ScriptedModel::new().text("a").text("b").text("c");
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Counter::default())
        .unwrap()
        .build();
    agent.generate_text("1").await.unwrap();
    agent.add_tool(Lookup).unwrap();
    let second = agent.generate_text("2").await.unwrap();
    let third = agent.generate_text("3").await.unwrap();
    assert_eq!(second.stats.prefix_fingerprint_changes, 1);
    assert_eq!(third.stats.prefix_fingerprint_changes, 0);
    let reqs = model.requests();
    assert_ne!(reqs[0].fingerprint, reqs[1].fingerprint);
    assert_eq!(reqs[1].fingerprint, reqs[2].fingerprint);
    assert!(matches!(agent.add_tool(Lookup), Err(HaloError::Prefix(_))));
}

// Regression: after a model error, calling generate_text again with the same input logged
// the question twice; resume continues from the log, sending the failed request again.
#[tokio::test]
async fn resume_after_a_model_error_sends_the_same_request_and_logs_the_question_once() {
    let model = ScriptedModel::new()
        .tool_call("count", json!({}))
        .error(ModelError::RateLimited {
            retry_after: None,
            message: "slow down".into(),
        })
        .text("counted once");
    let mut agent = agent(&model);
    agent.generate_text("go").await.unwrap_err();
    let out = agent.resume().await.unwrap();
    assert_eq!(out.text, "counted once");
    assert_eq!(out.steps.len(), 1);
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    // The resumed request is the failed one, byte for byte: same prefix, same history.
    assert_eq!(requests[2].history, requests[1].history);
    let users = agent
        .log()
        .messages()
        .filter(|m| matches!(m, Message::User { .. }))
        .count();
    assert_eq!(users, 1);
    assert_eq!(agent.log().len(), 4, "user, call, result, answer");
    assert_paired(&agent.log().to_vec());
    model.assert_consumed();
}

#[tokio::test]
async fn resume_continues_after_max_steps_and_refuses_when_there_is_nothing_to_continue() {
    let model = ScriptedModel::new()
        .tool_call("count", json!({}))
        .tool_call("count", json!({}))
        .text("done");
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Counter::default())
        .unwrap()
        .max_steps(2)
        .build();
    assert!(matches!(
        agent.resume().await.unwrap_err(),
        HaloError::NothingToResume
    ));
    let err = agent.generate_text("count twice").await.unwrap_err();
    assert!(matches!(err, HaloError::MaxStepsReached { .. }), "{err:?}");
    let out = agent.resume().await.unwrap();
    assert_eq!(out.text, "done");
    // The log ends with the answer: nothing more to resume, and no model call is made.
    let err = agent.resume().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "there is nothing to resume: the log is empty or ends with an answer; start a run with generate_text"
    );
    assert_eq!(model.requests().len(), 3);
    model.assert_consumed();
}
