//! Agents together: a handoff loop caught by `LoopSuppression`, and the events of a plan's
//! steps and a sub-agent in a streamed caller's events, tagged.

use futures::StreamExt as _;
use halo_core::handoff::Handoff;
use halo_core::testing::ScriptedModel;
use halo_core::{AgentEvent, HaloAgent, HaloError, LoopKind};
use halo_strategies::{LoopSuppression, Plan, Subagent};
use serde_json::json;

#[tokio::test]
async fn a_handoff_loop_is_caught_by_the_loop_guard() {
    // Two agents that hand the conversation back and forth, and never answer.
    let mut model = ScriptedModel::new();
    for i in 0..12 {
        let to = if i % 2 == 0 { "billing" } else { "triage" };
        model = model.tool_call(&format!("transfer_to_{to}"), json!({}));
    }
    let triage = HaloAgent::builder(model.clone())
        .name("triage")
        .system("You route.")
        .handoff(Handoff::to("billing"))
        .unwrap()
        .loop_guard(LoopSuppression::default())
        .build();
    // No loop guard of its own: it takes triage's.
    let billing = HaloAgent::builder(model.clone())
        .name("billing")
        .system("You bill.")
        .handoff(Handoff::to("triage"))
        .unwrap()
        .build();
    let mut agent = triage.with_peers([billing]).unwrap();
    let err = agent.generate_text("Help.").await.unwrap_err();
    let Stopped {
        kind,
        partial_steps,
    } = loop_of(err);
    assert_eq!(kind, LoopKind::Alternation);
    // Three rounds (six handoffs) nudged, the next handoff stopped the run, long before
    // the step limit.
    assert_eq!(partial_steps, 7);
    let requests = model.requests();
    // The nudge entered the history once, before the seventh call.
    let nudges = requests[6]
        .history
        .iter()
        .filter(|m| format!("{m:?}").contains("going round in a cycle"))
        .count();
    assert_eq!(nudges, 1);
}

struct Stopped {
    kind: LoopKind,
    partial_steps: usize,
}

fn loop_of(err: HaloError) -> Stopped {
    match err {
        HaloError::LoopDetected { kind, partial, .. } => Stopped {
            kind,
            partial_steps: partial.steps.len(),
        },
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_plans_steps_and_a_sub_agents_work_reach_the_streamed_callers_events_tagged() {
    let model = ScriptedModel::new()
        .tool_calls_raw(&[
            ("plan", r#"{"task": "greet"}"#),
            ("subagent", r#"{"role": "poet", "task": "a haiku"}"#),
        ])
        .text(r#"{"steps": ["say hello", "say your name", "say goodbye"]}"#)
        .text("Hello.")
        .text("I am Halo.")
        .text("Goodbye.")
        .text("Soft rain on the roof") // the poet
        .text("Done.");
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Plan::new())
        .unwrap()
        .tool(Subagent::new())
        .unwrap()
        .build();
    let mut tagged = Vec::new();
    {
        let mut events = std::pin::pin!(agent.stream_text("Greet me, then a haiku."));
        while let Some(event) = events.next().await {
            if let AgentEvent::Inner(inner) = event.unwrap()
                && let AgentEvent::TextDelta(text) = &inner.event
            {
                tagged.push((inner.agent.clone(), inner.depth, text.clone()));
            }
        }
    }
    model.assert_consumed();
    let tag = |name: &str, text: &str| (name.to_string(), 1, text.to_string());
    assert!(tagged.contains(&tag("plan", "I am Halo.")), "{tagged:?}");
    assert!(
        tagged.contains(&tag("poet", "Soft rain on the roof")),
        "{tagged:?}"
    );
}
