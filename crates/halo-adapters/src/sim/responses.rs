//! [`ResponsesSim`]: a loopback fake of OpenAI's `POST /v1/responses` that computes
//! cached-token usage as OpenAI documents it and keeps the Responses API's rules on
//! reasoning items.
//!
//! Wire format (what [`crate::responses::ResponsesAdapter`] speaks): a `response` object,
//! or with `stream: true` a `text/event-stream` of typed events (`response.created`, per
//! output item `response.output_item.added`, its `response.output_text.delta` /
//! `.function_call_arguments.delta` / `.reasoning_summary_text.delta` pieces and
//! `response.output_item.done`, then `response.completed`). Answers come from a FIFO script
//! of [`SimReply`](super::SimReply)s; with [`ResponsesSim::set_reasoning`] every answer
//! starts with a `reasoning` item (its `encrypted_content` when the request asks for it with
//! `include: ["reasoning.encrypted_content"]`; in `.added` that content is cut, as the API
//! warns it may be).
//!
//! Every request is checked first, with OpenAI's error shape: a body that is not JSON or
//! has no `model` or `input`, an item of an unknown type, a `function_call` without its
//! `function_call_output` or an output answering no call, a tool in the chat-completions
//! shape, a `tool_choice` naming an undeclared tool, a `prompt_cache_breakpoint` outside
//! an input block, and — the reasoning rule — a reasoning item this simulator issued that
//! comes back with another `encrypted_content`, or without the item that followed it in its
//! output right after it (400 `Item 'rs_…' of type 'reasoning' was provided without its
//! required following item.`), or that item without its reasoning item before it. A
//! `previous_response_id` must name a stored response (`store: true`). With
//! [`ResponsesSim::set_context_window`] a longer request gets 400 `context_length_exceeded`.
//! An empty reply script gets HTTP 418.
//!
//! # How the cache is computed
//!
//! The request is linearized ([`linearize`]): the `tools` segment, a `json_schema` format's
//! schema, then one segment per input item (a reasoning item by its id and encrypted
//! content; items a `previous_response_id` stands for first). Tokens are `o200k_base`.
//! - Models before GPT-5.6: the OpenAI rule of [`super::openai`] — the longest token prefix
//!   shared with an earlier request of the same pool (model and `prompt_cache_key`), from
//!   1,024 tokens in 128-token steps.
//! - GPT-5.6 and later ([`super::breakpoints::breakpoint_model`]): the breakpoint rule of
//!   [`super::breakpoints`], with `cache_write_tokens` reported and billed.
//!
//! Each [`SimRecord`] keeps `seen_prefix_tokens`, the most any cache could serve.

mod check;
mod render;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::breakpoints::{self, Breakpoints, breakpoint_model, input_cost};
use super::openai::openai_cached_tokens;
use super::{Harness, SCRIPT_EXHAUSTED, Seen, SimServer, TokenMemo, common_prefix, lock, serve};

/// One request the simulator received and what it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct SimRecord {
    /// The request body (`Value::Null` when it was not JSON).
    pub body: Value,
    /// The HTTP status answered.
    pub status: u16,
    /// `usage.input_tokens`: the linearized request (0 when rejected).
    pub input_tokens: u64,
    /// `usage.input_tokens_details.cached_tokens`.
    pub cached_tokens: u64,
    /// `usage.input_tokens_details.cache_write_tokens` (GPT-5.6+; 0 otherwise).
    pub cache_write_tokens: u64,
    /// The input cost in uncached-token units: uncached at 1, cached at 0.1, written at
    /// 1.25 ([`breakpoints::input_cost`]).
    pub input_cost: f64,
    /// The longest token prefix shared with any earlier accepted request: the most any
    /// cache could have served.
    pub seen_prefix_tokens: u64,
    /// `usage.output_tokens`.
    pub output_tokens: u64,
}

/// A reasoning item the simulator issued.
#[derive(Debug, Clone)]
pub(crate) struct Issued {
    encrypted_content: Option<String>,
    /// The id of the item that followed it in its output.
    follower: String,
}

