//! The request side of the AI SDK: the body `useChat` posts ([`ChatRequest`]), its
//! `UIMessage`s ([`UiMessage`], [`UiPart`]), and what the gateway reads from them — the
//! new user message, a stateless client's history, approval responses and client-side
//! tool results for a paused run.
//!
//! Shapes follow the `ai` package (7.0.173): `HttpChatTransport.sendMessages` (the body:
//! `{id, messages, trigger, messageId}`), `UIMessage` and its parts in
//! `src/ui/ui-messages.ts` (tool parts are `tool-NAME`, or `dynamic-tool` with a
//! `toolName`, in the states `input-streaming`, `input-available`, `approval-requested`,
//! `approval-responded`, `output-available`, `output-error`, `output-denied`).

use halo_core::{AssistantMessage, Message, ToolCall, ToolResult};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

/// The body `DefaultChatTransport` posts to `/api/chat`.
#[derive(Debug, Clone, Deserialize)]
#[non_exhaustive]
pub struct ChatRequest {
    /// The chat's id (the client's `Chat.id`).
    pub id: String,
    /// The whole conversation as the client holds it.
    #[serde(default)]
    pub messages: Vec<UiMessage>,
    /// `submit-message` or `regenerate-message`.
    #[serde(default)]
    pub trigger: Option<String>,
    /// The message the request is about (a continued assistant message after approvals).
    #[serde(default, rename = "messageId")]
    pub message_id: Option<String>,
}

/// One `UIMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct UiMessage {
    /// Its id.
    #[serde(default)]
    pub id: String,
    /// `user`, `assistant` or `system`.
    pub role: String,
    /// Its parts, in order.
    #[serde(default)]
    pub parts: Vec<UiPart>,
}

impl UiMessage {
    /// A message of `role` with `parts`.
    pub fn new(id: impl Into<String>, role: impl Into<String>, parts: Vec<UiPart>) -> Self {
        UiMessage {
            id: id.into(),
            role: role.into(),
            parts,
        }
    }

    /// Its text parts joined by newlines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                UiPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }
}

/// A part of a [`UiMessage`]; parts the gateway does not read are kept as [`UiPart::Other`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum UiPart {
    /// `{"type":"text","text":..}`.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type":"reasoning","text":..}`.
    Reasoning {
        /// The reasoning text.
        text: String,
    },
    /// `{"type":"step-start"}`.
    StepStart,
    /// `{"type":"steering-message","id":..,"parts":[{"type":"text",..}]}`.
    Steering {
        /// The message's id.
        id: String,
        /// Its text.
        text: String,
    },
    /// A tool part: `tool-NAME` or `dynamic-tool`.
    Tool(ToolPart),
    /// Anything else, as it came.
    Other(Value),
}

/// A tool part of a message.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolPart {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// `input-available`, `approval-requested`, `output-available`, ...
    pub state: String,
    /// The call's arguments.
    pub input: Value,
    /// The result (`output-available`).
    pub output: Option<Value>,
    /// The error (`output-error`).
    pub error_text: Option<String>,
    /// The approval asked for or given.
    pub approval: Option<Approval>,
}

/// A tool part's `approval`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Approval {
    /// The approval's id (Halo uses the call's id).
    pub id: String,
    /// The answer, once given.
    pub approved: Option<bool>,
    /// Why the call needs approval.
    pub request_reason: Option<String>,
    /// Why it was answered so.
    pub reason: Option<String>,
}

