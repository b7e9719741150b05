//! Gemini's `generateContent` API, plain and streaming, with its explicit prompt cache
//! (`cachedContents`) managed per stable prefix.
//!
//! [`GeminiAdapter`] implements [`ModelAdapter`](halo_core::ModelAdapter) over the Gemini Developer API
//! (<https://ai.google.dev/api/generate-content>): `generate` posts
//! `/v1beta/models/{model}:generateContent`, `stream` posts
//! `:streamGenerateContent?alt=sse` and decodes the chunks ([`decode_stream`], over the
//! shared [`sse`](crate::sse) layer). The API key goes in the `x-goog-api-key` header,
//! never in the URL, so it cannot leak into a logged URL; it lives in a
//! [`secrecy::SecretString`] and never appears in `Debug` output, logs or errors (error
//! texts are redacted for keys of at least
//! [`MIN_REDACTED_KEY_CHARS`](crate::transport::MIN_REDACTED_KEY_CHARS) characters).
//! [`GeminiAdapter`] is the crate's one HTTP adapter ([`HttpAdapter`]) over the
//! [`GenerateContent`] dialect: sending, retries and stream reading live in
//! [`transport`](crate::transport).
//!
//! # Mapping
//! The stable prefix's system text is `systemInstruction`, its tools one
//! `tools[{functionDeclarations}]` entry (schemas through [`sanitize_schema`]), its
//! few-shot turns the first `contents`; the history follows as `user` / `model` contents.
//! Tool results are `functionResponse` parts grouped into one `user` content in call order.
//! Function calls without an `id` (the API's usual answer) get an internal id that is never
//! sent back; `thoughtSignature`s are replayed on the part they came with; `thought` parts
//! are reasoning. The details are in the `request` and `response` module docs.
//!
//! A bounded [`MessageLog`](halo_core::MessageLog) evicts whole units from the front, so
//! after enough steps the history can open with a `model` turn calling tools, the user's
//! task gone; Gemini answers that with 400 `INVALID_ARGUMENT` "Please ensure that function
//! call turn comes immediately after a user turn or after a function response turn.". So a
//! history that opens with a `model` content, and a function-call `model` content right
//! after another `model` content, get one `user` content before them with the fixed text
//! [`TRIMMED_HISTORY_NOTE`](crate::TRIMMED_HISTORY_NOTE). The note lives in the history
//! (never in the cached content) and never changes, so a trimmed history renders to the
//! same bytes on every call.
//!
//! # Structured output and active tools
//! [`OutputMode::Auto`](halo_core::OutputMode::Auto) asks natively
//! (`generationConfig.responseMimeType: "application/json"` and `responseSchema`) when the
//! prefix has no tools or the model is Gemini 3 or later ([`json_with_tools`]), and with the
//! output tool and `toolConfig.functionCallingConfig: {"mode": "ANY",
//! "allowedFunctionNames": ["final_result"]}` otherwise. Active tools go out as
//! `allowedFunctionNames` with mode `VALIDATED` (auto) or `ANY` (required); no active tool
//! is mode `NONE`. The function declarations never change for either.
//!
//! # The cache
//! Gemini caches a prompt prefix implicitly on 2.5 and newer models (no guarantee, no
//! control), and explicitly in a `cachedContents` object that owns the system instruction,
//! the tools, the tool config and leading contents
//! (<https://ai.google.dev/gemini-api/docs/caching>). With [`explicit_cache`] on (the
//! default) the adapter keeps one such object per [`StablePrefix`](halo_core::StablePrefix),
//! keyed by its [`fingerprint`](halo_core::StablePrefix::fingerprint) (and the tool choice):
//!
//! 1. **Below the minimum** — the prefix's estimated size (its JSON bytes / 4) is under the
//!    model's minimum ([`min_cacheable_tokens`], overridable): every request carries the whole
//!    prefix and relies on implicit caching.
//! 2. **Create** — otherwise the first request creates `POST /v1beta/cachedContents` with
//!    `systemInstruction`, `tools`, `toolConfig`, the few-shot `contents` and
//!    `ttl` ([`cache_ttl`], default one hour). Requests then carry
//!    `"cachedContent": "cachedContents/…"` and only the history; they must not set
//!    `systemInstruction`, `tools` or `toolConfig` themselves.
//! 3. **Reuse** — while the fingerprint is unchanged, every request names the same object.
//!    Concurrent requests of one adapter wait for the first one's create (the state is
//!    behind an async mutex): one prefix, one object.
//! 4. **Refresh** — when less than [`cache_refresh_margin`] of the TTL is left, the next
//!    request first extends it (`PATCH /v1beta/{name}?updateMask=ttl`).
//! 5. **Replace** — a new fingerprint (a tool added, the system prompt edited) creates a new
//!    object and deletes the old one (`DELETE`, best effort: it expires anyway).
//! 6. **Recreate** — when the API answers that the named cached content expired or is gone
//!    (HTTP 400, 403 or 404 whose message names the cached content, such as `403
//!    CachedContent not found (or permission denied)`, the wording observed in client
//!    libraries), the adapter creates a new object once and retries the request once.
//! 7. **Too small** — if the API refuses the create (`400 Cached content is too small`), that
//!    prefix is sent in full from then on.
//!
//! Creating or refreshing failing for any other reason is logged and the request goes out
//! with its prefix in full: the explicit cache saves money, it is never why a call fails.
//! An adapter tracks one object at a time, so give agents with different prefixes their own
//! adapters. Call [`delete_cached_content`](GeminiAdapter::delete_cached_content) at the end
//! of a session to stop paying storage before the TTL runs out.
//!
//! # Usage
//! `usageMetadata` normalized: `input_tokens` = `promptTokenCount` (cached included),
//! `cache_read_tokens` = `cachedContentTokenCount`, `output_tokens` =
//! `candidatesTokenCount` + `thoughtsTokenCount`, `reasoning_tokens` =
//! `thoughtsTokenCount`. Gemini reports no cache writes; `cache_write_tokens` is the new
//! object's token count on a call that created one, else `None`.
//!
//! # Errors
//! `{"error":{"code","message","status","details"}}` bodies map to [`ModelError`] by
//! status; 429 and 5xx are retried through [`backon`], waiting the
//! `google.rpc.RetryInfo.retryDelay` of the body up to [`MAX_RETRY_DELAY`] (a longer delay
//! fails at once, the error carrying it):
//! - HTTP 400 → [`ModelError::InvalidRequest`], with its
//!   [`InvalidRequestKind`](halo_core::InvalidRequestKind) when the message names one (the
//!   input token count over the maximum, a missing `thought_signature`, a rejected function
//!   declaration schema); 401, 403 → [`ModelError::Authentication`]; 404 and other
//!   statuses → [`ModelError::Http`]; each with the API's `message` and `status`. A
//!   400/403/404 about the named cached content is first answered by recreating it and
//!   retrying once.
//! - HTTP 429 → [`ModelError::RateLimited`], except a per-day quota →
//!   [`ModelError::InsufficientBalance`]; 500, 502, 503, 504 → [`ModelError::Server`].
//! - A 2xx body that is not a `GenerateContentResponse`, or has no candidate and no block
//!   reason → [`ModelError::InvalidResponse`]; a 2xx body holding an `error` →
//!   [`ModelError::Stream`] (status 200), as in a stream.
//! - Streaming: the body ending before a chunk with a `finishReason` →
//!   [`ModelError::Truncated`]; an `{"error": …}` chunk → [`ModelError::Stream`]: status
//!   200, the error's `status` and `code` kept, retryable for `UNAVAILABLE`,
//!   `RESOURCE_EXHAUSTED` and other 429/5xx codes, an invalid request (with its kind) for a
//!   400.
//!
//! [`explicit_cache`]: GeminiBuilder::explicit_cache
//! [`cache_ttl`]: GeminiBuilder::cache_ttl
//! [`cache_refresh_margin`]: GeminiBuilder::cache_refresh_margin
//!
//! ```no_run
//! use halo_adapters::gemini::GeminiAdapter;
//! use halo_core::HaloAgent;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // GEMINI_API_KEY (required), GEMINI_BASE_URL and GEMINI_MODEL (optional).
//! let model = GeminiAdapter::from_env()?;
//! let mut agent = HaloAgent::builder(model).system("You are terse.").build();
//! let out = agent.generate_text("Say hi.").await?;
//! println!("{} ({} cached tokens)", out.text, out.stats.cache_read_tokens);
//! # Ok(()) }
//! ```

