//! A chat's conversation as the client shows it: `UIMessage`s rebuilt from the chat's
//! journal — every user message and every step as it happened (a history the context
//! strategy rewrote later is still shown whole, with a note where it was rewritten), the
//! step left open by a paused run with its approvals asked for and given, steering
//! messages where they entered.

use halo_core::session::{CallStatus, JournalEvent, JournalOutcome};
use halo_core::{AssistantMessage, Message, ToolCall, ToolResult};
use serde_json::{Value, json};

use super::ui::{Approval, ToolPart, UiMessage, UiPart};
use crate::encode::HISTORY_REWRITTEN_PART;

/// The text halo-core's rejected results start with (`halo_core::request::rejected`).
const REJECTED: &str = "the user rejected this call";

/// See the [module docs](self). Message ids are `h0`, `h1`, ... in order.
pub(crate) fn messages_of(journal: &[JournalEvent]) -> Vec<UiMessage> {
    let mut b = Builder::default();
    for event in journal {
        b.event(event);
    }
    b.messages
}

#[derive(Default)]
struct Builder {
    messages: Vec<UiMessage>,
    /// Where the open step's parts begin in the last message.
    open: Option<usize>,
    /// Whether a user message or a step was seen (a boundary before is a client's history).
    started: bool,
    rewrites: usize,
}

impl Builder {
    fn push(&mut self, role: &str, parts: Vec<UiPart>) {
        let id = format!("h{}", self.messages.len());
        self.messages.push(UiMessage::new(id, role, parts));
    }

    /// The parts of the assistant message being built (one is started when needed).
    fn assistant(&mut self) -> &mut Vec<UiPart> {
        if self.messages.last().is_none_or(|m| m.role != "assistant") {
            self.push("assistant", Vec::new());
        }
        let last = self.messages.len() - 1;
        &mut self.messages[last].parts
    }

    fn event(&mut self, event: &JournalEvent) {
        match event {
            JournalEvent::User {
                message, injected, ..
            } => {
                self.started = true;
                self.open = None;
                if *injected {
                    let id = format!("steering-{}", self.messages.len());
                    let text = message.text();
                    self.assistant().push(UiPart::Steering { id, text });
                } else {
                    self.push(
                        "user",
                        vec![UiPart::Text {
                            text: message.text(),
                        }],
                    );
                }
            }
            JournalEvent::StepOpened { assistant, .. } => {
                self.started = true;
                let parts = self.assistant();
                let at = parts.len();
                parts.extend(step_parts(assistant, &[]));
                self.open = Some(at);
            }
            JournalEvent::Call {
                call_id, status, ..
            } => {
                if let Some(part) = self.open_call(call_id) {
                    match status {
                        CallStatus::AwaitingApproval { reason } => {
                            part.state = "approval-requested".into();
                            part.approval = Some(approval(call_id, Some(reason.clone()), None));
                        }
                        CallStatus::Approved => {
                            part.state = "approval-responded".into();
                            let reason = part.approval.take().and_then(|a| a.request_reason);
                            part.approval = Some(approval(call_id, reason, Some(true)));
                        }
                        _ => {}
                    }
                }
            }
            JournalEvent::ToolResult { result, .. } => {
                if let Some(part) = self.open_call(&result.tool_call_id) {
                    set_result(part, result);
                }
            }
            JournalEvent::Step {
                assistant, results, ..
            } => {
                self.started = true;
                let open = self.open.take();
                let parts = self.assistant();
                if let Some(at) = open {
                    parts.truncate(at);
                }
                parts.extend(step_parts(assistant, results));
            }
            JournalEvent::Outcome { outcome, .. } => {
                if let (JournalOutcome::Discarded, Some(at)) = (outcome, self.open) {
                    self.assistant().truncate(at);
                }
                self.open = None;
            }
            JournalEvent::CompactBoundary {
                history, reason, ..
            } => {
                if !self.started {
                    // The history a client sent with its first message.
                    self.messages.clear();
                    for message in history {
                        self.message(message);
                    }
                } else {
                    self.rewrites += 1;
                    let data = json!({"description": reason.clone().unwrap_or_default()});
                    let id = format!("rewrite-{}", self.rewrites);
                    self.assistant().push(UiPart::Other(json!({
                        "type": format!("data-{HISTORY_REWRITTEN_PART}"),
                        "id": id,
                        "data": data,
                    })));
                }
            }
            _ => {}
        }
    }

    /// A message of a history, added as the client would show it.
    fn message(&mut self, message: &Message) {
        match message {
            Message::User { .. } => self.push(
                "user",
                vec![UiPart::Text {
                    text: message.text(),
                }],
            ),
            Message::System { .. } => self.push(
                "system",
                vec![UiPart::Text {
                    text: message.text(),
                }],
            ),
            Message::Assistant(turn) => {
                let parts = step_parts(turn, &[]);
                self.assistant().extend(parts);
            }
            Message::Tool(result) => {
                let id = result.tool_call_id.clone();
                if let Some(part) = self.last_call(&id, 0) {
                    set_result(part, result);
                }
            }
        }
    }

