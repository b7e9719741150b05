//! [`AnthropicSim`]: a loopback fake of Anthropic's `POST /v1/messages` that computes
//! `cache_read_input_tokens` and `cache_creation_input_tokens` from the request's
//! `cache_control` breakpoints the way Anthropic documents it.
//!
//! Wire format (what [`crate::anthropic::AnthropicAdapter`] speaks): a `message` JSON body,
//! or with `stream: true` a `text/event-stream` of named events (`message_start`, `ping`,
//! `content_block_start` / `content_block_delta` / `content_block_stop` per block,
//! `message_delta`, `message_stop`). Text is streamed in small `text_delta`s and tool input
//! as two or three `input_json_delta` fragments. Answers come from a FIFO script of
//! [`SimReply`](super::SimReply)s; tool call ids are `toolu_01` followed by a 22-digit counter.
//!
//! Every request is checked first, with Anthropic's error shape
//! (`{"type":"error","error":{"type":"invalid_request_error","message":…}}`): HTTP 401 without
//! `x-api-key`, 400 without `anthropic-version`, `model`, `max_tokens` or a non-empty
//! `messages` array; 400 [`FIRST_MESSAGE_NOT_USER`] when the first message is not a `user`
//! one (the strict rule: Amazon Bedrock's, and the first-party API's as reported until late
//! 2024); 400 for more than four `cache_control` markers, a `1h` marker after a
//! `5m` one, an empty text block, a thinking block without its signature, `tool_use` or
//! `tool_result` blocks without `tools`, and — the pairing rule — an assistant `tool_use`
//! not answered by exactly one `tool_result` at the start of the next user message, or a
//! `tool_result` that answers no `tool_use` of the message before; a `tool_choice`
//! other than `auto` / `any` / `none` / `tool` naming a tool of the request, or an
//! `output_config.format` that is not `json_schema` with a schema whose objects are all
//! closed (`additionalProperties: false`, the JSON outputs rule); and with
//! [`AnthropicSim::set_context_window`], 400 `prompt is too long: N tokens > M maximum` for a
//! longer request. An empty reply script gets HTTP 418 (a test bug, not a provider
//! behaviour).
//!
//! # How the cache is computed
//!
//! Source: <https://platform.claude.com/docs/en/build-with-claude/prompt-caching>.
//! - The request is **linearized** ([`blocks`]) in the order tools → system → messages: one
//!   block per tool definition, per system text block (a string `system` is one block), and
//!   per message content block (a string `content` is one text block). A block's text is its
//!   JSON without the `cache_control` key; its tokens are that text's `o200k_base` count
//!   ([`super::count_tokens`]); its identity also holds the message role.
//! - The **breakpoints** are the blocks carrying `cache_control` (TTL `5m` by default, or
//!   `1h`); a top-level `cache_control` (automatic caching) is one more breakpoint on the
//!   last block. A breakpoint whose prefix is shorter than the model's minimum
//!   ([`min_cacheable_tokens`], or [`AnthropicSim::set_min_cacheable_tokens`]) is ignored:
//!   neither written nor read.
//! - **Reads:** from each breakpoint, the block boundaries at it and up to
//!   [`LOOKBACK_BLOCKS`] (20) blocks before it are searched, nearest first, for an unexpired
//!   entry whose prefix is exactly this request's prefix to that boundary (same model, same
//!   blocks). The longest one found is read: `cache_read_input_tokens` = its prefix's
//!   tokens, and its TTL is refreshed.
//! - **Writes:** every breakpoint's prefix becomes (or refreshes) an entry with the
//!   breakpoint's TTL; `cache_creation_input_tokens` = the tokens from the read point to the
//!   last breakpoint, split in `cache_creation` by the TTL of the breakpoint each part is
//!   written under.
//! - `input_tokens` = the rest (Anthropic's convention: it excludes cache reads and writes).
//! - An entry's identity also holds the request's `output_config` (observed to be part of
//!   the cache key: a request with another response format reads nothing), and a message
//!   block's identity the `tool_choice` ("changes to `tool_choice` … only affect message
//!   blocks": tools and system stay cached).
//! - Entries expire on a clock that starts at the real time and moves forward with
//!   [`AnthropicSim::advance_clock`]; [`AnthropicSim::drop_cache`] forgets them all.
//!
//! Each [`SimRecord`] also keeps `seen_prefix_tokens`: the longest token prefix the request
//! shares with any earlier accepted request, whatever the breakpoints, TTLs or minimum — the
//! theoretical maximum a cache could serve, which `cargo xtask bench cache` compares
//! against.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::{Harness, SCRIPT_EXHAUSTED, Seen, SimServer, TokenMemo, lock, serve};

