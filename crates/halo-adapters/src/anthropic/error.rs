//! Anthropic's failures mapped to [`ModelError`]: HTTP statuses, the
//! `{"type":"error","error":{"type","message"}}` body, and `error` events mid-stream.
//!
//! Source: <https://platform.claude.com/docs/en/api/errors>. The
//! excerpting, `retry-after` parsing and key redaction are the OpenAI-compatible adapter's
//! ([`crate::openai`]), shared.

use std::time::SystemTime;

use halo_core::{InvalidRequestKind, ModelError};
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::openai::error::error_value_message;
use crate::transport::text::{
    body_excerpt, error_field, redact, retry_after, stream_error, truncate,
};

/// Maps a non-2xx answer to a typed error.
///
/// - 400 `invalid_request_error`, 404 `not_found_error` (an unknown model or a wrong base
///   URL; the adapter adds the full URL and what to check to the message), 413
///   `request_too_large` → [`ModelError::InvalidRequest`] with that status: the request
///   itself must change. Its kind is read from the message by [`invalid_request_kind`].
/// - 401 `authentication_error`, 403 `permission_error` → [`ModelError::Authentication`].
/// - 402 `billing_error` → [`ModelError::InsufficientBalance`].
/// - 429 `rate_limit_error` → [`ModelError::RateLimited`] with the `retry-after` delay.
/// - 500 `api_error`, 502, 503, 504 `timeout_error`, 529 `overloaded_error` →
///   [`ModelError::Server`] (retryable) with the `retry-after` delay.
/// - anything else (409 `conflict_error`, …) → [`ModelError::Http`].
///
/// The message is the body's `error.message` with its `error.type`, or a one-line excerpt
/// of the body (an HTML page's text), at most [`MAX_EXCERPT_BYTES`](crate::openai::MAX_EXCERPT_BYTES), with `secret`
/// replaced by `[redacted]` before anything is cut.
pub(crate) fn from_status(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    secret: Option<&str>,
) -> ModelError {
    let text = redact(String::from_utf8_lossy(body).into_owned(), secret);
    let message = message_of(&text);
    match status {
        400 | 404 | 413 | 422 => ModelError::InvalidRequest {
            status,
            kind: error_of(&text).map_or(InvalidRequestKind::Other, |e| {
                invalid_request_kind(&error_field(&e, "message").unwrap_or_default())
            }),
            message,
        },
        401 | 403 => ModelError::Authentication { status, message },
        402 => ModelError::InsufficientBalance { status, message },
        429 => ModelError::RateLimited {
            retry_after: retry_after(headers, SystemTime::now()),
            message,
        },
        500 | 502 | 503 | 504 | 529 => ModelError::Server {
            status,
            retry_after: retry_after(headers, SystemTime::now()),
            message,
        },
        _ => ModelError::Http { status, message },
    }
}

/// The message of an (already redacted) error body: `error.message (type …)` of
/// Anthropic's shape, else a bounded excerpt.
fn message_of(text: &str) -> String {
    error_of(text)
        .as_ref()
        .and_then(error_value_message)
        .unwrap_or_else(|| body_excerpt(text.as_bytes()))
}

/// The `error` object of a body or event in Anthropic's shape
/// (`{"type":"error","error":{"type","message"}}`).
fn error_of(text: &str) -> Option<Value> {
    let mut parsed: Value = serde_json::from_str(text).ok()?;
    parsed
        .get_mut("error")
        .map(Value::take)
        .filter(Value::is_object)
}

/// What an invalid request was rejected for, read from Anthropic's `error.message`
/// (<https://platform.claude.com/docs/en/api/errors>; the wordings are the API's, as
/// reported verbatim in public issues):
///
/// - [`InvalidRequestKind::ContextWindowExceeded`]: `prompt is too long: 208310 tokens >
///   200000 maximum`, and `input length and `max_tokens` exceed context limit: 199759 +
///   8192 > 200000, decrease input length or `max_tokens` and try again`
///   (<https://platform.claude.com/docs/en/build-with-claude/context-windows>).
/// - [`InvalidRequestKind::ReasoningReplayMissing`]: `messages.1.content.0.type: Expected
///   `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled, a
///   final `assistant` message must start with a thinking block…`
///   (<https://platform.claude.com/docs/en/build-with-claude/extended-thinking>), and the
///   DeepSeek Anthropic-format endpoint's `content[].thinking in the thinking mode must be
///   passed back to the API.` (<https://api-docs.deepseek.com/guides/thinking_mode>).
/// - [`InvalidRequestKind::ToolSchemaRejected`]: `tools.12.custom.input_schema: JSON
///   schema is invalid. It must match JSON Schema draft 2020-12…`.
/// - anything else: [`InvalidRequestKind::Other`].
pub(crate) fn invalid_request_kind(message: &str) -> InvalidRequestKind {
    let m = message.to_ascii_lowercase();
    if m.starts_with("prompt is too long") || m.contains("exceed context limit") {
        InvalidRequestKind::ContextWindowExceeded
    } else if m.contains("must start with a thinking block")
        || m.contains("expected `thinking` or `redacted_thinking`")
        || m.contains("thinking mode must be passed back")
    {
        InvalidRequestKind::ReasoningReplayMissing
    } else if m.contains("input_schema") && m.contains("schema is invalid") {
        InvalidRequestKind::ToolSchemaRejected
    } else {
        InvalidRequestKind::Other
    }
}

