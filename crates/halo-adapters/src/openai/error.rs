//! HTTP failures of the OpenAI-compatible dialect mapped to [`ModelError`]: status classes,
//! quota codes, the kinds of an invalid request, and in-stream errors (the `retry-after`
//! parsing, excerpts and key redaction they use are shared, in `crate::transport`).
//!
//! Sources: OpenAI error codes (<https://platform.openai.com/docs/guides/error-codes>),
//! DeepSeek error codes (<https://api-docs.deepseek.com/quick_start/error_codes>), and the
//! retry-delay rule of OpenAI's Stainless SDKs (`retry-after-ms`, then `retry-after` as
//! seconds or an HTTP-date; `_parse_retry_after_header` in
//! <https://github.com/openai/openai-python/blob/main/src/openai/_base_client.py>);
//! llama.cpp's error types (`format_error_response` in
//! <https://github.com/ggml-org/llama.cpp/tree/master/tools/server>).

use std::time::SystemTime;

use halo_core::{InvalidRequestKind, ModelError};
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::transport::text::{
    body_excerpt, error_field, redact, redact_body, retry_after, stream_error, truncate,
};

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
/// - 400, 422 → [`ModelError::InvalidRequest`], its kind read by [`invalid_request_kind`];
///   401, 403 → [`ModelError::Authentication`]; 402 → [`ModelError::InsufficientBalance`].
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
        400 | 422 => ModelError::InvalidRequest {
            status,
            kind: error.map_or(InvalidRequestKind::Other, invalid_request_kind),
            message,
        },
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

/// Maps an error reported *inside* a 200 event stream: an `{"error": …}` chunk (OpenAI,
/// DeepSeek, vLLM, newer llama.cpp), an `event: error`, or old llama.cpp's `error:` field line
/// (`error: {json}`; <https://github.com/ggml-org/llama.cpp/tree/master/tools/server>), to
/// [`ModelError::Stream`]: status 200, the error's `type` and `code` kept as sent.
///
/// Its policy comes from the HTTP status the error names: its own numeric `code` or
/// `status` (llama.cpp and vLLM send one), else the status OpenAI documents for its `type`
/// or `code` (<https://platform.openai.com/docs/guides/error-codes>, see
/// [`status_for_error_name`]). 429 and 5xx (`server_error`, `overloaded_error`, rate limits)
/// are retryable, an exhausted quota is not; 400-class errors are an invalid request, of the
/// kind [`invalid_request_kind`] reads. An error that names neither is not retryable.
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
    // An exhausted quota is a 429 that waiting does not fix: read it as 402.
    let status = if is_quota_error(error) {
        Some(402)
    } else {
        numeric.or_else(named)
    };
    let message = match error {
        Value::String(s) if !s.trim().is_empty() => truncate(s.trim()),
        _ => error
            .get("message")
            .and_then(Value::as_str)
            .map(|m| truncate(m.trim()))
            .unwrap_or_else(|| body_excerpt(&serde_json::to_vec(error).unwrap_or_default())),
    };
    stream_error(
        error_field(error, "type"),
        error_field(error, "code"),
        status,
        invalid_request_kind(error),
        redact(message, secret),
    )
}

/// What an invalid request of the OpenAI-compatible dialect was rejected for, read from
/// its `error` object (`{"message","type","param","code"}`, or a bare message string):
///
/// - [`InvalidRequestKind::ContextWindowExceeded`]: OpenAI's `code`
///   `context_length_exceeded` (`This model's maximum context length is 4097 tokens.
///   However, your messages resulted in 4294 tokens…`, or `Your input exceeds the context
///   window of this model…`; <https://platform.openai.com/docs/guides/error-codes>);
///   llama.cpp's `type` `exceed_context_size_error` (`request (4476 tokens) exceeds the
///   available context size (4096 tokens), try increasing it`); DeepSeek's and vLLM's
///   message `This model's maximum context length is 131072 tokens. However, you requested…`
///   with `code` `invalid_request_error` or `400`
///   (<https://api-docs.deepseek.com/quick_start/error_codes>; wording observed in
///   `evalstate/fast-agent#621`).
/// - [`InvalidRequestKind::ReasoningReplayMissing`]: DeepSeek's thinking mode, `The
///   reasoning_content in the thinking mode must be passed back to the API.` (with or
///   without backticks; <https://api-docs.deepseek.com/guides/thinking_mode>); the
///   Responses API's `Item 'rs_…' of type 'reasoning' was provided without its required
///   following item.` and `Item 'msg_…' of type 'message' was provided without its
///   required 'reasoning' item.` (wording reported in `openai/openai-node#1567` and
///   `continuedev/continue#12620`).
/// - [`InvalidRequestKind::ToolSchemaRejected`]: OpenAI's `code`
///   `invalid_function_parameters`, or a message `Invalid schema for function '…': …`
///   (OpenAI, DeepSeek).
/// - anything else: [`InvalidRequestKind::Other`].
pub(crate) fn invalid_request_kind(error: &Value) -> InvalidRequestKind {
    let field = |f: &str| error.get(f).and_then(Value::as_str).unwrap_or_default();
    let message = match error {
        Value::String(s) => s.as_str(),
        _ => field("message"),
    }
    .to_ascii_lowercase();
    let (kind, code) = (field("type"), field("code"));
    if code == "context_length_exceeded"
        || kind == "exceed_context_size_error"
        || message.contains("maximum context length")
        || message.contains("exceeds the available context size")
        || message.contains("exceeds the context window")
    {
        InvalidRequestKind::ContextWindowExceeded
    } else if (message.contains("reasoning_content") && message.contains("must be passed back"))
        || message.contains("without its required following item")
        || message.contains("without its required 'reasoning' item")
    {
        InvalidRequestKind::ReasoningReplayMissing
    } else if code == "invalid_function_parameters"
        || message.starts_with("invalid schema for function")
    {
        InvalidRequestKind::ToolSchemaRejected
    } else {
        InvalidRequestKind::Other
    }
}

/// The HTTP status OpenAI (and Anthropic-style gateways, and llama.cpp's
/// `format_error_response`) pair with an error `type`/`code`.
fn status_for_error_name(name: &str) -> Option<u16> {
    Some(match name {
        "invalid_request_error"
        | "invalid_request"
        | "bad_request"
        | "context_length_exceeded"
        | "exceed_context_size_error" => 400,
        "authentication_error" | "invalid_api_key" => 401,
        "permission_error" | "permission_denied" => 403,
        "not_found_error" | "model_not_found" => 404,
        "rate_limit_error" | "rate_limit_exceeded" | "requests" | "tokens" => 429,
        n if QUOTA_CODES.contains(&n) => 429,
        "server_error" | "api_error" | "internal_error" | "internal_server_error" => 500,
        "not_supported_error" => 501,
        "service_unavailable" | "service_unavailable_error" | "unavailable_error" => 503,
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
