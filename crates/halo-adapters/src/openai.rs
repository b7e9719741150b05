//! OpenAI-compatible chat completions, plain and streaming: OpenAI, DeepSeek, and any
//! compatible server (llama.cpp `llama-server`, Ollama, vLLM) by base URL.
//!
//! [`OpenAiCompatible`] implements [`ModelAdapter`](halo_core::ModelAdapter) over `POST {base_url}/chat/completions`
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
//! | reasoning setting ([`GenerationOptions::reasoning`](halo_core::GenerationOptions)) | `reasoning_effort` | `deepseek-chat` becomes `deepseek-reasoner`; other models `reasoning_effort` | not sent |
//! | GPT-5.6+ explicit caching | [`OpenAiBuilder::prompt_cache`]: `prompt_cache_options` and the breakpoints of [`plan_breakpoints`] | — | — |
//!
//! Cache-first rules this adapter keeps:
//! - The system message, the few-shot turns and the `tools` array come from the
//!   [`StablePrefix`] and are serialized byte-identically on every
//!   request; the history is appended after them, rendered the same way each time.
//! - Tool-call arguments are replayed byte for byte as the model sent them
//!   ([`ToolCall::replay_arguments`](halo_core::ToolCall::replay_arguments): `""` becomes `"{}"`).
//! - Usage the server did not report stays `None`, never `0`.
//!
//! [`OpenAiCompatible`] is the crate's one HTTP adapter ([`HttpAdapter`]) over the
//! [`ChatCompletions`] dialect: sending, retries and stream reading live in
//! [`transport`](crate::transport), this module only builds bodies, reads answers and maps
//! errors.
//!
//! # Errors
//! - HTTP 400, 422 → [`ModelError::InvalidRequest`], with its
//!   [`InvalidRequestKind`](halo_core::InvalidRequestKind) when the code or message names
//!   one (OpenAI `context_length_exceeded`, DeepSeek's "maximum context length" and
//!   reasoning replay, llama.cpp `exceed_context_size_error`, OpenAI
//!   `invalid_function_parameters`); 401, 403 → [`ModelError::Authentication`]; 402, or 429
//!   with `insufficient_quota` → [`ModelError::InsufficientBalance`] (not retryable).
//! - HTTP 429 → [`ModelError::RateLimited`]; 500, 502, 503, 504, 529 →
//!   [`ModelError::Server`]; both carry the `retry-after-ms` / `retry-after` delay and are
//!   retried with exponential backoff through [`backon`] up to [`MAX_RETRY_DELAY`] (a
//!   longer delay fails at once, the error carrying it). Other statuses →
//!   [`ModelError::Http`].
//! - A 2xx body that is not a chat completion → [`ModelError::InvalidResponse`];
//!   DeepSeek's `insufficient_system_resource` finish reason → [`ModelError::Truncated`].
//! - Streaming: the body ending mid-event or before a `finish_reason` / `[DONE]` →
//!   [`ModelError::Truncated`]; an error event mid-stream (`{"error": …}`, `event: error`,
//!   or old llama.cpp's `error:` line) → [`ModelError::Stream`]: status 200, the error's
//!   `type` and `code` as sent, retryable when they name an overload, a rate limit or a
//!   server error, an invalid request (with its kind) when they name a 400; data that is
//!   not a chunk → [`ModelError::InvalidResponse`]. See
//!   [`HttpAdapter::stream`](crate::transport::HttpAdapter) for the transport's own.
//!
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

pub mod cache;
mod config;
pub(crate) mod error;
mod history;
mod request;
mod response;
mod scan;
mod stream;
mod wire;

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use halo_core::{
    ModelCapabilities, ModelError, ModelEventStream, ModelRequest, ModelResponse, StablePrefix,
};
use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

use crate::transport::{ByteStream, Dialect, HttpAdapter, Transport};

