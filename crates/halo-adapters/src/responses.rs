//! OpenAI's Responses API, plain and streaming, with reasoning items replayed verbatim.
//!
//! [`ResponsesAdapter`] is the crate's one HTTP adapter ([`HttpAdapter`]) over the
//! [`Responses`] dialect: `POST {base_url}/responses`
//! (<https://platform.openai.com/docs/api-reference/responses/create>), unary or with
//! `stream: true` and its typed events ([`decode_stream`]). The Responses API is where
//! OpenAI's reasoning models keep their reasoning across turns: the caller sends each
//! turn's `reasoning` items back, with their `encrypted_content`, in their place.
//!
//! | | Responses | Halo |
//! |---|---|---|
//! | system prompt | a `system` message item (so a cache breakpoint can close it) | the prefix's system text |
//! | history | `message`, `function_call`, `function_call_output` items | user, assistant, tool messages |
//! | reasoning | `reasoning` items with `encrypted_content`, `store: false`, `include: ["reasoning.encrypted_content"]` | [`Reasoning`](halo_core::Reasoning) entries holding the items verbatim (see `item.rs`) |
//! | cache routing | `prompt_cache_key` = session id, else prefix fingerprint | |
//! | cache reads, writes | `usage.input_tokens_details.cached_tokens`, `.cache_write_tokens` | `cache_read_tokens`, `cache_write_tokens` |
//! | explicit caching (GPT-5.6+) | `prompt_cache_options`, `prompt_cache_breakpoint` on input blocks | [`PromptCacheMode`], [`plan_breakpoints`](crate::openai::plan_breakpoints) |
//! | reasoning setting | `reasoning.effort` | [`GenerationOptions::reasoning`](halo_core::GenerationOptions) |
//!
//! Stateless by default: every request carries the whole history, so a run stays a value
//! any process can continue. [`ResponsesBuilder::previous_response_id`] chains requests
//! instead (`store: true`, only the new items sent).
//!
//! # Errors
//! HTTP errors map as the chat-completions dialect's do (`{"error": {message, type, param,
//! code}}`: 400 invalid request with its kind — `context_length_exceeded`, a reasoning item
//! sent without its following item — 401/403, 402 and exhausted quotas, 429 with its
//! delay, 5xx), retried by the shared transport. A `response.failed` or `error` event, or a
//! 200 body holding a failed response, is [`ModelError::Stream`] with the provider's code
//! (`server_error` and `rate_limit_exceeded` retryable); a stream cut before
//! `response.completed` is [`ModelError::Truncated`].
//!
//! ```no_run
//! use halo_adapters::responses::ResponsesAdapter;
//! use halo_core::{GenerationOptions, HaloAgent, ReasoningEffort};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // OPENAI_API_KEY (required), OPENAI_BASE_URL and OPENAI_MODEL (optional).
//! let model = ResponsesAdapter::from_env()?;
//! let mut agent = HaloAgent::builder(model)
//!     .system("You are terse.")
//!     .options(GenerationOptions::default().with_reasoning(ReasoningEffort::Low))
//!     .build();
//! let out = agent.generate_text("Say hi.").await?;
//! println!("{} ({} cached tokens)", out.text, out.stats.cache_read_tokens);
//! # Ok(()) }
//! ```

mod config;
mod item;
mod request;
mod response;
mod stream;

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use halo_core::{
    Fingerprint, HistoryKey, Message, ModelCapabilities, ModelError, ModelEventStream,
    ModelRequest, ModelResponse,
};
use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

use crate::openai::PromptCacheMode;
use crate::transport::{ByteStream, Dialect, HttpAdapter, Transport};

pub use crate::transport::ConfigError;
pub use config::{
    API_KEY_VAR, BASE_URL_VAR, MODEL_VAR, RESPONSES_DEFAULT_BASE_URL, RESPONSES_DEFAULT_MODEL,
    ResponsesBuilder, ResponsesSettings,
};
pub use item::{CALL_KEY, ITEM_PREFIX, is_responses_item};
pub use stream::decode_stream;

