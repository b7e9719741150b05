//! What a 2xx answer to a streaming request holds, read before any event is decoded: an
//! event stream, one JSON body (a server that ignored `stream: true`, or answered with an
//! error object), or something else entirely (a proxy's HTML page). Only the first is
//! decoded as events; the second is parsed as the dialect's unary answer; the third is an
//! error that says what the server sent, never a "cut stream, try again".
//!
//! The content type decides; a missing or unfamiliar one is settled by the body's first
//! bytes (`<` for markup, `{` or `[` for JSON, anything else read as events).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt as _};
use halo_core::ModelError;
use reqwest::header::CONTENT_TYPE;

use super::exchange::{ByteStream, Transport};
use super::text::{body_excerpt, redact};

/// The most bytes of a non-event-stream body read for its excerpt (its first KiBs say what
/// it is; a proxy's page can be large).
const SNIFF_LIMIT: usize = 64 * 1024;

/// What a 2xx answer to a streaming request turned out to be.
pub(crate) enum Opened {
    /// An event stream, from its first byte.
    Events(ByteStream),
    /// One JSON body; `what` names the answer for the error should it not parse
    /// ([`not_an_event_stream`]).
    Json { body: Bytes, what: Sent },
    /// Neither: the error naming what was sent.
    Failed(ModelError),
}

/// What a server sent instead of an event stream: status, content type, URL (for the
/// message).
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    status: u16,
    content_type: Option<String>,
    url: reqwest::Url,
}

/// Reads enough of `response` to tell an event stream from a JSON body or anything else.
pub(crate) async fn open(transport: &Transport, response: reqwest::Response) -> Opened {
    let sent = Sent {
        status: response.status().as_u16(),
        content_type: response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_string()),
        url: response.url().clone(),
    };
    let essence = sent
        .content_type
        .as_deref()
        .map(|ct| {
            ct.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    if essence == "text/event-stream" {
        return Opened::Events(transport.body_stream(response));
    }
    let json = essence == "application/json" || essence.ends_with("+json");
    let mut body = transport.body_stream(response);
    // The first bytes that are not whitespace (a keep-alive blank line is whitespace).
    let mut head = BytesMut::new();
    while head.iter().all(u8::is_ascii_whitespace) {
        match body.next().await {
            Some(Ok(read)) => head.extend_from_slice(&read),
            Some(Err(e)) => return Opened::Failed(e),
            None => break,
        }
    }
    let first = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    let markup = !json && (essence == "text/html" || first == Some(b'<'));
    let whole_json = json || (!markup && matches!(first, Some(b'{' | b'[')));
    if !markup && !whole_json {
        // An event stream under another name (or none): decode it from its first byte.
        let head = head.freeze();
        return Opened::Events(Box::pin(
            futures::stream::once(async move { Ok(head) }).chain(body),
        ));
    }
    let limit = if whole_json { usize::MAX } else { SNIFF_LIMIT };
    while head.len() < limit {
        match body.next().await {
            Some(Ok(read)) => head.extend_from_slice(&read),
            Some(Err(e)) => return Opened::Failed(e),
            None => break,
        }
    }
    let body = head.freeze();
    if whole_json {
        Opened::Json { body, what: sent }
    } else {
        Opened::Failed(not_an_event_stream(&sent, &body, transport.secret()))
    }
}

/// [`ModelError::InvalidResponse`] for a streaming request answered with something other
/// than an event stream, naming the status, the content type and the URL, with a one-line
/// excerpt of the body: `` `http://127.0.0.1:8080/v1/chat/completions` answered a
/// streaming request with HTTP 200, content type `text/html`, not an event stream:
/// Maintenance We are back soon; check that the base URL points at the provider's API``.
/// Not retryable: the same URL answers the same way.
pub(crate) fn not_an_event_stream(sent: &Sent, body: &[u8], secret: Option<&str>) -> ModelError {
    let content_type = match &sent.content_type {
        Some(ct) => format!("content type `{ct}`"),
        None => "no content type".to_string(),
    };
    let text = format!(
        "`{}` answered a streaming request with HTTP {}, {content_type}, not an event \
         stream: {}; check that the base URL points at the provider's API and that it \
         streams",
        sent.url,
        sent.status,
        body_excerpt(body),
    );
    ModelError::InvalidResponse(redact(text, secret))
}

/// The first item of `events`, waiting at most `limit` when there is one.
///
/// # Errors
/// The limit itself when no item came within it.
pub(crate) async fn first_event<S>(
    events: &mut S,
    limit: Option<Duration>,
) -> Result<Option<S::Item>, Duration>
where
    S: Stream + Unpin,
{
    match limit {
        Some(limit) => tokio::time::timeout(limit, events.next())
            .await
            .map_err(|_| limit),
        None => Ok(events.next().await),
    }
}
