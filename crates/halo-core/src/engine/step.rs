//! The step in flight: the model's turn fed in (repaired, checked as an object run's
//! answer), its tool calls batched, paused for the caller or for approvals, their outcomes
//! and the caller's answers fed in, the answer reviewed, the step committed.

use crate::agent::Config;
use crate::driver::{Effect, Pause, RunKind, ToolOutcome};
use crate::error::HaloError;
use crate::guardrail::OutputVerdict;
use crate::message::{Message, ToolCall, ToolResult};
use crate::model::{FinishReason, ModelError, ModelResponse};
use crate::output::{NOT_RUN_AFTER_OUTPUT, OUTPUT_ACCEPTED};
use crate::repair::RepairContext;
use crate::request;
use crate::run::{AgentEvent, StepResult};
use crate::session::{CallStatus, JournalEvent, JournalOutcome};
use crate::text::cut_middle;
use crate::tool::ToolOutput;

use super::{CallState, Ending, Failure, PendingStep, Phase, RunState, Stage};

impl RunState {
    /// The model answered the planned call.
    pub(super) fn model_responded(
        &mut self,
        mut response: ModelResponse,
        config: &Config,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        let Phase::AwaitingModel { planned, call, .. } = std::mem::take(&mut self.phase) else {
            return Err(self.unexpected("a model response"));
        };
        self.overflowed = false;
        self.stats.record(&response.usage);
        if let (Some(reported), Some(estimate)) = (response.usage.input_tokens, self.last_estimate)
        {
            self.calibration = (reported as f64 / estimate.max(1) as f64).max(1.0);
        }
        let fingerprint = planned.fingerprint();
        let cache = self.ledger.record_answer(
            planned,
            &response.usage,
            response.provider.as_deref(),
            at_ms,
        );
        self.stats.expected_cached_tokens += cache.expected_cached_tokens.unwrap_or(0);
        if cache.provider_changed {
            self.stats.provider_switches += 1;
        }
        if cache.prefix_changed {
            self.stats.prefix_fingerprint_changes += 1;
        }
        if let crate::ledger::CacheVerdict::Bust { cause } = &cache.verdict {
            self.stats.cache_busts += 1;
            tracing::warn!(
                "halo.cache.expected_tokens" = cache.expected_cached_tokens.unwrap_or(0),
                "halo.cache.read_tokens" = cache.observed_cached_tokens.unwrap_or(0),
                "prompt-cache bust: {cause}"
            );
            self.push_event(AgentEvent::CacheBust(Box::new(cache.clone())));
        }
        // The repaired turn is the one logged, journaled and sent from now on.
        let object = matches!(self.kind, RunKind::Object(_));
        let repair = match (&config.guards.repair, object) {
            (Some(strategy), false) => {
                let history = self.history();
                let context =
                    RepairContext::new(config.prefix.tools(), config.tools.registry(), &history);
                let outcome = strategy.repair(&mut response.message, context);
                for r in &outcome.repairs {
                    tracing::info!(
                        "gen_ai.tool.call.id" = %r.call_id,
                        "halo.repair.kind" = ?r.kind,
                        "halo.repair.before" = %r.before,
                        "halo.repair.after" = %r.after,
                        "halo.repair: a tool call was repaired"
                    );
                }
                Some(outcome)
            }
            _ => None,
        };
        if let Some(outcome) = &repair {
            self.stats.tool_call_repairs += outcome.repairs.len() as u64;
        }
        let active = call.options(&config.options).active_tools.clone();
        let step = PendingStep::new(response, fingerprint, Some(cache), active);
        if step.tool_calls().is_empty() {
            self.answered(step, config, at_ms);
            return Ok(());
        }
        self.steps_opened += 1;
        if self.recording.events {
            for call in step.tool_calls() {
                self.events.push(AgentEvent::ToolCall(call.clone()));
            }
        }
        if self.recording.journal {
            self.journal.push(JournalEvent::StepOpened {
                assistant: step.response.message.clone(),
                finish_reason: step.response.finish_reason.clone(),
                usage: step.response.usage,
                at_ms,
            });
        }
        self.phase = Phase::Tools { step };
        if let Some(outcome) = repair {
            if let Some(stop) = outcome.stop {
                self.fail(
                    Failure::RetryBudget {
                        tool: stop.tool,
                        attempts: stop.attempts,
                        message: stop.message,
                    },
                    at_ms,
                );
                return Ok(());
            }
            for refusal in outcome.refusals {
                let Some(call) = self.call(&refusal.call_id) else {
                    continue;
                };
                // A refusal of a call already answered is ignored.
                let _ =
                    self.record_result(ToolResult::error(&call, refusal.message), config, at_ms);
            }
        }
        self.check_output_call(config, at_ms);
        Ok(())
    }

