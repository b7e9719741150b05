//! The effect protocol: how a run is driven, and how to write a driver of your own.
//!
//! # The engine decides; drivers run effects
//! A run is a value, [`RunState`] (serde), and every decision about it is made by the run
//! engine inside it: when the model is called and with which prefix and options, how its
//! turn is repaired, which tool calls run and in which batches, which are the caller's,
//! which wait for an approval, whether an answer fits the output schema, when a loop guard
//! nudges or stops the run, how the history is kept inside the context window, what is
//! journaled. A driver does only what the engine asks — IO — and feeds back what came of
//! it. The in-process drivers ([`HaloAgent::generate_text`], [`stream_text`], [`send`],
//! `generate_object`, [`resume`], ...) are one loop over this protocol; a durable driver (a
//! workflow engine that journals each step) or a gateway that serves runs to browsers is
//! another, and makes the same decisions for free.
//!
//! ```text
//!   driver.start(input, kind) / driver.resume()
//!        │
//!        ▼
//!   ┌─▶ driver.next() ──▶ Effect                      the driver performs it, then
//!   │     CheckInput { message }     input guardrails ─────▶ Feedback::Input
//!   │     PrepareStep { step }       step hooks ───────────▶ Feedback::StepSettings
//!   │     Summarize(call)            compactor or model ───▶ Feedback::Summary
//!   │     CallModel(call)            the model (unary or streaming) ─▶ Feedback::Model
//!   │     RunTools { calls }         these calls, at once ─▶ Feedback::Tool, one per call
//!   │     Review { text }            output guardrails ────▶ Feedback::Review
//!   │     Pause(pause)               stop: the caller gives results and decisions later
//!   │     Done(outcome)              stop: the run is over
//!   └──── driver.feed(feedback)
//! ```
//!
//! Between any two effects the whole [`RunState`] serializes, and restored into a fresh
//! agent built the same way (same prefix, tools, hooks and strategies:
//! [`HaloAgentBuilder::run_state`](crate::HaloAgentBuilder::run_state)) it asks for the same
//! next effect: a driver may save it after every [`Feedback`] and continue in another
//! process. Every `Feedback` serializes too, so a durable driver can instead journal each
//! one (with the time it was fed) and, after a crash, replay them into a fresh state.
//! Asking [`next`](Driver::next) again without feeding anything gives the same effect.
//!
//! # The rules a driver keeps
//! - `CallModel`: build the request with [`Driver::request`] (the prefix and options the
//!   engine chose, the valid history), call the model once — unary or streaming, the engine
//!   does not care ([`TurnSource`]) — and feed the response or the error. A context-window
//!   error is the engine's to recover from (it rewrites the history and asks again).
//! - `RunTools`: run every call of the batch (they may run at the same time) with
//!   [`Driver::run_tool`], and feed each outcome, in any order. A fatal outcome ends the
//!   run: the other calls of the batch may be dropped.
//! - `Pause`: the run waits for the caller — results of client-side calls
//!   ([`Feedback::Submit`]), decisions on approvals ([`Feedback::Approve`],
//!   [`Feedback::Reject`]). Feed them as they come (each is journaled at once), then
//!   [`resume`](Driver::resume).
//! - Flush the journal ([`Driver::flush`]) after each `next`, before performing the effect:
//!   a call that is not safe to run twice is then journaled as started before it starts.
//! - Forward [`Driver::take_events`] to whoever watches ([`AgentEvent`]s: step starts,
//!   tool calls and results, rewrites of the history, handoffs, ...); to show what happens
//!   inside the agents a tool runs, run the call with [`Driver::run_tool_watched`] and
//!   forward what its sink receives ([`crate::inner`]).
//! - Take the agent's parts through the `Driver` (not a configuration of your own): after a
//!   handoff ([`crate::handoff`]) the agent swaps in the configuration of the agent whose
//!   turn it is, and [`Driver::request`] uses it.
//!
//! # A durable driver
//! A driver on a durable-execution engine (one that journals each step of a handler and
//! replays it after a crash) needs nothing beyond this module:
//! - every time the engine sees comes in as `at_ms` (of [`next`](Driver::next),
//!   [`feed`](Driver::feed), [`start`](Driver::start)): take it from the durable journal, so a
//!   replay feeds the same ones;
//! - perform each effect inside the engine's journaled step (a model call, one tool call,
//!   a summary request) and journal its [`Feedback`]; on replay, feed the journaled
//!   feedback instead of performing the effect again — a tool call runs once;
//! - save the [`RunState`] (serde) whenever convenient, say after each feedback; after a
//!   crash, restore the last saved state and call `next`: an effect that was asked for and
//!   not fed is asked for again (tool calls handed out and not finished are the same
//!   `RunTools`). [`resume`](Driver::resume) is for a driver without such a journal: it
//!   closes a call that started and has no result as "may have run";
//! - steering messages and the caller's answers to a pause are inputs like the others:
//!   journal them, then [`steer`](Driver::steer) or feed them;
//! - the session journal ([`crate::session`]) and the events are for people and stores;
//!   the engine's decisions depend only on the state and the feedback.
//!
//! ```
//! use halo_core::driver::{Effect, RunKind};
//! use halo_core::{HaloAgent, Message, testing::ScriptedModel};
//! use serde_json::json;
//!
//! # futures::executor::block_on(async {
//! let model = ScriptedModel::new().tool_call("weather", json!({"city": "Oslo"})).text("Snow.");
//! let spec = halo_core::ToolSpec::new("weather", "The weather.", json!({"type": "object"}));
//! let mut agent = HaloAgent::builder(model).client_tool(spec).unwrap().build();
//!
//! // A driver of our own, which could save the run state between any two effects.
//! let mut driver = agent.driver();
//! driver.start(Message::user("Weather in Oslo?"), RunKind::Text, 0).unwrap();
//! let answer = loop {
//!     let feedback = match driver.next(0) {
//!         Effect::CallModel(call) => driver.call_model(&call).await,
//!         Effect::Pause(pause) => {
//!             // The caller's tool: its result, then the run goes on.
//!             let result = driver.submit(&pause.tool_calls[0].id, "snow, -3 °C");
//!             driver.feed(result, 0).unwrap();
//!             driver.resume(0).unwrap();
//!             continue;
//!         }
//!         Effect::Done(outcome) => break outcome.unwrap(),
//!         other => panic!("{other:?}"),
//!     };
//!     driver.feed(feedback, 0).unwrap();
//!     let saved = serde_json::to_string(driver.state()).unwrap();
//!     assert!(saved.contains("Oslo"));
//! };
//! assert_eq!(answer.text, "Snow.");
//! # });
//! ```
//!
//! [`HaloAgent::generate_text`]: crate::HaloAgent::generate_text
//! [`stream_text`]: crate::HaloAgent::stream_text
//! [`send`]: crate::HaloAgent::send
//! [`resume`]: crate::HaloAgent::resume

