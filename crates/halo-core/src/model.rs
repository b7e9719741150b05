//! The model boundary: [`ModelAdapter`], what it receives and what it returns.
//!
//! An adapter receives the [`StablePrefix`] and the history *separately*, so each provider
//! dialect decides where its cache markers go (Anthropic `cache_control` breakpoints at the
//! end of the prefix, Gemini's `cachedContents` object owning system and tools, OpenAI's
//! `prompt_cache_key`). It returns a normalized [`ModelResponse`] whose [`Usage`] keeps
//! counts the provider did not report as `None` ("unknown"), never `0`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};

use crate::log::HistoryKey;
use crate::message::{AssistantMessage, Message};
use crate::prefix::StablePrefix;

/// Which tools the model may or must call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "name")]
pub enum ToolChoice {
    /// The model decides (the providers' default).
    #[default]
    Auto,
    /// The model must call at least one tool.
    Required,
    /// The model must not call tools (the tools stay in the request, so the prefix is unchanged).
    None,
    /// The model must call the named tool.
    Tool(String),
}

/// The shape of the answer text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum ResponseFormat {
    /// Free text.
    #[default]
    Text,
    /// A JSON object; with a schema, one that fits it (OpenAI `json_schema`, grammar-constrained
    /// locally).
    Json {
        /// JSON Schema the object must satisfy, if any.
        schema: Option<serde_json::Value>,
    },
}

/// Per-request generation options. Keep them constant within a session: some providers key
/// their prompt cache on them too.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GenerationOptions {
    /// Tool choice; default [`ToolChoice::Auto`].
    pub tool_choice: ToolChoice,
    /// Most tokens to generate, or the provider's default.
    pub max_tokens: Option<u32>,
    /// Sampling temperature, or the provider's default.
    pub temperature: Option<f32>,
    /// Sampling seed, where the provider supports one.
    pub seed: Option<u64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// The answer's shape.
    pub response_format: ResponseFormat,
    /// The tools the model may call in this request (`None`: all the prefix has; empty:
    /// none). Set per step by a [`StepHook`](crate::guardrail::StepHook), and empty in
    /// [`generate_object`](crate::HaloAgent::generate_object)'s calls; the prefix keeps
    /// every tool, so the prompt bytes do not change. Adapters pass it through the
    /// provider's allowed-tools mechanism where one exists
    /// ([`ModelCapabilities::allowed_tools`]: OpenAI `tool_choice: {"type":
    /// "allowed_tools"}`, Gemini `toolConfig.functionCallingConfig.allowedFunctionNames`);
    /// Anthropic has none. The agent answers a call of a tool outside the set with an error
    /// result in any case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_tools: Option<Vec<String>>,
    /// How much the model should reason before answering, where the provider lets the
    /// caller choose (`None`: the provider's or the adapter's default). Each adapter maps it
    /// to its provider's own field — OpenAI `reasoning_effort` / `reasoning.effort`,
    /// Anthropic `thinking.budget_tokens`, Gemini `thinkingConfig.thinkingBudget`, DeepSeek's
    /// thinking model — and a value set through the adapter's own options takes precedence.
    /// Keep it constant within a session: providers key their prompt cache on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningEffort>,
}

/// A portable reasoning setting ([`GenerationOptions::reasoning`]): a level, or a budget in
/// tokens for providers that take one. Adapters translate levels to budgets and budgets to
/// levels with [`budget_tokens`](Self::budget_tokens) and [`level`](Self::level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    /// Little reasoning: quick answers.
    Low,
    /// The middle setting.
    Medium,
    /// Thorough reasoning.
    High,
    /// At most this many reasoning tokens.
    Budget(u32),
}

impl ReasoningEffort {
    /// The budget in tokens: the budget itself, else 2,048 (low), 8,192 (medium) or 24,576
    /// (high; Gemini 2.5 Flash's largest thinking budget).
    pub fn budget_tokens(self) -> u32 {
        match self {
            ReasoningEffort::Low => 2_048,
            ReasoningEffort::Medium => 8_192,
            ReasoningEffort::High => 24_576,
            ReasoningEffort::Budget(n) => n,
        }
    }

    /// The level: the level itself, else a budget under 4,096 tokens is low, under 16,384
    /// medium, anything more high.
    pub fn level(self) -> ReasoningEffort {
        match self {
            ReasoningEffort::Budget(n) if n < 4_096 => ReasoningEffort::Low,
            ReasoningEffort::Budget(n) if n < 16_384 => ReasoningEffort::Medium,
            ReasoningEffort::Budget(_) => ReasoningEffort::High,
            level => level,
        }
    }