mod cache;
mod check;
mod render;
mod tables;

use cache::run_cache;
use check::{check_request, error_response, invalid_request};
use render::{render_stream, reply_content};
pub use tables::{
    DEFAULT_MIN_CACHEABLE_TOKENS, LOOKBACK_BLOCKS, MAX_BREAKPOINTS, MIN_CACHEABLE_TOKENS, SimTtl,
    min_cacheable_tokens,
};

/// The message Anthropic answers a request whose first message is not a `user` one with
/// (HTTP 400, `invalid_request_error`), as reported by client libraries (Amazon Bedrock, and
/// the first-party API until late 2024).
pub const FIRST_MESSAGE_NOT_USER: &str = "messages: first message must use the \"user\" role";

/// One block of a linearized request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimBlock {
    /// `tools`, `system`, `user` or `assistant`.
    pub role: String,
    /// The block's JSON without its `cache_control` key.
    pub text: String,
    /// The block's breakpoint TTL, when it carries `cache_control`.
    pub breakpoint: Option<SimTtl>,
}

/// One request the simulator received and what it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct SimRecord {
    /// The request body (`Value::Null` when it was not JSON).
    pub body: Value,
    /// The HTTP status answered: 200, 400 or 401 (rejected), 418 (script exhausted).
    pub status: u16,
    /// `usage.input_tokens` as reported: the tokens neither read from nor written to the
    /// cache (0 when rejected).
    pub input_tokens: u64,
    /// `usage.cache_read_input_tokens` (0 when rejected).
    pub cache_read_input_tokens: u64,
    /// `usage.cache_creation_input_tokens` (0 when rejected).
    pub cache_creation_input_tokens: u64,
    /// All input tokens: the sum of the three above.
    pub total_input_tokens: u64,
    /// The longest token prefix shared with any earlier accepted request: the most any
    /// cache could have served.
    pub seen_prefix_tokens: u64,
    /// `usage.output_tokens` (0 when rejected).
    pub output_tokens: u64,
    /// The block indexes of the breakpoints that counted (at or above the minimum).
    pub breakpoints: Vec<usize>,
}

/// A live cache entry.
#[derive(Debug, Clone, Copy)]
struct Entry {
    expires: Instant,
    ttl: SimTtl,
}

#[derive(Debug)]
struct State {
    harness: Harness,
    records: Vec<SimRecord>,
    /// Prefix hash → entry.
    entries: HashMap<u64, Entry>,
    /// Every accepted request's tokens, for `seen_prefix_tokens`; `drop_cache` keeps it.
    seen: Seen,
    /// Tokens per block text.
    memo: TokenMemo,
    clock_offset: Duration,
    min_tokens: Option<u64>,
    next_call_id: u64,
    next_message_id: u64,
}

impl State {
    fn now(&self) -> Instant {
        Instant::now() + self.clock_offset
    }
}

/// A loopback Anthropic Messages server with a simulated prompt cache.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// use halo_adapters::anthropic::AnthropicAdapter;
/// use halo_adapters::sim::{SimReply, anthropic::AnthropicSim};
///
/// let sim = AnthropicSim::start().await?;
/// sim.push_reply(SimReply::text("Hello."));
/// let model = AnthropicAdapter::builder("claude-sonnet-4-5")
///     .api_key("sk-ant-sim")
///     .base_url(sim.base_url())
///     .build()
///     .unwrap();
/// // Run an agent on `model`, then read `sim.records()`.
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AnthropicSim {
    server: SimServer,
    state: Arc<Mutex<State>>,
}

