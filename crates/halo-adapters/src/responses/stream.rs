//! Reading a streamed Responses answer (`stream: true`): its typed events into deltas and
//! the assembled turn.
//!
//! Events (openai-python `response_stream_event.py`; each is `event: <type>` with a JSON
//! `data` whose `type` is the same):
//! - `response.output_item.added` of a `function_call`: the call starts (its `call_id`
//!   and name); `response.function_call_arguments.delta`: a piece of its arguments;
//! - `response.output_text.delta`: a piece of text; `response.reasoning_summary_text.delta`:
//!   a piece of a reasoning summary (a blank line between two summary parts);
//! - `response.output_item.done`: an item complete. The turn is built from these, not from
//!   `.added`: a reasoning item's `encrypted_content` there "may be incomplete" (the
//!   `ResponseReasoningItem` docs); they are replayed verbatim on later turns;
//! - `response.completed` / `response.incomplete`: the end, with usage and status;
//!   `response.failed` and `error`: the provider's error, as [`ModelError::Stream`];
//! - anything else (`response.created`, `.in_progress`, content-part events…) is skipped.
//!
//! The turn equals what a unary call returns for the same output. A stream that ends
//! before `response.completed` or `.incomplete` is [`ModelError::Truncated`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use futures::Stream;
use halo_core::{ModelError, ModelEventStream, ModelResponse, ModelStreamEvent};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::Chain;
use super::response::{SUMMARY_SEPARATOR, WireResponse, failure, turn};
use crate::sse::{self, Assemble, SseEvent};
use crate::transport::text::body_excerpt;

/// What the assembler reads of an event.
#[derive(Debug, Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    item_id: Option<String>,
    #[serde(default)]
    output_index: Option<usize>,
    #[serde(default)]
    summary_index: Option<usize>,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default, borrow)]
    item: Option<&'a RawValue>,
    #[serde(default, borrow)]
    response: Option<&'a RawValue>,
}

/// The head of an added item.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct AddedItem {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    call_id: Option<String>,
    name: Option<String>,
}

/// How the stream ended.
#[derive(Debug)]
struct Ended {
    status: Option<String>,
    incomplete: Option<String>,
    usage: halo_core::Usage,
    model: Option<String>,
    /// The response's `id`.
    id: Option<String>,
    /// The final response's own output, for a server that sent no `.done` items.
    output: Vec<String>,
}

/// Reads one streamed turn.
pub(crate) struct Assembler {
    /// Complete items by their place in the output, as sent.
    items: BTreeMap<usize, String>,
    /// Function-call item ids → their number in this stream.
    calls: HashMap<String, usize>,
    summaries: HashSet<(String, usize)>,
    ended: Option<Ended>,
    secret: Option<String>,
    /// Where the response id goes (chaining with `previous_response_id`).
    chain: Option<Arc<Mutex<Chain>>>,
}

impl Assembler {
    pub(crate) fn new(secret: Option<&str>, chain: Option<Arc<Mutex<Chain>>>) -> Self {
        Assembler {
            items: BTreeMap::new(),
            calls: HashMap::new(),
            summaries: HashSet::new(),
            ended: None,
            secret: secret.map(str::to_owned),
            chain,
        }
    }

