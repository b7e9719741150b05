//! From [`AgentEvent`]s to [`UiMessageChunk`]s and SSE bytes.
//!
//! The mapping, per agent step (see [`docs/stream-protocol.md`] for a full transcript):
//!
//! | agent event | parts |
//! | --- | --- |
//! | (stream begins) | `start` |
//! | `StepStart` | `start-step` |
//! | `ReasoningDelta` | `reasoning-start` (first of a run of deltas), `reasoning-delta` |
//! | `TextDelta` | `text-start` (first of a run of deltas), `text-delta` |
//! | `ToolCallStart` | `tool-input-start` |
//! | `ToolCallDelta` | `tool-input-delta` |
//! | `CacheBust` | `data-halo-cache-bust`, transient (none with [`StreamOptions::with_halo_data`] off) |
//! | `ToolCall` | `tool-input-available` (`tool-input-error` when the arguments are not JSON) |
//! | `ToolResult` | `tool-output-available`, or `tool-output-error` when `is_error` |
//! | `Inner` | `tool-output-available` with `preliminary: true` for the call that runs the agent: its message so far ([`crate::nested`]) |
//! | `Handoff` | `data-halo-handoff`, transient (none with [`StreamOptions::with_halo_data`] off) |
//! | `StepFinish` | `finish-step` |
//! | `Finish` | `finish` with the last step's finish reason |
//! | `Err(_)` | `error`, `finish-step` (if a step is open), `finish` (`"error"`) |
//!
//! A text or reasoning part stays open while deltas of its kind follow each other; any
//! other event closes it (`text-end` / `reasoning-end`) first, so every part is closed and
//! the parts of the assembled message keep the order the model produced them in. Part ids
//! are `text-N` and `reasoning-N`, numbered from 1 per message.
//!
//! A cache bust ([`AgentEvent::CacheBust`], from halo-core's predicted-miss ledger) becomes
//! a transient data part: telemetry for the chat's `onData` callback, not content, so it is
//! never stored in the message's parts (nor sent back to the server with the next request).
//! Its shape is in the docs of [`CACHE_BUST_PART`].
//!
//! [`docs/stream-protocol.md`]: https://github.com/halo-rs/halo/blob/main/docs/stream-protocol.md

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use halo_core::{
    AgentEvent, CacheCheck, CacheVerdict, HaloError, HistoryRewrite, RewriteKind, StepResult,
};
use serde_json::{Map, Value};

use crate::chunk::{DONE_FRAME, DataPart, TextPart, UiFinishReason, UiMessageChunk};
use crate::nested::NestedCalls;

/// The name of the data part sent for each cache bust: the frame is
/// `{"type":"data-halo-cache-bust","data":{..},"transient":true}`, where `data` is
///
/// ```json
/// {"call":2,"cause":"the provider read 0 of about 5000 cacheable tokens although ...",
///  "expectedCachedTokens":5000,"inputTokens":5100,"observedCachedTokens":0}
/// ```
///
/// (keys in alphabetical order). `call`: the agent's model-call number, from 1 over its
/// lifetime. `expectedCachedTokens`: input tokens the request shares with the previous one,
/// so expected to be read from the prompt cache; `observedCachedTokens`: the
/// `cache_read_tokens` the provider reported; `inputTokens`: the call's input tokens. A
/// count the provider did not report is left out. `cause`: the likely cause, for people.
/// Source: halo-core's [`CacheCheck`] (`ledger` module).
pub const CACHE_BUST_PART: &str = "halo-cache-bust";

/// The name of the data part sent for each handoff between agents
/// ([`AgentEvent::Handoff`]): `{"type":"data-halo-handoff","data":{"from":"triage","to":"billing"},"transient":true}`
/// (`from` left out for an agent without a name). Transient, like [`CACHE_BUST_PART`].
pub const HANDOFF_PART: &str = "halo-handoff";

