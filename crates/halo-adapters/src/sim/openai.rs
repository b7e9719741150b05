//! [`OpenAiSim`]: a loopback fake of `POST /chat/completions` for OpenAI and DeepSeek that
//! computes cached-token usage the way each provider documents it.
//!
//! Wire format (what [`crate::openai::OpenAiCompatible`] speaks): a `chat.completion` JSON
//! body, or with `stream: true` a `text/event-stream` of `chat.completion.chunk`s ending in
//! `data: [DONE]`, with the usage chunk `stream_options.include_usage` asks for (OpenAI: a
//! last chunk with `choices: []`,
//! <https://platform.openai.com/docs/api-reference/chat-streaming>; DeepSeek: usage on the
//! finish chunk, <https://api-docs.deepseek.com/api/create-chat-completion>). Routes: `/v1/chat/completions` ([`OpenAiSim::base_url`]) and
//! `/chat/completions` (DeepSeek's own base URL has no `/v1`).
//!
//! Every request is checked first: a body that is not JSON, has no `model` or `messages`,
//! or has an assistant tool call without exactly one `tool` message answering it right after
//! (or a `tool` message answering nothing) gets HTTP 400 in OpenAI's error shape
//! (`{"error":{"message","type":"invalid_request_error","param","code"}}`), as the real
//! APIs do. So does a `tool_choice` that is not `auto` / `none` / `required`, a named
//! function or (OpenAI only) `allowed_tools` naming tools of the request, and a
//! `response_format` that is not `text`, `json_object` or (OpenAI only) `json_schema` with
//! a name and a schema — a `strict` one closed (`additionalProperties: false`) with every
//! property required on every object. With [`OpenAiSim::set_context_window`], a request whose
//! prompt (plus its `max_tokens`) exceeds the window gets each provider's context error:
//! OpenAI's 400 with `code: "context_length_exceeded"`, DeepSeek's 400 `This model's maximum
//! context length is M tokens. However, you requested N tokens (…)`. An empty reply script
//! gets HTTP 418 (a test bug, not a provider behaviour).
//!
//! # How the cache is computed
//!
//! The request is **linearized** ([`linearize`]): the `tools` array first (OpenAI places
//! tool definitions before the instructions,
//! <https://developers.openai.com/api/docs/guides/prompt-caching>), then a `json_schema`
//! response format's schema ("the structured output schema serves as a prefix to the system
//! message", the same guide), then one segment per
//! message, `<|role|>` + reasoning + content + tool calls (name and argument string) +
//! `<|end|>`. Each segment is tokenized on its own with `o200k_base` ([`super::tokens`]) and
//! the token lists are concatenated, as a chat template's special tokens keep message
//! boundaries: so a request that appends messages to an earlier one has the earlier one's
//! tokens as an exact prefix. `prompt_tokens` is the length of that list.
//!
//! - **OpenAI** (<https://platform.openai.com/docs/guides/prompt-caching>, §2.3): cached =
//!   the longest token prefix shared with an earlier request of the same cache pool, counted
//!   only from [`OPENAI_MIN_CACHED_TOKENS`] and rounded down to a multiple of
//!   [`OPENAI_CACHE_STEP_TOKENS`] ([`openai_cached_tokens`]). Pools: one per model and
//!   `prompt_cache_key`; requests without a key share the model's keyless pool. Only
//!   prompts are stored, not the generated answers. Reported as `prompt_tokens` (total)
//!   and `prompt_tokens_details.cached_tokens`.
//! - **DeepSeek** (<https://api-docs.deepseek.com/guides/kv_cache>, §1.5–1.6): the disk
//!   cache stores *prefix units*, written at the end of every request's input and at the
//!   end of its output (input + the generated answer, rendered as it comes back in the next
//!   request), and at a common prefix detected across requests (after A+B and A+C, A is a
//!   unit that a later A+D hits). A request hits only a unit that is a complete prefix of
//!   it; cached = the longest such unit. The current guide states no minimum
//!   ([`DeepSeekUnits::Current`]); the 2024 launch rule of 64-token units is
//!   [`DeepSeekUnits::Fixed`]. Units at "fixed token intervals inside long inputs" are not
//!   simulated (the guide gives no interval). Pools: one per model and `user_id`. Reported as
//!   `prompt_cache_hit_tokens` + `prompt_cache_miss_tokens` = `prompt_tokens`, and
//!   `prompt_tokens_details.cached_tokens` equal to the hit count, as DeepSeek's payloads do.
//!
//! Each [`SimRecord`] also keeps `seen_prefix_tokens`: the longest token prefix the request
//! shares with *any* earlier request to this simulator, without minimum or rounding and
//! whatever the pool — the theoretical maximum a cache could serve ("every token already
//! sent before is cached"), which `cargo xtask bench cache` compares against.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::{
    SCRIPT_EXHAUSTED, Seen, SimReply, SimServer, TokenMemo, common_prefix, lock, serve, tokens,
};