    fn end(&mut self, response: &RawValue) -> Result<(), ModelError> {
        let wire: WireResponse<'_> = serde_json::from_str(response.get()).map_err(|e| {
            ModelError::InvalidResponse(format!(
                "the final event's response is not a Responses object ({e})"
            ))
        })?;
        if let (Some(chain), Some(id)) = (&self.chain, &wire.id) {
            chain
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .answered(id);
        }
        let head: EndHead = serde_json::from_str(response.get()).unwrap_or_default();
        self.ended = Some(Ended {
            status: head.status,
            incomplete: head.incomplete_details.and_then(|d| d.reason),
            usage: wire
                .usage
                .as_ref()
                .map(super::response::WireUsage::normalize)
                .unwrap_or_default(),
            model: head.model,
            id: wire.id.clone(),
            output: head.output.iter().map(|raw| raw.get().to_owned()).collect(),
        });
        Ok(())
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct EndHead {
    status: Option<String>,
    incomplete_details: Option<EndIncomplete>,
    model: Option<String>,
    output: Vec<Box<RawValue>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct EndIncomplete {
    reason: Option<String>,
}

impl Assemble for Assembler {
    fn is_done(&self) -> bool {
        self.ended.is_some()
    }

    fn push(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<ModelStreamEvent>,
    ) -> Result<(), ModelError> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let parsed: Event<'_> = serde_json::from_str(data).map_err(|e| {
            ModelError::InvalidResponse(format!(
                "a stream event is not a Responses event ({e}): {}",
                body_excerpt(data.as_bytes())
            ))
        })?;
        let kind = if parsed.kind.is_empty() {
            event.event.as_str()
        } else {
            parsed.kind.as_str()
        };
        match kind {
            "response.output_item.added" => {
                let Some(item) = parsed.item else {
                    return Ok(());
                };
                let head: AddedItem = serde_json::from_str(item.get()).unwrap_or_default();
                if head.kind == "function_call"
                    && let (Some(call_id), Some(name)) = (head.call_id, head.name)
                {
                    let index = self.calls.len();
                    self.calls.insert(head.id.unwrap_or_default(), index);
                    out.push(ModelStreamEvent::ToolCallStart {
                        index,
                        id: call_id,
                        name,
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                let index = parsed
                    .item_id
                    .as_ref()
                    .and_then(|id| self.calls.get(id))
                    .copied();
                if let (Some(index), Some(delta)) = (index, parsed.delta) {
                    out.push(ModelStreamEvent::ToolCallDelta {
                        index,
                        arguments: delta,
                    });
                }
            }
            "response.output_text.delta" => {
                if let Some(delta) = parsed.delta.filter(|d| !d.is_empty()) {
                    out.push(ModelStreamEvent::TextDelta(delta));
                }
            }
            "response.reasoning_summary_text.delta" => {
                let part = (
                    parsed.item_id.unwrap_or_default(),
                    parsed.summary_index.unwrap_or(0),
                );
                if part.1 > 0 && self.summaries.insert(part) {
                    out.push(ModelStreamEvent::ReasoningDelta(SUMMARY_SEPARATOR.into()));
                }
                if let Some(delta) = parsed.delta.filter(|d| !d.is_empty()) {
                    out.push(ModelStreamEvent::ReasoningDelta(delta));
                }
            }
            "response.output_item.done" => {
                if let (Some(index), Some(item)) = (parsed.output_index, parsed.item) {
                    self.items.insert(index, item.get().to_owned());
                }
            }
            "response.completed" | "response.incomplete" => {
                if let Some(response) = parsed.response {
                    self.end(response)?;
                }
            }
            "response.failed" => {
                let error = parsed
                    .response
                    .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
                    .and_then(|r| r.get("error").cloned())
                    .filter(|e| !e.is_null())
                    .unwrap_or_else(|| serde_json::json!({"message": "the response failed"}));
                return Err(failure(&error, self.secret.as_deref()));
            }
            "error" => {
                let mut payload: Value =
                    serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.into()));
                if let Some(map) = payload.as_object_mut() {
                    // The event's own type, not the error's.
                    map.remove("type");
                    map.remove("sequence_number");
                }
                return Err(failure(&payload, self.secret.as_deref()));
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(self) -> Result<ModelResponse, ModelError> {
        let Some(ended) = self.ended else {
            return Err(ModelError::Truncated(
                "the stream ended before response.completed".into(),
            ));
        };
        let from_done: Vec<(usize, &str)> = self
            .items
            .iter()
            .map(|(i, raw)| (*i, raw.as_str()))
            .collect();
        let items = if from_done.is_empty() {
            ended
                .output
                .iter()
                .enumerate()
                .map(|(i, raw)| (i, raw.as_str()))
                .collect()
        } else {
            from_done
        };
        let mut response = turn(
            &items,
            ended.status.as_deref(),
            ended.incomplete.as_deref(),
            ended.usage,
            ended.model,
        )?;
        response.id = ended.id;
        Ok(response)
    }
}

/// Decodes a Responses event stream into deltas and the assembled turn.
///
/// ```
/// use futures::StreamExt;
/// use halo_adapters::responses::decode_stream;
/// use halo_core::{FinishReason, ModelStreamEvent};
///
/// let body = concat!(
///     "event: response.output_text.delta\n",
///     "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\"Hi\"}\n\n",
///     "event: response.output_item.done\n",
///     "data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\"}]}}\n\n",
///     "event: response.completed\n",
///     "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
/// );
/// let reads = body.as_bytes().chunks(7).map(Ok);
/// let events: Vec<_> = futures::executor::block_on(decode_stream(futures::stream::iter(reads)).collect());
/// assert_eq!(events[0], Ok(ModelStreamEvent::TextDelta("Hi".into())));
/// let Some(Ok(ModelStreamEvent::Finish(turn))) = events.last() else { panic!() };
/// assert_eq!((turn.message.text.as_str(), turn.finish_reason.clone()), ("Hi", FinishReason::Stop));
/// assert_eq!(turn.usage.input_tokens, Some(9));
/// ```
pub fn decode_stream<'a, S, B>(body: S) -> ModelEventStream<'a>
where
    S: Stream<Item = Result<B, ModelError>> + Send + 'a,
    B: AsRef<[u8]> + Send + 'a,
{
    sse::assemble(body, Assembler::new(None, None))
}