/// The name of the data part sent when the history was rewritten between two steps
/// ([`AgentEvent::HistoryRewritten`]): `{"type":"data-halo-history-rewritten","id":"rewrite-N",
/// "data":{"kind":"strategy","messagesBefore":40,"messagesAfter":12,"description":".."}}`.
/// `kind` is `strategy`, `compaction`, `dropped` or `shortened`; `description` says what was
/// done, for people. Kept in the message, so a UI can show a note where it happened.
pub const HISTORY_REWRITTEN_PART: &str = "halo-history-rewritten";

/// The name of the data part with a step's token counts, sent after its `finish-step` when
/// [`StreamOptions::with_step_usage`] is on: `{"type":"data-halo-step-usage","id":"usage-N",
/// "data":{"step":1,"inputTokens":..,"outputTokens":..,"cacheReadTokens":..,
/// "cacheWriteTokens":..,"cache":"hit"}}`. Counts the provider did not report are left
/// out; `cache` is the ledger's verdict (`cold`, `expected-miss`, `hit`, `bust`,
/// `unreported`).
pub const STEP_USAGE_PART: &str = "halo-step-usage";

/// The `errorText` sent for a failed run unless [`StreamOptions::with_error_text`] says
/// otherwise. Like the AI SDK's default, it hides server details from the browser.
pub const DEFAULT_ERROR_TEXT: &str = "An error occurred.";

type ErrorText = Arc<dyn Fn(&HaloError) -> String + Send + Sync>;

/// Options of [`to_data_stream_with`] and
/// [`create_halo_stream_with`](crate::create_halo_stream_with).
#[derive(Clone)]
#[non_exhaustive]
pub struct StreamOptions {
    message_id: Option<String>,
    send_reasoning: bool,
    send_halo_data: bool,
    send_step_usage: bool,
    denied: Arc<HashSet<String>>,
    error_text: Option<ErrorText>,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            message_id: None,
            send_reasoning: true,
            send_halo_data: true,
            send_step_usage: false,
            denied: Arc::default(),
            error_text: None,
        }
    }
}

impl fmt::Debug for StreamOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamOptions")
            .field("message_id", &self.message_id)
            .field("send_reasoning", &self.send_reasoning)
            .field("send_halo_data", &self.send_halo_data)
            .field("send_step_usage", &self.send_step_usage)
            .field("denied", &self.denied)
            .field("custom_error_text", &self.error_text.is_some())
            .finish()
    }
}

impl StreamOptions {
    /// The defaults: no message id, reasoning and Halo's data parts sent, errors shown as
    /// [`DEFAULT_ERROR_TEXT`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Sends `id` as the `start` part's `messageId` (for clients that persist messages).
    pub fn with_message_id(mut self, id: impl Into<String>) -> Self {
        self.message_id = Some(id.into());
        self
    }

    /// Whether reasoning deltas are sent as `reasoning-*` parts (default `true`).
    pub fn with_reasoning(mut self, send: bool) -> Self {
        self.send_reasoning = send;
        self
    }

    /// Whether Halo's own data parts (`data-halo-*`: [`CACHE_BUST_PART`], [`HANDOFF_PART`]) are sent
    /// (default `true`). They are transient, so a client without an `onData` callback
    /// ignores them; turn them off to keep the telemetry off the wire.
    pub fn with_halo_data(mut self, send: bool) -> Self {
        self.send_halo_data = send;
        self
    }

    /// Whether each step's token counts go out as a [`STEP_USAGE_PART`] data part after its
    /// `finish-step` (default `false`). The part is kept in the message (not transient), so
    /// a UI can show the cache figures of every step.
    pub fn with_step_usage(mut self, send: bool) -> Self {
        self.send_step_usage = send;
        self
    }

    /// The calls someone denied: their error results go out as `tool-output-denied`
    /// instead of `tool-output-error`.
    pub fn with_denied_calls(mut self, ids: impl IntoIterator<Item = String>) -> Self {
        self.denied = Arc::new(ids.into_iter().collect());
        self
    }

