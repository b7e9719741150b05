//! [`UiMessageChunk`]: the parts of the UI Message Stream protocol that Halo sends, and their
//! SSE framing.
//!
//! Field names and values follow `uiMessageChunkSchema` of the `ai` npm package
//! (`src/ui-message-stream/ui-message-chunks.ts`, checked against `ai` 7.0.173); the frame
//! format follows its `JsonToSseTransformStream`. See [`docs/stream-protocol.md`].
//!
//! [`docs/stream-protocol.md`]: https://github.com/halo-rs/halo/blob/main/docs/stream-protocol.md

use bytes::Bytes;
use serde::Serialize;
use serde::ser::{SerializeMap as _, Serializer};
use serde_json::Value;

/// The SSE frame that ends every stream: `data: [DONE]\n\n`.
pub const DONE_FRAME: &[u8] = b"data: [DONE]\n\n";

/// One part ("chunk") of the UI Message Stream protocol, serialized as the JSON object the
/// `ai` package's schema accepts: `type` first, then the fields in camelCase.
///
/// Only the parts Halo produces are here; the protocol has more (sources, files, message
/// metadata), which a client accepts alongside these.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum UiMessageChunk {
    /// `{"type":"start"}`: the assistant message begins. `messageId` is sent only when set.
    Start {
        /// The assistant message's id; the client generates one when absent.
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    /// `{"type":"start-step"}`: a model call begins (one per agent step).
    StartStep,
    /// `{"type":"text-start","id":..}`: a text part opens.
    TextStart {
        /// The part's id, unique within the message.
        id: String,
    },
    /// `{"type":"text-delta","id":..,"delta":..}`: text appended to an open text part.
    TextDelta {
        /// The open part's id.
        id: String,
        /// The text piece.
        delta: String,
    },
    /// `{"type":"text-end","id":..}`: a text part is complete.
    TextEnd {
        /// The part's id.
        id: String,
    },
    /// `{"type":"reasoning-start","id":..}`: a reasoning part opens.
    ReasoningStart {
        /// The part's id, unique within the message.
        id: String,
    },
    /// `{"type":"reasoning-delta","id":..,"delta":..}`: reasoning text appended.
    ReasoningDelta {
        /// The open part's id.
        id: String,
        /// The reasoning piece.
        delta: String,
    },
    /// `{"type":"reasoning-end","id":..}`: a reasoning part is complete.
    ReasoningEnd {
        /// The part's id.
        id: String,
    },
    /// `{"type":"tool-input-start","toolCallId":..,"toolName":..}`: the model began a tool
    /// call; its arguments stream as `tool-input-delta`.
    ToolInputStart {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
    },
    /// `{"type":"tool-input-delta","toolCallId":..,"inputTextDelta":..}`: the next piece of
    /// the call's JSON argument string.
    ToolInputDelta {
        /// The call's id.
        tool_call_id: String,
        /// The piece of the argument string.
        input_text_delta: String,
    },
    /// `{"type":"tool-input-available","toolCallId":..,"toolName":..,"input":{..}}`: the call
    /// is complete, with its parsed arguments.
    ToolInputAvailable {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// The parsed arguments.
        input: Value,
    },
    /// `{"type":"tool-input-error","toolCallId":..,"toolName":..,"input":..,"errorText":..}`:
    /// the call is complete but its argument string is not JSON (`input` is the raw string).
    ToolInputError {
        /// The call's id.
        tool_call_id: String,
        /// The tool's name.
        tool_name: String,
        /// The raw argument string.
        input: Value,
        /// Why the arguments were rejected.
        error_text: String,
    },
    /// `{"type":"tool-output-available","toolCallId":..,"output":..}`: the tool's result;
    /// with `"preliminary":true`, an output so far that a later one replaces (the message
    /// of an agent the tool runs, while it runs).
    ToolOutputAvailable {
        /// The call's id.
        tool_call_id: String,
        /// The result (Halo's tool results are text, so a JSON string), or a preliminary
        /// output (an inner agent's `UIMessage`).
        output: Value,
        /// Whether a later output replaces this one; sent only when `true`.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        preliminary: bool,
    },
    /// `{"type":"tool-output-error","toolCallId":..,"errorText":..}`: the tool failed; the
    /// text is the error result the model reads.
    ToolOutputError {
        /// The call's id.
        tool_call_id: String,
        /// The error result's text.
        error_text: String,
    },
    /// `{"type":"tool-approval-request","approvalId":..,"toolCallId":..,"reason":..}`: the
    /// call waits for someone's approval; the client shows it in the state
    /// `approval-requested` (`reason` sent only when set).
    ToolApprovalRequest {
        /// The approval's id, which the answer names (Halo uses the call's id).
        approval_id: String,
        /// The call's id.
        tool_call_id: String,
        /// Why the call needs approval.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// `{"type":"tool-approval-response","approvalId":..,"approved":..,"reason":..}`: someone
    /// answered an approval request (state `approval-responded`).
    ToolApprovalResponse {
        /// The approval's id.
        approval_id: String,
        /// Whether the call may run.
        approved: bool,
        /// Why, when given.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// `{"type":"tool-output-denied","toolCallId":..}`: the call was denied and never ran
    /// (state `output-denied`).
    ToolOutputDenied {
        /// The call's id.
        tool_call_id: String,
    },
    /// `{"type":"steering-message","id":..,"parts":[{"type":"text","text":..}]}`: a user
    /// message that entered the run at a step boundary (steering), placed before the output
    /// of the step that received it.
    SteeringMessage {
        /// The message's id.
        id: String,
        /// Its parts.
        parts: Vec<TextPart>,
    },
    /// `{"type":"reset-step"}`: drop the parts of the step in flight (a run taken over
    /// after its process stopped mid-step makes the step again).
    ResetStep,
    /// `{"type":"finish-step"}`: the model call and its tool calls are complete.
    FinishStep,
    /// `{"type":"finish","finishReason":..}`: the message is complete.
    Finish {
        /// Why the run ended; sent only when known.
        #[serde(skip_serializing_if = "Option::is_none")]
        finish_reason: Option<UiFinishReason>,
    },
    /// `{"type":"error","errorText":..}`: the run failed.
    Error {
        /// What the client shows.
        error_text: String,
    },
    /// `{"type":"data-NAME","data":..}`: a custom data part (see [`DataPart`]).
    #[serde(untagged)]
    Data(DataPart),
}

/// A text part of a steering message: `{"type":"text","text":..}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename = "text")]
pub struct TextPart {
    /// The text.
    pub text: String,
}

/// A custom data part, the protocol's `data-${name}` chunk:
/// `{"type":"data-NAME","id":..,"data":..,"transient":true}`, `id` and `transient` sent
/// only when set.
///
/// The client keeps a non-transient part in the assistant message's `parts` (a later part
/// with the same type and `id` replaces its `data`) and hands every data part to the chat's
/// `onData` callback; a transient one goes only to `onData`. Source: the `ai` package's
/// `uiMessageChunkSchema` (`data-${string}` member) and `processUIMessageStream`.
///
/// ```
/// use halo_stream::{DataPart, UiMessageChunk};
/// let part = DataPart::new("halo-cache-bust", serde_json::json!({"call": 2})).transient();
/// assert_eq!(
///     UiMessageChunk::Data(part).to_json(),
///     r#"{"type":"data-halo-cache-bust","data":{"call":2},"transient":true}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DataPart {
    /// The part's name: the `type` is `data-` followed by it.
    pub name: String,
    /// An id that lets a later part with the same name replace this one in the message.
    pub id: Option<String>,
    /// The payload, any JSON value.
    pub data: Value,
    /// Whether the part goes only to `onData`, not into the message's `parts`.
    pub transient: bool,
}

impl DataPart {
    /// A non-transient part without an id.
    pub fn new(name: impl Into<String>, data: Value) -> Self {
        Self {
            name: name.into(),
            id: None,
            data,
            transient: false,
        }
    }

    /// The same part, marked transient (sent to `onData` only, never stored in the message).
    pub fn transient(mut self) -> Self {
        self.transient = true;
        self
    }

    /// The same part with `id` set.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

impl Serialize for DataPart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = 2 + usize::from(self.id.is_some()) + usize::from(self.transient);
        let mut map = serializer.serialize_map(Some(fields))?;
        map.serialize_entry("type", &format!("data-{}", self.name))?;
        if let Some(id) = &self.id {
            map.serialize_entry("id", id)?;
        }
        map.serialize_entry("data", &self.data)?;
        if self.transient {
            map.serialize_entry("transient", &true)?;
        }
        map.end()
    }
}