    /// The level's name as OpenAI's `reasoning_effort` spells it: `low`, `medium` or `high`
    /// (a budget by its [`level`](Self::level)).
    pub fn as_str(self) -> &'static str {
        match self.level() {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            _ => "high",
        }
    }
}

impl GenerationOptions {
    /// Sets [`tool_choice`](Self::tool_choice).
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }
    /// Sets [`max_tokens`](Self::max_tokens).
    pub fn with_max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }
    /// Sets [`temperature`](Self::temperature).
    pub fn with_temperature(mut self, t: f32) -> Self {
        self.temperature = Some(t);
        self
    }
    /// Sets [`seed`](Self::seed).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
    /// Sets [`reasoning`](Self::reasoning).
    pub fn with_reasoning(mut self, effort: ReasoningEffort) -> Self {
        self.reasoning = Some(effort);
        self
    }
}

/// What an adapter can do beyond plain text and tool calls, so
/// [`generate_object`](crate::HaloAgent::generate_object)'s [`OutputMode::Auto`](crate::OutputMode::Auto)
/// picks a mode per provider: native structured output where the adapter has it, else a
/// forced output tool, else the schema in the prompt.
///
/// The default is none of them (an adapter that says nothing gets the prompted mode, which
/// every model can follow). Build one with the `with_*` methods:
///
/// ```
/// use halo_core::ModelCapabilities;
///
/// let caps = ModelCapabilities::default().with_native_output(true).with_forced_tool(true);
/// assert!(caps.native_output && !caps.native_output_with_tools);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelCapabilities {
    /// [`ResponseFormat::Json`] with a schema constrains the answer (OpenAI `json_schema`,
    /// Gemini `responseSchema`, Anthropic `output_config.format`) in a request without tools.
    pub native_output: bool,
    /// The same in a request whose prefix has tools (Gemini before 3 refuses
    /// `responseMimeType: application/json` next to function declarations).
    pub native_output_with_tools: bool,
    /// [`ToolChoice::Tool`] and [`ToolChoice::Required`] are honoured: the model must call
    /// the tool.
    pub forced_tool: bool,
    /// [`GenerationOptions::active_tools`] is sent through the provider's allowed-tools
    /// mechanism (OpenAI `allowed_tools`, Gemini `allowedFunctionNames`); without it the
    /// agent's error result for a call of an inactive tool is the only restriction.
    pub allowed_tools: bool,
}

impl ModelCapabilities {
    /// None of them (as [`Default`]), in a `const`.
    pub const fn new() -> Self {
        ModelCapabilities {
            native_output: false,
            native_output_with_tools: false,
            forced_tool: false,
            allowed_tools: false,
        }
    }
    /// Sets [`native_output`](Self::native_output).
    pub const fn with_native_output(mut self, yes: bool) -> Self {
        self.native_output = yes;
        self
    }
    /// Sets [`native_output_with_tools`](Self::native_output_with_tools) (and
    /// [`native_output`](Self::native_output) when `yes`).
    pub const fn with_native_output_with_tools(mut self, yes: bool) -> Self {
        self.native_output_with_tools = yes;
        if yes {
            self.native_output = true;
        }
        self
    }
    /// Sets [`forced_tool`](Self::forced_tool).
    pub const fn with_forced_tool(mut self, yes: bool) -> Self {
        self.forced_tool = yes;
        self
    }
    /// Sets [`allowed_tools`](Self::allowed_tools).
    pub const fn with_allowed_tools(mut self, yes: bool) -> Self {
        self.allowed_tools = yes;
        self
    }
}

/// Everything an adapter needs for one call.
///
/// Built with [`new`](Self::new) and the `with_*` setters, so a field added later does not
/// break the code that makes requests (the struct is `#[non_exhaustive]`); the fields are
/// public to read:
///
/// ```
/// use halo_core::{GenerationOptions, Message, ModelRequest, StablePrefix};
///
/// let prefix = StablePrefix::new("You are terse.");
/// let history = [Message::user("Hi")];
/// let options = GenerationOptions::default();
/// let request = ModelRequest::new(&prefix, &history, &options).with_session_id("s-1");
/// assert_eq!(request.session_id, Some("s-1"));
/// assert!(request.history_key().is_none(), "a history of no log has no key");
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ModelRequest<'a> {
    /// The stable prefix: system text, tool specs, few-shot turns, skill catalog.
    pub prefix: &'a StablePrefix,
    /// The history after the prefix, oldest first; every tool call has its results.
    pub history: &'a [Message],
    /// Generation options.
    pub options: &'a GenerationOptions,
    /// A stable id for the conversation (OpenAI's `prompt_cache_key`),
    /// if the caller set one.
    pub session_id: Option<&'a str>,
    /// Where `history` comes from; read it through [`history_key`](Self::history_key),
    /// which checks that it was made for `history`.
    history_key: Option<HistoryKey>,
}

