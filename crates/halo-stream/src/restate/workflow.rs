//! Workflows run durably: [`HaloWorkflow`], one Restate virtual object per workflow run.

use std::sync::Arc;

use halo_core::workflow::{StepCall, Workflow, WorkflowEffect, WorkflowError, WorkflowState};
use restate_sdk::prelude::*;
use serde_json::Value;

use super::{FactoryError, terminal};

/// The name of the workflow object in Restate (the path segment of its handlers).
pub const WORKFLOW_SERVICE: &str = "HaloWorkflow";

/// The state key of the workflow's state: its input and its finished steps' outputs.
const WORKFLOW_STATE: &str = "workflow_state";

/// What builds the workflow of a run: called with the object's key at the start of every
/// run and of every replay.
type WorkflowFactory = dyn Fn(&str) -> Result<Workflow, FactoryError> + Send + Sync;

/// The virtual object that runs a [`Workflow`] durably (Restate name `HaloWorkflow`, one
/// object per workflow run).
///
/// Its `run` handler drives halo-core's [`Workflow`]: [`Workflow::next`] names the steps
/// that can run now, each runs inside one journaled step named `step:NAME` (the branches of
/// a fan-out one after the other: the Rust SDK journals one `ctx.run` at a time), and the
/// [`WorkflowState`] is saved in the object's state after every step. When the worker dies,
/// Restate sends the invocation to another worker: the finished steps come back from the
/// journal without their agents running again, and only the step in flight runs again,
/// from its start.
///
/// | Handler | Kind | Input → output |
/// |---|---|---|
/// | `run` | exclusive | the workflow's input (any JSON) → [`WorkflowState`] |
/// | `view` | shared | `()` → `Option<`[`WorkflowState`]`>` |
///
/// ```no_run
/// use std::sync::Arc;
/// use halo_core::{HaloAgent, testing::ScriptedModel};
/// use halo_core::workflow::{Step, Workflow};
/// use halo_stream::restate::{HaloSession, HaloWorkflow, endpoint_with};
///
/// let writer = Arc::new(
///     HaloAgent::builder(ScriptedModel::new().text("A draft."))
///         .system("You write.")
///         .build()
///         .as_tool("writer", "Writes a draft."),
/// );
/// let workflows = HaloWorkflow::new(move |_run: &str| {
///     Ok(Workflow::new("article").then(Step::text("write", writer.clone(), |s| {
///         Ok(format!("Write about {}.", s.input::<String>()?))
///     })))
/// });
/// let sessions = HaloSession::new(|id: &str| {
///     Ok(HaloAgent::builder(ScriptedModel::new().text("Hello!")).session_id(id))
/// });
/// // `POST /HaloWorkflow/{run}/run` with the input as its JSON body starts a run.
/// let endpoint = endpoint_with(sessions, Some(workflows));
/// ```
#[derive(Clone)]
pub struct HaloWorkflow {
    factory: Arc<WorkflowFactory>,
}

impl std::fmt::Debug for HaloWorkflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaloWorkflow").finish_non_exhaustive()
    }
}

impl HaloWorkflow {
    /// A workflow object whose workflows `factory` builds, from the run's key.
    ///
    /// The factory must give the same workflow for the same key every time — the same
    /// steps, agents, prompts and conditions — since a replay after a crash goes on with a
    /// fresh one from the journaled outputs.
    pub fn new(
        factory: impl Fn(&str) -> Result<Workflow, FactoryError> + Send + Sync + 'static,
    ) -> Self {
        HaloWorkflow {
            factory: Arc::new(factory),
        }
    }
}

/// The journaled step's name of a workflow step.
fn step_name(call: &StepCall) -> String {
    format!("step:{}", call.step)
}

/// A workflow error as Restate's terminal error: the workflow's own mistakes (a prompt or a
/// condition reading an output it cannot) are 400, a step's agent failing is 500.
fn workflow_error(e: &WorkflowError) -> HandlerError {
    match e {
        WorkflowError::Output { .. } | WorkflowError::Input(_) | WorkflowError::Invalid(_) => {
            terminal(400, e.to_string())
        }
        _ => terminal(500, e.to_string()),
    }
}

#[restate_sdk::object(name = "HaloWorkflow", client_visibility = "pub(crate)")]
impl HaloWorkflow {
    /// Runs the workflow on `input` to its end and returns its state (each finished step's
    /// output). Each step is a journaled step; run again on a finished workflow it returns
    /// the saved state and runs nothing.
    ///
    /// # Errors
    /// Terminal errors: 500 when the factory fails or a step's agent fails (the steps
    /// finished before it are kept: running again goes on at the failed step); 400 for an
    /// invalid workflow or a prompt that cannot be built; 409 when this key holds another
    /// workflow or this one on another input.
    #[handler]
    async fn run(
        &self,
        ctx: ObjectContext<'_>,
        input: Json<Value>,
    ) -> Result<Json<WorkflowState>, HandlerError> {
        let workflow = (self.factory)(ctx.key())
            .map_err(|e| terminal(500, format!("cannot build the workflow: {e}")))?;
        workflow.validate().map_err(|e| workflow_error(&e))?;
        let input = input.into_inner();
        let saved: Option<Json<WorkflowState>> = ctx.get(WORKFLOW_STATE).await?;
        let mut state = match saved.map(Json::into_inner) {
            Some(state) if state.workflow != workflow.name() || state.input != input => {
                return Err(terminal(
                    409,
                    format!(
                        "{} holds the workflow `{}` on the input {}; run this one under another key",
                        ctx.key(),
                        state.workflow,
                        state.input
                    ),
                ));
            }
            Some(state) => state,
            None => WorkflowState::new(workflow.name(), input),
        };
        loop {
            let calls = match workflow.next(&state).map_err(|e| workflow_error(&e))? {
                WorkflowEffect::Run { calls } => calls,
                WorkflowEffect::Done => break,
                other => {
                    return Err(terminal(
                        500,
                        format!("this driver does not know the workflow effect {other:?}"),
                    ));
                }
            };
            // One journaled step per workflow step, each awaited before the next: the Rust
            // SDK journals one `ctx.run` at a time, so the branches of a fan-out run one
            // after the other here. Each output is saved as its step finishes.
            for call in &calls {
                let wf = &workflow;
                let Json(output) = ctx
                    .run(|| async move {
                        match wf.run_step(call, None).await {
                            Ok((output, _stats)) => Ok(Json(output)),
                            Err(e) => Err(workflow_error(&e)),
                        }
                    })
                    .name(step_name(call))
                    .await?;
                state.record(call.step.clone(), output);
                ctx.set(WORKFLOW_STATE, Json(state.clone()));
            }
        }
        Ok(Json(state))
    }

    /// The workflow's state as of its last finished step (`null` before its first run).
    ///
    /// # Errors
    /// Only Restate's own (state that does not read).
    #[handler]
    async fn view(
        &self,
        ctx: SharedObjectContext<'_>,
    ) -> Result<Json<Option<WorkflowState>>, HandlerError> {
        let saved: Option<Json<WorkflowState>> = ctx.get(WORKFLOW_STATE).await?;
        Ok(Json(saved.map(Json::into_inner)))
    }
}
