//! HTTP failures of the OpenAI-compatible dialect mapped to [`ModelError`]: status classes,
//! quota codes and in-stream errors (the `retry-after` parsing, excerpts and key redaction
//! they use are shared, in `crate::http`).
//!
//! Sources: OpenAI error codes (<https://platform.openai.com/docs/guides/error-codes>),
//! DeepSeek error codes (<https://api-docs.deepseek.com/quick_start/error_codes>), and the
//! retry-delay rule of OpenAI's Stainless SDKs (`retry-after-ms`, then `retry-after` as
//! seconds or an HTTP-date; `_parse_retry_after_header` in
//! <https://github.com/openai/openai-python/blob/main/src/openai/_base_client.py>), and
//! DeepSeek's codes (<https://api-docs.deepseek.com/quick_start/error_codes>).

use std::time::SystemTime;

use halo_core::ModelError;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::http::{body_excerpt, redact, redact_body, retry_after, truncate};

/// `error.code` / `error.type` values of a 429 that mean "out of money", not "slow down".
const QUOTA_CODES: &[&str] = &[
    "insufficient_quota",
    "credit_balance_exhausted",
    "organization_spend_limit_exceeded",
    "project_spend_limit_exceeded",
    "organization_usage_limit_exceeded",
];

/// Maps a non-2xx answer to a typed error.
///
/// - 400, 422 → [`ModelError::InvalidRequest`]; 401, 403 → [`ModelError::Authentication`];
///   402 → [`ModelError::InsufficientBalance`].
/// - 429 → [`ModelError::RateLimited`] with the header delay, except an exhausted quota
///   (`insufficient_quota` and related codes) → [`ModelError::InsufficientBalance`].
/// - 500, 502, 503, 504, 529 → [`ModelError::Server`] (retryable) with the header delay.
/// - anything else → [`ModelError::Http`].
///
/// The message is the provider's `error.message` (plus type and code), or a one-line
/// excerpt of the body (an HTML page's text), at most [`MAX_EXCERPT_BYTES`](super::MAX_EXCERPT_BYTES), with `secret` replaced by `[redacted]`.
pub(crate) fn from_status(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    secret: Option<&str>,
) -> ModelError {
    let redacted = redact_body(body, secret);
    let body: &[u8] = &redacted;
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let message = redact(
        error
            .and_then(error_value_message)
            .or_else(|| {
                parsed
                    .as_ref()
                    .and_then(|v| v.get("message"))
                    .and_then(Value::as_str)
                    .map(|m| truncate(m.trim()))
            })
            .unwrap_or_else(|| body_excerpt(body)),
        secret,
    );
    match status {
        400 | 422 => ModelError::InvalidRequest { status, message },
        401 | 403 => ModelError::Authentication { status, message },
        402 => ModelError::InsufficientBalance { status, message },
        429 if error.is_some_and(is_quota_error) => {
            ModelError::InsufficientBalance { status, message }
        }
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

/// Maps an error reported *inside* a 200 event stream: an `{"error": …}` chunk, an
/// `event: error`, or old llama.cpp's `error:` field line (its server wrote
/// `error: {json}`; <https://github.com/ggml-org/llama.cpp/tree/master/tools/server>).
///
/// The status is the error's own numeric `code` or `status` when it is an HTTP status
/// (llama.cpp and vLLM send one), else the status OpenAI documents for its `type` or `code`
/// (<https://platform.openai.com/docs/guides/error-codes>):
/// `invalid_request_error` 400, `authentication_error` 401, `permission_error` 403,
/// `not_found_error` 404, rate-limit and quota codes 429, `server_error` / `api_error` /
/// `internal_error` 500, `service_unavailable` 503, `overloaded_error` 529. That status then
/// maps exactly like an HTTP error ([`from_status`]). An error with neither is
/// [`ModelError::Other`], not retried.
pub(crate) fn in_stream(payload: &Value, secret: Option<&str>) -> ModelError {
    // Redact before any excerpt is cut (see `from_status`).
    let redacted: Value = match secret {
        Some(s) if !s.is_empty() => {
            serde_json::from_str(&payload.to_string().replace(s, "[redacted]"))
                .unwrap_or_else(|_| payload.clone())
        }
        _ => payload.clone(),
    };
    let payload = &redacted;
    let error = match payload.get("error") {
        Some(inner) if !inner.is_null() => inner,
        _ => payload,
    };
    let numeric = ["code", "status"]
        .iter()
        .filter_map(|f| error.get(f))
        .find_map(|v| {
            v.as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        })
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (400..600).contains(n));
    let named = || {
        ["type", "code"]
            .iter()
            .filter_map(|f| error.get(f).and_then(Value::as_str))
            .find_map(status_for_error_name)
    };
    let body = serde_json::to_vec(&serde_json::json!({ "error": error })).unwrap_or_default();
    match numeric.or_else(named) {
        Some(status) => from_status(status, &HeaderMap::new(), &body, secret),
        None => {
            let message = error_value_message(error).unwrap_or_else(|| body_excerpt(&body));
            ModelError::Other(redact(
                format!("the provider reported an error mid-stream: {message}"),
                secret,
            ))
        }
    }
}

/// The HTTP status OpenAI (and Anthropic-style gateways) pair with an error `type`/`code`.
fn status_for_error_name(name: &str) -> Option<u16> {
    Some(match name {
        "invalid_request_error" | "invalid_request" | "bad_request" => 400,
        "authentication_error" | "invalid_api_key" => 401,
        "permission_error" | "permission_denied" => 403,
        "not_found_error" | "model_not_found" => 404,
        "rate_limit_error" | "rate_limit_exceeded" | "requests" | "tokens" => 429,
        n if QUOTA_CODES.contains(&n) => 429,
        "server_error" | "api_error" | "internal_error" | "internal_server_error" => 500,
        "service_unavailable" | "service_unavailable_error" => 503,
        "overloaded_error" | "overloaded" => 529,
        _ => return None,
    })
}

fn is_quota_error(error: &Value) -> bool {
    ["type", "code"].iter().any(|field| {
        error
            .get(field)
            .and_then(Value::as_str)
            .is_some_and(|v| QUOTA_CODES.contains(&v))
    })
}

/// The message of an `error` value: `{"message","type","code"}` (OpenAI, DeepSeek, vLLM,
/// llama.cpp) or a bare string (Ollama). Bounded; `None` when it has no message.
pub(crate) fn error_value_message(error: &Value) -> Option<String> {
    match error {
        Value::String(s) if !s.trim().is_empty() => Some(truncate(s.trim())),
        Value::Object(map) => {
            let message = map.get("message").and_then(Value::as_str)?.trim();
            let mut labels = Vec::new();
            for field in ["type", "code"] {
                match map.get(field) {
                    Some(Value::String(s)) if !s.is_empty() => labels.push(format!("{field} {s}")),
                    Some(Value::Number(n)) => labels.push(format!("{field} {n}")),
                    _ => {}
                }
            }
            let mut out = truncate(message);
            if !labels.is_empty() {
                out.push_str(&format!(" ({})", labels.join(", ")));
            }
            Some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn error_message_carries_type_and_code() {
        let v: Value = serde_json::json!({"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"});
        assert_eq!(
            error_value_message(&v).unwrap(),
            "Rate limit reached (type requests, code rate_limit_exceeded)"
        );
        assert_eq!(
            error_value_message(&Value::String("model not found".into())).unwrap(),
            "model not found"
        );
    }
}
