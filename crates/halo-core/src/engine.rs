//! The run engine: a sans-IO state machine that every way of running an agent drives.
//!
//! [`RunState`] holds everything a run is: the history ([`MessageLog`]), the step in flight
//! (the model's turn and the tool results gathered so far), the steps of this run, the
//! counters ([`AgentStats`], kept here and nowhere else) and the [`CacheLedger`]. It does no
//! IO and holds no clock, so it serializes with serde at any point — between steps or in the
//! middle of one — and continues in another process.
//!
//! A driver asks [`RunState::next`] what to do and feeds back what happened:
//!
//! ```text
//!            start(input) / resume()
//!                    │
//!          ┌──────▶ next() ──── CallModel ──▶ plan_model_call, call the model,
//!          │          │                       model_response(response) / model_failed(e)
//!          │          ├──────── RunTools ───▶ run them, tool_result(r) for each
//!          │          │                       (abort_step(e) on a fatal error)
//!          │          ├──────── Review ─────▶ output guardrails, accept_answer /
//!          │          │                       reject_answer(feedback) / abort_step(e)
//!          └──────────┘
//!                     └──────── Done(outcome)
//! ```
//!
//! The drivers — [`HaloAgent::generate_text`](crate::HaloAgent::generate_text),
//! [`stream_text`](crate::HaloAgent::stream_text), [`resume`](crate::HaloAgent::resume), the
//! manual [`send`](crate::HaloAgent::send) / [`submit_tool_result`](crate::HaloAgent::submit_tool_result)
//! and `generate_object` — are thin loops over this one
//! machine (`drive.rs`).
//!
//! Invariants the engine keeps, whatever the driver does:
//! - an assistant turn enters the log together with every one of its tool results, in call
//!   order, or not at all: the log holds only complete steps;
//! - steering messages enter only at a step boundary, before a model call, never between a
//!   call and its result;
//! - every request's history is valid ([`crate::request`]): no orphan result, no dangling
//!   call, no assistant turn made only of reasoning — whatever was put in the log by hand;
//! - the prefix is never touched.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::context::{self, Compaction, ContextBudget, ContextConfig, ContextPlan, SUMMARY_HEADER};
use crate::error::HaloError;
use crate::ledger::{CacheCheck, CacheLedger, CacheVerdict, LogKey, Planned};
use crate::log::{HistoryKey, MessageLog};
use crate::message::{Message, ToolCall, ToolResult};
use crate::model::{FinishReason, ModelResponse, Usage};
use crate::prefix::{Fingerprint, StablePrefix};
use crate::request::{self, interrupted};
use crate::run::{GenerateTextResult, StepResult};
use crate::session::{JournalEvent, JournalOutcome};
use crate::stats::AgentStats;

/// What the driver should do next ([`RunState::next`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum Next {
    /// Call the model: [`RunState::plan_model_call`], send the prefix with
    /// [`RunState::history`], then [`RunState::model_response`] or
    /// [`RunState::model_failed`].
    CallModel {
        /// The step's number in this run, from 1.
        step: usize,
    },
    /// Run these tool calls of the step in flight (the ones still without a result), then
    /// give each result to [`RunState::tool_result`].
    RunTools(Vec<ToolCall>),
    /// The model answered: check the answer (output guardrails), then
    /// [`RunState::accept_answer`], [`RunState::reject_answer`] or [`RunState::abort_step`].
    Review {
        /// The answer text.
        text: String,
    },
    /// The run is over.
    Done(Result<GenerateTextResult, HaloError>),
}

/// The step in flight: the model's turn and the results gathered so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingStep {
    /// The model's answer.
    pub response: ModelResponse,
    /// The prefix fingerprint the call was made with.
    pub fingerprint: Fingerprint,
    /// The ledger's check of the call; `None` for a turn taken back from the log on
    /// resume (no model call made it in this run).
    pub cache: Option<CacheCheck>,
    /// One slot per tool call, in call order.
    pub results: Vec<Option<ToolResult>>,
}