    /// The tool part of `call_id` in the open step.
    fn open_call(&mut self, call_id: &str) -> Option<&mut ToolPart> {
        let at = self.open?;
        self.last_call(call_id, at)
    }

    /// The tool part of `call_id` in the last message, from part `at` on.
    fn last_call(&mut self, call_id: &str, at: usize) -> Option<&mut ToolPart> {
        let message = self.messages.last_mut()?;
        message.parts.iter_mut().skip(at).find_map(|p| match p {
            UiPart::Tool(t) if t.tool_call_id == call_id => Some(t),
            _ => None,
        })
    }
}

fn approval(id: &str, request_reason: Option<String>, approved: Option<bool>) -> Approval {
    Approval {
        id: id.to_owned(),
        approved,
        request_reason,
        reason: None,
    }
}

/// A step's parts: `step-start`, its reasoning and text, a tool part per call (with its
/// result when `results` has one).
fn step_parts(turn: &AssistantMessage, results: &[ToolResult]) -> Vec<UiPart> {
    let mut parts = vec![UiPart::StepStart];
    if let Some(reasoning) = turn.reasoning_text().filter(|r| !r.is_empty()) {
        parts.push(UiPart::Reasoning { text: reasoning });
    }
    if !turn.text.is_empty() {
        parts.push(UiPart::Text {
            text: turn.text.clone(),
        });
    }
    for call in &turn.tool_calls {
        let mut part = tool_part(call);
        if let Some(result) = results.iter().find(|r| r.tool_call_id == call.id) {
            set_result(&mut part, result);
        }
        parts.push(UiPart::Tool(part));
    }
    parts
}

fn tool_part(call: &ToolCall) -> ToolPart {
    ToolPart {
        tool_call_id: call.id.to_string(),
        tool_name: call.name.to_string(),
        state: "input-available".into(),
        input: call
            .arguments()
            .unwrap_or_else(|_| Value::String(call.raw_arguments.to_string())),
        output: None,
        error_text: None,
        approval: None,
    }
}

fn set_result(part: &mut ToolPart, result: &ToolResult) {
    if result.is_error && result.content.starts_with(REJECTED) {
        part.state = "output-denied".into();
        let reason = part.approval.take().and_then(|a| a.request_reason);
        part.approval = Some(approval(&part.tool_call_id.clone(), reason, Some(false)));
    } else if result.is_error {
        part.state = "output-error".into();
        part.error_text = Some(result.content.to_string());
    } else {
        part.state = "output-available".into();
        part.output = Some(Value::String(result.content.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use halo_core::{FinishReason, Usage};

    use super::*;

    fn user(text: &str, injected: bool) -> JournalEvent {
        JournalEvent::User {
            message: Message::user(text),
            injected,
            at_ms: 0,
        }
    }

    fn turn(text: &str, calls: &[ToolCall]) -> AssistantMessage {
        AssistantMessage {
            text: text.into(),
            tool_calls: calls.to_vec(),
            ..AssistantMessage::default()
        }
    }

    #[test]
    fn a_paused_step_shows_its_approval_and_a_committed_one_its_results() {
        let bash = ToolCall::new("c1", "bash", r#"{"command":"ls"}"#);
        let journal = [
            user("list files", false),
            JournalEvent::StepOpened {
                assistant: turn("I will run ls.", std::slice::from_ref(&bash)),
                finish_reason: FinishReason::ToolCalls,
                usage: Usage::default(),
                at_ms: 0,
            },
            JournalEvent::Call {
                call_id: "c1".into(),
                status: CallStatus::AwaitingApproval {
                    reason: "it runs a command".into(),
                },
                at_ms: 0,
            },
        ];
        let messages = messages_of(&journal);
        let json: Vec<Value> = messages
            .iter()
            .map(|m| serde_json::to_value(m).unwrap())
            .collect();
        assert_eq!(json[0]["parts"][0]["text"], "list files");
        assert_eq!(
            json[1]["parts"][2],
            json!({"type": "tool-bash", "toolCallId": "c1", "state": "approval-requested",
                   "input": {"command": "ls"},
                   "approval": {"id": "c1", "requestReason": "it runs a command"}})
        );
        let mut more = journal.to_vec();
        more.push(JournalEvent::Step {
            assistant: turn("I will run ls.", std::slice::from_ref(&bash)),
            results: vec![halo_core::request::rejected(&bash, "not now")],
            finish_reason: FinishReason::ToolCalls,
            usage: Usage::default(),
            at_ms: 0,
        });
        more.push(user("also this", true));
        let messages = messages_of(&more);
        assert_eq!(messages.len(), 2);
        let parts = &messages[1].parts;
        assert!(matches!(&parts[2], UiPart::Tool(t) if t.state == "output-denied"));
        assert!(matches!(&parts[3], UiPart::Steering { text, .. } if text == "also this"));
        assert_eq!(parts.len(), 4);
    }
}