/// OpenAI caches nothing for a shared prefix shorter than this many tokens
/// (<https://platform.openai.com/docs/guides/prompt-caching>).
pub const OPENAI_MIN_CACHED_TOKENS: usize = 1024;

/// OpenAI reports cache hits in steps of this many tokens, rounded down.
pub const OPENAI_CACHE_STEP_TOKENS: usize = 128;

/// The storage unit of DeepSeek's 2024 launch rule, in tokens
/// (<https://api-docs.deepseek.com/news/news0802>).
pub const DEEPSEEK_2024_UNIT_TOKENS: usize = 64;

/// The `created` timestamp of every answer (fixed, so answers are deterministic).
const CREATED: u64 = 1_767_225_600;

/// Which provider the simulator plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SimProfile {
    /// OpenAI: exact prefix from 1,024 tokens in 128-token steps, pools by `prompt_cache_key`.
    OpenAi,
    /// DeepSeek: prefix units at the end of each request's input and output, pools by
    /// `user_id`.
    DeepSeek,
}

impl SimProfile {
    /// `openai` or `deepseek`.
    pub fn name(self) -> &'static str {
        match self {
            SimProfile::OpenAi => "openai",
            SimProfile::DeepSeek => "deepseek",
        }
    }
}

/// DeepSeek's unit rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeepSeekUnits {
    /// The current guide (V4): a hit is the longest stored unit that is a complete prefix of
    /// the request; units end where inputs and outputs end and where requests were seen to
    /// diverge. No minimum.
    #[default]
    Current,
    /// The 2024 rule: storage in units of this many tokens ([`DEEPSEEK_2024_UNIT_TOKENS`]);
    /// a hit is the longest prefix shared with a stored input or output, rounded down to a
    /// whole unit, so content under one unit is never cached.
    Fixed(usize),
}

/// The OpenAI rule on a shared prefix of `shared` tokens: `0` below
/// [`OPENAI_MIN_CACHED_TOKENS`], else rounded down to a multiple of
/// [`OPENAI_CACHE_STEP_TOKENS`]. `1_500` → `1_408`.
pub fn openai_cached_tokens(shared: usize) -> usize {
    if shared < OPENAI_MIN_CACHED_TOKENS {
        0
    } else {
        shared - shared % OPENAI_CACHE_STEP_TOKENS
    }
}

/// One request the simulator received and what it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct SimRecord {
    /// The request body (`Value::Null` when it was not JSON).
    pub body: Value,
    /// The HTTP status answered: 200, 400 (invalid request) or 418 (script exhausted).
    pub status: u16,
    /// Tokens of the linearized request (0 when rejected).
    pub prompt_tokens: u64,
    /// Tokens reported as cached (0 when rejected).
    pub cached_tokens: u64,
    /// The longest token prefix shared with any earlier accepted request, unrounded and
    /// across pools: the most any cache could have served.
    pub seen_prefix_tokens: u64,
    /// Tokens of the generated answer (0 when rejected).
    pub completion_tokens: u64,
}

/// Stored token sequences of one cache pool.
#[derive(Debug, Default)]
struct Pool {
    /// OpenAI: earlier prompts. DeepSeek: earlier inputs (for divergence detection).
    prompts: Vec<Arc<[u32]>>,
    /// DeepSeek: the persisted prefix units.
    units: Vec<Arc<[u32]>>,
}