#[derive(Debug, Default)]
struct Pool {
    prompts: Vec<Arc<[u32]>>,
    breakpoints: Breakpoints,
}

#[derive(Debug)]
struct State {
    harness: Harness,
    records: Vec<SimRecord>,
    pools: HashMap<String, Pool>,
    seen: Seen,
    memo: TokenMemo,
    /// The reasoning summary every answer starts with, or none.
    reasoning: Option<String>,
    issued: HashMap<String, Issued>,
    /// Item id → the reasoning item it followed.
    followers: HashMap<String, String>,
    /// Stored responses (`store: true`): id → the whole conversation's items.
    stored: HashMap<String, Vec<Value>>,
    next_item: u64,
    next_response: u64,
}

/// A loopback Responses API with a simulated prompt cache.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use halo_adapters::responses::ResponsesAdapter;
/// use halo_adapters::sim::{SimReply, responses::ResponsesSim};
///
/// let sim = ResponsesSim::start().await?;
/// sim.set_reasoning(Some("Thinking it over.".into()));
/// sim.push_reply(SimReply::text("Hello."));
/// let model = ResponsesAdapter::builder("gpt-5")
///     .api_key("sk-sim")
///     .base_url(sim.base_url())
///     .build()?;
/// // Run an agent on `model`, then read `sim.records()`.
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ResponsesSim {
    server: SimServer,
    state: Arc<Mutex<State>>,
}

