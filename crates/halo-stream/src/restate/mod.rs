//! Durable runs on [Restate](https://restate.dev) (feature `restate`): a run that outlives
//! the process that started it.
//!
//! [`HaloSession`] is a Restate *virtual object*, one per session id, so Restate itself lets
//! exactly one run of a session go at a time (a second run waits for the first). Its `run`
//! handler drives halo-core's run engine through the effect protocol
//! ([`halo_core::driver`]) and makes every effect — a model call, each tool call, a
//! summary, a guardrail or step hook — one journaled step (`ctx.run`). When the worker
//! process dies, Restate sends the invocation to another worker, which replays the finished
//! steps into a fresh agent: it rebuilds the same run state and sends byte-identical
//! requests, and only the effect that was in flight runs again (a tool call that is neither
//! read-only nor idempotent is closed as "may have run" instead:
//! [`MAY_HAVE_RUN`](halo_core::request::MAY_HAVE_RUN)).
//!
//! | Handler | Kind | Input → output |
//! |---|---|---|
//! | `run` | exclusive | [`RunInput`] → [`GenerateTextResult`] |
//! | `approve` | shared | [`Approval`] → `()` |
//! | `reject` | shared | [`Rejection`] → `()` |
//! | `submit` | shared | [`Submission`] → `()` |
//! | `steer` | shared | [`Steering`] → `()` |
//! | `view` | shared | `()` → [`SessionView`] |
//!
//! A run that pauses — a call waiting for someone's approval, a client-side tool waiting for
//! its result — waits inside the invocation on a durable signal, across restarts of every
//! worker; `approve`, `reject` and `submit` (shared handlers, so they run while the run
//! waits) send it. Steering messages go to a second virtual object of the same key,
//! `HaloSteering` ([`SteeringInbox`]), which the run takes them from at each step boundary.
//! A client starts a run with `POST /HaloSession/{session}/run/send` (an `idempotency-key`
//! header makes a retried request the same run) and reattaches to it, from any process, with
//! `GET /restate/invocation/{id}/attach`.
//!
//! Workflows of agent steps ([`halo_core::workflow`]) run durably in a third object,
//! [`HaloWorkflow`] (one per workflow run): each step is one journaled step, so a workflow
//! whose worker dies goes on at the step it was in, and a finished step never runs again.
//! Serve it beside the sessions with [`endpoint_with`].
//!
//! The agent comes from a factory ([`HaloSession::new`]) that gives a
//! [`HaloAgentBuilder`] for a session id; it must build the same agent (prefix, tools,
//! options, strategies) for the same id every time, since a replay rebuilds the run on it.
//! The session's history lives in the object's Restate state between runs. Deploying,
//! registering, what runs twice and how to mark tools idempotent: `docs/durable.md`.
//!
//! ```no_run
//! use halo_core::{HaloAgent, testing::ScriptedModel};
//! use halo_stream::restate::{HaloSession, serve};
//!
//! # async fn run() {
//! let session = HaloSession::new(|id: &str| {
//!     Ok(HaloAgent::builder(ScriptedModel::new().text("Hello!"))
//!         .system("Be brief.")
//!         .session_id(id))
//! });
//! // Restate reaches the worker here: `POST :9070/deployments {"uri": "http://HOST:9080"}`.
//! serve(session, "127.0.0.1:9080".parse().unwrap(), std::future::pending::<()>()).await;
//! # }
//! ```

mod drive;
mod workflow;

pub use workflow::{HaloWorkflow, WORKFLOW_SERVICE};

use std::net::SocketAddr;
use std::sync::Arc;

use halo_core::driver::PendingApproval;
use halo_core::tool::ToolOutput;
use halo_core::{GenerateTextResult, HaloAgentBuilder, Message, RunState, ToolCall};
use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};

/// The Restate Rust SDK this module is written against (`restate-sdk` 0.13), for an
/// endpoint of your own.
pub use restate_sdk as sdk;

/// The name of the session object in Restate (the path segment of its handlers).
pub const SESSION_SERVICE: &str = "HaloSession";
/// The name of the steering inbox object in Restate.
pub const STEERING_SERVICE: &str = "HaloSteering";