impl PendingStep {
    /// The calls that still have no result, in call order.
    pub fn missing(&self) -> Vec<ToolCall> {
        self.response
            .message
            .tool_calls
            .iter()
            .zip(&self.results)
            .filter(|(_, r)| r.is_none())
            .map(|(c, _)| c.clone())
            .collect()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
enum Phase {
    /// No run in flight.
    #[default]
    Idle,
    /// The next action is a model call.
    Model,
    /// A request was planned and handed out; waiting for the model's response.
    AwaitingModel { planned: Planned },
    /// The step's tool calls are running (or waiting for the caller).
    Tools { step: PendingStep },
    /// The final answer waits for the output guardrails.
    Review { step: PendingStep },
}

/// What the engine remembers of the history's validity, so the check is O(new messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Checked {
    key: LogKey,
    /// Messages checked (a valid prefix of the log at `key`).
    len: usize,
}

/// The outcome of a run that just ended. Not part of a saved or cloned state: a run that
/// ended hands its outcome out once, to the driver that ran it.
#[derive(Debug, Default)]
struct Outcome(Option<Result<GenerateTextResult, HaloError>>);

impl Clone for Outcome {
    fn clone(&self) -> Self {
        Outcome(None)
    }
}

fn one() -> f64 {
    1.0
}

/// The summary requests of a compaction: the whole history at once, or — when that request
/// was over the window — its older half, then the newer half after the first half's summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
enum Halves {
    #[default]
    Whole,
    First {
        mid: usize,
    },
    Second {
        mid: usize,
        first: String,
    },
}

/// A run's whole state. See the [module docs](self).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunState {
    log: MessageLog,
    phase: Phase,
    /// This run's completed steps.
    steps: Vec<StepResult>,
    /// The counters over every run.
    stats: AgentStats,
    /// `stats` when this run started.
    run_start: AgentStats,
    ledger: CacheLedger,
    /// The fingerprint of the last model call.
    last_fingerprint: Option<Fingerprint>,
    /// The fingerprint last written to the journal.
    journaled_fingerprint: Option<Fingerprint>,
    /// Journal events not yet taken by the driver ([`RunState::take_journal`]).
    journal: Vec<JournalEvent>,
    /// A context strategy rewrote the history since the last model call.
    #[serde(default)]
    rewrite_planned: bool,
    /// The local token estimate of the last planned request (prefix and history), for the
    /// calibration against the tokens the provider reports.
    #[serde(default)]
    last_estimate: Option<u64>,
    /// A compaction a context strategy asked for, waiting for the driver's summary request.
    #[serde(default)]
    pending_compaction: Option<Compaction>,
    /// Which summary request of the pending compaction is next.
    #[serde(default)]
    compaction_stage: Halves,
    /// `max(1, reported / estimated)` input tokens of the last call ([`crate::context`]).
    #[serde(default = "one")]
    calibration: f64,
    /// The outcome of a run that just ended, until `next` hands it out.
    #[serde(skip)]
    outcome: Outcome,
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
    pub fn new(log: MessageLog) -> Self {
        RunState {
            log,
            phase: Phase::default(),
            steps: Vec::new(),
            stats: AgentStats::default(),
            run_start: AgentStats::default(),
            ledger: CacheLedger::default(),
            last_fingerprint: None,
            journaled_fingerprint: None,
            journal: Vec::new(),
            rewrite_planned: false,
            pending_compaction: None,
            compaction_stage: Halves::Whole,
            last_estimate: None,
            calibration: 1.0,
            outcome: Outcome::default(),
            checked: None,
            valid: false,
        }
    }

    /// The history.
    pub fn log(&self) -> &MessageLog {
        &self.log
    }

    /// The history, for callers that edit it. Whatever they do, requests stay valid.
    pub fn log_mut(&mut self) -> &mut MessageLog {
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

    /// This run's completed steps.
    pub fn steps(&self) -> &[StepResult] {
        &self.steps
    }

    /// The step in flight, when tool calls are running or waiting for the caller.
    pub fn pending(&self) -> Option<&PendingStep> {
        match &self.phase {
            Phase::Tools { step } | Phase::Review { step } => Some(step),
            _ => None,
        }
    }

    /// Whether a run is in flight (started and not yet done).
    pub fn in_flight(&self) -> bool {
        self.phase != Phase::Idle
    }

    /// The journal events since the last call, for a session store.
    pub fn take_journal(&mut self) -> Vec<JournalEvent> {
        std::mem::take(&mut self.journal)
    }

    /// Puts journal events a store failed to write back in front of the queue.
    pub fn requeue_journal(&mut self, mut events: Vec<JournalEvent>) {
        events.append(&mut self.journal);
        self.journal = events;
    }

    /// Starts a run on a new user message, `at_ms` milliseconds since the Unix epoch.
    ///
    /// A step left in flight by a dropped run (its future or stream dropped mid-step) is
    /// discarded: it never entered the log.
    pub fn start(&mut self, input: Message, at_ms: u64) {
        self.phase = Phase::Idle;
        self.journal.push(JournalEvent::User {
            message: input.clone(),
            injected: false,
            at_ms,
        });
        self.log.push(input);
        self.begin();
    }

    /// Continues from where things stand, without a new user message:
    /// - a step in flight continues: calls still without a result are run again when
    ///   `rerun_safe(tool name)` says so, and closed with a synthetic error result
    ///   ([`request::INTERRUPTED`]) otherwise; a planned model call is made again (the same
    ///   request);
    /// - with no step in flight, the log decides: it must end with a user message, a tool
    ///   result, or an assistant turn whose calls have no results (taken back as the step
    ///   in flight, its calls treated as above).
    ///
    /// # Errors
    /// [`HaloError::NothingToResume`] when there is no step in flight and the log is empty
    /// or ends with an answer.
    pub fn resume(
        &mut self,
        rerun_safe: impl Fn(&str) -> bool,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        match std::mem::take(&mut self.phase) {
            Phase::Idle => {
                match self.log.last() {
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
                        self.begin();
                        self.phase = Phase::Tools {
                            step: PendingStep {
                                response: ModelResponse {
                                    message: turn,
                                    finish_reason: FinishReason::ToolCalls,
                                    usage: Usage::default(),
                                    model: None,
                                },
                                fingerprint: self.last_fingerprint.unwrap_or(Fingerprint([0; 32])),
                                cache: None,
                                results: vec![None; n],
                            },
                        };
                    }
                    Some(_) => {
                        self.begin();
                        self.phase = Phase::Model;
                    }
                }
            }
            Phase::AwaitingModel { .. } => {
                self.phase = Phase::Model;
                self.begin();
            }
            phase => {
                self.phase = phase;
                self.begin();
            }
        }
        if let Phase::Tools { step } = &mut self.phase {
            let calls = step.response.message.tool_calls.clone();
            for (call, slot) in calls.iter().zip(step.results.iter_mut()) {
                if slot.is_none() && !rerun_safe(&call.name) {
                    *slot = Some(interrupted(call));
                }
            }
            if step.results.iter().all(Option::is_some) {
                self.commit_tools(at_ms);
            }
        }
        Ok(())
    }

