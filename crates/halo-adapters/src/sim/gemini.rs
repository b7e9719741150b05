//! [`GeminiSim`]: a loopback fake of the Gemini API (`generateContent`,
//! `streamGenerateContent`, `cachedContents`) that computes `cachedContentTokenCount` from
//! explicit cached-content objects and implicit prefix caching.
//!
//! Wire format (what [`crate::gemini::GeminiAdapter`] speaks):
//! - `POST /v1beta/models/{model}:generateContent` → one `GenerateContentResponse`;
//!   `:streamGenerateContent?alt=sse` → the same turn as CRLF-framed SSE chunks (text in
//!   pieces, function calls whole in one chunk, then a last chunk with `finishReason: STOP`,
//!   an empty text part and the usage; no `[DONE]`); without `alt=sse`, a JSON array of the
//!   chunks.
//! - `POST /v1beta/cachedContents`, `GET`/`PATCH ?updateMask=ttl`/`DELETE
//!   /v1beta/cachedContents/{id}`, `GET /v1beta/cachedContents`, with `ttl` (default
//!   `3600s`) or `expireTime`, answering the resource with `name`, `model`, `createTime`,
//!   `updateTime`, `expireTime`, `displayName` and `usageMetadata.totalTokenCount`.
//! - Answers come from a FIFO script of [`SimReply`](super::SimReply)s. Function calls come **without
//!   ids**, like the real API; with [`GeminiSim::set_thought_signatures`] the first
//!   `functionCall` part of a turn (or the last part of a text answer) carries a
//!   `thoughtSignature`, and with [`GeminiSim::set_thoughts`] the turn starts with a
//!   `thought: true` part.
//!
//! Every request is checked first, answering in Google's error shape
//! (`{"error":{"code","message","status"}}`): 403 without `x-goog-api-key`; 400 for a body
//! that is not JSON, empty `contents`, a role other than `user`/`model`, a request naming a
//! `cachedContent` while setting `systemInstruction`, `tools` or `toolConfig` (the real
//! message), a cache made for another model, function-call ids the simulator never issued,
//! a function-call turn that does not come right after a `user` content (the real
//! [`FUNCTION_CALL_TURN_ORDER`] message; the cached content's few-shot `contents` count as
//! coming first), a function-call turn not answered by as many `functionResponse` parts
//! with the same names in the next `user` content, and (with signatures on) a function-call
//! turn of the current turn without its signature; a `functionCallingConfig` with an
//! unknown mode, or `allowedFunctionNames` outside mode `ANY` / `VALIDATED` or naming an
//! undeclared function; a `responseSchema` without `responseMimeType: application/json`, and
//! that JSON response next to function declarations on a model before Gemini 3 (the real
//! `Function calling with a response mime type: 'application/json' is unsupported`);
//! **403 `CachedContent not found (or
//! permission denied)`** for a missing or expired cached content; 400 `Cached content is
//! too small` for a create below the model's minimum; with
//! [`GeminiSim::set_context_window`], 400 `The input token count (N) exceeds the maximum
//! number of tokens allowed (M).` for a longer request. An empty reply script gets HTTP 418
//! (a test bug, not a provider behaviour).
//!
//! # How the cache is computed
//! Source: <https://ai.google.dev/gemini-api/docs/caching>.
//! - A request is **linearized** into tokens ([`super::tokens`], `o200k_base`): its head,
//!   then one piece per `contents` entry (the entry's canonical JSON and a newline). The head
//!   is the cached content's tokens when the request names one, else the canonical JSON of
//!   `{systemInstruction, tools, toolConfig}` (what is present). Pieces are tokenized
//!   separately, so a request that appends contents extends the previous sequence exactly.
//! - **Explicit:** a cached content's tokens are those of the canonical JSON of its
//!   `{contents, systemInstruction, tools, toolConfig}` ([`cached_content_tokens`]). A request
//!   naming it reads all of them.
//! - **Implicit** (on by default for 2.5 and newer models): the longest common token prefix
//!   with an earlier accepted request to the same model counts as cached when it is at least
//!   the model's minimum ([`min_cacheable_tokens`], or
//!   [`GeminiSim::set_min_cacheable_tokens`]). With a cached content this extends the cached
//!   part into the history after it.
//! - `cachedContentTokenCount` = the larger of the two (omitted when 0, as proto3 JSON
//!   does); `promptTokenCount` = the whole sequence; `candidatesTokenCount` = the tokens of
//!   the reply's text or of each call's `{"name","args"}` JSON; `thoughtsTokenCount` = the
//!   tokens of the thought text.
//! - Cached contents expire at `expireTime` on the simulator's clock, which starts at the
//!   real time and moves with [`GeminiSim::advance_clock`]; [`GeminiSim::expire_all`]
//!   expires every one at once. [`GeminiSim::drop_cache`] forgets the implicit cache (an
//!   eviction); explicit objects are resources and stay until they expire or are deleted.
//!
//! Each [`SimRecord`] of a generate call also keeps `seen_prefix_tokens`: the longest
//! token prefix the request shares with anything sent before (earlier accepted requests and
//! created cached contents), whatever the minimum, drops or expiry: the most a cache could
//! serve, which `cargo xtask bench cache` compares against.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{Harness, Seen, SimServer, TokenMemo, lock, serve};

