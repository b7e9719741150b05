//! Streaming `streamGenerateContent?alt=sse`: each server-sent event's data is one
//! `GenerateContentResponse` chunk, read by the same [`Assembler`] as a whole response.
//!
//! What differs from OpenAI's stream
//! (<https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent>,
//! <https://ai.google.dev/gemini-api/docs/function-calling>):
//! - There is no `[DONE]`: the body simply ends (a gateway's `[DONE]` is accepted and
//!   ends the turn). Events are framed with CRLF.
//! - Text and thought parts arrive as deltas; a `functionCall` arrives whole inside one
//!   chunk, so each call is one [`ModelStreamEvent::ToolCallStart`] and one
//!   [`ModelStreamEvent::ToolCallDelta`] with the complete arguments.
//! - `finishReason` is on the last chunk (newer models send the calls in one chunk and
//!   `STOP` with usage in a later one, so "a call was seen" is remembered across chunks).
//! - `usageMetadata` may be on every chunk, cumulative; the last one wins.
//! - Parts carry no index: calls keep the order of their parts, chunk after chunk, which
//!   is the order the model produced them in.
//! - A body that ends before any chunk with a `finishReason` was cut:
//!   [`ModelError::Truncated`], and none of its tool calls is returned.

use futures::{Stream, StreamExt as _};
use halo_core::{ModelError, ModelEventStream, ModelStreamEvent};
use serde_json::Value;

use super::response::{Assembler, CallIdSource, GenerateResponse};
use crate::sse;
use crate::transport::text::body_excerpt;

/// Decodes a streamed `streamGenerateContent?alt=sse` body (as network reads in any
/// split) into model stream events: text and reasoning deltas as they arrive, each
/// function call whole, then one [`ModelStreamEvent::Finish`] with the assembled turn.
///
/// This is what [`GeminiAdapter`](super::GeminiAdapter)'s `stream` runs over the HTTP body;
/// it is public so recorded streams can be replayed without a server. Calls without an id
/// are numbered from `gemini-call-0` within this stream.
///
/// # Errors
/// - The body ending mid-event, or before a chunk with a `finishReason` →
///   [`ModelError::Truncated`], with no `Finish`.
/// - An `{"error": …}` chunk → [`ModelError::Stream`]: status 200, its `status` and `code`
///   kept; retryable when they name a 429 or 5xx.
/// - Data that is not a `GenerateContentResponse`, or not UTF-8 →
///   [`ModelError::InvalidResponse`].
///
/// ```
/// use futures::StreamExt;
/// use halo_adapters::gemini::decode_stream;
/// use halo_core::{FinishReason, ModelStreamEvent};
///
/// let body = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hi\"}]}}]}\r\n\r\n\
///             data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":\"ls\",\"args\":{}}}]},\"finishReason\":\"STOP\"}]}\r\n\r\n";
/// let reads = body.as_bytes().chunks(9).map(Ok);
/// let events: Vec<_> = futures::executor::block_on(decode_stream(futures::stream::iter(reads)).collect());
/// assert_eq!(events[0], Ok(ModelStreamEvent::TextDelta("Hi".into())));
/// let Some(Ok(ModelStreamEvent::Finish(turn))) = events.last() else { panic!() };
/// assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
/// assert_eq!(turn.message.tool_calls[0].id, "gemini-call-0");
/// ```
pub fn decode_stream<'a, S, B>(body: S) -> ModelEventStream<'a>
where
    S: Stream<Item = Result<B, ModelError>> + Send + 'a,
    B: AsRef<[u8]> + Send + 'a,
{
    decode(body, CallIdSource::default(), None)
}

/// [`decode_stream`] with the adapter's call-id source and API key (for redaction).
pub(crate) fn decode<'a, S, B>(
    body: S,
    ids: CallIdSource,
    secret: Option<&'a str>,
) -> ModelEventStream<'a>
where
    S: Stream<Item = Result<B, ModelError>> + Send + 'a,
    B: AsRef<[u8]> + Send + 'a,
{
    let mut events = sse::decode(Box::pin(body));
    Box::pin(async_stream::stream! {
        let mut assembler = Assembler::new(ids);
        let mut out = Vec::new();
        while let Some(event) = events.next().await {
            let step = event.and_then(|e| {
                let data = e.data.trim();
                if e.event == "error" {
                    let payload = serde_json::from_str::<Value>(data)
                        .unwrap_or_else(|_| Value::String(data.to_string()));
                    return Err(super::error::in_stream(&payload, secret));
                }
                if data.is_empty() {
                    return Ok(false);
                }
                if data == "[DONE]" {
                    return Ok(true);
                }
                let chunk: GenerateResponse = serde_json::from_str(data).map_err(|err| {
                    ModelError::InvalidResponse(format!(
                        "a stream event is not a GenerateContentResponse ({err}): {}",
                        body_excerpt(data.as_bytes())
                    ))
                })?;
                assembler.push(chunk, &mut out, secret).map(|()| false)
            });
            for delta in out.drain(..) {
                yield Ok(delta);
            }
            match step {
                Ok(false) => {}
                Ok(true) => break,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            }
        }
        yield assembler.finish(true).map(ModelStreamEvent::Finish);
    })
}
