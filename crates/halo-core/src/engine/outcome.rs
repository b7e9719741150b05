//! How a run ends: the failures the engine keeps until the driver takes them, the errors
//! they become, and the run's result.

use serde::{Deserialize, Serialize};

use crate::driver::PendingApproval;
use crate::error::HaloError;
use crate::guardrail::LoopKind;
use crate::message::ToolCall;
use crate::model::ModelError;
use crate::run::GenerateTextResult;
use crate::session::JournalOutcome;

use super::{Phase, RunState};

/// Why a run failed, as the engine keeps it until the driver takes it ([`Effect::Done`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "failure", rename_all = "snake_case")]
pub(crate) enum Failure {
    Model {
        error: ModelError,
    },
    ToolFatal {
        tool: String,
        message: String,
    },
    Aborted {
        tool: String,
        reason: String,
    },
    MaxSteps {
        max_steps: usize,
    },
    InputRejected {
        guardrail: String,
        reason: String,
    },
    OutputRejected {
        guardrail: String,
        reason: String,
        answer: String,
    },
    InvalidObject {
        attempts: usize,
        message: String,
        raw: String,
    },
    Loop {
        kind: LoopKind,
        message: String,
    },
    RetryBudget {
        tool: String,
        attempts: usize,
        message: String,
    },
}

/// How the run that just ended ended; handed out once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Ending {
    Answered,
    Failed(Failure),
}

impl RunState {
    /// Ends the run with `failure`; the step in flight is not logged.
    pub(super) fn fail(&mut self, failure: Failure, at_ms: u64) {
        self.phase = Phase::Idle;
        let outcome = match &failure {
            Failure::MaxSteps { .. } => JournalOutcome::MaxStepsReached,
            other => JournalOutcome::Error {
                message: self.error_of(other.clone()).to_string(),
            },
        };
        self.finish(outcome, at_ms);
        self.ending = Some(Ending::Failed(failure));
    }

    /// The outcome of the run that ended, handed out once.
    pub(super) fn take_outcome(&mut self) -> Result<GenerateTextResult, HaloError> {
        // The room made for the run's messages that it did not use is given back.
        self.log.trim();
        match self.ending.take() {
            None => Err(HaloError::NothingToResume),
            Some(Ending::Answered) => {
                // The run is over: its steps move into the result (the next run starts
                // with none), rather than being copied.
                let mut result = self.result_without_steps(Vec::new(), Vec::new());
                result.steps = std::mem::take(&mut self.steps);
                // The room made for the step limit at the first step is given back (the
                // caller may keep the result).
                result.steps.shrink_to_fit();
                if let Some(last) = result.steps.last() {
                    result.text.clone_from(&last.message.text);
                }
                Ok(result)
            }
            Some(Ending::Failed(failure)) => Err(self.error_of(failure)),
        }
    }

    /// The error a failure ends the run with.
    pub(super) fn error_of(&self, failure: Failure) -> HaloError {
        let partial = || Box::new(self.result(Vec::new(), Vec::new()));
        match failure {
            Failure::Model { error } => HaloError::Model(error),
            Failure::ToolFatal { tool, message } => HaloError::ToolFatal { tool, message },
            Failure::Aborted { tool, reason } => HaloError::Aborted { tool, reason },
            Failure::MaxSteps { max_steps } => HaloError::MaxStepsReached {
                max_steps,
                partial: partial(),
            },
            Failure::InputRejected { guardrail, reason } => {
                HaloError::InputRejected { guardrail, reason }
            }
            Failure::OutputRejected {
                guardrail,
                reason,
                answer,
            } => HaloError::OutputRejected {
                guardrail,
                reason,
                answer,
            },
            Failure::InvalidObject {
                attempts,
                message,
                raw,
            } => HaloError::InvalidObject {
                attempts,
                message,
                raw,
            },
            Failure::Loop { kind, message } => HaloError::LoopDetected {
                kind,
                message,
                partial: partial(),
            },
            Failure::RetryBudget {
                tool,
                attempts,
                message,
            } => HaloError::RetryBudgetExhausted {
                tool,
                attempts,
                message,
                partial: partial(),
            },
        }
    }

    /// The result so far, with `pending_tool_calls` and `pending_approvals` left for the
    /// caller.
    pub(crate) fn result(
        &self,
        pending_tool_calls: Vec<ToolCall>,
        pending_approvals: Vec<PendingApproval>,
    ) -> GenerateTextResult {
        let paused = !pending_tool_calls.is_empty() || !pending_approvals.is_empty();
        let mut result = self.result_without_steps(pending_tool_calls, pending_approvals);
        if !paused && let Some(last) = self.steps.last() {
            result.text.clone_from(&last.message.text);
        }
        result.steps = self.steps.clone();
        result
    }

    /// [`result`](Self::result) with no steps and no text.
    fn result_without_steps(
        &self,
        pending_tool_calls: Vec<ToolCall>,
        pending_approvals: Vec<PendingApproval>,
    ) -> GenerateTextResult {
        GenerateTextResult {
            text: String::new(),
            steps: Vec::new(),
            stats: self.stats.since(&self.run_start),
            pending_tool_calls,
            pending_approvals,
            agent: self.agent.clone(),
        }
    }
}
