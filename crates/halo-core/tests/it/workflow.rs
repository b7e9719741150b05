//! Workflows (`workflow/`): a run dropped between two steps goes on at the next step and
//! never runs a finished one again; the session holds one workflow on one input; `next` is
//! pure, so a driver of its own that records the steps' outputs ends where `run` ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::{Either, select};
use halo_core::testing::ScriptedModel;
use halo_core::workflow::{
    Branch, Step, Workflow, WorkflowEffect, WorkflowError, WorkflowRecord, WorkflowState, parallel,
};
use halo_core::{
    Append, HaloAgent, JournalEvent, Lease, MemoryStore, ModelAdapter, ModelError, ModelRequest,
    ModelResponse, NamedAgent, SessionError, SessionStore, async_trait,
};
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Review {
    approved: bool,
}

fn agent(name: &str, model: impl ModelAdapter + 'static) -> Arc<NamedAgent> {
    Arc::new(
        HaloAgent::builder(model)
            .name(name)
            .build()
            .as_tool(name, "A step's agent."),
    )
}

/// research (two angles at once) → write → review → revise when the review rejects.
fn article(
    history: Arc<NamedAgent>,
    biology: Arc<NamedAgent>,
    writer: Arc<NamedAgent>,
    reviewer: Arc<NamedAgent>,
) -> Workflow {
    Workflow::new("article")
        .then(parallel([
            Step::text("history", history, |s| {
                Ok(format!("History of {}", s.input::<String>()?))
            }),
            Step::text("biology", biology, |s| {
                Ok(format!("Biology of {}", s.input::<String>()?))
            }),
        ]))
        .then(Step::text("write", writer.clone(), |s| {
            Ok(format!(
                "Write from: {} / {}",
                s.text("history")?,
                s.text("biology")?
            ))
        }))
        .then(Step::object::<Review>("review", reviewer, |s| {
            Ok(format!("Review: {}", s.text("write")?))
        }))
        .then(
            Branch::when("review", |r: &Review| !r.approved).then(Step::text(
                "revise",
                writer,
                |s| Ok(format!("Revise: {}", s.text("write")?)),
            )),
        )
}

/// A model that never answers: a step on it runs until the run is dropped.
struct Stuck;

#[async_trait]
impl ModelAdapter for Stuck {
    fn provider(&self) -> &str {
        "stuck"
    }
    fn model_name(&self) -> &str {
        "stuck"
    }
    async fn generate(&self, _: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        futures::future::pending().await
    }
}

/// A store that says when a step's output was saved.
struct Watched {
    inner: MemoryStore,
    step: &'static str,
    saved: Arc<AtomicBool>,
}

