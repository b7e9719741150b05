//! Handoffs (`handoff.rs`): the rest of the run and the next runs go to the agent handed
//! to, with the history and its own prefix; the result and each step name their agent; one
//! handoff per step; peers checked; a restored run (state or journal) continues with the
//! agent handed to; the receiving agent's history filter.

use std::sync::Arc;

use futures::StreamExt as _;
use halo_core::handoff::{Handoff, without_tool_calls};
use halo_core::testing::ScriptedModel;
use halo_core::{
    AgentEvent, CacheVerdict, HaloAgent, HaloError, JournalEvent, MemoryStore, Message,
    RewriteKind, SessionStore,
};
use serde_json::json;

const TRIAGE: &str = "You route customers to the right desk.";
const BILLING: &str = "You handle refunds and invoices.";

fn triage(model: &ScriptedModel) -> halo_core::HaloAgentBuilder {
    HaloAgent::builder(model.clone())
        .name("triage")
        .system(TRIAGE)
        .handoff(Handoff::to("billing").description("Refunds and invoices."))
        .unwrap()
}

fn billing(model: &ScriptedModel) -> halo_core::HaloAgentBuilder {
    HaloAgent::builder(model.clone())
        .name("billing")
        .system(BILLING)
        .handoff(Handoff::to("triage"))
        .unwrap()
}