mod cache;
mod config;
mod error;
mod request;
mod response;
mod schema;
mod stream;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use bytes::Bytes;
use halo_core::{
    ModelCapabilities, ModelError, ModelEventStream, ModelRequest, ModelResponse, Usage,
};
use reqwest::header::HeaderMap;

use crate::transport::{ByteStream, Dialect, HttpAdapter, Transport};

pub use crate::transport::{
    ConfigError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_RETRY_MIN_DELAY,
    DEFAULT_TIMEOUT, MAX_RETRY_DELAY,
};
pub use config::{
    Clock, DEFAULT_CACHE_REFRESH_MARGIN, DEFAULT_CACHE_TTL, GEMINI_API_KEY_VAR,
    GEMINI_BASE_URL_VAR, GEMINI_DEFAULT_BASE_URL, GEMINI_DEFAULT_MODEL, GEMINI_MODEL_VAR,
    GeminiBuilder, GeminiSettings, min_cacheable_tokens,
};
pub use schema::sanitize_schema;
pub use stream::decode_stream;

use cache::{CacheKey, CacheState, CacheUse, estimate_tokens};
use config::Endpoints;
use request::{Prefix, RequestConfig};
use response::CallIdSource;

/// A Gemini model behind the Gemini Developer API (or a gateway speaking it): the HTTP
/// adapter over the [`GenerateContent`] dialect.
///
/// Build it with [`GeminiAdapter::builder`] or [`GeminiAdapter::from_env`]. It holds the
/// explicit cache state (see the [module docs](self)), so share one adapter through an
/// `Arc` (as [`SharedModel`](halo_core::SharedModel) does) rather than building several for
/// one session.
pub type GeminiAdapter = HttpAdapter<GenerateContent>;