    /// The model call failed: a context-window error is recovered from once in a row (the
    /// history rewritten, the step planned again); any other ends the run, the log keeping
    /// every completed step ([`resume`](Self::resume) makes the same call again).
    pub(super) fn model_failed(
        &mut self,
        error: ModelError,
        config: &Config,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        let Phase::AwaitingModel { settings, .. } = &self.phase else {
            return Err(self.unexpected("a model error"));
        };
        let settings = settings.clone();
        let recovered = error.is_context_window_exceeded()
            && !self.overflowed
            && match &config.context {
                Some(context) => self.context_overflowed(config, context, settings, at_ms),
                None => false,
            };
        if recovered {
            self.overflowed = true;
            tracing::warn!(
                "the request was over the model's context window: the history was rewritten, and the step is made again"
            );
        } else {
            self.fail(Failure::Model { error }, at_ms);
        }
        Ok(())
    }

    /// An answer without tool calls: an object run's check, then the output guardrails, or
    /// the run ends with it.
    fn answered(&mut self, step: PendingStep, config: &Config, at_ms: u64) {
        if let RunKind::Object(spec) = &self.kind {
            self.attempts += 1;
            let text = &step.response.message.text;
            // A refusal is not retried: the same question gets the same answer.
            let refused = step.response.finish_reason == FinishReason::ContentFilter;
            if let Err(problem) = spec.check_text(text) {
                if refused || self.attempts > spec.retries() {
                    let message = if refused {
                        format!(
                            "the model refused to answer or its answer was filtered ({problem})"
                        )
                    } else {
                        problem
                    };
                    let raw = text.clone();
                    let attempts = self.attempts;
                    self.fail(
                        Failure::InvalidObject {
                            attempts,
                            message,
                            raw,
                        },
                        at_ms,
                    );
                } else {
                    let feedback = spec.feedback(&problem);
                    self.retry_answer(step, feedback, at_ms);
                }
                return;
            }
        }
        if config.guards.output.is_empty() {
            self.commit_answer(step, at_ms);
        } else {
            self.phase = Phase::Review { step };
        }
    }

    /// In a tool-mode object run, the output tool's call is the answer: checked here, then
    /// reviewed, accepted, or sent back.
    fn check_output_call(&mut self, config: &Config, at_ms: u64) {
        let RunKind::Object(spec) = &self.kind else {
            return;
        };
        let Some(tool) = spec.output_tool() else {
            return;
        };
        let Phase::Tools { step } = &self.phase else {
            return;
        };
        let Some(i) = step
            .tool_calls()
            .iter()
            .zip(&step.results)
            .position(|(c, r)| c.name == tool && r.is_none())
        else {
            return;
        };
        let call = step.tool_calls()[i].clone();
        self.attempts += 1;
        match spec.check_call(&call) {
            Ok(_) if !config.guards.output.is_empty() => {
                if let Phase::Tools { step } = &mut self.phase {
                    step.reviewing = Some(i);
                }
            }
            Ok(_) => self.accept_output(i, at_ms),
            Err(problem) if self.attempts > spec.retries() => {
                let attempts = self.attempts;
                self.fail(
                    Failure::InvalidObject {
                        attempts,
                        message: problem,
                        raw: call.raw_arguments.into(),
                    },
                    at_ms,
                );
            }
            Err(problem) => {
                let feedback = spec.call_feedback(&problem);
                let _ = self.record_result(ToolResult::error(&call, feedback), config, at_ms);
            }
        }
    }