/// The `finishReason` values of the `finish` part (the AI SDK's `FinishReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum UiFinishReason {
    /// `"stop"`: a natural end.
    Stop,
    /// `"length"`: the token limit was reached.
    Length,
    /// `"content-filter"`: output was withheld.
    ContentFilter,
    /// `"tool-calls"`: the last step asked for tools.
    ToolCalls,
    /// `"error"`: the run failed.
    Error,
    /// `"other"`: anything else.
    Other,
}

impl From<&halo_core::FinishReason> for UiFinishReason {
    fn from(reason: &halo_core::FinishReason) -> Self {
        use halo_core::FinishReason as F;
        match reason {
            F::Stop => Self::Stop,
            F::Length => Self::Length,
            F::ToolCalls => Self::ToolCalls,
            F::ContentFilter => Self::ContentFilter,
            F::Other(_) => Self::Other,
        }
    }
}

impl UiMessageChunk {
    /// The part's JSON object, as one line without a trailing newline.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            // Unreachable in practice: every field is a string or a `serde_json::Value`.
            serde_json::json!({ "type": "error", "errorText": format!("cannot encode a stream part: {e}") })
                .to_string()
        })
    }

    /// The part as one SSE frame: `data: {json}\n\n` (UTF-8 bytes).
    ///
    /// ```
    /// use halo_stream::UiMessageChunk;
    /// let frame = UiMessageChunk::TextDelta { id: "text-1".into(), delta: "Hi".into() };
    /// assert_eq!(
    ///     &frame.to_sse_frame()[..],
    ///     b"data: {\"type\":\"text-delta\",\"id\":\"text-1\",\"delta\":\"Hi\"}\n\n"
    /// );
    /// ```
    pub fn to_sse_frame(&self) -> Bytes {
        let json = self.to_json();
        let mut frame = Vec::with_capacity(json.len() + 8);
        frame.extend_from_slice(b"data: ");
        frame.extend_from_slice(json.as_bytes());
        frame.extend_from_slice(b"\n\n");
        Bytes::from(frame)
    }
}