    fn begin(&mut self) {
        self.steps.clear();
        self.run_start = self.stats;
        self.outcome.0 = None;
        if self.phase == Phase::Idle {
            self.phase = Phase::Model;
        }
    }

    /// What the driver should do next. `max_steps` bounds this run's model calls;
    /// `injected` are steering messages queued since the last call, which enter the log
    /// now if the next action is a model call (and are handed back otherwise).
    pub fn next(&mut self, max_steps: usize, injected: &mut Vec<String>, at_ms: u64) -> Next {
        match &self.phase {
            Phase::Idle => Next::Done(
                self.outcome
                    .0
                    .take()
                    .unwrap_or(Err(HaloError::NothingToResume)),
            ),
            Phase::Model => {
                if self.steps.len() >= max_steps {
                    self.phase = Phase::Idle;
                    let partial = self.result(Vec::new());
                    self.finish(JournalOutcome::MaxStepsReached, at_ms);
                    return Next::Done(Err(HaloError::MaxStepsReached {
                        max_steps,
                        partial: Box::new(partial),
                    }));
                }
                for text in injected.drain(..) {
                    let message = Message::user(text);
                    self.journal.push(JournalEvent::User {
                        message: message.clone(),
                        injected: true,
                        at_ms,
                    });
                    self.log.push_injected(message);
                }
                Next::CallModel {
                    step: self.steps.len() + 1,
                }
            }
            Phase::AwaitingModel { .. } => {
                // The driver dropped the call it planned (a cancelled future): make it again.
                self.phase = Phase::Model;
                self.next(max_steps, injected, at_ms)
            }
            Phase::Tools { step } => Next::RunTools(step.missing()),
            Phase::Review { step } => Next::Review {
                text: step.response.message.text.clone(),
            },
        }
    }

    /// Plans the model call [`next`](Self::next) asked for: checks the history, counts a
    /// prefix change, and lets the ledger predict the call's cache reads. Then send
    /// `prefix` with [`history`](Self::history).
    pub fn plan_model_call(&mut self, prefix: &StablePrefix, at_ms: u64) {
        if self.pending_compaction.is_some() {
            // A driver that does not make summary requests: drop what would have been
            // summarized rather than send a request over the window.
            self.fail_compaction("the driver made no summary request", false, at_ms);
        }
        self.check_history();
        let fingerprint = prefix.fingerprint();
        if self
            .last_fingerprint
            .is_some_and(|last| last != fingerprint)
        {
            self.stats.prefix_fingerprint_changes += 1;
            tracing::info!(
                "halo.prefix.fingerprint" = %fingerprint,
                "the stable prefix changed: expect one prompt-cache miss"
            );
        }
        self.last_fingerprint = Some(fingerprint);
        if self.journaled_fingerprint != Some(fingerprint) {
            self.journal.push(JournalEvent::Prefix {
                fingerprint,
                prefix_bytes: prefix.canonical_bytes().len() as u64,
                at_ms,
            });
            self.journaled_fingerprint = Some(fingerprint);
        }
        let key = self.valid.then(|| LogKey::of(&self.log));
        let rewrite_planned = std::mem::take(&mut self.rewrite_planned);
        let history = self.history();
        let planned = self.ledger.plan(prefix, &history, key, rewrite_planned);
        self.phase = Phase::AwaitingModel { planned };
    }

