//! Anthropic's Messages API, plain and streaming, with explicit prompt-cache breakpoints.
//!
//! [`AnthropicAdapter`] implements [`ModelAdapter`] over `POST {base_url}/v1/messages`
//! (<https://platform.claude.com/docs/en/api/messages>) with the `x-api-key` and
//! `anthropic-version: 2023-06-01` headers: `generate` reads one `message`; `stream` sends
//! `stream: true` and decodes the named server-sent events ([`decode_stream`], over the
//! shared [`sse`](crate::sse) layer).
//!
//! Anthropic caches only up to the `cache_control` markers a request carries, so this
//! adapter places them ([`CacheMode`]; the planner is [`plan_breakpoints`]):
//! - by default, explicit breakpoints on the end of the stable prefix (tools → system →
//!   few-shot turns) and on the newest message, plus one on the previous request's end
//!   when the 20-block lookback cannot reach it; none on a prefix shorter than the model's
//!   minimum cacheable length ([`min_cacheable_tokens`]);
//! - or Anthropic's automatic caching (one top-level `cache_control`), or nothing.
//!
//! | | Anthropic | Halo |
//! |---|---|---|
//! | input | `input_tokens` (uncached, after the last breakpoint) | `input_tokens` = that + cache reads + cache writes |
//! | cache reads | `cache_read_input_tokens` | `cache_read_tokens` |
//! | cache writes | `cache_creation_input_tokens` | `cache_write_tokens` |
//! | reasoning | `thinking` / `redacted_thinking` blocks | [`Reasoning`](halo_core::Reasoning) with the signature, replayed verbatim |
//! | tool results | `tool_result` blocks in the next user message | one [`ToolResult`](halo_core::ToolResult) message each |
//!
//! How messages map (role alternation, tool-result grouping, thinking replay) is described
//! in the `request` module's source and on [`AnthropicAdapter::request_body`].
//!
//! **A trimmed history.** A bounded [`MessageLog`](halo_core::MessageLog) evicts whole units
//! from the front, so after enough steps the history can open with an assistant turn
//! calling tools, the user's task gone. Anthropic wants the first message to use the `user`
//! role (HTTP 400 `invalid_request_error`, `messages: first message must use the "user"
//! role`, on Amazon Bedrock, and on the first-party API as reported until late 2024), so
//! the adapter then sends one user text block
//! [`TRIMMED_HISTORY_NOTE`](crate::TRIMMED_HISTORY_NOTE) before that turn, after the
//! few-shot turns. The text never changes: the same history gives the same bytes on every
//! call, so the cache keeps matching once the log has trimmed.
//!
//! Structured output: [`OutputMode::Auto`](halo_core::OutputMode::Auto) uses JSON outputs
//! (`output_config: {"format": {"type": "json_schema", "schema"}}`, the schema closed with
//! `additionalProperties: false`, unsupported bounds moved into descriptions) where
//! [`json_outputs`] says the model has them, else the output tool with `tool_choice:
//! {"type": "tool"}`. Anthropic has no allowed-tools mechanism: active tools leave the
//! request as it is (no active tool at all is `tool_choice: none`) and the agent answers a
//! call of an inactive tool with an error result. Changing `tool_choice` invalidates the
//! cached messages (tools and system stay cached), and `output_config` is observed to be
//! part of the cache key.
//!
//! Errors map to [`ModelError`] by HTTP status (see [`AnthropicAdapter::generate`]); 429,
//! 5xx and 529 (`overloaded_error`) are retried with exponential backoff through [`backon`],
//! honouring `retry-after` up to [`MAX_RETRY_DELAY`] (a longer one fails at once). The API key lives in a
//! [`secrecy::SecretString`] and never appears in `Debug` output, logs or errors (error
//! texts are redacted for keys of at least
//! [`MIN_REDACTED_KEY_CHARS`](crate::openai::MIN_REDACTED_KEY_CHARS) characters).
//!
//! ```no_run
//! use halo_adapters::anthropic::AnthropicAdapter;
//! use halo_core::HaloAgent;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // ANTHROPIC_API_KEY (required), ANTHROPIC_BASE_URL and ANTHROPIC_MODEL (optional).
//! let model = AnthropicAdapter::from_env()?;
//! let mut agent = HaloAgent::builder(model).system("You are terse.").build();
//! let out = agent.generate_text("Say hi.").await?;
//! println!(
//!     "{} ({} cached tokens read, {} written)",
//!     out.text, out.stats.cache_read_tokens, out.stats.cache_write_tokens
//! );
//! # Ok(()) }
//! ```