impl<'a> ModelRequest<'a> {
    /// A request of `prefix`, `history` and `options`, with no session id and no history
    /// key.
    pub fn new(
        prefix: &'a StablePrefix,
        history: &'a [Message],
        options: &'a GenerationOptions,
    ) -> Self {
        ModelRequest {
            prefix,
            history,
            options,
            session_id: None,
            history_key: None,
        }
    }

    /// Sets [`session_id`](Self::session_id).
    pub fn with_session_id(mut self, id: &'a str) -> Self {
        self.session_id = Some(id);
        self
    }

    /// Sets the key of the history: where it comes from
    /// ([`MessageLog::history_key`](crate::MessageLog::history_key)), so an adapter knows which
    /// of its messages an earlier request already carried. A key made for another slice
    /// than [`history`](Self::history) is ignored.
    pub fn with_history_key(mut self, key: Option<HistoryKey>) -> Self {
        self.history_key = key;
        self
    }

    /// The history's key, when it was made for this request's [`history`](Self::history)
    /// (the same slice: a request whose `history` was replaced has none). While two
    /// requests' keys share a prefix ([`HistoryKey::shared_prefix`]), that many leading
    /// messages of their histories are the same, so an adapter may reuse what it
    /// serialized of them. `None` for a history that comes from no log as it stands (a
    /// repaired copy, a slice built by hand).
    pub fn history_key(&self) -> Option<HistoryKey> {
        self.history_key.filter(|k| k.is_for(self.history))
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end or a stop sequence.
    Stop,
    /// The `max_tokens` limit or the context window was reached.
    Length,
    /// The model called tools.
    ToolCalls,
    /// Output was withheld by a content filter.
    ContentFilter,
    /// Anything else, as the provider named it.
    Other(String),
}

/// Token counts of one call, normalized across providers. `None` means the provider did not
/// report the count, which is not the same as `0`.
///
/// `input_tokens` counts *all* input tokens, cached ones included (OpenAI, DeepSeek and
/// Gemini report it so; Anthropic adapters add its cache reads and writes back in).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// All input tokens of the request, cached ones included.
    pub input_tokens: Option<u64>,
    /// Generated tokens, reasoning included.
    pub output_tokens: Option<u64>,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: Option<u64>,
    /// Input tokens written to the prompt cache (Anthropic, OpenAI GPT-5.6+).
    pub cache_write_tokens: Option<u64>,
    /// Reasoning tokens, a part of `output_tokens`.
    pub reasoning_tokens: Option<u64>,
}

/// A normalized model answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The assistant turn: text, reasoning, tool calls.
    pub message: AssistantMessage,
    /// Why generation stopped; [`FinishReason::ToolCalls`] whenever `message` has calls.
    pub finish_reason: FinishReason,
    /// Token counts.
    pub usage: Usage,
    /// The provider's id of this response, if it sent one (OpenAI `chatcmpl-…`, Anthropic
    /// `msg_…`, Gemini `responseId`): `gen_ai.response.id` on the `chat` span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The model id the provider says answered, if it said.
    pub model: Option<String>,
    /// The provider that answered ([`ModelAdapter::provider`]), when the model behind the
    /// call can change from call to call: a fallback over several adapters names the one
    /// that answered, and the cache ledger counts a change as an expected miss (the new
    /// provider's cache is cold), not a bust. `None` from a single adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// Errors at the model boundary. Policy is in methods: [`is_retryable`](Self::is_retryable),
