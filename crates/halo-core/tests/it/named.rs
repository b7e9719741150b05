//! Named agents as tools (`named.rs`): their own prefix and tools, the counters rolled into
//! the caller's, the bounded answer, the three contexts (fresh, fork, continue), the depth
//! limit, and what a failing run becomes.

use futures::StreamExt as _;
use halo_core::named::AgentContext;
use halo_core::testing::ScriptedModel;
use halo_core::{
    AgentEvent, CacheVerdict, DynTool, HaloAgent, Message, StablePrefix, ToolContext, ToolError,
    ToolOutput, ToolSpec, async_trait,
};
use serde_json::{Value, json};

/// A tool of the named agent's own.
struct Wiki;

#[async_trait]
impl DynTool for Wiki {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "wiki",
            "Looks a topic up.",
            json!({"type": "object", "properties": {"topic": {"type": "string"}}}),
        )
    }
    async fn call_json(&self, args: Value, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(format!("the wiki page on {}", args["topic"].as_str().unwrap_or("?")).into())
    }
}

const RESEARCHER: &str = "You research animals; answer with facts.";

fn researcher(model: &ScriptedModel) -> HaloAgent {
    HaloAgent::builder(model.clone())
        .name("researcher")
        .system(RESEARCHER)
        .tool(Wiki)
        .unwrap()
        .build()
}

fn own_prefix() -> StablePrefix {
    let mut prefix = StablePrefix::new(RESEARCHER);
    prefix.add_tool(Wiki.spec()).unwrap();
    prefix
}

#[tokio::test]
async fn a_named_agent_runs_with_its_own_prefix_and_tools_and_its_usage_rolls_into_the_callers() {
    let model = ScriptedModel::new()
        .tool_call("researcher", json!({"task": "otters"}))
        .tool_call("wiki", json!({"topic": "otters"})) // the researcher's own tool
        .text("Otters hold hands.")
        .text("They hold hands.");
    let tool = researcher(&model).as_tool("researcher", "Looks facts up.");
    let mut writer = HaloAgent::builder(model.clone())
        .system("You write.")
        .tool(tool)
        .unwrap()
        .build();
    let out = writer.generate_text("Write about otters.").await.unwrap();
    model.assert_consumed();
    assert_eq!(out.text, "They hold hands.");
    assert_eq!(out.steps[0].tool_results[0].content, "Otters hold hands.");
    let requests = model.requests();
    assert_eq!(requests[0].tool_names, ["researcher"]);
    for r in &requests[1..3] {
        assert_eq!(r.fingerprint, own_prefix().fingerprint());
        assert_eq!(r.tool_names, ["wiki"]);
    }
    assert_eq!(requests[1].history, [Message::user("otters")]);
    // The writer's two calls and the researcher's two; the researcher's tool call too.
    assert_eq!(out.stats.steps, 4);
    assert_eq!(out.stats.delegated_steps, 2);
    assert_eq!(out.stats.tool_calls, 2);
    // The writer's own steps: only its two.
    assert_eq!(out.steps.len(), 2);
    assert_eq!(writer.log().len(), 4);
}

#[tokio::test]
async fn a_named_agents_answer_is_cut_to_its_bound() {
    let long = format!("{}{}", "a".repeat(3_000), "z".repeat(3_000));
    let model = ScriptedModel::new()
        .tool_call("researcher", json!({"task": "everything"}))
        .text(long)
        .text("ok");
    let tool = researcher(&model)
        .as_tool("researcher", "Looks facts up.")
        .max_result_bytes(1_000);
    let mut writer = HaloAgent::builder(model.clone())
        .tool(tool)
        .unwrap()
        .build();
    let out = writer.generate_text("Go.").await.unwrap();
    let result = &out.steps[0].tool_results[0].content;
    assert!(result.len() <= 1_000, "{} bytes", result.len());
    assert!(
        result.starts_with("aaa") && result.ends_with("zzz"),
        "{result}"
    );
    assert!(result.contains("the answer was longer than the limit"));
}