/// Gemini's `generateContent` dialect (<https://ai.google.dev/api/generate-content>): the
/// body (naming the prefix's cached content when there is one), answers and chunks read,
/// errors mapped, and the `cachedContents` lifecycle of the [module docs](self).
pub struct GenerateContent {
    pub(crate) endpoints: Endpoints,
    pub(crate) explicit_cache: bool,
    pub(crate) cache_ttl: Duration,
    pub(crate) cache_refresh_margin: Duration,
    pub(crate) min_cacheable_tokens: u64,
    pub(crate) thinking_budget: Option<i64>,
    pub(crate) include_thoughts: bool,
    pub(crate) clock: Clock,
    pub(crate) cache: Arc<tokio::sync::Mutex<CacheState>>,
    pub(crate) next_call_id: Arc<AtomicU64>,
}

impl fmt::Debug for GenerateContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GenerateContent")
            .field("endpoint", &self.endpoints.generate.as_str())
            .field("explicit_cache", &self.explicit_cache)
            .field("cache_ttl", &self.cache_ttl)
            .field("min_cacheable_tokens", &self.min_cacheable_tokens)
            .finish_non_exhaustive()
    }
}

/// How one call sends its prefix.
pub struct Plan {
    prefix: Prefix,
    key: Option<CacheKey>,
    cache: Option<CacheUse>,
}

impl Plan {
    fn cached(&self) -> Option<&str> {
        self.cache.as_ref().map(|c| c.name.as_str())
    }
}

impl fmt::Debug for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("cached_content", &self.cached())
            .finish_non_exhaustive()
    }
}

impl HttpAdapter<GenerateContent> {
    /// A builder with the defaults: model [`GEMINI_DEFAULT_MODEL`], base URL
    /// [`GEMINI_DEFAULT_BASE_URL`], explicit caching on with a one-hour TTL. Set the key
    /// with [`api_key`](crate::transport::HttpBuilder::api_key) or [`GeminiBuilder::env`].
    pub fn builder() -> GeminiBuilder {
        GeminiBuilder::default()
    }