mod check;
mod generate;
mod render;
mod resources;

use generate::generate;

pub use resources::cached_content_tokens;
use resources::{create, expiry, resource};

/// The smallest prompt, in tokens, the simulator caches for `model`, implicitly or in a
/// cached content (a create below it answers 400 `Cached content is too small`).
///
/// The simulator's own reading of <https://ai.google.dev/gemini-api/docs/caching> (the
/// 2026-05 table: 2.5 Flash and 3 Flash 1,024, 2.5 Pro and 3 Pro 4,096; others 4,096, the
/// largest documented), kept apart from the adapter's (`crate::gemini`), so a wrong copy
/// is caught rather than shared.
pub fn min_cacheable_tokens(model: &str) -> u64 {
    let model = model.strip_prefix("models/").unwrap_or(model);
    const TABLE: &[(&str, u64)] = &[
        ("gemini-2.5-flash", 1024),
        ("gemini-2.5-pro", 4096),
        ("gemini-3-flash", 1024),
        ("gemini-3-pro", 4096),
    ];
    TABLE
        .iter()
        .find(|(prefix, _)| model.starts_with(prefix))
        .map_or(4096, |(_, n)| *n)
}

/// The `ttl` of a cached content created without one: 3600 s, one hour (the API's
/// documented default, <https://ai.google.dev/gemini-api/docs/caching>).
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// The message the API answers a request naming a missing or expired cached content with
/// (HTTP 403, `PERMISSION_DENIED`), as observed by client libraries.
pub const CACHE_NOT_FOUND: &str = "CachedContent not found (or permission denied)";

/// The message the API answers a function-call turn that does not follow a user turn or a
/// function-response turn with (HTTP 400, `INVALID_ARGUMENT`), as reported against the
/// real API (google-gemini/gemini-cli#11814, #26956): a history that starts with a
/// function call, for one.
pub const FUNCTION_CALL_TURN_ORDER: &str = "Please ensure that function call turn comes immediately after a user turn or after a function response turn.";

/// One request the simulator received and what it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct SimRecord {
    /// `GET`, `POST`, `PATCH` or `DELETE`.
    pub method: String,
    /// The path, such as `/v1beta/models/gemini-2.5-flash:generateContent`.
    pub path: String,
    /// The query string, if any (`alt=sse`, `updateMask=ttl`).
    pub query: Option<String>,
    /// Whether an `x-goog-api-key` header was sent.
    pub api_key_header: bool,
    /// The request body (`Value::Null` when empty or not JSON).
    pub body: Value,
    /// The HTTP status answered.
    pub status: u16,
    /// For an answered generate call, the usage it reported.
    pub usage: Option<SimUsage>,
}

impl SimRecord {
    /// Whether this is a `generateContent` or `streamGenerateContent` call.
    pub fn is_generate(&self) -> bool {
        self.method == "POST" && self.path.starts_with("/v1beta/models/")
    }

    /// Whether this is a `cachedContents` call with this method.
    pub fn is_cache_call(&self, method: &str) -> bool {
        self.method == method && self.path.starts_with("/v1beta/cachedContents")
    }
}

