//! `subagent {"role", "task"}` on the scripted model: the recursion guard, the depth limit,
//! the stats roll-up, the prefix per role, the bound on the answer, and two sub-agents of
//! one step running at the same time.

use std::sync::Arc;
use std::time::Duration;

use halo_core::testing::ScriptedModel;
use halo_core::{HaloAgent, Message, StablePrefix};
use halo_strategies::Subagent;
use halo_strategies::subagent::role_prompt;
use serde_json::json;

use crate::agent_tools::{CachingModel, Note, Rendezvous};

#[test]
fn a_subagent_has_its_own_log_and_prompt_and_the_callers_tools_minus_subagent() {
    let script = ScriptedModel::new()
        .tool_call(
            "subagent",
            json!({"role": "note taker", "task": "note 'x'"}),
        )
        .tool_call("note", json!({"text": "x"}))
        .text("noted x")
        .text("Done.");
    let mut agent = HaloAgent::builder(script.clone())
        .system("You delegate.")
        .tool(Note)
        .unwrap()
        .tool(Subagent::new())
        .unwrap()
        .build();
    let out = futures::executor::block_on(agent.generate_text("Note x")).unwrap();
    assert_eq!(out.text, "Done.");
    script.assert_consumed();
    let requests = script.requests();
    assert_eq!(requests[0].tool_names, ["note", "subagent"]);
    // The sub-agent: the role's prompt, the parent's tools minus `subagent`, its own log.
    let mut expected = StablePrefix::new(role_prompt("note taker"));
    expected.add_tool(halo_core::DynTool::spec(&Note)).unwrap();
    for r in &requests[1..3] {
        assert_eq!(r.tool_names, ["note"]);
        assert_eq!(r.fingerprint, expected.fingerprint());
    }
    assert_eq!(requests[1].history, [Message::user("note 'x'")]);
    assert_eq!(requests[2].history.len(), 3);
    assert_eq!(out.steps[0].tool_results[0].content, "noted x");
    assert_eq!(
        requests[3].history.len(),
        3,
        "the parent's log: input, call, result"
    );
}

#[test]
fn a_sub_agent_tool_refuses_calls_from_an_agent_at_its_depth_limit() {
    // `subagent`'s children keep `delegate` (another sub-agent tool), whose limit is 1: the
    // child, at depth 1, may not use it.
    let script = ScriptedModel::new()
        .tool_call("subagent", json!({"role": "a", "task": "t1"}))
        .tool_call("delegate", json!({"role": "b", "task": "t2"}))
        .text("a did it alone")
        .text("Done.");
    let mut agent = HaloAgent::builder(script.clone())
        .tool(Subagent::new())
        .unwrap()
        .tool(Subagent::new().named("delegate").max_depth(1))
        .unwrap()
        .build();
    let out = futures::executor::block_on(agent.generate_text("go")).unwrap();
    assert_eq!(out.text, "Done.");
    script.assert_consumed();
    let requests = script.requests();
    assert_eq!(requests[0].tool_names, ["delegate", "subagent"]);
    assert_eq!(
        requests[1].tool_names,
        ["delegate"],
        "no `subagent` in its sub-agent"
    );
    let Some(Message::Tool(refused)) = requests[2].history.last() else {
        panic!()
    };
    assert!(refused.is_error);
    assert!(
        refused.content.contains("`delegate` is not available here: this agent is at depth 1 and sub-agents nest at most 1 deep"),
        "{}",
        refused.content
    );
    assert_eq!(out.steps[0].tool_results[0].content, "a did it alone");
    assert_eq!(out.stats.delegated_steps, 2);
}