/// [`retry_after`](Self::retry_after), [`status`](Self::status) and
/// [`is_context_window_exceeded`](Self::is_context_window_exceeded). Messages never contain
/// an API key.
///
/// An error the provider answers *instead of* a response carries its HTTP status
/// ([`InvalidRequest`](Self::InvalidRequest), [`RateLimited`](Self::RateLimited),
/// [`Server`](Self::Server), ...). An error it reports *inside* an HTTP 200 answer, after
/// the event stream began, is [`Stream`](Self::Stream): its status stays 200, and the
/// provider's error type and code are kept as they were sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelError {
    /// HTTP 400 or 422 (and 404 or 413 where the provider means "this request cannot
    /// succeed"): the request was malformed or had invalid parameters. `kind` says what the
    /// provider's message or code names, when the adapter recognizes it.
    ///
    /// `the request exceeds the model's context window (HTTP 400): prompt is too long: 208310
    /// tokens > 200000 maximum (type invalid_request_error); shorten or compact the history`
    #[error(
        "{} (HTTP {status}): {message}{}",
        .kind.headline(),
        .kind.advice().map(|a| format!("; {a}")).unwrap_or_default()
    )]
    InvalidRequest {
        /// HTTP status.
        status: u16,
        /// What the provider rejected, read from its message or code.
        kind: InvalidRequestKind,
        /// A bounded excerpt of the provider's error.
        message: String,
    },
    /// HTTP 401 or 403: the key is missing, wrong or lacks permission.
    #[error("authentication failed (HTTP {status}): {message}; check the API key")]
    Authentication {
        /// HTTP status.
        status: u16,
        /// A bounded excerpt of the provider's error.
        message: String,
    },
    /// HTTP 402, or an exhausted quota: needs a human to add credit. Not retryable.
    #[error("insufficient balance or quota (HTTP {status}): {message}; top up the account")]
    InsufficientBalance {
        /// HTTP status.
        status: u16,
        /// A bounded excerpt of the provider's error.
        message: String,
    },
    /// HTTP 429: too many requests. Retryable after `retry_after` if given.
    #[error("rate limited (HTTP 429){}: {message}", fmt_retry(.retry_after))]
    RateLimited {
        /// The delay the provider asked for (`retry-after-ms` / `retry-after`).
        retry_after: Option<Duration>,
        /// A bounded excerpt of the provider's error.
        message: String,
    },
    /// HTTP 5xx: the provider failed or is overloaded. Retryable.
    #[error("provider error (HTTP {status}){}: {message}", fmt_retry(.retry_after))]
    Server {
        /// HTTP status.
        status: u16,
        /// The delay the provider asked for, if any.
        retry_after: Option<Duration>,
        /// A bounded excerpt of the provider's error.
        message: String,
    },
    /// An error the provider reported inside an HTTP 200 answer, after its event stream had
    /// begun (or, from some gateways, as the whole 200 body): the OpenAI-compatible
    /// `{"error": {...}}` chunk
    /// (<https://github.com/openai/openai-python/blob/main/src/openai/_streaming.py>),
    /// Anthropic's `error` event
    /// (<https://platform.claude.com/docs/en/build-with-claude/streaming#error-events>),
    /// llama.cpp's `error:` line or `{"error": ...}` chunk
    /// (<https://github.com/ggml-org/llama.cpp/tree/master/tools/server>), a Gemini chunk
    /// with an `error` (<https://ai.google.dev/api/generate-content>). [`status`](Self::status)
    /// is `Some(200)`, so a caller can tell it from the same error answered before the
    /// stream started; what the provider's type and code mean is in `retryable` and
    /// `invalid_request`.
    ///
    /// `the provider reported an error mid-stream (HTTP 200, type overloaded_error):
    /// Overloaded; try again`
    #[error(
        "{}",
        fmt_stream(
            .provider_type.as_deref(),
            .code.as_deref(),
            .invalid_request,
            .retryable,
            .message
        )
    )]
    Stream {
        /// The provider's error type as sent (`overloaded_error`, `invalid_request_error`,
        /// `server_error`, `exceed_context_size_error`; Gemini's `status`, such as
        /// `UNAVAILABLE`), if it sent one.
        provider_type: Option<String>,
        /// The provider's error code as sent, numbers as their digits
        /// (`context_length_exceeded`, `400`, `503`), if it sent one.
        code: Option<String>,
        /// `Some` when the type or code says the request itself is invalid (what HTTP 400
        /// would say), with what the message names; `None` for any other error.
        invalid_request: Option<InvalidRequestKind>,
        /// Whether the type or code says trying again later can succeed: an overload, a
        /// rate limit or a server error (`overloaded_error`, `server_error`, 429, 5xx);
        /// never an invalid request.
        retryable: bool,
        /// A bounded excerpt of the provider's error message.
        message: String,
    },
    /// Any other HTTP status.
    #[error("unexpected HTTP {status}: {message}")]
    Http {
        /// HTTP status.
        status: u16,
        /// A bounded excerpt of the body.
        message: String,
    },
    /// The connection failed or timed out before a response. Retryable.
    #[error("transport error: {0}")]
    Transport(String),
    /// A streamed response ended before it was complete (the connection dropped, or the
    /// stream closed without its final event). Retryable; nothing of it was kept.
    #[error("the response stream was cut off: {0}; try again")]
    Truncated(String),
    /// The provider answered with something that is not its documented format.
    #[error("invalid response from the provider: {0}")]
    InvalidResponse(String),
    /// The adapter cannot do what the request asks (an image on a text-only model, say).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A local model failed: the file is missing, does not load, or the context is full.
    #[error("local model error: {0}")]
    Local(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// What the provider said is wrong with an invalid request, as the adapter read it from the
/// provider's error code or message. Each adapter documents the exact codes and wordings it
/// matches; an error it does not recognize is [`Other`](Self::Other).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InvalidRequestKind {
    /// The prompt (with room for the answer) does not fit the model's context window:
    /// OpenAI's code `context_length_exceeded`, Anthropic's `prompt is too long: N tokens >
    /// M maximum`, Gemini's `The input token count (N) exceeds the maximum number of tokens
    /// allowed (M)`, DeepSeek's and vLLM's `This model's maximum context length is N
    /// tokens`, llama.cpp's type `exceed_context_size_error`. Shorten or compact the
    /// history, then send again.
    ContextWindowExceeded,
    /// The provider requires reasoning from earlier assistant turns to be sent back, and it
    /// was not: DeepSeek's `The reasoning_content in the thinking mode must be passed back
    /// to the API`, Gemini's `Function call is missing a thought_signature`, Anthropic's
    /// `Expected thinking or redacted_thinking` on a final assistant turn. Replay each
    /// turn's reasoning as the model returned it.
    ReasoningReplayMissing,
    /// The provider rejected a tool's parameter schema: Gemini's `Unknown name "…" at
    /// 'tools[0].function_declarations[…]'`, OpenAI's code `invalid_function_parameters`,
    /// Anthropic's `tools.N.custom.input_schema: JSON schema is invalid`. Change the schema
    /// the message names.
    ToolSchemaRejected,
    /// Any other invalid request, or one the adapter does not recognize.
    #[default]
    Other,
}