/// The token figures of one answered generate call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimUsage {
    /// `promptTokenCount`: the whole linearized request, cached included.
    pub prompt_tokens: u64,
    /// `cachedContentTokenCount`: explicit and implicit hits (see the module docs).
    pub cached_tokens: u64,
    /// The named cached content's tokens (0 without one).
    pub explicit_tokens: u64,
    /// `candidatesTokenCount`.
    pub output_tokens: u64,
    /// `thoughtsTokenCount`.
    pub thoughts_tokens: u64,
    /// The longest token prefix shared with anything sent before.
    pub seen_prefix_tokens: u64,
}

/// A live cached content, as [`GeminiSim::cached_contents`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimCachedContent {
    /// `cachedContents/{id}`.
    pub name: String,
    /// `models/{model}`.
    pub model: String,
    /// Its tokens ([`cached_content_tokens`]).
    pub tokens: u64,
    /// When it expires, on the simulator's clock.
    pub expire_time: SystemTime,
    /// Its `displayName`.
    pub display_name: String,
}

#[derive(Debug, Clone)]
struct CacheObject {
    public: SimCachedContent,
    create_time: SystemTime,
    update_time: SystemTime,
    /// `{contents, systemInstruction, tools, toolConfig}` as created.
    content: Map<String, Value>,
    token_seq: Arc<[u32]>,
}

#[derive(Debug)]
struct State {
    harness: Harness,
    records: Vec<SimRecord>,
    caches: BTreeMap<String, CacheObject>,
    /// Accepted requests' sequences per model, for implicit hits; `drop_cache` clears it.
    implicit: Vec<(String, Arc<[u32]>)>,
    /// Everything sent before (requests and cache objects), for `seen_prefix_tokens`.
    seen: Seen,
    memo: TokenMemo,
    min_tokens: Option<u64>,
    thought_signatures: bool,
    thoughts: Option<String>,
    /// Signatures issued, for the signature check.
    issued_signatures: Vec<String>,
    next_cache_id: u64,
    next_response: u64,
}

impl State {
    fn minimum(&self, model: &str) -> u64 {
        self.min_tokens
            .unwrap_or_else(|| min_cacheable_tokens(model))
    }
}

/// A loopback Gemini API with a simulated prompt cache.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// use halo_adapters::gemini::GeminiAdapter;
/// use halo_adapters::sim::{SimReply, gemini::GeminiSim};
///
/// let sim = GeminiSim::start().await?;
/// sim.push_reply(SimReply::text("Hello."));
/// let model = GeminiAdapter::builder()
///     .api_key("sim-key")
///     .base_url(sim.base_url())
///     .clock(sim.clock())
///     .build()
///     .unwrap();
/// // Run an agent on `model`, then read `sim.records()`.
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct GeminiSim {
    server: SimServer,
    state: Arc<Mutex<State>>,
    /// Milliseconds the clock is ahead of the real time.
    offset_ms: Arc<AtomicU64>,
}

/// What the axum handler shares.
#[derive(Debug, Clone)]
struct Shared {
    state: Arc<Mutex<State>>,
    offset_ms: Arc<AtomicU64>,
}

impl Shared {
    fn now(&self) -> SystemTime {
        SystemTime::now() + Duration::from_millis(self.offset_ms.load(Ordering::Relaxed))
    }
}

