//! HTTP failures mapped to [`ModelError`]: status classes, `retry-after` parsing, bounded
//! excerpts of error bodies, and redaction of the API key.
//!
//! Sources: OpenAI error codes (<https://platform.openai.com/docs/guides/error-codes>),
//! DeepSeek error codes (<https://api-docs.deepseek.com/quick_start/error_codes>), and the
//! retry-delay rule of OpenAI's Stainless SDKs (`retry-after-ms`, then `retry-after` as
//! seconds or an HTTP-date), as summarised in provider-protocols §1.10 and §2.5.

use std::time::{Duration, SystemTime};

use halo_core::ModelError;
use reqwest::header::HeaderMap;
use serde_json::Value;

/// The most bytes of a provider's error text kept in a [`ModelError`].
pub const MAX_EXCERPT_BYTES: usize = 500;

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
/// The message is the provider's `error.message` (plus type and code), or the start of the
/// body, at most [`MAX_EXCERPT_BYTES`], with `secret` replaced by `[redacted]`.
pub(crate) fn from_status(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    secret: Option<&str>,
) -> ModelError {
    // Redact the whole body before anything cuts it: a key that straddles the excerpt's end
    // would otherwise survive in part.
    let redacted;
    let body = match secret {
        Some(s) if !s.is_empty() => {
            redacted = String::from_utf8_lossy(body).replace(s, "[redacted]");
            redacted.as_bytes()
        }
        _ => body,
    };
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
/// `event: error`, or old llama.cpp's `error:` field line (provider-protocols §0).
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

/// The start of a body as text (invalid UTF-8 replaced), at most [`MAX_EXCERPT_BYTES`]
/// plus a closing `…` when cut.
pub(crate) fn body_excerpt(body: &[u8]) -> String {
    let cut = body.len() > MAX_EXCERPT_BYTES;
    let mut head = &body[..body.len().min(MAX_EXCERPT_BYTES)];
    // A multi-byte character split by the cut is dropped rather than replaced.
    if let Err(e) = std::str::from_utf8(head)
        && e.error_len().is_none()
    {
        head = &head[..e.valid_up_to()];
    }
    let mut out = truncate(String::from_utf8_lossy(head).trim());
    if out.is_empty() {
        return "(empty body)".to_string();
    }
    if cut && !out.ends_with('…') {
        out.push('…');
    }
    out
}

/// `s` cut to at most [`MAX_EXCERPT_BYTES`] on a char boundary, with `…` when cut.
pub(crate) fn truncate(s: &str) -> String {
    if s.len() <= MAX_EXCERPT_BYTES {
        return s.to_string();
    }
    let mut end = MAX_EXCERPT_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Replaces every occurrence of `secret` (the API key) in `text` with `[redacted]`: some
/// gateways echo the `Authorization` header back in their error body.
pub(crate) fn redact(text: String, secret: Option<&str>) -> String {
    match secret {
        Some(s) if !s.is_empty() && text.contains(s) => text.replace(s, "[redacted]"),
        _ => text,
    }
}

/// The delay the provider asked for: `retry-after-ms` (milliseconds, fractions allowed),
/// else `retry-after` as seconds (fractions allowed) or as an HTTP-date relative to `now`.
/// Zero, negative, past and unparseable values give `None`. The value is reported as sent;
/// the retry loop caps its wait at [`MAX_RETRY_DELAY`](super::MAX_RETRY_DELAY).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let positive = |secs: f64| {
        (secs.is_finite() && secs > 0.0)
            .then(|| Duration::try_from_secs_f64(secs).ok())
            .flatten()
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && let Some(d) = positive(ms / 1000.0)
    {
        return Some(d);
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return positive(secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    at.duration_since(now).ok().filter(|d| !d.is_zero())
}

/// A transport failure (no HTTP answer) as [`ModelError::Transport`], with the error's
/// source chain and the key redacted.
pub(crate) fn transport(
    err: &reqwest::Error,
    timeout: Duration,
    secret: Option<&str>,
) -> ModelError {
    if err.is_timeout() {
        return ModelError::Transport(format!(
            "the request timed out after {} ms; raise the adapter's timeout or retry later",
            timeout.as_millis()
        ));
    }
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    if err.is_connect() {
        text.push_str("; check the base URL and that the server there is running");
    }
    ModelError::Transport(redact(text, secret))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn retry_after_prefers_ms_then_seconds_then_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let h = headers(&[("retry-after-ms", "1500.5"), ("retry-after", "9")]);
        assert_eq!(retry_after(&h, now), Some(Duration::from_micros(1_500_500)));
        let h = headers(&[("retry-after", "2.5")]);
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(2500)));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        let h = headers(&[("retry-after", &date)]);
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(30)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(retry_after(&headers(&[("retry-after", &past)]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "0")]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        let h = headers(&[("retry-after-ms", "-1"), ("retry-after", "3")]);
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(3)));
    }

    #[test]
    fn excerpts_are_bounded_on_char_boundaries() {
        let long = "é".repeat(400); // 800 bytes
        let cut = truncate(&long);
        assert!(cut.ends_with('…'));
        assert_eq!(cut.trim_end_matches('…').len(), MAX_EXCERPT_BYTES);
        let body = format!("<html>{}</html>", "x".repeat(2000));
        let ex = body_excerpt(body.as_bytes());
        assert!(ex.starts_with("<html>xxx") && ex.ends_with('…'), "{ex}");
        assert!(ex.len() <= MAX_EXCERPT_BYTES + '…'.len_utf8());
        assert_eq!(body_excerpt(b"  "), "(empty body)");
    }

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
