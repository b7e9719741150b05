//! OpenAI-compatible chat completions, plain and streaming: OpenAI, DeepSeek, and any
//! compatible server (llama.cpp `llama-server`, Ollama, vLLM) by base URL.
//!
//! [`OpenAiCompatible`] implements [`ModelAdapter`] over `POST {base_url}/chat/completions`
//! (<https://platform.openai.com/docs/api-reference/chat/create>): `generate` sends one
//! request and reads one `chat.completion`; `stream` sends `stream: true` with
//! `stream_options.include_usage` and decodes the server-sent `chat.completion.chunk`s
//! ([`decode_stream`], over the shared [`sse`](crate::sse) layer) into deltas and the same
//! assembled turn `generate` would return. Vendors differ only by [`Profile`]:
//!
//! | | OpenAI | DeepSeek | Custom |
//! |---|---|---|---|
//! | key | `OPENAI_API_KEY` | `DEEPSEEK_API_KEY` | optional |
//! | base URL | `OPENAI_BASE_URL` or [`OPENAI_DEFAULT_BASE_URL`] | `DEEPSEEK_BASE_URL` or [`DEEPSEEK_DEFAULT_BASE_URL`] | required |
//! | cache routing | `prompt_cache_key` = session id, else prefix fingerprint | automatic | automatic |
//! | cache reads | `usage.prompt_tokens_details.cached_tokens` | `usage.prompt_cache_hit_tokens` | `cached_tokens`, llama.cpp `timings.cache_n`, else unknown |
//! | reasoning replay | never | `reasoning_content` on every assistant message (`""` where none) | never |
//! | structured output ([`OutputMode::Auto`](halo_core::OutputMode::Auto)) | native (`json_schema`, strict when the schema allows), with tools too | prompted (`json_object` only; thinking mode refuses a forced tool) | native without tools, else prompted |
//! | active tools | `tool_choice: {"type": "allowed_tools", ...}` | plain `tool_choice` (the agent answers inactive calls) | plain `tool_choice` |
//!
//! Cache-first rules this adapter keeps:
//! - The system message, the few-shot turns and the `tools` array come from the
//!   [`StablePrefix`](halo_core::StablePrefix) and are serialized byte-identically on every
//!   request; the history is appended after them, rendered the same way each time.
//! - Tool-call arguments are replayed byte for byte as the model sent them
//!   ([`ToolCall::replay_arguments`](halo_core::ToolCall::replay_arguments): `""` becomes `"{}"`).
//! - Usage the server did not report stays `None`, never `0`.
//!
//! Errors map to [`ModelError`] by HTTP status (see [`OpenAiCompatible::generate`]);
//! retryable ones (429, 5xx, transport) are retried with exponential backoff through
//! [`backon`], honouring `retry-after-ms` / `retry-after` up to [`MAX_RETRY_DELAY`] (a
//! longer delay fails at once, the error carrying it).
//! The API key lives in a [`secrecy::SecretString`] and never appears in `Debug` output,
//! logs or errors (error texts are redacted for keys of at least [`MIN_REDACTED_KEY_CHARS`]
//! characters; a shorter placeholder key is left in place rather than cut out of words).
//!
//! ```no_run
//! use halo_adapters::openai::OpenAiCompatible;
//! use halo_core::HaloAgent;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // DEEPSEEK_API_KEY (required), DEEPSEEK_BASE_URL and DEEPSEEK_MODEL (optional).
//! let model = OpenAiCompatible::deepseek_from_env()?;
//! let mut agent = HaloAgent::builder(model).system("You are terse.").build();
//! let out = agent.generate_text("Say hi.").await?;
//! println!("{} ({} cached tokens)", out.text, out.stats.cache_read_tokens);
//! # Ok(()) }
//! ```

mod config;
pub(crate) mod error;
mod history;
mod request;
mod response;
mod stream;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::StreamExt as _;
use halo_core::{
    ModelAdapter, ModelCapabilities, ModelError, ModelEventStream, ModelRequest, ModelResponse,
    model::response_events,
};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};

use crate::http;

pub use crate::http::{MAX_EXCERPT_BYTES, MIN_REDACTED_KEY_CHARS};
pub use config::{
    ConfigError, DEEPSEEK_DEFAULT_BASE_URL, DEEPSEEK_DEFAULT_MODEL, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_RETRIES, DEFAULT_RETRY_MIN_DELAY, DEFAULT_TIMEOUT, MAX_RETRY_DELAY,
    OPENAI_DEFAULT_BASE_URL, OPENAI_DEFAULT_MODEL, OpenAiBuilder, Profile, ReasoningReplay,
};
pub use stream::decode_stream;