pub mod cache;
mod config;
mod error;
mod request;
mod response;
mod stream;

use std::fmt;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt as _;
use halo_core::{
    ModelAdapter, ModelCapabilities, ModelError, ModelEventStream, ModelRequest, ModelResponse,
    model::response_events,
};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};

use crate::http;

pub use crate::openai::{ConfigError, MAX_RETRY_DELAY};
pub use cache::{
    BlockLayout, Breakpoint, BreakpointPolicy, CacheMode, CacheTtl, DEFAULT_MIN_CACHEABLE_TOKENS,
    LOOKBACK_BLOCKS, MAX_BREAKPOINTS, MIN_CACHEABLE_TOKENS, estimate_tokens, min_cacheable_tokens,
    plan_breakpoints,
};
pub use config::{
    ANTHROPIC_DEFAULT_BASE_URL, ANTHROPIC_DEFAULT_MODEL, ANTHROPIC_VERSION, API_KEY_VAR,
    AnthropicBuilder, BASE_URL_VAR, DEFAULT_MAX_TOKENS, EXTENDED_CACHE_TTL_BETA, MODEL_VAR,
};
pub use request::{RAW_ARGUMENTS_KEY, REDACTED_THINKING_PREFIX};
pub use stream::decode_stream;

/// The provider name in tracing (`gen_ai.system`).
pub const PROVIDER: &str = "anthropic";

/// A Claude model behind Anthropic's Messages API (or a gateway speaking it).
///
/// Construct it with [`builder`](Self::builder) or [`from_env`](Self::from_env). Cheap to
/// clone; one HTTP connection pool per adapter (clones share it).
#[derive(Clone)]
pub struct AnthropicAdapter {
    pub(crate) model: String,
    pub(crate) endpoint: reqwest::Url,
    pub(crate) api_key: SecretString,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Map<String, Value>,
    pub(crate) client: reqwest::Client,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) retry_min_delay: Duration,
    pub(crate) max_tokens: u32,
    pub(crate) cache_mode: CacheMode,
    pub(crate) min_cacheable_tokens: u64,
}

