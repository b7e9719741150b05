//! The HTTP plumbing the provider adapters share: the client and header checks of their
//! builders, the retry loop, one request with its non-2xx answer read and mapped, 2xx bodies
//! read whole or as a stream, and the wait for a stream's first event.
//!
//! What a provider's answers mean (status classes, error bodies, events) stays in its own
//! module; these helpers take its mapping (`from_status`) as a function. Retries go through
//! [`backon`] with exponential backoff and jitter, waiting the provider's delay
//! ([`ModelError::retry_after`]) instead when it gave one. A provider that asks for more
//! than [`MAX_RETRY_DELAY`] is not waited for: its error is returned at once (its
//! `retry_after()` still says how long), so the caller decides.

use std::borrow::Cow;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use futures::{Stream, StreamExt as _, TryStreamExt as _};
use halo_core::{InvalidRequestKind, ModelError};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};

use crate::openai::{ConfigError, MAX_RETRY_DELAY};

/// The HTTP client of one adapter: these timeouts and the `halo-adapters/{version}` user
/// agent.
///
/// # Errors
/// [`ConfigError::Client`] when the client cannot be built (TLS backend failure).
pub(crate) fn client(
    timeout: Duration,
    connect_timeout: Duration,
) -> Result<reqwest::Client, ConfigError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(connect_timeout)
        .user_agent(concat!("halo-adapters/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ConfigError::Client(e.to_string()))
}

/// A builder's extra headers as a map, every value marked sensitive.
///
/// # Errors
/// [`ConfigError::InvalidHeader`] for a name or value HTTP cannot carry, or a name in
/// `reserved` (lowercase; headers the adapter writes itself).
pub(crate) fn extra_headers(
    headers: &[(String, SecretString)],
    reserved: &[&str],
) -> Result<HeaderMap, ConfigError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let invalid = || ConfigError::InvalidHeader { name: name.clone() };
        let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
        if reserved.contains(&header_name.as_str()) {
            return Err(invalid());
        }
        let mut header_value =
            HeaderValue::from_str(value.expose_secret()).map_err(|_| invalid())?;
        header_value.set_sensitive(true);
        map.append(header_name, header_value);
    }
    Ok(map)
}

/// Refuses an extra body field the adapter writes itself.
///
/// # Errors
/// [`ConfigError::ReservedBodyField`] naming the first field of `body` in `reserved`.
pub(crate) fn check_body_fields(
    body: &Map<String, Value>,
    reserved: &[&str],
) -> Result<(), ConfigError> {
    match body.keys().find(|k| reserved.contains(&k.as_str())) {
        Some(field) => Err(ConfigError::ReservedBodyField(field.clone())),
        None => Ok(()),
    }
}

/// `url` (the builder's base URL `base` with the API path joined) parsed and checked: `base`
/// names its scheme (`127.0.0.1:9` does not), the scheme is http or https, and there is no
/// query and no fragment.
///
/// # Errors
/// [`ConfigError::InvalidBaseUrl`] naming `base` and what is wrong.
pub(crate) fn api_url(base: &str, url: &str) -> Result<reqwest::Url, ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidBaseUrl {
        url: base.to_string(),
        reason,
    };
    let with_scheme = |what: &str| {
        invalid(format!(
            "{what}: include `http://` or `https://` (e.g. `http://127.0.0.1:8080`)"
        ))
    };
    if !base.contains("://") {
        // `127.0.0.1:9` fails as "relative URL without a base", `localhost:9` parses
        // with the scheme `localhost`: both lack the scheme.
        return Err(with_scheme("the base URL has no scheme"));
    }
    let url = reqwest::Url::parse(url).map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(with_scheme("the scheme must be http or https"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid(
            "the base URL must not have a query or fragment".into(),
        ));
    }
    Ok(url)
}

