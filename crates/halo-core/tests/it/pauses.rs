//! A paused run is data: approvals and client-side tools pause a run in a state that
//! serializes and that the session journal keeps; another agent (another process) restores
//! it and continues with the caller's answers. A new turn over an open step is a typed
//! error, and a call that started and has no result is closed as "may have run".

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use halo_core::request::{MAY_HAVE_RUN, unapproved};
use halo_core::testing::ScriptedModel;
use halo_core::{
    CallStatus, HaloAgent, HaloError, JournalEvent, MemoryStore, Message, NoArgs, RunState, Tool,
    ToolAnnotations, ToolCallDecision, ToolContext, ToolError, ToolHook, ToolOutput, ToolSpec,
    Turn, async_trait,
};
use serde_json::{Value, json};

/// Counts its runs; needs approval when asked to.
#[derive(Clone)]
struct Deploy {
    runs: Arc<AtomicUsize>,
    approval: bool,
}

impl Deploy {
    fn new(approval: bool) -> Self {
        Deploy {
            runs: Arc::default(),
            approval,
        }
    }
}

impl Tool for Deploy {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "deploy"
    }
    fn description(&self) -> &str {
        "Deploys."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default().with_needs_approval(self.approval)
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        let n = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(format!("deployed ({n})").into())
    }
}

/// Asks for approval of every `deploy` call, as a permission policy with no one to ask
/// in process does.
struct AskForDeploys;
#[async_trait]
impl ToolHook for AskForDeploys {
    async fn before_tool_call(&self, cx: &ToolContext, _: &Value) -> ToolCallDecision {
        if cx.call().name == "deploy" {
            ToolCallDecision::Ask("it deploys to production".into())
        } else {
            ToolCallDecision::Allow
        }
    }
}

fn agent(model: &ScriptedModel, store: &MemoryStore, deploy: &Deploy, pause: bool) -> HaloAgent {
    let mut builder = HaloAgent::builder(model.clone())
        .system("You deploy.")
        .tool(deploy.clone())
        .unwrap()
        .hook(AskForDeploys)
        .session(Arc::new(store.clone()));
    if pause {
        builder = builder.pause_for_approvals();
    }
    builder.build()
}

#[tokio::test]
async fn a_run_paused_for_approval_is_restored_from_the_journal_in_a_new_agent_and_finishes() {
    let model = ScriptedModel::new()
        .tool_calls_raw(&[("deploy", "{}"), ("deploy", "{}")])
        .text("One deployed, one not.");
    let store = MemoryStore::new();
    let deploy = Deploy::new(false);

    // The first process: the run pauses with both calls awaiting a decision, and exits.
    let mut first = agent(&model, &store, &deploy, true);
    let paused = first.generate_text("Deploy twice.").await.unwrap();
    assert_eq!(paused.text, "");
    let waiting: Vec<(String, String)> = paused
        .pending_approvals
        .iter()
        .map(|a| (a.call.name.to_string(), a.reason.clone()))
        .collect();
    assert_eq!(
        waiting,
        [
            ("deploy".to_string(), "it deploys to production".to_string()),
            ("deploy".to_string(), "it deploys to production".to_string())
        ]
    );
    let ids: Vec<String> = paused
        .pending_approvals
        .iter()
        .map(|a| a.call.id.to_string())
        .collect();
    assert_eq!(deploy.runs.load(Ordering::SeqCst), 0, "nothing ran");
    drop(first);

    // The second process: restored from the journal, it approves one call and rejects the
    // other; the run finishes.
    let mut second = agent(&model, &store, &deploy, true);
    second.restore_session().await.unwrap();
    let restored: Vec<String> = second
        .pending_approvals()
        .iter()
        .map(|a| a.call.id.to_string())
        .collect();
    assert_eq!(restored, ids, "the pause is in the journal");
    assert_eq!(
        second.approve(&ids[0]).await.unwrap(),
        None,
        "one still waits"
    );
    let Some(Turn::Answer(answer)) = second.reject(&ids[1], "not on a Friday").await.unwrap()
    else {
        panic!("the run finishes")
    };
    assert_eq!(answer.text, "One deployed, one not.");
    assert_eq!(
        deploy.runs.load(Ordering::SeqCst),
        1,
        "the approved call ran once"
    );
    let log = second.log().to_vec();
    let Message::Tool(approved) = &log[2] else {
        panic!()
    };
    let Message::Tool(rejected) = &log[3] else {
        panic!()
    };
    assert_eq!(approved.content, "deployed (1)");
    assert!(rejected.is_error);
    assert_eq!(
        rejected.content,
        "the user rejected this call, so `deploy` did not run: not on a Friday; do not retry it unchanged: go on without it, try another way, or ask the user"
    );
    // The decisions are in the journal.
    let events = store.events();
    assert!(events.iter().any(|e| matches!(
        e,
        JournalEvent::Call { status: CallStatus::Approved, call_id, .. } if *call_id == ids[0]
    )));
    model.assert_consumed();
}