/// The state key of the session's run state, between runs.
const STATE: &str = "run_state";
/// The state key of a paused run ([`PausedRun`]).
const PAUSED: &str = "paused";
/// The inbox's state key: the steering messages not yet taken.
const QUEUE: &str = "queue";

/// Any error a factory gives.
pub type FactoryError = Box<dyn std::error::Error + Send + Sync>;

/// What builds a session's agent: called with the session id (the object's key) at the
/// start of every run and of every replay.
type Factory = dyn Fn(&str) -> Result<HaloAgentBuilder, FactoryError> + Send + Sync;

/// The virtual object that runs a Halo session durably (Restate name `HaloSession`): see
/// the [module docs](self).
#[derive(Clone)]
pub struct HaloSession {
    factory: Arc<Factory>,
    steering: bool,
}

impl std::fmt::Debug for HaloSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaloSession")
            .field("steering", &self.steering)
            .finish_non_exhaustive()
    }
}

impl HaloSession {
    /// A session object whose agents `factory` builds, from the session id.
    ///
    /// The factory must give the same agent for the same id every time — the same model,
    /// prefix, tools, hooks, guardrails and strategies — since a replay after a crash
    /// rebuilds the run on a fresh one. Its clock is replaced by the run's start time as
    /// journaled (so a date in the prompt zones is the same on replay), and its session
    /// store is not written (the session lives in Restate's state).
    pub fn new(
        factory: impl Fn(&str) -> Result<HaloAgentBuilder, FactoryError> + Send + Sync + 'static,
    ) -> Self {
        HaloSession {
            factory: Arc::new(factory),
            steering: true,
        }
    }

    /// Whether runs take steering messages from the `HaloSteering` inbox at each step
    /// boundary (default `true`): one Restate call per step. Off, `steer` is refused.
    pub fn with_steering(mut self, steering: bool) -> Self {
        self.steering = steering;
        self
    }
}

/// The input of `run`: the user's message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInput {
    /// The user's message text.
    pub text: String,
}

/// The input of `approve`: the call to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The id of a call waiting for approval ([`SessionView::paused`]).
    pub call_id: String,
}

/// The input of `reject`: the call that must not run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    /// The id of a call waiting for approval.
    pub call_id: String,
    /// Why, for the model (it reads it as the call's error result).
    #[serde(default)]
    pub reason: String,
}

/// The input of `submit`: a client-side tool call's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    /// The id of a call waiting for its result.
    pub call_id: String,
    /// What the model reads.
    pub output: ToolOutput,
}

/// The input of `steer`: a user message for the run in flight, injected at its next step
/// boundary (or at the first of the next run when none is in flight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steering {
    /// The message text.
    pub text: String,
}

/// A run waiting inside its invocation for decisions and results (the output of `view`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PausedRun {
    /// The invocation that waits (`GET /restate/invocation/{id}/attach` gives its result).
    pub invocation_id: String,
    /// Calls waiting for `approve` or `reject`.
    pub approvals: Vec<PendingApproval>,
    /// Client-side calls waiting for `submit`.
    pub tool_calls: Vec<ToolCall>,
}

/// What `view` returns: the session's history as of its last finished run, and the run
/// paused now, if any.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionView {
    /// The history, oldest first.
    pub messages: Vec<Message>,
    /// The run waiting for decisions or results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<PausedRun>,
}

/// A decision or result sent to a paused run, with the sender's time (the run's clock for
/// feeding it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
enum Answer {
    Approve { at_ms: u64 },
    Reject { reason: String, at_ms: u64 },
    Submit { output: ToolOutput, at_ms: u64 },
}

/// The signal a paused run waits on for the decision on `call_id`.
fn approval_signal(call_id: &str) -> String {
    format!("approval:{call_id}")
}

/// The signal a paused run waits on for the result of the client-side call `call_id`.
fn result_signal(call_id: &str) -> String {
    format!("result:{call_id}")
}

/// A terminal (not retried) error with `status` and `message`.
fn terminal(status: u16, message: impl Into<String>) -> HandlerError {
    TerminalError::new_with_code(status, message).into()
}

