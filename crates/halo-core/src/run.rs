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
///
/// Serializes as one JSON object tagged by `type` (snake case), the newtype variants'
/// fields inline: `{"type":"step_start","step":1}`, `{"type":"text_delta","delta":"Hi"}`,
/// `{"type":"tool_call","id":..,"name":..,"raw_arguments":..}`,
/// `{"type":"injected","text":..}`, `{"type":"finish","text":..,"steps":[..],"stats":{..}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// A model call begins (`step` counts from 1).
    StepStart {
        /// The step's number.
        step: usize,
    },
    /// A piece of answer text.
    #[serde(serialize_with = "delta_field")]
    TextDelta(String),
    /// A piece of reasoning text.
    #[serde(serialize_with = "delta_field")]
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
    #[serde(serialize_with = "text_field")]
    Injected(String),
    /// The run is complete (or paused for client-side tool calls, see
    /// [`GenerateTextResult::pending_tool_calls`]): the same value
    /// [`HaloAgent::generate_text`](crate::HaloAgent::generate_text) returns.
    Finish(Box<GenerateTextResult>),
}

/// A string of a tagged newtype variant as the object `{"delta": s}` (a bare string cannot
/// carry the `type` tag).
fn delta_field<S: serde::Serializer>(s: &str, serializer: S) -> Result<S::Ok, S::Error> {
    one_field(serializer, "delta", s)
}

/// As [`delta_field`], as `{"text": s}`.
fn text_field<S: serde::Serializer>(s: &str, serializer: S) -> Result<S::Ok, S::Error> {
    one_field(serializer, "text", s)
}

fn one_field<S: serde::Serializer>(
    serializer: S,
    key: &'static str,
    value: &str,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct as _;
    let mut s = serializer.serialize_struct("AgentEvent", 1)?;
    s.serialize_field(key, value)?;
    s.end()
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn json_of(event: AgentEvent) -> serde_json::Value {
        serde_json::to_value(event).unwrap()
    }

    #[test]
    fn agent_events_serialize_as_one_object_tagged_by_type() {
        let call = ToolCall::new("c1", "read", r#"{"path":"a"}"#);
        assert_eq!(
            json_of(AgentEvent::StepStart { step: 2 }),
            json!({"type": "step_start", "step": 2})
        );
        assert_eq!(
            json_of(AgentEvent::TextDelta("Hi".into())),
            json!({"type": "text_delta", "delta": "Hi"})
        );
        assert_eq!(
            json_of(AgentEvent::ReasoningDelta("hm".into())),
            json!({"type": "reasoning_delta", "delta": "hm"})
        );
        assert_eq!(
            json_of(AgentEvent::ToolCallStart {
                id: "c1".into(),
                name: "read".into()
            }),
            json!({"type": "tool_call_start", "id": "c1", "name": "read"})
        );
        assert_eq!(
            json_of(AgentEvent::ToolCallDelta {
                id: "c1".into(),
                arguments: "{\"pa".into()
            }),
            json!({"type": "tool_call_delta", "id": "c1", "arguments": "{\"pa"})
        );
        assert_eq!(
            json_of(AgentEvent::ToolCall(call.clone())),
            json!({"type": "tool_call", "id": "c1", "name": "read", "raw_arguments": "{\"path\":\"a\"}"})
        );
        assert_eq!(
            json_of(AgentEvent::ToolResult(ToolResult::error(
                &call,
                "no such file"
            ))),
            json!({"type": "tool_result", "tool_call_id": "c1", "tool_name": "read", "content": "no such file", "is_error": true})
        );
        assert_eq!(
            json_of(AgentEvent::Injected("also this".into())),
            json!({"type": "injected", "text": "also this"})
        );
        let finish = json_of(AgentEvent::Finish(Box::new(GenerateTextResult {
            text: "done".into(),
            ..Default::default()
        })));
        assert_eq!(finish["type"], "finish");
        assert_eq!(finish["text"], "done");
        assert_eq!(finish["steps"], json!([]));
        assert_eq!(finish["stats"]["steps"], 0);
    }
}
