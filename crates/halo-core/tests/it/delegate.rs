//! Agent tools (`delegate.rs`): the fork's prefix, history, ledger and active tools, the
//! fresh sub-agent's prefix and tools, the counters rolled into the caller's, hooks around
//! the calls, and an interrupted call closed on resume.

use std::sync::{Arc, Mutex};

use halo_core::testing::ScriptedModel;
use halo_core::{
    AgentStats, DynTool, HaloAgent, Message, ToolAnnotations, ToolCall, ToolCallDecision,
    ToolContext, ToolError, ToolHook, ToolOutput, ToolSpec, async_trait,
};
use serde_json::{Value, json};

/// What the tool saw of its context, and which agent it ran: a fork or a sub-agent.
#[derive(Default)]
struct Seen {
    depth: Vec<usize>,
    callable: Vec<Vec<String>>,
    history_len: Vec<usize>,
}

struct Ask {
    name: &'static str,
    fresh: bool,
    seen: Arc<Mutex<Seen>>,
}

#[async_trait]
impl DynTool for Ask {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            self.name,
            "Asks again.",
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        )
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default().with_runs_agent(true)
    }
    async fn call_json(&self, args: Value, tool: &ToolContext) -> Result<ToolOutput, ToolError> {
        let cx = tool.agent().expect("an agent tool gets the agent");
        {
            let mut seen = self.seen.lock().unwrap();
            seen.depth.push(cx.depth());
            seen.callable.push(cx.callable_tools());
            seen.history_len.push(cx.history().len());
        }
        let mut agent = if self.fresh {
            cx.subagent("You answer one question.").build()
        } else {
            cx.fork()
        };
        assert_eq!(agent.depth(), cx.depth() + 1);
        let q = args["q"].as_str().unwrap_or_default().to_string();
        let run = agent
            .generate_text(q)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        Ok(ToolOutput::text(run.text).with_stats(agent.stats()))
    }
}

struct Echo;
#[async_trait]
impl halo_core::DynTool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "echo",
            "Echoes.",
            json!({"type": "object", "properties": {}}),
        )
    }
    async fn call_json(&self, _: Value, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok("echo".into())
    }
}

fn ask(name: &'static str, fresh: bool) -> (Ask, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    (
        Ask {
            name,
            fresh,
            seen: seen.clone(),
        },
        seen,
    )
}