impl AnthropicSim {
    /// A simulator on `127.0.0.1` at a free port, with an empty reply script.
    ///
    /// # Errors
    /// The IO error when no loopback port can be bound.
    pub async fn start() -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(State {
            harness: Harness::default(),
            records: Vec::new(),
            entries: HashMap::new(),
            seen: Seen::default(),
            memo: TokenMemo::default(),
            clock_offset: Duration::ZERO,
            min_tokens: None,
            next_call_id: 1,
            next_message_id: 1,
        }));
        let router = axum::Router::new()
            .route("/v1/messages", post(handle))
            .with_state(state.clone());
        let server = serve(router).await?;
        Ok(AnthropicSim { server, state })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The base URL to give an adapter: `http://127.0.0.1:<port>` (it appends
    /// `/v1/messages`).
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    script_methods!();

    /// Overrides the minimum cacheable length in tokens for every model (`None`: the
    /// per-model table, [`min_cacheable_tokens`]).
    pub fn set_min_cacheable_tokens(&self, tokens: Option<u64>) {
        self.lock().min_tokens = tokens;
    }

    /// The model's context window in tokens, counted over the request's linearized blocks
    /// (tools, system and messages). A longer request answers 400 `invalid_request_error`
    /// `prompt is too long: N tokens > M maximum`, the API's wording
    /// (<https://platform.claude.com/docs/en/build-with-claude/context-windows>), and uses
    /// no reply. `None` (the default): no limit.
    pub fn set_context_window(&self, tokens: Option<u64>) {
        self.lock().harness.set_window(tokens);
    }

    /// Moves the cache's clock forward by `by` (entries older than their TTL expire).
    pub fn advance_clock(&self, by: Duration) {
        self.lock().clock_offset += by;
    }

    /// Forgets every cache entry, as an eviction would: the next request is a full miss.
    /// `seen_prefix_tokens` still counts what was sent before.
    pub fn drop_cache(&self) {
        self.lock().entries.clear();
    }

    /// Every request body received, in order (`Value::Null` for a body that was not JSON).
    pub fn requests(&self) -> Vec<Value> {
        self.lock().records.iter().map(|r| r.body.clone()).collect()
    }

    /// Every request with its status and token figures, in order.
    pub fn records(&self) -> Vec<SimRecord> {
        self.lock().records.clone()
    }
}

/// The request linearized in cache order: tools, system blocks, message content blocks
/// (see the module docs).
///
/// # Errors
/// A message of the reason when `messages` is missing or a message's `content` is neither
/// a string nor an array, or a `cache_control` has an unknown `ttl`.
pub fn blocks(body: &Value) -> Result<Vec<SimBlock>, String> {
    let mut out = Vec::new();
    for tool in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push(sim_block("tools", tool)?);
    }
    match body.get("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            out.push(sim_block("system", &json!({"type": "text", "text": s}))?)
        }
        Some(Value::Array(items)) => {
            for item in items {
                out.push(sim_block("system", item)?);
            }
        }
        Some(_) => return Err("system: Input should be a valid string or list".into()),
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("messages: Field required")?;
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        match message.get("content") {
            Some(Value::String(s)) => {
                out.push(sim_block(role, &json!({"type": "text", "text": s}))?);
            }
            Some(Value::Array(items)) => {
                for item in items {
                    out.push(sim_block(role, item)?);
                }
            }
            _ => {
                return Err(format!(
                    "messages.{i}.content: Input should be a valid string or list"
                ));
            }
        }
    }
    Ok(out)
}

fn sim_block(role: &str, value: &Value) -> Result<SimBlock, String> {
    let mut value = value.clone();
    let breakpoint = match value
        .as_object_mut()
        .and_then(|m| m.remove("cache_control"))
    {
        None | Some(Value::Null) => None,
        Some(cc) => Some(ttl_of(&cc)?),
    };
    Ok(SimBlock {
        role: role.to_string(),
        text: value.to_string(),
        breakpoint,
    })
}

