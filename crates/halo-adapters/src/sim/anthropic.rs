//! [`AnthropicSim`]: a loopback fake of Anthropic's `POST /v1/messages` that computes
//! `cache_read_input_tokens` and `cache_creation_input_tokens` from the request's
//! `cache_control` breakpoints the way Anthropic documents it.
//!
//! Wire format (what [`crate::anthropic::AnthropicAdapter`] speaks): a `message` JSON body,
//! or with `stream: true` a `text/event-stream` of named events (`message_start`, `ping`,
//! `content_block_start` / `content_block_delta` / `content_block_stop` per block,
//! `message_delta`, `message_stop`). Text is streamed in small `text_delta`s and tool input
//! as two or three `input_json_delta` fragments. Answers come from a FIFO script of
//! [`SimReply`]s; tool call ids are `toolu_01` followed by a 22-digit counter.
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

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::{SCRIPT_EXHAUSTED, Seen, SimReply, SimServer, TokenMemo, lock, serve};
use crate::anthropic::{CacheTtl, LOOKBACK_BLOCKS, MAX_BREAKPOINTS, min_cacheable_tokens};

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
    pub breakpoint: Option<CacheTtl>,
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
    ttl: CacheTtl,
}

#[derive(Debug)]
struct State {
    script: VecDeque<SimReply>,
    records: Vec<SimRecord>,
    /// Prefix hash → entry.
    entries: HashMap<u64, Entry>,
    /// Every accepted request's tokens, for `seen_prefix_tokens`; `drop_cache` keeps it.
    seen: Seen,
    /// Tokens per block text.
    memo: TokenMemo,
    clock_offset: Duration,
    min_tokens: Option<u64>,
    /// The context window in tokens; `None`: no limit.
    context_window: Option<u64>,
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
            script: VecDeque::new(),
            records: Vec::new(),
            entries: HashMap::new(),
            seen: Seen::default(),
            memo: TokenMemo::default(),
            clock_offset: Duration::ZERO,
            min_tokens: None,
            context_window: None,
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

    /// The model's context window in tokens, counted over the request's linearized blocks
    /// (tools, system and messages). A longer request answers 400 `invalid_request_error`
    /// `prompt is too long: N tokens > M maximum`, the API's wording
    /// (<https://platform.claude.com/docs/en/build-with-claude/context-windows>), and uses
    /// no reply. `None` (the default): no limit.
    pub fn set_context_window(&self, tokens: Option<u64>) {
        self.lock().context_window = tokens;
    }

    /// The context window set with [`set_context_window`](Self::set_context_window), in
    /// tokens (`None`: no limit), to give the agent under test the same window.
    pub fn context_window(&self) -> Option<u64> {
        self.lock().context_window
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

fn ttl_of(cache_control: &Value) -> Result<CacheTtl, String> {
    if cache_control.get("type").and_then(Value::as_str) != Some("ephemeral") {
        return Err("cache_control.type: Input should be 'ephemeral'".into());
    }
    match cache_control.get("ttl") {
        None | Some(Value::Null) => Ok(CacheTtl::FiveMinutes),
        Some(Value::String(s)) if s == "5m" => Ok(CacheTtl::FiveMinutes),
        Some(Value::String(s)) if s == "1h" => Ok(CacheTtl::OneHour),
        Some(other) => Err(format!(
            "cache_control.ttl: Input should be '5m' or '1h', got {other}"
        )),
    }
}

/// An error in Anthropic's shape.
fn error_response(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_sim",
    });
    (status, axum::Json(body)).into_response()
}

fn invalid_request(message: &str) -> Response {
    error_response(StatusCode::BAD_REQUEST, "invalid_request_error", message)
}