    /// Asks `config`'s context strategy for a plan before the model call
    /// [`next`](Self::next) asked for, and applies it; call it before
    /// [`plan_model_call`](Self::plan_model_call). Returns whether the history was rewritten
    /// (then journaled as a [`JournalEvent::CompactBoundary`], counted in
    /// [`AgentStats::history_rewrites`] and told to the ledger as the one expected miss).
    ///
    /// A plan that breaks a rule of [`ContextPlan`] — touching the live tool round, a
    /// replacement of another role or call, an index past the end — is not applied (a
    /// warning is logged), and neither is a plan that changes nothing.
    pub fn prepare_context(
        &mut self,
        prefix: &StablePrefix,
        config: &ContextConfig,
        at_ms: u64,
    ) -> bool {
        let estimator = &*config.estimator;
        let prefix_tokens = estimator.estimate(&String::from_utf8_lossy(prefix.canonical_bytes()));
        let estimate = |log: &MessageLog| {
            prefix_tokens
                + log
                    .messages()
                    .map(|m| context::message_tokens(estimator, m))
                    .sum::<u64>()
        };
        let local = estimate(&self.log);
        let budget = ContextBudget {
            // The agent resolves the model's window when it is built; a caller driving the
            // engine by hand without one gets the default.
            context_window: config.window_for(None),
            used_tokens: (local as f64 * self.calibration).ceil() as u64,
            calibration: self.calibration,
            estimator,
        };
        let mut plan = config.strategy.plan(prefix, &self.log, &budget);
        if let Some(compaction) = plan.compact.take() {
            let live = context::live_round_start(&self.log);
            let boundary = context::units(&self.log)
                .iter()
                .any(|u| u.start == compaction.keep_from);
            let task_ok = compaction.task.is_none_or(|t| {
                t < compaction.keep_from
                    && matches!(self.log.messages().nth(t), Some(Message::User { .. }))
            });
            if compaction.keep_from == 0 || compaction.keep_from > live || !boundary || !task_ok {
                tracing::warn!(
                    "a compaction was not made: it keeps from message {}, not the start of a \
                     unit before the live round (from {live}), or its task is not a user \
                     message before that",
                    compaction.keep_from
                );
            } else {
                self.pending_compaction = Some(compaction);
            }
            self.last_estimate = Some(local);
            return false;
        }
        let rewritten = !plan.is_keep() && self.apply_context_plan(plan);
        if rewritten {
            self.rewritten(at_ms, "a context strategy rewrote the history");
        }
        self.last_estimate = Some(if rewritten {
            estimate(&self.log)
        } else {
            local
        });
        rewritten
    }

    /// The provider refused the planned call as over its context window
    /// ([`ModelError::is_context_window_exceeded`](crate::ModelError::is_context_window_exceeded)):
    /// the local estimate ran low. Raises the calibration so the estimate of this request is
    /// at least the window, asks `config`'s strategy for a plan as if the request were at the
    /// window's edge, and applies it (or leaves its compaction waiting for the driver); the
    /// planned call is given up, so [`next`](Self::next) asks for the same step again.
    /// Returns whether anything changed — when nothing did, fail the call as usual
    /// ([`model_failed`](Self::model_failed)).
    pub fn context_overflowed(
        &mut self,
        prefix: &StablePrefix,
        config: &ContextConfig,
        at_ms: u64,
    ) -> bool {
        let window = config.window_for(None);
        if let Some(estimate) = self.last_estimate.filter(|e| *e > 0) {
            self.calibration = self.calibration.max(window as f64 / estimate as f64 * 1.05);
        }
        let before = (self.log.generation(), self.log.len());
        let rewritten = self.prepare_context(prefix, config, at_ms);
        let changed = rewritten
            || self.pending_compaction.is_some()
            || before != (self.log.generation(), self.log.len());
        if changed && matches!(self.phase, Phase::AwaitingModel { .. }) {
            self.phase = Phase::Model;
        }
        changed
    }

    /// The summary request of the compaction a context strategy asked for in
    /// [`prepare_context`](Self::prepare_context): the history to send after the prefix —
    /// the history as it stands, then the compaction's instruction as a user message — with
    /// the session's options (its tool choice unchanged, so the request stays a cache hit on
    /// every provider). `None` when no compaction waits. Feed the answer to
    /// [`finish_compaction`](Self::finish_compaction), or a failure to
    /// [`fail_compaction`](Self::fail_compaction), before
    /// [`plan_model_call`](Self::plan_model_call).
    pub fn compaction_request(&self) -> Option<Vec<Message>> {
        let compaction = self.pending_compaction.as_ref()?;
        let mut history = match &self.compaction_stage {
            Halves::Whole => self.history().into_owned(),
            Halves::First { mid } => self.log.messages().take(*mid).cloned().collect(),
            Halves::Second { mid, first } => {
                let mut h: Vec<Message> = compaction
                    .task
                    .filter(|t| t < mid)
                    .and_then(|t| self.log.messages().nth(t).cloned())
                    .into_iter()
                    .collect();
                h.push(Message::user(format!("{SUMMARY_HEADER}\n{first}")));
                h.extend(
                    self.log
                        .messages()
                        .skip(*mid)
                        .take(compaction.keep_from - mid)
                        .cloned(),
                );
                h
            }
        };
        history.push(Message::user(compaction.instruction.clone()));
        Some(history)
    }