#[async_trait]
impl SessionStore for Watched {
    async fn append(&self, append: Append<'_>) -> Result<u64, SessionError> {
        let done = append.events.iter().any(|e| {
            matches!(e, JournalEvent::Workflow { record: WorkflowRecord::StepDone { step, .. }, .. } if step == self.step)
        });
        let n = self.inner.append(append).await?;
        if done {
            self.saved.store(true, Ordering::SeqCst);
        }
        Ok(n)
    }
    async fn load(&self, session: &str) -> Result<Vec<JournalEvent>, SessionError> {
        self.inner.load(session).await
    }
    async fn list(&self) -> Result<Vec<halo_core::SessionInfo>, SessionError> {
        self.inner.list().await
    }
    async fn delete(&self, session: &str) -> Result<(), SessionError> {
        self.inner.delete(session).await
    }
    async fn acquire(
        &self,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Lease, SessionError> {
        self.inner.acquire(session, owner, ttl_ms, now_ms).await
    }
    async fn renew(&self, lease: &Lease, ttl_ms: u64, now_ms: u64) -> Result<Lease, SessionError> {
        self.inner.renew(lease, ttl_ms, now_ms).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), SessionError> {
        self.inner.release(lease).await
    }
}

#[tokio::test]
async fn a_workflow_dropped_between_two_steps_goes_on_at_the_next_and_never_redoes_a_finished_one()
{
    let store = Watched {
        inner: MemoryStore::new(),
        step: "write",
        saved: Arc::new(AtomicBool::new(false)),
    };
    // The first process: research and write finish; the review never answers, and the
    // process dies there (the run's future is dropped).
    let (history, biology, writer) = (
        ScriptedModel::new().text("Hunted for fur."),
        ScriptedModel::new().text("They hold hands."),
        ScriptedModel::new().text("A draft."),
    );
    let first = article(
        agent("history", history.clone()),
        agent("biology", biology.clone()),
        agent("writer", writer.clone()),
        agent("reviewer", Stuck),
    );
    {
        let run = std::pin::pin!(first.run("otters", &store, "wf"));
        let saved = store.saved.clone();
        let write_saved = std::pin::pin!(async move {
            while !saved.load(Ordering::SeqCst) {
                tokio::task::yield_now().await;
            }
        });
        match select(run, write_saved).await {
            Either::Left((run, _)) => panic!("the run ended: {run:?}"),
            Either::Right(((), _)) => {} // dropped here, inside the review
        }
    }
    for model in [&history, &biology, &writer] {
        model.assert_consumed();
    }

    // The second process: new agents whose models would give other answers.
    let (history2, biology2, writer2, reviewer2) = (
        ScriptedModel::new().text("never asked"),
        ScriptedModel::new().text("never asked"),
        ScriptedModel::new().text("A better draft."),
        ScriptedModel::new().text(r#"{"approved": false}"#),
    );
    let second = article(
        agent("history", history2.clone()),
        agent("biology", biology2.clone()),
        agent("writer", writer2.clone()),
        agent("reviewer", reviewer2.clone()),
    );
    let run = second.run("otters", &store, "wf").await.unwrap();
    assert_eq!(run.resumed, ["biology", "history", "write"]);
    assert_eq!(run.ran, ["review", "revise"]);
    assert!(history2.requests().is_empty() && biology2.requests().is_empty());
    // The review read the first process's draft; the revision too.
    let review = format!("{:?}", reviewer2.requests()[0].history[0]);
    assert!(review.contains("Review: A draft."), "{review}");
    let revise = format!("{:?}", writer2.requests()[0].history[0]);
    assert!(revise.contains("Revise: A draft."), "{revise}");
    assert_eq!(run.state.text("revise").unwrap(), "A better draft.");
    // Each step's output is in the journal once.
    let journal = store.load("wf").await.unwrap();
    let done: Vec<&str> = journal
        .iter()
        .filter_map(|e| match e {
            JournalEvent::Workflow {
                record: WorkflowRecord::StepDone { step, .. },
                ..
            } => Some(step.as_str()),
            _ => None,
        })
        .collect();
    let mut sorted = done.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["biology", "history", "review", "revise", "write"]);
}

#[tokio::test]
async fn a_session_holds_one_workflow_on_one_input() {
    let store = MemoryStore::new();
    let one = |text: &str| {
        Workflow::new("greet").then(Step::text(
            "hello",
            agent("greeter", ScriptedModel::new().text(text)),
            |s| Ok(format!("Greet {}", s.input::<String>()?)),
        ))
    };
    one("Hello, Ana.").run("Ana", &store, "s").await.unwrap();
    let err = one("x").run("Bo", &store, "s").await.unwrap_err();
    assert!(
        matches!(&err, WorkflowError::OtherRun { found, .. } if found.contains("\"Ana\"")),
        "{err}"
    );
    let other =
        Workflow::new("other").then(Step::text("x", agent("a", ScriptedModel::new()), |_| {
            Ok(String::new())
        }));
    let err = other.run("Ana", &store, "s").await.unwrap_err();
    assert!(err.to_string().contains("the workflow `greet`"), "{err}");
    // Two steps of one name are refused before anything runs.
    let twice = Workflow::new("twice")
        .then(Step::text("a", agent("a", ScriptedModel::new()), |_| {
            Ok("x".into())
        }))
        .then(Step::text("a", agent("a", ScriptedModel::new()), |_| {
            Ok("x".into())
        }));
    assert!(matches!(
        twice.run("x", &store, "t").await,
        Err(WorkflowError::Invalid(m)) if m.contains("two steps are named `a`")
    ));
}

#[tokio::test]
async fn a_driver_of_its_own_recording_each_output_ends_where_run_ends() {
    let models = || {
        (
            ScriptedModel::new().text("Hunted for fur."),
            ScriptedModel::new().text("They hold hands."),
            ScriptedModel::new().text("A draft."),
            ScriptedModel::new().text(r#"{"approved": true}"#),
        )
    };
    let (h, b, w, r) = models();
    let workflow = article(
        agent("history", h),
        agent("biology", b),
        agent("writer", w),
        agent("reviewer", r),
    );
    let mut state = WorkflowState::new("article", serde_json::json!("otters"));
    let mut effects = Vec::new();
    loop {
        // As a durable driver would: the state saved and restored between steps, each
        // effect asked twice (pure), each call's output recorded.
        state = serde_json::from_str(&serde_json::to_string(&state).unwrap()).unwrap();
        let effect = workflow.next(&state).unwrap();
        assert_eq!(workflow.next(&state).unwrap(), effect);
        let WorkflowEffect::Run { calls } = effect else {
            break;
        };
        effects.push(calls.iter().map(|c| c.step.clone()).collect::<Vec<_>>());
        for call in calls {
            let (output, _) = workflow.run_step(&call, None).await.unwrap();
            state.record(call.step, output);
        }
    }
    // The fan-out's two steps together; the approved review takes no revision.
    assert_eq!(
        effects,
        [vec!["history", "biology"], vec!["write"], vec!["review"]]
    );
    let (h, b, w, r) = models();
    let workflow = article(
        agent("history", h),
        agent("biology", b),
        agent("writer", w),
        agent("reviewer", r),
    );
    let run = workflow
        .run("otters", &MemoryStore::new(), "wf")
        .await
        .unwrap();
    assert_eq!(run.state, state);
    assert_eq!(run.stats.steps, 4);
}