impl InvalidRequestKind {
    /// The start of the error message for this kind.
    fn headline(self) -> &'static str {
        match self {
            InvalidRequestKind::ContextWindowExceeded => {
                "the request exceeds the model's context window"
            }
            InvalidRequestKind::ReasoningReplayMissing => {
                "the provider requires the reasoning of earlier turns sent back"
            }
            InvalidRequestKind::ToolSchemaRejected => "the provider rejected a tool's schema",
            InvalidRequestKind::Other => "the provider rejected the request",
        }
    }

    /// What to do, closing the error message; `None` for [`Other`](Self::Other), whose fix
    /// only the provider's message can say.
    fn advice(self) -> Option<&'static str> {
        match self {
            InvalidRequestKind::ContextWindowExceeded => Some("shorten or compact the history"),
            InvalidRequestKind::ReasoningReplayMissing => {
                Some("replay each assistant turn's reasoning exactly as the model returned it")
            }
            InvalidRequestKind::ToolSchemaRejected => {
                Some("change the tool parameter schema the message names")
            }
            InvalidRequestKind::Other => None,
        }
    }
}

/// The message of [`ModelError::Stream`]: the kind's headline (or "the provider reported an
/// error") with `mid-stream`, the status 200 and the provider's type and code, the message,
/// and what to do.
fn fmt_stream(
    provider_type: Option<&str>,
    code: Option<&str>,
    invalid_request: &Option<InvalidRequestKind>,
    retryable: &bool,
    message: &str,
) -> String {
    let mut labels = vec!["HTTP 200".to_string()];
    labels.extend(provider_type.map(|t| format!("type {t}")));
    labels.extend(code.map(|c| format!("code {c}")));
    let headline = match invalid_request {
        Some(kind) => kind.headline(),
        None => "the provider reported an error",
    };
    let advice = match invalid_request {
        Some(kind) => kind.advice(),
        None => retryable.then_some("try again"),
    };
    format!(
        "{headline} mid-stream ({}): {message}{}",
        labels.join(", "),
        advice.map(|a| format!("; {a}")).unwrap_or_default()
    )
}

fn fmt_retry(d: &Option<Duration>) -> String {
    match d {
        Some(d) => format!(", retry after {}", readable(*d)),
        None => String::new(),
    }
}