    /// Feeds the answer to the summary request [`compaction_request`](Self::compaction_request)
    /// gave: records the request in the ledger (so its own cache reads are judged) and, for
    /// the last request of the compaction, replaces the messages before its `keep_from` by the
    /// summary (a user message headed [`SUMMARY_HEADER`], after the compaction's task message
    /// when it has one), counting and journaling the rewrite. After the first of two halves
    /// the compaction waits for its second request. An empty summary is a failure
    /// ([`fail_compaction`](Self::fail_compaction)).
    pub fn finish_compaction(
        &mut self,
        prefix: &StablePrefix,
        request: &[Message],
        response: ModelResponse,
        at_ms: u64,
    ) {
        if self.pending_compaction.is_none() {
            return;
        }
        self.stats.record(&response.usage);
        self.stats.compaction_input_tokens += response.usage.input_tokens.unwrap_or(0);
        self.stats.compaction_cache_read_tokens += response.usage.cache_read_tokens.unwrap_or(0);
        // A half's request is not the history grown by one message: a rewrite, planned.
        let halved = self.compaction_stage != Halves::Whole;
        let planned = self.ledger.plan(prefix, request, None, halved);
        self.ledger.record(planned, &response.usage, at_ms);
        let summary = response.message.text.trim().to_string();
        if summary.is_empty() {
            self.fail_compaction("the model's summary was empty", false, at_ms);
            return;
        }
        if let Halves::First { mid } = self.compaction_stage {
            self.compaction_stage = Halves::Second {
                mid,
                first: summary,
            };
            return;
        }
        let Some(compaction) = self.pending_compaction.take() else {
            return;
        };
        self.compaction_stage = Halves::Whole;
        self.stats.compactions += 1;
        let (task, keep_from) = (compaction.task, compaction.keep_from);
        self.log.retain(|i, _, _| i >= keep_from || Some(i) == task);
        let at = usize::from(task.is_some());
        self.log
            .insert(at, Message::user(format!("{SUMMARY_HEADER}\n{summary}")));
        self.rewritten(
            at_ms,
            "a compaction replaced the history's head by a summary",
        );
    }

    /// A summary request failed (`why`). When the whole history's request was over the
    /// window (`over_window`), the compaction goes on in halves: the older half of what it
    /// summarizes first, then the newer half after that summary
    /// ([`compaction_request`](Self::compaction_request) gives each). Otherwise — a half over
    /// the window too, a provider error, an empty answer — the messages before its
    /// `keep_from` are dropped instead (its task message kept), as truncation would, so the
    /// next request still fits.
    pub fn fail_compaction(&mut self, why: &str, over_window: bool, at_ms: u64) {
        let Some(compaction) = self.pending_compaction.take() else {
            return;
        };
        if over_window && self.compaction_stage == Halves::Whole {
            // A unit boundary near the middle of what is summarized, after the task.
            let after_task = compaction.task.map_or(0, |t| t + 1);
            let mid = context::units(&self.log)
                .iter()
                .map(|u| u.start)
                .filter(|&s| s > after_task && s < compaction.keep_from)
                .min_by_key(|&s| s.abs_diff((after_task + compaction.keep_from) / 2));
            if let Some(mid) = mid {
                tracing::warn!("the summary request failed ({why}); summarizing in halves");
                self.compaction_stage = Halves::First { mid };
                self.pending_compaction = Some(compaction);
                return;
            }
        }
        self.compaction_stage = Halves::Whole;
        tracing::warn!(
            "the compaction failed ({why}); dropping the messages it would have summarized"
        );
        let (task, keep_from) = (compaction.task, compaction.keep_from);
        self.log.retain(|i, _, _| i >= keep_from || Some(i) == task);
        self.rewritten(
            at_ms,
            "the history's head was dropped (a failed compaction)",
        );
    }

    /// Counts, journals and tells the ledger of a rewrite just made.
    fn rewritten(&mut self, at_ms: u64, what: &str) {
        self.rewrite_planned = true;
        self.stats.history_rewrites += 1;
        self.last_estimate = None;
        self.journal.push(JournalEvent::CompactBoundary {
            history: self.log.to_vec(),
            injected: self.log.injected_indices(),
            discardable: self.log.discardable_indices(),
            at_ms,
        });
        tracing::info!(
            "halo.context.messages" = self.log.len(),
            "{what}: expect one prompt-cache miss"
        );
    }