#[derive(Debug)]
struct State {
    profile: SimProfile,
    deepseek_units: DeepSeekUnits,
    /// The context window in tokens; `None`: no limit.
    context_window: Option<u64>,
    script: VecDeque<SimReply>,
    records: Vec<SimRecord>,
    pools: HashMap<String, Pool>,
    /// Every accepted prompt, for `seen_prefix_tokens`; `drop_cache` keeps it.
    seen: Seen,
    next_call_id: u64,
    next_completion_id: u64,
    /// Tokens per rendered segment.
    memo: TokenMemo,
}

impl State {
    fn tokens_of(&mut self, segments: Vec<String>) -> Vec<u32> {
        let mut out = Vec::new();
        for segment in segments {
            out.extend_from_slice(&self.memo.tokens(&segment));
        }
        out
    }
}

/// A loopback OpenAI or DeepSeek chat-completions server with a simulated prompt cache.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// use halo_adapters::sim::{SimReply, openai::OpenAiSim};
/// let sim = OpenAiSim::openai().await?;
/// sim.push_reply(SimReply::text("Hello."));
/// // Point an adapter at `sim.base_url()`, run it, then read `sim.records()`.
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct OpenAiSim {
    server: SimServer,
    state: Arc<Mutex<State>>,
}

impl OpenAiSim {
    /// An OpenAI simulator on `127.0.0.1` at a free port.
    ///
    /// # Errors
    /// The IO error when no loopback port can be bound.
    pub async fn openai() -> std::io::Result<Self> {
        Self::start(SimProfile::OpenAi).await
    }

    /// A DeepSeek simulator (current unit rule) on `127.0.0.1` at a free port.
    ///
    /// # Errors
    /// The IO error when no loopback port can be bound.
    pub async fn deepseek() -> std::io::Result<Self> {
        Self::start(SimProfile::DeepSeek).await
    }