/// A delay in the two largest units that matter: `250 ms`, `3 s`, `1 min 30 s`,
/// `27 h 46 min`. Below a second it is milliseconds; from a second on, leftover
/// milliseconds are dropped.
fn readable(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m, s) {
        (0, 0, 0) => format!("{} ms", d.as_millis()),
        (0, 0, s) => format!("{s} s"),
        (0, m, 0) => format!("{m} min"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, 0, _) => format!("{h} h"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

impl ModelError {
    /// Whether trying the same request again later can succeed: 429, 5xx, transport
    /// failures, cut streams, and a [`Stream`](Self::Stream) error whose type says so (an
    /// overload mid-stream).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. }
                | ModelError::Server { .. }
                | ModelError::Transport(_)
                | ModelError::Truncated(_)
                | ModelError::Stream {
                    retryable: true,
                    ..
                }
        )
    }

    /// The delay the provider asked for before a retry, if it gave one. An error mid-stream
    /// never carries one (no header comes with it).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after, .. }
            | ModelError::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The HTTP status of the answer that carried the error: the error status of an answer
    /// given instead of a response, `200` for an error reported mid-stream
    /// ([`Stream`](Self::Stream)), `None` when there was no HTTP answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::InvalidRequest { status, .. }
            | ModelError::Authentication { status, .. }
            | ModelError::InsufficientBalance { status, .. }
            | ModelError::Server { status, .. }
            | ModelError::Http { status, .. } => Some(*status),
            ModelError::RateLimited { .. } => Some(429),
            ModelError::Stream { .. } => Some(200),
            _ => None,
        }
    }

    /// What an invalid request was rejected for, whether the provider answered it before
    /// the stream ([`InvalidRequest`](Self::InvalidRequest)) or mid-stream
    /// ([`Stream`](Self::Stream)); `None` for any other error.
    pub fn invalid_request_kind(&self) -> Option<InvalidRequestKind> {
        match self {
            ModelError::InvalidRequest { kind, .. } => Some(*kind),
            ModelError::Stream {
                invalid_request, ..
            } => *invalid_request,
            _ => None,
        }
    }

    /// Whether the provider said the prompt does not fit the model's context window
    /// ([`InvalidRequestKind::ContextWindowExceeded`], before or mid-stream): the request
    /// can succeed only after the history is shortened or compacted.
    pub fn is_context_window_exceeded(&self) -> bool {
        self.invalid_request_kind() == Some(InvalidRequestKind::ContextWindowExceeded)
    }
}

/// A chat model behind some provider's API, or in-process.
///
/// An object-safe `#[async_trait]` trait: the agent holds adapters as [`SharedModel`]
/// (`Arc<dyn ModelAdapter>`). Implementers write `async fn generate` in an impl marked
/// `#[async_trait]` (re-exported as [`halo_core::async_trait`](crate::async_trait)); its
/// future is boxed and `Send`, so agents run on multi-threaded executors.
///
/// ```
/// use halo_core::{async_trait, AssistantMessage, FinishReason, HaloAgent, ModelAdapter};
/// use halo_core::{ModelError, ModelRequest, ModelResponse, Usage};
///
/// /// Answers every request with the same text.
/// struct Parrot;
///
/// #[async_trait]
/// impl ModelAdapter for Parrot {
///     fn provider(&self) -> &str { "parrot" }
///     fn model_name(&self) -> &str { "parrot-1" }
///     async fn generate(&self, _request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
///         Ok(ModelResponse {
///             id: None,
///             message: AssistantMessage { text: "Polly wants a cracker.".into(), ..Default::default() },
///             finish_reason: FinishReason::Stop,
///             usage: Usage::default(),
///             model: None,
///             provider: None,
///         })
///     }
/// }
///
/// # futures::executor::block_on(async {
/// let mut agent = HaloAgent::builder(Parrot).build();
/// assert_eq!(agent.generate_text("Hello").await.unwrap().text, "Polly wants a cracker.");
/// # });
/// ```
#[async_trait]
pub trait ModelAdapter: Send + Sync {
    /// The provider's name: `openai`, `deepseek`, `anthropic`, `gemini`, `local`, ... Traces
    /// carry it as `gen_ai.provider.name` (`gemini` as the conventions' `gcp.gemini`; see
    /// `docs/telemetry.md`).
    fn provider(&self) -> &str;

    /// The model id requests name (`gen_ai.request.model`).
    fn model_name(&self) -> &str;