#[tokio::test]
async fn an_approval_no_one_can_answer_is_denied_at_once() {
    let model = ScriptedModel::new()
        .tool_call("deploy", json!({}))
        .text("It needs your approval.");
    let store = MemoryStore::new();
    let deploy = Deploy::new(false);
    // No pause: no one would answer.
    let mut agent = agent(&model, &store, &deploy, false);
    let out = agent.generate_text("Deploy.").await.unwrap();
    assert_eq!(out.text, "It needs your approval.");
    assert!(out.pending_approvals.is_empty());
    let result = &out.steps[0].tool_results[0];
    let call = &out.steps[0].message.tool_calls[0];
    assert_eq!(*result, unapproved(call, "it deploys to production"));
    assert_eq!(
        result.content,
        "`deploy` did not run: it needs the user's approval (it deploys to production), which no one can give in this session; go on without it, or ask the user to allow it"
    );
    assert_eq!(deploy.runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_tool_marked_as_needing_approval_pauses_and_an_unknown_decision_is_a_typed_error() {
    let model = ScriptedModel::new()
        .tool_call("deploy", json!({}))
        .text("Deployed.");
    let deploy = Deploy::new(true);
    let mut agent = HaloAgent::builder(model.clone())
        .tool(deploy.clone())
        .unwrap()
        .pause_for_approvals()
        .build();
    let paused = agent.generate_text("Deploy.").await.unwrap();
    let id = paused.pending_approvals[0].call.id.to_string();
    assert_eq!(
        paused.pending_approvals[0].reason,
        "`deploy` runs only once approved"
    );
    assert!(matches!(
        agent.approve("nope").await,
        Err(HaloError::UnknownToolCall { .. })
    ));
    // Saved and restored through serde, the pause continues in a new agent.
    let saved = serde_json::to_string(agent.run_state()).unwrap();
    let mut again = HaloAgent::builder(model.clone())
        .tool(deploy.clone())
        .unwrap()
        .pause_for_approvals()
        .run_state(serde_json::from_str::<RunState>(&saved).unwrap())
        .build();
    let Some(Turn::Answer(answer)) = again.approve(&id).await.unwrap() else {
        panic!()
    };
    assert_eq!(answer.text, "Deployed.");
    assert!(matches!(
        again.approve(&id).await,
        Err(HaloError::UnknownToolCall { .. })
    ));
    assert_eq!(deploy.runs.load(Ordering::SeqCst), 1);
}

fn weather() -> ToolSpec {
    ToolSpec::new("weather", "The weather.", json!({"type": "object"}))
}

#[tokio::test]
async fn each_submitted_result_is_journaled_at_once_and_a_restored_run_takes_the_rest() {
    let model = ScriptedModel::new()
        .tool_calls_raw(&[("weather", "{}"), ("weather", "{}")])
        .text("Sunny, then rain.");
    let store = MemoryStore::new();
    let build = || {
        HaloAgent::builder(model.clone())
            .client_tool(weather())
            .unwrap()
            .session(Arc::new(store.clone()))
            .build()
    };
    let mut first = build();
    let paused = first.generate_text("Weather?").await.unwrap();
    let ids: Vec<String> = paused
        .pending_tool_calls
        .iter()
        .map(|c| c.id.to_string())
        .collect();
    assert_eq!(
        first.submit_tool_result(&ids[0], "sunny").await.unwrap(),
        None
    );
    // The process dies between two results: the first is in the journal already.
    assert!(store.events().iter().any(|e| matches!(
        e,
        JournalEvent::ToolResult { result, .. } if result.content == "sunny"
    )));
    drop(first);
    let mut second = build();
    assert!(matches!(
        second.submit_tool_result(&ids[0], "again").await,
        Err(HaloError::DuplicateToolResult { .. })
    ));
    let Some(Turn::Answer(answer)) = second.submit_tool_result(&ids[1], "rain").await.unwrap()
    else {
        panic!()
    };
    assert_eq!(answer.text, "Sunny, then rain.");
    let results: Vec<String> = second
        .log()
        .messages()
        .filter_map(|m| match m {
            Message::Tool(r) => Some(r.content.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(results, ["sunny", "rain"]);
    model.assert_consumed();
}

#[tokio::test]
async fn a_new_turn_over_an_open_step_is_a_typed_error_naming_discard_pending() {
    let model = ScriptedModel::new()
        .tool_call("weather", json!({}))
        .text("Hello.");
    let mut agent = HaloAgent::builder(model.clone())
        .client_tool(weather())
        .unwrap()
        .build();
    let paused = agent.generate_text("Weather?").await.unwrap();
    let id = paused.pending_tool_calls[0].id.to_string();
    let err = agent.generate_text("Something else").await.unwrap_err();
    assert!(matches!(&err, HaloError::OpenStep { call_ids } if *call_ids == [id.clone()]));
    assert!(err.to_string().contains("discard_pending()"), "{err}");
    assert!(matches!(
        agent.send("And?").await,
        Err(HaloError::OpenStep { .. })
    ));
    assert_eq!(agent.log().len(), 1, "nothing was logged or lost");
    assert!(agent.discard_pending());
    assert!(!agent.discard_pending());
    let out = agent.generate_text("Something else").await.unwrap();
    assert_eq!(out.text, "Hello.");
    let texts: Vec<String> = agent.log().messages().map(Message::text).collect();
    assert_eq!(texts, ["Weather?", "Something else", "Hello."]);
}

/// Never finishes: the process dies while it runs.
struct Hangs;
impl Tool for Hangs {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "migrate"
    }
    fn description(&self) -> &str {
        "Migrates the database."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        futures::future::pending::<()>().await;
        Ok("unreachable".into())
    }
}

#[tokio::test]
async fn a_call_journaled_as_started_is_closed_as_may_have_run_after_a_crash_never_run_again() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .tool_call("migrate", json!({}))
        .text("I will check the database first.");
    let mut first = HaloAgent::builder(model.clone())
        .tool(Hangs)
        .unwrap()
        .session(Arc::new(store.clone()))
        .build();
    // The run is dropped while `migrate` runs, as a killed process would leave it.
    let run = first.generate_text("Migrate.");
    let _ = tokio::time::timeout(std::time::Duration::from_millis(50), run).await;
    drop(first);
    let events = store.events();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, JournalEvent::StepOpened { .. }))
    );
    assert!(events.iter().any(|e| matches!(
        e,
        JournalEvent::Call {
            status: CallStatus::Started,
            ..
        }
    )));
    // A new process resumes: the call is closed, not run again, and the model is told.
    let runs = Arc::new(AtomicUsize::new(0));
    struct Counts(Arc<AtomicUsize>);
    impl Tool for Counts {
        type Args = NoArgs;
        fn name(&self) -> &str {
            "migrate"
        }
        fn description(&self) -> &str {
            "Migrates the database."
        }
        async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok("migrated".into())
        }
    }
    let mut second = HaloAgent::builder(model.clone())
        .tool(Counts(runs.clone()))
        .unwrap()
        .session(Arc::new(store.clone()))
        .build();
    let out = second.resume().await.unwrap();
    assert_eq!(out.text, "I will check the database first.");
    assert_eq!(runs.load(Ordering::SeqCst), 0, "not run twice");
    let requests = model.requests();
    let Some(Message::Tool(closed)) = requests[1].history.last() else {
        panic!()
    };
    assert!(closed.is_error);
    assert_eq!(closed.content, MAY_HAVE_RUN);
    model.assert_consumed();
}
