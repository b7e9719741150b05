//! Anthropic's Messages API, plain and streaming, with explicit prompt-cache breakpoints.
//!
//! [`AnthropicAdapter`] implements [`ModelAdapter`](halo_core::ModelAdapter) over `POST {base_url}/v1/messages`
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
//! [`AnthropicAdapter`] is the crate's one HTTP adapter ([`HttpAdapter`]) over the
//! [`Messages`] dialect: sending, retries and stream reading live in
//! [`transport`](crate::transport).
//!
//! # Errors
//! - HTTP 400, 404, 413 → [`ModelError::InvalidRequest`], with its
//!   [`InvalidRequestKind`](halo_core::InvalidRequestKind) when the message names one
//!   (`prompt is too long`, a missing thinking block, an invalid `input_schema`); 401, 403 →
//!   [`ModelError::Authentication`]; 402 → [`ModelError::InsufficientBalance`]; none is
//!   retried.
//! - HTTP 429 → [`ModelError::RateLimited`]; 500, 502, 503, 504, 529 (`overloaded_error`)
//!   → [`ModelError::Server`]; both carry the `retry-after` delay and are retried with
//!   exponential backoff through [`backon`] up to [`MAX_RETRY_DELAY`] (a longer one fails
//!   at once). Other statuses → [`ModelError::Http`].
//! - A 2xx body that is not a message → [`ModelError::InvalidResponse`]; a 2xx body
//!   holding an error → [`ModelError::Stream`] (status 200, its `error.type`), as an
//!   `error` event would.
//! - Streaming: the body ending before `message_stop` and a `stop_reason` →
//!   [`ModelError::Truncated`]; an `error` event → [`ModelError::Stream`]: status 200 and
//!   its `error.type`; `overloaded_error`, `rate_limit_error`, `api_error` and
//!   `timeout_error` are retryable, `invalid_request_error` is an invalid request with the
//!   kind its message names, an unknown type neither.
//!
//! Messages hold Anthropic's `error.message` and `error.type`, at most
//! [`MAX_EXCERPT_BYTES`](crate::transport::MAX_EXCERPT_BYTES) of it. The API key lives in a
//! [`secrecy::SecretString`] and never appears in `Debug` output, logs or errors (error
//! texts are redacted for keys of at least
//! [`MIN_REDACTED_KEY_CHARS`](crate::transport::MIN_REDACTED_KEY_CHARS) characters).
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

use std::future::Future;

use bytes::Bytes;
use halo_core::{ModelCapabilities, ModelError, ModelEventStream, ModelRequest, ModelResponse};
use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

use crate::transport::{ByteStream, Dialect, HttpAdapter, Transport};

pub use crate::transport::{ConfigError, MAX_RETRY_DELAY};
pub use cache::{
    BlockLayout, Breakpoint, BreakpointPolicy, CacheMode, CacheTtl, DEFAULT_MIN_CACHEABLE_TOKENS,
    LOOKBACK_BLOCKS, MAX_BREAKPOINTS, MIN_CACHEABLE_TOKENS, estimate_tokens, min_cacheable_tokens,
    plan_breakpoints,
};
pub use config::{
    ANTHROPIC_DEFAULT_BASE_URL, ANTHROPIC_DEFAULT_MODEL, ANTHROPIC_VERSION, API_KEY_VAR,
    AnthropicBuilder, BASE_URL_VAR, DEFAULT_MAX_TOKENS, EXTENDED_CACHE_TTL_BETA, MODEL_VAR,
    MessagesSettings,
};
pub use request::{RAW_ARGUMENTS_KEY, REDACTED_THINKING_PREFIX};
pub use stream::decode_stream;

/// The provider name in tracing (`gen_ai.system`).
pub const PROVIDER: &str = "anthropic";

/// A Claude model behind Anthropic's Messages API (or a gateway speaking it): the HTTP
/// adapter over the [`Messages`] dialect.
///
/// Construct it with [`builder`](Self::builder) or [`from_env`](Self::from_env). Cheap to
/// clone; one HTTP connection pool per adapter (clones share it).
pub type AnthropicAdapter = HttpAdapter<Messages>;

/// Anthropic's Messages dialect (<https://platform.claude.com/docs/en/api/messages>): the
/// body with its `cache_control` breakpoints, messages and named events read, errors
/// mapped.
#[derive(Debug, Clone)]
pub struct Messages {
    pub(crate) endpoint: reqwest::Url,
    pub(crate) body: Map<String, Value>,
    pub(crate) max_tokens: u32,
    pub(crate) cache_mode: CacheMode,
    pub(crate) min_cacheable_tokens: u64,
}

impl HttpAdapter<Messages> {
    /// A builder for this model id; set the key with
    /// [`api_key`](crate::transport::HttpBuilder::api_key) or [`AnthropicBuilder::env`].
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
        self.dialect.endpoint.as_str()
    }

    /// The cache mode requests are built with.
    pub fn cache_mode(&self) -> CacheMode {
        self.dialect.cache_mode
    }

    /// The minimum cacheable length, in tokens, the breakpoint planner uses.
    pub fn min_cacheable_tokens(&self) -> u64 {
        self.dialect.min_cacheable_tokens
    }

    /// The exact body bytes [`generate`](halo_core::ModelAdapter::generate) would send for
    /// `request` (compact JSON), cache markers included. Useful to check cache stability
    /// without a server.
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
        self.dialect.body_bytes(&self.transport, request, false)
    }
}

impl Messages {
    fn body_bytes(
        &self,
        transport: &Transport,
        request: &ModelRequest<'_>,
        stream: bool,
    ) -> Result<Bytes, ModelError> {
        let cfg = request::RequestConfig {
            model: transport.model(),
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

impl Dialect for Messages {
    type Call = ();
    const ADAPTER: &'static str = "AnthropicAdapter";
    const NAME: &'static str = "messages";

    fn from_status(
        status: u16,
        headers: &HeaderMap,
        body: &[u8],
        secret: Option<&str>,
    ) -> ModelError {
        error::from_status(status, headers, body, secret)
    }

    /// Native structured output (`output_config.format`, JSON outputs:
    /// <https://platform.claude.com/docs/en/build-with-claude/structured-outputs>) on the
    /// Claude 4 models from 4.5 on, with or without tools ([`json_outputs`]); forced tool
    /// calls (`tool_choice` `any` / `tool`) on every model, except with extended thinking on,
    /// which the API refuses for them. No allowed-tools mechanism: active tools are enforced
    /// by the agent's error result only.
    fn capabilities(&self, transport: &Transport) -> ModelCapabilities {
        ModelCapabilities::new()
            .with_native_output_with_tools(json_outputs(transport.model()))
            .with_forced_tool(true)
    }

    fn prepare<'a>(
        &'a self,
        _: &'a Transport,
        _: &'a ModelRequest<'a>,
    ) -> impl Future<Output = ()> + Send + 'a {
        std::future::ready(())
    }

    fn url(&self, _: &(), _: bool) -> &reqwest::Url {
        &self.endpoint
    }

    fn body(
        &self,
        transport: &Transport,
        request: &ModelRequest<'_>,
        _: &(),
        stream: bool,
    ) -> Result<Bytes, ModelError> {
        self.body_bytes(transport, request, stream)
    }

    fn parse(&self, transport: &Transport, body: &[u8]) -> Result<ModelResponse, ModelError> {
        response::parse(body, transport.secret())
    }

    fn decode<'a>(&'a self, transport: &'a Transport, body: ByteStream) -> ModelEventStream<'a> {
        stream::decode_with(body, transport.secret())
    }
}
