//! Streaming chat completions: `chat.completion.chunk` wire types and the assembler that
//! turns them into [`ModelStreamEvent`]s and, at the end, the same [`ModelResponse`]
//! [`parse`](super::response::parse) builds from a non-streaming body.
//!
//! Shape: <https://platform.openai.com/docs/api-reference/chat-streaming/streaming>, with the
//! vendor differences (DeepSeek:
//! <https://api-docs.deepseek.com/api/create-chat-completion>; OpenAI's chunk type:
//! <https://github.com/openai/openai-python/blob/main/src/openai/types/chat/chat_completion_chunk.py>;
//! llama.cpp: <https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md>):
//!
//! - Text arrives in `delta.content`; DeepSeek (and llama.cpp `--reasoning-format deepseek`)
//!   reasoning in `delta.reasoning_content`, vLLM/OpenRouter's in `delta.reasoning`.
//! - Tool calls arrive as deltas keyed by `index`: `id` and `function.name` on the first,
//!   then `function.arguments` fragments split at any byte. Several calls may interleave in
//!   one chunk or across chunks. Ollama sends parallel calls all at `index` 0, told apart by
//!   `id`: a new non-empty id on an occupied index starts a new call. Arguments are
//!   concatenated as received and never parsed here; `""` or absent stays `""` (which
//!   [`ToolCall::arguments`](halo_core::ToolCall::arguments) reads as `{}`).
//! - Events: [`ModelStreamEvent::ToolCallStart`] as soon as a call's name is known, with the
//!   provider's id (or a fresh `call_halo_N` when the server sent none, as some local servers
//!   do), then one [`ModelStreamEvent::ToolCallDelta`] per non-empty fragment; fragments
//!   that came before the name are sent right after the start. The events' `index` numbers
//!   the calls in order of first appearance (0-based), so it names each call from its start
//!   on; the assembled turn lists its calls by wire `index`, as the provider numbered them
//!   (a server may start index 1 before index 0), and calls sharing an index (Ollama) in
//!   order of appearance.
//! - Usage comes from whichever chunk carries it: OpenAI's extra final chunk with empty
//!   `choices` (`stream_options.include_usage`), or DeepSeek's last content chunk. A chunk
//!   without `finish_reason` never clears one already seen.
//! - The turn is complete at `data: [DONE]`, or at the end of the body once a
//!   `finish_reason` was seen. Ending before both is a cut stream: [`ModelError::Truncated`],
//!   and no tool call of it is returned.

use std::borrow::Cow;
use std::fmt;

use futures::Stream;
use halo_core::{
    AssistantMessage, ModelError, ModelEventStream, ModelResponse, ModelStreamEvent, Reasoning,
    ToolCall,
};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::response::{
    INSUFFICIENT_SYSTEM_RESOURCE, Timings, WireUsage, finish_reason, fresh_call_id,
    insufficient_system_resource, usage,
};
use crate::sse::{self, SseEvent};

/// One `chat.completion.chunk`: only what Halo reads; strings borrow from the event data
/// when they hold no escapes.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Chunk<'a> {
    /// The completion's id, the same on every chunk.
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow)]
    choices: Vec<ChunkChoice<'a>>,
    usage: Option<WireUsage>,
    /// llama.cpp `llama-server`'s timings, on the final chunk.
    timings: Option<Timings>,
    /// An error reported mid-stream (OpenAI SDKs raise on any chunk with an `error` key).
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ChunkChoice<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    delta: Option<Delta<'a>>,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta<'a> {
    #[serde(borrow)]
    content: Option<Text<'a>>,
    #[serde(borrow)]
    reasoning_content: Option<Text<'a>>,
    #[serde(borrow)]
    reasoning: Option<Text<'a>>,
    #[serde(borrow)]
    refusal: Option<Text<'a>>,
    #[serde(borrow)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ToolCallDelta<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FunctionDelta<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<Arguments<'a>>,
}

/// A text field: a string, or (some servers) an array of `{"type":"text","text":..}` parts,
/// whose texts are joined. Anything else reads as no text.
#[derive(Debug, Default)]
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of text parts")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Text::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = String::new();
                while let Some(part) = seq.next_element::<Value>()? {
                    if let Some(t) = part.get("text").and_then(Value::as_str) {
                        out.push_str(t);
                    }
                }
                Ok(Text(Cow::Owned(out)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Text::default())
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Text::default())
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Text::default())
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Text::default())
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Text::default())
            }
        }
        d.deserialize_any(V)
    }
}

