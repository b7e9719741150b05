//! Error texts of the transport: bounded one-line excerpts of a provider's body (an HTML
//! page reduced to its text), API-key redaction, the `retry-after` headers, the message of
//! a failure without an HTTP answer, and [`ModelError::Stream`] built from a provider's
//! in-stream error. Every dialect's error mapping uses these, so an excerpt reads the same
//! whichever provider sent it.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use halo_core::{InvalidRequestKind, ModelError};
use reqwest::header::HeaderMap;
use serde_json::Value;

/// The most bytes of a provider's error text kept in a [`ModelError`].
pub const MAX_EXCERPT_BYTES: usize = 500;

/// `err` with its message (the provider's excerpt, or the whole text of a variant without
/// one) passed through `f`; everything else of it is kept.
pub(crate) fn map_message(err: ModelError, f: impl FnOnce(String) -> String) -> ModelError {
    match err {
        ModelError::Transport(m) => ModelError::Transport(f(m)),
        ModelError::Truncated(m) => ModelError::Truncated(f(m)),
        ModelError::InvalidResponse(m) => ModelError::InvalidResponse(f(m)),
        ModelError::Unsupported(m) => ModelError::Unsupported(f(m)),
        ModelError::Other(m) => ModelError::Other(f(m)),
        ModelError::InvalidRequest {
            status,
            kind,
            message,
        } => ModelError::InvalidRequest {
            status,
            kind,
            message: f(message),
        },
        ModelError::Authentication { status, message } => ModelError::Authentication {
            status,
            message: f(message),
        },
        ModelError::InsufficientBalance { status, message } => ModelError::InsufficientBalance {
            status,
            message: f(message),
        },
        ModelError::RateLimited {
            retry_after,
            message,
        } => ModelError::RateLimited {
            retry_after,
            message: f(message),
        },
        ModelError::Server {
            status,
            retry_after,
            message,
        } => ModelError::Server {
            status,
            retry_after,
            message: f(message),
        },
        ModelError::Stream {
            provider_type,
            code,
            invalid_request,
            retryable,
            message,
        } => ModelError::Stream {
            provider_type,
            code,
            invalid_request,
            retryable,
            message: f(message),
        },
        ModelError::Http { status, message } => ModelError::Http {
            status,
            message: f(message),
        },
        other => other,
    }
}

/// An error the provider reported inside a 200 answer, as [`ModelError::Stream`]:
/// `provider_type` and `code` as sent, and `status`, the HTTP status the provider pairs with
/// that type or code (`None` when neither names one), deciding the policy the same way an
/// HTTP answer with that status would: 400, 404, 413 and 422 are an invalid request (of
/// `kind`), 429 and 5xx are retryable, anything else neither. A `kind` the message names
/// makes it an invalid request whatever the status.
pub(crate) fn stream_error(
    provider_type: Option<String>,
    code: Option<String>,
    status: Option<u16>,
    kind: InvalidRequestKind,
    message: String,
) -> ModelError {
    let invalid =
        matches!(status, Some(400 | 404 | 413 | 422)) || kind != InvalidRequestKind::Other;
    let retryable = !invalid && matches!(status, Some(429 | 500 | 502 | 503 | 504 | 529));
    ModelError::Stream {
        provider_type,
        code,
        invalid_request: invalid.then_some(kind),
        retryable,
        message,
    }
}