/// Refuses a base URL whose path already ends in (part of) the API path the adapter
/// appends, such as a URL copied whole from an API reference: `http://127.0.0.1:8080/v1/chat/completions`
/// would be posted to `.../chat/completions/chat/completions`. `find` gets the base URL's
/// path without its trailing slashes and returns the byte offset where the appended part
/// begins, or `None` when it is not there. Call it after [`api_url`], which reports a base
/// URL that does not parse or lacks its scheme.
///
/// # Errors
/// [`ConfigError::InvalidBaseUrl`] naming `base`, the part to drop, and the base URL to
/// pass instead.
pub(crate) fn check_api_path(
    base: &str,
    find: impl Fn(&str) -> Option<usize>,
) -> Result<(), ConfigError> {
    let Ok(mut url) = reqwest::Url::parse(base.trim()) else {
        return Ok(());
    };
    let path = url.path().trim_end_matches('/').to_string();
    let Some(at) = find(&path).filter(|&at| path.is_char_boundary(at)) else {
        return Ok(());
    };
    url.set_path(&path[..at]);
    url.set_query(None);
    url.set_fragment(None);
    Err(ConfigError::InvalidBaseUrl {
        url: base.to_string(),
        reason: format!(
            "it ends in `{}`, which the adapter appends itself; drop it and pass `{}`",
            &path[at..],
            url.as_str().trim_end_matches('/')
        ),
    })
}

/// What to check, added to the message of a non-2xx answer: for a 404, that `url` (the
/// full URL, the key redacted should a gateway carry it there) was not found and to check
/// the base URL and the model name; for another status with an HTML page as its body (a
/// proxy's or a static server's error page), that `url` answered with HTML rather than the
/// provider's API. `None` otherwise. The variant the provider's mapping chose is kept.
fn status_hint(
    status: u16,
    body: &[u8],
    url: &reqwest::Url,
    secret: Option<&str>,
) -> Option<String> {
    let hint = if status == 404 {
        format!("`{url}` was not found: check the base URL and the model name")
    } else if is_html(body) {
        format!(
            "`{url}` answered with an HTML page, not an API error: check that the base URL \
             points at the provider's API"
        )
    } else {
        return None;
    };
    Some(redact(hint, secret))
}

/// The most bytes of a provider's error text kept in a [`ModelError`].
pub const MAX_EXCERPT_BYTES: usize = 500;

/// How a provider maps a non-2xx answer (status, headers, body, API key to redact) to a
/// [`ModelError`].
pub(crate) type FromStatus = fn(u16, &HeaderMap, &[u8], Option<&str>) -> ModelError;

/// Whether the retry loop tries `err` again: a retryable error whose provider delay, if it
/// gave one, is at most [`MAX_RETRY_DELAY`]. A longer delay (a `retry-after` of hours, a
/// quota reset) fails at once rather than retrying too early.
fn should_retry(err: &ModelError) -> bool {
    err.is_retryable() && err.retry_after().is_none_or(|r| r <= MAX_RETRY_DELAY)
}

/// The wait before the next attempt: `None` when backon has no retry left, else the
/// provider's delay (at most [`MAX_RETRY_DELAY`], see [`should_retry`]) or, without one,
/// the backoff delay.
fn retry_wait(err: &ModelError, backoff_delay: Option<Duration>) -> Option<Duration> {
    backoff_delay.map(|d| err.retry_after().map_or(d, |r| r.min(MAX_RETRY_DELAY)))
}

/// How one adapter sends a request, retries it, and reports its failures.
#[derive(Clone, Copy)]
pub(crate) struct Exchange<'a> {
    /// The provider name in tracing.
    pub(crate) provider: &'a str,
    /// What an error answer is called in log lines (`chat completion`, `gemini`).
    pub(crate) what: &'static str,
    /// What a retried request is called in log lines (`chat completion`, `gemini request`).
    pub(crate) retrying: &'static str,
    /// The whole-request timeout, for the message of a timed-out request.
    pub(crate) timeout: Duration,
    /// The API key, removed from every error message.
    pub(crate) secret: Option<&'a str>,
    /// The provider's mapping of a non-2xx answer.
    pub(crate) from_status: FromStatus,
    /// Retries after the first attempt.
    pub(crate) max_retries: u32,
    /// The first backoff delay; it doubles per retry up to [`MAX_RETRY_DELAY`].
    pub(crate) retry_min_delay: Duration,
}

