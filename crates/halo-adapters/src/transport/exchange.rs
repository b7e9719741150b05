//! [`Transport`]: the one HTTP client of an adapter — its headers (the API key among them,
//! marked sensitive), timeouts and retry policy — sending a request, mapping a non-2xx
//! answer through the dialect's mapping, reading a 2xx body whole or as it arrives, and the
//! retry loop.
//!
//! Retries go through [`backon`] with exponential backoff and jitter, waiting the
//! provider's delay ([`ModelError::retry_after`]) instead when it gave one. A provider that
//! asks for more than [`MAX_RETRY_DELAY`] is not waited for: its error is returned at once
//! (its `retry_after()` still says how long), so the caller decides.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use futures::TryStreamExt as _;
use futures::stream::BoxStream;
use halo_core::ModelError;
use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use secrecy::{ExposeSecret, SecretString};

use super::MAX_RETRY_DELAY;
use super::text::{CONNECT_ADVICE, TIMEOUT_ADVICE, is_html, map_message, redact, transport_error};

/// How a dialect maps a non-2xx answer (status, headers, body, the API key to redact) to a
/// [`ModelError`].
pub type FromStatus = fn(u16, &HeaderMap, &[u8], Option<&str>) -> ModelError;

/// A 2xx body as it arrives: each read of the connection, or [`ModelError::Truncated`] when
/// the connection fails mid-body.
pub type ByteStream = BoxStream<'static, Result<Bytes, ModelError>>;

/// The HTTP side of one adapter: client, headers, key, timeouts and retry policy, with the
/// dialect's mapping of a non-2xx answer. Built by the adapters' builders; a dialect
/// receives it to read the model id and provider name (and, in this crate, to send the
/// extra requests of its cache, as Gemini's `cachedContents` do).
#[derive(Clone)]
pub struct Transport {
    pub(crate) provider: String,
    pub(crate) model: String,
    pub(crate) client: reqwest::Client,
    /// Extra headers, the key's header (sensitive) and the dialect's fixed headers.
    pub(crate) headers: HeaderMap,
    pub(crate) api_key: Option<SecretString>,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) retry_min_delay: Duration,
    pub(crate) first_event_timeout: Option<Duration>,
    pub(crate) from_status: FromStatus,
    /// What a request is called in log lines (`chat completion`, `messages`, `gemini`).
    pub(crate) what: &'static str,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_min_delay", &self.retry_min_delay)
            .field("first_event_timeout", &self.first_event_timeout)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// The provider name in tracing (`openai`, `deepseek`, `anthropic`, `gemini`, or the
    /// builder's `provider_name`).
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The model id requests name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The API key, for redaction only (`None` for a keyless local server).
    pub(crate) fn secret(&self) -> Option<&str> {
        self.api_key.as_ref().map(|k| k.expose_secret())
    }

    /// The API key removed from an error's message (some servers echo request headers).
    pub(crate) fn redact_error(&self, e: ModelError) -> ModelError {
        match self.secret() {
            Some(secret) => map_message(e, |m| redact(m, Some(secret))),
            None => e,
        }
    }

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
                    "retrying {} request",
                    self.what
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

    /// One HTTP request with the adapter's headers: `body` (JSON, shared rather than copied
    /// by each attempt) when there is one, `accept` as the `Accept` header. A non-2xx
    /// answer is read whole and mapped by the dialect, with what to check added for a 404
    /// or an HTML page ([`status_hint`]); a 2xx answer is returned with its body unread.
    pub(crate) async fn send(
        &self,
        method: Method,
        url: &reqwest::Url,
        body: Option<&Bytes>,
        accept: &'static str,
    ) -> Result<reqwest::Response, ModelError> {
        let mut builder = self.client.request(method.clone(), url.clone());
        if !self.headers.is_empty() {
            builder = builder.headers(self.headers.clone());
        }
        if let Some(body) = body {
            builder = builder
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body.clone());
        }
        builder = builder.header(ACCEPT, HeaderValue::from_static(accept));
        tracing::debug!(
            provider = %self.provider,
            model = %self.model,
            %method,
            url = %url,
            request_bytes = body.map_or(0, Bytes::len),
            "{} request",
            self.what
        );
        let response = builder.send().await.map_err(|e| self.transport_error(&e))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let url = response.url().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(&e))?;
        tracing::debug!(
            provider = %self.provider,
            status,
            response_bytes = bytes.len(),
            "{} error response",
            self.what
        );
        let error = (self.from_status)(status, &headers, &bytes, self.secret());
        Err(match status_hint(status, &bytes, &url, self.secret()) {
            Some(hint) => with_note(error, &hint),
            None => error,
        })
    }

    /// The whole body of a 2xx answer.
    pub(crate) async fn read(&self, response: reqwest::Response) -> Result<Bytes, ModelError> {
        response.bytes().await.map_err(|e| self.transport_error(&e))
    }

    /// The body of a 2xx answer as it arrives; a connection failing mid-body is
    /// [`ModelError::Truncated`] (the turn is incomplete, and retryable).
    pub(crate) fn body_stream(&self, response: reqwest::Response) -> ByteStream {
        let (timeout, secret) = (self.timeout, self.secret().map(str::to_owned));
        Box::pin(response.bytes_stream().map_err(move |e| {
            let why = match transport_error(&e, timeout, secret.as_deref()) {
                ModelError::Transport(m) => m,
                other => other.to_string(),
            };
            ModelError::Truncated(format!("the connection failed mid-stream: {why}"))
        }))
    }

    /// A transport failure (no HTTP answer) with the key redacted.
    pub(crate) fn transport_error(&self, err: &reqwest::Error) -> ModelError {
        transport_error(err, self.timeout, self.secret())
    }
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
pub(crate) fn with_note(err: ModelError, note: &str) -> ModelError {
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

#[cfg(test)]
mod tests {
    use super::*;
    use halo_core::InvalidRequestKind;

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
}