/// A field of an error object as text: a non-empty string as it is, a number as its digits.
pub(crate) fn error_field(error: &Value, field: &str) -> Option<String> {
    match error.get(field)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A body as one line of text (invalid UTF-8 replaced, every run of whitespace, newlines
/// included, made one space), at most [`MAX_EXCERPT_BYTES`] plus a closing `…` when cut.
/// An HTML page (a proxy's or a static server's error page) is reduced to its text first
/// ([`html_text`]), so that what it says fits in the excerpt rather than its markup.
pub(crate) fn body_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line = if is_html(body) {
        html_text(&text)
    } else {
        one_line(&text)
    };
    if line.is_empty() {
        return "(empty body)".to_string();
    }
    truncate(&line)
}

/// `text` with every run of whitespace made one space, and trimmed.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `body` is an HTML page: it starts (after whitespace) with `<` and its first
/// KiB has an `<html`, `<head`, `<body` or `<title` tag, in any case.
pub(crate) fn is_html(body: &[u8]) -> bool {
    let start = body.trim_ascii_start();
    let head = start[..start.len().min(1024)].to_ascii_lowercase();
    start.starts_with(b"<")
        && [&b"<html"[..], b"<head", b"<body", b"<title"]
            .iter()
            .any(|tag| head.windows(tag.len()).any(|w| w == *tag))
}

/// The text of an HTML page on one line: tags and comments removed, the contents of
/// `<script>` and `<style>` dropped, whitespace runs made one space. Character references
/// (`&amp;`) are left as they are.
///
/// # Why not a crate
/// `nanohtml2text` 0.3.0 (zero dependencies, MIT) was measured against this function's
/// cases (Oct 2026) and kept out: on a body cut inside a tag (`…Bad <b>gateway</b><br`,
/// as a proxy's truncated page ends) its text ends in the markup `gateway<br`, which this
/// function drops; and it discards `<head>`, so a page whose only text is its `<title>`
/// (`<title>502 Bad Gateway</title>` and an empty body) becomes an empty excerpt. It
/// passed the rest: the nginx 404 and Python `http.server` 501 pages (without their
/// `<title>` repeated), `<script>` and `<style>` in `<head>` and `<body>`, comments.
fn html_text(html: &str) -> String {
    // ASCII lowercasing keeps every byte offset, so `lower` indexes `html` too.
    let lower = html.to_ascii_lowercase();
    let mut text = String::with_capacity(html.len() / 2);
    let mut at = 0;
    while let Some(lt) = lower[at..].find('<').map(|i| at + i) {
        text.push_str(&html[at..lt]);
        text.push(' ');
        let (end, skip_to) = if lower[lt..].starts_with("<!--") {
            (lower[lt..].find("-->").map(|i| lt + i + 3), None)
        } else {
            let name: String = lower[lt + 1..]
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            let close = matches!(name.as_str(), "script" | "style").then(|| format!("</{name}"));
            (lower[lt..].find('>').map(|i| lt + i + 1), close)
        };
        let Some(mut end) = end else {
            at = html.len();
            break;
        };
        if let Some(close) = skip_to {
            end = match lower[end..].find(&close) {
                Some(i) => lower[end + i..]
                    .find('>')
                    .map_or(html.len(), |j| end + i + j + 1),
                None => html.len(),
            };
        }
        at = end;
    }
    text.push_str(&html[at..]);
    one_line(&text)
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

/// `body` with every occurrence of `secret` (the API key) replaced by `[redacted]`, invalid
/// UTF-8 replaced too when there is a key. Redact a whole body before anything cuts it: a
/// key that straddles an excerpt's end would otherwise survive in part.
pub(crate) fn redact_body<'b>(body: &'b [u8], secret: Option<&str>) -> Cow<'b, [u8]> {
    match secret {
        Some(s) if redactable(s) => Cow::Owned(
            String::from_utf8_lossy(body)
                .replace(s, "[redacted]")
                .into_bytes(),
        ),
        _ => Cow::Borrowed(body),
    }
}

/// Replaces every occurrence of `secret` (the API key) in `text` with `[redacted]`: some
/// gateways echo the `Authorization` header back in their error body. Keys shorter than
/// [`MIN_REDACTED_KEY_CHARS`] are left alone (see there).
pub(crate) fn redact(text: String, secret: Option<&str>) -> String {
    match secret {
        Some(s) if redactable(s) && text.contains(s) => text.replace(s, "[redacted]"),
        _ => text,
    }
}

/// The shortest API key (in chars) that the adapters redact from error texts. Real API keys
/// are dozens of characters; a placeholder key such as `x` or `test` (local servers accept
/// any) would otherwise be cut out of every word that contains it (`exhausted` →
/// `e[redacted]hausted`), and a key that short protects nothing.
pub const MIN_REDACTED_KEY_CHARS: usize = 8;

fn redactable(secret: &str) -> bool {
    secret.chars().count() >= MIN_REDACTED_KEY_CHARS
}

/// The delay the provider asked for: `retry-after-ms` (milliseconds, fractions allowed),
/// else `retry-after` as seconds (fractions allowed) or as an HTTP-date relative to `now`.
/// Zero, negative, past and unparseable values give `None`. The value is reported as sent;
/// the retry loop does not retry when it exceeds [`MAX_RETRY_DELAY`](super::MAX_RETRY_DELAY).
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

/// The advice that ends the message of a failed connection.
pub(crate) const CONNECT_ADVICE: &str = "check the base URL and that the server there is running";

/// The advice that ends the message of a timed-out request.
pub(crate) const TIMEOUT_ADVICE: &str = "raise the adapter's timeout or retry later";

/// A transport failure (no HTTP answer) as [`ModelError::Transport`], naming the full URL,
/// with the error's source chain and the key redacted:
/// - refused, unreachable, DNS or TLS failure: `cannot connect to
///   http://127.0.0.1:9/v1/chat/completions: tcp connect error: Connection refused (os
///   error 111); check the base URL and that the server there is running` (the retry loop
///   adds how many retries it made over how long before the advice);
/// - the connect timeout: `cannot connect to {url}: the connect timeout expired; {advice}`;
/// - the whole-request `timeout` (in the message as milliseconds): `the request to {url}
///   timed out after 600000 ms; raise the adapter's timeout or retry later`;
/// - anything else: reqwest's message (`error sending request for url (...)`) and its
///   sources.
pub(crate) fn transport_error(
    err: &reqwest::Error,
    timeout: Duration,
    secret: Option<&str>,
) -> ModelError {
    let url = err
        .url()
        .map_or_else(|| "the base URL".to_string(), ToString::to_string);
    let text = if err.is_connect() && err.is_timeout() {
        format!("cannot connect to {url}: the connect timeout expired; {CONNECT_ADVICE}")
    } else if err.is_timeout() {
        format!(
            "the request to {url} timed out after {} ms; {TIMEOUT_ADVICE}",
            timeout.as_millis()
        )
    } else if err.is_connect() {
        // The first source is hyper's `client error (Connect)`, which says no more than
        // "cannot connect"; what failed (`tcp connect error`, `dns error`) comes after it.
        let first = std::error::Error::source(err);
        let causes = source_chain(first.and_then(|s| s.source()).or(first), String::new());
        format!("cannot connect to {url}: {causes}; {CONNECT_ADVICE}")
    } else {
        source_chain(std::error::Error::source(err), err.to_string())
    };
    ModelError::Transport(redact(text, secret))
}