fn ttl_of(cache_control: &Value) -> Result<SimTtl, String> {
    if cache_control.get("type").and_then(Value::as_str) != Some("ephemeral") {
        return Err("cache_control.type: Input should be 'ephemeral'".into());
    }
    match cache_control.get("ttl") {
        None | Some(Value::Null) => Ok(SimTtl::FiveMinutes),
        Some(Value::String(s)) if s == "5m" => Ok(SimTtl::FiveMinutes),
        Some(Value::String(s)) if s == "1h" => Ok(SimTtl::OneHour),
        Some(other) => Err(format!(
            "cache_control.ttl: Input should be '5m' or '1h', got {other}"
        )),
    }
}

async fn handle(
    AxumState(state): AxumState<Arc<Mutex<State>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut state = lock(&state);
    answer(&mut state, &headers, &body)
}

/// Checks, computes the cache figures, records, and renders the answer.
fn answer(state: &mut State, headers: &HeaderMap, raw: &[u8]) -> Response {
    let mut record = SimRecord {
        body: Value::Null,
        status: 400,
        input_tokens: 0,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
        total_input_tokens: 0,
        seen_prefix_tokens: 0,
        output_tokens: 0,
        breakpoints: Vec::new(),
    };
    let header_set = |name: &str| headers.get(name).is_some_and(|v| !v.is_empty());
    if !header_set("x-api-key") {
        record.status = 401;
        state.records.push(record);
        return error_response(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "x-api-key header is required",
        );
    }
    let body: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => {
            state.records.push(record);
            return invalid_request(&format!("There was an issue with your request body: {e}"));
        }
    };
    record.body = body.clone();
    if !header_set("anthropic-version") {
        state.records.push(record);
        return invalid_request("anthropic-version: header is required");
    }
    let checked = blocks(&body).and_then(|b| check_request(&body, &b).map(|()| b));
    let linear = match checked {
        Ok(b) => b,
        Err(message) => {
            state.records.push(record);
            return invalid_request(&message);
        }
    };
    let automatic = match body.get("cache_control") {
        None | Some(Value::Null) => None,
        Some(cc) => match ttl_of(cc) {
            Ok(ttl) => Some(ttl),
            Err(message) => {
                state.records.push(record);
                return invalid_request(&message);
            }
        },
    };
    let mut all_tokens: Vec<u32> = Vec::new();
    for b in &linear {
        all_tokens.extend_from_slice(&state.memo.tokens(&b.text));
    }
    let all_tokens: Arc<[u32]> = all_tokens.into();
    if let Some(window) = state.harness.exceeded(all_tokens.len() as u64) {
        state.records.push(record);
        return invalid_request(&format!(
            "prompt is too long: {} tokens > {window} maximum",
            all_tokens.len()
        ));
    }
    let Some(reply) = state.harness.reply(body.get("messages")) else {
        record.status = 418;
        state.records.push(record);
        return error_response(
            StatusCode::IM_A_TEAPOT,
            "sim_script_exhausted",
            SCRIPT_EXHAUSTED,
        );
    };

    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let seen = state.seen.longest_prefix(&all_tokens) as u64;
    state.seen.push(all_tokens);
    let cache = run_cache(state, &body, &model, &linear, automatic);

    let (content, stop_reason) = reply_content(&reply, state);
    let output_tokens: u64 = content
        .iter()
        .map(|b| match b["type"].as_str() {
            Some("text") => super::count_tokens(b["text"].as_str().unwrap_or("")),
            _ => {
                super::count_tokens(&b["input"].to_string())
                    + super::count_tokens(b["name"].as_str().unwrap_or(""))
            }
        })
        .sum::<u64>()
        .max(1);
    let write = cache.write_5m + cache.write_1h;
    let uncached = cache.total - cache.read - write;
    record.status = 200;
    record.input_tokens = uncached;
    record.cache_read_input_tokens = cache.read;
    record.cache_creation_input_tokens = write;
    record.total_input_tokens = cache.total;
    record.seen_prefix_tokens = seen;
    record.output_tokens = output_tokens;
    record.breakpoints = cache.breakpoints;
    state.records.push(record);

    let id = format!("msg_sim{:08}", state.next_message_id);
    state.next_message_id += 1;
    let message = json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {
            "input_tokens": uncached,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": cache.read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": cache.write_5m,
                "ephemeral_1h_input_tokens": cache.write_1h,
            },
            "output_tokens": output_tokens,
        },
    });
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        let mut response = render_stream(&message).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        response
    } else {
        axum::Json(message).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State {
            harness: Harness::default(),
            records: Vec::new(),
            entries: HashMap::new(),
            seen: Seen::default(),
            memo: TokenMemo::default(),
            clock_offset: Duration::ZERO,
            min_tokens: Some(10),
            next_call_id: 1,
            next_message_id: 1,
        }
    }

    fn block(text: &str, breakpoint: Option<SimTtl>) -> SimBlock {
        SimBlock {
            role: "user".into(),
            text: text.into(),
            breakpoint,
        }
    }

    const M5: Option<SimTtl> = Some(SimTtl::FiveMinutes);

    #[test]
    fn reads_the_previous_breakpoint_through_the_lookback_and_writes_the_rest() {
        let mut s = state();
        let words = "one two three four five six seven eight nine ten eleven twelve";
        let first = vec![block(words, M5), block("a question", M5)];
        let out = run_cache(&mut s, &Value::Null, "m", &first, None);
        let t0 = super::super::count_tokens(words);
        let t1 = super::super::count_tokens("a question");
        assert_eq!((out.read, out.write_5m, out.total), (0, t0 + t1, t0 + t1));
        // The same prefix plus two blocks; the breakpoint moved to the new last block.
        let second = vec![
            block(words, M5),
            block("a question", None),
            block("an answer", None),
            block("more", M5),
        ];
        let out = run_cache(&mut s, &Value::Null, "m", &second, None);
        assert_eq!(
            out.read,
            t0 + t1,
            "read up to the previous moving breakpoint"
        );
        assert_eq!(out.write_5m, out.total - out.read);
        // Another model shares nothing.
        assert_eq!(
            run_cache(&mut s, &Value::Null, "other", &second, None).read,
            0
        );
        // Expired entries are not read.
        s.clock_offset += Duration::from_secs(301);
        assert_eq!(run_cache(&mut s, &Value::Null, "m", &second, None).read, 0);
    }

    #[test]
    fn below_the_minimum_nothing_is_written_or_read() {
        let mut s = state();
        s.min_tokens = Some(10_000);
        let blocks = vec![block("short", M5)];
        let out = run_cache(&mut s, &Value::Null, "m", &blocks, None);
        assert_eq!((out.read, out.write_5m, out.breakpoints.len()), (0, 0, 0));
        assert!(s.entries.is_empty());
    }

    #[test]
    fn the_lookback_stops_after_twenty_blocks() {
        let mut s = state();
        let words = "one two three four five six seven eight nine ten eleven twelve";
        let mut request = vec![block(words, M5)];
        run_cache(&mut s, &Value::Null, "m", &request, None);
        request[0].breakpoint = None;
        for n in 0..21 {
            request.push(block(&format!("block {n}"), None));
        }
        request.last_mut().unwrap().breakpoint = M5;
        // The entry is 21 blocks behind the only breakpoint: out of reach.
        assert_eq!(run_cache(&mut s, &Value::Null, "m", &request, None).read, 0);
        // With 20 blocks in between it is found.
        let mut s = state();
        let mut request = vec![block(words, M5)];
        run_cache(&mut s, &Value::Null, "m", &request, None);
        for n in 0..20 {
            request.push(block(&format!("block {n}"), None));
        }
        request.last_mut().unwrap().breakpoint = M5;
        request[0].breakpoint = None;
        assert_eq!(
            run_cache(&mut s, &Value::Null, "m", &request, None).read,
            super::super::count_tokens(words)
        );
    }
}
