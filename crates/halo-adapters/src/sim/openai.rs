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
//! - **OpenAI** (<https://platform.openai.com/docs/guides/prompt-caching>): cached =
//!   the longest token prefix shared with an earlier request of the same cache pool, counted
//!   only from [`OPENAI_MIN_CACHED_TOKENS`] and rounded down to a multiple of
//!   [`OPENAI_CACHE_STEP_TOKENS`] ([`openai_cached_tokens`]). Pools: one per model and
//!   `prompt_cache_key`; requests without a key share the model's keyless pool. Only
//!   prompts are stored, not the generated answers. Reported as `prompt_tokens` (total)
//!   and `prompt_tokens_details.cached_tokens`.
//! - **DeepSeek** (<https://api-docs.deepseek.com/guides/kv_cache>): the disk
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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::breakpoints::{self, Breakpoints, breakpoint_model};
use super::{
    Harness, SCRIPT_EXHAUSTED, Seen, SimServer, TokenMemo, common_prefix, lock, serve, tokens,
};

mod cache;
mod check;
mod render;

use cache::{cached_tokens, marker_positions, pool_key, push_unique};

use check::{check_request, context_error, invalid_request};
use render::{completion_text, reply_message, stream_body, usage_json};

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
    /// Tokens written to the cache, billed at 1.25× (GPT-5.6 and later models, which cache
    /// at breakpoints: [`super::breakpoints`]); 0 otherwise.
    pub cache_write_tokens: u64,
}

/// Stored token sequences of one cache pool.
#[derive(Debug, Default)]
struct Pool {
    /// OpenAI: earlier prompts. DeepSeek: earlier inputs (for divergence detection).
    prompts: Vec<Arc<[u32]>>,
    /// DeepSeek: the persisted prefix units.
    units: Vec<Arc<[u32]>>,
    /// OpenAI GPT-5.6 and later: the written breakpoints.
    breakpoints: Breakpoints,
}

#[derive(Debug)]
struct State {
    profile: SimProfile,
    deepseek_units: DeepSeekUnits,
    harness: Harness,
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
    /// The tokens of `segments` concatenated, and where each segment ends.
    fn tokens_of(&mut self, segments: Vec<String>) -> (Vec<u32>, Vec<usize>) {
        let mut out = Vec::new();
        let mut ends = Vec::with_capacity(segments.len());
        for segment in segments {
            out.extend_from_slice(&self.memo.tokens(&segment));
            ends.push(out.len());
        }
        (out, ends)
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
            harness: Harness::default(),
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
        self.lock().harness.set_window(tokens);
    }

    script_methods!();

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
        cache_write_tokens: 0,
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
    let model_id = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let breakpoint_mode = match (profile, breakpoint_model(model_id)) {
        (SimProfile::OpenAi, true) => match breakpoints::mode_of(&body) {
            Ok(mode) => Some(mode),
            Err(message) => {
                state.records.push(record);
                return invalid_request(&message, Some("prompt_cache_options"));
            }
        },
        _ => None,
    };
    // `check_request` made sure `messages` is an array, so linearizing succeeds.
    let segments = linearize(&body).unwrap_or_default();
    let (prompt, ends) = state.tokens_of(segments);
    let prompt: Arc<[u32]> = prompt.into();
    let completion = ["max_tokens", "max_completion_tokens"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_u64));
    if let Some(error) = state
        .harness
        .window()
        .and_then(|w| context_error(profile, w, prompt.len() as u64, completion))
    {
        state.records.push(record);
        return error;
    }
    let Some(reply) = state.harness.reply(body.get("messages")) else {
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
    let (cached, written) = match breakpoint_mode {
        Some(mode) => {
            let (explicit, implicit) = marker_positions(&body, &ends);
            let pool = state.pools.entry(key.clone()).or_default();
            let read = pool.breakpoints.read(&prompt);
            let written = pool
                .breakpoints
                .write(&prompt, &explicit, implicit, mode, read);
            (read, Some(written))
        }
        None => (cached_tokens(state, state.pools.get(&key), &prompt), None),
    };

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
        // Units where this request diverges from an earlier one (the common prefix detected
        // across requests, above).
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
    record.cache_write_tokens = written.unwrap_or(0);
    state.records.push(record);

    let id = format!("chatcmpl-sim-{:04}", state.next_completion_id);
    state.next_completion_id += 1;
    let mut usage = usage_json(
        profile,
        prompt.len() as u64,
        cached as u64,
        completion_tokens,
    );
    if let Some(written) = written {
        usage["prompt_tokens_details"]["cache_write_tokens"] = json!(written);
    }
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