mod api;
mod local;

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tracing::Instrument as _;

use crate::agent::HaloAgent;
use crate::delegate::Parent;
use crate::dispatch::CallEnv;
use crate::engine::{Recording, RunState};
use crate::error::HaloError;
use crate::guardrail::{OutputVerdict, StepContext, StepSettings};
use crate::inner::EventSink;
use crate::message::{Message, ToolCall, ToolResult};
use crate::model::{GenerationOptions, ModelError, ModelRequest, ModelResponse};
use crate::output::ObjectSpec;
use crate::run::{AgentEvent, GenerateTextResult};
use crate::session::JournalEvent;
use crate::stats::AgentStats;
use crate::tool::ToolOutput;

pub use crate::run::PendingApproval;
pub use local::{Streaming, TurnSource, Unary};

/// What kind of run: how its tool calls and answers are handled. Part of the run state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunKind {
    /// Tool calls run in the driver; client-side calls and approvals pause the run.
    #[default]
    Text,
    /// Every tool call is handed to the caller ([`HaloAgent::send`]).
    Manual,
    /// The answer must fit an output schema ([`HaloAgent::generate_object`]); the run does
    /// not pause (a client-side call gets an error result, an approval is denied).
    Object(Box<ObjectSpec>),
}

/// What the engine asks a driver to do next. See the [module docs](self).
#[derive(Debug)]
#[non_exhaustive]
pub enum Effect {
    /// Check the user's message with the input guardrails (in order; the first rejection
    /// wins), then feed [`Feedback::Input`]. Only asked when the agent has some.
    CheckInput {
        /// The message, as the caller gave it.
        message: Message,
    },
    /// Ask the step hooks for step `step`'s settings ([`StepSettings`]; later hooks win),
    /// then feed [`Feedback::StepSettings`]. Only asked when the agent has step hooks.
    PrepareStep {
        /// The step's number in this run, from 1.
        step: usize,
    },
    /// Make a compaction's summary request ([`Driver::summary_request`]) with the agent's
    /// compactor (or its model), then feed [`Feedback::Summary`].
    Summarize(SummaryCall),
    /// Call the model ([`Driver::request`], [`Driver::call_model`]), then feed
    /// [`Feedback::Model`].
    CallModel(ModelCall),
    /// Run these tool calls ([`Driver::run_tool`]); they may run at the same time. Feed one
    /// [`Feedback::Tool`] per call.
    RunTools {
        /// The batch, in call order.
        calls: Vec<ToolCall>,
    },
    /// Check the answer with the output guardrails (in order; the first verdict that is not
    /// `Accept` wins), then feed [`Feedback::Review`]. Only asked when the agent has some.
    Review {
        /// The answer's text (in a tool-mode object run, the output tool's arguments).
        text: String,
    },
    /// The run is paused for the caller: stop driving, hand the paused result out; feed the
    /// results and decisions when they come, then [`resume`](Driver::resume).
    Pause(Pause),
    /// The run is over.
    Done(Result<GenerateTextResult, HaloError>),
}