/// The checks of the real API that matter to Halo (see the module docs).
fn check_request(body: &Value, blocks: &[SimBlock]) -> Result<(), String> {
    if body.get("model").and_then(Value::as_str).is_none() {
        return Err("model: Field required".into());
    }
    if body.get("max_tokens").and_then(Value::as_u64).is_none() {
        return Err("max_tokens: Field required".into());
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or("messages: at least one message is required")?;

    let markers = blocks.iter().filter(|b| b.breakpoint.is_some()).count()
        + usize::from(body.get("cache_control").is_some_and(|c| !c.is_null()));
    if markers > MAX_BREAKPOINTS {
        return Err(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {markers}."
        ));
    }
    let mut seen_five_minutes = false;
    for b in blocks {
        match b.breakpoint {
            Some(CacheTtl::FiveMinutes) => seen_five_minutes = true,
            Some(CacheTtl::OneHour) if seen_five_minutes => {
                return Err("a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block; longer TTLs must come first".into());
            }
            _ => {}
        }
    }

    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let content = |m: &Value| -> Vec<Value> {
        match m.get("content") {
            Some(Value::Array(items)) => items.clone(),
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            _ => Vec::new(),
        }
    };
    let kind = |b: &Value| {
        b.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let str_field = |b: &Value, f: &str| b.get(f).and_then(Value::as_str).unwrap_or("").to_string();

    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if role != "user" && role != "assistant" {
            return Err(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            ));
        }
        if i == 0 && role != "user" {
            return Err(FIRST_MESSAGE_NOT_USER.into());
        }
        let items = content(message);
        if items.is_empty() {
            return Err(format!(
                "messages.{i}: all messages must have non-empty content"
            ));
        }
        for (j, block) in items.iter().enumerate() {
            match kind(block).as_str() {
                "text" if str_field(block, "text").is_empty() => {
                    return Err(format!(
                        "messages.{i}.content.{j}: text content blocks must be non-empty"
                    ));
                }
                "thinking" if block.get("signature").and_then(Value::as_str).is_none() => {
                    return Err(format!(
                        "messages.{i}.content.{j}.thinking.signature: Field required"
                    ));
                }
                "thinking" | "redacted_thinking" if block.get("cache_control").is_some() => {
                    return Err(format!(
                        "messages.{i}.content.{j}: cache_control cannot be set on thinking blocks"
                    ));
                }
                "tool_use" | "tool_result" if !has_tools => {
                    return Err(
                        "Requests which include `tool_use` or `tool_result` blocks must define tools."
                            .into(),
                    );
                }
                _ => {}
            }
        }

        // Tool results answer the tool uses of the message right before, at the start.
        let results: Vec<(usize, String)> = items
            .iter()
            .enumerate()
            .filter(|(_, b)| kind(b) == "tool_result")
            .map(|(j, b)| (j, str_field(b, "tool_use_id")))
            .collect();
        let uses: Vec<String> = if role == "user" && i > 0 {
            content(&messages[i - 1])
                .iter()
                .filter(|b| kind(b) == "tool_use")
                .map(|b| str_field(b, "id"))
                .collect()
        } else {
            Vec::new()
        };
        if role == "assistant" && !results.is_empty() {
            return Err(format!(
                "messages.{i}: tool_result blocks can only be in user messages"
            ));
        }
        for (j, id) in &results {
            if !uses.contains(id) {
                return Err(format!(
                    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                ));
            }
            if results.iter().filter(|(_, other)| other == id).count() > 1 {
                return Err(format!(
                    "messages.{i}.content.{j}: each `tool_use` must have a single result. Found multiple `tool_result` blocks with id: {id}"
                ));
            }
        }
        if let Some(first_other) = items.iter().position(|b| kind(b) != "tool_result")
            && results.iter().any(|(j, _)| *j > first_other)
        {
            return Err(format!(
                "messages.{i}: tool_result blocks must come first in the message; found one after other content"
            ));
        }
        if role == "assistant" {
            let ids: Vec<String> = items
                .iter()
                .filter(|b| kind(b) == "tool_use")
                .map(|b| str_field(b, "id"))
                .collect();
            if ids.is_empty() {
                continue;
            }
            let next = messages.get(i + 1);
            let answered: Vec<String> = next
                .filter(|n| n.get("role").and_then(Value::as_str) == Some("user"))
                .map(|n| {
                    content(n)
                        .iter()
                        .filter(|b| kind(b) == "tool_result")
                        .map(|b| str_field(b, "tool_use_id"))
                        .collect()
                })
                .unwrap_or_default();
            let missing: Vec<&str> = ids
                .iter()
                .filter(|id| !answered.contains(id))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    missing.join(", ")
                ));
            }
        }
    }
    check_tool_choice(body)?;
    check_output_config(body)
}

/// `tool_choice`: `auto`, `any`, `none`, or `tool` naming a tool of the request
/// (<https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use#forcing-tool-use>).
fn check_tool_choice(body: &Value) -> Result<(), String> {
    let Some(choice) = body.get("tool_choice").filter(|c| !c.is_null()) else {
        return Ok(());
    };
    let names: Vec<&str> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect();
    match choice.get("type").and_then(Value::as_str) {
        Some("auto" | "any" | "none") => Ok(()),
        Some("tool") => match choice.get("name").and_then(Value::as_str) {
            Some(n) if names.contains(&n) => Ok(()),
            Some(n) => Err(format!("tool_choice.name: Tool '{n}' not found in provided tools")),
            None => Err("tool_choice.tool.name: Field required".into()),
        },
        _ => Err("tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'".into()),
    }
}

