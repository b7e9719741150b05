//! What a run produces: [`StepResult`]s, the [`GenerateTextResult`], the streamed
//! [`AgentEvent`]s and the manual mode's [`Turn`].

use serde::{Deserialize, Serialize};

use crate::ledger::CacheCheck;
use crate::message::{AssistantMessage, ToolCall, ToolResult};
use crate::model::{FinishReason, Usage};
use crate::prefix::Fingerprint;
use crate::stats::AgentStats;

/// One model call of a run and the tool calls it led to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// The assistant turn.
    pub message: AssistantMessage,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// Token counts of the call.
    pub usage: Usage,
    /// The results of the step's tool calls, in call order.
    pub tool_results: Vec<ToolResult>,
    /// The prefix fingerprint the call was made with.
    pub prefix_fingerprint: Fingerprint,
    /// The ledger's check of the call's prompt-cache reads.
    pub cache: CacheCheck,
}

/// What [`HaloAgent::generate_text`](crate::HaloAgent::generate_text) returns.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GenerateTextResult {
    /// The final answer text (the last step's text; empty while tool calls are pending).
    pub text: String,
    /// Every step, in order.
    pub steps: Vec<StepResult>,
    /// The counters of this run.
    pub stats: AgentStats,
    /// Tool calls of the last step left for the caller to run: calls of client-side tools
    /// (registered without an executor, [`HaloAgentBuilder::client_tool`](crate::HaloAgentBuilder::client_tool)).
    /// Empty when the run ended with an answer. The run is paused: give each call its result
    /// with [`HaloAgent::submit_tool_result`](crate::HaloAgent::submit_tool_result), which
    /// continues the run once the step is complete.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_tool_calls: Vec<ToolCall>,
}

impl GenerateTextResult {
    /// The finish reason of the last step.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.steps.last().map(|s| &s.finish_reason)
    }
}

/// One event of a streamed agent run ([`HaloAgent::stream_text`](crate::HaloAgent::stream_text)), in this order per step:
/// `StepStart`, deltas as the model streams (text, reasoning, tool-call starts and argument
/// pieces), the complete `ToolCall`s, one `ToolResult` per call as each tool finishes, then
/// `StepFinish`. The run ends with `Finish`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// A model call begins (`step` counts from 1).
    StepStart {
        /// The step's number.
        step: usize,
    },
    /// A piece of answer text.
    TextDelta(String),
    /// A piece of reasoning text.
    ReasoningDelta(String),
    /// The model began a tool call.
    ToolCallStart {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// The next piece of a tool call's argument string.
    ToolCallDelta {
        /// The call's id.
        id: String,
        /// The piece.
        arguments: String,
    },
    /// A complete tool call, about to run (its arguments are parsed once, here).
    ToolCall(ToolCall),
    /// The provider read far less from its prompt cache than the request shares with the
    /// previous one (see [`CacheLedger`](crate::CacheLedger)); sent after the model call, before its tool calls.
    CacheBust(Box<CacheCheck>),
    /// A tool finished; the model reads this result in the next step.
    ToolResult(ToolResult),
    /// A step is complete and logged: its turn, finish reason, usage and results.
    StepFinish(Box<StepResult>),
    /// A user message queued through a [`SteeringHandle`](crate::SteeringHandle) entered the
    /// log at this step boundary, before the model call of `StepStart`.
    Injected(String),
    /// The run is complete (or paused for client-side tool calls, see
    /// [`GenerateTextResult::pending_tool_calls`]): the same value
    /// [`HaloAgent::generate_text`](crate::HaloAgent::generate_text) returns.
    Finish(Box<GenerateTextResult>),
}

/// What the manual mode ([`HaloAgent::send`](crate::HaloAgent::send),
/// [`HaloAgent::submit_tool_result`](crate::HaloAgent::submit_tool_result)) hands back.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// The model asked for these tool calls: run them and give each its result with
    /// `submit_tool_result`; once every call of the step has one, the run continues.
    ToolCalls(Vec<ToolCall>),
    /// The model answered: the run is over.
    Answer(Box<GenerateTextResult>),
}