/// A model call the engine planned ([`Effect::CallModel`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCall {
    /// The step's number in this run, from 1.
    pub step: usize,
    /// The call's options when they differ from the agent's (a step hook's settings, an
    /// object run's); `None`: the agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    options: Option<GenerationOptions>,
    /// Whether the request carries the object run's own prefix (tool mode).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    object_prefix: bool,
}

impl ModelCall {
    pub(crate) fn new(
        step: usize,
        options: Option<GenerationOptions>,
        object_prefix: bool,
    ) -> Self {
        ModelCall {
            step,
            options,
            object_prefix,
        }
    }

    /// The options of the call: its own, or `agent`'s.
    pub fn options<'a>(&'a self, agent: &'a GenerationOptions) -> &'a GenerationOptions {
        self.options.as_ref().unwrap_or(agent)
    }

    pub(crate) fn object_prefix(&self) -> bool {
        self.object_prefix
    }
}

/// A compaction's summary request ([`Effect::Summarize`]): the agent's prefix (or the object
/// run's), this history, the agent's options — the session's own, so the request is a
/// prompt-cache hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryCall {
    /// The history: what is summarized, then the instruction as the last user message. The
    /// engine keeps it inside the context window.
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    object_prefix: bool,
}

impl SummaryCall {
    pub(crate) fn new(history: Vec<Message>, object_prefix: bool) -> Self {
        SummaryCall {
            history,
            object_prefix,
        }
    }
}

/// What a paused run waits for ([`Effect::Pause`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pause {
    /// Calls whose results the caller gives: client-side tools' (every call, in manual
    /// mode).
    pub tool_calls: Vec<ToolCall>,
    /// Calls waiting for someone's approval.
    pub approvals: Vec<PendingApproval>,
}

/// What came of one tool call ([`Feedback::Tool`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolOutcome {
    /// The call's result.
    Result {
        /// The result (its `tool_call_id` names the call).
        result: ToolResult,
        /// The counters of the model calls the tool made on the agent's behalf
        /// ([`ToolOutput::stats`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delegated: Option<AgentStats>,
    },
    /// The call needs someone's approval before it runs (a hook asked, or the tool's
    /// annotations say so).
    NeedsApproval {
        /// The call's id.
        call_id: String,
        /// Why.
        reason: String,
    },
    /// The tool ended the run ([`ToolError::Fatal`](crate::ToolError::Fatal)).
    Fatal {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// What it said.
        message: String,
    },
    /// A hook aborted the run.
    Aborted {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// The hook's reason.
        reason: String,
    },
}