impl fmt::Debug for AnthropicAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicAdapter")
            .field("model", &self.model)
            .field("endpoint", &self.endpoint.as_str())
            .field("api_key", &"[redacted]")
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("max_tokens", &self.max_tokens)
            .field("cache_mode", &self.cache_mode)
            .field("min_cacheable_tokens", &self.min_cacheable_tokens)
            .field("max_retries", &self.max_retries)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl AnthropicAdapter {
    /// A builder for this model id; set the key with [`AnthropicBuilder::api_key`] or
    /// [`AnthropicBuilder::env`].
    pub fn builder(model: impl Into<String>) -> AnthropicBuilder {
        AnthropicBuilder::new(model.into())
    }

    /// From the environment: `ANTHROPIC_API_KEY` (required), `ANTHROPIC_BASE_URL`
    /// (optional, default [`ANTHROPIC_DEFAULT_BASE_URL`]) and `ANTHROPIC_MODEL` (optional,
    /// default [`ANTHROPIC_DEFAULT_MODEL`]); everything else at its default.
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `ANTHROPIC_API_KEY` is unset or empty; the
    /// [`AnthropicBuilder::build`] errors.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_env_with(|v| std::env::var(v).ok())
    }

    /// [`from_env`](Self::from_env) with the variables read through `lookup`.
    ///
    /// # Errors
    /// As [`from_env`](Self::from_env).
    pub fn from_env_with(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::builder(ANTHROPIC_DEFAULT_MODEL)
            .model_from_env(&lookup)
            .env_from(&lookup)?
            .build()
    }

    /// The full URL requests go to (`{base_url}/v1/messages`).
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// The cache mode requests are built with.
    pub fn cache_mode(&self) -> CacheMode {
        self.cache_mode
    }

    /// The minimum cacheable length, in tokens, the breakpoint planner uses.
    pub fn min_cacheable_tokens(&self) -> u64 {
        self.min_cacheable_tokens
    }

    /// The exact body bytes [`generate`](ModelAdapter::generate) would send for `request`
    /// (compact JSON), cache markers included. Useful to check cache stability without a
    /// server.
    ///
    /// The mapping: `tools` with `input_schema`; `system` as text blocks (the prefix's
    /// system text, then few-shot `System` messages); the few-shot turns and the history
    /// as alternating `user` / `assistant` messages (same-role neighbours merged), each run
    /// of tool results as `tool_result` blocks (call order, `is_error` kept) at the start
    /// of the next user message; thinking blocks replayed before the text and `tool_use`
    /// blocks of their turn, and a turn that would hold only thinking left out; a history
    /// that opens with an assistant turn preceded by the user text
    /// [`TRIMMED_HISTORY_NOTE`](crate::TRIMMED_HISTORY_NOTE);
    /// `max_tokens` from the options or the builder's default; `tool_choice` only when not
    /// `auto`; a JSON Schema response format as `output_config.format`; `stop` as
    /// `stop_sequences`; `seed` is not sent (the API has none).
    ///
    /// # Errors
    /// [`ModelError::Unsupported`] for a request with no message to send, or a JSON
    /// response format without a schema.
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Result<Bytes, ModelError> {
        self.body_bytes(request, false)
    }

    fn body_bytes(&self, request: &ModelRequest<'_>, stream: bool) -> Result<Bytes, ModelError> {
        let cfg = request::RequestConfig {
            model: &self.model,
            max_tokens: self.max_tokens,
            cache_mode: self.cache_mode,
            min_cacheable_tokens: self.min_cacheable_tokens,
            extra: &self.body,
        };
        let body = request::build(cfg, request, stream)?;
        serde_json::to_vec(&body)
            .map(Bytes::from)
            .map_err(|e| ModelError::Other(format!("cannot serialize the request body: {e}")))
    }

    fn secret(&self) -> Option<&str> {
        Some(self.api_key.expose_secret())
    }

    /// One POST of `body`. A non-2xx answer is read whole and mapped to its error; a 2xx
    /// answer is returned with its body unread. `body` is shared, not copied, by each attempt.
    async fn send(
        &self,
        body: &Bytes,
        accept: &'static str,
    ) -> Result<reqwest::Response, ModelError> {
        let mut key = HeaderValue::from_str(self.api_key.expose_secret())
            .map_err(|_| ModelError::Other("the API key is not a valid header value".into()))?;
        key.set_sensitive(true);
        let builder = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(HeaderName::from_static("x-api-key"), key)
            .header(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(ANTHROPIC_VERSION),
            )
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(ACCEPT, HeaderValue::from_static(accept))
            .body(body.clone());
        tracing::debug!(
            provider = PROVIDER,
            model = %self.model,
            url = %self.endpoint,
            request_bytes = body.len(),
            "messages request"
        );
        self.exchange().send(builder).await
    }

    /// One attempt: POST the body, read and map the answer.
    async fn send_once(&self, body: &Bytes) -> Result<ModelResponse, ModelError> {
        let started = Instant::now();
        let response = self.send(body, "application/json").await?;
        let bytes = self.exchange().body(response).await?;
        tracing::debug!(
            provider = PROVIDER,
            response_bytes = bytes.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "messages response"
        );
        response::parse(&bytes, self.secret())
    }

    /// How this adapter's requests are sent and their failures reported.
    fn exchange(&self) -> http::Exchange<'_> {
        http::Exchange {
            provider: PROVIDER,
            what: "messages",
            timeout: self.timeout,
            secret: self.secret(),
            from_status: error::from_status,
            retrying: "messages request",
            max_retries: self.max_retries,
            retry_min_delay: self.retry_min_delay,
        }
    }

    /// The streaming call: open the stream (with retries, which end at the first byte of a
    /// 2xx body), then decode it.
    fn stream_events<'a>(&'a self, body: Bytes) -> ModelEventStream<'a> {
        Box::pin(async_stream::stream! {
            let opened = self
                .exchange()
                .with_retries(|| self.send(&body, "text/event-stream"))
                .await;
            let response = match opened {
                Ok(r) => r,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            let exchange = self.exchange();
            if http::is_json(&response) {
                // A gateway that ignored `stream: true` answered with one message.
                let parsed = exchange
                    .body(response)
                    .await
                    .and_then(|b| response::parse(&b, self.secret()));
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
            let mut events = stream::decode_with(exchange.body_stream(response), self.secret());
            while let Some(event) = events.next().await {
                let failed = event.is_err();
                yield event;
                if failed {
                    return;
                }
            }
        })
    }
}