    /// From the environment: `GEMINI_API_KEY` (required), `GEMINI_BASE_URL` (optional, for
    /// proxies and gateways) and `GEMINI_MODEL` (optional, default
    /// [`GEMINI_DEFAULT_MODEL`]).
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `GEMINI_API_KEY` is unset or empty; the
    /// [`GeminiBuilder::build`] errors.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_env_with(|v| std::env::var(v).ok())
    }

    /// [`from_env`](Self::from_env) with the variables read through `lookup`.
    ///
    /// # Errors
    /// As [`from_env`](Self::from_env).
    pub fn from_env_with(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        GeminiBuilder::default().env_from(lookup)?.build()
    }

    /// The `generateContent` URL requests go to.
    pub fn endpoint(&self) -> &str {
        self.dialect.endpoints.generate.as_str()
    }

    /// The prompt size, in tokens, from which the prefix goes into a cached content.
    pub fn min_cacheable_tokens(&self) -> u64 {
        self.dialect.min_cacheable_tokens
    }

    /// The exact `generateContent` body bytes for `request` (compact JSON): with
    /// `cached_content` (a `cachedContents/…` name) the cached form, which leaves out
    /// `systemInstruction`, `tools`, `toolConfig` and the few-shot turns; without it the
    /// full form. Useful to check cache stability without a server.
    ///
    /// # Errors
    /// [`ModelError::Other`] if the body cannot be serialized (it always can).
    pub fn request_body(
        &self,
        request: &ModelRequest<'_>,
        cached_content: Option<&str>,
    ) -> Result<Bytes, ModelError> {
        let prefix = request::prefix(request);
        self.dialect.body_bytes(request, &prefix, cached_content)
    }

    /// The exact `POST cachedContents` body bytes the adapter would send for `request`'s
    /// prefix: `model`, the few-shot `contents`, `systemInstruction`, `tools`,
    /// `toolConfig`, `ttl` and a `displayName` naming the fingerprint.
    ///
    /// # Errors
    /// [`ModelError::Other`] if the body cannot be serialized (it always can).
    pub fn cached_content_body(&self, request: &ModelRequest<'_>) -> Result<Vec<u8>, ModelError> {
        let prefix = request::prefix(request);
        let body = request::CreateCachedContent {
            model: format!("models/{}", self.transport.model()),
            prefix: &prefix,
            ttl: cache::ttl_string(self.dialect.cache_ttl),
            display_name: format!("halo {}", request.prefix.fingerprint()),
        };
        serde_json::to_vec(&body)
            .map_err(|e| ModelError::Other(format!("cannot serialize the cache body: {e}")))
    }

    /// The estimated token count of `request`'s cacheable prefix (its JSON bytes / 4), which
    /// the adapter compares with [`min_cacheable_tokens`](Self::min_cacheable_tokens).
    pub fn estimated_prefix_tokens(&self, request: &ModelRequest<'_>) -> u64 {
        estimate_tokens(&request::prefix(request))
    }

    /// The name (`cachedContents/{id}`) of the cached content the adapter currently uses,
    /// if any.
    pub async fn cached_content(&self) -> Option<String> {
        self.dialect.current_cache_name().await
    }

    /// Deletes the cached content the adapter currently uses (`DELETE /v1beta/{name}`), to
    /// stop paying its storage before the TTL ends; the next call creates a new one if
    /// needed. Returns the deleted name, or `None` when there was none.
    ///
    /// # Errors
    /// The [`ModelError`] of the `DELETE` (the adapter forgets the object either way).
    pub async fn delete_cached_content(&self) -> Result<Option<String>, ModelError> {
        match self.dialect.take_current().await {
            Some(name) => self
                .dialect
                .delete(&self.transport, &name)
                .await
                .map(|()| Some(name)),
            None => Ok(None),
        }
    }
}

impl GenerateContent {
    fn request_config(&self) -> RequestConfig {
        RequestConfig {
            thinking_budget: self.thinking_budget,
            include_thoughts: self.include_thoughts,
        }
    }

    fn body_bytes(
        &self,
        request: &ModelRequest<'_>,
        prefix: &Prefix,
        cached: Option<&str>,
    ) -> Result<Bytes, ModelError> {
        let body = request::build(self.request_config(), request, prefix, cached);
        serde_json::to_vec(&body)
            .map(Bytes::from)
            .map_err(|e| ModelError::Other(format!("cannot serialize the request body: {e}")))
    }

    fn ids(&self) -> CallIdSource {
        CallIdSource::new(self.next_call_id.clone())
    }