/// An input guardrail's rejection ([`Feedback::Input`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    /// The guardrail's name.
    pub guardrail: String,
    /// Why.
    pub reason: String,
}

/// What a driver feeds back to the engine: the result of an effect, or the caller's answer
/// to a paused run. Serializes with serde, for a driver that journals it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Feedback {
    /// The input guardrails' verdict on the message of [`Effect::CheckInput`].
    Input(Result<(), Rejection>),
    /// The step hooks' settings for [`Effect::PrepareStep`].
    StepSettings(StepSettings),
    /// The answer to [`Effect::Summarize`].
    Summary(Result<ModelResponse, ModelError>),
    /// The answer to [`Effect::CallModel`].
    Model(Result<ModelResponse, ModelError>),
    /// What came of one call of [`Effect::RunTools`].
    Tool(ToolOutcome),
    /// The output guardrails' verdict for [`Effect::Review`], and the guardrail that gave it
    /// (empty when all accepted).
    Review {
        /// The verdict.
        verdict: OutputVerdict,
        /// The guardrail's name.
        guardrail: String,
    },
    /// The caller's result for a call of the step in flight (a client-side call, every call
    /// in manual mode).
    Submit {
        /// The call's id.
        call_id: String,
        /// What the model reads.
        output: ToolOutput,
    },
    /// Someone approved a call waiting for approval: it runs when the run continues.
    Approve {
        /// The call's id.
        call_id: String,
    },
    /// Someone rejected a call waiting for approval: it gets an error result with `reason`
    /// and never runs.
    Reject {
        /// The call's id.
        call_id: String,
        /// Why, for the model.
        reason: String,
    },
}

/// A handle on an agent's run engine, for a driver: see the [module docs](self).
/// [`HaloAgent::driver`] gives one.
pub struct Driver<'a> {
    agent: &'a mut HaloAgent,
}

impl std::fmt::Debug for Driver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("agent", &self.agent)
            .finish()
    }
}

impl HaloAgent {
    /// A handle on the agent's run engine, for a driver of your own ([`crate::driver`]).
    pub fn driver(&mut self) -> Driver<'_> {
        // A driver of its own takes the journal and the events: both are recorded.
        self.parts().0.set_recording(Recording::default());
        Driver { agent: self }
    }
}

