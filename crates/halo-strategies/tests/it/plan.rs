//! `plan {"task"}` and plan-then-execute on the scripted model: the recursion guard, the
//! prefix and the ledger during a plan, the steps' results.

use halo_core::testing::ScriptedModel;
use halo_core::{CacheVerdict, HaloAgent, Message, ModelError};
use halo_strategies::{Plan, PlanExt};
use serde_json::json;

use crate::agent_tools::{CachingModel, Note};

const STEPS: &str = r#"{"steps": ["read the notes", "write the summary", "check it"]}"#;

#[test]
fn a_plan_runs_its_steps_in_the_callers_context_with_plan_not_callable_and_the_prefix_unchanged() {
    let script = ScriptedModel::new()
        .tool_call("plan", json!({"task": "summarize the notes"}))
        .text(STEPS)
        // Step 1: the model tries to plan again inside the plan; the call is refused.
        .tool_call("plan", json!({"task": "read the notes"}))
        .tool_call("note", json!({"text": "notes read"}))
        .text("step one done")
        .text("step two done")
        .text("step three done")
        .text("Summarized.");
    let model = CachingModel::new(script.clone());
    let mut agent = HaloAgent::builder(model)
        .system("You summarize notes.")
        .tool(Note)
        .unwrap()
        .tool(Plan::new())
        .unwrap()
        .build();
    let out = futures::executor::block_on(agent.generate_text("Summarize my notes")).unwrap();
    assert_eq!(out.text, "Summarized.");
    script.assert_consumed();

    let requests = script.requests();
    assert_eq!(requests.len(), 8);
    // The prefix bytes never change: the plan is restricted through the active tools.
    for r in &requests {
        assert_eq!(r.prefix_bytes, requests[0].prefix_bytes);
        assert_eq!(r.tool_names, ["note", "plan"]);
    }
    assert_eq!(requests[0].options.active_tools, None);
    for r in &requests[1..7] {
        assert_eq!(r.options.active_tools, Some(vec!["note".to_string()]));
    }
    assert_eq!(requests[7].options.active_tools, None);
    // The plan call inside the plan got an error result and ran nothing.
    let Some(Message::Tool(refused)) = requests[3].history.last() else {
        panic!("no tool result: {:?}", requests[3].history.last());
    };
    assert!(refused.is_error, "{refused:?}");
    assert!(
        refused
            .content
            .contains("`plan` is not available in this step"),
        "{}",
        refused.content
    );
    // The fork's requests extend the caller's history (the same context) ...
    for r in &requests[1..7] {
        assert_eq!(r.history[..1], requests[0].history[..]);
    }
    let Message::User { .. } = &requests[1].history[1] else {
        panic!()
    };
    assert!(
        requests[1].history[1]
            .text()
            .contains("summarize the notes")
    );
    assert!(
        requests[2]
            .history
            .last()
            .unwrap()
            .text()
            .starts_with("Step 1 of 3")
    );
    // ... and none of its turns enter the caller's log: one tool result does.
    assert_eq!(requests[7].history.len(), 3);
    assert_eq!(agent.log().len(), 4);
    let result = &out.steps[0].tool_results[0];
    assert!(!result.is_error);
    for expected in [
        "plan for: summarize the notes",
        "step 1 of 3 (done): read the notes\nstep one done",
        "step 2 of 3 (done): write the summary\nstep two done",
        "step 3 of 3 (done): check it\nstep three done",
    ] {
        assert!(
            result.content.contains(expected),
            "{expected:?} not in {}",
            result.content
        );
    }

    // The ledger: no miss from planning. The caller's second call reads what its first sent,
    // and no call of the fork (their counters are in the caller's) was a bust or changed the
    // prefix.
    let stats = agent.stats();
    assert_eq!((stats.steps, stats.delegated_steps), (8, 6));
    assert_eq!(stats.cache_busts, 0);
    assert_eq!(stats.prefix_fingerprint_changes, 0);
    assert_eq!(stats.tool_calls, 1 + 2);
    let verdicts: Vec<_> = agent
        .cache_ledger()
        .checks()
        .map(|c| c.verdict.clone())
        .collect();
    assert_eq!(verdicts, [CacheVerdict::Cold, CacheVerdict::Hit]);
    // Every request after the first read at least the caller's first request from the cache.
    assert!(stats.cache_read_tokens >= 7 * (requests[0].prefix_bytes.len() as u64 / 4));
}