impl Exchange<'_> {
    /// `operation` with the retry policy: retryable errors are tried again up to
    /// `max_retries` times, waiting the provider's delay or an exponential backoff; an
    /// error whose provider delay exceeds [`MAX_RETRY_DELAY`] is returned at once.
    ///
    /// An error returned after retries says how many were made and over how long, and a
    /// retryable error that was not retried for its delay says so ([`retry_note`]).
    pub(crate) async fn with_retries<T, F, Fut>(&self, operation: F) -> Result<T, ModelError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ModelError>>,
    {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.retry_min_delay)
            .with_max_delay(MAX_RETRY_DELAY)
            .with_max_times(self.max_retries as usize)
            .with_jitter();
        let started = tokio::time::Instant::now();
        let retries = AtomicU32::new(0);
        operation
            .retry(backoff)
            .when(should_retry)
            .adjust(retry_wait)
            .notify(|err, wait| {
                retries.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    provider = %self.provider,
                    error = %err,
                    wait_ms = wait.as_millis() as u64,
                    "retrying {}",
                    self.retrying
                );
            })
            .await
            .map_err(|err| {
                let made = retries.load(Ordering::Relaxed);
                match retry_note(&err, made, self.max_retries, started.elapsed()) {
                    Some(note) => with_note(err, &note),
                    None => err,
                }
            })
    }

    /// Sends `request`. A non-2xx answer is read whole and mapped to its error, with what
    /// to check added for a 404 or an HTML page ([`status_hint`]); a 2xx answer is returned
    /// with its body unread.
    pub(crate) async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ModelError> {
        let response = request.send().await.map_err(|e| self.transport(&e))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let url = response.url().clone();
        let bytes = response.bytes().await.map_err(|e| self.transport(&e))?;
        tracing::debug!(
            provider = %self.provider,
            status,
            response_bytes = bytes.len(),
            "{} error response",
            self.what
        );
        let error = (self.from_status)(status, &headers, &bytes, self.secret);
        Err(match status_hint(status, &bytes, &url, self.secret) {
            Some(hint) => with_note(error, &hint),
            None => error,
        })
    }

    /// The whole body of a 2xx answer.
    pub(crate) async fn body(&self, response: reqwest::Response) -> Result<Bytes, ModelError> {
        response.bytes().await.map_err(|e| self.transport(&e))
    }

    /// The body of a 2xx answer as it arrives; a connection failing mid-body is
    /// [`ModelError::Truncated`] (the turn is incomplete, and retryable).
    pub(crate) fn body_stream(
        &self,
        response: reqwest::Response,
    ) -> impl Stream<Item = Result<Bytes, ModelError>> + Send + 'static {
        let (timeout, secret) = (self.timeout, self.secret.map(str::to_owned));
        response.bytes_stream().map_err(move |e| {
            let why = match transport(&e, timeout, secret.as_deref()) {
                ModelError::Transport(m) => m,
                other => other.to_string(),
            };
            ModelError::Truncated(format!("the connection failed mid-stream: {why}"))
        })
    }

    /// A transport failure (no HTTP answer) with the key redacted.
    pub(crate) fn transport(&self, err: &reqwest::Error) -> ModelError {
        transport(err, self.timeout, self.secret)
    }
}

/// What the retry loop adds to the error it returns: `gave up after 2 retries over 87 ms`
/// when it retried up to `max_retries` (`after 2 retries over 87 ms` when the last error is
/// not retryable), and why it stopped when a retryable error's delay was too long to wait
/// for. `None` for an error returned without retries because it is not retryable or
/// `max_retries` is 0. `elapsed` is counted from the first attempt, in milliseconds.
fn retry_note(
    err: &ModelError,
    retries: u32,
    max_retries: u32,
    elapsed: Duration,
) -> Option<String> {
    let made = match retries {
        1 => "1 retry".to_string(),
        n => format!("{n} retries"),
    };
    let over = elapsed.as_millis();
    if !err.is_retryable() {
        return (retries > 0).then(|| format!("after {made} over {over} ms"));
    }
    let too_long = format!(
        "the provider asked to wait longer than the {} s the adapter waits (MAX_RETRY_DELAY)",
        MAX_RETRY_DELAY.as_secs()
    );
    match (retries, retries < max_retries) {
        (0, false) => None,
        (0, true) => Some(format!("not retried: {too_long}")),
        (_, false) => Some(format!("gave up after {made} over {over} ms")),
        (_, true) => Some(format!("gave up after {made} over {over} ms: {too_long}")),
    }
}