/// Now, in milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[restate_sdk::object(name = "HaloSession", client_visibility = "pub(crate)")]
impl HaloSession {
    /// Runs one turn of the session on the user's message and returns its result. Every
    /// effect is a journaled step; a pause waits for `approve` / `reject` / `submit`.
    ///
    /// # Errors
    /// A terminal error when the factory fails (500), when the run ends with an error
    /// (500, the [`HaloError`](halo_core::HaloError)'s message), or when a step is still open in the saved
    /// state (409).
    #[handler]
    async fn run(
        &self,
        ctx: ObjectContext<'_>,
        input: Json<RunInput>,
    ) -> Result<Json<GenerateTextResult>, HandlerError> {
        drive::run(&ctx, &*self.factory, self.steering, input.into_inner())
            .await
            .map(Json)
    }

    /// Approves a call the paused run waits on: it runs when the run goes on.
    ///
    /// # Errors
    /// 404 when no run of this session waits for a decision on that call.
    #[handler]
    async fn approve(
        &self,
        ctx: SharedObjectContext<'_>,
        input: Json<Approval>,
    ) -> Result<(), HandlerError> {
        let Approval { call_id } = input.into_inner();
        let paused = paused_with(&ctx, &call_id, |p| {
            p.approvals.iter().any(|a| a.call.id == call_id)
        })
        .await?;
        ctx.invocation_handle(paused.invocation_id)
            .signal(approval_signal(&call_id))
            .resolve(Json(Answer::Approve { at_ms: now_ms() }));
        Ok(())
    }

    /// Rejects a call the paused run waits on: it never runs, and the model reads `reason`
    /// as its error result.
    ///
    /// # Errors
    /// 404 when no run of this session waits for a decision on that call.
    #[handler]
    async fn reject(
        &self,
        ctx: SharedObjectContext<'_>,
        input: Json<Rejection>,
    ) -> Result<(), HandlerError> {
        let Rejection { call_id, reason } = input.into_inner();
        let paused = paused_with(&ctx, &call_id, |p| {
            p.approvals.iter().any(|a| a.call.id == call_id)
        })
        .await?;
        ctx.invocation_handle(paused.invocation_id)
            .signal(approval_signal(&call_id))
            .resolve(Json(Answer::Reject {
                reason,
                at_ms: now_ms(),
            }));
        Ok(())
    }

    /// Gives a client-side call of the paused run its result.
    ///
    /// # Errors
    /// 404 when no run of this session waits for that call's result.
    #[handler]
    async fn submit(
        &self,
        ctx: SharedObjectContext<'_>,
        input: Json<Submission>,
    ) -> Result<(), HandlerError> {
        let Submission { call_id, output } = input.into_inner();
        let paused = paused_with(&ctx, &call_id, |p| {
            p.tool_calls.iter().any(|c| c.id == call_id)
        })
        .await?;
        ctx.invocation_handle(paused.invocation_id)
            .signal(result_signal(&call_id))
            .resolve(Json(Answer::Submit {
                output,
                at_ms: now_ms(),
            }));
        Ok(())
    }

    /// Queues a steering message for the session's run: it enters at the run's next step
    /// boundary (the next run's first, when none is in flight).
    ///
    /// # Errors
    /// 400 for an empty text; 405 when this worker's sessions take no steering.
    #[handler]
    async fn steer(
        &self,
        ctx: SharedObjectContext<'_>,
        input: Json<Steering>,
    ) -> Result<(), HandlerError> {
        if !self.steering {
            return Err(terminal(405, "steering is off for these sessions"));
        }
        let steering = input.into_inner();
        if steering.text.trim().is_empty() {
            return Err(terminal(400, "a steering message needs some text"));
        }
        ctx.object_client::<SteeringInboxClient<'_>>(ctx.key())
            .push(Json(steering))
            .call()
            .await?;
        Ok(())
    }

    /// The session's history as of its last finished run, and the paused run, if any.
    ///
    /// # Errors
    /// 500 when the saved state does not read as a run state.
    #[handler]
    async fn view(&self, ctx: SharedObjectContext<'_>) -> Result<Json<SessionView>, HandlerError> {
        let state: Option<Json<RunState>> = ctx.get(STATE).await?;
        let paused: Option<Json<PausedRun>> = ctx.get(PAUSED).await?;
        Ok(Json(SessionView {
            messages: state
                .map(|s| s.into_inner().log().to_vec())
                .unwrap_or_default(),
            paused: paused.map(Json::into_inner),
        }))
    }
}