    /// What the adapter can do for structured output and tool restriction (default: none
    /// of it, so [`generate_object`](crate::HaloAgent::generate_object) prompts for JSON).
    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities::default()
    }

    /// The model's context window in tokens (prompt and answer together, as the provider
    /// counts them), or `None` when the adapter does not know it (default). The adapters
    /// take it from a per-model table of the providers' documented windows; an agent whose
    /// [`ContextConfig`](crate::ContextConfig) sets no window uses it
    /// ([`ContextConfig::for_model`](crate::ContextConfig::for_model)).
    fn context_window(&self) -> Option<u64> {
        None
    }

    /// Runs one model call.
    ///
    /// # Errors
    /// [`ModelError`] for provider, transport and format failures.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the call; nothing is written anywhere.
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError>;

    /// Runs one model call, streaming: deltas as they arrive, then exactly one
    /// [`ModelStreamEvent::Finish`] with the assembled response. See [`ModelEventStream`] for
    /// the contract.
    ///
    /// The default calls [`generate`](Self::generate) and yields its text and reasoning as
    /// single deltas, each tool call as a start and one arguments delta, then the finish;
    /// adapters with a streaming endpoint override it.
    ///
    /// # Cancel safety
    /// Dropping the stream abandons the call; nothing is written anywhere.
    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        Box::pin(
            futures::stream::once(self.generate(request))
                .map(|result| match result {
                    Ok(response) => {
                        futures::stream::iter(response_events(response).map(Ok)).left_stream()
                    }
                    Err(e) => futures::stream::once(futures::future::ready(Err(e))).right_stream(),
                })
                .flatten(),
        )
    }
}

/// The events a non-streaming response amounts to: its text and reasoning as one delta each,
/// each tool call as a start and one arguments delta, then the finish.
pub fn response_events(response: ModelResponse) -> impl Iterator<Item = ModelStreamEvent> {
    let mut events = Vec::new();
    if let Some(r) = response.message.reasoning_text().filter(|r| !r.is_empty()) {
        events.push(ModelStreamEvent::ReasoningDelta(r));
    }
    if !response.message.text.is_empty() {
        events.push(ModelStreamEvent::TextDelta(response.message.text.clone()));
    }
    for (index, call) in response.message.tool_calls.iter().enumerate() {
        events.push(ModelStreamEvent::ToolCallStart {
            index,
            id: call.id.to_string(),
            name: call.name.to_string(),
        });
        if !call.raw_arguments.is_empty() {
            events.push(ModelStreamEvent::ToolCallDelta {
                index,
                arguments: call.raw_arguments.to_string(),
            });
        }
    }
    events.push(ModelStreamEvent::Finish(response));
    events.into_iter()
}

/// One event of a streamed model call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModelStreamEvent {
    /// A piece of the answer text.
    TextDelta(String),
    /// A piece of reasoning text.
    ReasoningDelta(String),
    /// A tool call began. `index` identifies the call within this stream (0-based, in order
    /// of first appearance) so its `ToolCallDelta`s can name it; the finished turn lists its
    /// calls in the provider's own order, which may differ.
    ToolCallStart {
        /// The call's number within the stream, in order of first appearance.
        index: usize,
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's argument string (any split, even inside a UTF-8 sequence's
    /// JSON escape; only the concatenation is meaningful).
    ToolCallDelta {
        /// Position of the call in the turn.
        index: usize,
        /// The next piece of the argument string.
        arguments: String,
    },
    /// The call is complete: the assembled turn (its text and calls equal to the deltas'
    /// concatenation), the finish reason and the usage. Always the last event.
    Finish(ModelResponse),
}

/// A streamed model call: zero or more deltas, then exactly one [`ModelStreamEvent::Finish`].
/// An `Err` item ends the stream. A stream that ends without `Finish` was cut off; the agent
/// reports [`ModelError::Truncated`] and runs none of its tool calls.
pub type ModelEventStream<'a> = BoxStream<'a, Result<ModelStreamEvent, ModelError>>;

/// An `Arc` of an adapter is an adapter, so one adapter can serve several agents.
#[async_trait]
impl<M: ModelAdapter + ?Sized> ModelAdapter for Arc<M> {
    fn provider(&self) -> &str {
        (**self).provider()
    }
    fn model_name(&self) -> &str {
        (**self).model_name()
    }
    fn capabilities(&self) -> ModelCapabilities {
        (**self).capabilities()
    }
    fn context_window(&self) -> Option<u64> {
        (**self).context_window()
    }
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        (**self).generate(request).await
    }
    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        (**self).stream(request)
    }
}