/// Whether the model takes JSON outputs (`output_config.format`): the Claude 4 models from
/// 4.5 on (`claude-sonnet-4-5`, `claude-opus-4-6-…`, `claude-haiku-4-5-…`), where the
/// structured-outputs guide lists them as generally available. Older ids, and ids this
/// rule does not know, get the output tool instead.
pub fn json_outputs(model: &str) -> bool {
    let Some(rest) = model.strip_prefix("claude-") else {
        return false;
    };
    let mut numbers = rest
        .split(['-', '.'])
        .skip_while(|part| part.parse::<u32>().is_err())
        .map_while(|part| part.parse::<u32>().ok());
    matches!((numbers.next(), numbers.next()), (Some(4), Some(minor)) if (5..100).contains(&minor))
}

#[async_trait]
impl ModelAdapter for AnthropicAdapter {
    fn provider(&self) -> &str {
        PROVIDER
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    /// Native structured output (`output_config.format`, JSON outputs:
    /// <https://platform.claude.com/docs/en/build-with-claude/structured-outputs>) on the
    /// Claude 4 models from 4.5 on, with or without tools ([`json_outputs`]); forced tool
    /// calls (`tool_choice` `any` / `tool`) on every model, except with extended thinking on,
    /// which the API refuses for them. No allowed-tools mechanism: active tools are enforced
    /// by the agent's error result only.
    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities::new()
            .with_native_output_with_tools(json_outputs(&self.model))
            .with_forced_tool(true)
    }

    /// The model's window from the per-model table ([`crate::window`]); `None` for an id
    /// it does not know.
    fn context_window(&self) -> Option<u64> {
        crate::window::context_window(&self.model)
    }

    /// Sends one Messages request, retrying retryable failures.
    ///
    /// # Errors
    /// - HTTP 400, 404, 413 → [`ModelError::InvalidRequest`], with its
    ///   [`InvalidRequestKind`](halo_core::InvalidRequestKind) when the message names one
    ///   (`prompt is too long`, a missing thinking block, an invalid `input_schema`); 401,
    ///   403 → [`ModelError::Authentication`]; 402 → [`ModelError::InsufficientBalance`];
    ///   none is retried.
    /// - HTTP 429 → [`ModelError::RateLimited`]; 500, 502, 503, 504, 529 →
    ///   [`ModelError::Server`]; both carry the `retry-after` delay and are retried up to
    ///   `max_retries` times first. Other statuses → [`ModelError::Http`].
    /// - No HTTP answer (refused, reset, timed out) → [`ModelError::Transport`] naming the
    ///   full URL, retried. An error returned after retries says how many were made and
    ///   over how many milliseconds (`gave up after 2 retries over 3012 ms`).
    /// - A 2xx body that is not a message → [`ModelError::InvalidResponse`]; a 2xx body
    ///   holding an error → [`ModelError::Stream`] (status 200, its `error.type`), as an
    ///   `error` event would.
    /// - Content that cannot be sent → [`ModelError::Unsupported`] (see
    ///   [`request_body`](Self::request_body)).
    ///
    /// Messages hold Anthropic's `error.message` and `error.type`, at most
    /// [`MAX_EXCERPT_BYTES`](crate::openai::MAX_EXCERPT_BYTES) of it, and never the API key.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the request (and any backoff wait); nothing is kept.
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let body = self.body_bytes(&request, false)?;
        self.exchange().with_retries(|| self.send_once(&body)).await
    }

    /// Streams one Messages request (`stream: true`): text, thinking and tool-call deltas as
    /// they arrive, then the assembled turn, equal to what [`generate`](Self::generate)
    /// returns for the same content (see [`decode_stream`] for how events are read).
    ///
    /// Retries follow `generate`'s policy but stop at the first byte of a 2xx body: once the
    /// stream has begun, a failure is returned, never retried behind the caller's back.
    ///
    /// # Errors
    /// - Before the stream: exactly those of [`generate`](Self::generate).
    /// - The connection failing mid-body, or the body ending before `message_stop` and a
    ///   `stop_reason` → [`ModelError::Truncated`] (retryable; the agent keeps nothing).
    /// - An `error` event → [`ModelError::Stream`]: status 200 and its `error.type`, so a
    ///   caller can tell it from the same error answered before the stream;
    ///   `overloaded_error`, `rate_limit_error`, `api_error` and `timeout_error` are
    ///   retryable, `invalid_request_error` is an invalid request with the kind its message
    ///   names, an unknown type neither.
    /// - Data that is not JSON → [`ModelError::InvalidResponse`].
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