    /// Sets the `errorText` of a failed run. The default hides the error
    /// ([`DEFAULT_ERROR_TEXT`]); `|e| e.to_string()` shows Halo's message, which can quote
    /// a provider's error body, so use it only where the client may see that.
    pub fn with_error_text(
        mut self,
        f: impl Fn(&HaloError) -> String + Send + Sync + 'static,
    ) -> Self {
        self.error_text = Some(Arc::new(f));
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Reasoning,
}

/// The state of one message: the open text or reasoning part, part counters, started tool
/// calls and whether a step is open.
struct Encoder {
    options: StreamOptions,
    open: Option<(Kind, String)>,
    text_parts: u64,
    reasoning_parts: u64,
    started_calls: HashSet<String>,
    step_open: bool,
    /// The messages of the agents the calls in flight run ([`crate::nested`]).
    nested: NestedCalls,
    steps: u64,
    steering: u64,
    rewrites: u64,
}

/// What the encoder wants after an event.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Done,
}

impl Encoder {
    fn new(options: StreamOptions) -> Self {
        Self {
            options,
            open: None,
            text_parts: 0,
            reasoning_parts: 0,
            started_calls: HashSet::new(),
            step_open: false,
            nested: NestedCalls::default(),
            steps: 0,
            steering: 0,
            rewrites: 0,
        }
    }

    fn start(&self) -> UiMessageChunk {
        UiMessageChunk::Start {
            message_id: self.options.message_id.clone(),
        }
    }

    fn close_open(&mut self, out: &mut Vec<UiMessageChunk>) {
        match self.open.take() {
            Some((Kind::Text, id)) => out.push(UiMessageChunk::TextEnd { id }),
            Some((Kind::Reasoning, id)) => out.push(UiMessageChunk::ReasoningEnd { id }),
            None => {}
        }
    }

    /// The id of the open part of `kind`, opening one (and closing another kind) if needed.
    fn open_part(&mut self, kind: Kind, out: &mut Vec<UiMessageChunk>) -> String {
        if let Some((open_kind, id)) = &self.open
            && *open_kind == kind
        {
            return id.clone();
        }
        self.close_open(out);
        let id = match kind {
            Kind::Text => {
                self.text_parts += 1;
                format!("text-{}", self.text_parts)
            }
            Kind::Reasoning => {
                self.reasoning_parts += 1;
                format!("reasoning-{}", self.reasoning_parts)
            }
        };
        out.push(match kind {
            Kind::Text => UiMessageChunk::TextStart { id: id.clone() },
            Kind::Reasoning => UiMessageChunk::ReasoningStart { id: id.clone() },
        });
        self.open = Some((kind, id.clone()));
        id
    }