/// `err` with `note` added to its message as a clause of its own, before the closing advice
/// of a transport failure so that the advice stays last.
fn with_note(err: ModelError, note: &str) -> ModelError {
    let add = |message: String| {
        for advice in [CONNECT_ADVICE, TIMEOUT_ADVICE] {
            if let Some(head) = message.strip_suffix(advice) {
                return format!("{head}{note}; {advice}");
            }
        }
        format!("{message}; {note}")
    };
    map_message(err, add)
}

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

/// Whether a 2xx answer to a streaming request came as one JSON body (a server that ignored
/// `stream: true`) rather than an event stream.
pub(crate) fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
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
/// the retry loop does not retry when it exceeds [`MAX_RETRY_DELAY`].
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
const CONNECT_ADVICE: &str = "check the base URL and that the server there is running";

/// The advice that ends the message of a timed-out request.
const TIMEOUT_ADVICE: &str = "raise the adapter's timeout or retry later";

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
pub(crate) fn transport(
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
    fn a_retry_after_longer_than_the_max_delay_is_not_retried() {
        // Trigger: a 429 with `retry-after: 99999` (waiting 60 s then retrying was wrong).
        let limited = |secs| ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(secs)),
            message: "quota".into(),
        };
        assert!(!should_retry(&limited(99_999)));
        assert!(should_retry(&limited(MAX_RETRY_DELAY.as_secs())));
        assert!(should_retry(&ModelError::Transport("reset".into())));
        assert!(!should_retry(&ModelError::InvalidResponse("x".into())));
    }

    #[test]
    fn the_retry_note_says_how_many_retries_over_how_long_and_why_it_stopped() {
        let ms = Duration::from_millis(87);
        let server = ModelError::Server {
            status: 503,
            retry_after: None,
            message: "overloaded".into(),
        };
        let bad = ModelError::InvalidRequest {
            status: 400,
            kind: InvalidRequestKind::Other,
            message: "bad".into(),
        };
        let too_long = "the provider asked to wait longer than the 60 s the adapter waits \
                        (MAX_RETRY_DELAY)";
        assert_eq!(retry_note(&server, 0, 0, ms), None, "max_retries is 0");
        assert_eq!(retry_note(&bad, 0, 2, ms), None, "not retryable");
        assert_eq!(
            retry_note(&server, 2, 2, ms).unwrap(),
            "gave up after 2 retries over 87 ms"
        );
        assert_eq!(
            retry_note(&bad, 1, 2, ms).unwrap(),
            "after 1 retry over 87 ms"
        );
        assert_eq!(
            retry_note(&server, 0, 2, ms).unwrap(),
            format!("not retried: {too_long}")
        );
        assert_eq!(
            retry_note(&server, 1, 3, ms).unwrap(),
            format!("gave up after 1 retry over 87 ms: {too_long}")
        );
    }

    #[test]
    fn the_retry_note_goes_before_a_transport_advice() {
        let note = "gave up after 2 retries over 87 ms";
        let refused =
            ModelError::Transport(format!("cannot connect to u: refused; {CONNECT_ADVICE}"));
        assert_eq!(
            with_note(refused, note),
            ModelError::Transport(format!(
                "cannot connect to u: refused; {note}; {CONNECT_ADVICE}"
            ))
        );
        let late = ModelError::Transport(format!("timed out; {TIMEOUT_ADVICE}"));
        assert_eq!(
            with_note(late, note),
            ModelError::Transport(format!("timed out; {note}; {TIMEOUT_ADVICE}"))
        );
        let server = ModelError::Server {
            status: 503,
            retry_after: Some(Duration::from_secs(1)),
            message: "overloaded".into(),
        };
        assert_eq!(
            with_note(server, note),
            ModelError::Server {
                status: 503,
                retry_after: Some(Duration::from_secs(1)),
                message: format!("overloaded; {note}"),
            }
        );
    }

    #[test]
    fn retry_wait_prefers_the_provider_delay_capped_at_a_minute() {
        let limited = |secs| ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(secs)),
            message: "slow down".into(),
        };
        let backoff = Some(Duration::from_secs(4));
        assert_eq!(
            retry_wait(&limited(2), backoff),
            Some(Duration::from_secs(2))
        );
        assert_eq!(retry_wait(&limited(3600), backoff), Some(MAX_RETRY_DELAY));
        assert_eq!(retry_wait(&limited(2), None), None, "no retries left");
        let transport = ModelError::Transport("reset".into());
        assert_eq!(retry_wait(&transport, backoff), backoff);
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