/// `text` followed by each error of the chain from `source` that it does not already
/// contain, joined by `: `.
fn source_chain(
    mut source: Option<&(dyn std::error::Error + 'static)>,
    mut text: String,
) -> String {
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        source = s.source();
    }
    text
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
    fn a_short_key_is_not_redacted_out_of_words() {
        // Trigger: the placeholder key `x` turned "exhausted" into "e[redacted]hausted".
        let text = "quota exhausted".to_string();
        assert_eq!(redact(text.clone(), Some("x")), "quota exhausted");
        assert_eq!(
            redact_body(b"quota exhausted", Some("1234567")).as_ref(),
            b"quota exhausted"
        );
    }

    #[test]
    fn a_key_of_eight_chars_or_more_is_redacted_everywhere() {
        // Trigger: a gateway echoing the key (8 chars, the shortest redacted) in its error.
        let text = "bad key sk-12345 (sk-12345)".to_string();
        assert_eq!(
            redact(text, Some("sk-12345")),
            "bad key [redacted] ([redacted])"
        );
        assert_eq!(
            redact_body(b"key sk-12345", Some("sk-12345")).as_ref(),
            b"key [redacted]"
        );
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
        let body = format!("{{\"detail\": \"{}\"}}", "x".repeat(2000));
        let ex = body_excerpt(body.as_bytes());
        assert!(
            ex.starts_with("{\"detail\": \"xxx") && ex.ends_with('…'),
            "{ex}"
        );
        assert_eq!(ex.len(), MAX_EXCERPT_BYTES + '…'.len_utf8());
        // A multi-byte character at the cut is dropped whole, not split.
        let body = format!("{}é", "x".repeat(MAX_EXCERPT_BYTES - 1));
        assert_eq!(
            body_excerpt(body.as_bytes()),
            format!("{}…", "x".repeat(MAX_EXCERPT_BYTES - 1))
        );
        assert_eq!(body_excerpt(b"  "), "(empty body)");
        assert_eq!(body_excerpt(b"\xff ok"), "\u{fffd} ok");
    }

    #[test]
    fn an_excerpt_is_one_line() {
        // Trigger: a multi-line error body printed across several lines of the message.
        assert_eq!(
            body_excerpt(b"upstream\r\n  failed:\n\n\ttry later\n"),
            "upstream failed: try later"
        );
    }

    #[test]
    fn an_html_page_becomes_its_text_on_one_line() {
        // Trigger: nginx's 404 page and Python http.server's 501 page, markup and all.
        let nginx = b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n\
            <center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n\
            </body>\r\n</html>\r\n";
        assert!(is_html(nginx));
        assert_eq!(
            body_excerpt(nginx),
            "404 Not Found 404 Not Found nginx/1.24.0"
        );
        let python = b"<!DOCTYPE HTML>\n<html lang=\"en\">\n    <head>\n        \
            <meta charset=\"utf-8\">\n        <title>Error response</title>\n    </head>\n    \
            <body>\n        <h1>Error response</h1>\n        <p>Error code: 501</p>\n        \
            <p>Message: Unsupported method ('POST').</p>\n    </body>\n</html>\n";
        assert_eq!(
            body_excerpt(python),
            "Error response Error response Error code: 501 Message: Unsupported method ('POST')."
        );
        // Scripts, styles and comments are dropped; an unclosed tag ends the text.
        let page = b"<HTML><HEAD><STYLE>body { color: red }</STYLE><script src=x>var a = '<p>';\
            </script></HEAD><!-- a <b>comment</b> --><BODY>Bad <b>gateway</b><br";
        assert_eq!(body_excerpt(page), "Bad gateway");
        // A page whose only text is its title keeps it.
        let titled = b"<html><head><title>502 Bad Gateway</title></head><body></body></html>";
        assert_eq!(body_excerpt(titled), "502 Bad Gateway");
        // JSON, XML and plain text are not HTML.
        assert!(!is_html(br#"{"error": "<html>"}"#));
        assert!(!is_html(
            b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code></Error>"
        ));
        assert!(!is_html(b"Not Found"));
    }
}