    fn event(&mut self, event: AgentEvent, out: &mut Vec<UiMessageChunk>) -> Flow {
        match event {
            AgentEvent::StepStart { .. } => {
                self.close_open(out);
                self.started_calls.clear();
                self.step_open = true;
                out.push(UiMessageChunk::StartStep);
            }
            AgentEvent::TextDelta(delta) if !delta.is_empty() => {
                let id = self.open_part(Kind::Text, out);
                out.push(UiMessageChunk::TextDelta { id, delta });
            }
            AgentEvent::ReasoningDelta(delta)
                if self.options.send_reasoning && !delta.is_empty() =>
            {
                let id = self.open_part(Kind::Reasoning, out);
                out.push(UiMessageChunk::ReasoningDelta { id, delta });
            }
            AgentEvent::ToolCallStart { id, name } => {
                self.close_open(out);
                self.started_calls.insert(id.clone());
                out.push(UiMessageChunk::ToolInputStart {
                    tool_call_id: id,
                    tool_name: name,
                });
            }
            // The client rejects a delta for a call it was not told about; the complete call
            // (`tool-input-available`) follows either way.
            AgentEvent::ToolCallDelta { id, arguments }
                if self.started_calls.contains(&id) && !arguments.is_empty() =>
            {
                self.close_open(out);
                out.push(UiMessageChunk::ToolInputDelta {
                    tool_call_id: id,
                    input_text_delta: arguments,
                });
            }
            AgentEvent::ToolCall(call) => {
                self.close_open(out);
                out.push(match call.arguments() {
                    Ok(input) => UiMessageChunk::ToolInputAvailable {
                        tool_call_id: call.id.to_string(),
                        tool_name: call.name.to_string(),
                        input,
                    },
                    Err(e) => UiMessageChunk::ToolInputError {
                        error_text: format!("the tool call's arguments are not valid JSON: {e}"),
                        tool_call_id: call.id.to_string(),
                        tool_name: call.name.to_string(),
                        input: Value::String(call.raw_arguments.to_string()),
                    },
                });
            }
            AgentEvent::CacheBust(check) if self.options.send_halo_data => {
                self.close_open(out);
                out.push(UiMessageChunk::Data(
                    DataPart::new(CACHE_BUST_PART, cache_bust_data(&check)).transient(),
                ));
            }
            AgentEvent::ToolResult(result) => {
                self.close_open(out);
                self.nested.finish(&result.tool_call_id);
                out.push(
                    if result.is_error && self.options.denied.contains(result.tool_call_id.as_str())
                    {
                        UiMessageChunk::ToolOutputDenied {
                            tool_call_id: result.tool_call_id.to_string(),
                        }
                    } else if result.is_error {
                        UiMessageChunk::ToolOutputError {
                            tool_call_id: result.tool_call_id.to_string(),
                            error_text: result.content.to_string(),
                        }
                    } else {
                        UiMessageChunk::ToolOutputAvailable {
                            tool_call_id: result.tool_call_id.to_string(),
                            output: Value::String(result.content.to_string()),
                            preliminary: false,
                        }
                    },
                );
            }
            AgentEvent::Inner(inner) => {
                if let Some((tool_call_id, output)) = self.nested.apply(&inner) {
                    self.close_open(out);
                    out.push(UiMessageChunk::ToolOutputAvailable {
                        tool_call_id,
                        output,
                        preliminary: true,
                    });
                }
            }
            AgentEvent::Handoff { from, to } if self.options.send_halo_data => {
                self.close_open(out);
                let mut data = Map::new();
                if let Some(from) = from {
                    data.insert("from".into(), from.into());
                }
                data.insert("to".into(), to.into());
                out.push(UiMessageChunk::Data(
                    DataPart::new(HANDOFF_PART, Value::Object(data)).transient(),
                ));
            }
            AgentEvent::StepFinish(step) => {
                self.close_open(out);
                self.step_open = false;
                self.steps += 1;
                out.push(UiMessageChunk::FinishStep);
                if self.options.send_step_usage {
                    out.push(UiMessageChunk::Data(
                        DataPart::new(STEP_USAGE_PART, step_usage_data(self.steps, &step))
                            .with_id(format!("usage-{}", self.steps)),
                    ));
                }
            }
            AgentEvent::Injected(text) => {
                self.close_open(out);
                self.steering += 1;
                out.push(UiMessageChunk::SteeringMessage {
                    id: format!("steering-{}", self.steering),
                    parts: vec![TextPart { text }],
                });
            }
            AgentEvent::HistoryRewritten(rewrite) if self.options.send_halo_data => {
                self.close_open(out);
                self.rewrites += 1;
                out.push(UiMessageChunk::Data(
                    DataPart::new(HISTORY_REWRITTEN_PART, rewrite_data(&rewrite))
                        .with_id(format!("rewrite-{}", self.rewrites)),
                ));
            }
            AgentEvent::Finish(result) => {
                self.close_open(out);
                // A paused run: its calls wait for approvals or for the caller's results.
                let paused =
                    !result.pending_approvals.is_empty() || !result.pending_tool_calls.is_empty();
                for pending in &result.pending_approvals {
                    out.push(UiMessageChunk::ToolApprovalRequest {
                        approval_id: pending.call.id.to_string(),
                        tool_call_id: pending.call.id.to_string(),
                        reason: Some(pending.reason.clone()).filter(|r| !r.is_empty()),
                    });
                }
                if self.step_open {
                    self.step_open = false;
                    out.push(UiMessageChunk::FinishStep);
                }
                out.push(UiMessageChunk::Finish {
                    finish_reason: if paused {
                        Some(UiFinishReason::ToolCalls)
                    } else {
                        result.finish_reason().map(UiFinishReason::from)
                    },
                });
                return Flow::Done;
            }
            // Empty or unannounced deltas, dropped reasoning or Halo data, and events added
            // to halo-core later: no part.
            _ => {}
        }
        Flow::Continue
    }

