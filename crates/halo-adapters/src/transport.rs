//! The one HTTP transport of the provider adapters, and the generic adapter over it.
//!
//! Many vendors, few dialects, one transport: [`HttpAdapter<D>`] is every HTTP adapter of
//! this crate — [`OpenAiCompatible`](crate::openai::OpenAiCompatible) is
//! `HttpAdapter<ChatCompletions>`, [`AnthropicAdapter`](crate::anthropic::AnthropicAdapter)
//! is `HttpAdapter<Messages>`, [`GeminiAdapter`](crate::gemini::GeminiAdapter) is
//! `HttpAdapter<GenerateContent>` — and a [`Dialect`] holds only what differs between
//! providers: how a request body is built, how an answer and a stream are read, and how an
//! error answer maps to [`ModelError`]. Everything else lives here, once:
//!
//! - [`Transport`] (`exchange.rs`): the client, the key (a
//!   [`SecretString`](secrecy::SecretString), never in `Debug`, logs or errors), extra
//!   headers, one request with its non-2xx answer mapped by the dialect (plus what to check
//!   for a 404 or an HTML page), the retry loop (exponential backoff with jitter through
//!   [`backon`], the provider's delay up to [`MAX_RETRY_DELAY`]);
//! - `stream.rs`: what a 2xx answer to a streaming request holds (an event stream, one JSON
//!   body, or something else, which is an error naming status, content type and an
//!   excerpt), and the first-event deadline;
//! - `text.rs`: bounded excerpts, redaction, `retry-after` headers, transport messages;
//! - [`HttpBuilder`] (`builder.rs`) and [`ConfigError`] (`config.rs`): the settings every
//!   adapter shares, and their checks.
//!
//! How to add a provider, file by file: `docs/adapters.md` in the repository.

mod builder;
mod config;
mod exchange;
mod stream;
pub(crate) mod text;

use std::fmt;
use std::future::Future;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt as _;
use halo_core::{
    ModelAdapter, ModelCapabilities, ModelError, ModelEventStream, ModelRequest, ModelResponse,
    ModelStreamEvent, model::response_events,
};
use reqwest::Method;
use reqwest::header::HeaderMap;

pub use builder::HttpBuilder;
pub(crate) use builder::HttpSettings;
pub use config::{
    ConfigError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_RETRY_MIN_DELAY,
    DEFAULT_TIMEOUT, MAX_RETRY_DELAY,
};
pub(crate) use config::{api_url, check_api_path, check_body_fields, extra_headers, key_header};
pub use exchange::{ByteStream, FromStatus, Transport};
pub use text::{MAX_EXCERPT_BYTES, MIN_REDACTED_KEY_CHARS};

/// The `Accept` header of a unary call.
const JSON: &str = "application/json";
/// The `Accept` header of a streaming call.
const EVENT_STREAM: &str = "text/event-stream";

/// What differs between providers' HTTP APIs: request building, response parsing and error
/// mapping. [`HttpAdapter`] does the rest (sending, retrying, redacting, reading a stream).
///
/// A call goes: [`prepare`](Self::prepare) (per-call state, `Call`; Gemini creates or
/// refreshes its cached content here), [`body`](Self::body) and [`url`](Self::url), the
/// exchange with retries, then [`parse`](Self::parse) of a unary answer or
/// [`decode`](Self::decode) of an event stream, and [`finish`](Self::finish) on the
/// assembled turn. A failed call may be [`recover`](Self::recover)ed once (Gemini's cached
/// content gone: recreate it and send again).
///
/// The methods with futures return `impl Future + Send`: the trait is only used
/// generically (by [`HttpAdapter`]), never as an object, so nothing is boxed.
pub trait Dialect: fmt::Debug + Send + Sync + 'static {
    /// What one call carries from [`prepare`](Self::prepare) to [`finish`](Self::finish)
    /// (`()` for dialects with no per-call state).
    type Call: Send + Sync;

    /// The adapter's type name in `Debug` output (`OpenAiCompatible`).
    const ADAPTER: &'static str;

    /// What a request is called in log lines (`chat completion`, `messages`, `gemini`).
    const NAME: &'static str;

    /// Maps a non-2xx answer (status, headers, body, the key to redact) to a typed error.
    fn from_status(
        status: u16,
        headers: &HeaderMap,
        body: &[u8],
        secret: Option<&str>,
    ) -> ModelError;

    /// What the model can do for structured output and tool restriction.
    fn capabilities(&self, transport: &Transport) -> ModelCapabilities;

    /// The model's context window in tokens; by default from the per-model table
    /// ([`crate::window`]).
    fn context_window(&self, transport: &Transport) -> Option<u64> {
        crate::window::context_window(transport.model())
    }

    /// The per-call state of `request`, prepared before its body is built.
    fn prepare<'a>(
        &'a self,
        transport: &'a Transport,
        request: &'a ModelRequest<'a>,
    ) -> impl Future<Output = Self::Call> + Send + 'a;

    /// The URL a call posts to (`stream`: the streaming call).
    fn url(&self, call: &Self::Call, stream: bool) -> &reqwest::Url;

    /// The exact body bytes of a call.
    ///
    /// # Errors
    /// [`ModelError::Unsupported`] for content the provider cannot take.
    fn body(
        &self,
        transport: &Transport,
        request: &ModelRequest<'_>,
        call: &Self::Call,
        stream: bool,
    ) -> Result<Bytes, ModelError>;

    /// The turn of a unary 2xx answer's body (also used for a streaming request answered
    /// with one JSON body).
    ///
    /// # Errors
    /// [`ModelError::InvalidResponse`] when the body is not the provider's answer; a typed
    /// error for an error object inside a 200.
    fn parse(&self, transport: &Transport, body: &[u8]) -> Result<ModelResponse, ModelError>;

    /// The events of a 2xx event stream: deltas, then one
    /// [`Finish`](ModelStreamEvent::Finish); an `Err` ends it.
    fn decode<'a>(&'a self, transport: &'a Transport, body: ByteStream) -> ModelEventStream<'a>;

    /// After a call failed with `error`: whether to build its body again and send it once
    /// more, having fixed `call` (default: never).
    fn recover<'a>(
        &'a self,
        transport: &'a Transport,
        call: &'a mut Self::Call,
        error: &'a ModelError,
    ) -> impl Future<Output = bool> + Send + 'a {
        let _ = (transport, call, error);
        async { false }
    }

    /// Completes the assembled turn with what only the call knows (default: nothing;
    /// Gemini adds the tokens of a cached content it created as cache writes).
    fn finish(&self, call: &Self::Call, response: &mut ModelResponse) {
        let _ = (call, response);
    }
}