    /// A simulator playing `profile`, with an empty reply script.
    ///
    /// # Errors
    /// The IO error when no loopback port can be bound.
    pub async fn start(profile: SimProfile) -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(State {
            profile,
            deepseek_units: DeepSeekUnits::Current,
            context_window: None,
            script: VecDeque::new(),
            records: Vec::new(),
            pools: HashMap::new(),
            seen: Seen::default(),
            next_call_id: 1,
            next_completion_id: 1,
            memo: TokenMemo::default(),
        }));
        let router = axum::Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/chat/completions", post(handle))
            .with_state(state.clone());
        let server = serve(router).await?;
        Ok(OpenAiSim { server, state })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The provider this simulator plays.
    pub fn profile(&self) -> SimProfile {
        self.lock().profile
    }

    /// The base URL to give an adapter: `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.base_url())
    }

    /// Sets DeepSeek's unit rule (ignored by the OpenAI profile); the default is
    /// [`DeepSeekUnits::Current`].
    pub fn set_deepseek_units(&self, units: DeepSeekUnits) {
        self.lock().deepseek_units = units;
    }

    /// The model's context window in tokens, counted as `prompt_tokens` is (the linearized
    /// request) plus the request's `max_tokens` (or `max_completion_tokens`) when it sets
    /// one. A longer request answers the profile's context error and uses no reply:
    /// - OpenAI: 400 `{"message": "This model's maximum context length is M tokens.
    ///   However, your messages resulted in N tokens. Please reduce the length of the
    ///   messages.", "type": "invalid_request_error", "param": "messages", "code":
    ///   "context_length_exceeded"}` (the `you requested …` form when `max_tokens` is set;
    ///   <https://platform.openai.com/docs/guides/error-codes>).
    /// - DeepSeek: 400 `This model's maximum context length is M tokens. However, you
    ///   requested N tokens (P in the messages, C in the completion). Please reduce the
    ///   length of the messages or completion.` with `code: "invalid_request_error"`, as the
    ///   API answers (<https://api-docs.deepseek.com/quick_start/error_codes>).
    ///
    /// `None` (the default): no limit.
    pub fn set_context_window(&self, tokens: Option<u64>) {
        self.lock().context_window = tokens;
    }

    /// The context window set with [`set_context_window`](Self::set_context_window), in
    /// tokens (`None`: no limit), to give the agent under test the same window.
    pub fn context_window(&self) -> Option<u64> {
        self.lock().context_window
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

    /// Forgets every cached prefix (all pools), as an eviction would: the next request is a
    /// full miss. `seen_prefix_tokens` still counts what was sent before.
    pub fn drop_cache(&self) {
        self.lock().pools.clear();
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

/// The request linearized for tokenizing: the `tools` segment (when the body has tools),
/// then one segment per message (see the module docs for the template).
///
/// # Errors
/// A message of the reason when `messages` is missing or not an array.
pub fn linearize(body: &Value) -> Result<Vec<String>, String> {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("'messages' is a required property and must be an array")?;
    let mut segments = Vec::with_capacity(messages.len() + 1);
    if let Some(tools) = body.get("tools").filter(|t| !t.is_null()) {
        segments.push(format!("<|tools|>{tools}<|end|>"));
    }
    if let Some(schema) = body
        .pointer("/response_format/json_schema")
        .filter(|s| !s.is_null())
    {
        segments.push(format!("<|schema|>{schema}<|end|>"));
    }
    segments.extend(messages.iter().map(render_message));
    Ok(segments)
}

/// The `o200k_base` tokens of the linearized request (segments tokenized one by one and
/// concatenated).
///
/// # Errors
/// As [`linearize`].
pub fn prompt_tokens(body: &Value) -> Result<Vec<u32>, String> {
    Ok(linearize(body)?
        .iter()
        .flat_map(|segment| tokens(segment))
        .collect())
}

/// One message's segment: `<|role|>`, reasoning, content, tool calls, `<|end|>`. A `null`
/// content and an empty one render alike, as do a missing and an empty `reasoning_content`.
fn render_message(message: &Value) -> String {
    let role = message.get("role").and_then(Value::as_str).unwrap_or("");
    let mut out = format!("<|{role}|>");
    if let Some(r) = message.get("reasoning_content").and_then(Value::as_str)
        && !r.is_empty()
    {
        out.push_str("<|think|>");
        out.push_str(r);
        out.push_str("<|/think|>");
    }
    match message.get("content") {
        Some(Value::String(s)) => out.push_str(s),
        Some(Value::Array(parts)) => {
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        out.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""))
                    }
                    _ => {
                        out.push_str("<|part|>");
                        out.push_str(&part.to_string());
                    }
                }
            }
        }
        _ => {}
    }
    for call in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call.get("function");
        let field = |k: &str| {
            function
                .and_then(|f| f.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        out.push_str("<|call|>");
        out.push_str(field("name"));
        out.push_str("<|args|>");
        out.push_str(field("arguments"));
    }
    out.push_str("<|end|>");
    out
}

/// A 400 in OpenAI's error shape.
fn invalid_request(message: &str, param: Option<&str>) -> Response {
    let body = json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "param": param,
        "code": null,
    }});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// The profile's context-window error (see [`OpenAiSim::set_context_window`]) for a request
/// of `prompt` tokens asking for at most `completion` tokens, when they exceed `window`.
fn context_error(
    profile: SimProfile,
    window: u64,
    prompt: u64,
    completion: Option<u64>,
) -> Option<Response> {
    let requested = prompt + completion.unwrap_or(0);
    if requested <= window {
        return None;
    }
    let head = format!("This model's maximum context length is {window} tokens. However, ");
    let (message, param, code) = match (profile, completion) {
        (SimProfile::OpenAi, None) => (
            format!(
                "{head}your messages resulted in {prompt} tokens. Please reduce the length of the messages."
            ),
            json!("messages"),
            "context_length_exceeded",
        ),
        (SimProfile::OpenAi, Some(c)) => (
            format!(
                "{head}you requested {requested} tokens ({prompt} in the messages, {c} in the completion). Please reduce the length of the messages or completion."
            ),
            json!("messages"),
            "context_length_exceeded",
        ),
        (SimProfile::DeepSeek, c) => (
            format!(
                "{head}you requested {requested} tokens ({prompt} in the messages, {} in the completion). Please reduce the length of the messages or completion.",
                c.unwrap_or(0)
            ),
            Value::Null,
            "invalid_request_error",
        ),
    };
    let body = json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "param": param,
        "code": code,
    }});
    Some((StatusCode::BAD_REQUEST, axum::Json(body)).into_response())
}