    /// Ends the message after a failure: closes what is open, then `error` and `finish`.
    fn fail(&mut self, error_text: String, out: &mut Vec<UiMessageChunk>) {
        self.close_open(out);
        out.push(UiMessageChunk::Error { error_text });
        if self.step_open {
            self.step_open = false;
            out.push(UiMessageChunk::FinishStep);
        }
        out.push(UiMessageChunk::Finish {
            finish_reason: Some(UiFinishReason::Error),
        });
    }

    fn error_text(&self, error: &HaloError) -> String {
        match &self.options.error_text {
            Some(f) => f(error),
            None => DEFAULT_ERROR_TEXT.to_owned(),
        }
    }
}

/// The `data` of a [`CACHE_BUST_PART`] part (shape in its docs).
fn cache_bust_data(check: &CacheCheck) -> Value {
    let mut data = Map::new();
    data.insert("call".into(), check.call.into());
    let counts = [
        ("expectedCachedTokens", check.expected_cached_tokens),
        ("observedCachedTokens", check.observed_cached_tokens),
        ("inputTokens", check.input_tokens),
    ];
    for (key, count) in counts {
        if let Some(count) = count {
            data.insert(key.into(), count.into());
        }
    }
    if let CacheVerdict::Bust { cause } = &check.verdict {
        data.insert("cause".into(), cause.clone().into());
    }
    Value::Object(data)
}

/// The `data` of a [`HISTORY_REWRITTEN_PART`] part (shape in its docs).
fn rewrite_data(rewrite: &HistoryRewrite) -> Value {
    let kind = match rewrite.kind {
        RewriteKind::Strategy => "strategy",
        RewriteKind::Compaction => "compaction",
        RewriteKind::Dropped => "dropped",
        RewriteKind::Shortened => "shortened",
        _ => "other",
    };
    serde_json::json!({
        "kind": kind,
        "messagesBefore": rewrite.messages_before,
        "messagesAfter": rewrite.messages_after,
        "description": rewrite.description,
    })
}

/// The `data` of a [`STEP_USAGE_PART`] part (shape in its docs).
fn step_usage_data(step: u64, result: &StepResult) -> Value {
    let mut data = Map::new();
    data.insert("step".into(), step.into());
    let usage = &result.usage;
    let counts = [
        ("inputTokens", usage.input_tokens),
        ("outputTokens", usage.output_tokens),
        ("cacheReadTokens", usage.cache_read_tokens),
        ("cacheWriteTokens", usage.cache_write_tokens),
    ];
    for (key, count) in counts {
        if let Some(count) = count {
            data.insert(key.into(), count.into());
        }
    }
    let verdict = match &result.cache.verdict {
        CacheVerdict::Cold => "cold",
        CacheVerdict::ExpectedMiss => "expected-miss",
        CacheVerdict::Hit => "hit",
        CacheVerdict::Bust { .. } => "bust",
        CacheVerdict::Unreported => "unreported",
    };
    data.insert("cache".into(), verdict.into());
    Value::Object(data)
}