#[test]
fn a_plan_step_may_start_a_sub_agent_which_has_plan_but_no_subagent() {
    // Depth 0 plans (its fork is at depth 1, under the default limit of 2), a step starts a
    // sub-agent (depth 2), which is offered `plan` but no `subagent`.
    let script = ScriptedModel::new()
        .tool_call("plan", json!({"task": "t"}))
        .text(r#"{"steps": ["s1", "s2", "s3"]}"#)
        .tool_call("subagent", json!({"role": "r", "task": "sub"}))
        .text("sub done")
        .text("s1 done")
        .text("s2 done")
        .text("s3 done")
        .text("Done.");
    let mut agent = HaloAgent::builder(script.clone())
        .tool(halo_strategies::Plan::new())
        .unwrap()
        .tool(Subagent::new())
        .unwrap()
        .build();
    let out = futures::executor::block_on(agent.generate_text("go")).unwrap();
    assert_eq!(out.text, "Done.");
    script.assert_consumed();
    let requests = script.requests();
    assert_eq!(
        requests[3].tool_names,
        ["plan"],
        "the sub-agent has plan, not subagent"
    );
    assert_eq!(out.stats.delegated_steps, 6);
}

#[test]
fn a_subagents_usage_rolls_into_the_callers_stats() {
    let script = ScriptedModel::new()
        .tool_call("subagent", json!({"role": "r", "task": "t"}))
        .tool_call("note", json!({"text": "y"}))
        .text("ok")
        .text("Done.");
    let model = CachingModel::new(script.clone());
    let mut agent = HaloAgent::builder(model)
        .tool(Note)
        .unwrap()
        .tool(Subagent::new())
        .unwrap()
        .build();
    let out = futures::executor::block_on(agent.generate_text("go")).unwrap();
    let own: u64 = out
        .steps
        .iter()
        .map(|s| s.usage.input_tokens.unwrap())
        .sum();
    let stats = agent.stats();
    assert_eq!((stats.steps, stats.delegated_steps), (4, 2));
    assert_eq!(
        stats.tool_calls, 2,
        "the parent's subagent call and the child's note call"
    );
    assert_eq!(stats.output_tokens, 4 * 5);
    assert!(stats.input_tokens > own, "{} > {own}", stats.input_tokens);
    assert_eq!(
        out.stats, stats,
        "the run's stats include the sub-agent's too"
    );
}

#[test]
fn the_same_role_gives_the_same_prefix_and_another_role_another() {
    let script = ScriptedModel::new()
        .tool_calls_raw(&[
            ("subagent", r#"{"role": "tester", "task": "one"}"#),
            ("subagent", r#"{"role": " tester ", "task": "two"}"#),
            ("subagent", r#"{"role": "reviewer", "task": "three"}"#),
        ])
        .text("1")
        .text("2")
        .text("3")
        .text("Done.");
    let mut agent = HaloAgent::builder(script.clone())
        .tool(Subagent::new())
        .unwrap()
        .build();
    futures::executor::block_on(agent.generate_text("go")).unwrap();
    let r = script.requests();
    let by_task = |task: &str| {
        r.iter()
            .find(|q| q.history.first().is_some_and(|m| m.text() == task))
            .unwrap()
    };
    assert_eq!(by_task("one").prefix_bytes, by_task("two").prefix_bytes);
    assert_ne!(by_task("one").prefix_bytes, by_task("three").prefix_bytes);
}

#[test]
fn a_long_answer_is_cut_at_the_bound() {
    let long = "word ".repeat(1_000);
    let script = ScriptedModel::new()
        .tool_call("subagent", json!({"role": "r", "task": "t"}))
        .text(long.clone())
        .text("Done.");
    let mut agent = HaloAgent::builder(script)
        .tool(Subagent::new().max_result_bytes(200))
        .unwrap()
        .build();
    let out = futures::executor::block_on(agent.generate_text("go")).unwrap();
    let content = &out.steps[0].tool_results[0].content;
    assert!(content.len() <= 200, "{}", content.len());
    assert!(content.starts_with("word word"));
    assert!(content.ends_with("more bytes cut]"), "{content}");
}

/// Each sub-agent calls `rendezvous`, which answers only when both wait at once: run one
/// after the other, they would never meet and the test would time out.
#[tokio::test]
async fn two_sub_agents_of_one_step_run_at_the_same_time() {
    let script = ScriptedModel::new()
        .tool_calls_raw(&[
            ("subagent", r#"{"role": "left", "task": "meet"}"#),
            ("subagent", r#"{"role": "right", "task": "meet"}"#),
        ])
        .tool_call("rendezvous", json!({}))
        .tool_call("rendezvous", json!({}))
        .text("we met")
        .text("we met")
        .text("Both met.");
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let mut agent = HaloAgent::builder(script.clone())
        .tool(Rendezvous(barrier))
        .unwrap()
        .tool(Subagent::new())
        .unwrap()
        .build();
    let out = tokio::time::timeout(Duration::from_secs(10), agent.generate_text("go"))
        .await
        .expect("the two sub-agents ran one after the other")
        .unwrap();
    assert_eq!(out.text, "Both met.");
    let results: Vec<_> = out.steps[0]
        .tool_results
        .iter()
        .map(|r| r.content.as_str())
        .collect();
    assert_eq!(results, ["we met", "we met"]);
    script.assert_consumed();
}