#[test]
fn a_plan_of_two_steps_is_sent_back_with_the_schema_and_a_failed_step_ends_the_plan() {
    let script = ScriptedModel::new()
        .tool_call("plan", json!({"task": "t"}))
        .text(r#"{"steps": ["a", "b"]}"#)
        .text(r#"{"steps": ["a", "b", "c", "d"]}"#)
        .text("a done")
        .error(ModelError::Other("the server went away".into()))
        .text("Partly done.");
    let mut agent = HaloAgent::builder(script.clone())
        .tool(Plan::new())
        .unwrap()
        .build();
    let out = futures::executor::block_on(agent.generate_text("Do t")).unwrap();
    assert_eq!(out.text, "Partly done.");
    script.assert_consumed();
    let requests = script.requests();
    // The two-step plan was refused by the schema (minItems 3) and asked again.
    let feedback = requests[2].history.last().unwrap().text();
    assert!(
        feedback.contains("minItems") || feedback.contains("shorter than 3"),
        "{feedback}"
    );
    let result = &out.steps[0].tool_results[0];
    assert!(
        result.is_error,
        "a failed step makes the plan's result an error"
    );
    for expected in [
        "step 1 of 4 (done): a\na done",
        "step 2 of 4 (failed): b",
        "the server went away",
        "step 3 of 4 (not run): c",
        "step 4 of 4 (not run): d",
    ] {
        assert!(
            result.content.contains(expected),
            "{expected:?} not in {}",
            result.content
        );
    }
}

#[test]
fn plan_then_execute_runs_the_steps_in_the_agents_own_log_and_restores_the_options() {
    let script = ScriptedModel::new()
        .text(STEPS)
        .text("one")
        .text("two")
        .text("three");
    let mut agent = HaloAgent::builder(script.clone())
        .tool(Note)
        .unwrap()
        .tool(Plan::new())
        .unwrap()
        .build();
    let before = agent.options().clone();
    let report = futures::executor::block_on(agent.plan_then_execute("summarize")).unwrap();
    assert!(report.completed());
    let results: Vec<_> = report
        .outcomes
        .iter()
        .map(|o| o.result.clone().unwrap())
        .collect();
    assert_eq!(results, ["one", "two", "three"]);
    assert_eq!(report.stats.steps, 4);
    assert_eq!(
        agent.log().len(),
        8,
        "the plan and each step are turns of the agent's log"
    );
    for r in script.requests() {
        assert_eq!(r.options.active_tools, Some(vec!["note".to_string()]));
        assert_eq!(r.tool_names, ["note", "plan"]);
    }
    assert_eq!(agent.options(), &before);
}

/// An agent tool is registered like a client-side tool, but the agent runs its calls.
#[test]
fn an_empty_task_is_an_error_result_and_the_call_is_not_handed_to_the_caller() {
    let script = ScriptedModel::new()
        .tool_call("plan", json!({"task": ""}))
        .text("ok");
    let mut agent = HaloAgent::builder(script.clone())
        .tool(Plan::new())
        .unwrap()
        .build();
    let out = futures::executor::block_on(agent.generate_text("go")).unwrap();
    assert!(out.pending_tool_calls.is_empty());
    let result = &out.steps[0].tool_results[0];
    assert!(
        result.is_error && result.content.contains("`task` is empty"),
        "{result:?}"
    );
}