#[test]
fn a_fork_has_the_callers_prefix_and_history_without_the_tool_and_a_fresh_agent_its_own() {
    let model = ScriptedModel::new()
        .text("earlier answer")
        .tool_calls_raw(&[
            ("fork", r#"{"q": "again?"}"#),
            ("fresh", r#"{"q": "anew?"}"#),
        ])
        .text("forked answer")
        .text("fresh answer")
        .text("Both.");
    let (fork, fork_seen) = ask("fork", false);
    let (fresh, fresh_seen) = ask("fresh", true);
    let mut agent = HaloAgent::builder(model.clone())
        .system("S")
        .tool(Echo)
        .unwrap()
        .tool(fork)
        .unwrap()
        .tool(fresh)
        .unwrap()
        .build();
    futures::executor::block_on(agent.generate_text("first")).unwrap();
    let out = futures::executor::block_on(agent.generate_text("second")).unwrap();
    assert_eq!(out.text, "Both.");
    model.assert_consumed();
    let r = model.requests();
    // The fork: the same prefix bytes, the caller's history (3 committed messages) and its
    // new turn, `fork` not callable.
    assert_eq!(r[2].prefix_bytes, r[1].prefix_bytes);
    assert_eq!(r[2].history[..3], r[1].history[..]);
    assert_eq!(r[2].history[3], Message::user("again?"));
    assert_eq!(
        r[2].options.active_tools,
        Some(vec!["echo".to_string(), "fresh".to_string()])
    );
    // The fresh agent: its own prefix (the tools minus itself), its own log.
    assert_eq!(r[3].tool_names, ["echo", "fork"]);
    assert_eq!(r[3].history, [Message::user("anew?")]);
    assert_eq!(r[3].options.active_tools, None);
    // Nothing of either entered the caller's log: the two results did.
    assert_eq!(r[4].history.len(), 3 + 2 + 1);
    assert_eq!(agent.log().len(), 7);
    let seen = fork_seen.lock().unwrap();
    assert_eq!(seen.depth, [0]);
    assert_eq!(seen.callable, [vec!["echo", "fork", "fresh"]]);
    assert_eq!(
        seen.history_len,
        [3],
        "the step in flight is not in the context's history"
    );
    assert_eq!(fresh_seen.lock().unwrap().depth, [0]);
    let stats: AgentStats = agent.stats();
    assert_eq!(
        (stats.steps, stats.delegated_steps, stats.tool_calls),
        (5, 2, 2)
    );
}

/// A hook that denies `fork` calls.
struct DenyFork;
#[async_trait]
impl ToolHook for DenyFork {
    async fn before_tool_call(&self, cx: &ToolContext, _: &Value) -> ToolCallDecision {
        let call = cx.call();
        if call.name == "fork" {
            ToolCallDecision::Deny("no forks today".into())
        } else {
            ToolCallDecision::Allow
        }
    }
}

#[test]
fn agent_tool_calls_go_through_the_hooks() {
    let model = ScriptedModel::new()
        .tool_call("fork", json!({"q": "x"}))
        .text("ok");
    let (fork, seen) = ask("fork", false);
    let mut agent = HaloAgent::builder(model.clone())
        .tool(fork)
        .unwrap()
        .hook(DenyFork)
        .build();
    let out = futures::executor::block_on(agent.generate_text("go")).unwrap();
    let result = &out.steps[0].tool_results[0];
    assert!(
        result.is_error && result.content == "no forks today",
        "{result:?}"
    );
    assert!(
        seen.lock().unwrap().depth.is_empty(),
        "the tool did not run"
    );
    assert_eq!(out.stats.delegated_steps, 0);
}

#[test]
fn an_interrupted_agent_tool_call_is_closed_as_may_have_run_on_resume_not_run_again() {
    let model = ScriptedModel::new().text("resumed");
    let (fork, seen) = ask("fork", false);
    let mut agent = HaloAgent::builder(model.clone())
        .tool(fork)
        .unwrap()
        .build();
    agent.log_mut().push(Message::user("go"));
    agent
        .log_mut()
        .push(Message::Assistant(halo_core::AssistantMessage {
            tool_calls: vec![ToolCall::new("c1", "fork", r#"{"q": "x"}"#)],
            ..Default::default()
        }));
    let out = futures::executor::block_on(agent.resume()).unwrap();
    assert_eq!(out.text, "resumed");
    assert!(seen.lock().unwrap().depth.is_empty());
    let Some(Message::Tool(closed)) = model.requests()[0].history.last().cloned() else {
        panic!()
    };
    assert!(closed.is_error && closed.content == halo_core::request::MAY_HAVE_RUN);
}

#[test]
fn in_manual_mode_an_agent_tool_call_goes_to_the_caller_who_can_run_it_with_the_agent() {
    let model = ScriptedModel::new()
        .tool_call("fork", json!({"q": "x"}))
        .text("forked")
        .text("done");
    let (fork, _) = ask("fork", false);
    let mut agent = HaloAgent::builder(model).tool(fork).unwrap().build();
    let turn = futures::executor::block_on(agent.send("go")).unwrap();
    let halo_core::Turn::ToolCalls(calls) = turn else {
        panic!()
    };
    let result = futures::executor::block_on(agent.run_tool_call(&calls[0])).unwrap();
    assert_eq!(result.content, "forked");
    let next = futures::executor::block_on(
        agent.submit_tool_result(&calls[0].id, result.content.to_string()),
    )
    .unwrap();
    let Some(halo_core::Turn::Answer(answer)) = next else {
        panic!()
    };
    assert_eq!(answer.text, "done");
}
