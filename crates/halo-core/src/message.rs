//! Chat messages: the provider-neutral shapes every adapter translates to and from.
//!
//! A conversation is a list of [`Message`]s with four roles: system, user, assistant and
//! tool. Assistant messages carry text, reasoning (kept apart so adapters can replay it
//! verbatim, as DeepSeek's thinking mode and Anthropic's thinking blocks require) and
//! [`ToolCall`]s. A [`ToolResult`] answers exactly one tool call by id.

use serde::{Deserialize, Serialize};
use serde_json::Value;
pub use smol_str::SmolStr;

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// A system message. The stable prefix holds the main system prompt; this variant exists
    /// for few-shot turns and for callers that need a system message inside the history.
    System {
        /// The instruction text.
        content: String,
    },
    /// A user turn.
    User {
        /// The parts of the turn, in order.
        content: Vec<ContentPart>,
    },
    /// A model turn.
    Assistant(AssistantMessage),
    /// The result of one tool call.
    Tool(ToolResult),
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    /// A user message holding one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User {
            content: vec![ContentPart::Text { text: text.into() }],
        }
    }

    /// An assistant message holding only text.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::Assistant(AssistantMessage {
            text: text.into(),
            ..AssistantMessage::default()
        })
    }

    /// The role name as the OpenAI-style wire format spells it (`system`, `user`, `assistant`, `tool`).
    pub fn role(&self) -> &'static str {
        match self {
            Message::System { .. } => "system",
            Message::User { .. } => "user",
            Message::Assistant(_) => "assistant",
            Message::Tool(_) => "tool",
        }
    }

    /// The tool calls this message makes (empty unless an assistant message with calls).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            Message::Assistant(a) => &a.tool_calls,
            _ => &[],
        }
    }

    /// All text parts of the message joined, without reasoning.
    pub fn text(&self) -> String {
        match self {
            Message::System { content } => content.clone(),
            Message::User { content } => content
                .iter()
                .filter_map(|p| match p {
                    ContentPart::Text { text } => Some(text.as_str()),
                    ContentPart::Image { .. } => None,
                })
                .collect::<Vec<_>>()
                .join(""),
            Message::Assistant(a) => a.text.clone(),
            Message::Tool(r) => r.content.to_string(),
        }
    }
}

/// One part of a user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, reserved in the type: adapters that cannot send images answer with
    /// [`ModelError::Unsupported`](crate::ModelError::Unsupported).
    Image {
        /// IANA media type, such as `image/png`.
        media_type: String,
        /// Base64-encoded bytes.
        data: String,
    },
}

/// A model turn: text, reasoning and tool calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// The visible answer text (empty when the turn only calls tools).
    #[serde(default)]
    pub text: String,
    /// Reasoning the model produced, kept verbatim for replay.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Reasoning>,
    /// Tool calls, in the order the model made them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

impl AssistantMessage {
    /// All reasoning text joined, or `None` when the turn had no reasoning.
    pub fn reasoning_text(&self) -> Option<String> {
        if self.reasoning.is_empty() {
            None
        } else {
            Some(self.reasoning.iter().map(|r| r.text.as_str()).collect())
        }
    }
}

/// One block of model reasoning ("thinking").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reasoning {
    /// The reasoning text, as the provider sent it.
    pub text: String,
    /// A provider signature that must be replayed with the text (Anthropic `signature`,
    /// Gemini `thoughtSignature`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A tool call made by the model.
///
/// The argument string is kept exactly as the model sent it, so adapters can replay it
/// byte for byte (a changed byte is a prompt-cache miss). [`ToolCall::arguments`] is the
/// parsed form.
///
/// Its strings are [`SmolStr`]s: a copy of a call (the log's, the step result's, the
/// tool result's id and name) shares the text rather than copying it, and a string of up
/// to 23 bytes is held inline. They read as `&str` (`Deref`), compare with `str` and
/// `String`, and serialize as JSON strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id; tool results refer to it.
    pub id: SmolStr,
    /// The tool's name.
    pub name: SmolStr,
    /// The argument string exactly as the model sent it (may be `""`).
    pub raw_arguments: SmolStr,
    /// Provider data that must be replayed with the call (for example Gemini's
    /// `thoughtSignature`). `None` for most providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_data: Option<Value>,
}