/// The agent's events as UI Message Stream parts, with the default [`StreamOptions`]
/// (no SSE framing, no `[DONE]`; for transports other than SSE).
///
/// The stream starts with `start` and ends with `finish`: after [`AgentEvent::Finish`],
/// after an `Err` item (then `error` comes first and the events stream is not polled again),
/// or when the events end without `Finish` (reported as an error too).
pub fn to_ui_message_chunks<S>(
    events: S,
    options: StreamOptions,
) -> impl Stream<Item = UiMessageChunk> + Send
where
    S: Stream<Item = Result<AgentEvent, HaloError>> + Send,
{
    async_stream::stream! {
        let mut encoder = Encoder::new(options);
        yield encoder.start();
        let mut events = std::pin::pin!(events);
        let mut out = Vec::new();
        let mut finished = false;
        while let Some(item) = events.next().await {
            let flow = match item {
                Ok(event) => encoder.event(event, &mut out),
                Err(error) => {
                    let text = encoder.error_text(&error);
                    encoder.fail(text, &mut out);
                    Flow::Done
                }
            };
            for chunk in out.drain(..) {
                yield chunk;
            }
            if flow == Flow::Done {
                finished = true;
                break;
            }
        }
        if !finished {
            encoder.fail("the agent's event stream ended before the run finished".into(), &mut out);
            for chunk in out.drain(..) {
                yield chunk;
            }
        }
    }
}

/// The agent's events as the UI Message Stream protocol v1: SSE frames `data: {json}\n\n`,
/// one per part, ending with `data: [DONE]\n\n`. Serve them with
/// [`UI_MESSAGE_STREAM_HEADERS`](crate::UI_MESSAGE_STREAM_HEADERS).
///
/// Each item is one whole frame (UTF-8). The stream always ends properly: a failed run
/// (an `Err` item, or events that stop before [`AgentEvent::Finish`]) ends with an `error`
/// part whose text is [`DEFAULT_ERROR_TEXT`], a `finish` part with `"finishReason":"error"`,
/// and `[DONE]`. Protocol source: the `ai` npm package, `uiMessageChunkSchema` and
/// `JsonToSseTransformStream`; the frames are listed in [`docs/stream-protocol.md`].
///
/// [`docs/stream-protocol.md`]: https://github.com/halo-rs/halo/blob/main/docs/stream-protocol.md
///
/// ```
/// use futures::StreamExt;
/// use halo_core::{HaloAgent, testing::ScriptedModel};
///
/// # futures::executor::block_on(async {
/// let mut agent = HaloAgent::builder(ScriptedModel::new().text("Hi!")).build();
/// let frames: Vec<_> = halo_stream::to_data_stream(agent.stream_text("Hello")).collect().await;
/// let body = String::from_utf8(frames.concat()).unwrap();
/// assert!(body.starts_with("data: {\"type\":\"start\"}\n\ndata: {\"type\":\"start-step\"}\n\n"));
/// assert!(body.contains("data: {\"type\":\"text-delta\",\"id\":\"text-1\",\"delta\":\"Hi!\"}\n\n"));
/// assert!(body.ends_with("data: {\"type\":\"finish\",\"finishReason\":\"stop\"}\n\ndata: [DONE]\n\n"));
/// # });
/// ```
pub fn to_data_stream<S>(events: S) -> impl Stream<Item = Bytes> + Send
where
    S: Stream<Item = Result<AgentEvent, HaloError>> + Send,
{
    to_data_stream_with(events, StreamOptions::default())
}

/// [`to_data_stream`] with options (message id, reasoning, Halo's data parts, error text).
pub fn to_data_stream_with<S>(events: S, options: StreamOptions) -> impl Stream<Item = Bytes> + Send
where
    S: Stream<Item = Result<AgentEvent, HaloError>> + Send,
{
    to_ui_message_chunks(events, options)
        .map(|chunk| chunk.to_sse_frame())
        .chain(futures::stream::once(async {
            Bytes::from_static(DONE_FRAME)
        }))
}
