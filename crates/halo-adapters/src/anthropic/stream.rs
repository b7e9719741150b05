//! Streaming Messages: the named server-sent events and the assembler that turns them into
//! [`ModelStreamEvent`]s and, at the end, the same [`ModelResponse`] a non-streaming call
//! returns.
//!
//! Shape: <https://platform.claude.com/docs/en/build-with-claude/streaming>. Events are dispatched on the data's `type` (the `event:`
//! name when the data has none):
//! - `message_start`: the envelope (model) and the input side of `usage`.
//! - `content_block_start` / `content_block_delta` / `content_block_stop`, keyed by the
//!   block's `index`: `text_delta` → [`ModelStreamEvent::TextDelta`]; `thinking_delta` →
//!   [`ModelStreamEvent::ReasoningDelta`]; `signature_delta` replaces the thinking block's
//!   signature; a `tool_use` start → [`ModelStreamEvent::ToolCallStart`] with the
//!   provider's id, and each non-empty `input_json_delta` fragment →
//!   [`ModelStreamEvent::ToolCallDelta`]. Fragments are concatenated per block index, so
//!   calls whose deltas interleave stay apart; they are not parsed here. The event `index`
//!   numbers the calls in order of their `content_block_start` (0-based); the assembled
//!   turn lists calls, and thinking blocks, by block `index`, their place in the message's
//!   `content` (the API starts blocks in that order; a gateway that interleaves them out of
//!   order still gets the provider's order).
//!   A `tool_use` start that already carries a non-empty `input` (some gateways) gives
//!   that input's JSON as the first fragment.
//! - `message_delta`: `stop_reason` and `usage` (cumulative: fields overwrite, never add).
//! - `message_stop`: the turn is complete; nothing after it is read.
//! - `ping` and unknown event types are ignored; `error` is [`ModelError::Stream`] with its
//!   `error.type` ([`in_stream`](super::error::in_stream): `overloaded_error` is
//!   retryable).
//!
//! A stream is complete at `message_stop`, or at its end once `message_delta` brought a
//! `stop_reason`. Ending before both is a cut stream: [`ModelError::Truncated`], and no tool
//! call of it is returned.

use futures::Stream;
use halo_core::{
    AssistantMessage, ModelError, ModelEventStream, ModelResponse, ModelStreamEvent, Reasoning,
    ToolCall,
};
use serde::Deserialize;
use serde_json::Value;

use super::response::{WireUsage, finish_reason, redacted_reasoning, refusal_error};
use crate::sse::{self, SseEvent};
use crate::transport::text::body_excerpt;

/// One event's data: only what Halo reads.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct EventData {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<StartMessage>,
    index: Option<u64>,
    content_block: Option<Value>,
    delta: Option<Delta>,
    usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StartMessage {
    id: Option<String>,
    model: Option<String>,
    usage: Option<WireUsage>,
}

/// A `content_block_delta`'s or `message_delta`'s `delta`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
    thinking: Option<String>,
    signature: Option<String>,
    partial_json: Option<String>,
    stop_reason: Option<String>,
}

/// A content block being assembled.
#[derive(Debug)]
enum Block {
    Text,
    Thinking {
        text: String,
        signature: Option<String>,
    },
    RedactedThinking(String),
    ToolUse {
        /// Position among the turn's tool calls.
        call: usize,
    },
    /// Server tools, citations, future types.
    Other,
}

#[derive(Debug)]
struct PendingCall {
    /// The block index: its place in the message's content.
    block: u64,
    id: String,
    name: String,
    arguments: String,
}

/// Assembles one streamed turn from its events.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    text: String,
    /// Blocks by wire index, in order of their start.
    blocks: Vec<(u64, Block)>,
    calls: Vec<PendingCall>,
    usage: WireUsage,
    stop_reason: Option<String>,
    id: Option<String>,
    model: Option<String>,
    done: bool,
    secret: Option<String>,
}

impl Assembler {
    /// An assembler that redacts `secret` from every error it reports.
    pub(crate) fn new(secret: Option<&str>) -> Self {
        Assembler {
            secret: secret.map(str::to_string),
            ..Assembler::default()
        }
    }

    fn block(&mut self, index: Option<u64>) -> Option<&mut Block> {
        let index = index?;
        self.blocks
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
    }