impl Driver<'_> {
    /// Starts a run of `kind` on `input` at `at_ms` (milliseconds since the Unix epoch).
    ///
    /// # Errors
    /// [`HaloError::OpenStep`] when a step is still open (its calls wait for results or
    /// approvals); nothing changes then.
    pub fn start(&mut self, input: Message, kind: RunKind, at_ms: u64) -> Result<(), HaloError> {
        self.agent.parts().0.start(input, kind, at_ms)
    }

    /// Continues from where things stand, in the run's own kind: a paused run once its
    /// results and decisions are in, a step left in flight (calls that started without a
    /// result run again when safe, and are closed as
    /// [`MAY_HAVE_RUN`](crate::request::MAY_HAVE_RUN) otherwise), a planned model call,
    /// or a log that ends with a user message or an unanswered turn.
    ///
    /// # Errors
    /// [`HaloError::NothingToResume`].
    pub fn resume(&mut self, at_ms: u64) -> Result<(), HaloError> {
        let (state, config) = self.agent.parts();
        state.resume(config, None, at_ms)
    }

    /// What to do next. Pure: asking again without feeding anything gives the same effect.
    pub fn next(&mut self, at_ms: u64) -> Effect {
        self.agent.take_steering();
        let (state, config) = self.agent.parts();
        state.next(config, at_ms)
    }

    /// Feeds what came of the last effect (or the caller's answer to a paused run) at
    /// `at_ms`. Steering messages queued meanwhile move into the state with it.
    ///
    /// # Errors
    /// [`HaloError::UnknownToolCall`], [`HaloError::DuplicateToolResult`],
    /// [`HaloError::NotAwaitingApproval`] for results and decisions that fit no call of the
    /// step in flight, [`HaloError::UnexpectedFeedback`] for feedback the run does not wait
    /// for; nothing changes then.
    pub fn feed(&mut self, feedback: Feedback, at_ms: u64) -> Result<(), HaloError> {
        self.agent.take_steering();
        let (state, config) = self.agent.parts();
        state.feed(feedback, config, at_ms)
    }

    /// Queues user messages (steering) for the next step boundary.
    pub fn steer(&mut self, texts: Vec<String>) {
        self.agent.parts().0.steer(texts);
    }

    /// The run state: serialize it between any two effects.
    pub fn state(&self) -> &RunState {
        self.agent.run_state()
    }

    /// The events since the last call ([`AgentEvent`]), for whoever watches the run.
    pub fn take_events(&mut self) -> Vec<AgentEvent> {
        self.agent.parts().0.take_events()
    }

    /// The journal events since the last call, for a store of the driver's own.
    pub fn take_journal(&mut self) -> Vec<JournalEvent> {
        self.agent.parts().0.take_journal()
    }

    /// Writes the journal events to the agent's session store, if it has one.
    ///
    /// # Errors
    /// [`HaloError::Session`]; the events stay queued for the next flush.
    pub async fn flush(&mut self) -> Result<(), HaloError> {
        self.agent.flush_journal().await
    }

    /// The history a model request carries: the log, valid ([`crate::request`]).
    pub fn history(&self) -> Cow<'_, [Message]> {
        self.agent.run_state().history()
    }

    /// The request of `call` with `history` (what [`history`](Self::history) gave).
    pub fn request<'b>(&'b self, call: &'b ModelCall, history: &'b [Message]) -> ModelRequest<'b> {
        local::request(self.agent.config(), self.agent.run_state(), call, history)
    }

    /// The request of a summary call.
    pub fn summary_request<'b>(&'b self, call: &'b SummaryCall) -> ModelRequest<'b> {
        local::summary_request(self.agent.config(), self.agent.run_state(), call)
    }

    /// The agent's model.
    pub fn model(&self) -> &crate::model::SharedModel {
        &self.agent.config().model
    }

    /// Makes the model call, unary ([`crate::ModelAdapter::generate`]), in a `chat` span
    /// under the current span (`docs/telemetry.md`), as [`call_model_with`](Self::call_model_with)
    /// does.
    pub async fn call_model(&self, call: &ModelCall) -> Feedback {
        let history = self.history();
        let request = self.request(call, &history);
        let model = &self.agent.config().model;
        let span = self.chat_span(false);
        let answer = model.generate(request).instrument(span.clone()).await;
        crate::telemetry::record_answer(&span, &answer);
        Feedback::Model(answer)
    }

    /// The `chat` span of a model call, under the current span.
    fn chat_span(&self, streaming: bool) -> tracing::Span {
        crate::telemetry::chat_span(
            &**self.model(),
            local::conversation_id(self.agent),
            &tracing::Span::current(),
            streaming,
        )
    }

    /// Makes the model call through `medium` (unary or streaming), the deltas left out;
    /// [`request`](Self::request) with the agent's model and a medium of your own shows
    /// them as they come.
    pub async fn call_model_with(&self, call: &ModelCall, medium: &impl TurnSource) -> Feedback {
        use futures::StreamExt as _;
        let history = self.history();
        let request = self.request(call, &history);
        let span = self.chat_span(medium.is_streaming());
        let mut events = medium.turn(&*self.agent.config().model, request);
        let mut answer = Err(ModelError::Truncated(
            "the model's stream ended before its final event".into(),
        ));
        while let Some(event) = events.next().instrument(span.clone()).await {
            match event {
                Ok(crate::model::ModelStreamEvent::Finish(response)) => {
                    answer = Ok(response);
                    break;
                }
                Ok(_) => {}
                Err(e) => {
                    answer = Err(e);
                    break;
                }
            }
        }
        crate::telemetry::record_answer(&span, &answer);
        Feedback::Model(answer)
    }

    /// Makes a summary request with the agent's compactor, or its model.
    pub async fn summarize(&self, call: &SummaryCall) -> Feedback {
        local::summarize(self.agent.config(), self.summary_request(call)).await
    }

    /// Runs one call of [`Effect::RunTools`] through the agent's hooks and tool.
    pub async fn run_tool(&self, call: &ToolCall) -> Feedback {
        let mut env = self.call_env(std::slice::from_ref(call));
        env.approved = self.agent.run_state().approved(&call.id);
        Feedback::Tool(self.agent.config().tools.run_call(call.clone(), env).await)
    }

    /// [`run_tool`](Self::run_tool), the events of the agents the call runs sent to
    /// `events` ([`crate::inner`]): for a driver that shows what happens inside a sub-agent
    /// or a named agent while the call runs.
    pub async fn run_tool_watched(&self, call: &ToolCall, events: EventSink) -> Feedback {
        let mut env = self.call_env(std::slice::from_ref(call));
        env.approved = self.agent.run_state().approved(&call.id);
        env.events = Some(events);
        Feedback::Tool(self.agent.config().tools.run_call(call.clone(), env).await)
    }

    /// The input guardrails' verdict for [`Effect::CheckInput`].
    pub async fn check_input(&self, message: &Message) -> Feedback {
        local::check_input(self.agent.config(), message).await
    }

    /// The step hooks' settings for [`Effect::PrepareStep`].
    pub async fn prepare_step(&self, step: usize) -> Feedback {
        local::prepare_step(self.agent.config(), self.agent.run_state(), step).await
    }

    /// The output guardrails' verdict for [`Effect::Review`].
    pub async fn review(&self, text: &str) -> Feedback {
        local::review(self.agent.config(), text).await
    }

    /// The caller's result for the call `call_id` ([`Feedback::Submit`]).
    pub fn submit(&self, call_id: &str, output: impl Into<ToolOutput>) -> Feedback {
        Feedback::Submit {
            call_id: call_id.to_string(),
            output: output.into(),
        }
    }

    /// What the step's calls run with: the active tools, a snapshot of the agent when one of
    /// `calls` runs it, the cancel token.
    pub(crate) fn call_env(&self, calls: &[ToolCall]) -> CallEnv<'_> {
        call_env(self.agent, calls)
    }
}