/// A model behind OpenAI's Responses API (or a server speaking it): the HTTP adapter over
/// the [`Responses`] dialect. Cheap to clone; clones share the connection pool.
pub type ResponsesAdapter = HttpAdapter<Responses>;

/// The Responses dialect: input items (reasoning replayed verbatim), typed stream events,
/// OpenAI's error mapping, GPT-5.6+ explicit caching, optional chaining.
#[derive(Debug, Clone)]
pub struct Responses {
    pub(crate) endpoint: reqwest::Url,
    pub(crate) body: Map<String, Value>,
    pub(crate) encrypted_reasoning: bool,
    pub(crate) reasoning_summary: Option<String>,
    pub(crate) prompt_cache_key: bool,
    pub(crate) prompt_cache: PromptCacheMode,
    pub(crate) min_cacheable_tokens: u64,
    pub(crate) previous_response_id: bool,
    /// The last response of the conversation, for chaining. Shared by clones.
    pub(crate) chain: Arc<Mutex<Chain>>,
}

/// What chaining with `previous_response_id` remembers: the last response's id and the
/// history it answered.
#[derive(Debug, Default)]
pub struct Chain {
    /// The id of the last response read.
    last_id: Option<String>,
    /// The last successful call: its response id, prefix, history key and length.
    anchor: Option<Anchor>,
}

#[derive(Debug, Clone)]
struct Anchor {
    id: String,
    fingerprint: Fingerprint,
    key: HistoryKey,
    len: usize,
}

impl Chain {
    fn answered(&mut self, id: &str) {
        self.last_id = Some(id.to_owned());
    }
}

/// One call's chaining: the response to chain to and the history messages it covers, and
/// what this call will anchor on.
#[derive(Debug, Default)]
pub struct Chained {
    previous: Option<(String, usize)>,
    this: Option<(Fingerprint, HistoryKey, usize)>,
}

impl HttpAdapter<Responses> {
    /// A builder for this model id (OpenAI's API by default); set the key with
    /// [`api_key`](crate::transport::HttpBuilder::api_key) or [`ResponsesBuilder::env`].
    pub fn builder(model: impl Into<String>) -> ResponsesBuilder {
        ResponsesBuilder::new(model.into())
    }

    /// From the environment: `OPENAI_API_KEY` (required), `OPENAI_BASE_URL` (optional) and
    /// `OPENAI_MODEL` (optional, default [`RESPONSES_DEFAULT_MODEL`]).
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `OPENAI_API_KEY` is unset or empty; the
    /// [`ResponsesBuilder::build`] errors.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_env_with(|v| std::env::var(v).ok())
    }

    /// [`from_env`](Self::from_env) with the variables read through `lookup`.
    ///
    /// # Errors
    /// As [`from_env`](Self::from_env).
    pub fn from_env_with(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::builder(RESPONSES_DEFAULT_MODEL)
            .model_from_env(&lookup)
            .env_from(&lookup)?
            .build()
    }

    /// The full URL requests go to (`{base_url}/responses`).
    pub fn endpoint(&self) -> &str {
        self.dialect.endpoint.as_str()
    }

    /// The exact body bytes [`generate`](halo_core::ModelAdapter::generate) would send for
    /// `request` (compact JSON), without chaining. Useful to check cache stability without
    /// a server.
    ///
    /// # Errors
    /// [`ModelError::Other`] for a stored provider item of the history that is no longer
    /// JSON (a log edited by hand).
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Result<Bytes, ModelError> {
        self.dialect
            .body_bytes(&self.transport, request, &Chained::default(), false)
    }
}

impl Responses {
    fn body_bytes(
        &self,
        transport: &Transport,
        request: &ModelRequest<'_>,
        chained: &Chained,
        stream: bool,
    ) -> Result<Bytes, ModelError> {
        let cfg = request::RequestConfig {
            model: transport.model(),
            encrypted_reasoning: self.encrypted_reasoning,
            reasoning_summary: self.reasoning_summary.as_deref(),
            prompt_cache_key: self.prompt_cache_key,
            prompt_cache: self.prompt_cache,
            min_cacheable_tokens: self.min_cacheable_tokens,
            extra: &self.body,
            chained: chained
                .previous
                .as_ref()
                .map(|(id, skip)| (id.as_str(), *skip)),
            store: self.previous_response_id,
        };
        request::build(cfg, request, stream).map(Bytes::from)
    }