/// `output_config.format`: `json_schema` with a schema, every object of it closed
/// (<https://platform.claude.com/docs/en/build-with-claude/structured-outputs>).
fn check_output_config(body: &Value) -> Result<(), String> {
    let Some(format) = body
        .pointer("/output_config/format")
        .filter(|f| !f.is_null())
    else {
        return Ok(());
    };
    if format.get("type").and_then(Value::as_str) != Some("json_schema") {
        return Err("output_config.format.type: Input should be 'json_schema'".into());
    }
    let schema = format
        .get("schema")
        .filter(|s| s.is_object())
        .ok_or("output_config.format.schema: Field required")?;
    closed(schema)
}

fn closed(schema: &Value) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Ok(());
    };
    if (map.get("type").and_then(Value::as_str) == Some("object") || map.contains_key("properties"))
        && map.get("additionalProperties") != Some(&Value::Bool(false))
    {
        return Err("output_config.format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false".into());
    }
    for value in map.values() {
        match value {
            Value::Object(_) => closed(value)?,
            Value::Array(items) => items.iter().try_for_each(closed)?,
            _ => {}
        }
    }
    Ok(())
}

/// The figures of one accepted request.
struct CacheOutcome {
    read: u64,
    write_5m: u64,
    write_1h: u64,
    total: u64,
    breakpoints: Vec<usize>,
}

/// Reads and writes the cache for `blocks` (see the module docs).
fn run_cache(
    state: &mut State,
    body: &Value,
    model: &str,
    blocks: &[SimBlock],
    automatic: Option<CacheTtl>,
) -> CacheOutcome {
    let mut cumulative = Vec::with_capacity(blocks.len());
    let mut hashes = Vec::with_capacity(blocks.len());
    let mut hasher = DefaultHasher::new();
    model.hash(&mut hasher);
    let field = |key: &str| body.get(key).filter(|v| !v.is_null()).map(Value::to_string);
    field("output_config").hash(&mut hasher);
    let tool_choice = field("tool_choice");
    let mut in_messages = false;
    let mut sum = 0u64;
    for b in blocks {
        sum += state.memo.tokens(&b.text).len() as u64;
        cumulative.push(sum);
        if !in_messages && (b.role == "user" || b.role == "assistant") {
            in_messages = true;
            tool_choice.hash(&mut hasher);
        }
        b.role.hash(&mut hasher);
        b.text.hash(&mut hasher);
        hashes.push(hasher.finish());
    }
    let min = state
        .min_tokens
        .unwrap_or_else(|| min_cacheable_tokens(model));
    let mut breakpoints: Vec<(usize, CacheTtl)> = blocks
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.breakpoint.map(|ttl| (i, ttl)))
        .collect();
    if let (Some(ttl), Some(last)) = (automatic, blocks.len().checked_sub(1))
        && !breakpoints.iter().any(|(i, _)| *i == last)
    {
        breakpoints.push((last, ttl));
    }
    breakpoints.retain(|(i, _)| cumulative[*i] >= min);
    breakpoints.sort_by_key(|(i, _)| *i);

    let now = state.now();
    state.entries.retain(|_, e| e.expires > now);

    // The longest live entry within the lookback of some breakpoint.
    let mut read_at: Option<usize> = None;
    for &(b, _) in &breakpoints {
        let lowest = b.saturating_sub(LOOKBACK_BLOCKS);
        for j in (lowest..=b).rev() {
            if cumulative[j] < min {
                break;
            }
            if state.entries.contains_key(&hashes[j]) {
                read_at = read_at.max(Some(j));
                break;
            }
        }
    }
    let read = read_at.map_or(0, |j| cumulative[j]);
    if let Some(j) = read_at
        && let Some(entry) = state.entries.get_mut(&hashes[j])
    {
        entry.expires = now + entry.ttl.duration();
    }

    // Writes: each breakpoint past the read point; its span since the previous one is
    // written under its TTL.
    let (mut write_5m, mut write_1h) = (0, 0);
    let mut written_to = read;
    for &(b, ttl) in &breakpoints {
        let entry = state
            .entries
            .entry(hashes[b])
            .or_insert(Entry { expires: now, ttl });
        entry.ttl = entry.ttl.max(ttl);
        entry.expires = entry.expires.max(now + ttl.duration());
        if cumulative[b] > written_to {
            let span = cumulative[b] - written_to;
            match ttl {
                CacheTtl::FiveMinutes => write_5m += span,
                CacheTtl::OneHour => write_1h += span,
            }
            written_to = cumulative[b];
        }
    }
    CacheOutcome {
        read,
        write_5m,
        write_1h,
        total: sum,
        breakpoints: breakpoints.iter().map(|(i, _)| *i).collect(),
    }
}