impl ToolCall {
    /// A tool call with the given raw argument string.
    pub fn new(
        id: impl Into<SmolStr>,
        name: impl Into<SmolStr>,
        raw_arguments: impl Into<SmolStr>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            raw_arguments: raw_arguments.into(),
            provider_data: None,
        }
    }

    /// The parsed arguments. An empty or whitespace-only string and JSON `null` mean `{}`.
    ///
    /// # Errors
    /// The `serde_json` error when the string is not JSON.
    pub fn arguments(&self) -> Result<Value, serde_json::Error> {
        if self.raw_arguments.trim().is_empty() {
            return Ok(Value::Object(Default::default()));
        }
        match serde_json::from_str(&self.raw_arguments)? {
            Value::Null => Ok(Value::Object(Default::default())),
            v => Ok(v),
        }
    }

    /// The argument string to send back to a provider: the raw string, or `"{}"` when the
    /// model sent an empty one (vLLM rejects an empty string in history).
    pub fn replay_arguments(&self) -> &str {
        if self.raw_arguments.trim().is_empty() {
            "{}"
        } else {
            &self.raw_arguments
        }
    }
}

/// The result of one tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the [`ToolCall`] this answers (shared with the call's, see [`ToolCall`]).
    pub tool_call_id: SmolStr,
    /// The name of the tool that was called (Gemini's `functionResponse` needs it).
    pub tool_name: SmolStr,
    /// The result text the model reads.
    pub content: SmolStr,
    /// Whether the call failed (unknown tool, bad arguments, tool error).
    #[serde(default)]
    pub is_error: bool,
    /// Whether the log marks this result discardable, so a context strategy drops it first
    /// (a loaded skill body; from [`ToolOutput::discardable`](crate::ToolOutput::discardable)).
    /// Not sent to the model; serialized only when set, so the bytes of other results
    /// are unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub discardable: bool,
}

impl ToolResult {
    /// A successful result.
    pub fn ok(call: &ToolCall, content: impl Into<SmolStr>) -> Self {
        ToolResult {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: content.into(),
            is_error: false,
            discardable: false,
        }
    }

    /// An error result the model can read.
    pub fn error(call: &ToolCall, content: impl Into<SmolStr>) -> Self {
        ToolResult {
            is_error: true,
            ..ToolResult::ok(call, content)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_null_arguments_mean_empty_object() {
        for raw in ["", "  ", "null"] {
            let call = ToolCall::new("c1", "ls", raw);
            assert_eq!(call.arguments().unwrap(), serde_json::json!({}));
        }
        assert_eq!(ToolCall::new("c", "ls", "").replay_arguments(), "{}");
        let raw = "{\"b\": 1,  \"a\":2}";
        assert_eq!(ToolCall::new("c", "ls", raw).replay_arguments(), raw);
    }

    #[test]
    fn non_json_arguments_are_an_error() {
        assert!(ToolCall::new("c1", "ls", "{path: x").arguments().is_err());
    }

    #[test]
    fn messages_round_trip_through_serde() {
        let mut a = AssistantMessage {
            text: "ok".into(),
            ..Default::default()
        };
        a.tool_calls
            .push(ToolCall::new("c1", "read", "{\"path\":\"a\"}"));
        let msgs = vec![
            Message::system("s"),
            Message::user("u"),
            Message::Assistant(a.clone()),
            Message::Tool(ToolResult::error(&a.tool_calls[0], "no such file")),
        ];
        let json = serde_json::to_string(&msgs).unwrap();
        let back: Vec<Message> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, msgs);
        assert_eq!(back[3].role(), "tool");
    }
}