    fn chain(&self) -> Option<Arc<Mutex<Chain>>> {
        self.previous_response_id.then(|| self.chain.clone())
    }

    /// The chaining of a call: the last response when this history extends the one it
    /// answered (every message of that request, then the answer's assistant turn).
    fn chained(&self, request: &ModelRequest<'_>) -> Chained {
        if !self.previous_response_id {
            return Chained::default();
        }
        let fingerprint = request.prefix.fingerprint();
        let Some(key) = request.history_key() else {
            return Chained::default();
        };
        let this = Some((fingerprint, key, request.history.len()));
        let chain = self.chain.lock().unwrap_or_else(PoisonError::into_inner);
        let previous = chain.anchor.as_ref().and_then(|a| {
            let extends = a.fingerprint == fingerprint
                && key.shared_prefix(&a.key) == a.len
                && matches!(request.history.get(a.len), Some(Message::Assistant(_)));
            extends.then(|| (a.id.clone(), a.len + 1))
        });
        Chained { previous, this }
    }
}

impl Dialect for Responses {
    type Call = Chained;
    const ADAPTER: &'static str = "ResponsesAdapter";
    const NAME: &'static str = "responses";

    fn from_status(
        status: u16,
        headers: &HeaderMap,
        body: &[u8],
        secret: Option<&str>,
    ) -> ModelError {
        crate::openai::error::from_status(status, headers, body, secret)
    }

    /// Native structured output with and without tools (`text.format` `json_schema`),
    /// forced tool calls, `allowed_tools`.
    fn capabilities(&self, _: &Transport) -> ModelCapabilities {
        ModelCapabilities::new()
            .with_native_output_with_tools(true)
            .with_forced_tool(true)
            .with_allowed_tools(true)
    }

    fn prepare<'a>(
        &'a self,
        _: &'a Transport,
        request: &'a ModelRequest<'a>,
    ) -> impl Future<Output = Chained> + Send + 'a {
        std::future::ready(self.chained(request))
    }

    fn url(&self, _: &Chained, _: bool) -> &reqwest::Url {
        &self.endpoint
    }

    fn body(
        &self,
        transport: &Transport,
        request: &ModelRequest<'_>,
        chained: &Chained,
        stream: bool,
    ) -> Result<Bytes, ModelError> {
        self.body_bytes(transport, request, chained, stream)
    }

    fn parse(&self, transport: &Transport, body: &[u8]) -> Result<ModelResponse, ModelError> {
        if let Some(chain) = self.chain()
            && let Some(id) = serde_json::from_slice::<response::WireResponse<'_>>(body)
                .ok()
                .and_then(|w| w.id)
        {
            chain
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .answered(&id);
        }
        response::parse(body, transport.secret())
    }

    fn decode<'a>(&'a self, transport: &'a Transport, body: ByteStream) -> ModelEventStream<'a> {
        crate::sse::assemble(
            body,
            stream::Assembler::new(transport.secret(), self.chain()),
        )
    }

    /// A chained call that the server answers with an unknown `previous_response_id` (it
    /// expired, or the store was off) is sent again whole, once.
    async fn recover(&self, _: &Transport, chained: &mut Chained, error: &ModelError) -> bool {
        if chained.previous.is_none()
            || !matches!(
                error,
                ModelError::InvalidRequest { .. } | ModelError::Http { status: 404, .. }
            )
        {
            return false;
        }
        chained.previous = None;
        true
    }

    fn finish(&self, chained: &Chained, _: &mut ModelResponse) {
        let Some((fingerprint, key, len)) = chained.this else {
            return;
        };
        let mut chain = self.chain.lock().unwrap_or_else(PoisonError::into_inner);
        chain.anchor = chain.last_id.take().map(|id| Anchor {
            id,
            fingerprint,
            key,
            len,
        });
    }
}