/// The content blocks of the reply, with fresh tool-use ids.
fn reply_content(reply: &SimReply, state: &mut State) -> (Vec<Value>, &'static str) {
    match reply {
        SimReply::Text(text) => (vec![json!({"type": "text", "text": text})], "end_turn"),
        SimReply::ToolCalls(calls) => {
            let blocks = calls
                .iter()
                .map(|(name, input)| {
                    let id = format!("toolu_01{:022}", state.next_call_id);
                    state.next_call_id += 1;
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                })
                .collect();
            (blocks, "tool_use")
        }
    }
}

/// Text cut into pieces of about `size` bytes on character boundaries.
fn pieces(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

fn sse_event(out: &mut String, data: &Value) {
    let kind = data
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    out.push_str("event: ");
    out.push_str(kind);
    out.push_str("\ndata: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

/// The whole message as an event stream.
fn render_stream(message: &Value) -> String {
    let mut out = String::new();
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    sse_event(
        &mut out,
        &json!({"type": "message_start", "message": start}),
    );
    sse_event(&mut out, &json!({"type": "ping"}));
    let empty = Vec::new();
    let content = message["content"].as_array().unwrap_or(&empty);
    for (index, block) in content.iter().enumerate() {
        match block["type"].as_str() {
            Some("tool_use") => {
                let mut head = block.clone();
                head["input"] = json!({});
                sse_event(
                    &mut out,
                    &json!({"type": "content_block_start", "index": index, "content_block": head}),
                );
                let input = block["input"].to_string();
                let size = input.len().div_ceil(3).max(1);
                for piece in pieces(&input, size) {
                    sse_event(
                        &mut out,
                        &json!({"type": "content_block_delta", "index": index,
                                "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    );
                }
            }
            _ => {
                sse_event(
                    &mut out,
                    &json!({"type": "content_block_start", "index": index,
                            "content_block": {"type": "text", "text": ""}}),
                );
                for piece in pieces(block["text"].as_str().unwrap_or(""), 24) {
                    sse_event(
                        &mut out,
                        &json!({"type": "content_block_delta", "index": index,
                                "delta": {"type": "text_delta", "text": piece}}),
                    );
                }
            }
        }
        sse_event(
            &mut out,
            &json!({"type": "content_block_stop", "index": index}),
        );
    }
    // Newer API versions repeat the input figures here, cumulative, like output_tokens.
    let usage = &message["usage"];
    sse_event(
        &mut out,
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
            "usage": {
                "input_tokens": usage["input_tokens"],
                "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
                "cache_read_input_tokens": usage["cache_read_input_tokens"],
                "output_tokens": usage["output_tokens"],
            },
        }),
    );
    sse_event(&mut out, &json!({"type": "message_stop"}));
    out
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
    if let Some(window) = state
        .context_window
        .filter(|&w| all_tokens.len() as u64 > w)
    {
        state.records.push(record);
        return invalid_request(&format!(
            "prompt is too long: {} tokens > {window} maximum",
            all_tokens.len()
        ));
    }
    let Some(reply) =
        super::summary_reply(body.get("messages")).or_else(|| state.script.pop_front())
    else {
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
            script: VecDeque::new(),
            records: Vec::new(),
            entries: HashMap::new(),
            seen: Seen::default(),
            memo: TokenMemo::default(),
            clock_offset: Duration::ZERO,
            context_window: None,
            min_tokens: Some(10),
            next_call_id: 1,
            next_message_id: 1,
        }
    }

    fn block(text: &str, breakpoint: Option<CacheTtl>) -> SimBlock {
        SimBlock {
            role: "user".into(),
            text: text.into(),
            breakpoint,
        }
    }

    const M5: Option<CacheTtl> = Some(CacheTtl::FiveMinutes);

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