fn text_of(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

impl UiPart {
    /// The part read from its JSON object.
    pub fn from_json(value: Value) -> UiPart {
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
        let tool_name = match kind {
            "dynamic-tool" => text_of(&value, "toolName"),
            _ => kind.strip_prefix("tool-").map(str::to_owned),
        };
        match (kind, tool_name) {
            ("text", _) => UiPart::Text {
                text: text_of(&value, "text").unwrap_or_default(),
            },
            ("reasoning", _) => UiPart::Reasoning {
                text: text_of(&value, "text").unwrap_or_default(),
            },
            ("step-start", _) => UiPart::StepStart,
            ("steering-message", _) => {
                let text = value
                    .get("parts")
                    .and_then(Value::as_array)
                    .map(|parts| {
                        parts
                            .iter()
                            .filter_map(|p| text_of(p, "text"))
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default();
                UiPart::Steering {
                    id: text_of(&value, "id").unwrap_or_default(),
                    text,
                }
            }
            (_, Some(tool_name)) if value.get("toolCallId").is_some() => {
                let approval = value.get("approval").map(|a| Approval {
                    id: text_of(a, "id").unwrap_or_default(),
                    approved: a.get("approved").and_then(Value::as_bool),
                    request_reason: text_of(a, "requestReason"),
                    reason: text_of(a, "reason"),
                });
                UiPart::Tool(ToolPart {
                    tool_call_id: text_of(&value, "toolCallId").unwrap_or_default(),
                    tool_name,
                    state: text_of(&value, "state").unwrap_or_default(),
                    input: value.get("input").cloned().unwrap_or(Value::Null),
                    output: value.get("output").cloned(),
                    error_text: text_of(&value, "errorText"),
                    approval,
                })
            }
            _ => UiPart::Other(value),
        }
    }

    /// The part as the client's JSON object.
    pub fn to_json(&self) -> Value {
        match self {
            UiPart::Text { text } => json!({"type": "text", "text": text, "state": "done"}),
            UiPart::Reasoning { text } => {
                json!({"type": "reasoning", "text": text, "state": "done"})
            }
            UiPart::StepStart => json!({"type": "step-start"}),
            UiPart::Steering { id, text } => json!({
                "type": "steering-message",
                "id": id,
                "parts": [{"type": "text", "text": text}],
            }),
            UiPart::Tool(t) => {
                let mut part = Map::new();
                part.insert("type".into(), format!("tool-{}", t.tool_name).into());
                part.insert("toolCallId".into(), t.tool_call_id.clone().into());
                part.insert("state".into(), t.state.clone().into());
                part.insert("input".into(), t.input.clone());
                if let Some(output) = &t.output {
                    part.insert("output".into(), output.clone());
                }
                if let Some(error) = &t.error_text {
                    part.insert("errorText".into(), error.clone().into());
                }
                if let Some(a) = &t.approval {
                    let mut approval = Map::new();
                    approval.insert("id".into(), a.id.clone().into());
                    if let Some(approved) = a.approved {
                        approval.insert("approved".into(), approved.into());
                    }
                    if let Some(r) = &a.request_reason {
                        approval.insert("requestReason".into(), r.clone().into());
                    }
                    if let Some(r) = &a.reason {
                        approval.insert("reason".into(), r.clone().into());
                    }
                    part.insert("approval".into(), Value::Object(approval));
                }
                Value::Object(part)
            }
            UiPart::Other(value) => value.clone(),
        }
    }
}

impl Serialize for UiPart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for UiPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(UiPart::from_json)
    }
}

/// The text of the request's last message when it is the user's.
pub fn last_user_text(messages: &[UiMessage]) -> Option<String> {
    let last = messages.last().filter(|m| m.role == "user")?;
    let text = last.text();
    (!text.trim().is_empty()).then_some(text)
}

/// The history `messages` stand for, for a client that keeps the conversation itself:
/// user and system texts; for an assistant message, per step, its text and the tool calls
/// that have a result, each followed by its result (an error, a denial or an output). Calls
/// without a result, reasoning and data parts are left out.
pub fn history_of(messages: &[UiMessage]) -> Vec<Message> {
    let mut history = Vec::new();
    for message in messages {
        match message.role.as_str() {
            "user" => history.push(Message::user(message.text())),
            "system" => history.push(Message::system(message.text())),
            "assistant" => {
                for step in message.parts.split(|p| matches!(p, UiPart::StepStart)) {
                    push_step(step, &mut history);
                }
            }
            _ => {}
        }
    }
    history
}

/// One step of an assistant message: its turn, then its results.
fn push_step(parts: &[UiPart], history: &mut Vec<Message>) {
    let mut turn = AssistantMessage::default();
    let mut results = Vec::new();
    for part in parts {
        match part {
            UiPart::Text { text } => {
                if !turn.text.is_empty() {
                    turn.text.push('\n');
                }
                turn.text.push_str(text);
            }
            UiPart::Steering { text, .. } => history.push(Message::user(text.clone())),
            UiPart::Tool(t) => {
                let result = match (t.state.as_str(), &t.output, &t.error_text) {
                    ("output-available", Some(output), _) => Some((output_text(output), false)),
                    ("output-error", _, Some(error)) => Some((error.clone(), true)),
                    ("output-denied", _, _) => Some((
                        format!(
                            "the user denied this call, so `{}` did not run",
                            t.tool_name
                        ),
                        true,
                    )),
                    _ => None,
                };
                if let Some((content, is_error)) = result {
                    let call = ToolCall::new(&t.tool_call_id, &t.tool_name, t.input.to_string());
                    results.push(if is_error {
                        ToolResult::error(&call, content)
                    } else {
                        ToolResult::ok(&call, content)
                    });
                    turn.tool_calls.push(call);
                }
            }
            _ => {}
        }
    }
    if turn.text.is_empty() && turn.tool_calls.is_empty() {
        return;
    }
    history.push(Message::Assistant(turn));
    history.extend(results.into_iter().map(Message::Tool));
}

/// A tool output as the text the model reads: a string as is, anything else as JSON.
pub fn output_text(output: &Value) -> String {
    match output {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What the client answered in its last assistant message: approval responses (call id,
/// approved, reason) and tool results (call id, text, is_error), for calls in `waiting`.
#[derive(Debug, Default, PartialEq)]
pub struct Answers {
    /// `(call id, approved, reason)`.
    pub approvals: Vec<(String, bool, Option<String>)>,
    /// `(call id, text, is_error)`.
    pub results: Vec<(String, String, bool)>,
}

impl Answers {
    /// Whether there is nothing.
    pub fn is_empty(&self) -> bool {
        self.approvals.is_empty() && self.results.is_empty()
    }
}

/// The answers the last assistant message of `messages` holds for the calls `waiting_approval`
/// and `waiting_result` of a paused run.
pub fn answers_of(
    messages: &[UiMessage],
    waiting_approval: &[String],
    waiting_result: &[String],
) -> Answers {
    let mut answers = Answers::default();
    let Some(last) = messages.iter().rev().find(|m| m.role == "assistant") else {
        return answers;
    };
    for part in &last.parts {
        let UiPart::Tool(t) = part else { continue };
        if waiting_approval.contains(&t.tool_call_id)
            && let Some(approval) = &t.approval
            && let Some(approved) = approval.approved
        {
            answers
                .approvals
                .push((t.tool_call_id.clone(), approved, approval.reason.clone()));
        }
        if waiting_result.contains(&t.tool_call_id) {
            match (t.state.as_str(), &t.output, &t.error_text) {
                ("output-available", Some(output), _) => {
                    answers
                        .results
                        .push((t.tool_call_id.clone(), output_text(output), false));
                }
                ("output-error", _, Some(error)) => {
                    answers
                        .results
                        .push((t.tool_call_id.clone(), error.clone(), true));
                }
                _ => {}
            }
        }
    }
    answers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(value: Value) -> Vec<UiMessage> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_use_chat_body_is_read_with_its_parts() {
        let body: ChatRequest = serde_json::from_value(json!({
            "id": "c1", "trigger": "submit-message", "messageId": null,
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}],
        }))
        .unwrap();
        assert_eq!(body.id, "c1");
        assert_eq!(last_user_text(&body.messages).as_deref(), Some("Hi"));
        assert_eq!(body.trigger.as_deref(), Some("submit-message"));
    }

    #[test]
    fn ui_messages_become_a_history_with_paired_calls() {
        let history = history_of(&messages(json!([
            {"id": "1", "role": "user", "parts": [{"type": "text", "text": "Weather in Oslo?"}]},
            {"id": "2", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "text", "text": "Checking."},
                {"type": "tool-get_weather", "toolCallId": "c1", "state": "output-available",
                 "input": {"city": "Oslo"}, "output": "snow"},
                {"type": "tool-get_weather", "toolCallId": "c2", "state": "input-available",
                 "input": {"city": "Rome"}},
                {"type": "data-halo-step-usage", "data": {}},
                {"type": "step-start"},
                {"type": "steering-message", "id": "s1", "parts": [{"type": "text", "text": "in C"}]},
                {"type": "text", "text": "Snow."},
            ]},
        ])));
        let texts: Vec<(&str, String)> = history.iter().map(|m| (m.role(), m.text())).collect();
        assert_eq!(
            texts,
            [
                ("user", "Weather in Oslo?".to_string()),
                ("assistant", "Checking.".into()),
                ("tool", "snow".into()),
                ("user", "in C".into()),
                ("assistant", "Snow.".into()),
            ]
        );
        assert_eq!(history[1].tool_calls().len(), 1);
        assert_eq!(
            history[1].tool_calls()[0].raw_arguments,
            r#"{"city":"Oslo"}"#
        );
    }

    #[test]
    fn approvals_and_client_results_are_read_for_waiting_calls_only() {
        let ui = messages(json!([
            {"id": "2", "role": "assistant", "parts": [
                {"type": "tool-bash", "toolCallId": "a", "state": "approval-responded", "input": {},
                 "approval": {"id": "a", "approved": false, "reason": "no"}},
                {"type": "tool-bash", "toolCallId": "b", "state": "approval-requested", "input": {},
                 "approval": {"id": "b"}},
                {"type": "tool-ask", "toolCallId": "c", "state": "output-available", "input": {},
                 "output": {"ok": 1}},
                {"type": "tool-ask", "toolCallId": "d", "state": "output-available", "input": {},
                 "output": "not waited for"},
            ]},
        ]));
        let answers = answers_of(&ui, &["a".into(), "b".into()], &["c".into()]);
        assert_eq!(
            answers,
            Answers {
                approvals: vec![("a".into(), false, Some("no".into()))],
                results: vec![("c".into(), r#"{"ok":1}"#.into(), false)],
            }
        );
    }

    #[test]
    fn parts_round_trip_through_json() {
        let tool = json!({"type": "tool-bash", "toolCallId": "a", "state": "approval-requested",
            "input": {"command": "ls"}, "approval": {"id": "a", "requestReason": "runs a command"}});
        assert_eq!(UiPart::from_json(tool.clone()).to_json(), tool);
        let other = json!({"type": "data-x", "data": 1});
        assert_eq!(UiPart::from_json(other.clone()), UiPart::Other(other));
    }
}