/// A chat model behind an OpenAI-compatible `/chat/completions` endpoint.
///
/// Construct it with a builder ([`openai`](Self::openai), [`deepseek`](Self::deepseek),
/// [`custom`](Self::custom)) or from the environment ([`openai_from_env`](Self::openai_from_env),
/// [`deepseek_from_env`](Self::deepseek_from_env)). Cheap to clone; one
/// HTTP connection pool per adapter (clones share it).
#[derive(Clone)]
pub struct OpenAiCompatible {
    pub(crate) profile: Profile,
    pub(crate) provider: String,
    pub(crate) model: String,
    pub(crate) endpoint: reqwest::Url,
    pub(crate) api_key: Option<SecretString>,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Map<String, Value>,
    pub(crate) client: reqwest::Client,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) retry_min_delay: Duration,
    pub(crate) reasoning_replay: ReasoningReplay,
    pub(crate) prompt_cache_key: bool,
    pub(crate) first_event_timeout: Option<Duration>,
    /// The length of the last body serialized, to size the next one's buffer (a session's
    /// bodies only grow): no regrowth copies while it is written. Shared by clones.
    pub(crate) body_len_hint: Arc<AtomicUsize>,
    /// The last prefix's share of a body, serialized once per prefix fingerprint
    /// ([`request::PrefixWire`]). Shared by clones.
    pub(crate) prefix_wire: Arc<Mutex<Option<Arc<request::PrefixWire>>>>,
    /// The last bodies of a few histories, so a request whose history extends one writes
    /// only its new messages ([`history::Histories`]). Shared by clones.
    pub(crate) histories: Arc<history::Histories>,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("profile", &self.profile)
            .field("model", &self.model)
            .field("endpoint", &self.endpoint.as_str())
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("max_retries", &self.max_retries)
            .field("timeout", &self.timeout)
            .field("reasoning_replay", &self.reasoning_replay)
            .field("prompt_cache_key", &self.prompt_cache_key)
            .field("first_event_timeout", &self.first_event_timeout)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatible {
    /// A builder for any profile; the model id is set with [`OpenAiBuilder::model`].
    pub fn builder(profile: Profile) -> OpenAiBuilder {
        let model = match profile {
            Profile::OpenAi => OPENAI_DEFAULT_MODEL,
            Profile::DeepSeek => DEEPSEEK_DEFAULT_MODEL,
            Profile::Custom => "",
        };
        OpenAiBuilder::new(profile, model.to_string())
    }

    /// A builder for OpenAI with this model id; set the key with [`OpenAiBuilder::api_key`]
    /// or [`OpenAiBuilder::env`].
    pub fn openai(model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder::new(Profile::OpenAi, model.into())
    }

    /// A builder for DeepSeek with this model id ([`DEEPSEEK_DEFAULT_MODEL`] is
    /// `deepseek-chat`); set the key with [`OpenAiBuilder::api_key`] or [`OpenAiBuilder::env`].
    pub fn deepseek(model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder::new(Profile::DeepSeek, model.into())
    }

    /// A builder for a compatible server at `base_url` (which ends before
    /// `/chat/completions`, such as `http://127.0.0.1:8080/v1`). No key is needed.
    pub fn custom(base_url: impl Into<String>, model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder::new(Profile::Custom, model.into()).base_url(base_url)
    }

    /// OpenAI from the environment: `OPENAI_API_KEY` (required), `OPENAI_BASE_URL`
    /// (optional, for proxies and compatible servers) and `OPENAI_MODEL` (optional, default
    /// [`OPENAI_DEFAULT_MODEL`]).
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `OPENAI_API_KEY` is unset or empty; the
    /// [`OpenAiBuilder::build`] errors.
    pub fn openai_from_env() -> Result<Self, ConfigError> {
        Self::from_env_with(Profile::OpenAi, |v| std::env::var(v).ok())
    }

    /// DeepSeek from the environment: `DEEPSEEK_API_KEY` (required), `DEEPSEEK_BASE_URL`
    /// (optional, for proxies and gateways) and `DEEPSEEK_MODEL` (optional, default
    /// [`DEEPSEEK_DEFAULT_MODEL`]).
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `DEEPSEEK_API_KEY` is unset or empty; the
    /// [`OpenAiBuilder::build`] errors.
    pub fn deepseek_from_env() -> Result<Self, ConfigError> {
        Self::from_env_with(Profile::DeepSeek, |v| std::env::var(v).ok())
    }

    /// The `*_from_env` constructors with the variables read through `lookup`.
    ///
    /// # Errors
    /// As [`openai_from_env`](Self::openai_from_env); [`ConfigError::MissingBaseUrl`] for
    /// [`Profile::Custom`], which has no variables.
    pub fn from_env_with(
        profile: Profile,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::builder(profile)
            .model_from_env(&lookup)
            .env_from(&lookup)?
            .build()
    }

    /// The profile this adapter was built with.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The full URL requests go to (`{base_url}/chat/completions`).
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// The exact body bytes [`generate`](ModelAdapter::generate) would send for `request`
    /// (compact JSON), as it sends them: shared, not copied. Useful to check cache stability
    /// without a server.
    ///
    /// Like `generate`, it writes only the new messages of a history that extends one the
    /// adapter wrote before ([`ModelRequest::history_key`]; see `history.rs`), and keeps
    /// this body for the next; the bytes are those of a body written anew.
    ///
    /// # Errors
    /// [`ModelError::Unsupported`] for content the profile cannot send (images or a JSON
    /// Schema response format on DeepSeek).
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Result<Bytes, ModelError> {
        self.body_bytes(request, false)
    }

    /// The turn [`generate`](ModelAdapter::generate) returns for `body`, a 2xx answer's
    /// body (one `chat.completion`). With [`request_body`](Self::request_body), the whole
    /// of `generate` but the HTTP exchange: for benchmarks and tests without a server.
    ///
    /// # Errors
    /// [`ModelError::InvalidResponse`] when the body is not a chat completion;
    /// [`ModelError::Truncated`] for DeepSeek's `insufficient_system_resource` finish reason.
    pub fn parse_response(&self, body: &[u8]) -> Result<ModelResponse, ModelError> {
        response::parse(body).map_err(|e| self.redact(e))
    }

    fn request_config(&self) -> request::RequestConfig<'_> {
        request::RequestConfig {
            profile: self.profile,
            model: &self.model,
            reasoning_replay: self.reasoning_replay,
            prompt_cache_key: self.prompt_cache_key,
            extra: &self.body,
        }
    }

    /// The body of `request`: the head, the history's messages and the tail, the messages
    /// an earlier body of the same history carried taken from it as they were written.
    fn body_bytes(&self, request: &ModelRequest<'_>, stream: bool) -> Result<Bytes, ModelError> {
        let prefix = self.prefix_wire(request.prefix)?;
        let fingerprint = prefix.fingerprint();
        let body = request::build(self.request_config(), &prefix, request, stream)?;
        let key = request.history_key();
        let start = key
            .as_ref()
            .and_then(|k| self.histories.take(k, fingerprint, body.note()));
        let (mut out, mut ends, from) = match start {
            Some(start) => (start.out, start.ends, start.from),
            None => {
                let hint = self.body_len_hint.load(Ordering::Relaxed);
                // Room for the last body and what a step adds to it.
                let mut out = BytesMut::with_capacity(hint + hint / 8 + 4096);
                body.write_head(&mut out)?;
                (out, Vec::with_capacity(body.history_len()), 0)
            }
        };
        body.write_messages(&mut out, from, &mut ends)?;
        body.write_tail(&mut out)?;
        let bytes = out.freeze();
        self.body_len_hint.store(bytes.len(), Ordering::Relaxed);
        if let Some(key) = key {
            self.histories.keep(history::Kept {
                key,
                fingerprint,
                note: body.note(),
                body: bytes.clone(),
                ends,
            });
        }
        Ok(bytes)
    }

    /// `prefix`'s share of a body: the one serialized last when its fingerprint is the
    /// same, else serialized now and kept (one prefix is kept: agents that share an adapter
    /// with different prefixes serialize theirs on each call, as before).
    fn prefix_wire(
        &self,
        prefix: &halo_core::StablePrefix,
    ) -> Result<Arc<request::PrefixWire>, ModelError> {
        let fingerprint = prefix.fingerprint();
        let mut kept = self
            .prefix_wire
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(wire) = kept.as_ref().filter(|w| w.fingerprint() == fingerprint) {
            return Ok(wire.clone());
        }
        let wire = Arc::new(request::PrefixWire::new(self.request_config(), prefix)?);
        *kept = Some(wire.clone());
        Ok(wire)
    }

    fn secret(&self) -> Option<&str> {
        self.api_key.as_ref().map(|k| k.expose_secret())
    }

    /// How this adapter's requests are sent and their failures reported.
    fn exchange(&self) -> http::Exchange<'_> {
        http::Exchange {
            provider: &self.provider,
            what: "chat completion",
            timeout: self.timeout,
            secret: self.secret(),
            from_status: error::from_status,
            retrying: "chat completion",
            max_retries: self.max_retries,
            retry_min_delay: self.retry_min_delay,
        }
    }

    /// One POST of `body`. A non-2xx answer is read whole and mapped to its error; a 2xx
    /// answer is returned with its body unread. `body` is shared, not copied, by each attempt.
    async fn send(
        &self,
        body: &Bytes,
        accept: &'static str,
    ) -> Result<reqwest::Response, ModelError> {
        let mut builder = self.client.post(self.endpoint.clone());
        if !self.headers.is_empty() {
            builder = builder.headers(self.headers.clone());
        }
        builder = builder
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(ACCEPT, HeaderValue::from_static(accept))
            .body(body.clone());
        if let Some(key) = &self.api_key {
            // reqwest marks the header sensitive, so its Debug output hides it too.
            builder = builder.bearer_auth(key.expose_secret());
        }
        tracing::debug!(
            provider = %self.provider,
            model = %self.model,
            url = %self.endpoint,
            request_bytes = body.len(),
            "chat completion request"
        );
        self.exchange().send(builder).await
    }

    /// One attempt: POST the body, read and map the answer.
    async fn send_once(&self, body: &Bytes) -> Result<ModelResponse, ModelError> {
        let started = Instant::now();
        let response = self.send(body, "application/json").await?;
        let status = response.status().as_u16();
        let bytes = self.exchange().body(response).await?;
        tracing::debug!(
            provider = %self.provider,
            status,
            response_bytes = bytes.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "chat completion response"
        );
        response::parse(&bytes).map_err(|e| self.redact(e))
    }

    /// The API key removed from an error's message (some servers echo request headers).
    fn redact(&self, e: ModelError) -> ModelError {
        http::map_message(e, |m| http::redact(m, self.secret()))
    }

    /// The streaming call: open the stream (with retries, which end at the first byte of a
    /// 2xx body), then decode it.
    fn stream_events<'a>(&'a self, body: Bytes) -> ModelEventStream<'a> {
        Box::pin(async_stream::stream! {
            let started = Instant::now();
            let opened = self
                .exchange()
                .with_retries(|| self.send(&body, "text/event-stream"))
                .await;
            // Sent: the adapter's kept copy of the history is the body's only holder again,
            // so the next request appends to it in place.
            drop(body);
            let response = match opened {
                Ok(r) => r,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            let exchange = self.exchange();
            if http::is_json(&response) {
                // A server that ignored `stream: true` answered with one chat.completion.
                let parsed = exchange
                    .body(response)
                    .await
                    .and_then(|b| response::parse(&b))
                    .map_err(|e| self.redact(e));
                match parsed {
                    Ok(turn) => {
                        for event in response_events(turn) {
                            yield Ok(event);
                        }
                    }
                    Err(e) => yield Err(e),
                }
                return;
            }
            let mut events = decode_stream(exchange.body_stream(response));
            let first = match http::first_event(&mut events, self.first_event_timeout).await {
                Ok(first) => first,
                Err(limit) => {
                    yield Err(ModelError::Transport(format!(
                        "no stream event within {} ms of the response (the provider may be queueing the request); retry later or raise first_event_timeout",
                        limit.as_millis()
                    )));
                    return;
                }
            };
            tracing::debug!(
                provider = %self.provider,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "chat completion stream: first event"
            );
            let rest = futures::stream::iter(first).chain(events);
            futures::pin_mut!(rest);
            while let Some(event) = rest.next().await {
                match event {
                    Ok(event) => yield Ok(event),
                    Err(e) => {
                        yield Err(self.redact(e));
                        return;
                    }
                }
            }
        })
    }
}