pub use crate::transport::{
    ConfigError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_RETRY_MIN_DELAY,
    DEFAULT_TIMEOUT, MAX_EXCERPT_BYTES, MAX_RETRY_DELAY, MIN_REDACTED_KEY_CHARS,
};
pub use cache::{
    BreakpointPlan, MAX_WRITTEN_BREAKPOINTS, MIN_CACHEABLE_TOKENS, PromptCacheMode,
    plan_breakpoints,
};
pub use config::{
    ChatSettings, DEEPSEEK_DEFAULT_BASE_URL, DEEPSEEK_DEFAULT_MODEL, OPENAI_DEFAULT_BASE_URL,
    OPENAI_DEFAULT_MODEL, OpenAiBuilder, Profile, ReasoningReplay,
};
pub use stream::decode_stream;

/// A chat model behind an OpenAI-compatible `/chat/completions` endpoint: the HTTP adapter
/// over the [`ChatCompletions`] dialect.
///
/// Construct it with a builder ([`openai`](Self::openai), [`deepseek`](Self::deepseek),
/// [`custom`](Self::custom)) or from the environment ([`openai_from_env`](Self::openai_from_env),
/// [`deepseek_from_env`](Self::deepseek_from_env)). Cheap to clone; one
/// HTTP connection pool per adapter (clones share it).
pub type OpenAiCompatible = HttpAdapter<ChatCompletions>;

/// The OpenAI-compatible chat-completions dialect
/// (<https://platform.openai.com/docs/api-reference/chat/create>): how a body is written
/// (serialized prefix and history kept between calls), answers and chunks read, and errors
/// mapped. Cheap to clone; clones share the kept bodies.
#[derive(Clone)]
pub struct ChatCompletions {
    pub(crate) profile: Profile,
    pub(crate) endpoint: reqwest::Url,
    pub(crate) body: Map<String, Value>,
    pub(crate) reasoning_replay: ReasoningReplay,
    pub(crate) prompt_cache_key: bool,
    pub(crate) prompt_cache: PromptCacheMode,
    pub(crate) min_cacheable_tokens: u64,
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

impl fmt::Debug for ChatCompletions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatCompletions")
            .field("profile", &self.profile)
            .field("endpoint", &self.endpoint.as_str())
            .field("reasoning_replay", &self.reasoning_replay)
            .field("prompt_cache_key", &self.prompt_cache_key)
            .field("prompt_cache", &self.prompt_cache)
            .finish_non_exhaustive()
    }
}

impl HttpAdapter<ChatCompletions> {
    /// A builder for any profile; the model id is set with [`OpenAiBuilder::model`].
    pub fn builder(profile: Profile) -> OpenAiBuilder {
        let model = match profile {
            Profile::OpenAi => OPENAI_DEFAULT_MODEL,
            Profile::DeepSeek => DEEPSEEK_DEFAULT_MODEL,
            Profile::Custom => "",
        };
        OpenAiBuilder::new(profile, model.to_string())
    }

    /// A builder for OpenAI with this model id; set the key with
    /// [`api_key`](crate::transport::HttpBuilder::api_key) or [`OpenAiBuilder::env`].
    pub fn openai(model: impl Into<String>) -> OpenAiBuilder {
        OpenAiBuilder::new(Profile::OpenAi, model.into())
    }

    /// A builder for DeepSeek with this model id ([`DEEPSEEK_DEFAULT_MODEL`] is
    /// `deepseek-chat`); set the key with [`api_key`](crate::transport::HttpBuilder::api_key)
    /// or [`OpenAiBuilder::env`].
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
        self.dialect.profile
    }

    /// The full URL requests go to (`{base_url}/chat/completions`).
    pub fn endpoint(&self) -> &str {
        self.dialect.endpoint.as_str()
    }

    /// The exact body bytes [`generate`](halo_core::ModelAdapter::generate) would send for
    /// `request` (compact JSON), as it sends them: shared, not copied. Useful to check cache
    /// stability without a server.
    ///
    /// Like `generate`, it writes only the new messages of a history that extends one the
    /// adapter wrote before ([`ModelRequest::history_key`]; see `history.rs`), and keeps
    /// this body for the next; the bytes are those of a body written anew.
    ///
    /// # Errors
    /// [`ModelError::Unsupported`] for content the profile cannot send (images or a JSON
    /// Schema response format on DeepSeek).
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Result<Bytes, ModelError> {
        self.dialect.body_bytes(&self.transport, request, false)
    }

    /// The turn [`generate`](halo_core::ModelAdapter::generate) returns for `body`, a 2xx
    /// answer's body (one `chat.completion`). With [`request_body`](Self::request_body), the
    /// whole of `generate` but the HTTP exchange: for benchmarks and tests without a server.
    ///
    /// # Errors
    /// [`ModelError::InvalidResponse`] when the body is not a chat completion;
    /// [`ModelError::Truncated`] for DeepSeek's `insufficient_system_resource` finish reason.
    pub fn parse_response(&self, body: &[u8]) -> Result<ModelResponse, ModelError> {
        self.dialect
            .parse(&self.transport, body)
            .map_err(|e| self.transport.redact_error(e))
    }
}

