//! What a run produces: [`StepResult`]s, the [`GenerateTextResult`] (with the calls a paused
//! run waits on: [`PendingApproval`]s and the caller's tool calls), the streamed
//! [`AgentEvent`]s (a [`HistoryRewrite`] among them) and the manual mode's [`Turn`].

use serde::{Deserialize, Serialize};

use crate::inner::InnerEvent;
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
    /// The name of the agent that made the step, when it has one: after a handoff
    /// ([`crate::handoff`]) the steps of one run are made by several agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
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
    /// Tool calls of the last step waiting for someone's approval: the run is paused
    /// ([`HaloAgentBuilder::pause_for_approvals`](crate::HaloAgentBuilder::pause_for_approvals)).
    /// Answer each with [`HaloAgent::approve`](crate::HaloAgent::approve) or
    /// [`HaloAgent::reject`](crate::HaloAgent::reject) — in this process, or in another one
    /// after the run state or the session journal is restored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_approvals: Vec<PendingApproval>,
    /// The name of the agent that answered (or whose turn it is when the run paused), when
    /// it has one: after a handoff ([`crate::handoff`]), the agent the conversation was
    /// handed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// A tool call that waits for someone's approval before it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The call.
    pub call: ToolCall,
    /// Why it needs approval (from the hook that asked, or the tool's annotations).
    pub reason: String,
}

/// How the history was rewritten ([`AgentEvent::HistoryRewritten`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RewriteKind {
    /// A context strategy's plan: results evicted in place, whole units dropped.
    Strategy,
    /// A compaction: the head of the history replaced by the model's summary.
    Compaction,
    /// A compaction that failed: the messages it would have summarized were dropped.
    Dropped,
    /// Tool results of the newest round cut so that the request fits the window.
    Shortened,
    /// The history handed to another agent, through that agent's history filter
    /// ([`crate::handoff::HistoryFilter`]).
    Handoff,
}

/// A rewrite of the history between two steps: every message after the first one it
/// changed is a prompt-cache miss on the next call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRewrite {
    /// What kind of rewrite.
    pub kind: RewriteKind,
    /// Messages before.
    pub messages_before: usize,
    /// Messages after.
    pub messages_after: usize,
    /// What was done and why, in a sentence (also in the journal's boundary record).
    pub description: String,
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
/// `{"type":"injected","text":..}`, `{"type":"finish","text":..,"steps":[..],"stats":{..}}`,
/// `{"type":"inner","agent":..,"depth":1,"call_id":..,"event":{..}}`,
/// `{"type":"handoff","from":..,"to":..}`.
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
    /// The history was rewritten between steps (evicted, truncated, compacted, or a result
    /// of the newest round cut to fit the window): a UI can say so.
    HistoryRewritten(Box<HistoryRewrite>),
    /// An event of an agent one of this run's tools runs — a fork, a sub-agent, a named
    /// agent — tagged with its name and depth ([`crate::inner`]). Only streamed runs hand
    /// them out; each comes before the [`ToolResult`](Self::ToolResult) of the call that
    /// runs the agent.
    Inner(Box<InnerEvent>),
    /// The conversation was handed to another agent ([`crate::handoff`]): from the next
    /// step on, `to` answers with its own prefix and tools.
    Handoff {
        /// The agent that handed it over (`None`: an agent without a name).
        #[serde(skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// The agent that continues.
        to: String,
    },
    /// The run is complete (or paused for the caller's tool calls or approvals, see
    /// [`GenerateTextResult::pending_tool_calls`] and
    /// [`GenerateTextResult::pending_approvals`]): the same value
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
/// [`HaloAgent::submit_tool_result`](crate::HaloAgent::submit_tool_result)) and the answers
/// to a paused run ([`HaloAgent::approve`](crate::HaloAgent::approve)) hand back.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Turn {
    /// The model asked for these tool calls: run them and give each its result with
    /// `submit_tool_result`; once every call of the step has one, the run continues.
    ToolCalls(Vec<ToolCall>),
    /// These calls wait for approval: answer each with `approve` or `reject`.
    Approvals(Vec<PendingApproval>),
    /// The model answered: the run is over.
    Answer(Box<GenerateTextResult>),
}

impl Turn {
    /// The turn a run's result stands for: the caller's calls first, then approvals, else
    /// the answer.
    pub(crate) fn of(result: GenerateTextResult) -> Turn {
        if !result.pending_tool_calls.is_empty() {
            Turn::ToolCalls(result.pending_tool_calls)
        } else if !result.pending_approvals.is_empty() {
            Turn::Approvals(result.pending_approvals)
        } else {
            Turn::Answer(Box::new(result))
        }
    }
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
        assert_eq!(
            json_of(AgentEvent::Handoff {
                from: Some("triage".into()),
                to: "billing".into()
            }),
            json!({"type": "handoff", "from": "triage", "to": "billing"})
        );
        assert_eq!(
            json_of(AgentEvent::Inner(Box::new(crate::InnerEvent {
                agent: "researcher".into(),
                depth: 1,
                call_id: "c1".into(),
                event: AgentEvent::TextDelta("Otters".into()),
            }))),
            json!({"type": "inner", "agent": "researcher", "depth": 1, "call_id": "c1",
                   "event": {"type": "text_delta", "delta": "Otters"}})
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
