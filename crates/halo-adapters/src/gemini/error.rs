//! Gemini error bodies mapped to [`ModelError`]: the `google.rpc.Status` shape, the retry
//! delay from `google.rpc.RetryInfo`, per-day quotas, and the "cached content is gone"
//! answers the cache lifecycle recovers from.
//!
//! Shape (<https://ai.google.dev/gemini-api/docs/troubleshooting>,
//! <https://ai.google.dev/api/generate-content>):
//! `{"error":{"code":429,"message":"…","status":"RESOURCE_EXHAUSTED","details":[{"@type":
//! "type.googleapis.com/google.rpc.RetryInfo","retryDelay":"13s"}, …]}}`. A 429 comes
//! without a `Retry-After` header: the wait is only in the body, as a protobuf duration
//! (`"45.837906927s"`), or only in the message text ("Please retry in 43.7s.").

use std::time::{Duration, SystemTime};

use halo_core::{InvalidRequestKind, ModelError};
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::config::GEMINI_API_KEY_VAR;
use crate::transport::text::{
    body_excerpt, error_field, redact, redact_body, retry_after, stream_error, truncate,
};

/// Maps a non-2xx answer of the Gemini API to a typed error.
///
/// - 400 → [`ModelError::InvalidRequest`] (its kind read by [`invalid_request_kind`]),
///   except a bad key (400 `INVALID_ARGUMENT` with
///   a `details[].reason` of `API_KEY_INVALID`) → [`ModelError::Authentication`] saying to
///   check `GEMINI_API_KEY`; 401, 403 → [`ModelError::Authentication`]; 404 and other
///   statuses → [`ModelError::Http`] (the adapter adds the full URL to a 404's message).
/// - 429 → [`ModelError::RateLimited`], except a per-day quota (a `QuotaFailure` whose
///   `quotaId` names `PerDay`, which does not reset for hours) →
///   [`ModelError::InsufficientBalance`], so it is not retried.
/// - 500, 502, 503, 504 → [`ModelError::Server`] (retryable).
///
/// The retry delay is `RetryInfo.retryDelay`, else a `retry-after` header, else the
/// "retry in Ns" of the message. The message is `error.message` with its `status` (or a
/// one-line excerpt of the body, an HTML page's text), at most [`MAX_EXCERPT_BYTES`](crate::openai::MAX_EXCERPT_BYTES),
/// with `secret` replaced by `[redacted]` before anything is cut.
pub(crate) fn from_status(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    secret: Option<&str>,
) -> ModelError {
    let redacted = redact_body(body, secret);
    let body: &[u8] = &redacted;
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(error_object);
    let message = redact(
        error
            .and_then(status_message)
            .unwrap_or_else(|| body_excerpt(body)),
        secret,
    );
    let delay = || {
        error
            .and_then(retry_info_delay)
            .or_else(|| retry_after(headers, SystemTime::now()))
            .or_else(|| delay_in_text(&message))
    };
    match status {
        400 if error.is_some_and(is_bad_key) => ModelError::Authentication {
            status,
            message: format!("{message}; check {GEMINI_API_KEY_VAR}"),
        },
        400 => ModelError::InvalidRequest {
            status,
            kind: error.map_or(InvalidRequestKind::Other, invalid_request_kind),
            message,
        },
        401 | 403 => ModelError::Authentication { status, message },
        429 if error.is_some_and(is_daily_quota) => ModelError::InsufficientBalance {
            status,
            message: format!("{message}; the daily quota is used up and resets in hours"),
        },
        429 => ModelError::RateLimited {
            retry_after: delay(),
            message,
        },
        500 | 502 | 503 | 504 => ModelError::Server {
            status,
            retry_after: delay(),
            message,
        },
        _ => ModelError::Http { status, message },
    }
}

/// Maps an error reported inside a 200 answer (`data: {"error": {…}}` in the stream, or a
/// 200 body holding an `error`) to [`ModelError::Stream`]: status 200, the error's
/// `status` (`UNAVAILABLE`, `INVALID_ARGUMENT`) as the provider type and its `code` (`503`)
/// as the code. Its policy is that of the HTTP status the code is, or Google pairs with the
/// status name ([`status_for_name`]): 429 and 5xx retryable (except a per-day quota), 400
/// an invalid request of the kind [`invalid_request_kind`] reads; an error that names
/// neither is not retryable.
pub(crate) fn in_stream(payload: &Value, secret: Option<&str>) -> ModelError {
    let error = error_object(payload).unwrap_or(payload);
    let status_name = error_field(error, "status");
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (400..600).contains(n))
        .or_else(|| status_name.as_deref().and_then(status_for_name))
        // A per-day quota does not reset for hours: not retryable, as before the stream.
        .map(|n| {
            if n == 429 && is_daily_quota(error) {
                402
            } else {
                n
            }
        });
    let message = match error.get("message").and_then(Value::as_str) {
        Some(m) => truncate(m.trim()),
        None => body_excerpt(&serde_json::to_vec(error).unwrap_or_default()),
    };
    stream_error(
        status_name,
        error_field(error, "code"),
        status,
        invalid_request_kind(error),
        redact(message, secret),
    )
}

