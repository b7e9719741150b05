//! Anthropic's failures mapped to [`ModelError`]: HTTP statuses, the
//! `{"type":"error","error":{"type","message"}}` body, and `error` events mid-stream.
//!
//! Source: <https://platform.claude.com/docs/en/api/errors>. The
//! excerpting, `retry-after` parsing and key redaction are the OpenAI-compatible adapter's
//! ([`crate::openai`]), shared.

use std::time::SystemTime;

use halo_core::ModelError;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::http::{body_excerpt, redact, retry_after};
use crate::openai::error::error_value_message;

/// Maps a non-2xx answer to a typed error.
///
/// - 400 `invalid_request_error`, 404 `not_found_error` (an unknown model or a wrong base
///   URL; the adapter adds the full URL and what to check to the message), 413
///   `request_too_large` → [`ModelError::InvalidRequest`] with that status: the request
///   itself must change.
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
        400 | 404 | 413 | 422 => ModelError::InvalidRequest { status, message },
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
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(error_value_message)
        .unwrap_or_else(|| body_excerpt(text.as_bytes()))
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

/// Maps an `error` event of a 200 stream (`{"type":"error","error":{"type":
/// "overloaded_error","message":"Overloaded"}}`, which replaces an HTTP 529 when the
/// overload starts mid-stream) to the error its `error.type`'s status maps to, as for an
/// HTTP error: `overloaded_error` → [`ModelError::Server`] 529 (retryable),
/// `rate_limit_error` → [`ModelError::RateLimited`], `invalid_request_error` →
/// [`ModelError::InvalidRequest`]. An unknown type is [`ModelError::Other`], not retried.
pub(crate) fn in_stream(data: &str, secret: Option<&str>) -> ModelError {
    let text = redact(data.to_string(), secret);
    let parsed: Option<Value> = serde_json::from_str(&text).ok();
    let error = parsed.as_ref().map(|v| v.get("error").unwrap_or(v));
    let status = error
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str)
        .and_then(status_for_type);
    match status {
        Some(status) => from_status(status, &HeaderMap::new(), text.as_bytes(), None),
        None => ModelError::Other(format!(
            "the provider reported an error mid-stream: {}",
            message_of(&text)
        )),
    }
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
    fn stream_errors_map_by_type_and_are_redacted() {
        let e = in_stream(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            None,
        );
        assert!(e.is_retryable(), "{e:?}");
        assert_eq!(e.status(), Some(529));
        let e = in_stream(
            r#"{"type":"error","error":{"type":"mystery","message":"key sk-ant-1234 leaked"}}"#,
            Some("sk-ant-1234"),
        );
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("key [redacted] leaked"), "{e}");
        assert!(!e.to_string().contains("sk-ant-1234"));
    }
}