/// A `function.arguments` fragment: a string on the wire; a server that sends an object
/// instead gets its JSON text, so nothing is lost (as [`parse`](super::response::parse) does).
#[derive(Debug, Default)]
struct Arguments<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Arguments<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Arguments<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an argument string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Arguments(Cow::Owned(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Arguments::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let v = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Arguments(Cow::Owned(v.to_string())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let v = Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Arguments(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(V)
    }
}

/// A tool call being assembled.
#[derive(Debug, Default)]
struct PendingCall {
    /// The wire `index` it arrived at: its place in the assembled turn.
    wire_index: u64,
    /// The provider's id, once it arrived.
    wire_id: Option<String>,
    /// The id given in [`ModelStreamEvent::ToolCallStart`] (the wire id, or a fresh one).
    id: Option<String>,
    name: String,
    /// The argument string as received.
    arguments: String,
}

/// Assembles one streamed turn from its events.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    text: String,
    refusal: String,
    reasoning: String,
    /// Calls in order of first appearance: the position is the event `index`; the turn
    /// orders them by `wire_index`.
    calls: Vec<PendingCall>,
    /// Wire `index` → position in `calls` of the call that index currently feeds.
    slots: Vec<(u64, usize)>,
    finish: Option<String>,
    usage: Option<WireUsage>,
    timings: Option<Timings>,
    id: Option<String>,
    model: Option<String>,
    done: bool,
}

impl Assembler {
    fn delta(&mut self, delta: Delta<'_>, out: &mut Vec<ModelStreamEvent>) {
        let reasoning = delta
            .reasoning_content
            .filter(|t| !t.0.is_empty())
            .or(delta.reasoning);
        if let Some(Text(r)) = reasoning.filter(|t| !t.0.is_empty()) {
            self.reasoning.push_str(&r);
            out.push(ModelStreamEvent::ReasoningDelta(r.into_owned()));
        }
        if let Some(Text(t)) = delta.content.filter(|t| !t.0.is_empty()) {
            self.text.push_str(&t);
            out.push(ModelStreamEvent::TextDelta(t.into_owned()));
        }
        // A refusal is the answer text when there is no content (as `parse` reads it).
        if let Some(Text(r)) = delta.refusal.filter(|t| !t.0.is_empty()) {
            if self.text.is_empty() {
                out.push(ModelStreamEvent::TextDelta(r.to_string()));
            }
            self.refusal.push_str(&r);
        }
        for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
            self.tool_call(position, call, out);
        }
    }

    fn tool_call(
        &mut self,
        position: usize,
        delta: ToolCallDelta<'_>,
        out: &mut Vec<ModelStreamEvent>,
    ) {
        // `index` is required by the spec; a server that leaves it out is read by position.
        let wire_index = delta.index.unwrap_or(position as u64);
        let id = delta.id.filter(|id| !id.is_empty());
        let slot = self.slots.iter().position(|(i, _)| *i == wire_index);
        let at = match slot {
            Some(s) => {
                let current = self.slots[s].1;
                let new_call = match (&id, &self.calls[current].wire_id) {
                    (Some(id), Some(old)) => id.as_ref() != old,
                    _ => false,
                };
                if new_call {
                    self.calls.push(PendingCall {
                        wire_index,
                        ..PendingCall::default()
                    });
                    self.slots[s].1 = self.calls.len() - 1;
                }
                self.slots[s].1
            }
            None => {
                self.calls.push(PendingCall {
                    wire_index,
                    ..PendingCall::default()
                });
                self.slots.push((wire_index, self.calls.len() - 1));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at];
        let started = call.id.is_some();
        if call.wire_id.is_none() && !started {
            call.wire_id = id.map(Cow::into_owned);
        }
        let function = delta.function.unwrap_or_default();
        if call.name.is_empty()
            && let Some(name) = function.name.filter(|n| !n.is_empty())
        {
            call.name = name.into_owned();
        }
        let fragment = function.arguments.map(|a| a.0).unwrap_or_default();
        if started {
            if !fragment.is_empty() {
                call.arguments.push_str(&fragment);
                out.push(ModelStreamEvent::ToolCallDelta {
                    index: at,
                    arguments: fragment.into_owned(),
                });
            }
            return;
        }
        call.arguments.push_str(&fragment);
        if call.name.is_empty() {
            // Not startable yet: its fragments wait until the name arrives.
            return;
        }
        let id = call.wire_id.clone().unwrap_or_else(fresh_call_id);
        call.id = Some(id.clone());
        out.push(ModelStreamEvent::ToolCallStart {
            index: at,
            id,
            name: call.name.clone(),
        });
        if !call.arguments.is_empty() {
            out.push(ModelStreamEvent::ToolCallDelta {
                index: at,
                arguments: call.arguments.clone(),
            });
        }
    }
}

impl sse::Assemble for Assembler {
    /// Whether `data: [DONE]` was seen: nothing after it is read.
    fn is_done(&self) -> bool {
        self.done
    }

    /// Applies one SSE event, pushing the deltas it carries onto `out`.
    ///
    /// # Errors
    /// The provider's error (an `error` event or an `{"error": …}` chunk, mapped by
    /// [`in_stream`](super::error::in_stream)); [`ModelError::InvalidResponse`] for data
    /// that is not a chunk; [`ModelError::Truncated`] for DeepSeek's
    /// `insufficient_system_resource`.
    fn push(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ModelStreamEvent>,
    ) -> Result<(), ModelError> {
        if self.done {
            return Ok(());
        }
        let data = event.data.trim();
        if event.event == "error" {
            let payload = serde_json::from_str::<Value>(data)
                .unwrap_or_else(|_| Value::String(data.to_string()));
            return Err(super::error::in_stream(&payload, None));
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|e| {
            ModelError::InvalidResponse(format!(
                "a stream event is not a chat.completion.chunk ({e}): {}",
                crate::transport::text::body_excerpt(data.as_bytes())
            ))
        })?;
        if let Some(error) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            return Err(super::error::in_stream(error, None));
        }
        if self.id.is_none()
            && let Some(id) = chunk.id.filter(|id| !id.is_empty())
        {
            self.id = Some(id.into_owned());
        }
        if self.model.is_none()
            && let Some(m) = chunk.model.filter(|m| !m.is_empty())
        {
            self.model = Some(m.into_owned());
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        if chunk.timings.is_some() {
            self.timings = chunk.timings;
        }
        for choice in chunk.choices {
            // Only the first choice is the turn (`n` > 1 is not requested).
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                self.delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                if reason == INSUFFICIENT_SYSTEM_RESOURCE {
                    return Err(insufficient_system_resource());
                }
                self.finish = Some(reason.into_owned());
            }
        }
        Ok(())
    }

    /// The assembled turn, once the stream has ended.
    ///
    /// # Errors
    /// [`ModelError::Truncated`] when neither `[DONE]` nor a `finish_reason` arrived;
    /// [`ModelError::InvalidResponse`] for a tool call that never got a name.
    fn finish(mut self) -> Result<ModelResponse, ModelError> {
        if self.finish.is_none() && !self.done {
            return Err(ModelError::Truncated(
                "the stream ended before a finish_reason or [DONE]".into(),
            ));
        }
        // Stable: calls sharing a wire index keep their order of appearance.
        self.calls.sort_by_key(|c| c.wire_index);
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in self.calls.into_iter().enumerate() {
            let Some(id) = call.id else {
                return Err(ModelError::InvalidResponse(format!(
                    "tool call {index} has no function name"
                )));
            };
            tool_calls.push(ToolCall::new(id, call.name, call.arguments));
        }
        let text = if self.text.is_empty() {
            self.refusal
        } else {
            self.text
        };
        let reasoning = if self.reasoning.is_empty() {
            Vec::new()
        } else {
            vec![Reasoning {
                text: self.reasoning,
                signature: None,
            }]
        };
        let finish_reason = finish_reason(self.finish.as_deref(), &mut tool_calls);
        Ok(ModelResponse {
            id: self.id,
            message: AssistantMessage {
                text,
                reasoning,
                tool_calls,
            },
            finish_reason,
            usage: usage(self.usage.as_ref(), self.timings.as_ref()),
            model: self.model,
            provider: None,
        })
    }
}

