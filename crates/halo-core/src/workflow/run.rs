//! The in-process workflow driver: [`Workflow::run`], over a session store, and
//! [`Workflow::run_step`], one step.

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use serde::Serialize;
use serde_json::Value;

use super::state::{WorkflowRecord, WorkflowState};
use super::{StepCall, Workflow, WorkflowEffect, WorkflowError};
use crate::inner::EventSink;
use crate::message::ToolCall;
use crate::session::{Append, JournalEvent, SessionStore};
use crate::stats::AgentStats;
use crate::tool::ToolContext;

/// What [`Workflow::run`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowRun {
    /// The final state: every step on the path done.
    pub state: WorkflowState,
    /// The steps this run ran, in the order they finished (a continued run leaves out the
    /// ones done before).
    pub ran: Vec<String>,
    /// The steps that were done already when this run began.
    pub resumed: Vec<String>,
    /// The counters of this run's model calls.
    pub stats: AgentStats,
}

impl Workflow {
    /// Runs the workflow on `input` in the session `session` of `store`, or goes on with
    /// the one the session holds: see the [module docs](super). Each finished step's output
    /// is appended to the session before the next step starts; steps that can run at once
    /// (a fan-out) do.
    ///
    /// # Errors
    /// - [`WorkflowError::Step`] when a step's agent fails (what finished before is saved;
    ///   running again goes on at that step);
    /// - [`WorkflowError::OtherRun`] when the session holds another workflow or this one
    ///   on another input;
    /// - [`WorkflowError::Session`] when the store fails (a concurrent writer is
    ///   [`SessionError::Conflict`](crate::SessionError::Conflict));
    /// - [`WorkflowError::Invalid`], and the prompts' and conditions' errors.
    ///
    /// # Cancel safety
    /// Dropping the future loses no finished step: each is saved as it finishes; the steps
    /// in flight run again next time.
    pub async fn run(
        &self,
        input: impl Serialize,
        store: &dyn SessionStore,
        session: &str,
    ) -> Result<WorkflowRun, WorkflowError> {
        self.run_watched(input, store, session, None).await
    }

    /// [`run`](Self::run), the steps' agents' events sent to `events`
    /// ([`crate::inner`]): each tagged with the step's agent, its `call_id` the step's name.
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub async fn run_watched(
        &self,
        input: impl Serialize,
        store: &dyn SessionStore,
        session: &str,
        events: Option<EventSink>,
    ) -> Result<WorkflowRun, WorkflowError> {
        self.validate()?;
        let input = serde_json::to_value(input)
            .map_err(|e| WorkflowError::Input(format!("cannot serialize it: {e}")))?;
        let journal = store.load(session).await?;
        let mut seq = journal.len() as u64;
        let mut state = match WorkflowState::from_journal(&journal) {
            Some(state) if state.workflow != self.name || state.input != input => {
                return Err(WorkflowError::OtherRun {
                    session: session.to_string(),
                    found: format!(
                        "the workflow `{}` on the input {}",
                        state.workflow, state.input
                    ),
                });
            }
            Some(state) => state,
            None => {
                let state = WorkflowState::new(self.name.clone(), input.clone());
                let record = WorkflowRecord::Started {
                    workflow: self.name.clone(),
                    input,
                };
                seq = self.save(store, session, seq, record).await?;
                state
            }
        };
        let resumed: Vec<String> = state.outputs.keys().cloned().collect();
        let mut ran = Vec::new();
        let mut stats = AgentStats::default();
        loop {
            let calls = match self.next(&state)? {
                WorkflowEffect::Done => break,
                WorkflowEffect::Run { calls } => calls,
            };
            let mut running: FuturesUnordered<_> = calls
                .iter()
                .map(|call| {
                    let events = events.clone();
                    async move { (call, self.run_step(call, events).await) }
                })
                .collect();
            while let Some((call, outcome)) = running.next().await {
                let (output, step_stats) = outcome?;
                stats.add_delegated(&step_stats);
                let record = WorkflowRecord::StepDone {
                    step: call.step.clone(),
                    output: output.clone(),
                };
                seq = self.save(store, session, seq, record).await?;
                state.record(call.step.clone(), output);
                ran.push(call.step.clone());
            }
        }
        Ok(WorkflowRun {
            state,
            ran,
            resumed,
            stats,
        })
    }

    /// Runs one step ([`WorkflowEffect::Run`]): its agent on the call's prompt, as a tool
    /// call named after the step (so its events, sent to `events`, carry the step's name
    /// as their `call_id`). Returns the step's output — the final text as a JSON string, or
    /// the typed answer — and the counters of its model calls.
    ///
    /// # Errors
    /// [`WorkflowError::Step`]; [`WorkflowError::Invalid`] for a step this workflow does
    /// not have.
    pub async fn run_step(
        &self,
        call: &StepCall,
        events: Option<EventSink>,
    ) -> Result<(Value, AgentStats), WorkflowError> {
        let step = self.step(&call.step).ok_or_else(|| {
            WorkflowError::Invalid(format!("the workflow has no step `{}`", call.step))
        })?;
        let cx = ToolContext::detached(ToolCall::new(&call.step, step.agent.name(), "{}"))
            .with_events(events);
        let failed = |source| WorkflowError::Step {
            step: call.step.clone(),
            source,
        };
        match &step.output {
            None => {
                let (result, stats) = step.agent.run(&call.prompt, &cx).await.map_err(failed)?;
                Ok((Value::String(result.text), stats))
            }
            Some(output) => {
                let (result, stats) = step
                    .agent
                    .run_object(output(), &call.prompt, &cx)
                    .await
                    .map_err(failed)?;
                Ok((result.object, stats))
            }
        }
    }

    /// Appends `record` at `seq`; returns the session's new length.
    async fn save(
        &self,
        store: &dyn SessionStore,
        session: &str,
        seq: u64,
        record: WorkflowRecord,
    ) -> Result<u64, WorkflowError> {
        let at_ms = self.clock.now_ms();
        let events = [JournalEvent::Workflow { record, at_ms }];
        Ok(store
            .append(Append::new(session, seq, &events, at_ms))
            .await?)
    }
}