    fn start_block(
        &mut self,
        event: EventData,
        out: &mut Vec<ModelStreamEvent>,
    ) -> Result<(), ModelError> {
        let index = event.index.unwrap_or(self.blocks.len() as u64);
        let content = event.content_block.unwrap_or(Value::Null);
        let field = |name: &str| content.get(name).and_then(Value::as_str);
        let block = match field("type") {
            Some("text") => {
                // A start may carry initial text (the API sends "").
                if let Some(t) = field("text").filter(|t| !t.is_empty()) {
                    self.text.push_str(t);
                    out.push(ModelStreamEvent::TextDelta(t.to_string()));
                }
                Block::Text
            }
            Some("thinking") => {
                let text = field("thinking").unwrap_or_default().to_string();
                if !text.is_empty() {
                    out.push(ModelStreamEvent::ReasoningDelta(text.clone()));
                }
                Block::Thinking {
                    text,
                    signature: field("signature")
                        .filter(|s| !s.is_empty())
                        .map(str::to_string),
                }
            }
            Some("redacted_thinking") => {
                Block::RedactedThinking(field("data").unwrap_or_default().to_string())
            }
            Some("tool_use") => {
                let (Some(id), Some(name)) = (
                    field("id").filter(|s| !s.is_empty()),
                    field("name").filter(|s| !s.is_empty()),
                ) else {
                    return Err(ModelError::InvalidResponse(format!(
                        "content block {index} is a tool_use without an id or a name"
                    )));
                };
                let call = self.calls.len();
                out.push(ModelStreamEvent::ToolCallStart {
                    index: call,
                    id: id.to_string(),
                    name: name.to_string(),
                });
                let mut arguments = String::new();
                if let Some(input) = content.get("input").filter(|v| match v {
                    Value::Object(map) => !map.is_empty(),
                    Value::Null => false,
                    _ => true,
                }) {
                    arguments = input.to_string();
                    out.push(ModelStreamEvent::ToolCallDelta {
                        index: call,
                        arguments: arguments.clone(),
                    });
                }
                self.calls.push(PendingCall {
                    block: index,
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments,
                });
                Block::ToolUse { call }
            }
            _ => Block::Other,
        };
        self.blocks.push((index, block));
        Ok(())
    }

    fn delta(&mut self, index: Option<u64>, delta: Delta, out: &mut Vec<ModelStreamEvent>) {
        match delta.kind.as_deref() {
            Some("text_delta") => {
                if let Some(t) = delta.text.filter(|t| !t.is_empty()) {
                    self.text.push_str(&t);
                    out.push(ModelStreamEvent::TextDelta(t));
                }
            }
            Some("thinking_delta") => {
                if let Some(Block::Thinking { text, .. }) = self.block(index)
                    && let Some(t) = delta.thinking.filter(|t| !t.is_empty())
                {
                    text.push_str(&t);
                    out.push(ModelStreamEvent::ReasoningDelta(t));
                }
            }
            Some("signature_delta") => {
                if let Some(Block::Thinking { signature, .. }) = self.block(index) {
                    // Replaces, never appends (the SDKs do the same).
                    *signature = delta.signature;
                }
            }
            Some("input_json_delta") => {
                let call = match self.block(index) {
                    Some(Block::ToolUse { call }) => *call,
                    _ => return,
                };
                if let Some(fragment) = delta.partial_json.filter(|f| !f.is_empty()) {
                    self.calls[call].arguments.push_str(&fragment);
                    out.push(ModelStreamEvent::ToolCallDelta {
                        index: call,
                        arguments: fragment,
                    });
                }
            }
            // `citations_delta` and later types.
            _ => {}
        }
    }
}

impl sse::Assemble for Assembler {
    /// Whether `message_stop` was seen: nothing after it is read.
    fn is_done(&self) -> bool {
        self.done
    }