    /// Applies a plan whole, or not at all when it breaks a rule; returns whether it did.
    fn apply_context_plan(&mut self, plan: ContextPlan) -> bool {
        let live = context::live_round_start(&self.log);
        let messages: Vec<&Message> = self.log.messages().collect();
        let refuse = |why: String| {
            tracing::warn!("a context plan was not applied: {why}");
            false
        };
        if let Some(&i) = plan.drop.iter().find(|&&i| i >= live) {
            return refuse(format!(
                "it drops message {i}, in the live tool round (from {live})"
            ));
        }
        for (i, replacement) in &plan.replace {
            if *i >= live {
                return refuse(format!(
                    "it replaces message {i}, in the live tool round (from {live})"
                ));
            }
            let same_slot = match (messages[*i], replacement) {
                (Message::Tool(a), Message::Tool(b)) => a.tool_call_id == b.tool_call_id,
                (Message::Assistant(a), Message::Assistant(b)) => a
                    .tool_calls
                    .iter()
                    .map(|c| &c.id)
                    .eq(b.tool_calls.iter().map(|c| &c.id)),
                (Message::User { .. }, Message::User { .. })
                | (Message::System { .. }, Message::System { .. }) => true,
                _ => false,
            };
            if !same_slot {
                return refuse(format!(
                    "its replacement of message {i} changes the role or the tool calls"
                ));
            }
        }
        if let Some((at, summary)) = &plan.insert {
            if *at > live {
                return refuse(format!("it inserts at {at}, inside the live tool round"));
            }
            if !summary.tool_calls().is_empty() || matches!(summary, Message::Tool(_)) {
                return refuse("its summary carries tool calls or results".into());
            }
        }
        for (i, replacement) in plan.replace {
            self.log.replace(i, replacement);
        }
        if !plan.drop.is_empty() {
            self.log.retain(|i, _, _| !plan.drop.contains(&i));
        }
        if let Some((at, summary)) = plan.insert {
            let dropped_before = plan.drop.range(..at).count();
            self.log.insert(at - dropped_before, summary);
        }
        true
    }

    /// Checks the log's validity incrementally: only messages appended since the last check
    /// are looked at while the log was not edited.
    fn check_history(&mut self) {
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
    pub fn history(&self) -> Cow<'_, [Message]> {
        let slice = self.log.contiguous();
        match slice {
            Some(s) if self.valid => Cow::Borrowed(s),
            Some(s) => request::valid_history(s),
            None => Cow::Owned(request::valid_history(&self.log.to_vec()).into_owned()),
        }
    }

    /// Where `history` (what [`history`](Self::history) returned) comes from, for the
    /// request's [`with_history_key`](crate::ModelRequest::with_history_key): `Some` when it
    /// is the log lent as it stands, `None` for a repaired copy. With it an adapter knows
    /// which of its messages an earlier request already carried ([`HistoryKey`]).
    pub fn history_key(&self, history: &[Message]) -> Option<HistoryKey> {
        self.log.history_key(history)
    }

    /// Feeds the model's response to the planned call, made at `at_ms`; returns the
    /// ledger's check of it.
    pub fn model_response(
        &mut self,
        response: ModelResponse,
        review: bool,
        at_ms: u64,
    ) -> CacheCheck {
        let planned = match std::mem::take(&mut self.phase) {
            Phase::AwaitingModel { planned } => Some(planned),
            _ => None,
        };
        let fingerprint = self.last_fingerprint.unwrap_or(Fingerprint([0; 32]));
        self.stats.record(&response.usage);
        if let (Some(reported), Some(estimate)) = (response.usage.input_tokens, self.last_estimate)
        {
            self.calibration = (reported as f64 / estimate.max(1) as f64).max(1.0);
        }
        let cache = match planned {
            Some(planned) => self.ledger.record(planned, &response.usage, at_ms),
            // Fed without a plan (a driver bug): record without a prediction.
            None => {
                tracing::warn!("a model response was fed without a planned call");
                CacheCheck {
                    call: 0,
                    prefix_fingerprint: fingerprint,
                    prefix_changed: false,
                    history_messages: self.log.len(),
                    reused_history_messages: 0,
                    expected_cached_tokens: None,
                    observed_cached_tokens: response.usage.cache_read_tokens,
                    history_rewritten: false,
                    input_tokens: response.usage.input_tokens,
                    verdict: CacheVerdict::Unreported,
                }
            }
        };
        self.stats.expected_cached_tokens += cache.expected_cached_tokens.unwrap_or(0);
        if let CacheVerdict::Bust { cause } = &cache.verdict {
            self.stats.cache_busts += 1;
            tracing::warn!(
                "halo.cache.expected_tokens" = cache.expected_cached_tokens.unwrap_or(0),
                "halo.cache.read_tokens" = cache.observed_cached_tokens.unwrap_or(0),
                "prompt-cache bust: {cause}"
            );
        }
        let n = response.message.tool_calls.len();
        let step = PendingStep {
            response,
            fingerprint,
            cache: Some(cache.clone()),
            results: vec![None; n],
        };
        self.phase = if n > 0 {
            Phase::Tools { step }
        } else if review {
            Phase::Review { step }
        } else {
            self.commit_answer(step, at_ms);
            Phase::Idle
        };
        cache
    }