#[tokio::test]
async fn a_fresh_named_agent_starts_each_call_anew_and_runs_calls_of_one_step_together() {
    let model = ScriptedModel::new()
        .tool_calls_raw(&[
            ("researcher", r#"{"task": "otters"}"#),
            ("researcher", r#"{"task": "beavers"}"#),
        ])
        .text("Otters hold hands.")
        .text("Beavers build dams.")
        .text("Both.");
    let tool = researcher(&model).as_tool("researcher", "Looks facts up.");
    assert!(tool.annotations().concurrent);
    let mut writer = HaloAgent::builder(model.clone())
        .tool(tool)
        .unwrap()
        .build();
    let out = writer.generate_text("Otters and beavers.").await.unwrap();
    model.assert_consumed();
    let requests = model.requests();
    // Each call: its own conversation, the task alone.
    let mut tasks: Vec<_> = requests[1..3].iter().map(|r| r.history.clone()).collect();
    tasks.sort_by_key(|h| format!("{h:?}"));
    assert_eq!(
        tasks,
        [
            vec![Message::user("beavers")],
            vec![Message::user("otters")]
        ]
    );
    assert_eq!(out.stats.delegated_steps, 2);
}

#[tokio::test]
async fn a_forked_named_agent_continues_the_callers_conversation_under_its_own_prefix() {
    let model = ScriptedModel::new()
        .text("Hello.")
        .tool_call("researcher", json!({"task": "check what I said"}))
        .text("You greeted me.")
        .text("Checked.");
    let tool = researcher(&model)
        .as_tool("researcher", "Checks the conversation.")
        .context(AgentContext::Fork);
    assert!(tool.annotations().runs_agent);
    let mut writer = HaloAgent::builder(model.clone())
        .system("You write.")
        .tool(tool)
        .unwrap()
        .build();
    writer.generate_text("Hi").await.unwrap();
    // Streamed, so the researcher's steps (and its ledger's verdicts) are seen.
    let mut inner_checks = Vec::new();
    {
        let mut events = std::pin::pin!(writer.stream_text("What did I say?"));
        while let Some(event) = events.next().await {
            if let AgentEvent::Inner(inner) = event.unwrap()
                && let AgentEvent::StepFinish(step) = &inner.event
            {
                inner_checks.push(step.cache.clone());
            }
        }
    }
    model.assert_consumed();
    let requests = model.requests();
    assert_eq!(requests[2].fingerprint, own_prefix().fingerprint());
    assert_eq!(
        requests[2].history,
        [
            Message::user("Hi"),
            Message::assistant("Hello."),
            Message::user("What did I say?"),
            Message::user("check what I said"),
        ]
    );
    // Its first request carries another prefix than the caller's last: the one expected
    // miss, judged by the caller's ledger it forked.
    assert_eq!(inner_checks.len(), 1);
    assert_eq!(inner_checks[0].verdict, CacheVerdict::ExpectedMiss);
    assert!(inner_checks[0].prefix_changed);
    // Outside an agent, a fork has no conversation to continue.
    let lonely = researcher(&model)
        .as_tool("researcher", "Checks.")
        .context(AgentContext::Fork);
    let err = lonely
        .run(
            "x",
            &ToolContext::detached(halo_core::ToolCall::new("c", "researcher", "{}")),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("runs only inside an agent"),
        "{err}"
    );
}

#[tokio::test]
async fn a_continued_named_agent_keeps_one_conversation_across_calls() {
    let model = ScriptedModel::new()
        .tool_call("researcher", json!({"task": "otters"}))
        .text("Otters hold hands.")
        .tool_call("researcher", json!({"task": "and beavers?"}))
        .text("Beavers build dams.")
        .text("Done.");
    let tool = researcher(&model)
        .as_tool("researcher", "Looks facts up.")
        .context(AgentContext::Continue);
    assert!(!tool.annotations().concurrent);
    let mut writer = HaloAgent::builder(model.clone())
        .tool(tool)
        .unwrap()
        .build();
    writer.generate_text("Otters, then beavers.").await.unwrap();
    model.assert_consumed();
    let requests = model.requests();
    assert_eq!(
        requests[3].history,
        [
            Message::user("otters"),
            Message::assistant("Otters hold hands."),
            Message::user("and beavers?"),
        ]
    );
}

#[tokio::test]
async fn a_named_agent_refuses_calls_past_its_depth_limit_and_a_failed_run_is_an_error_result() {
    let model = ScriptedModel::new()
        .tool_call("researcher", json!({"task": "otters"}))
        .text("I could not.");
    let tool = researcher(&model)
        .as_tool("researcher", "Looks facts up.")
        .max_depth(0);
    let mut writer = HaloAgent::builder(model.clone())
        .tool(tool)
        .unwrap()
        .build();
    let out = writer.generate_text("Go.").await.unwrap();
    let result = &out.steps[0].tool_results[0];
    assert!(result.is_error);
    assert!(result.content.contains("nest at most 0 deep"), "{result:?}");
    assert_eq!(model.requests().len(), 2, "the researcher was never called");

    // The researcher's model fails: an error result, the caller goes on.
    let model = ScriptedModel::new()
        .tool_call("researcher", json!({"task": "otters"}))
        .error(halo_core::ModelError::Other("overloaded".into()))
        .text("Sorry.");
    let tool = researcher(&model).as_tool("researcher", "Looks facts up.");
    let mut writer = HaloAgent::builder(model.clone())
        .tool(tool)
        .unwrap()
        .build();
    let out = writer.generate_text("Go.").await.unwrap();
    let result = &out.steps[0].tool_results[0];
    assert!(result.is_error);
    assert!(
        result
            .content
            .starts_with("the agent `researcher` failed: "),
        "{result:?}"
    );
    assert_eq!(out.text, "Sorry.");
}