    /// Applies one SSE event, pushing the deltas it carries onto `out`.
    ///
    /// # Errors
    /// The provider's `error` event ([`in_stream`](super::error::in_stream));
    /// [`ModelError::InvalidResponse`] for data that is not JSON, or a `tool_use` block
    /// without an id or name.
    fn push(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ModelStreamEvent>,
    ) -> Result<(), ModelError> {
        if self.done {
            return Ok(());
        }
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let secret = self.secret.as_deref();
        if event.event == "error" {
            return Err(super::error::in_stream(data, secret));
        }
        let parsed: EventData = serde_json::from_str(data).map_err(|e| {
            ModelError::InvalidResponse(crate::transport::text::redact(
                format!(
                    "a stream event is not a Messages event ({e}): {}",
                    body_excerpt(data.as_bytes())
                ),
                secret,
            ))
        })?;
        let kind = parsed.kind.as_deref().unwrap_or(event.event.as_str());
        match kind {
            "message_start" => {
                if let Some(message) = parsed.message {
                    if self.model.is_none() {
                        self.model = message.model.filter(|m| !m.is_empty());
                    }
                    if self.id.is_none() {
                        self.id = message.id.filter(|id| !id.is_empty());
                    }
                    if let Some(usage) = message.usage {
                        self.usage.merge(usage);
                    }
                }
            }
            "content_block_start" => self.start_block(parsed, out)?,
            "content_block_delta" => {
                if let Some(delta) = parsed.delta {
                    self.delta(parsed.index, delta, out);
                }
            }
            "message_delta" => {
                if let Some(reason) = parsed
                    .delta
                    .and_then(|d| d.stop_reason)
                    .filter(|r| !r.is_empty())
                {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = parsed.usage {
                    self.usage.merge(usage);
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(super::error::in_stream(data, secret)),
            // `ping`, `content_block_stop`, and event types added later.
            _ => {}
        }
        Ok(())
    }

    /// The assembled turn, once the stream has ended.
    ///
    /// # Errors
    /// [`ModelError::Truncated`] when neither `message_stop` nor a `stop_reason` arrived;
    /// `stop_reason: "refusal"` → [`refusal_error`].
    fn finish(mut self) -> Result<ModelResponse, ModelError> {
        if !self.done && self.stop_reason.is_none() {
            return Err(ModelError::Truncated(
                "the stream ended before message_stop or a stop_reason".into(),
            ));
        }
        if self.stop_reason.as_deref() == Some("refusal") {
            return Err(refusal_error(&self.text));
        }
        // Stable sorts: the content order, whatever order the blocks started in.
        self.blocks.sort_by_key(|(index, _)| *index);
        self.calls.sort_by_key(|c| c.block);
        let mut reasoning = Vec::new();
        for (_, block) in self.blocks {
            match block {
                Block::Thinking { text, signature } => {
                    reasoning.push(Reasoning { text, signature })
                }
                Block::RedactedThinking(data) => reasoning.push(redacted_reasoning(&data)),
                _ => {}
            }
        }
        let mut tool_calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|c| ToolCall::new(c.id, c.name, c.arguments))
            .collect();
        let finish_reason = finish_reason(self.stop_reason.as_deref(), &mut tool_calls);
        Ok(ModelResponse {
            id: self.id,
            message: AssistantMessage {
                text: self.text,
                reasoning,
                tool_calls,
            },
            finish_reason,
            usage: self.usage.normalize(),
            model: self.model,
            provider: None,
        })
    }
}

/// Decodes a streamed Messages body (`text/event-stream`, as network reads in any split)
/// into model stream events: the deltas as they arrive, then one
/// [`ModelStreamEvent::Finish`] with the assembled turn.
///
/// This is what [`AnthropicAdapter`](super::AnthropicAdapter)'s `stream` runs over the HTTP
/// body; it is public so recorded streams can be replayed without a server. The body's own
/// errors pass through unchanged; the stream ends after the first error.
///
/// # Errors
/// - A cut stream (mid-event, or before `message_stop` and a `stop_reason`) →
///   [`ModelError::Truncated`], with no `Finish`.
/// - An `error` event → [`ModelError::Stream`]: status 200, its `error.type` kept
///   (`overloaded_error` is retryable, `invalid_request_error` is not).
/// - Data that is not JSON, or not UTF-8 → [`ModelError::InvalidResponse`].
///
/// ```
/// use futures::StreamExt;
/// use halo_adapters::anthropic::decode_stream;
/// use halo_core::{FinishReason, ModelStreamEvent};
///
/// let body = concat!(
///     "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":3,\"cache_read_input_tokens\":2048,\"cache_creation_input_tokens\":0,\"output_tokens\":1}}}\n\n",
///     "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
///     "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
///     "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
///     "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
///     "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
/// );
/// let reads = body.as_bytes().chunks(7).map(Ok);
/// let events: Vec<_> = futures::executor::block_on(decode_stream(futures::stream::iter(reads)).collect());
/// assert_eq!(events[0], Ok(ModelStreamEvent::TextDelta("Hi".into())));
/// let Some(Ok(ModelStreamEvent::Finish(turn))) = events.last() else { panic!() };
/// assert_eq!(turn.finish_reason, FinishReason::Stop);
/// assert_eq!(turn.usage.input_tokens, Some(2051)); // 3 uncached + 2048 read
/// assert_eq!(turn.usage.cache_read_tokens, Some(2048));
/// assert_eq!(turn.usage.output_tokens, Some(2));
/// ```
pub fn decode_stream<'a, S, B>(body: S) -> ModelEventStream<'a>
where
    S: Stream<Item = Result<B, ModelError>> + Send + 'a,
    B: AsRef<[u8]> + Send + 'a,
{
    decode_with(body, None)
}

/// [`decode_stream`] with errors redacted of `secret`.
pub(crate) fn decode_with<'a, S, B>(body: S, secret: Option<&str>) -> ModelEventStream<'a>
where
    S: Stream<Item = Result<B, ModelError>> + Send + 'a,
    B: AsRef<[u8]> + Send + 'a,
{
    sse::assemble(body, Assembler::new(secret))
}