#[async_trait]
impl ModelAdapter for OpenAiCompatible {
    fn provider(&self) -> &str {
        &self.provider
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    /// By profile:
    /// - OpenAI: native structured output with and without tools
    ///   (<https://platform.openai.com/docs/guides/structured-outputs>), forced tool calls,
    ///   `allowed_tools`.
    /// - DeepSeek: none — `response_format` is `json_object` only
    ///   (<https://api-docs.deepseek.com/guides/json_mode>), and thinking mode (the default)
    ///   answers a `required` or named `tool_choice` with HTTP 400, so object runs prompt.
    /// - Custom (llama.cpp, vLLM, Ollama): native output in a request without tools
    ///   (their `json_schema` response formats become a grammar, which does not combine
    ///   with tool calls everywhere); nothing else is assumed.
    fn capabilities(&self) -> ModelCapabilities {
        let none = ModelCapabilities::new();
        match self.profile {
            Profile::OpenAi => none
                .with_native_output_with_tools(true)
                .with_forced_tool(true)
                .with_allowed_tools(true),
            Profile::DeepSeek => none,
            _ => none.with_native_output(true),
        }
    }

    /// The model's window from the per-model table ([`crate::window`]); `None` for an id
    /// it does not know.
    fn context_window(&self) -> Option<u64> {
        crate::window::context_window(&self.model)
    }

    /// Sends one chat-completions request, retrying retryable failures.
    ///
    /// # Errors
    /// - HTTP 400, 422 → [`ModelError::InvalidRequest`], with its
    ///   [`InvalidRequestKind`](halo_core::InvalidRequestKind) when the code or message
    ///   names one (OpenAI `context_length_exceeded`, DeepSeek's "maximum context length"
    ///   and reasoning replay, llama.cpp `exceed_context_size_error`, OpenAI
    ///   `invalid_function_parameters`); 401, 403 → [`ModelError::Authentication`]; 402, or
    ///   429 with `insufficient_quota` → [`ModelError::InsufficientBalance`] (not retryable).
    /// - HTTP 429 → [`ModelError::RateLimited`]; 500, 502, 503, 504, 529 →
    ///   [`ModelError::Server`]; both carry the `retry-after-ms` / `retry-after` delay and
    ///   are retried up to `max_retries` times first. Other statuses → [`ModelError::Http`].
    /// - No HTTP answer (refused, reset, timed out) → [`ModelError::Transport`] naming the
    ///   full URL, retried. An error returned after retries says how many were made and
    ///   over how many milliseconds (`gave up after 2 retries over 3012 ms`).
    /// - A 2xx body that is not a chat completion → [`ModelError::InvalidResponse`].
    /// - Content the profile cannot send → [`ModelError::Unsupported`].
    ///
    /// Messages hold at most [`MAX_EXCERPT_BYTES`] of the provider's error text and never
    /// the API key.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the request (and any backoff wait); nothing is kept.
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        // Written once; every attempt shares the bytes (reqwest takes `Bytes` as is).
        let body = self.body_bytes(&request, false)?;
        self.exchange().with_retries(|| self.send_once(&body)).await
    }