/// The paused run of the session if it waits on `call_id` (`waits` says whether it does).
async fn paused_with(
    ctx: &SharedObjectContext<'_>,
    call_id: &str,
    waits: impl Fn(&PausedRun) -> bool,
) -> Result<PausedRun, HandlerError> {
    let paused: Option<Json<PausedRun>> = ctx.get(PAUSED).await?;
    match paused.map(Json::into_inner) {
        Some(p) if waits(&p) => Ok(p),
        _ => Err(terminal(
            404,
            format!(
                "no run of session {} waits on call {call_id}; `view` lists what a paused run waits for",
                ctx.key()
            ),
        )),
    }
}

/// The steering inbox of a session (Restate name `HaloSteering`, keyed by the session id):
/// messages queued by `HaloSession/{id}/steer`, taken by the run at each step boundary.
/// Its handlers are exclusive, so no message is lost between two senders.
#[derive(Debug, Clone, Copy, Default)]
pub struct SteeringInbox;

#[restate_sdk::object(name = "HaloSteering", client_visibility = "pub(crate)")]
impl SteeringInbox {
    /// Queues a message.
    ///
    /// # Errors
    /// Only Restate's own (state that does not read).
    #[handler]
    async fn push(
        &self,
        ctx: ObjectContext<'_>,
        input: Json<Steering>,
    ) -> Result<(), HandlerError> {
        let mut queue = ctx
            .get::<Json<Vec<String>>>(QUEUE)
            .await?
            .map(Json::into_inner)
            .unwrap_or_default();
        queue.push(input.into_inner().text);
        ctx.set(QUEUE, Json(queue));
        Ok(())
    }

    /// Takes every queued message, oldest first.
    ///
    /// # Errors
    /// Only Restate's own (state that does not read).
    #[handler]
    async fn take(&self, ctx: ObjectContext<'_>) -> Result<Json<Vec<String>>, HandlerError> {
        let queue = ctx
            .get::<Json<Vec<String>>>(QUEUE)
            .await?
            .map(Json::into_inner)
            .unwrap_or_default();
        if !queue.is_empty() {
            ctx.clear(QUEUE);
        }
        Ok(Json(queue))
    }
}

/// A Restate endpoint serving `session` and the steering inbox, for
/// [`restate_sdk::http_server::HttpServer`] or an endpoint server of your own.
pub fn endpoint(session: HaloSession) -> Endpoint {
    endpoint_with(session, None)
}

/// A Restate endpoint serving `session`, the steering inbox and, when given, durable
/// workflows ([`HaloWorkflow`]).
pub fn endpoint_with(session: HaloSession, workflows: Option<HaloWorkflow>) -> Endpoint {
    let builder = Endpoint::builder().bind(session).bind(SteeringInbox);
    match workflows {
        Some(workflows) => builder.bind(workflows).build(),
        None => builder.build(),
    }
}

/// Serves [`endpoint`]`(session)` over HTTP/2 (cleartext) on `addr` until `shutdown`
/// completes. Register it with Restate once: `POST <admin>/deployments {"uri": "http://ADDR"}`.
///
/// # Errors
/// When `addr` cannot be bound.
pub async fn serve(
    session: HaloSession,
    addr: SocketAddr,
    shutdown: impl Future,
) -> std::io::Result<()> {
    serve_endpoint(endpoint(session), addr, shutdown).await
}

/// Serves `endpoint` (from [`endpoint`] or [`endpoint_with`]) over HTTP/2 (cleartext) on
/// `addr` until `shutdown` completes.
///
/// # Errors
/// When `addr` cannot be bound.
pub async fn serve_endpoint(
    endpoint: Endpoint,
    addr: SocketAddr,
    shutdown: impl Future,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    restate_sdk::http_server::HttpServer::new(endpoint)
        .serve_with_cancel(listener, shutdown)
        .await;
    Ok(())
}
