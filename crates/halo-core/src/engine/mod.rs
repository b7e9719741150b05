//! The run engine: a sans-IO state machine that makes every decision of a run.
//!
//! [`RunState`] holds everything a run is: the history ([`MessageLog`]), what the run is
//! doing (the phase: checking the input, at a step boundary, waiting for the model, the
//! step in flight with its tool calls, an answer under review), the kind of run
//! ([`RunKind`]), this run's steps, the steering messages queued, the loop guard's and the
//! object run's counts, the counters ([`AgentStats`], kept here and nowhere else), the
//! [`CacheLedger`], and how it ended. It does no IO and holds no clock, so it serializes with
//! serde between any two effects and continues in another process.
//!
//! A driver asks it what to do (`next` → an [`Effect`]) and feeds back what came of it
//! (`feed` ← a [`Feedback`]); the protocol is public in [`crate::driver`]
//! ([`Driver::next`](crate::driver::Driver::next), [`Driver::feed`](crate::driver::Driver::feed)). The engine calls the agent's pure seams itself: the repair strategy on
//! each model turn ([`crate::repair`]), the loop guard and the context strategy at each step
//! boundary ([`crate::guardrail::LoopGuard`], [`crate::context`]), the output checks of an
//! object run ([`crate::output`]); it swaps in changed tool sources between steps; it caps
//! every tool result; it keeps the one fact of whether the prefix changed (through the
//! ledger's last call) and queues every journal event in one place.
//!
//! Invariants the engine keeps, whatever the driver does:
//! - an assistant turn enters the log together with every one of its tool results, in call
//!   order, or not at all: the log holds only complete steps (the journal keeps what is
//!   known of an open step apart, so it can be restored);
//! - a call that is not safe to run twice is journaled as started before a driver is told
//!   to run it, and one found started without a result is closed as
//!   [`MAY_HAVE_RUN`](crate::request::MAY_HAVE_RUN), never run again;
//! - steering messages enter only at a step boundary, before a model call, never between a
//!   call and its result;
//! - every request's history is valid ([`crate::request`]): no orphan result, no dangling
//!   call, no assistant turn made only of reasoning — whatever was put in the log by hand;
//! - the prefix is never touched, except by tool sources at a step boundary.

mod boundary;
mod context;
mod handoff;
mod journal;
mod outcome;
mod pending;
mod step;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::agent::Config;
use crate::driver::{Effect, Feedback, ModelCall, PendingApproval, RunKind};
use crate::error::HaloError;
use crate::guardrail::StepSettings;
use crate::ledger::{CacheLedger, LogKey, Planned};
use crate::log::{HistoryKey, MessageLog};
use crate::message::Message;
use crate::model::{FinishReason, ModelResponse, Usage};
use crate::prefix::{Fingerprint, StablePrefix};
use crate::request;
use crate::run::{AgentEvent, StepResult};
use crate::session::{JournalEvent, JournalOutcome};
use crate::stats::AgentStats;

pub(crate) use context::PendingCompaction;
pub use pending::PendingStep;

use outcome::{Ending, Failure};
use pending::CallState;

/// Where a step boundary stands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
enum Stage {
    /// Nothing done yet: the step limit, the loop guard, steering, tool sources.
    #[default]
    Open,
    /// Waiting for the step hooks' settings.
    Settings,
    /// Ready for the context plan (once), its summary requests, then the model call.
    Ready {
        settings: StepSettings,
        #[serde(default)]
        planned: bool,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
enum Phase {
    /// No run in flight.
    #[default]
    Idle,
    /// A new run's message waits for the input guardrails.
    Input { message: Message },
    /// Before a model call.
    Boundary { stage: Stage },
    /// A request was planned and handed out; waiting for the model's response.
    AwaitingModel {
        planned: Planned,
        call: ModelCall,
        #[serde(default)]
        settings: StepSettings,
    },
    /// The step's tool calls are running, paused, or waiting for the caller.
    Tools { step: PendingStep },
    /// The final answer waits for the output guardrails.
    Review { step: PendingStep },
}

/// The loop guard's counts in this run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct LoopWatch {
    /// Steps checked.
    checked: usize,
    /// Nudges given.
    nudges: usize,
}

/// What the engine remembers of the history's validity, so the check is O(new messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Checked {
    key: LogKey,
    /// Messages checked (a valid prefix of the log at `key`).
    len: usize,
}