/// `tool_choice`: a mode, a named function of the request, or (OpenAI) the allowed-tools
/// form naming functions of the request, with mode `auto` or `required`
/// (<https://platform.openai.com/docs/api-reference/chat/create#chat-create-tool_choice>).
fn check_tool_choice(profile: SimProfile, body: &Value) -> Result<(), String> {
    let Some(choice) = body.get("tool_choice").filter(|c| !c.is_null()) else {
        return Ok(());
    };
    let names: Vec<&str> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .collect();
    if names.is_empty() {
        return Err("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.".into());
    }
    let known = |name: Option<&str>| -> Result<(), String> {
        match name {
            Some(n) if names.contains(&n) => Ok(()),
            Some(n) => Err(format!(
                "Invalid value for 'tool_choice': no function named '{n}' was specified in the 'tools' parameter."
            )),
            None => Err("Missing required parameter: 'tool_choice.function.name'.".into()),
        }
    };
    match choice {
        Value::String(m) if ["auto", "none", "required"].contains(&m.as_str()) => Ok(()),
        Value::String(m) => Err(format!(
            "Invalid value: '{m}'. Supported values are: 'none', 'auto', and 'required'."
        )),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("function") => known(choice.pointer("/function/name").and_then(Value::as_str)),
            Some("allowed_tools") if profile == SimProfile::OpenAi => {
                let mode = choice
                    .pointer("/allowed_tools/mode")
                    .and_then(Value::as_str);
                if !matches!(mode, Some("auto" | "required")) {
                    return Err("Invalid value for 'tool_choice.allowed_tools.mode': supported values are 'auto' and 'required'.".into());
                }
                let tools = choice
                    .pointer("/allowed_tools/tools")
                    .and_then(Value::as_array)
                    .filter(|t| !t.is_empty())
                    .ok_or("Invalid 'tool_choice.allowed_tools.tools': empty array. Expected an array with minimum length 1.")?;
                for tool in tools {
                    if tool.get("type").and_then(Value::as_str) != Some("function") {
                        return Err("Invalid value for 'tool_choice.allowed_tools.tools[].type': expected 'function'.".into());
                    }
                    known(tool.pointer("/function/name").and_then(Value::as_str))?;
                }
                Ok(())
            }
            other => Err(format!(
                "Invalid value for 'tool_choice.type': {}.",
                other.unwrap_or("missing")
            )),
        },
        _ => Err("Invalid type for 'tool_choice': expected a string or an object.".into()),
    }
}

/// `response_format`: `text`, `json_object`, or (OpenAI) `json_schema` with a valid name and
/// a schema; `strict: true` needs every object closed and every property required
/// (<https://platform.openai.com/docs/guides/structured-outputs#supported-schemas>).
/// DeepSeek answers `json_schema` as its API does: not available.
fn check_response_format(profile: SimProfile, body: &Value) -> Result<(), String> {
    let Some(format) = body.get("response_format").filter(|f| !f.is_null()) else {
        return Ok(());
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text" | "json_object") => Ok(()),
        Some("json_schema") if profile == SimProfile::DeepSeek => {
            Err("This response_format type is unavailable now".into())
        }
        Some("json_schema") => {
            let name = format
                .pointer("/json_schema/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name_ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !name_ok {
                return Err(format!(
                    "Invalid 'response_format.json_schema.name': '{name}'. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
                ));
            }
            let schema = format
                .pointer("/json_schema/schema")
                .filter(|s| s.is_object())
                .ok_or("Missing required parameter: 'response_format.json_schema.schema'.")?;
            if format.pointer("/json_schema/strict") == Some(&Value::Bool(true)) {
                strict_ok(schema, name)?;
            }
            Ok(())
        }
        other => Err(format!(
            "Invalid value: '{}'. Supported values are: 'text', 'json_object', and 'json_schema'.",
            other.unwrap_or("missing")
        )),
    }
}