impl GeminiSim {
    /// A simulator on `127.0.0.1` at a free port, with an empty reply script.
    ///
    /// # Errors
    /// The IO error when no loopback port can be bound.
    pub async fn start() -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(State {
            harness: Harness::default(),
            records: Vec::new(),
            caches: BTreeMap::new(),
            implicit: Vec::new(),
            seen: Seen::default(),
            memo: TokenMemo::default(),
            min_tokens: None,
            thought_signatures: false,
            thoughts: None,
            issued_signatures: Vec::new(),
            next_cache_id: 1,
            next_response: 1,
        }));
        let offset_ms = Arc::new(AtomicU64::new(0));
        let shared = Shared {
            state: state.clone(),
            offset_ms: offset_ms.clone(),
        };
        let router = axum::Router::new().fallback(handle).with_state(shared);
        let server = serve(router).await?;
        Ok(GeminiSim {
            server,
            state,
            offset_ms,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The base URL to give an adapter: `http://127.0.0.1:<port>` (it appends `/v1beta/…`).
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    script_methods!();

    /// Overrides the minimum cacheable length in tokens for every model (`None`: the
    /// per-model table, [`min_cacheable_tokens`]).
    pub fn set_min_cacheable_tokens(&self, tokens: Option<u64>) {
        self.lock().min_tokens = tokens;
    }

    /// The model's context window in tokens, counted as the simulator counts a request
    /// (its whole linearized sequence, cached part included). A longer request answers 400
    /// `INVALID_ARGUMENT` `The input token count (N) exceeds the maximum number of tokens
    /// allowed (M).`, the API's wording (<https://ai.google.dev/gemini-api/docs/long-context>),
    /// and uses no reply. `None` (the default): no limit.
    pub fn set_context_window(&self, tokens: Option<u64>) {
        self.lock().harness.set_window(tokens);
    }

    /// Whether answers carry `thoughtSignature`s (on the first function call of a turn, or
    /// the last part of a text answer), and requests are checked for them like Gemini 3.
    pub fn set_thought_signatures(&self, on: bool) {
        self.lock().thought_signatures = on;
    }

    /// A thought summary every answer starts with (a `thought: true` part), or none.
    pub fn set_thoughts(&self, thought: Option<String>) {
        self.lock().thoughts = thought;
    }

    /// The simulator's "now": the real time plus every [`advance_clock`](Self::advance_clock).
    pub fn now(&self) -> SystemTime {
        SystemTime::now() + Duration::from_millis(self.offset_ms.load(Ordering::Relaxed))
    }

    /// A clock reading [`now`](Self::now), to give an adapter
    /// ([`GeminiBuilder::clock`](crate::gemini::GeminiBuilder::clock)) so both agree on
    /// expiry.
    pub fn clock(&self) -> impl Fn() -> SystemTime + Send + Sync + 'static {
        let offset = self.offset_ms.clone();
        move || SystemTime::now() + Duration::from_millis(offset.load(Ordering::Relaxed))
    }

    /// Moves the clock forward by `by` (cached contents past their `expireTime` expire).
    pub fn advance_clock(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// Expires every cached content now, as if their TTL had run out; requests naming one
    /// get the API's 403 `CachedContent not found (or permission denied)`.
    pub fn expire_all(&self) {
        self.lock().caches.clear();
    }

    /// Forgets the implicit cache, as an eviction would: the next request without a cached
    /// content is a full miss. Explicit cached contents stay (they are resources with a
    /// TTL); `seen_prefix_tokens` still counts what was sent before.
    pub fn drop_cache(&self) {
        self.lock().implicit.clear();
    }

    /// The cached contents alive now, by name.
    pub fn cached_contents(&self) -> Vec<SimCachedContent> {
        let now = self.now();
        self.lock()
            .caches
            .values()
            .filter(|c| c.public.expire_time > now)
            .map(|c| c.public.clone())
            .collect()
    }

    /// Every request with its status (and a generate call's token figures), in order.
    pub fn records(&self) -> Vec<SimRecord> {
        self.lock().records.clone()
    }

    /// The generate calls (`generateContent` and `streamGenerateContent`) with their
    /// status and token figures, in order.
    pub fn generate_records(&self) -> Vec<SimRecord> {
        self.lock()
            .records
            .iter()
            .filter(|r| r.is_generate())
            .cloned()
            .collect()
    }

    /// The bodies of every generate call (`generateContent` and `streamGenerateContent`),
    /// in order, answered or not.
    pub fn requests(&self) -> Vec<Value> {
        self.lock()
            .records
            .iter()
            .filter(|r| r.is_generate())
            .map(|r| r.body.clone())
            .collect()
    }
}

fn error_body(code: u16, status: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message, "status": status}})
}

fn error(code: StatusCode, status: &str, message: &str) -> (StatusCode, Value) {
    (code, error_body(code.as_u16(), status, message))
}