/// A model behind an HTTP API that speaks dialect `D`: the one implementation of
/// [`ModelAdapter`] the HTTP providers share. Build one with the dialect's builder
/// ([`OpenAiCompatible::openai`](crate::openai::OpenAiCompatible::openai),
/// [`AnthropicAdapter::builder`](crate::anthropic::AnthropicAdapter::builder),
/// [`GeminiAdapter::builder`](crate::gemini::GeminiAdapter::builder)).
pub struct HttpAdapter<D> {
    pub(crate) transport: Transport,
    pub(crate) dialect: D,
}

impl<D: Clone> Clone for HttpAdapter<D> {
    fn clone(&self) -> Self {
        HttpAdapter {
            transport: self.transport.clone(),
            dialect: self.dialect.clone(),
        }
    }
}

impl<D: Dialect> fmt::Debug for HttpAdapter<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.transport;
        f.debug_struct(D::ADAPTER)
            .field("provider", &t.provider)
            .field("model", &t.model)
            .field("api_key", &t.api_key.as_ref().map(|_| "[redacted]"))
            .field("headers", &t.headers.keys().collect::<Vec<_>>())
            .field("timeout", &t.timeout)
            .field("max_retries", &t.max_retries)
            .field("first_event_timeout", &t.first_event_timeout)
            .field("dialect", &self.dialect)
            .finish_non_exhaustive()
    }
}

impl<D: Dialect> HttpAdapter<D> {
    /// The transport (provider name, model, key, timeouts) this adapter sends with.
    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// The dialect this adapter speaks.
    pub fn dialect(&self) -> &D {
        &self.dialect
    }

    /// One unary attempt: post `body`, read the answer, parse it.
    async fn unary(&self, url: &reqwest::Url, body: &Bytes) -> Result<ModelResponse, ModelError> {
        let t = &self.transport;
        let started = Instant::now();
        let response = t.send(Method::POST, url, Some(body), JSON).await?;
        let bytes = t.read(response).await?;
        tracing::debug!(
            provider = %t.provider,
            response_bytes = bytes.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "{} response",
            D::NAME
        );
        self.dialect.parse(t, &bytes).map_err(|e| t.redact_error(e))
    }
}

#[async_trait]
impl<D: Dialect> ModelAdapter for HttpAdapter<D> {
    fn provider(&self) -> &str {
        &self.transport.provider
    }

    fn model_name(&self) -> &str {
        &self.transport.model
    }

    fn capabilities(&self) -> ModelCapabilities {
        self.dialect.capabilities(&self.transport)
    }

    fn context_window(&self) -> Option<u64> {
        self.dialect.context_window(&self.transport)
    }