/// What an invalid request was rejected for, read from a Gemini error's `message` and its
/// `google.rpc.BadRequest` `fieldViolations` (the wordings are the API's, as reported
/// verbatim in public issues):
///
/// - [`InvalidRequestKind::ContextWindowExceeded`]: `The input token count (132478)
///   exceeds the maximum number of tokens allowed (131072).`
///   (<https://ai.google.dev/gemini-api/docs/long-context>; observed in
///   `google-gemini/gemini-cli#4118`).
/// - [`InvalidRequestKind::ReasoningReplayMissing`]: `Function call is missing a
///   thought_signature in functionCall parts…`
///   (<https://ai.google.dev/gemini-api/docs/thought-signatures>).
/// - [`InvalidRequestKind::ToolSchemaRejected`]: a message about the tools' declarations,
///   `Invalid JSON payload received. Unknown name "additionalProperties" at
///   'tools[0].function_declarations[0].parameters': Cannot find field.`, or a field
///   violation on a `tools[…]` field (<https://ai.google.dev/api/caching#Schema>: only an
///   OpenAPI subset is accepted; `gemini/schema.rs` strips the rest).
/// - anything else: [`InvalidRequestKind::Other`].
pub(crate) fn invalid_request_kind(error: &Value) -> InvalidRequestKind {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let tools_field = details(error)
        .flat_map(|d| {
            d.get("fieldViolations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(|v| v.get("field").and_then(Value::as_str))
        .any(|f| f.starts_with("tools[") || f.contains(".tools["));
    if message.contains("input token count") && message.contains("exceeds the maximum") {
        InvalidRequestKind::ContextWindowExceeded
    } else if message.contains("missing a thought_signature") {
        InvalidRequestKind::ReasoningReplayMissing
    } else if tools_field
        || message.contains("function_declarations")
        || message.contains("functiondeclaration")
    {
        InvalidRequestKind::ToolSchemaRejected
    } else {
        InvalidRequestKind::Other
    }
}

/// Whether an error says the API key is not valid: a `details[]` entry (an `ErrorInfo`)
/// with `reason: "API_KEY_INVALID"`, as Gemini answers a wrong key with HTTP 400
/// (<https://ai.google.dev/gemini-api/docs/troubleshooting>).
fn is_bad_key(error: &Value) -> bool {
    error
        .get("details")
        .and_then(Value::as_array)
        .is_some_and(|details| {
            details
                .iter()
                .any(|d| d.get("reason").and_then(Value::as_str) == Some("API_KEY_INVALID"))
        })
}

/// The HTTP status Google pairs with a canonical `google.rpc.Code` name
/// (<https://cloud.google.com/apis/design/errors#handling_errors>).
fn status_for_name(name: &str) -> Option<u16> {
    Some(match name {
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => 400,
        "UNAUTHENTICATED" => 401,
        "PERMISSION_DENIED" => 403,
        "NOT_FOUND" => 404,
        "RESOURCE_EXHAUSTED" => 429,
        "INTERNAL" | "UNKNOWN" | "DATA_LOSS" => 500,
        "UNAVAILABLE" => 503,
        "DEADLINE_EXCEEDED" => 504,
        _ => return None,
    })
}

/// The `error` object of a body: `{"error": …}`, or the first element of an array of
/// them (the non-SSE streaming endpoint answers with a JSON array).
fn error_object(body: &Value) -> Option<&Value> {
    match body {
        Value::Array(items) => items.first().and_then(error_object),
        Value::Object(map) => map.get("error").filter(|e| e.is_object()),
        _ => None,
    }
}

/// `message (status STATUS)`, bounded; `None` when the error has no message.
fn status_message(error: &Value) -> Option<String> {
    let message = error.get("message").and_then(Value::as_str)?.trim();
    let mut out = truncate(message);
    if let Some(status) = error
        .get("status")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        out.push_str(&format!(" (status {status})"));
    }
    Some(out)
}

fn details(error: &Value) -> impl Iterator<Item = &Value> {
    error
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn detail_type(detail: &Value) -> &str {
    detail
        .get("@type")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `details[].retryDelay` of the `google.rpc.RetryInfo` entry.
fn retry_info_delay(error: &Value) -> Option<Duration> {
    details(error)
        .filter(|d| detail_type(d).ends_with("google.rpc.RetryInfo"))
        .find_map(|d| d.get("retryDelay").and_then(protobuf_duration))
}

/// Whether a `google.rpc.QuotaFailure` names a per-day quota.
fn is_daily_quota(error: &Value) -> bool {
    details(error)
        .filter(|d| detail_type(d).ends_with("google.rpc.QuotaFailure"))
        .flat_map(|d| {
            d.get("violations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .any(|v| {
            v.get("quotaId")
                .and_then(Value::as_str)
                .is_some_and(|id| id.contains("PerDay"))
        })
}

/// A `google.protobuf.Duration` in its JSON form (`"13s"`, `"45.837906927s"`), or as
/// `{"seconds": 13, "nanos": 5}`. Zero and negative durations give `None`.
pub(crate) fn protobuf_duration(value: &Value) -> Option<Duration> {
    let secs = match value {
        Value::String(s) => s.trim().strip_suffix('s')?.parse::<f64>().ok()?,
        Value::Object(map) => {
            let int = |k: &str| {
                map.get(k).and_then(|v| {
                    v.as_f64()
                        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                })
            };
            int("seconds").unwrap_or(0.0) + int("nanos").unwrap_or(0.0) / 1e9
        }
        _ => return None,
    };
    (secs.is_finite() && secs > 0.0)
        .then(|| Duration::try_from_secs_f64(secs).ok())
        .flatten()
}

/// "Please retry in 43.7s." / "retry in 850ms" in a message.
fn delay_in_text(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    let at = lower.find("retry in ")? + "retry in ".len();
    let rest = &lower[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let number: f64 = rest[..end].trim_end_matches('.').parse().ok()?;
    let secs = if rest[end..].starts_with("ms") {
        number / 1000.0
    } else if rest[end..].starts_with('s') {
        number
    } else {
        return None;
    };
    (secs.is_finite() && secs > 0.0)
        .then(|| Duration::try_from_secs_f64(secs).ok())
        .flatten()
}

/// Whether an error of a request that named a cached content says that cached content
/// has expired or is gone: HTTP 400, 403 or 404 whose message names the cached content
/// (`403 CachedContent not found (or permission denied)`, `404 cachedContents/… not
/// found`). The wording is observed, not documented (see the cache module docs).
pub(crate) fn is_cache_gone(error: &ModelError) -> bool {
    if !matches!(error.status(), Some(400 | 403 | 404)) {
        return false;
    }
    let text = error.to_string().to_ascii_lowercase();
    ["cachedcontent", "cached content", "cached_content"]
        .iter()
        .any(|needle| text.contains(needle))
}

/// Whether a `cachedContents` create was refused because the content is below the
/// model's minimum (`400 Cached content is too small. total_token_count=…,
/// min_total_token_count=…`).
pub(crate) fn is_too_small(error: &ModelError) -> bool {
    error.status() == Some(400) && {
        let text = error.to_string().to_ascii_lowercase();
        text.contains("too small") || text.contains("min_total_token_count")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn retry_info_gives_the_delay_of_a_429() {
        let b = body(
            json!({"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED", "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "45.837906927s"}
            ]}}),
        );
        let e = from_status(429, &HeaderMap::new(), &b, None);
        assert_eq!(
            e,
            ModelError::RateLimited {
                retry_after: Some(Duration::new(45, 837_906_927)),
                message:
                    "Resource has been exhausted (e.g. check quota). (status RESOURCE_EXHAUSTED)"
                        .into(),
            }
        );
        assert!(e.is_retryable());
    }

    #[test]
    fn a_daily_quota_is_not_retried() {
        let b = body(
            json!({"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED", "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}
            ]}}),
        );
        let e = from_status(429, &HeaderMap::new(), &b, None);
        assert!(
            matches!(e, ModelError::InsufficientBalance { status: 429, .. }),
            "{e:?}"
        );
        assert!(!e.is_retryable());
    }

    #[test]
    fn the_delay_may_be_only_in_the_message() {
        let b = body(
            json!({"error": {"code": 503, "message": "The model is overloaded. Please retry in 2.5s.", "status": "UNAVAILABLE"}}),
        );
        let e = from_status(503, &HeaderMap::new(), &b, None);
        assert_eq!(e.retry_after(), Some(Duration::from_millis(2500)));
        assert_eq!(
            delay_in_text("retry in 850ms"),
            Some(Duration::from_millis(850))
        );
        assert_eq!(delay_in_text("retry in a while"), None);
    }

    #[test]
    fn statuses_map_to_typed_errors_with_the_key_redacted() {
        let key = "AIzaSy-test-SECRET";
        let b = body(
            json!({"error": {"code": 400, "message": format!("API key not valid: {key}"), "status": "INVALID_ARGUMENT"}}),
        );
        let e = from_status(400, &HeaderMap::new(), &b, Some(key));
        assert_eq!(
            e,
            ModelError::InvalidRequest {
                status: 400,
                kind: InvalidRequestKind::Other,
                message: "API key not valid: [redacted] (status INVALID_ARGUMENT)".into()
            }
        );
        let e = from_status(404, &HeaderMap::new(), b"<html>Not Found</html>", Some(key));
        assert_eq!(
            e,
            ModelError::Http {
                status: 404,
                message: "Not Found".into()
            }
        );
        let b = body(
            json!([{"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}]),
        );
        assert!(matches!(
            from_status(500, &HeaderMap::new(), &b, None),
            ModelError::Server {
                status: 500,
                retry_after: None,
                ..
            }
        ));
    }

    #[test]
    fn errors_mid_stream_keep_status_200_and_read_policy_from_code_or_status_name() {
        let e = in_stream(
            &json!({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}),
            None,
        );
        assert_eq!(
            e,
            ModelError::Stream {
                provider_type: Some("UNAVAILABLE".into()),
                code: Some("503".into()),
                invalid_request: None,
                retryable: true,
                message: "overloaded".into(),
            }
        );
        let e = in_stream(
            &json!({"error": {"message": "slow", "status": "RESOURCE_EXHAUSTED"}}),
            None,
        );
        assert!(e.is_retryable());
        assert_eq!(e.status(), Some(200));
        let e = in_stream(
            &json!({"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED", "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}
            ]}}),
            None,
        );
        assert!(!e.is_retryable(), "a per-day quota mid-stream: {e:?}");
        let e = in_stream(&json!({"error": {"message": "odd"}}), None);
        assert!(!e.is_retryable());
        assert_eq!(e.invalid_request_kind(), None);
    }

    #[test]
    fn invalid_request_kinds_are_read_from_message_and_field_violations() {
        let kind = |v: Value| invalid_request_kind(&v);
        assert_eq!(
            kind(
                json!({"code": 400, "message": "The input token count (132478) exceeds the maximum number of tokens allowed (131072).", "status": "INVALID_ARGUMENT"})
            ),
            InvalidRequestKind::ContextWindowExceeded
        );
        assert_eq!(
            kind(
                json!({"code": 400, "message": "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly.", "status": "INVALID_ARGUMENT"})
            ),
            InvalidRequestKind::ReasoningReplayMissing
        );
        assert_eq!(
            kind(
                json!({"code": 400, "message": "Invalid JSON payload received. Unknown name \"additionalProperties\" at 'tools[0].function_declarations[0].parameters': Cannot find field.", "status": "INVALID_ARGUMENT"})
            ),
            InvalidRequestKind::ToolSchemaRejected
        );
        assert_eq!(
            kind(
                json!({"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT", "details": [
                    {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{"field": "tools[1].function_declarations[0].parameters.properties[0].value.items", "description": "missing field"}]}
                ]})
            ),
            InvalidRequestKind::ToolSchemaRejected
        );
        assert_eq!(
            kind(
                json!({"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"})
            ),
            InvalidRequestKind::Other
        );
    }

    #[test]
    fn protobuf_durations_parse() {
        assert_eq!(
            protobuf_duration(&json!("13s")),
            Some(Duration::from_secs(13))
        );
        assert_eq!(
            protobuf_duration(&json!({"seconds": "2", "nanos": 500_000_000})),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(protobuf_duration(&json!("0s")), None);
        assert_eq!(protobuf_duration(&json!("13")), None);
    }

    #[test]
    fn cache_gone_and_too_small_are_recognized() {
        let gone = from_status(
            403,
            &HeaderMap::new(),
            &body(
                json!({"error": {"code": 403, "message": "CachedContent not found (or permission denied)", "status": "PERMISSION_DENIED"}}),
            ),
            None,
        );
        assert!(is_cache_gone(&gone));
        let denied = from_status(
            403,
            &HeaderMap::new(),
            &body(
                json!({"error": {"code": 403, "message": "Method doesn't allow unregistered callers", "status": "PERMISSION_DENIED"}}),
            ),
            None,
        );
        assert!(!is_cache_gone(&denied));
        let small = from_status(
            400,
            &HeaderMap::new(),
            &body(
                json!({"error": {"code": 400, "message": "Cached content is too small. total_token_count=2077, min_total_token_count=4096", "status": "INVALID_ARGUMENT"}}),
            ),
            None,
        );
        assert!(is_too_small(&small));
        assert!(!is_too_small(&denied));
    }
}