    /// The output call `i` is accepted: it and the step's other calls get their results,
    /// the step is logged, and the run ends with it.
    fn accept_output(&mut self, i: usize, at_ms: u64) {
        let Phase::Tools { mut step } = std::mem::take(&mut self.phase) else {
            return;
        };
        for (j, call) in step.response.message.tool_calls.iter().enumerate() {
            if step.results[j].is_none() {
                let text = if j == i {
                    OUTPUT_ACCEPTED
                } else {
                    NOT_RUN_AFTER_OUTPUT
                };
                let result = if j == i {
                    ToolResult::ok(call, text)
                } else {
                    ToolResult::error(call, text)
                };
                self.push_event(AgentEvent::ToolResult(result.clone()));
                step.results[j] = Some(result);
            }
        }
        self.stats.tool_calls += step.results.len() as u64;
        self.commit_answer(step, at_ms);
    }

    /// What the step's calls need next: the output guardrails' review (an object run's
    /// output call), the calls started and not finished (asked again), the caller (manual
    /// mode), the next batch, approvals denied at once when no one can answer, or a pause.
    /// `None` when the step moved on (the loop asks again).
    pub(super) fn tools_effect(&mut self, config: &Config, at_ms: u64) -> Option<Effect> {
        let Phase::Tools { step } = &mut self.phase else {
            return None;
        };
        if let Some(i) = step.reviewing {
            return Some(Effect::Review {
                text: step.tool_calls()[i].raw_arguments.to_string(),
            });
        }
        if step.complete() {
            self.commit_tools(config, at_ms);
            return None;
        }
        // The calls without a result, in call order (no list is built: a step has few).
        let n = step.results.len();
        fn open(results: &[Option<ToolResult>]) -> impl Iterator<Item = usize> + '_ {
            (0..results.len()).filter(|&i| results[i].is_none())
        }
        if open(&step.results).any(|i| *step.state(i) == CallState::Started) {
            let in_flight = open(&step.results)
                .filter(|&i| *step.state(i) == CallState::Started)
                .map(|i| step.tool_calls()[i].clone())
                .collect();
            return Some(Effect::RunTools { calls: in_flight });
        }
        let object = matches!(self.kind, RunKind::Object(_));
        if matches!(self.kind, RunKind::Manual) {
            return Some(Effect::Pause(Pause {
                tool_calls: step.missing(),
                approvals: Vec::new(),
            }));
        }
        let tools = &config.tools;
        let runnable = |step: &PendingStep, i: usize| {
            matches!(step.state(i), CallState::Waiting | CallState::Approved)
                && (object || !tools.is_client_side(&step.tool_calls()[i].name))
        };
        // The next batch: consecutive concurrency-safe calls together, any other alone.
        // (A batch with a call in it began with a safe one: an unsafe first call is alone.)
        let mut calls: Vec<ToolCall> = Vec::new();
        for i in 0..n {
            if step.results[i].is_some() || !runnable(step, i) {
                continue;
            }
            let safe = tools.concurrency_safe(&step.tool_calls()[i].name);
            if !calls.is_empty() && !safe {
                break;
            }
            let alone = calls.is_empty() && !safe;
            step.set_state(i, CallState::Started);
            let call = step.tool_calls()[i].clone();
            if self.recording.journal && !tools.rerun_safe(&call.name) {
                self.journal.push(JournalEvent::Call {
                    call_id: call.id.to_string(),
                    status: CallStatus::Started,
                    at_ms,
                });
            }
            calls.push(call);
            if alone {
                break;
            }
        }
        if !calls.is_empty() {
            return Some(Effect::RunTools { calls });
        }
        let approvals = step.awaiting_approval();
        if !approvals.is_empty() && (object || !config.limits.pause_for_approvals) {
            // No one can answer: denied at once, never waiting.
            for approval in approvals {
                let result = request::unapproved(&approval.call, &approval.reason);
                let _ = self.record_result(result, config, at_ms);
            }
            return None;
        }
        let tool_calls: Vec<ToolCall> = open(&step.results)
            .filter(|&i| *step.state(i) == CallState::Waiting)
            .map(|i| step.tool_calls()[i].clone())
            .collect();
        Some(Effect::Pause(Pause {
            tool_calls,
            approvals,
        }))
    }

    /// What came of one call.
    pub(super) fn tool_outcome(
        &mut self,
        outcome: ToolOutcome,
        config: &Config,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        match outcome {
            ToolOutcome::Result { result, delegated } => {
                self.record_result(result, config, at_ms)?;
                if let Some(stats) = delegated {
                    self.stats.add_delegated(&stats);
                }
                Ok(())
            }
            ToolOutcome::NeedsApproval { call_id, reason } => {
                let i = self.open_call(&call_id)?;
                if let Phase::Tools { step } = &mut self.phase {
                    step.set_state(
                        i,
                        CallState::Asked {
                            reason: reason.clone(),
                        },
                    );
                }
                self.push_journal(JournalEvent::Call {
                    call_id,
                    status: CallStatus::AwaitingApproval { reason },
                    at_ms,
                });
                Ok(())
            }
            ToolOutcome::Fatal { tool, message, .. } => {
                self.open_or_err()?;
                self.fail(Failure::ToolFatal { tool, message }, at_ms);
                Ok(())
            }
            ToolOutcome::Aborted { tool, reason, .. } => {
                self.open_or_err()?;
                self.fail(Failure::Aborted { tool, reason }, at_ms);
                Ok(())
            }
        }
    }

    fn open_or_err(&self) -> Result<(), HaloError> {
        match self.phase {
            Phase::Tools { .. } => Ok(()),
            _ => Err(self.unexpected("a tool outcome")),
        }
    }

    /// The index of the call `call_id` of the step in flight, which must have no result.
    fn open_call(&self, call_id: &str) -> Result<usize, HaloError> {
        let Phase::Tools { step } = &self.phase else {
            return Err(HaloError::UnknownToolCall {
                call_id: call_id.to_string(),
            });
        };
        let Some(i) = step.index_of(call_id) else {
            return Err(HaloError::UnknownToolCall {
                call_id: call_id.to_string(),
            });
        };
        if step.results[i].is_some() {
            return Err(HaloError::DuplicateToolResult {
                call_id: call_id.to_string(),
            });
        }
        Ok(i)
    }

    /// The call `call_id` of the step in flight.
    fn call(&self, call_id: &str) -> Option<ToolCall> {
        let Phase::Tools { step } = &self.phase else {
            return None;
        };
        step.tool_calls().iter().find(|c| c.id == call_id).cloned()
    }

    /// The caller's result for a call.
    pub(super) fn submitted(
        &mut self,
        call_id: &str,
        output: ToolOutput,
        config: &Config,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        let i = self.open_call(call_id)?;
        let Phase::Tools { step } = &self.phase else {
            return Err(self.unexpected("a tool result"));
        };
        let call = &step.tool_calls()[i];
        let result = ToolResult {
            is_error: output.is_error,
            discardable: output.discardable,
            ..ToolResult::ok(call, output.content)
        };
        if let Some(stats) = output.stats {
            self.stats.add_delegated(&stats);
        }
        self.record_result(result, config, at_ms)
    }

    /// Someone approved the call `call_id`.
    pub(super) fn approve(&mut self, call_id: &str, at_ms: u64) -> Result<(), HaloError> {
        let i = self.asked(call_id)?;
        if let Phase::Tools { step } = &mut self.phase {
            step.set_state(i, CallState::Approved);
            step.approved.push(call_id.to_string());
        }
        self.push_journal(JournalEvent::Call {
            call_id: call_id.to_string(),
            status: CallStatus::Approved,
            at_ms,
        });
        Ok(())
    }

    /// Someone rejected the call `call_id`: it gets an error result the model reads.
    pub(super) fn reject(
        &mut self,
        call_id: &str,
        reason: &str,
        config: &Config,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        self.asked(call_id)?;
        let call = self
            .call(call_id)
            .ok_or_else(|| HaloError::UnknownToolCall {
                call_id: call_id.to_string(),
            })?;
        self.record_result(request::rejected(&call, reason), config, at_ms)
    }

    /// The index of the call `call_id`, which must wait for approval.
    fn asked(&self, call_id: &str) -> Result<usize, HaloError> {
        let i = self.open_call(call_id)?;
        match &self.phase {
            Phase::Tools { step } if matches!(step.state(i), CallState::Asked { .. }) => Ok(i),
            _ => Err(HaloError::NotAwaitingApproval {
                call_id: call_id.to_string(),
            }),
        }
    }

    /// Gives a call of the step in flight its result: cut to the tool's output limit,
    /// reported, and journaled — with the whole step once it is complete, on its own
    /// before that.
    ///
    /// # Errors
    /// [`HaloError::UnknownToolCall`], [`HaloError::DuplicateToolResult`].
    pub(super) fn record_result(
        &mut self,
        mut result: ToolResult,
        config: &Config,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        let i = self.open_call(&result.tool_call_id)?;
        let limit = config.limits.tool_output_for(&result.tool_name);
        if result.content.len() > limit
            && let Some(cut) = cut_middle(
                &result.content,
                limit,
                &format!("the result was longer than the {limit}-byte limit on tool output"),
            )
        {
            tracing::info!(
                tool = %result.tool_name,
                bytes = result.content.len(),
                limit,
                "a tool result was cut to the output limit"
            );
            result.content = cut.into();
        }
        self.check_handoff(&mut result, config);
        if self.recording.events {
            self.events.push(AgentEvent::ToolResult(result.clone()));
        }
        let Phase::Tools { step } = &mut self.phase else {
            return Err(self.unexpected("a tool result"));
        };
        if step.reviewing == Some(i) {
            step.reviewing = None;
        }
        if step.complete_but(i) {
            // The last result: it is journaled with the whole step.
            step.results[i] = Some(result);
            self.commit_tools(config, at_ms);
        } else if self.recording.journal {
            step.results[i] = Some(result.clone());
            self.journal
                .push(JournalEvent::ToolResult { result, at_ms });
        } else {
            step.results[i] = Some(result);
        }
        Ok(())
    }

    /// The output guardrails' verdict on the answer under review.
    pub(super) fn reviewed(
        &mut self,
        verdict: OutputVerdict,
        guardrail: String,
        config: &Config,
        at_ms: u64,
    ) -> Result<(), HaloError> {
        match std::mem::take(&mut self.phase) {
            Phase::Review { step } => {
                match verdict {
                    OutputVerdict::Accept => self.commit_answer(step, at_ms),
                    OutputVerdict::Retry(feedback) => self.retry_answer(step, feedback, at_ms),
                    OutputVerdict::Reject(reason) => {
                        let answer = step.response.message.text.clone();
                        self.fail(
                            Failure::OutputRejected {
                                guardrail,
                                reason,
                                answer,
                            },
                            at_ms,
                        );
                    }
                }
                Ok(())
            }
            Phase::Tools { step } if step.reviewing.is_some() => {
                let i = step.reviewing.unwrap_or_default();
                let call = step.tool_calls()[i].clone();
                self.phase = Phase::Tools { step };
                match verdict {
                    OutputVerdict::Accept => self.accept_output(i, at_ms),
                    OutputVerdict::Retry(feedback) => {
                        self.record_result(ToolResult::error(&call, feedback), config, at_ms)?;
                    }
                    OutputVerdict::Reject(reason) => self.fail(
                        Failure::OutputRejected {
                            guardrail,
                            reason,
                            answer: call.raw_arguments.into(),
                        },
                        at_ms,
                    ),
                }
                Ok(())
            }
            phase => {
                self.phase = phase;
                Err(self.unexpected("the output guardrails' verdict"))
            }
        }
    }

    /// Every call of the step has its result: the step enters the log, the run goes on —
    /// with the agent a handoff of the step reached, if any ([`crate::handoff`]).
    pub(super) fn commit_tools(&mut self, config: &Config, at_ms: u64) {
        if let Phase::Tools { step } = std::mem::take(&mut self.phase) {
            self.stats.tool_calls += step.results.len() as u64;
            let handoff = step
                .results
                .iter()
                .flatten()
                .filter(|r| !r.is_error)
                .find_map(|r| config.handoff_target(&r.tool_name))
                .map(str::to_string);
            self.log_step(step, at_ms);
            self.phase = Phase::Boundary { stage: Stage::Open };
            if let Some(to) = handoff {
                self.hand_off(to, at_ms);
            }
        }
    }

    /// The answer is accepted: the run ends with it — unless steering messages wait, which
    /// take another step (the AI SDK's steering: a message sent while the model answered is
    /// not dropped).
    fn commit_answer(&mut self, step: PendingStep, at_ms: u64) {
        self.log_step(step, at_ms);
        if !self.steering.is_empty() && matches!(self.kind, RunKind::Text) {
            self.phase = Phase::Boundary { stage: Stage::Open };
            return;
        }
        self.phase = Phase::Idle;
        self.finish(JournalOutcome::Answered, at_ms);
        self.ending = Some(Ending::Answered);
    }

    /// The answer is sent back with `feedback`: the answer and the feedback (as an injected
    /// user message) enter the log, and the run takes another step.
    fn retry_answer(&mut self, step: PendingStep, feedback: String, at_ms: u64) {
        self.log_step(step, at_ms);
        let message = Message::user(feedback);
        self.push_journal(JournalEvent::User {
            message: message.clone(),
            injected: true,
            at_ms,
        });
        self.log.push_injected(message);
        self.phase = Phase::Boundary { stage: Stage::Open };
    }

    fn log_step(&mut self, step: PendingStep, at_ms: u64) {
        // The results in their slots' allocation (`map_while` collects in place; `flatten`
        // would allocate anew).
        let mut slots = step.results;
        slots.retain(Option::is_some);
        let results: Vec<ToolResult> = slots.into_iter().map_while(|r| r).collect();
        if self.recording.journal {
            self.journal.push(JournalEvent::Step {
                assistant: step.response.message.clone(),
                results: results.clone(),
                finish_reason: step.response.finish_reason.clone(),
                usage: step.response.usage,
                at_ms,
            });
        }
        self.log.push_step(
            Message::Assistant(step.response.message.clone()),
            results.iter().cloned().map(Message::Tool),
        );
        if let Some(cache) = step.cache {
            let result = StepResult {
                message: step.response.message,
                finish_reason: step.response.finish_reason,
                usage: step.response.usage,
                tool_results: results,
                prefix_fingerprint: step.fingerprint,
                cache,
                agent: self.agent.clone(),
            };
            if self.recording.events {
                self.events
                    .push(AgentEvent::StepFinish(Box::new(result.clone())));
            }
            self.steps.push(result);
        }
    }
}