/// Strict mode's rules for every object of the schema.
fn strict_ok(schema: &Value, name: &str) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Ok(());
    };
    if map.get("type").and_then(Value::as_str) == Some("object") || map.contains_key("properties") {
        if map.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Err(format!(
                "Invalid schema for response_format '{name}': In context=(), 'additionalProperties' is required to be supplied and to be false."
            ));
        }
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for key in map
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|p| p.keys())
        {
            if !required.contains(&key.as_str()) {
                return Err(format!(
                    "Invalid schema for response_format '{name}': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing '{key}'."
                ));
            }
        }
    }
    for value in map.values() {
        match value {
            Value::Object(_) => strict_ok(value, name)?,
            Value::Array(items) => {
                for item in items {
                    strict_ok(item, name)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The checks the real APIs make that matter to Halo: `model` and `messages` present, and
/// every assistant tool call answered by exactly one `tool` message right after it, with no
/// orphan `tool` message. Returns `(message, param)` of the 400 to send.
fn check_request(profile: SimProfile, body: &Value) -> Result<(), (String, &'static str)> {
    if body.get("model").and_then(Value::as_str).is_none() {
        return Err(("you must provide a model parameter".into(), "model"));
    }
    check_tool_choice(profile, body).map_err(|m| (m, "tool_choice"))?;
    check_response_format(profile, body).map_err(|m| (m, "response_format"))?;
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or((
            "'messages' is a required property and must be a non-empty array".to_string(),
            "messages",
        ))?;
    let mut i = 0;
    while i < messages.len() {
        match messages[i].get("role").and_then(Value::as_str) {
            Some("assistant") => {
                let mut open: Vec<&str> = Vec::new();
                for call in messages[i]
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let id = call.get("id").and_then(Value::as_str).unwrap_or("");
                    if id.is_empty() || open.contains(&id) {
                        return Err((
                            format!("messages.[{i}]: tool call ids must be unique and non-empty"),
                            "messages",
                        ));
                    }
                    open.push(id);
                }
                let mut j = i + 1;
                while let Some(next) = messages.get(j)
                    && next.get("role").and_then(Value::as_str) == Some("tool")
                {
                    let id = next
                        .get("tool_call_id")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let Some(pos) = open.iter().position(|o| *o == id) else {
                        return Err((
                            format!(
                                "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. messages.[{j}].tool_call_id `{id}` answers no open call"
                            ),
                            "messages",
                        ));
                    };
                    open.swap_remove(pos);
                    j += 1;
                }
                if !open.is_empty() {
                    return Err((
                        format!(
                            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                            open.join(", ")
                        ),
                        "messages",
                    ));
                }
                i = j;
            }
            Some("tool") => {
                return Err((
                    format!(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. messages.[{i}] follows none"
                    ),
                    "messages",
                ));
            }
            Some(_) => i += 1,
            None => {
                return Err((
                    format!("messages.[{i}]: 'role' is a required property"),
                    "messages",
                ));
            }
        }
    }
    Ok(())
}

/// The cache pool a request is routed to.
fn pool_key(profile: SimProfile, body: &Value) -> String {
    let model = body.get("model").and_then(Value::as_str).unwrap_or("");
    let field = match profile {
        SimProfile::OpenAi => "prompt_cache_key",
        SimProfile::DeepSeek => "user_id",
    };
    let key = body.get(field).and_then(Value::as_str).unwrap_or("");
    format!("{model}\u{0}{key}")
}

/// The cached tokens of `prompt` in `pool`, by the profile's rule.
fn cached_tokens(state: &State, pool: Option<&Pool>, prompt: &[u32]) -> usize {
    let Some(pool) = pool else { return 0 };
    match state.profile {
        SimProfile::OpenAi => {
            let shared = pool
                .prompts
                .iter()
                .map(|p| common_prefix(p, prompt))
                .max()
                .unwrap_or(0);
            openai_cached_tokens(shared)
        }
        SimProfile::DeepSeek => match state.deepseek_units {
            DeepSeekUnits::Current => pool
                .units
                .iter()
                .filter(|u| u.len() <= prompt.len() && prompt.starts_with(u))
                .map(|u| u.len())
                .max()
                .unwrap_or(0),
            DeepSeekUnits::Fixed(unit) => {
                let shared = pool
                    .units
                    .iter()
                    .map(|u| common_prefix(u, prompt))
                    .max()
                    .unwrap_or(0);
                shared - shared % unit.max(1)
            }
        },
    }
}

/// The reply as the assistant message the next request will carry (the shape the adapter
/// sends back), with the tool calls' ids.
fn reply_message(profile: SimProfile, reply: &SimReply, state: &mut State) -> Value {
    match reply {
        SimReply::Text(text) => json!({"role": "assistant", "content": text}),
        SimReply::ToolCalls(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(name, arguments)| {
                    let id = format!("call_{:04}", state.next_call_id);
                    state.next_call_id += 1;
                    json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments.to_string()},
                    })
                })
                .collect();
            let content = match profile {
                SimProfile::OpenAi => Value::Null,
                SimProfile::DeepSeek => Value::String(String::new()),
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
    }
}

/// The generated part of the reply (content and calls, no role marker), for
/// `completion_tokens`.
fn completion_text(message: &Value) -> String {
    let rendered = render_message(message);
    rendered
        .strip_prefix("<|assistant|>")
        .and_then(|r| r.strip_suffix("<|end|>"))
        .unwrap_or(&rendered)
        .to_string()
}

/// The usage object in the profile's shape.
fn usage_json(profile: SimProfile, prompt: u64, cached: u64, completion: u64) -> Value {
    let mut usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": 0},
    });
    if profile == SimProfile::DeepSeek {
        usage["prompt_cache_hit_tokens"] = json!(cached);
        usage["prompt_cache_miss_tokens"] = json!(prompt - cached);
    }
    usage
}