/// A shared, type-erased model adapter.
pub type SharedModel = Arc<dyn ModelAdapter>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_read_in_readable_units() {
        // Trigger: `retry-after: 99999` printed as "retry after 99999000 ms".
        let shown = |d| fmt_retry(&Some(d));
        assert_eq!(
            shown(Duration::from_secs(99_999)),
            ", retry after 27 h 46 min"
        );
        assert_eq!(shown(Duration::from_secs(7200)), ", retry after 2 h");
        assert_eq!(shown(Duration::from_secs(90)), ", retry after 1 min 30 s");
        assert_eq!(shown(Duration::from_secs(120)), ", retry after 2 min");
        assert_eq!(shown(Duration::from_millis(3400)), ", retry after 3 s");
        assert_eq!(shown(Duration::from_millis(250)), ", retry after 250 ms");
        assert_eq!(fmt_retry(&None), "");
    }

    #[test]
    fn retry_policy() {
        let e = ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(2)),
            message: "slow down".into(),
        };
        assert!(e.is_retryable());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(e.status(), Some(429));
        assert!(e.to_string().contains("retry after 2 s"));
        let e = ModelError::InsufficientBalance {
            status: 402,
            message: "Insufficient Balance".into(),
        };
        assert!(!e.is_retryable());
    }

    #[test]
    fn an_invalid_request_names_its_kind_and_what_to_do() {
        let e = ModelError::InvalidRequest {
            status: 400,
            kind: InvalidRequestKind::ContextWindowExceeded,
            message: "prompt is too long: 208310 tokens > 200000 maximum".into(),
        };
        assert_eq!(
            e.to_string(),
            "the request exceeds the model's context window (HTTP 400): prompt is too long: \
             208310 tokens > 200000 maximum; shorten or compact the history"
        );
        assert!(e.is_context_window_exceeded());
        assert!(!e.is_retryable());
        assert_eq!(e.status(), Some(400));
        let e = ModelError::InvalidRequest {
            status: 422,
            kind: InvalidRequestKind::Other,
            message: "bad field".into(),
        };
        assert_eq!(
            e.to_string(),
            "the provider rejected the request (HTTP 422): bad field"
        );
        assert_eq!(e.invalid_request_kind(), Some(InvalidRequestKind::Other));
        assert!(!e.is_context_window_exceeded());
        let e = ModelError::InvalidRequest {
            status: 400,
            kind: InvalidRequestKind::ToolSchemaRejected,
            message: "Unknown name \"const\"".into(),
        };
        assert_eq!(
            e.to_string(),
            "the provider rejected a tool's schema (HTTP 400): Unknown name \"const\"; change \
             the tool parameter schema the message names"
        );
    }

    #[test]
    fn a_mid_stream_error_keeps_status_200_type_and_code() {
        // Trigger: Anthropic's mid-stream `overloaded_error` read as HTTP 529.
        let overloaded = ModelError::Stream {
            provider_type: Some("overloaded_error".into()),
            code: None,
            invalid_request: None,
            retryable: true,
            message: "Overloaded".into(),
        };
        assert_eq!(overloaded.status(), Some(200));
        assert!(overloaded.is_retryable());
        assert_eq!(overloaded.retry_after(), None);
        assert_eq!(overloaded.invalid_request_kind(), None);
        assert_eq!(
            overloaded.to_string(),
            "the provider reported an error mid-stream (HTTP 200, type overloaded_error): \
             Overloaded; try again"
        );
        let context = ModelError::Stream {
            provider_type: Some("exceed_context_size_error".into()),
            code: Some("400".into()),
            invalid_request: Some(InvalidRequestKind::ContextWindowExceeded),
            retryable: false,
            message: "request (4476 tokens) exceeds the available context size (4096 tokens)"
                .into(),
        };
        assert!(context.is_context_window_exceeded());
        assert!(!context.is_retryable());
        assert_eq!(
            context.to_string(),
            "the request exceeds the model's context window mid-stream (HTTP 200, type \
             exceed_context_size_error, code 400): request (4476 tokens) exceeds the \
             available context size (4096 tokens); shorten or compact the history"
        );
        let odd = ModelError::Stream {
            provider_type: None,
            code: None,
            invalid_request: None,
            retryable: false,
            message: "something odd".into(),
        };
        assert_eq!(
            odd.to_string(),
            "the provider reported an error mid-stream (HTTP 200): something odd"
        );
        assert!(!odd.is_retryable());
    }
}