impl ChatCompletions {
    fn request_config<'a>(&'a self, model: &'a str) -> request::RequestConfig<'a> {
        request::RequestConfig {
            profile: self.profile,
            model,
            reasoning_replay: self.reasoning_replay,
            prompt_cache_key: self.prompt_cache_key,
            prompt_cache: self.prompt_cache,
            min_cacheable_tokens: self.min_cacheable_tokens,
            extra: &self.body,
        }
    }

    /// The body of `request`: the head, the history's messages and the tail, the messages
    /// an earlier body of the same history carried taken from it as they were written.
    fn body_bytes(
        &self,
        transport: &Transport,
        request: &ModelRequest<'_>,
        stream: bool,
    ) -> Result<Bytes, ModelError> {
        let model = request::effective_model(self.profile, transport.model(), request);
        let cfg = self.request_config(model);
        let prefix = self.prefix_wire(cfg, request.prefix)?;
        let fingerprint = prefix.fingerprint();
        let body = request::build(cfg, &prefix, request, stream)?;
        // A body whose newest message carries a cache breakpoint is not continued: the
        // next body writes that message without it.
        let key = request.history_key().filter(|_| body.reusable());
        let start = key
            .as_ref()
            .and_then(|k| self.histories.take(k, fingerprint, body.note(), model));
        let (mut out, mut ends, from, kept_model) = match start {
            Some(start) => (start.out, start.ends, start.from, Some(start.model)),
            None => {
                let hint = self.body_len_hint.load(Ordering::Relaxed);
                // Room for the last body and what a step adds to it.
                let mut out = BytesMut::with_capacity(hint + hint / 8 + 4096);
                body.write_head(&mut out)?;
                (out, Vec::with_capacity(body.history_len()), 0, None)
            }
        };
        body.write_messages(&mut out, from, &mut ends)?;
        body.write_tail(&mut out)?;
        let bytes = out.freeze();
        self.body_len_hint.store(bytes.len(), Ordering::Relaxed);
        if let Some(key) = key {
            self.histories.keep(history::Kept {
                key,
                // A continued body's model is this one (`take` matched it).
                model: kept_model.unwrap_or_else(|| model.to_owned()),
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
        cfg: request::RequestConfig<'_>,
        prefix: &StablePrefix,
    ) -> Result<Arc<request::PrefixWire>, ModelError> {
        let fingerprint = prefix.fingerprint();
        let mut kept = self
            .prefix_wire
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(wire) = kept.as_ref().filter(|w| w.fingerprint() == fingerprint) {
            return Ok(wire.clone());
        }
        let wire = Arc::new(request::PrefixWire::new(cfg, prefix)?);
        *kept = Some(wire.clone());
        Ok(wire)
    }
}

impl Dialect for ChatCompletions {
    type Call = ();
    const ADAPTER: &'static str = "OpenAiCompatible";
    const NAME: &'static str = "chat completion";

    fn from_status(
        status: u16,
        headers: &HeaderMap,
        body: &[u8],
        secret: Option<&str>,
    ) -> ModelError {
        error::from_status(status, headers, body, secret)
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
    fn capabilities(&self, _: &Transport) -> ModelCapabilities {
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

    fn parse(&self, _: &Transport, body: &[u8]) -> Result<ModelResponse, ModelError> {
        response::parse(body)
    }

    fn decode<'a>(&'a self, _: &'a Transport, body: ByteStream) -> ModelEventStream<'a> {
        decode_stream(body)
    }
}
