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
//! - Answers come from a FIFO script of [`SimReply`]s. Function calls come **without
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

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use halo_core::prefix::canonicalize;
use serde_json::{Map, Value, json};

use super::{
    SCRIPT_EXHAUSTED, Seen, SimReply, SimServer, TokenMemo, common_prefix, lock, serve, tokens,
};
use crate::gemini::min_cacheable_tokens;

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
    script: VecDeque<SimReply>,
    records: Vec<SimRecord>,
    caches: BTreeMap<String, CacheObject>,
    /// Accepted requests' sequences per model, for implicit hits; `drop_cache` clears it.
    implicit: Vec<(String, Arc<[u32]>)>,
    /// Everything sent before (requests and cache objects), for `seen_prefix_tokens`.
    seen: Seen,
    memo: TokenMemo,
    min_tokens: Option<u64>,
    /// The context window in tokens; `None`: no limit.
    context_window: Option<u64>,
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
            script: VecDeque::new(),
            records: Vec::new(),
            caches: BTreeMap::new(),
            implicit: Vec::new(),
            seen: Seen::default(),
            memo: TokenMemo::default(),
            min_tokens: None,
            context_window: None,
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

    /// Appends one reply to the script.
    pub fn push_reply(&self, reply: SimReply) {
        self.lock().script.push_back(reply);
    }

    /// Replaces the script with `replies`, answered in order.
    pub fn set_reply_script(&self, replies: impl IntoIterator<Item = SimReply>) {
        self.lock().script = replies.into_iter().collect();
    }

    /// Replies not yet used.
    pub fn remaining_replies(&self) -> usize {
        self.lock().script.len()
    }

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
        self.lock().context_window = tokens;
    }

    /// The context window set with [`set_context_window`](Self::set_context_window), in
    /// tokens (`None`: no limit), to give the agent under test the same window.
    pub fn context_window(&self) -> Option<u64> {
        self.lock().context_window
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

/// The tokens of a cached content: those of the canonical JSON (sorted keys, no whitespace)
/// of its `{contents, systemInstruction, tools, toolConfig}` (what is present), as in a
/// `POST cachedContents` body.
pub fn cached_content_tokens(create_body: &Value) -> u64 {
    tokens(&canonical(&cache_content(create_body))).len() as u64
}

/// The cacheable fields of a create body.
fn cache_content(body: &Value) -> Value {
    let mut out = Map::new();
    for key in ["contents", "systemInstruction", "tools", "toolConfig"] {
        if let Some(v) = body.get(key).filter(|v| !v.is_null()) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// Canonical JSON text: sorted keys, no whitespace.
fn canonical(value: &Value) -> String {
    canonicalize(value.clone()).to_string()
}

/// One contents entry's linearized text.
fn content_piece(content: &Value) -> String {
    let mut s = canonical(content);
    s.push('\n');
    s
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

/// `ttl` (a duration) or `expireTime` (not parsed: the simulator takes only `ttl`), else
/// the default TTL.
fn expiry(body: &Value, now: SystemTime) -> Result<SystemTime, (StatusCode, Value)> {
    match body.get("ttl") {
        None | Some(Value::Null) => Ok(now + DEFAULT_TTL),
        Some(v) => {
            let secs = v
                .as_str()
                .and_then(|s| s.strip_suffix('s'))
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .ok_or_else(|| {
                    invalid(format!(
                        "Invalid value at 'ttl' ({v}): expected a duration such as \"3600s\""
                    ))
                })?;
            Ok(now + Duration::from_secs_f64(secs))
        }
    }
}

fn create(state: &mut State, body: &Value, now: SystemTime) -> Reply {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| m.starts_with("models/"))
        .ok_or_else(|| invalid("* CachedContent.model: model is required as `models/{model}`"))?
        .to_string();
    check_contents(body.get("contents").unwrap_or(&Value::Null), true)?;
    check_tool_config(body.get("tools"), body.get("toolConfig"))?;
    let content = match cache_content(body) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let seq: Arc<[u32]> = tokens(&canonical(&Value::Object(content.clone()))).into();
    let total = seq.len() as u64;
    let minimum = state.minimum(&model);
    if total < minimum {
        return Err(invalid(format!(
            "Cached content is too small. total_token_count={total}, min_total_token_count={minimum}"
        )));
    }
    let expire_time = expiry(body, now)?;
    let name = format!("cachedContents/sim{:08}", state.next_cache_id);
    state.next_cache_id += 1;
    let object = CacheObject {
        public: SimCachedContent {
            name: name.clone(),
            model,
            tokens: total,
            expire_time,
            display_name: body
                .get("displayName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        },
        create_time: now,
        update_time: now,
        content,
        token_seq: seq.clone(),
    };
    let answer = resource(&object);
    state.seen.push(seq);
    state.caches.insert(name, object);
    Ok(Answer::Json(answer))
}

/// The resource JSON of a cached content (without its contents, as the API's `get`).
fn resource(c: &CacheObject) -> Value {
    json!({
        "name": c.public.name,
        "model": c.public.model,
        "createTime": rfc3339(c.create_time),
        "updateTime": rfc3339(c.update_time),
        "expireTime": rfc3339(c.public.expire_time),
        "displayName": c.public.display_name,
        "usageMetadata": {"totalTokenCount": c.public.tokens},
    })
}

/// The declared function names of a `tools` value.
fn declared(tools: Option<&Value>) -> Vec<String> {
    tools
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
        .flatten()
        .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// `toolConfig.functionCallingConfig`: a known mode, and `allowedFunctionNames` only with
/// `ANY` or `VALIDATED`, naming declared functions
/// (<https://ai.google.dev/api/caching#FunctionCallingConfig>).
fn check_tool_config(
    tools: Option<&Value>,
    tool_config: Option<&Value>,
) -> Result<(), (StatusCode, Value)> {
    let Some(config) = tool_config
        .and_then(|c| c.get("functionCallingConfig"))
        .filter(|c| !c.is_null())
    else {
        return Ok(());
    };
    let mode = config.get("mode").and_then(Value::as_str).unwrap_or("AUTO");
    if !["AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"].contains(&mode) {
        return Err(invalid(format!(
            "Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), \"{mode}\""
        )));
    }
    let allowed: Vec<&str> = config
        .get("allowedFunctionNames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if allowed.is_empty() {
        return Ok(());
    }
    if mode != "ANY" && mode != "VALIDATED" {
        return Err(invalid(
            "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: allowed_function_names can only be set when mode is ANY or VALIDATED.",
        ));
    }
    let names = declared(tools);
    if let Some(unknown) = allowed.iter().find(|a| !names.iter().any(|n| n == *a)) {
        return Err(invalid(format!(
            "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: function `{unknown}` is not declared in tools."
        )));
    }
    Ok(())
}

/// `generationConfig`: a `responseSchema` needs `responseMimeType: application/json`, and a
/// JSON response next to function declarations is refused before Gemini 3.
fn check_generation_config(
    model: &str,
    config: Option<&Value>,
    tools: Option<&Value>,
) -> Result<(), (StatusCode, Value)> {
    let Some(config) = config else {
        return Ok(());
    };
    let json = config.get("responseMimeType").and_then(Value::as_str) == Some("application/json");
    if config.get("responseSchema").is_some_and(|s| !s.is_null()) && !json {
        return Err(invalid(
            "* GenerateContentRequest.generation_config.response_schema: response_mime_type must be set to application/json when response_schema is set.",
        ));
    }
    if json && !declared(tools).is_empty() && !crate::gemini::json_with_tools(model) {
        return Err(invalid(
            "Function calling with a response mime type: 'application/json' is unsupported",
        ));
    }
    Ok(())
}

/// Roles, and (in requests) that every function-call turn is answered.
fn check_contents(contents: &Value, allow_empty: bool) -> Result<(), (StatusCode, Value)> {
    let list = match contents {
        Value::Null if allow_empty => return Ok(()),
        Value::Array(list) if allow_empty || !list.is_empty() => list,
        _ => {
            return Err(invalid(
                "* GenerateContentRequest.contents: contents is not specified",
            ));
        }
    };
    for (i, c) in list.iter().enumerate() {
        let role = role_of(c);
        if role != "user" && role != "model" {
            return Err(invalid(format!(
                "Please use a valid role: user, model. (contents[{i}].role = {role})"
            )));
        }
        let parts = c.get("parts").and_then(Value::as_array);
        if parts.is_none_or(|p| p.is_empty()) {
            return Err(invalid(format!(
                "* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."
            )));
        }
        for (j, part) in parts_of(c).iter().enumerate() {
            if !has_data(part) {
                return Err(invalid(format!(
                    "* GenerateContentRequest.contents[{i}].parts[{j}].data: required oneof field 'data' must have one initialized field"
                )));
            }
        }
    }
    Ok(())
}

/// Whether a part sets its `data` oneof, as the real API checks it: an empty `text` does
/// not count (Gemini answers `{"text": ""}` with HTTP 400 "required oneof field 'data'
/// must have one initialized field"), except on a part that carries a `thoughtSignature`
/// (the signed empty text part Gemini itself sends at the end of an answer).
fn has_data(part: &Value) -> bool {
    const DATA: [&str; 6] = [
        "inlineData",
        "fileData",
        "functionCall",
        "functionResponse",
        "executableCode",
        "codeExecutionResult",
    ];
    if DATA
        .iter()
        .any(|f| part.get(*f).is_some_and(|v| !v.is_null()))
    {
        return true;
    }
    match part.get("text").and_then(Value::as_str) {
        Some("") => part.get("thoughtSignature").is_some_and(|s| s.is_string()),
        Some(_) => true,
        None => false,
    }
}

/// A content's role; a content without one is a `user` content.
fn role_of(content: &Value) -> &str {
    content
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("user")
}

fn parts_of(content: &Value) -> &[Value] {
    content
        .get("parts")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn call_names(content: &Value, field: &str) -> Vec<String> {
    parts_of(content)
        .iter()
        .filter_map(|p| p.get(field))
        .map(|f| {
            f.get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The function-call pairing, the ids the simulator never issued, and (with signatures
/// on) the signatures of the current turn.
fn check_calls(all: &[Value], signatures: Option<&[String]>) -> Result<(), (StatusCode, Value)> {
    for (i, c) in all.iter().enumerate() {
        for p in parts_of(c) {
            for field in ["functionCall", "functionResponse"] {
                if let Some(id) = p.get(field).and_then(|f| f.get("id")) {
                    return Err(invalid(format!(
                        "contents[{i}]: {field}.id {id} was never issued by this API (the simulator sends calls without ids)"
                    )));
                }
            }
        }
        let calls = call_names(c, "functionCall");
        let responses = call_names(c, "functionResponse");
        if !calls.is_empty() {
            // A user turn and a function-response turn are both `user` contents.
            let after_user = i
                .checked_sub(1)
                .and_then(|j| all.get(j))
                .is_some_and(|before| role_of(before) == "user");
            if !after_user {
                return Err(invalid(FUNCTION_CALL_TURN_ORDER));
            }
            let answered = all
                .get(i + 1)
                .map(|n| call_names(n, "functionResponse"))
                .unwrap_or_default();
            if answered != calls {
                return Err(invalid(format!(
                    "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn. (contents[{i}] calls {calls:?}, the next content answers {answered:?})"
                )));
            }
        }
        if !responses.is_empty() {
            let asked = i
                .checked_sub(1)
                .and_then(|j| all.get(j))
                .map(|p| call_names(p, "functionCall"))
                .unwrap_or_default();
            if asked != responses {
                return Err(invalid(format!(
                    "Please ensure that function response turn comes immediately after a function call turn. (contents[{i}])"
                )));
            }
        }
    }
    if let Some(issued) = signatures {
        // The current turn: from the last user content with ordinary (non-response) parts.
        let start = all
            .iter()
            .rposition(|c| {
                c.get("role").and_then(Value::as_str) != Some("model")
                    && parts_of(c)
                        .iter()
                        .any(|p| p.get("functionResponse").is_none())
            })
            .unwrap_or(0);
        for (i, c) in all.iter().enumerate().skip(start) {
            let first_call = parts_of(c).iter().find(|p| p.get("functionCall").is_some());
            if let Some(part) = first_call {
                let ok = part
                    .get("thoughtSignature")
                    .and_then(Value::as_str)
                    .is_some_and(|s| issued.iter().any(|x| x == s));
                if !ok {
                    return Err(invalid(format!(
                        "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                        part["functionCall"]["name"].as_str().unwrap_or_default(),
                        i + 1
                    )));
                }
            }
        }
    }
    Ok(())
}

fn generate(state: &mut State, model: &str, body: &Value, stream: Option<bool>) -> Reply {
    check_contents(body.get("contents").unwrap_or(&Value::Null), false)?;
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    let model_path = format!("models/{model}");
    let cached = match body.get("cachedContent").and_then(Value::as_str) {
        None => None,
        Some(name) => {
            if ["systemInstruction", "tools", "toolConfig"]
                .iter()
                .any(|k| body.get(*k).is_some_and(|v| !v.is_null()))
            {
                return Err(invalid(
                    "CachedContent can not be used with GenerateContent request setting system_instruction, tools or tool_config.\n\nProposed fix: move those values to CachedContent from GenerateContent request.",
                ));
            }
            let c = state.caches.get(name).ok_or_else(|| {
                error(StatusCode::FORBIDDEN, "PERMISSION_DENIED", CACHE_NOT_FOUND)
            })?;
            if c.public.model != model_path {
                return Err(invalid(format!(
                    "Model used by GenerateContent request ({model_path}) and CachedContent ({}) has to be the same.",
                    c.public.model
                )));
            }
            Some(c.clone())
        }
    };
    // Tools and tool config from the request or from its cached content.
    let tools = cached
        .as_ref()
        .and_then(|c| c.content.get("tools").cloned())
        .or_else(|| body.get("tools").cloned());
    let tool_config = cached
        .as_ref()
        .and_then(|c| c.content.get("toolConfig").cloned())
        .or_else(|| body.get("toolConfig").cloned());
    check_tool_config(tools.as_ref(), tool_config.as_ref())?;
    check_generation_config(model, body.get("generationConfig"), tools.as_ref())?;
    let all_contents: Vec<Value> = cached
        .as_ref()
        .and_then(|c| c.content.get("contents"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(&contents)
        .cloned()
        .collect();
    let issued = state.issued_signatures.clone();
    check_calls(
        &all_contents,
        state.thought_signatures.then_some(issued.as_slice()),
    )?;
    // The linearized request.
    let head: Arc<[u32]> = match &cached {
        Some(c) => c.token_seq.clone(),
        None => {
            let mut h = Map::new();
            for key in ["systemInstruction", "tools", "toolConfig"] {
                if let Some(v) = body.get(key).filter(|v| !v.is_null()) {
                    h.insert(key.to_string(), v.clone());
                }
            }
            if h.is_empty() {
                Arc::from(Vec::new())
            } else {
                state.memo.tokens(&canonical(&Value::Object(h)))
            }
        }
    };
    let mut seq: Vec<u32> = head.to_vec();
    for c in &contents {
        seq.extend_from_slice(&state.memo.tokens(&content_piece(c)));
    }
    let seq: Arc<[u32]> = seq.into();
    if let Some(window) = state.context_window.filter(|&w| seq.len() as u64 > w) {
        return Err(invalid(format!(
            "The input token count ({}) exceeds the maximum number of tokens allowed ({window}).",
            seq.len()
        )));
    }
    let Some(reply) =
        super::summary_reply(body.get("contents")).or_else(|| state.script.pop_front())
    else {
        return Err(error(
            StatusCode::IM_A_TEAPOT,
            "FAILED_PRECONDITION",
            SCRIPT_EXHAUSTED,
        ));
    };
    let explicit = cached.as_ref().map_or(0, |c| c.public.tokens);
    let minimum = state.minimum(model);
    let implicit = state
        .implicit
        .iter()
        .filter(|(m, _)| m == model)
        .map(|(_, earlier)| common_prefix(&seq, earlier) as u64)
        .max()
        .unwrap_or(0);
    let implicit = if implicit >= minimum { implicit } else { 0 };
    let seen = state.seen.longest_prefix(&seq) as u64;
    state.implicit.push((model.to_string(), seq.clone()));
    state.seen.push(seq.clone());

    let response_id = format!("sim-response-{}", state.next_response);
    state.next_response += 1;
    let signature = state
        .thought_signatures
        .then(|| format!("sim-signature-{response_id}"));
    if let Some(s) = &signature {
        state.issued_signatures.push(s.clone());
    }
    let thoughts = state.thoughts.clone();
    let turn = Turn::new(reply, signature, thoughts);
    let usage = SimUsage {
        prompt_tokens: seq.len() as u64,
        cached_tokens: explicit.max(implicit),
        explicit_tokens: explicit,
        output_tokens: turn.output_tokens(),
        thoughts_tokens: turn.thought_tokens(),
        seen_prefix_tokens: seen,
    };
    let body = match stream {
        None => json_response(
            StatusCode::OK,
            &turn.whole(&usage_json(&usage), model, &response_id),
        ),
        Some(sse) => {
            let chunks = turn.chunks(&usage_json(&usage), model, &response_id);
            if sse {
                let text: String = chunks
                    .iter()
                    .map(|c| format!("data: {c}\r\n\r\n"))
                    .collect();
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    text,
                )
                    .into_response()
            } else {
                json_response(StatusCode::OK, &Value::Array(chunks))
            }
        }
    };
    Ok(Answer::Generated { body, usage })
}

fn usage_json(u: &SimUsage) -> Value {
    let mut m = Map::new();
    m.insert("promptTokenCount".into(), u.prompt_tokens.into());
    m.insert("candidatesTokenCount".into(), u.output_tokens.into());
    if u.cached_tokens > 0 {
        m.insert("cachedContentTokenCount".into(), u.cached_tokens.into());
    }
    if u.thoughts_tokens > 0 {
        m.insert("thoughtsTokenCount".into(), u.thoughts_tokens.into());
    }
    m.insert(
        "totalTokenCount".into(),
        (u.prompt_tokens + u.output_tokens + u.thoughts_tokens).into(),
    );
    Value::Object(m)
}

/// One scripted answer in Gemini's parts.
struct Turn {
    reply: SimReply,
    signature: Option<String>,
    thoughts: Option<String>,
}

impl Turn {
    fn new(reply: SimReply, signature: Option<String>, thoughts: Option<String>) -> Self {
        Turn {
            reply,
            signature,
            thoughts,
        }
    }

    fn output_tokens(&self) -> u64 {
        match &self.reply {
            SimReply::Text(t) => tokens(t).len() as u64,
            SimReply::ToolCalls(calls) => calls
                .iter()
                .map(|(name, args)| {
                    tokens(&json!({"name": name, "args": args}).to_string()).len() as u64
                })
                .sum(),
        }
    }

    fn thought_tokens(&self) -> u64 {
        self.thoughts
            .as_deref()
            .map_or(0, |t| tokens(t).len() as u64)
    }

    fn thought_part(&self) -> Option<Value> {
        self.thoughts
            .as_ref()
            .map(|t| json!({"text": t, "thought": true}))
    }

    fn call_parts(&self, calls: &[(String, Value)]) -> Vec<Value> {
        calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                let mut part = json!({"functionCall": {"name": name, "args": args}});
                if i == 0
                    && let Some(s) = &self.signature
                {
                    part["thoughtSignature"] = Value::String(s.clone());
                }
                part
            })
            .collect()
    }

    fn candidate(parts: Vec<Value>, finish: bool) -> Value {
        let mut c = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if finish {
            c["finishReason"] = Value::String("STOP".into());
        }
        c
    }

    fn response(candidate: Value, usage: &Value, model: &str, id: &str) -> Value {
        json!({
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": id,
        })
    }

    fn whole(&self, usage: &Value, model: &str, id: &str) -> Value {
        let mut parts: Vec<Value> = self.thought_part().into_iter().collect();
        match &self.reply {
            SimReply::Text(t) => {
                let mut part = json!({ "text": t });
                if let Some(s) = &self.signature {
                    part["thoughtSignature"] = Value::String(s.clone());
                }
                parts.push(part);
            }
            SimReply::ToolCalls(calls) => parts.extend(self.call_parts(calls)),
        }
        Self::response(Self::candidate(parts, true), usage, model, id)
    }

    /// The streamed chunks: the thought, the text in three pieces (or the calls whole),
    /// then a last chunk with `STOP`, an empty text part (holding a text answer's
    /// signature) and the usage. Earlier chunks carry the prompt count only.
    fn chunks(&self, usage: &Value, model: &str, id: &str) -> Vec<Value> {
        let partial = json!({"promptTokenCount": usage["promptTokenCount"]});
        let mut out = Vec::new();
        if let Some(t) = self.thought_part() {
            out.push(Self::response(
                Self::candidate(vec![t], false),
                &partial,
                model,
                id,
            ));
        }
        let mut last = json!({ "text": "" });
        match &self.reply {
            SimReply::Text(t) => {
                for piece in split3(t) {
                    out.push(Self::response(
                        Self::candidate(vec![json!({ "text": piece })], false),
                        &partial,
                        model,
                        id,
                    ));
                }
                if let Some(s) = &self.signature {
                    last["thoughtSignature"] = Value::String(s.clone());
                }
            }
            SimReply::ToolCalls(calls) => out.push(Self::response(
                Self::candidate(self.call_parts(calls), false),
                &partial,
                model,
                id,
            )),
        }
        out.push(Self::response(
            Self::candidate(vec![last], true),
            usage,
            model,
            id,
        ));
        out
    }
}

/// `text` in three pieces on char boundaries (fewer for short texts, never an empty one).
fn split3(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    if chars.len() < 3 {
        return if text.is_empty() {
            Vec::new()
        } else {
            vec![text]
        };
    }
    let a = chars[chars.len() / 3].0;
    let b = chars[2 * chars.len() / 3].0;
    vec![&text[..a], &text[a..b], &text[b..]]
}

/// RFC 3339 in UTC with millisecond precision (`2026-05-07T12:00:00.123Z`), the form
/// Google's JSON timestamps take. Days to civil date: Howard Hinnant's algorithm
/// (<https://howardhinnant.github.io/date_algorithms.html#civil_from_days>).
fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789); // a leap day
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56.789Z");
    }

    #[test]
    fn text_splits_on_char_boundaries() {
        assert_eq!(split3("héllo wörld"), ["hél", "lo w", "örld"]);
        assert_eq!(split3("hi"), ["hi"]);
        assert!(split3("").is_empty());
    }
}