/// What the calls of a batch run with (see [`Driver::call_env`]).
pub(crate) fn call_env<'a>(agent: &'a HaloAgent, calls: &[ToolCall]) -> CallEnv<'a> {
    let config = agent.config();
    let state = agent.run_state();
    let active = state.pending().and_then(|p| p.active());
    let parent = config
        .tools
        .runs_agent(calls)
        .then(|| Arc::new(Parent::new(config, state, active.map(<[String]>::to_vec))));
    CallEnv {
        active,
        parent,
        events: None,
        depth: config.depth,
        cancel: agent.cancel_token(),
        approved: false,
        catch_panics: config.limits.catch_panics,
    }
}

/// The step hooks' settings, merged (later hooks win).
async fn merged_settings(
    hooks: &[Arc<dyn crate::guardrail::StepHook>],
    context: StepContext<'_>,
) -> StepSettings {
    let mut settings = StepSettings::default();
    for hook in hooks {
        let s = hook.prepare_step(context).await;
        if s.tool_choice.is_some() {
            settings.tool_choice = s.tool_choice;
        }
        if s.active_tools.is_some() {
            settings.active_tools = s.active_tools;
        }
    }
    settings
}

/// The output guardrails' verdict on `answer`, and the guardrail that gave it.
async fn verdict_of(
    guards: &[Arc<dyn crate::guardrail::OutputGuardrail>],
    answer: &str,
) -> (OutputVerdict, String) {
    for guard in guards {
        let verdict = guard.check(answer).await;
        if verdict != OutputVerdict::Accept {
            return (verdict, guard.name().to_string());
        }
    }
    (OutputVerdict::Accept, String::new())
}