    /// The model call failed: the run ends with `error`; the log keeps every completed step
    /// (and [`resume`](Self::resume) makes the same call again).
    pub fn model_failed(&mut self, error: HaloError, at_ms: u64) {
        self.phase = Phase::Idle;
        self.finish(
            JournalOutcome::Error {
                message: error.to_string(),
            },
            at_ms,
        );
        self.outcome.0 = Some(Err(error));
    }

    /// Feeds one tool result of the step in flight. Returns whether the step is now complete
    /// (and logged).
    ///
    /// # Errors
    /// - [`HaloError::UnknownToolCall`] when no call of the step in flight has that id;
    /// - [`HaloError::DuplicateToolResult`] when the call already has its result.
    pub fn tool_result(&mut self, result: ToolResult, at_ms: u64) -> Result<bool, HaloError> {
        let Phase::Tools { step } = &mut self.phase else {
            return Err(HaloError::UnknownToolCall {
                call_id: result.tool_call_id,
            });
        };
        let calls = &step.response.message.tool_calls;
        let Some(i) = calls.iter().position(|c| c.id == result.tool_call_id) else {
            return Err(HaloError::UnknownToolCall {
                call_id: result.tool_call_id,
            });
        };
        if step.results[i].is_some() {
            return Err(HaloError::DuplicateToolResult {
                call_id: result.tool_call_id,
            });
        }
        step.results[i] = Some(result);
        if step.results.iter().all(Option::is_some) {
            self.commit_tools(at_ms);
            return Ok(true);
        }
        Ok(false)
    }

    /// Ends the run with the step in flight as its answer: `results` answer its calls that
    /// have none yet (a call still without one is closed as
    /// [interrupted](request::INTERRUPTED)), the step is logged, and the run's outcome is
    /// its result. This is how an object run's output tool call ends the run
    /// ([`generate_object`](crate::HaloAgent::generate_object) in tool mode).
    pub fn finish_with_results(&mut self, results: Vec<ToolResult>, at_ms: u64) {
        let Phase::Tools { mut step } = std::mem::take(&mut self.phase) else {
            return;
        };
        for result in results {
            let calls = &step.response.message.tool_calls;
            if let Some(i) = calls.iter().position(|c| c.id == result.tool_call_id)
                && step.results[i].is_none()
            {
                step.results[i] = Some(result);
            }
        }
        let calls = step.response.message.tool_calls.clone();
        for (call, slot) in calls.iter().zip(step.results.iter_mut()) {
            if slot.is_none() {
                *slot = Some(interrupted(call));
            }
        }
        self.stats.tool_calls += step.results.len() as u64;
        self.commit_answer(step, at_ms);
    }

    /// Ends the run with `error` (a fatal tool error, a hook abort, a rejected answer); the
    /// step in flight is not logged.
    pub fn abort_step(&mut self, error: HaloError, at_ms: u64) {
        self.phase = Phase::Idle;
        self.finish(
            JournalOutcome::Error {
                message: error.to_string(),
            },
            at_ms,
        );
        self.outcome.0 = Some(Err(error));
    }

    /// Accepts the answer under review: the run ends with it.
    pub fn accept_answer(&mut self, at_ms: u64) {
        if let Phase::Review { step } = std::mem::take(&mut self.phase) {
            self.commit_answer(step, at_ms);
        }
    }

    /// Rejects the answer under review with `feedback`: the answer and the feedback (as an
    /// injected user message) enter the log, and the run takes another step.
    pub fn reject_answer(&mut self, feedback: String, at_ms: u64) {
        if let Phase::Review { step } = std::mem::take(&mut self.phase) {
            self.log_step(step, at_ms);
            let message = Message::user(feedback);
            self.journal.push(JournalEvent::User {
                message: message.clone(),
                injected: true,
                at_ms,
            });
            self.log.push_injected(message);
            self.phase = Phase::Model;
        }
    }

    /// The result so far, with `pending` tool calls left for the caller.
    pub fn result(&self, pending_tool_calls: Vec<ToolCall>) -> GenerateTextResult {
        GenerateTextResult {
            text: if pending_tool_calls.is_empty() {
                self.steps
                    .last()
                    .map(|s| s.message.text.clone())
                    .unwrap_or_default()
            } else {
                String::new()
            },
            steps: self.steps.clone(),
            stats: self.stats.since(&self.run_start),
            pending_tool_calls,
        }
    }

    /// Counts `n` changes a repair strategy made to the model's turn
    /// ([`AgentStats::tool_call_repairs`]).
    pub fn record_repairs(&mut self, n: usize) {
        self.stats.tool_call_repairs += n as u64;
    }