async fn handle(AxumState(state): AxumState<Arc<Mutex<State>>>, body: Bytes) -> Response {
    let mut state = lock(&state);
    answer(&mut state, &body)
}

/// Checks, computes the cache figures, records, and renders the answer.
fn answer(state: &mut State, raw: &[u8]) -> Response {
    let mut record = SimRecord {
        body: Value::Null,
        status: 400,
        prompt_tokens: 0,
        cached_tokens: 0,
        seen_prefix_tokens: 0,
        completion_tokens: 0,
    };
    let body: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => {
            state.records.push(record);
            return invalid_request(
                &format!("We could not parse the JSON body of your request ({e})"),
                None,
            );
        }
    };
    record.body = body.clone();
    if let Err((message, param)) = check_request(state.profile, &body) {
        state.records.push(record);
        return invalid_request(&message, Some(param));
    }
    let profile = state.profile;
    // `check_request` made sure `messages` is an array, so linearizing succeeds.
    let segments = linearize(&body).unwrap_or_default();
    let prompt: Arc<[u32]> = state.tokens_of(segments).into();
    let completion = ["max_tokens", "max_completion_tokens"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_u64));
    if let Some(error) = state
        .context_window
        .and_then(|w| context_error(profile, w, prompt.len() as u64, completion))
    {
        state.records.push(record);
        return error;
    }
    let Some(reply) =
        super::summary_reply(body.get("messages")).or_else(|| state.script.pop_front())
    else {
        record.status = 418;
        state.records.push(record);
        let body = json!({"error": {
            "message": SCRIPT_EXHAUSTED,
            "type": "sim_script_exhausted",
            "param": null,
            "code": null,
        }});
        return (StatusCode::IM_A_TEAPOT, axum::Json(body)).into_response();
    };

    let seen = state.seen.longest_prefix(&prompt);
    let key = pool_key(profile, &body);
    let cached = cached_tokens(state, state.pools.get(&key), &prompt);

    let message = reply_message(profile, &reply, state);
    let answer_segment = render_message(&message);
    let completion = completion_text(&message);
    let completion_tokens = state.memo.tokens(&completion).len() as u64;

    // Store what this request leaves in the cache.
    let output_unit: Option<Arc<[u32]>> = (profile == SimProfile::DeepSeek).then(|| {
        let mut unit = prompt.to_vec();
        unit.extend_from_slice(&state.memo.tokens(&answer_segment));
        unit.into()
    });
    let pool = state.pools.entry(key).or_default();
    if let Some(output_unit) = output_unit {
        // Units where this request diverges from an earlier one (§1.6, rule 2).
        let divergences: Vec<usize> = pool
            .prompts
            .iter()
            .map(|p| common_prefix(p, &prompt))
            .filter(|&n| n > 0 && n < prompt.len())
            .collect();
        for n in divergences {
            push_unique(&mut pool.units, prompt[..n].into());
        }
        push_unique(&mut pool.units, prompt.clone());
        push_unique(&mut pool.units, output_unit);
    }
    push_unique(&mut pool.prompts, prompt.clone());
    state.seen.push(prompt.clone());

    record.status = 200;
    record.prompt_tokens = prompt.len() as u64;
    record.cached_tokens = cached as u64;
    record.seen_prefix_tokens = seen as u64;
    record.completion_tokens = completion_tokens;
    state.records.push(record);

    let id = format!("chatcmpl-sim-{:04}", state.next_completion_id);
    state.next_completion_id += 1;
    let usage = usage_json(
        profile,
        prompt.len() as u64,
        cached as u64,
        completion_tokens,
    );
    let model = body.get("model").cloned().unwrap_or(Value::Null);
    let finish = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        let include_usage = body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true);
        let sse = stream_body(profile, &id, &model, &message, finish, usage, include_usage);
        let mut response = sse.into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        return response;
    }
    let mut wire_message = message.clone();
    if profile == SimProfile::OpenAi {
        wire_message["refusal"] = Value::Null;
    }
    let completion = json!({
        "id": id,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{
            "index": 0,
            "message": wire_message,
            "logprobs": null,
            "finish_reason": finish,
        }],
        "usage": usage,
        "system_fingerprint": "fp_sim",
    });
    axum::Json(completion).into_response()
}