fn one() -> f64 {
    1.0
}

/// What a run records besides its log and steps: the journal events for a session store,
/// and the events for whoever watches the run. Both by default; a driver that has no use
/// for one turns it off for its run ([`RunState::set_recording`]), so a step costs no copy
/// of itself that would be dropped unread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recording {
    /// Journal events ([`RunState::take_journal`]).
    pub(crate) journal: bool,
    /// Events ([`RunState::take_events`]).
    pub(crate) events: bool,
}

impl Default for Recording {
    fn default() -> Self {
        Recording {
            journal: true,
            events: true,
        }
    }
}

/// A run's whole state. See the [module docs](self).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunState {
    log: MessageLog,
    phase: Phase,
    #[serde(default)]
    kind: RunKind,
    /// This run's completed steps.
    steps: Vec<StepResult>,
    /// The counters over every run.
    stats: AgentStats,
    /// `stats` when this run started.
    run_start: AgentStats,
    ledger: CacheLedger,
    /// Journal events not yet taken by the driver ([`RunState::take_journal`]).
    journal: Vec<JournalEvent>,
    /// Steering messages queued for the next step boundary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    steering: Vec<String>,
    #[serde(default)]
    loops: LoopWatch,
    /// Answers an object run checked.
    #[serde(default)]
    attempts: usize,
    /// Steps opened with tool calls, over every run (tells a caller's answer that moved a
    /// paused run on from one that left it waiting).
    #[serde(default)]
    steps_opened: u64,
    /// The last model call was over the window and was recovered from (once in a row).
    #[serde(default)]
    overflowed: bool,
    /// A context strategy rewrote the history since the last model call.
    #[serde(default)]
    rewrite_planned: bool,
    /// The local token estimate of the last planned request (prefix and history), for the
    /// calibration against the tokens the provider reports.
    #[serde(default)]
    last_estimate: Option<u64>,
    /// A compaction a context strategy asked for, and where its summary stands.
    #[serde(default)]
    compaction: Option<PendingCompaction>,
    /// `max(1, reported / estimated)` input tokens of the last call ([`crate::context`]).
    #[serde(default = "one")]
    calibration: f64,
    /// How the run that just ended ended, until `next` hands it out.
    #[serde(default)]
    ending: Option<Ending>,
    /// The name of the agent whose turn it is ([`crate::handoff`]); `None` for an agent
    /// without a name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    agent: Option<String>,
    /// A handoff reached the agent whose turn it is and its history filter has not been
    /// applied yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    handed_off: bool,
    /// Events for the driver to hand out ([`RunState::take_events`]).
    #[serde(skip)]
    events: Vec<AgentEvent>,
    /// What the run records besides its log; everything unless a driver says otherwise.
    #[serde(skip)]
    recording: Recording,
    #[serde(skip)]
    checked: Option<Checked>,
    /// Whether the history last checked was valid as it stands.
    #[serde(skip)]
    valid: bool,
}

impl Default for RunState {
    fn default() -> Self {
        RunState::new(MessageLog::default())
    }
}

impl RunState {
    /// An empty state around `log`.
    pub(crate) fn new(log: MessageLog) -> Self {
        RunState {
            log,
            phase: Phase::default(),
            kind: RunKind::Text,
            steps: Vec::new(),
            stats: AgentStats::default(),
            run_start: AgentStats::default(),
            ledger: CacheLedger::default(),
            journal: Vec::new(),
            steering: Vec::new(),
            loops: LoopWatch::default(),
            attempts: 0,
            steps_opened: 0,
            overflowed: false,
            rewrite_planned: false,
            last_estimate: None,
            compaction: None,
            calibration: 1.0,
            ending: None,
            agent: None,
            handed_off: false,
            events: Vec::new(),
            recording: Recording::default(),
            checked: None,
            valid: false,
        }
    }