    /// Streams one chat-completions request (`stream: true`,
    /// `stream_options: {"include_usage": true}`): text, reasoning and tool-call deltas as
    /// they arrive, then the assembled turn, equal to what [`generate`](Self::generate)
    /// returns for the same content (see [`decode_stream`] for how chunks are read).
    ///
    /// Retries follow `generate`'s policy but stop at the first byte of a 2xx body: once the
    /// stream has begun, a failure is returned, never retried behind the caller's back. A
    /// server that answers `application/json` instead of an event stream is read as one
    /// `chat.completion`.
    ///
    /// # Errors
    /// - Before the stream: exactly those of [`generate`](Self::generate).
    /// - The connection failing or timing out mid-body, the body ending mid-event or before
    ///   a `finish_reason` / `[DONE]`, and DeepSeek's `insufficient_system_resource` finish
    ///   reason → [`ModelError::Truncated`] (retryable; the agent keeps nothing of the turn).
    /// - No event within the builder's
    ///   [`first_event_timeout`](OpenAiBuilder::first_event_timeout) of the response, however
    ///   many keep-alive comments came → [`ModelError::Transport`] (retryable).
    /// - An error event mid-stream (`{"error": …}`, `event: error`, or old llama.cpp's
    ///   `error:` line) → [`ModelError::Stream`]: status 200, the error's `type` and `code`
    ///   as sent, retryable when they name an overload, a rate limit or a server error
    ///   (`server_error`, `overloaded_error`, a numeric 5xx), an invalid request (with its
    ///   kind, such as llama.cpp's `exceed_context_size_error`) when they name a 400.
    /// - Data that is not a chunk → [`ModelError::InvalidResponse`].
    ///
    /// # Cancel safety
    /// Dropping the stream closes the connection; nothing is kept.
    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        match self.body_bytes(&request, true) {
            Ok(body) => self.stream_events(body),
            Err(e) => Box::pin(futures::stream::once(async move { Err(e) })),
        }
    }
}