    /// Adds the counters of a run a tool made on the agent's behalf (a sub-agent's, a
    /// plan's: [`ToolOutput::stats`](crate::ToolOutput::stats)) to this run's
    /// ([`AgentStats::add_delegated`]). Not journaled: a session restored from its journal
    /// counts only its own model calls.
    pub fn record_delegated(&mut self, stats: &AgentStats) {
        self.stats.add_delegated(stats);
    }

    /// A state for a run on a fork of this one ([`crate::delegate`]): the same history (a
    /// clone of the log, which remembers where it forked) and the same ledger and prefix
    /// fingerprint, so the fork's first request is predicted to read everything this
    /// state's last request carried from the cache; no step in flight, no journal, counters
    /// from zero.
    pub fn fork(&self) -> RunState {
        RunState {
            log: self.log.clone(),
            ledger: self.ledger.clone(),
            last_fingerprint: self.last_fingerprint,
            journaled_fingerprint: self.journaled_fingerprint,
            calibration: self.calibration,
            ..RunState::new(MessageLog::with_capacity(0))
        }
    }

    /// This run's counters so far.
    pub fn run_stats(&self) -> AgentStats {
        self.stats.since(&self.run_start)
    }

    fn commit_tools(&mut self, at_ms: u64) {
        if let Phase::Tools { step } = std::mem::take(&mut self.phase) {
            self.stats.tool_calls += step.results.len() as u64;
            self.log_step(step, at_ms);
            self.phase = Phase::Model;
        }
    }

    fn commit_answer(&mut self, step: PendingStep, at_ms: u64) {
        self.log_step(step, at_ms);
        let result = self.result(Vec::new());
        self.finish(JournalOutcome::Answered, at_ms);
        self.outcome.0 = Some(Ok(result));
    }

    fn log_step(&mut self, step: PendingStep, at_ms: u64) {
        let results: Vec<ToolResult> = step.results.into_iter().flatten().collect();
        self.journal.push(JournalEvent::Step {
            assistant: step.response.message.clone(),
            results: results.clone(),
            finish_reason: step.response.finish_reason.clone(),
            usage: step.response.usage,
            at_ms,
        });
        self.log.push_step(
            Message::Assistant(step.response.message.clone()),
            results.iter().cloned().map(Message::Tool),
        );
        if let Some(cache) = step.cache {
            self.steps.push(StepResult {
                message: step.response.message,
                finish_reason: step.response.finish_reason,
                usage: step.response.usage,
                tool_results: results,
                prefix_fingerprint: step.fingerprint,
                cache,
            });
        }
    }

    fn finish(&mut self, outcome: JournalOutcome, at_ms: u64) {
        self.journal.push(JournalEvent::Outcome { outcome, at_ms });
    }

    /// The state of a session rebuilt from its journal: the log (every committed step),
    /// the counters, the last prefix fingerprint (so a different prefix now counts as the
    /// one expected miss). The ledger starts without a previous call.
    pub fn from_journal(events: &[JournalEvent], log_capacity: usize) -> Self {
        let mut state = RunState::new(MessageLog::with_capacity(log_capacity));
        // The last call: its prefix, the history it carried, its input tokens and time.
        let mut prefix_bytes = 0;
        let mut last_call: Option<(Vec<Message>, Option<u64>, u64)> = None;
        for event in events {
            match event {
                JournalEvent::Prefix {
                    fingerprint,
                    prefix_bytes: bytes,
                    ..
                } => {
                    state.last_fingerprint = Some(*fingerprint);
                    state.journaled_fingerprint = Some(*fingerprint);
                    prefix_bytes = *bytes;
                }
                JournalEvent::User {
                    message, injected, ..
                } => {
                    if *injected {
                        state.log.push_injected(message.clone());
                    } else {
                        state.log.push(message.clone());
                    }
                }
                JournalEvent::Step {
                    assistant,
                    results,
                    usage,
                    at_ms,
                    ..
                } => {
                    last_call = Some((state.log.to_vec(), usage.input_tokens, *at_ms));
                    state.stats.record(usage);
                    state.stats.tool_calls += results.len() as u64;
                    state.log.push_step(
                        Message::Assistant(assistant.clone()),
                        results.iter().cloned().map(Message::Tool),
                    );
                }
                // A boundary without a history (the reserved shape of earlier journals)
                // changes nothing.
                JournalEvent::CompactBoundary {
                    history,
                    injected,
                    discardable,
                    ..
                } if !history.is_empty() => {
                    state.log.reset_to(history.clone(), injected, discardable);
                }
                JournalEvent::Outcome { .. } | JournalEvent::CompactBoundary { .. } => {}
            }
        }
        if let (Some(fingerprint), Some((history, input_tokens, at_ms))) =
            (state.last_fingerprint, last_call)
        {
            let history = request::valid_history(&history);
            state
                .ledger
                .seed(fingerprint, prefix_bytes, &history, input_tokens, at_ms);
        }
        state.run_start = state.stats;
        state
    }
}