/// The HTTP status Anthropic pairs with an error `type`.
fn status_for_type(error_type: &str) -> Option<u16> {
    Some(match error_type {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => return None,
    })
}

/// Maps an `error` event of a 200 stream
/// (<https://platform.claude.com/docs/en/build-with-claude/streaming#error-events>:
/// `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, which
/// replaces an HTTP 529 when the overload starts mid-stream) to [`ModelError::Stream`]:
/// status 200, `error.type` kept as the provider type (Anthropic sends no code), its policy
/// that of the status Anthropic pairs with the type: `overloaded_error`, `rate_limit_error`,
/// `api_error`, `timeout_error` retryable; `invalid_request_error` an invalid request with
/// the kind its message names; an unknown type neither.
pub(crate) fn in_stream(data: &str, secret: Option<&str>) -> ModelError {
    let text = redact(data.to_string(), secret);
    let error = error_of(&text);
    let provider_type = error.as_ref().and_then(|e| error_field(e, "type"));
    let status = provider_type.as_deref().and_then(status_for_type);
    let full = error.as_ref().and_then(|e| error_field(e, "message"));
    let message = full
        .as_deref()
        .map(truncate)
        .unwrap_or_else(|| body_excerpt(text.as_bytes()));
    stream_error(
        provider_type,
        error.as_ref().and_then(|e| error_field(e, "code")),
        status,
        invalid_request_kind(full.as_deref().unwrap_or_default()),
        message,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_typed_errors() {
        let body = br#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"},"request_id":"req_1"}"#;
        let e = from_status(404, &HeaderMap::new(), body, None);
        assert_eq!(
            e,
            ModelError::InvalidRequest {
                status: 404,
                kind: InvalidRequestKind::Other,
                message: "model: claude-x (type not_found_error)".into()
            }
        );
        let e = from_status(529, &HeaderMap::new(), b"<html>busy</html>", None);
        assert!(e.is_retryable());
        assert_eq!(e.status(), Some(529));
        assert_eq!(e.to_string(), "provider error (HTTP 529): busy");
        let e = from_status(402, &HeaderMap::new(), b"{}", None);
        assert!(matches!(e, ModelError::InsufficientBalance { .. }));
        assert!(matches!(
            from_status(409, &HeaderMap::new(), b"", None),
            ModelError::Http { status: 409, .. }
        ));
    }

    #[test]
    fn stream_errors_keep_status_200_and_their_type_and_are_redacted() {
        let e = in_stream(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            None,
        );
        assert_eq!(
            e,
            ModelError::Stream {
                provider_type: Some("overloaded_error".into()),
                code: None,
                invalid_request: None,
                retryable: true,
                message: "Overloaded".into(),
            }
        );
        assert_eq!(e.status(), Some(200));
        let e = in_stream(
            r#"{"type":"error","error":{"type":"mystery","message":"key sk-ant-1234 leaked"}}"#,
            Some("sk-ant-1234"),
        );
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("key [redacted] leaked"), "{e}");
        assert!(!e.to_string().contains("sk-ant-1234"));
        let e = in_stream("not json", None);
        assert_eq!(e.status(), Some(200));
        assert!(!e.is_retryable());
    }

    #[test]
    fn invalid_request_kinds_are_read_from_the_message() {
        let kind = |m| invalid_request_kind(m);
        assert_eq!(
            kind("prompt is too long: 208310 tokens > 200000 maximum"),
            InvalidRequestKind::ContextWindowExceeded
        );
        assert_eq!(
            kind(
                "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, \
                 decrease input length or `max_tokens` and try again"
            ),
            InvalidRequestKind::ContextWindowExceeded
        );
        assert_eq!(
            kind(
                "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but \
                 found `text`. When `thinking` is enabled, a final `assistant` message must \
                 start with a thinking block"
            ),
            InvalidRequestKind::ReasoningReplayMissing
        );
        assert_eq!(
            kind("content[].thinking in the thinking mode must be passed back to the API."),
            InvalidRequestKind::ReasoningReplayMissing
        );
        assert_eq!(
            kind(
                "tools.12.custom.input_schema: JSON schema is invalid. It must match JSON \
                 Schema draft 2020-12 (https://json-schema.org/draft/2020-12)."
            ),
            InvalidRequestKind::ToolSchemaRejected
        );
        assert_eq!(
            kind("max_tokens: Field required"),
            InvalidRequestKind::Other
        );
    }
}