    /// Decides how this call sends its prefix, creating or refreshing the cached content
    /// as the lifecycle requires.
    async fn plan(&self, t: &Transport, request: &ModelRequest<'_>) -> Plan {
        let prefix = request::prefix(request);
        if !self.explicit_cache {
            return Plan {
                prefix,
                key: None,
                cache: None,
            };
        }
        let key = CacheKey {
            fingerprint: request.prefix.fingerprint(),
            tool_config: prefix
                .tool_config
                .as_ref()
                .and_then(|c| serde_json::to_string(c).ok()),
        };
        if estimate_tokens(&prefix) < self.min_cacheable_tokens {
            self.release_other_than(t, &key).await;
            return Plan {
                prefix,
                key: Some(key),
                cache: None,
            };
        }
        let cache = self.cache_for(t, &key, &prefix, None).await;
        Plan {
            prefix,
            key: Some(key),
            cache,
        }
    }
}

/// Records the tokens of a cached content the call created as its cache writes.
fn note_write(usage: &mut Usage, written: Option<u64>) {
    if written.is_some() {
        usage.cache_write_tokens = written;
    }
}

/// Whether the model combines a JSON response schema with function calling: Gemini 3 and
/// later (`gemini-3-pro-preview`, `gemini-3.1-…`; an optional `models/` prefix is fine).
/// Earlier models refuse the combination, so object runs with tools use the output tool.
pub fn json_with_tools(model: &str) -> bool {
    let id = model.strip_prefix("models/").unwrap_or(model);
    id.strip_prefix("gemini-")
        .and_then(|rest| rest.split(['-', '.']).next())
        .and_then(|major| major.parse::<u32>().ok())
        .is_some_and(|major| major >= 3)
}

impl Dialect for GenerateContent {
    type Call = Plan;
    const ADAPTER: &'static str = "GeminiAdapter";
    const NAME: &'static str = "gemini";

    fn from_status(
        status: u16,
        headers: &HeaderMap,
        body: &[u8],
        secret: Option<&str>,
    ) -> ModelError {
        error::from_status(status, headers, body, secret)
    }

    /// Native structured output (`generationConfig.responseMimeType: "application/json"`
    /// with `responseSchema`, through [`sanitize_schema`]:
    /// <https://ai.google.dev/gemini-api/docs/structured-output>) in a request without
    /// function declarations, and with them from Gemini 3 on ([`json_with_tools`]; earlier
    /// models answer 400 `Function calling with a response mime type: 'application/json' is
    /// unsupported`); forced calls (`ANY`); `allowedFunctionNames` for active tools.
    fn capabilities(&self, transport: &Transport) -> ModelCapabilities {
        ModelCapabilities::new()
            .with_native_output(true)
            .with_native_output_with_tools(json_with_tools(transport.model()))
            .with_forced_tool(true)
            .with_allowed_tools(true)
    }

    async fn prepare(&self, transport: &Transport, request: &ModelRequest<'_>) -> Plan {
        self.plan(transport, request).await
    }

    fn url(&self, _: &Plan, stream: bool) -> &reqwest::Url {
        if stream {
            &self.endpoints.stream
        } else {
            &self.endpoints.generate
        }
    }

    fn body(
        &self,
        _: &Transport,
        request: &ModelRequest<'_>,
        plan: &Plan,
        _: bool,
    ) -> Result<Bytes, ModelError> {
        self.body_bytes(request, &plan.prefix, plan.cached())
    }

    fn parse(&self, transport: &Transport, body: &[u8]) -> Result<ModelResponse, ModelError> {
        response::parse(body, self.ids(), transport.secret())
    }

    fn decode<'a>(&'a self, transport: &'a Transport, body: ByteStream) -> ModelEventStream<'a> {
        stream::decode(body, self.ids(), transport.secret())
    }

    /// The API said the named cached content expired or is gone: a new one (once), or the
    /// full prefix when that fails.
    async fn recover(&self, transport: &Transport, plan: &mut Plan, error: &ModelError) -> bool {
        if plan.cache.is_none() || !error::is_cache_gone(error) {
            return false;
        }
        let (Some(key), Some(gone)) = (&plan.key, plan.cache.take()) else {
            return false;
        };
        tracing::debug!(provider = %transport.provider(), name = %gone.name, "the cached content expired or is gone; recreating it once");
        plan.cache = self
            .cache_for(transport, key, &plan.prefix, Some(&gone.name))
            .await;
        true
    }

    fn finish(&self, plan: &Plan, response: &mut ModelResponse) {
        note_write(
            &mut response.usage,
            plan.cache.as_ref().and_then(|c| c.created_tokens),
        );
    }
}