fn push_unique(list: &mut Vec<Arc<[u32]>>, item: Arc<[u32]>) {
    if !list.iter().any(|x| **x == *item) {
        list.push(item);
    }
}

/// Splits `s` into pieces of about `size` bytes on character boundaries.
fn pieces(s: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + size).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    out
}

/// The SSE body of a streamed answer: a role chunk, content or tool-call deltas (the first
/// delta of a call carries id, type, name and `arguments: ""`, then argument pieces), the
/// finish chunk, then `data: [DONE]`. Usage: OpenAI sends it only with `include_usage`, in
/// a last chunk with `choices: []`, and `usage: null` on the others; DeepSeek always puts it
/// on the finish chunk, and `usage: null` on the others only with `include_usage` (§1.4,
/// §2.2).
fn stream_body(
    profile: SimProfile,
    id: &str,
    model: &Value,
    message: &Value,
    finish: &str,
    usage: Value,
    include_usage: bool,
) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let mut c = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": "fp_sim",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if include_usage {
            c["usage"] = Value::Null;
        }
        c
    };
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if let Some(text) = message.get("content").and_then(Value::as_str) {
        for piece in pieces(text, 16) {
            chunks.push(chunk(json!({"content": piece}), None));
        }
    }
    for (index, call) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        chunks.push(chunk(
            json!({"tool_calls": [{
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }]}),
            None,
        ));
        let arguments = call["function"]["arguments"].as_str().unwrap_or("");
        for piece in pieces(arguments, 24) {
            chunks.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    match profile {
        SimProfile::DeepSeek => {
            let mut last = chunk(json!({"content": ""}), Some(finish));
            last["usage"] = usage;
            chunks.push(last);
        }
        SimProfile::OpenAi => {
            chunks.push(chunk(json!({}), Some(finish)));
            if include_usage {
                let mut last = chunk(json!({}), None);
                last["choices"] = json!([]);
                last["usage"] = usage;
                chunks.push(last);
            }
        }
    }
    let mut out = String::new();
    for c in chunks {
        out.push_str("data: ");
        out.push_str(&c.to_string());
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out
}