fn invalid(message: impl AsRef<str>) -> (StatusCode, Value) {
    error(
        StatusCode::BAD_REQUEST,
        "INVALID_ARGUMENT",
        message.as_ref(),
    )
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
        body.to_string(),
    )
        .into_response()
}

async fn handle(
    AxumState(shared): AxumState<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let now = shared.now();
    let mut state = lock(&shared.state);
    let parsed: Option<Value> = if body.is_empty() {
        None
    } else {
        serde_json::from_slice(&body).ok()
    };
    let mut record = SimRecord {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().map(str::to_string),
        api_key_header: headers.get("x-goog-api-key").is_some_and(|v| !v.is_empty()),
        body: parsed.clone().unwrap_or(Value::Null),
        status: 200,
        usage: None,
    };
    let answer = route(&mut state, &record, parsed, &body, now);
    let response = match answer {
        Ok(Answer::Json(v)) => json_response(StatusCode::OK, &v),
        Ok(Answer::Generated { body, usage }) => {
            record.usage = Some(usage);
            body
        }
        Err((code, v)) => {
            record.status = code.as_u16();
            json_response(code, &v)
        }
    };
    state.records.push(record);
    response
}

enum Answer {
    Json(Value),
    Generated { body: Response, usage: SimUsage },
}

type Reply = Result<Answer, (StatusCode, Value)>;

fn route(
    state: &mut State,
    record: &SimRecord,
    body: Option<Value>,
    raw: &[u8],
    now: SystemTime,
) -> Reply {
    if !record.api_key_header {
        return Err(error(
            StatusCode::FORBIDDEN,
            "PERMISSION_DENIED",
            "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
        ));
    }
    if !raw.is_empty() && body.is_none() {
        return Err(invalid(
            "Invalid JSON payload received. The body is not JSON.",
        ));
    }
    let body = body.unwrap_or(Value::Null);
    let path = record.path.as_str();
    let method = record.method.as_str();
    // Drop what has expired before anything reads the caches.
    state.caches.retain(|_, c| c.public.expire_time > now);

    if let Some(action) = path.strip_prefix("/v1beta/models/") {
        let Some((model, verb)) = action.split_once(':') else {
            return Err(error(
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
                "The requested URL was not found on this server.",
            ));
        };
        let stream = match (method, verb) {
            ("POST", "generateContent") => None,
            ("POST", "streamGenerateContent") => Some(record.query.as_deref() == Some("alt=sse")),
            _ => {
                return Err(error(
                    StatusCode::NOT_FOUND,
                    "NOT_FOUND",
                    "The requested URL was not found on this server.",
                ));
            }
        };
        return generate(state, model, &body, stream);
    }
    match (method, path) {
        ("POST", "/v1beta/cachedContents") => create(state, &body, now),
        ("GET", "/v1beta/cachedContents") => Ok(Answer::Json(json!({
            "cachedContents": state.caches.values().map(resource).collect::<Vec<_>>()
        }))),
        (_, p) if p.starts_with("/v1beta/cachedContents/") => {
            let name = p.trim_start_matches("/v1beta/");
            let not_found = || {
                error(
                    StatusCode::NOT_FOUND,
                    "NOT_FOUND",
                    &format!("{name} not found"),
                )
            };
            match method {
                "GET" => state
                    .caches
                    .get(name)
                    .map(|c| Answer::Json(resource(c)))
                    .ok_or_else(not_found),
                "DELETE" => state
                    .caches
                    .remove(name)
                    .map(|_| Answer::Json(json!({})))
                    .ok_or_else(not_found),
                "PATCH" => {
                    let mask = record
                        .query
                        .as_deref()
                        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("updateMask=")))
                        .unwrap_or_default();
                    if !mask
                        .split(',')
                        .any(|f| f == "ttl" || f == "expireTime" || f == "expire_time")
                    {
                        return Err(invalid("updateMask must name ttl or expireTime"));
                    }
                    let expire = expiry(&body, now)?;
                    let c = state.caches.get_mut(name).ok_or_else(not_found)?;
                    c.public.expire_time = expire;
                    c.update_time = now;
                    Ok(Answer::Json(resource(c)))
                }
                _ => Err(not_found()),
            }
        }
        _ => Err(error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "The requested URL was not found on this server.",
        )),
    }
}
