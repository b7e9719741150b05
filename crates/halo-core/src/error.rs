//! The top-level error of an agent run.

use crate::guardrail::LoopKind;
use crate::model::ModelError;
use crate::prefix::PrefixError;
use crate::run::GenerateTextResult;
use crate::session::SessionError;

/// Why an agent run or an agent change failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HaloError {
    /// The model call failed; see [`ModelError::is_retryable`]. Displays as the
    /// [`ModelError`] itself (no second copy of it in the error's source chain).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A tool returned [`ToolError::Fatal`](crate::tool::ToolError::Fatal).
    #[error("tool `{tool}` ended the run: {message}")]
    ToolFatal {
        /// The tool's name.
        tool: String,
        /// What it said.
        message: String,
    },
    /// A tool hook aborted the run before `tool` ran (a user answered "quit" to an approval
    /// prompt, a policy stopped the session). The step with that tool call is not logged.
    #[error("the run was aborted at tool `{tool}`: {reason}")]
    Aborted {
        /// The tool whose call was stopped.
        tool: String,
        /// The hook's reason.
        reason: String,
    },
    /// The run used `max_steps` model calls and the model still wanted tools. `partial`
    /// holds every completed step; the log holds them too.
    #[error(
        "the run reached max_steps ({max_steps}) before the model gave a final answer; raise max_steps or simplify the task"
    )]
    MaxStepsReached {
        /// The limit that was hit.
        max_steps: usize,
        /// What the run did until then.
        partial: Box<GenerateTextResult>,
    },
    /// [`HaloAgent::resume`](crate::HaloAgent::resume) found nothing to continue: the log
    /// is empty or ends with the model's answer.
    #[error(
        "there is nothing to resume: the log is empty or ends with an answer; start a run with generate_text"
    )]
    NothingToResume,
    /// A prefix change was refused (duplicate or invalid tool).
    #[error(transparent)]
    Prefix(#[from] PrefixError),
    /// A tool result was given for a call the step in flight does not have.
    #[error(
        "no tool call `{call_id}` is waiting for a result; give results only for the calls the last step returned"
    )]
    UnknownToolCall {
        /// The id given.
        call_id: String,
    },
    /// A tool result was given twice for the same call.
    #[error("tool call `{call_id}` already has its result; each call takes exactly one")]
    DuplicateToolResult {
        /// The id given.
        call_id: String,
    },
    /// An approval or a rejection was given for a call that is not waiting for one.
    #[error(
        "tool call `{call_id}` is not waiting for an approval; answer only the calls in pending_approvals"
    )]
    NotAwaitingApproval {
        /// The id given.
        call_id: String,
    },
    /// A new turn was started while a step is still open: its tool calls wait for results
    /// or approvals (a paused run, a run stopped mid-step). Nothing was logged or dropped.
    #[error(
        "a step is still open: tool call(s) {} wait for results or approvals; give them (submit_tool_result, approve, reject), continue with resume, or drop the step with discard_pending() before starting a new turn",
        .call_ids.join(", ")
    )]
    OpenStep {
        /// The open step's calls still without a result.
        call_ids: Vec<String>,
    },
    /// An input guardrail rejected the user's message before the first model call; nothing
    /// was logged.
    #[error("input guardrail `{guardrail}` rejected the message: {reason}")]
    InputRejected {
        /// The guardrail's name.
        guardrail: String,
        /// Why.
        reason: String,
    },
    /// An output guardrail rejected the final answer and ended the run; the answer was not
    /// logged.
    #[error("output guardrail `{guardrail}` rejected the answer: {reason}")]
    OutputRejected {
        /// The guardrail's name.
        guardrail: String,
        /// Why.
        reason: String,
        /// The answer that was rejected.
        answer: String,
    },
    /// `generate_object` got no answer fitting the
    /// schema within its retry budget.
    #[error(
        "the model's answer does not fit the output schema after {attempts} attempt(s): {message}"
    )]
    InvalidObject {
        /// Model calls made.
        attempts: usize,
        /// What was wrong with the last answer.
        message: String,
        /// The last answer's raw text.
        raw: String,
    },
    /// The run was cancelled through its [`CancelToken`](crate::CancelToken); the log keeps
    /// only complete steps and [`resume`](crate::HaloAgent::resume) continues.
    #[error("the run was cancelled; resume continues it")]
    Cancelled,
    /// A [`LoopGuard`](crate::LoopGuard) found the run in a loop and stopped it (after its
    /// nudges, if any). The log keeps every completed step; `partial` holds them too.
    #[error("the run was stopped in a loop ({kind}): {message}")]
    LoopDetected {
        /// The loop found.
        kind: LoopKind,
        /// What happened.
        message: String,
        /// What the run did until then.
        partial: Box<GenerateTextResult>,
    },
    /// A [`RepairStrategy`](crate::repair::RepairStrategy)'s retry budget ran out: the calls
    /// of `tool` kept failing argument validation. The step with the last call is not logged.
    #[error(
        "the run was stopped: `{tool}` was called with invalid arguments {attempts} times in a row ({message})"
    )]
    RetryBudgetExhausted {
        /// The tool.
        tool: String,
        /// Invalid calls in a row.
        attempts: usize,
        /// The last validation error.
        message: String,
        /// What the run did until then.
        partial: Box<GenerateTextResult>,
    },
    /// A driver fed the run engine something it does not wait for
    /// ([`crate::driver`]): a model response while no call is planned, say. Nothing changed.
    #[error("the run engine got {feedback} while {phase}; feed what the last effect asked for")]
    UnexpectedFeedback {
        /// What was fed.
        feedback: String,
        /// What the run waits for.
        phase: String,
    },
    /// The session store failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Agents that do not fit together: agents put together for handoffs
    /// ([`HaloAgent::with_peers`](crate::HaloAgent::with_peers)) of which one has no name, two
    /// share one, or a handoff names an agent not among them; or a named agent called where
    /// it cannot run ([`crate::named`]: past its depth limit, a fork outside an agent).
    #[error("invalid agents: {message}")]
    InvalidAgents {
        /// What is wrong, naming the agents.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error and its `source()` chain joined by `: `, as anyhow's `{:#}` prints it.
    fn report(err: &dyn std::error::Error) -> String {
        let mut text = err.to_string();
        let mut source = err.source();
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        text
    }

    #[test]
    fn a_wrapped_error_is_printed_once_in_a_source_chain() {
        let model = HaloError::from(ModelError::Transport("connection reset".into()));
        assert_eq!(report(&model), "transport error: connection reset");
        let prefix = HaloError::from(PrefixError::DuplicateTool("add".into()));
        assert_eq!(
            report(&prefix),
            "tool `add` is already in the prefix; tool names must be unique"
        );
    }
}