/// Decodes a streamed chat-completions body (`text/event-stream`, as network reads in any
/// split) into model stream events: the deltas as they arrive, then one
/// [`ModelStreamEvent::Finish`] with the assembled turn.
///
/// This is what [`OpenAiCompatible`](super::OpenAiCompatible)'s `stream` runs over the HTTP
/// body; it is public so recorded streams can be replayed and measured without a server.
/// The body's own errors pass through unchanged; the stream ends after the first error.
///
/// # Errors
/// - A cut stream (mid-event, or before a `finish_reason` and `[DONE]`) →
///   [`ModelError::Truncated`], with no `Finish`; so is DeepSeek's
///   `insufficient_system_resource` finish reason.
/// - An error the provider reports mid-stream (`{"error": …}` data, `event: error`, or old
///   llama.cpp's `error:` line) → [`ModelError::Stream`] (status 200, the provider's type
///   and code); see [`OpenAiCompatible::stream`](super::OpenAiCompatible).
/// - Data that is not a `chat.completion.chunk`, or not UTF-8 →
///   [`ModelError::InvalidResponse`].
///
/// ```
/// use futures::StreamExt;
/// use halo_adapters::openai::decode_stream;
/// use halo_core::{FinishReason, ModelStreamEvent};
///
/// let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n\
///             data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
///             data: [DONE]\n\n";
/// let reads = body.as_bytes().chunks(7).map(Ok);
/// let events: Vec<_> = futures::executor::block_on(decode_stream(futures::stream::iter(reads)).collect());
/// assert_eq!(events[0], Ok(ModelStreamEvent::TextDelta("Hi".into())));
/// let Some(Ok(ModelStreamEvent::Finish(turn))) = events.last() else { panic!() };
/// assert_eq!((turn.message.text.as_str(), &turn.finish_reason), ("Hi", &FinishReason::Stop));
/// ```
pub fn decode_stream<'a, S, B>(body: S) -> ModelEventStream<'a>
where
    S: Stream<Item = Result<B, ModelError>> + Send + 'a,
    B: AsRef<[u8]> + Send + 'a,
{
    sse::assemble(body, Assembler::default())
}