#[tokio::test]
async fn a_handoff_hands_the_rest_of_the_run_to_the_other_agent_with_the_history() {
    let model = ScriptedModel::new()
        .tool_call("transfer_to_billing", json!({}))
        .text("Your refund is on its way.");
    let mut agent = triage(&model)
        .build()
        .with_peers([billing(&model).build()])
        .unwrap();
    let mut events = Vec::new();
    {
        let mut stream = std::pin::pin!(agent.stream_text("I was charged twice."));
        while let Some(event) = stream.next().await {
            events.push(event.unwrap());
        }
    }
    model.assert_consumed();
    let Some(AgentEvent::Finish(out)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(out.text, "Your refund is on its way.");
    assert_eq!(out.agent.as_deref(), Some("billing"));
    let makers: Vec<_> = out.steps.iter().map(|s| s.agent.as_deref()).collect();
    assert_eq!(makers, [Some("triage"), Some("billing")]);
    assert!(events.contains(&AgentEvent::Handoff {
        from: Some("triage".into()),
        to: "billing".into()
    }));

    let requests = model.requests();
    assert_eq!(requests[0].tool_names, ["transfer_to_billing"]);
    assert_eq!(requests[1].tool_names, ["transfer_to_triage"]);
    assert_ne!(requests[0].fingerprint, requests[1].fingerprint);
    assert_eq!(
        requests[1].prefix_bytes,
        billing(&model).build().prefix().canonical_bytes()
    );
    // The history goes on: the question, the transfer call and its result.
    assert_eq!(requests[1].history.len(), 3);
    assert_eq!(
        requests[1].history[0],
        Message::user("I was charged twice.")
    );
    let Message::Tool(result) = &requests[1].history[2] else {
        panic!("{:?}", requests[1].history)
    };
    assert_eq!(result.content, "the conversation was handed to billing");
    // One prefix change, the ledger's one expected miss.
    assert_eq!(out.steps[1].cache.verdict, CacheVerdict::ExpectedMiss);
    assert_eq!(out.stats.prefix_fingerprint_changes, 1);
    assert_eq!(out.stats.cache_busts, 0);
    // The next turn is billing's too.
    assert_eq!(agent.name(), Some("billing"));
    assert_eq!(agent.prefix().system(), BILLING);
}

#[tokio::test]
async fn a_restored_run_state_and_a_restored_journal_continue_with_the_agent_handed_to() {
    let model = ScriptedModel::new()
        .tool_call("transfer_to_billing", json!({}))
        .text("Refunded.")
        .text("Anything else is billing's too.") // after the state is restored
        .text("Still billing."); // after the journal is restored
    let store = Arc::new(MemoryStore::new());
    let mut agent = triage(&model)
        .session(store.clone())
        .build()
        .with_peers([billing(&model).build()])
        .unwrap();
    agent.generate_text("Refund me.").await.unwrap();
    let journal = store.load(agent.session_name()).await.unwrap();
    assert!(journal.iter().any(|e| matches!(e,
        JournalEvent::Handoff { from, to, .. } if from.as_deref() == Some("triage") && to == "billing")));

    let saved = serde_json::to_string(agent.run_state()).unwrap();
    let mut restored = triage(&model)
        .run_state(serde_json::from_str(&saved).unwrap())
        .build()
        .with_peers([billing(&model).build()])
        .unwrap();
    assert_eq!(restored.name(), Some("billing"));
    let out = restored.generate_text("And the invoice?").await.unwrap();
    assert_eq!(out.agent.as_deref(), Some("billing"));

    let mut from_journal = triage(&model)
        .session(store.clone())
        .build()
        .with_peers([billing(&model).build()])
        .unwrap();
    let out = from_journal.generate_text("Who is this?").await.unwrap();
    assert_eq!(out.agent.as_deref(), Some("billing"));
    model.assert_consumed();
    let requests = model.requests();
    let billing_prefix = billing(&model).build().prefix().fingerprint();
    assert_eq!(requests[2].fingerprint, billing_prefix);
    assert_eq!(requests[3].fingerprint, billing_prefix);
}

#[tokio::test]
async fn the_receiving_agents_history_filter_shapes_what_it_continues_with() {
    let model = ScriptedModel::new()
        .tool_call("transfer_to_billing", json!({}))
        .text("Refunded.");
    let billing = billing(&model).handoff_filter(without_tool_calls).build();
    let mut agent = triage(&model).build().with_peers([billing]).unwrap();
    let mut rewrites = Vec::new();
    {
        let mut stream = std::pin::pin!(agent.stream_text("Refund me."));
        while let Some(event) = stream.next().await {
            if let AgentEvent::HistoryRewritten(rewrite) = event.unwrap() {
                rewrites.push(*rewrite);
            }
        }
    }
    let requests = model.requests();
    assert_eq!(requests[1].history, [Message::user("Refund me.")]);
    assert_eq!(rewrites.len(), 1);
    assert_eq!(rewrites[0].kind, RewriteKind::Handoff);
    assert_eq!(
        (rewrites[0].messages_before, rewrites[0].messages_after),
        (3, 1)
    );
    // Still the one expected miss, no bust.
    let verdicts: Vec<_> = agent
        .cache_ledger()
        .checks()
        .map(|c| c.verdict.clone())
        .collect();
    assert_eq!(verdicts[1], CacheVerdict::ExpectedMiss);
    assert_eq!(agent.cache_ledger().busts(), 0);
}

#[tokio::test]
async fn of_two_handoffs_in_one_step_one_takes_effect_and_a_target_not_among_the_peers_is_refused()
{
    let model = ScriptedModel::new()
        .tool_calls_raw(&[("transfer_to_billing", "{}"), ("transfer_to_sales", "{}")])
        .text("Billing here.");
    let triage = triage(&model)
        .handoff(Handoff::to("sales"))
        .unwrap()
        .build();
    let sales = HaloAgent::builder(model.clone())
        .name("sales")
        .system("You sell.")
        .build();
    let mut agent = triage.with_peers([billing(&model).build(), sales]).unwrap();
    let out = agent.generate_text("Hi").await.unwrap();
    assert_eq!(out.agent.as_deref(), Some("billing"));
    let results = &out.steps[0].tool_results;
    let handed: Vec<_> = results.iter().filter(|r| !r.is_error).collect();
    assert_eq!(handed.len(), 1, "{results:?}");
    let refused = results.iter().find(|r| r.is_error).unwrap();
    assert!(
        refused
            .content
            .starts_with("only one handoff per turn takes effect"),
        "{refused:?}"
    );

    // An agent used without its peers: the handoff is refused, the agent goes on.
    let model = ScriptedModel::new()
        .tool_call("transfer_to_billing", json!({}))
        .text("I will help you myself.");
    let mut alone = triage_alone(&model);
    let out = alone.generate_text("Refund me.").await.unwrap();
    assert_eq!(out.agent.as_deref(), Some("triage"));
    let result = &out.steps[0].tool_results[0];
    assert!(result.is_error);
    assert!(
        result.content.contains("no agent named `billing`"),
        "{result:?}"
    );
}

fn triage_alone(model: &ScriptedModel) -> HaloAgent {
    triage(model).build()
}

#[test]
fn with_peers_refuses_unnamed_duplicate_and_unknown_agents() {
    let model = ScriptedModel::new();
    let unnamed = HaloAgent::builder(model.clone()).build();
    let err = unnamed.with_peers([billing(&model).build()]).unwrap_err();
    assert!(matches!(&err, HaloError::InvalidAgents { message } if message.contains("no name")));

    let err = triage(&model)
        .build()
        .with_peers([billing(&model).build(), billing(&model).build()])
        .unwrap_err();
    assert!(
        err.to_string().contains("two agents are named `billing`"),
        "{err}"
    );

    // billing hands to triage, which is there; triage hands to billing, which is not.
    let err = triage(&model)
        .build()
        .with_peers(std::iter::empty())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("`triage` hands off to `billing`, which is not among the agents"),
        "{err}"
    );
    let agent = triage(&model)
        .build()
        .with_peers([billing(&model).build()])
        .unwrap();
    assert_eq!(agent.peer_names(), ["billing", "triage"]);
}