    /// The history.
    pub fn log(&self) -> &MessageLog {
        &self.log
    }

    /// The history, for callers that edit it. Whatever they do, requests stay valid.
    pub(crate) fn log_mut(&mut self) -> &mut MessageLog {
        &mut self.log
    }

    /// The counters over every run.
    pub fn stats(&self) -> AgentStats {
        self.stats
    }

    /// The ledger.
    pub fn ledger(&self) -> &CacheLedger {
        &self.ledger
    }

    /// The name of the agent whose turn it is: after a handoff, the agent it reached
    /// ([`crate::handoff`]); `None` before the first step of an agent without a name.
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }

    /// This run's completed steps, while it is in flight or paused (a run that answered
    /// hands them to its result).
    pub fn steps(&self) -> &[StepResult] {
        &self.steps
    }

    /// The step in flight: tool calls running, paused for the caller or for approvals, or
    /// an answer under review.
    pub fn pending(&self) -> Option<&PendingStep> {
        match &self.phase {
            Phase::Tools { step } | Phase::Review { step } => Some(step),
            _ => None,
        }
    }

    /// The calls of the step in flight waiting for someone's approval.
    pub fn pending_approvals(&self) -> Vec<PendingApproval> {
        match &self.phase {
            Phase::Tools { step } => step.awaiting_approval(),
            _ => Vec::new(),
        }
    }

    /// Whether a run is in flight (started and not yet done; a paused run is in flight).
    pub fn in_flight(&self) -> bool {
        self.phase != Phase::Idle
    }

    /// The kind of the run in flight (or of the last one).
    pub(crate) fn kind(&self) -> &RunKind {
        &self.kind
    }

    /// Steps opened with tool calls so far.
    pub(crate) fn steps_opened(&self) -> u64 {
        self.steps_opened
    }

    /// The object run's own prefix (tool mode), when it has one.
    pub(crate) fn object_prefix(&self) -> Option<&StablePrefix> {
        match &self.kind {
            RunKind::Object(spec) => spec.prefix(),
            _ => None,
        }
    }

    /// Whether the call `call_id` of the step in flight was approved.
    pub(crate) fn approved(&self, call_id: &str) -> bool {
        match &self.phase {
            Phase::Tools { step } => step.approved.iter().any(|id| id == call_id),
            _ => false,
        }
    }

    /// Whether the engine still waits for the results of tool calls it handed out (after a
    /// fatal outcome it does not: the driver drops the rest of the batch).
    pub(crate) fn running_tools(&self) -> bool {
        matches!(&self.phase, Phase::Tools { step } if step.calls.contains(&CallState::Started)
            && step.results.iter().zip(&step.calls).any(|(r, s)| r.is_none() && *s == CallState::Started))
    }

    /// The journal events since the last call, for a session store.
    pub(crate) fn take_journal(&mut self) -> Vec<JournalEvent> {
        std::mem::take(&mut self.journal)
    }

    /// Puts journal events a store failed to write back in front of the queue.
    pub(crate) fn requeue_journal(&mut self, mut events: Vec<JournalEvent>) {
        events.append(&mut self.journal);
        self.journal = events;
    }

    /// What the run records besides its log, until set again: a driver that writes no
    /// journal (no session store) or hands out no event (a caller that waits only for the
    /// result) turns that off. Not serialized: a restored state records everything.
    pub(crate) fn set_recording(&mut self, recording: Recording) {
        self.recording = recording;
        if !recording.journal {
            self.journal.clear();
        }
        if !recording.events {
            self.events.clear();
        }
    }

    /// Queues a journal event, when the journal is recorded.
    pub(super) fn push_journal(&mut self, event: JournalEvent) {
        if self.recording.journal {
            self.journal.push(event);
        }
    }

    /// Queues an event, when events are recorded.
    pub(super) fn push_event(&mut self, event: AgentEvent) {
        if self.recording.events {
            self.events.push(event);
        }
    }

    /// The events since the last call, for the driver to hand out.
    pub(crate) fn take_events(&mut self) -> Vec<AgentEvent> {
        std::mem::take(&mut self.events)
    }

    /// Queues steering messages; they enter the log at the next step boundary.
    pub(crate) fn steer(&mut self, texts: Vec<String>) {
        self.steering.extend(texts);
    }

    /// Starts a run of `kind` on a new user message, at `at_ms` milliseconds since the Unix
    /// epoch. A run left without an open step (a model call dropped, an answer under review
    /// dropped) is given up: none of it entered the log.
    ///
    /// # Errors
    /// [`HaloError::OpenStep`] when a step's calls still wait for results or approvals.
    pub(crate) fn start(
        &mut self,
        input: Message,
        kind: RunKind,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        let _ = at_ms;
        if let Phase::Tools { step } = &self.phase {
            return Err(HaloError::OpenStep {
                call_ids: step.missing().into_iter().map(|c| c.id.into()).collect(),
            });
        }
        self.phase = Phase::Idle;
        self.kind = kind;
        self.attempts = 0;
        self.begin();
        self.phase = Phase::Input { message: input };
        Ok(())
    }

    /// Continues from where things stand, without a new user message, in the run's own kind
    /// (or `kind` when given):
    /// - a step in flight continues: a call that started and has no result runs again when
    ///   the tools say its tool is safe to run twice, and is closed as
    ///   [`MAY_HAVE_RUN`](request::MAY_HAVE_RUN) otherwise; calls that never started run
    ///   (or wait for the caller, or for approval) as they would have;
    /// - a planned model call is planned again (the same request);
    /// - with no run in flight, the log decides: it must end with a user message, a tool
    ///   result, or an assistant turn whose calls have no results (taken back as the step in
    ///   flight; nothing says whether its calls ran, so they count as started).
    ///
    /// # Errors
    /// [`HaloError::NothingToResume`] when there is no run in flight and the log is empty
    /// or ends with an answer.
    pub(crate) fn resume(
        &mut self,
        config: &Config,
        kind: Option<RunKind>,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        let tools = &config.tools;
        match std::mem::take(&mut self.phase) {
            Phase::Idle => match self.log.last() {
                None => return Err(HaloError::NothingToResume),
                Some(Message::Assistant(turn)) if turn.tool_calls.is_empty() => {
                    return Err(HaloError::NothingToResume);
                }
                Some(Message::Assistant(_)) => {
                    // A turn whose calls never got results (a log edited or restored by
                    // hand): take it back as the step in flight.
                    let Some(Message::Assistant(turn)) = self.log.pop_last() else {
                        return Err(HaloError::NothingToResume);
                    };
                    let n = turn.tool_calls.len();
                    let fingerprint = self
                        .ledger
                        .previous_fingerprint()
                        .unwrap_or(Fingerprint([0; 32]));
                    let mut step = PendingStep::new(
                        ModelResponse {
                            id: None,
                            message: turn,
                            finish_reason: FinishReason::ToolCalls,
                            usage: Usage::default(),
                            model: None,
                            provider: None,
                        },
                        fingerprint,
                        None,
                        None,
                    );
                    step.calls = vec![CallState::Started; n];
                    self.phase = Phase::Tools { step };
                }
                Some(_) => self.phase = Phase::Boundary { stage: Stage::Open },
            },
            Phase::AwaitingModel { .. } => self.phase = Phase::Boundary { stage: Stage::Open },
            phase => self.phase = phase,
        }
        if let Some(kind) = kind {
            self.kind = kind;
        }
        self.begin();
        if let Phase::Tools { step } = &mut self.phase {
            for i in 0..step.results.len() {
                if step.results[i].is_some() || *step.state(i) != CallState::Started {
                    continue;
                }
                let call = &step.response.message.tool_calls[i];
                if tools.rerun_safe(&call.name) {
                    step.set_state(i, CallState::Waiting);
                } else {
                    step.results[i] = Some(request::may_have_run(call));
                }
            }
            if step.complete() {
                self.commit_tools(config, at_ms);
            }
        }
        Ok(())
    }

    /// Drops the step in flight — its model turn, the results given so far — as if it had
    /// never been made; the log keeps every committed step. Journaled, so a restored session
    /// drops it too. Returns whether there was one.
    pub(crate) fn discard_pending(&mut self, at_ms: u64) -> bool {
        match &self.phase {
            Phase::Tools { .. } | Phase::Review { .. } => {
                self.phase = Phase::Idle;
                self.finish(JournalOutcome::Discarded, at_ms);
                true
            }
            _ => false,
        }
    }

    pub(super) fn begin(&mut self) {
        self.steps.clear();
        self.run_start = self.stats;
        self.ending = None;
        self.loops = LoopWatch::default();
        if self.phase == Phase::Idle {
            self.phase = Phase::Boundary { stage: Stage::Open };
        }
    }

    /// What the driver should do next, at `at_ms`. Asking again without feeding anything
    /// gives the same effect.
    pub(crate) fn next(&mut self, config: &mut Config, at_ms: u64) -> Effect {
        loop {
            match &mut self.phase {
                Phase::Idle => return Effect::Done(self.take_outcome()),
                Phase::Input { message } => {
                    if !config.guards.input.is_empty() {
                        return Effect::CheckInput {
                            message: message.clone(),
                        };
                    }
                    self.accept_input(at_ms);
                }
                Phase::Boundary { stage: Stage::Open } => self.open_boundary(config, at_ms),
                Phase::Boundary {
                    stage: Stage::Settings,
                } => {
                    return Effect::PrepareStep {
                        step: self.steps.len() + 1,
                    };
                }
                Phase::Boundary {
                    stage: Stage::Ready { .. },
                } => {
                    if let Some(call) = self.context_step(config, at_ms) {
                        return Effect::Summarize(call);
                    }
                    self.plan_model_call(config, at_ms);
                }
                Phase::AwaitingModel { call, .. } => return Effect::CallModel(call.clone()),
                Phase::Tools { .. } => {
                    if let Some(effect) = self.tools_effect(config, at_ms) {
                        return effect;
                    }
                }
                Phase::Review { step } => {
                    return Effect::Review {
                        text: step.response.message.text.clone(),
                    };
                }
            }
        }
    }

    /// Feeds what came of the last effect, or the caller's answer to a paused run.
    ///
    /// # Errors
    /// See [`Driver::feed`](crate::driver::Driver::feed).
    pub(crate) fn feed(
        &mut self,
        feedback: Feedback,
        config: &Config,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        match feedback {
            Feedback::Input(verdict) => self.input_checked(verdict, at_ms),
            Feedback::StepSettings(settings) => match &mut self.phase {
                Phase::Boundary {
                    stage: stage @ Stage::Settings,
                } => {
                    *stage = Stage::Ready {
                        settings,
                        planned: false,
                    };
                    Ok(())
                }
                _ => Err(self.unexpected("step settings")),
            },
            Feedback::Summary(answer) => self.summarized(answer, config, at_ms),
            Feedback::Model(Ok(response)) => self.model_responded(response, config, at_ms),
            Feedback::Model(Err(error)) => self.model_failed(error, config, at_ms),
            Feedback::Tool(outcome) => self.tool_outcome(outcome, config, at_ms),
            Feedback::Review { verdict, guardrail } => {
                self.reviewed(verdict, guardrail, config, at_ms)
            }
            Feedback::Submit { call_id, output } => self.submitted(&call_id, output, config, at_ms),
            Feedback::Approve { call_id } => self.approve(&call_id, at_ms),
            Feedback::Reject { call_id, reason } => self.reject(&call_id, &reason, config, at_ms),
        }
    }

    pub(super) fn unexpected(&self, what: &str) -> HaloError {
        let phase = match &self.phase {
            Phase::Idle => "no run is in flight",
            Phase::Input { .. } => "the run waits for the input guardrails",
            Phase::Boundary { .. } => "the run is between steps",
            Phase::AwaitingModel { .. } => "the run waits for the model",
            Phase::Tools { .. } => "the run waits for tool results",
            Phase::Review { .. } => "the run waits for the output guardrails",
        };
        HaloError::UnexpectedFeedback {
            feedback: what.to_string(),
            phase: phase.to_string(),
        }
    }

    /// The input guardrails' verdict.
    fn input_checked(
        &mut self,
        verdict: Result<(), crate::driver::Rejection>,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        if !matches!(self.phase, Phase::Input { .. }) {
            return Err(self.unexpected("the input guardrails' verdict"));
        }
        match verdict {
            Ok(()) => self.accept_input(at_ms),
            Err(rejection) => {
                // Nothing was logged or journaled: the run ends before it began.
                self.phase = Phase::Idle;
                self.ending = Some(Ending::Failed(Failure::InputRejected {
                    guardrail: rejection.guardrail,
                    reason: rejection.reason,
                }));
            }
        }
        Ok(())
    }

    /// The run's message enters the log (with an object run's instruction).
    fn accept_input(&mut self, at_ms: u64) {
        let Phase::Input { message } = std::mem::take(&mut self.phase) else {
            return;
        };
        let message = match &self.kind {
            RunKind::Object(spec) => spec.instruct(message),
            _ => message,
        };
        self.push_journal(JournalEvent::User {
            message: message.clone(),
            injected: false,
            at_ms,
        });
        self.log.push(message);
        self.phase = Phase::Boundary { stage: Stage::Open };
    }

    /// A state for a run on a fork of this one ([`crate::delegate`]): the same history (a
    /// clone of the log, which remembers where it forked) and the same ledger, so the fork's
    /// first request is predicted to read everything this state's last request carried from
    /// the cache; no step in flight, no journal, counters from zero.
    pub(crate) fn fork(&self) -> RunState {
        RunState {
            log: self.log.clone(),
            ledger: self.ledger.clone(),
            calibration: self.calibration,
            ..RunState::new(MessageLog::with_capacity(0))
        }
    }

    /// An empty state around `log` whose ledger is `ledger`: a named agent's fresh run,
    /// whose first request is judged against the agent's last one ([`crate::named`]).
    pub(crate) fn with_ledger(log: MessageLog, ledger: CacheLedger) -> RunState {
        RunState {
            ledger,
            ..RunState::new(log)
        }
    }

    /// This run's counters so far.
    pub(crate) fn run_stats(&self) -> AgentStats {
        self.stats.since(&self.run_start)
    }

    pub(super) fn finish(&mut self, outcome: JournalOutcome, at_ms: u64) {
        self.push_journal(JournalEvent::Outcome { outcome, at_ms });
    }

    /// Checks the log's validity incrementally: only messages appended since the last check
    /// are looked at while the log was not edited.
    pub(super) fn check_history(&mut self) {
        let key = LogKey::of(&self.log);
        let slice = self.log.as_slice();
        let from = match self.checked {
            Some(c)
                if self.valid
                    && c.key.generation == key.generation
                    && key.evicted >= c.key.evicted =>
            {
                let dropped = usize::try_from(key.evicted - c.key.evicted).unwrap_or(usize::MAX);
                c.len.saturating_sub(dropped).min(slice.len())
            }
            _ => 0,
        };
        // A valid prefix ends with every call answered, so the rest is checked on its own.
        self.valid = request::is_valid(&slice[from..]) && (from == 0 || self.valid);
        self.checked = Some(Checked {
            key,
            len: slice.len(),
        });
    }

    /// The history to send: the log as it stands, borrowed when valid (the common case),
    /// else repaired ([`crate::request::valid_history`]).
    pub(crate) fn history(&self) -> Cow<'_, [Message]> {
        let slice = self.log.contiguous();
        match slice {
            Some(s) if self.valid => Cow::Borrowed(s),
            Some(s) => request::valid_history(s),
            None => Cow::Owned(request::valid_history(&self.log.to_vec()).into_owned()),
        }
    }

    /// Where `history` (what [`history`](Self::history) returned) comes from, for the
    /// request's [`with_history_key`](crate::ModelRequest::with_history_key).
    pub(crate) fn history_key(&self, history: &[Message]) -> Option<HistoryKey> {
        self.log.history_key(history)
    }
}