impl ResponsesSim {
    /// A simulator on `127.0.0.1` at a free port, with an empty reply script.
    ///
    /// # Errors
    /// The IO error when no loopback port can be bound.
    pub async fn start() -> std::io::Result<Self> {
        let state = Arc::new(Mutex::new(State {
            harness: Harness::default(),
            records: Vec::new(),
            pools: HashMap::new(),
            seen: Seen::default(),
            memo: TokenMemo::default(),
            reasoning: None,
            issued: HashMap::new(),
            followers: HashMap::new(),
            stored: HashMap::new(),
            next_item: 1,
            next_response: 1,
        }));
        let router = axum::Router::new()
            .route("/v1/responses", post(handle))
            .route("/responses", post(handle))
            .with_state(state.clone());
        let server = serve(router).await?;
        Ok(ResponsesSim { server, state })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The base URL to give an adapter: `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.base_url())
    }

    script_methods!();

    /// The model's context window in tokens, counted as `input_tokens` is plus the
    /// request's `max_output_tokens`. A longer request answers 400 `{"message": "Your input
    /// exceeds the context window of this model. Please adjust your input and try again.",
    /// "type": "invalid_request_error", "param": "input", "code":
    /// "context_length_exceeded"}` and uses no reply. `None` (the default): no limit.
    pub fn set_context_window(&self, tokens: Option<u64>) {
        self.lock().harness.set_window(tokens);
    }

    /// A reasoning summary every answer starts with (a `reasoning` item), or none.
    pub fn set_reasoning(&self, summary: Option<String>) {
        self.lock().reasoning = summary;
    }

    /// Forgets every cached prefix, as an eviction would. `seen_prefix_tokens` still
    /// counts what was sent before.
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

/// One input item's segment for tokenizing.
fn render_item(item: &Value) -> String {
    let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
    let text_of = |v: Option<&Value>| -> String {
        match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .map(|p| match p.get("text").and_then(Value::as_str) {
                    Some(t) => t.to_owned(),
                    None => {
                        let mut p = p.clone();
                        if let Some(map) = p.as_object_mut() {
                            map.remove("prompt_cache_breakpoint");
                        }
                        format!("<|part|>{p}")
                    }
                })
                .collect(),
            _ => String::new(),
        }
    };
    match item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message")
    {
        "function_call" => format!(
            "<|call|>{}<|args|>{}<|end|>",
            field("name"),
            field("arguments")
        ),
        "function_call_output" => format!("<|tool|>{}<|end|>", text_of(item.get("output"))),
        "reasoning" => format!(
            "<|reasoning|>{}{}<|end|>",
            field("id"),
            field("encrypted_content")
        ),
        _ => format!(
            "<|{}|>{}<|end|>",
            field("role"),
            text_of(item.get("content"))
        ),
    }
}

/// The request linearized for tokenizing (see the module docs), over `items` (the
/// request's input after what its `previous_response_id` stands for).
pub fn linearize(body: &Value, items: &[Value]) -> Vec<String> {
    let mut segments = Vec::with_capacity(items.len() + 2);
    if let Some(tools) = body.get("tools").filter(|t| !t.is_null()) {
        segments.push(format!("<|tools|>{tools}<|end|>"));
    }
    if let Some(schema) = body.pointer("/text/format/schema") {
        segments.push(format!("<|schema|>{schema}<|end|>"));
    }
    segments.extend(items.iter().map(render_item));
    segments
}

/// The request's input as a list of items (a string is one user message).
fn input_items(body: &Value) -> Option<Vec<Value>> {
    match body.get("input")? {
        Value::String(text) => Some(vec![
            json!({"type": "message", "role": "user", "content": text}),
        ]),
        Value::Array(items) => Some(items.clone()),
        _ => None,
    }
}

fn invalid(message: &str, param: &str, code: Option<&str>) -> Response {
    let body = json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "param": param,
        "code": code,
    }});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
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
        input_tokens: 0,
        cached_tokens: 0,
        cache_write_tokens: 0,
        input_cost: 0.0,
        seen_prefix_tokens: 0,
        output_tokens: 0,
    };
    let body: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => {
            state.records.push(record);
            return invalid(
                &format!("We could not parse the JSON body of your request ({e})"),
                "body",
                None,
            );
        }
    };
    record.body = body.clone();
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(input) = input_items(&body).filter(|_| !model.is_empty()) else {
        state.records.push(record);
        return invalid(
            "Missing required parameter: 'model' or 'input'.",
            "input",
            None,
        );
    };
    // The conversation a `previous_response_id` stands for, then this input.
    let mut items = match body.get("previous_response_id").and_then(Value::as_str) {
        None => Vec::new(),
        Some(id) => match state.stored.get(id) {
            Some(items) => items.clone(),
            None => {
                state.records.push(record);
                return invalid(
                    &format!("Previous response with id '{id}' not found."),
                    "previous_response_id",
                    Some("previous_response_not_found"),
                );
            }
        },
    };
    items.extend(input);
    let mode = if breakpoint_model(&model) {
        match breakpoints::mode_of(&body) {
            Ok(mode) => Some(mode),
            Err(message) => {
                state.records.push(record);
                return invalid(&message, "prompt_cache_options", None);
            }
        }
    } else {
        None
    };
    let checked = check::check_items(&items)
        .and_then(|()| check::check_reasoning(&items, &state.issued, &state.followers))
        .and_then(|()| check::check_tools(&body))
        .and_then(|()| check::check_text(&body));
    if let Err((message, param)) = checked {
        state.records.push(record);
        return invalid(&message, param, None);
    }

    let segments = linearize(&body, &items);
    let mut prompt = Vec::new();
    let mut ends = Vec::with_capacity(segments.len());
    for segment in &segments {
        prompt.extend_from_slice(&state.memo.tokens(segment));
        ends.push(prompt.len());
    }
    let prompt: Arc<[u32]> = prompt.into();
    let max_output = body
        .get("max_output_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if let Some(window) = state.harness.exceeded(prompt.len() as u64 + max_output) {
        state.records.push(record);
        return invalid(
            &format!(
                "Your input exceeds the context window of this model ({window} tokens). Please adjust your input and try again."
            ),
            "input",
            Some("context_length_exceeded"),
        );
    }
    let Some(reply) = state.harness.reply(body.get("input")) else {
        record.status = 418;
        state.records.push(record);
        let body = json!({"error": {"message": SCRIPT_EXHAUSTED, "type": "sim_script_exhausted", "param": null, "code": null}});
        return (StatusCode::IM_A_TEAPOT, axum::Json(body)).into_response();
    };

    let seen = state.seen.longest_prefix(&prompt);
    let key = format!(
        "{model}\u{0}{}",
        body.get("prompt_cache_key")
            .and_then(Value::as_str)
            .unwrap_or("")
    );
    let pool = state.pools.entry(key).or_default();
    let (cached, written) = match mode {
        Some(mode) => {
            let first = ends.len() - items.len();
            let mut explicit = Vec::new();
            let mut implicit = None;
            for (i, item) in items.iter().enumerate() {
                let end = ends[first + i];
                let parts = item.get("content").or_else(|| item.get("output"));
                if parts.and_then(Value::as_array).is_some_and(|ps| {
                    ps.iter().any(|p| {
                        p.get("prompt_cache_breakpoint")
                            .is_some_and(|b| !b.is_null())
                    })
                }) {
                    explicit.push(end);
                }
                let kind = item
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("message");
                let assistant = item.get("role").and_then(Value::as_str) == Some("assistant");
                if (kind == "message" && !assistant) || kind == "function_call_output" {
                    implicit = Some(end);
                }
            }
            let read = pool.breakpoints.read(&prompt);
            let written = pool
                .breakpoints
                .write(&prompt, &explicit, implicit, mode, read);
            (read, Some(written))
        }
        None => {
            let shared = pool
                .prompts
                .iter()
                .map(|p| common_prefix(p, &prompt))
                .max()
                .unwrap_or(0);
            (openai_cached_tokens(shared), None)
        }
    };
    if !pool.prompts.iter().any(|p| **p == *prompt) {
        pool.prompts.push(prompt.clone());
    }
    state.seen.push(prompt.clone());

    let store = body.get("store").and_then(Value::as_bool) == Some(true);
    let encrypted = !store
        && body
            .get("include")
            .and_then(Value::as_array)
            .is_some_and(|inc| inc.iter().any(|i| i == "reasoning.encrypted_content"));
    let output = render::output_items(state, &reply, encrypted);
    if let [first, second, ..] = output.as_slice()
        && first["type"] == "reasoning"
    {
        let (rs, next) = (first["id"].as_str(), second["id"].as_str());
        if let (Some(rs), Some(next)) = (rs, next) {
            state.issued.insert(
                rs.to_owned(),
                Issued {
                    encrypted_content: first["encrypted_content"].as_str().map(str::to_owned),
                    follower: next.to_owned(),
                },
            );
            state.followers.insert(next.to_owned(), rs.to_owned());
        }
    }
    let output_tokens = state.memo.tokens(&render::output_text(&output)).len() as u64;
    let reasoning_tokens = output
        .iter()
        .filter(|i| i["type"] == "reasoning")
        .map(|i| render::output_text(std::slice::from_ref(i)))
        .map(|t| state.memo.tokens(&t).len() as u64)
        .sum::<u64>();
    let written = written.unwrap_or(0);
    record.status = 200;
    record.input_tokens = prompt.len() as u64;
    record.cached_tokens = cached as u64;
    record.cache_write_tokens = written;
    record.input_cost = input_cost(prompt.len() as u64, cached as u64, written);
    record.seen_prefix_tokens = seen as u64;
    record.output_tokens = output_tokens;
    state.records.push(record);

    let id = format!("resp_sim{:04}", state.next_response);
    state.next_response += 1;
    if store {
        let mut conversation = items;
        conversation.extend(output.iter().cloned());
        state.stored.insert(id.clone(), conversation);
    }
    let mut details = json!({"cached_tokens": cached});
    if mode.is_some() {
        details["cache_write_tokens"] = json!(written);
    }
    let usage = json!({
        "input_tokens": prompt.len(),
        "input_tokens_details": details,
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": prompt.len() as u64 + output_tokens,
    });
    let done = render::response(&id, &json!(model), "completed", &output, usage);
    if body.get("stream").and_then(Value::as_bool) == Some(true) {
        let mut response = render::stream_body(&done).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        return response;
    }
    axum::Json(done).into_response()
}