    /// Sends one request, retrying retryable failures (429, 5xx, no HTTP answer) up to the
    /// builder's `max_retries` with exponential backoff, or the provider's own delay up to
    /// [`MAX_RETRY_DELAY`] (a longer one fails at once, the error carrying it).
    ///
    /// # Errors
    /// The dialect's mapping of an error answer (each adapter's module docs list them);
    /// [`ModelError::Transport`] naming the full URL when there was no HTTP answer; an error
    /// returned after retries says how many were made and over how many milliseconds
    /// (`gave up after 2 retries over 3012 ms`). Messages hold at most
    /// [`MAX_EXCERPT_BYTES`] of the provider's error text and never the API key.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the request (and any backoff wait); nothing is kept
    /// (a Gemini cached content being created may stay until its TTL ends).
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let t = &self.transport;
        let mut call = self.dialect.prepare(t, &request).await;
        let mut recovered = false;
        loop {
            // Written once; every attempt shares the bytes (reqwest takes `Bytes` as is).
            let body = self.dialect.body(t, &request, &call, false)?;
            let url = self.dialect.url(&call, false);
            let result = t.with_retries(|| self.unary(url, &body)).await;
            drop(body);
            match result {
                Ok(mut response) => {
                    self.dialect.finish(&call, &mut response);
                    return Ok(response);
                }
                Err(e) if !recovered && self.dialect.recover(t, &mut call, &e).await => {
                    recovered = true;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Streams one request: deltas as they arrive, then the assembled turn, equal to what
    /// [`generate`](Self::generate) returns for the same content.
    ///
    /// Retries follow `generate`'s policy but stop at the first byte of a 2xx body: once
    /// the stream has begun, a failure is returned, never retried behind the caller's back.
    /// A server that answers one JSON body instead of an event stream (it ignored
    /// `stream: true`) is read as a unary answer.
    ///
    /// # Errors
    /// - Before the stream: exactly those of [`generate`](Self::generate).
    /// - A 2xx answer that is not an event stream (a proxy's HTML page, JSON that is not
    ///   the provider's answer) → [`ModelError::InvalidResponse`] naming the URL, status,
    ///   content type and an excerpt (not retryable).
    /// - No event within the builder's `first_event_timeout` of the response, however many
    ///   keep-alive comments came → [`ModelError::Transport`] (retryable).
    /// - The connection failing mid-body, or the body ending before the dialect's last
    ///   event → [`ModelError::Truncated`] (retryable; the agent keeps nothing of the turn).
    /// - An error event → [`ModelError::Stream`] (status 200, the provider's type and code).
    ///
    /// # Cancel safety
    /// Dropping the stream closes the connection; nothing is kept.
    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        Box::pin(async_stream::stream! {
            let t = &self.transport;
            let started = Instant::now();
            let mut call = self.dialect.prepare(t, &request).await;
            let mut recovered = false;
            let opened = loop {
                let body = match self.dialect.body(t, &request, &call, true) {
                    Ok(body) => body,
                    Err(e) => {
                        yield Err(e);
                        return;
                    }
                };
                let url = self.dialect.url(&call, true);
                let result = t
                    .with_retries(|| t.send(Method::POST, url, Some(&body), EVENT_STREAM))
                    .await;
                // Sent: a copy the dialect keeps of the body (the chat-completions history)
                // is its only holder again, so the next request appends to it in place.
                drop(body);
                match result {
                    Err(e) if !recovered && self.dialect.recover(t, &mut call, &e).await => {
                        recovered = true;
                    }
                    result => break result,
                }
            };
            let response = match opened {
                Ok(response) => response,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            let bytes = match stream::open(t, response).await {
                stream::Opened::Events(bytes) => bytes,
                stream::Opened::Json { body, what } => {
                    match self.dialect.parse(t, &body) {
                        Ok(mut turn) => {
                            self.dialect.finish(&call, &mut turn);
                            for event in response_events(turn) {
                                yield Ok(event);
                            }
                        }
                        Err(ModelError::InvalidResponse(_)) => {
                            yield Err(stream::not_an_event_stream(&what, &body, t.secret()));
                        }
                        Err(e) => yield Err(t.redact_error(e)),
                    }
                    return;
                }
                stream::Opened::Failed(e) => {
                    yield Err(e);
                    return;
                }
            };
            let mut events = self.dialect.decode(t, bytes);
            let first = match stream::first_event(&mut events, t.first_event_timeout).await {
                Ok(first) => first,
                Err(limit) => {
                    yield Err(ModelError::Transport(format!(
                        "no stream event within {} ms of the response (the provider may be \
                         queueing the request); retry later or raise first_event_timeout",
                        limit.as_millis()
                    )));
                    return;
                }
            };
            tracing::debug!(
                provider = %t.provider,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "{} stream: first event",
                D::NAME
            );
            let rest = futures::stream::iter(first).chain(events);
            futures::pin_mut!(rest);
            while let Some(event) = rest.next().await {
                match event {
                    Ok(ModelStreamEvent::Finish(mut turn)) => {
                        self.dialect.finish(&call, &mut turn);
                        yield Ok(ModelStreamEvent::Finish(turn));
                    }
                    Ok(event) => yield Ok(event),
                    Err(e) => {
                        yield Err(t.redact_error(e));
                        return;
                    }
                }
            }
        })
    }
}
