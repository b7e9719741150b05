//! The Messages request body: wire types, the mapping from a [`ModelRequest`], and the
//! placement of `cache_control` markers.
//!
//! Shape: <https://platform.claude.com/docs/en/api/messages>, tool results:
//! <https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls>. The
//! mapping:
//! - `tools`: the prefix's tool specs in their canonical order, with `input_schema`.
//! - `system`: one text block with the prefix's system text (skill catalog included), then
//!   one text block per `System` message among the few-shot turns. Empty texts are left out
//!   (the API rejects empty text blocks).
//! - `messages`: the few-shot turns, then the history. Anthropic has only `user` and
//!   `assistant` roles and expects them to alternate, so:
//!   - consecutive messages of one role are merged into one message (blocks in order);
//!   - each run of tool results becomes `tool_result` blocks in the user message that
//!     follows the assistant turn, in the order of that turn's calls, `is_error: true`
//!     passed through; within a user message tool results always come first (the API
//!     requires it);
//!   - a `System` message inside the history is sent as a user text block, so the top-level
//!     `system` never depends on the history;
//!   - a history that opens with an assistant turn (a bounded log evicted the user's turn
//!     from the front) gets one user text block [`TRIMMED_HISTORY_NOTE`] before it: the
//!     first message must use the `user` role (`messages: first message must use the
//!     "user" role`, HTTP 400 on Amazon Bedrock, and on the first-party API as reported
//!     until late 2024), and the model learns why the conversation starts mid-way. The
//!     text is fixed, so the same history gives the same bytes on every call.
//! - An assistant turn: its reasoning blocks first, replayed verbatim (`thinking` with its
//!   `signature`; a [`REDACTED_THINKING_PREFIX`] signature as `redacted_thinking`), then its
//!   text, then one `tool_use` block per call with `input` parsed from the raw argument
//!   string. Reasoning without a signature (from another provider) cannot be verified by
//!   Anthropic and is left out, as are OpenAI Responses items kept as reasoning
//!   ([`is_responses_item`](crate::responses::is_responses_item)). A turn left with only thinking, or with nothing, is not sent:
//!   the API rejects an assistant message without text or tool use after its thinking, and
//!   an unsigned or text-less turn carries nothing the model needs.
//! - [`GenerationOptions::reasoning`](halo_core::GenerationOptions) becomes `thinking:
//!   {"type": "enabled", "budget_tokens": N}` (a level's budget from
//!   [`ReasoningEffort::budget_tokens`](halo_core::ReasoningEffort::budget_tokens), at least
//!   [`MIN_THINKING_BUDGET`]), with `max_tokens` raised above the budget when needed; a
//!   `thinking` body field wins.
//! - Arguments that are not a JSON object (a model's broken JSON) are sent as
//!   `{"_raw_arguments": "<the string>"}` so nothing is lost and the API accepts the turn.
//!
//! The same history always gives the same bytes, and a request's blocks start with the
//! previous request's blocks, so the prefix rule of the prompt cache holds.

use std::borrow::Cow;
use std::io;

use halo_core::{
    ContentPart, Message, ModelError, ModelRequest, ResponseFormat, ToolCall, ToolChoice,
};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::TRIMMED_HISTORY_NOTE;

use super::cache::{
    BlockLayout, BreakpointPolicy, CacheMode, CacheTtl, estimate_tokens, plan_breakpoints,
};

/// The signature prefix that marks a [`Reasoning`](halo_core::Reasoning) holding an
/// Anthropic `redacted_thinking` block: the text is empty and the signature is this prefix
/// followed by the block's opaque `data`.
pub const REDACTED_THINKING_PREFIX: &str = "redacted_thinking:";

/// The key that carries a tool call's argument string when it is not a JSON object.
pub const RAW_ARGUMENTS_KEY: &str = "_raw_arguments";

/// What the request builder needs from the adapter's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestConfig<'a> {
    pub model: &'a str,
    pub max_tokens: u32,
    pub cache_mode: CacheMode,
    pub min_cacheable_tokens: u64,
    pub extra: &'a Map<String, Value>,
}

/// The request body, in the field order it is written (tools, system, messages: the order
/// the prompt cache reads them in).
#[derive(Debug, Serialize)]
pub(crate) struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Block<'a>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<Value>,
    /// Extended thinking from [`GenerationOptions::reasoning`](halo_core::GenerationOptions).
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Value>,
    /// Automatic caching.
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// `{"type": "ephemeral"}`, with `"ttl": "1h"` for the one-hour TTL (`5m` is the default
/// and is not written).
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

impl CacheControl {
    fn new(ttl: CacheTtl) -> Self {
        CacheControl {
            kind: "ephemeral",
            ttl: (ttl == CacheTtl::OneHour).then_some(ttl.as_str()),
        }
    }
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Debug, Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

/// One content block.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: ImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

impl Block<'_> {
    /// Sets the block's marker; thinking blocks cannot carry one (`false`).
    fn mark(&mut self, marker: CacheControl) -> bool {
        match self {
            Block::Text { cache_control, .. }
            | Block::Image { cache_control, .. }
            | Block::ToolUse { cache_control, .. }
            | Block::ToolResult { cache_control, .. } => {
                *cache_control = Some(marker);
                true
            }
            Block::Thinking { .. } | Block::RedactedThinking { .. } => false,
        }
    }

    fn is_tool_result(&self) -> bool {
        matches!(self, Block::ToolResult { .. })
    }
}

#[derive(Debug, Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

/// Messages being assembled: consecutive blocks of one role share a message.
#[derive(Default)]
struct Builder<'a> {
    messages: Vec<WireMessage<'a>>,
    /// Per message, how many of its leading blocks came from the few-shot turns.
    from_prefix: Vec<usize>,
    /// Whether a block of the history (after the few-shot turns) was pushed.
    history_opened: bool,
}

impl<'a> Builder<'a> {
    /// Appends `block` (from the few-shot turns when `prefix`). When the history opens with
    /// an assistant block (its front was trimmed), the [`TRIMMED_HISTORY_NOTE`] user block
    /// goes first, so the first message is a user one and a trimmed history always renders
    /// to the same bytes.
    fn push(&mut self, role: &'static str, block: Block<'a>, prefix: bool) {
        if !prefix && !self.history_opened {
            self.history_opened = true;
            if role == "assistant" {
                self.append(
                    "user",
                    text_block(Cow::Borrowed(TRIMMED_HISTORY_NOTE)),
                    false,
                );
            }
        }
        self.append(role, block, prefix);
    }

    fn append(&mut self, role: &'static str, block: Block<'a>, prefix: bool) {
        match self.messages.last_mut() {
            Some(last) if last.role == role => last.content.push(block),
            _ => {
                self.messages.push(WireMessage {
                    role,
                    content: vec![block],
                });
                self.from_prefix.push(0);
            }
        }
        if prefix && let Some(n) = self.from_prefix.last_mut() {
            *n += 1;
        }
    }
}

/// Builds the body of one request, with the cache markers of `cfg.cache_mode`.
///
/// # Errors
/// [`ModelError::Unsupported`] for a request with no message to send, or a JSON response
/// format without a schema (Anthropic's structured outputs need one).
pub(crate) fn build<'a>(
    cfg: RequestConfig<'a>,
    request: &ModelRequest<'a>,
    stream: bool,
) -> Result<MessagesRequest<'a>, ModelError> {
    let prefix = request.prefix;
    let mut tools: Vec<WireTool<'a>> = prefix
        .tools()
        .iter()
        .map(|t| WireTool {
            name: &t.name,
            description: &t.description,
            input_schema: &t.parameters,
            cache_control: None,
        })
        .collect();

    let mut system = Vec::new();
    let system_text = prefix.system_text();
    if !system_text.is_empty() {
        system.push(text_block(Cow::Owned(system_text)));
    }
    let mut builder = Builder::default();
    let few_shot = prefix.few_shot();
    let mut last_calls: &'a [ToolCall] = &[];
    let mut pending_results: Vec<(&'a halo_core::ToolResult, bool)> = Vec::new();
    let all = few_shot
        .iter()
        .map(|m| (m, true))
        .chain(request.history.iter().map(|m| (m, false)));
    for (message, from_prefix) in all {
        if !matches!(message, Message::Tool(_)) {
            flush_results(&mut builder, &mut pending_results, last_calls);
        }
        match message {
            Message::System { content } if from_prefix => {
                if !content.is_empty() {
                    system.push(text_block(Cow::Borrowed(content)));
                }
            }
            Message::System { content } => {
                if !content.is_empty() {
                    builder.push("user", text_block(Cow::Borrowed(content)), false);
                }
            }
            Message::User { content } => {
                for part in content {
                    if let Some(block) = user_block(part) {
                        builder.push("user", block, from_prefix);
                    }
                }
            }
            Message::Assistant(a) => {
                last_calls = &a.tool_calls;
                let mut blocks: Vec<Block<'a>> = Vec::new();
                // Unsigned reasoning (another provider's) is left out, and so are the
                // Responses API's items (their signature is not Anthropic's).
                for r in &a.reasoning {
                    let Some(sig) = r
                        .signature
                        .as_deref()
                        .filter(|s| !crate::responses::is_responses_item(s))
                    else {
                        continue;
                    };
                    blocks.push(match sig.strip_prefix(REDACTED_THINKING_PREFIX) {
                        Some(data) => Block::RedactedThinking { data },
                        None => Block::Thinking {
                            thinking: &r.text,
                            signature: sig,
                        },
                    });
                }
                let thinking = blocks.len();
                if !a.text.is_empty() {
                    blocks.push(text_block(Cow::Borrowed(&a.text)));
                }
                for call in &a.tool_calls {
                    blocks.push(Block::ToolUse {
                        id: &call.id,
                        name: &call.name,
                        input: tool_input(call),
                        cache_control: None,
                    });
                }
                if blocks.len() > thinking {
                    for block in blocks {
                        builder.push("assistant", block, from_prefix);
                    }
                }
            }
            Message::Tool(result) => pending_results.push((result, from_prefix)),
        }
    }
    flush_results(&mut builder, &mut pending_results, last_calls);

    let Builder {
        mut messages,
        from_prefix,
        ..
    } = builder;
    if messages.is_empty() {
        return Err(ModelError::Unsupported(
            "the Anthropic Messages API needs at least one message; add a user message".into(),
        ));
    }
    // Tool results first within each user message (the API requires it); a stable
    // partition keeps their call order and the order of everything else.
    for m in messages.iter_mut().filter(|m| m.role == "user") {
        if m.content
            .iter()
            .skip_while(|b| b.is_tool_result())
            .any(Block::is_tool_result)
        {
            let (results, rest): (Vec<_>, Vec<_>) =
                m.content.drain(..).partition(Block::is_tool_result);
            m.content = results.into_iter().chain(rest).collect();
        }
    }

    let options = request.options;
    let mut cache_control = None;
    match cfg.cache_mode {
        CacheMode::Breakpoints {
            prefix_ttl,
            history_ttl,
        } => {
            let policy = BreakpointPolicy::new(prefix_ttl, history_ttl, cfg.min_cacheable_tokens);
            place_breakpoints(
                &mut tools,
                &mut system,
                &mut messages,
                &from_prefix,
                &policy,
            );
        }
        CacheMode::Automatic { ttl } => cache_control = Some(CacheControl::new(ttl)),
        CacheMode::Off => {}
    }

    // Anthropic has no allowed-tools mechanism: active tools narrow nothing on the wire
    // (the `tools` array stays as it is, for the cache); the agent answers a call of an
    // inactive tool with an error result. No active tool at all is `none`.
    let no_active_tool = options
        .active_tools
        .as_ref()
        .is_some_and(|a| !request.prefix.tools().iter().any(|t| a.contains(&t.name)));
    let tool_choice = if tools.is_empty() {
        None
    } else {
        match &options.tool_choice {
            ToolChoice::Tool(name) => Some(json!({"type": "tool", "name": name})),
            ToolChoice::None => Some(json!({"type": "none"})),
            _ if no_active_tool => Some(json!({"type": "none"})),
            ToolChoice::Auto => None,
            ToolChoice::Required => Some(json!({"type": "any"})),
        }
    };
    let output_config = match &options.response_format {
        ResponseFormat::Text => None,
        // JSON outputs (<https://platform.claude.com/docs/en/build-with-claude/structured-outputs>):
        // the schema closed (`additionalProperties: false`) and without the keywords the
        // grammar does not take, which go into descriptions (the agent still validates
        // answers against the full schema).
        ResponseFormat::Json {
            schema: Some(schema),
        } => {
            let schema = crate::strict::strict(schema, &crate::strict::ANTHROPIC).schema;
            Some(json!({"format": {"type": "json_schema", "schema": schema}}))
        }
        ResponseFormat::Json { schema: None } => {
            return Err(ModelError::Unsupported(
                "anthropic's structured outputs need a JSON Schema; give one, or ask for JSON in the prompt"
                    .into(),
            ));
        }
    };

    // The portable reasoning setting as extended thinking, unless a `thinking` body field
    // (the provider's own value) is set. `max_tokens` must exceed the budget: it is raised
    // to the budget plus the usual limit when it would not.
    let mut max_tokens = options.max_tokens.unwrap_or(cfg.max_tokens);
    let thinking = match options.reasoning {
        Some(effort) if !cfg.extra.contains_key("thinking") => {
            let budget = effort.budget_tokens().max(MIN_THINKING_BUDGET);
            if max_tokens <= budget {
                max_tokens = budget.saturating_add(cfg.max_tokens);
            }
            Some(json!({"type": "enabled", "budget_tokens": budget}))
        }
        _ => None,
    };

    Ok(MessagesRequest {
        model: cfg.model,
        max_tokens,
        tools,
        tool_choice,
        system,
        messages,
        temperature: options.temperature,
        stop_sequences: &options.stop,
        output_config,
        thinking,
        cache_control,
        stream: stream.then_some(true),
        extra: cfg.extra,
    })
}

/// The smallest `thinking.budget_tokens` Anthropic accepts
/// (<https://platform.claude.com/docs/en/build-with-claude/extended-thinking>).
pub const MIN_THINKING_BUDGET: u32 = 1024;

fn text_block(text: Cow<'_, str>) -> Block<'_> {
    Block::Text {
        text,
        cache_control: None,
    }
}

fn user_block(part: &ContentPart) -> Option<Block<'_>> {
    match part {
        ContentPart::Text { text } if text.is_empty() => None,
        ContentPart::Text { text } => Some(text_block(Cow::Borrowed(text))),
        ContentPart::Image { media_type, data } => Some(Block::Image {
            source: ImageSource {
                kind: "base64",
                media_type,
                data,
            },
            cache_control: None,
        }),
    }
}

/// The `tool_use` input: the parsed arguments when they are a JSON object, else the raw
/// string under [`RAW_ARGUMENTS_KEY`].
fn tool_input(call: &ToolCall) -> Value {
    match call.arguments() {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({ RAW_ARGUMENTS_KEY: call.raw_arguments }),
    }
}

/// Emits the pending tool results as `tool_result` blocks of a user message, in the order
/// of `calls` (results for unknown ids keep their order, after the known ones).
fn flush_results<'a>(
    builder: &mut Builder<'a>,
    pending: &mut Vec<(&'a halo_core::ToolResult, bool)>,
    calls: &[ToolCall],
) {
    if pending.is_empty() {
        return;
    }
    pending.sort_by_key(|(r, _)| {
        calls
            .iter()
            .position(|c| c.id == r.tool_call_id)
            .unwrap_or(usize::MAX)
    });
    for (result, from_prefix) in pending.drain(..) {
        let block = Block::ToolResult {
            tool_use_id: &result.tool_call_id,
            content: &result.content,
            is_error: result.is_error,
            cache_control: None,
        };
        builder.push("user", block, from_prefix);
    }
}

/// Where a block of the linear order lives.
#[derive(Clone, Copy)]
enum Slot {
    Tool(usize),
    System(usize),
    Message(usize, usize),
}

/// Plans and sets the breakpoints: linearizes tools → system → messages, estimates each
/// block's tokens from its serialized size, and marks the planned blocks.
fn place_breakpoints(
    tools: &mut [WireTool<'_>],
    system: &mut [Block<'_>],
    messages: &mut [WireMessage<'_>],
    from_prefix: &[usize],
    policy: &BreakpointPolicy,
) {
    let mut slots = Vec::new();
    let mut tokens = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        slots.push(Slot::Tool(i));
        tokens.push(estimate_tokens(serialized_len(tool)));
    }
    for (i, block) in system.iter().enumerate() {
        slots.push(Slot::System(i));
        tokens.push(estimate_tokens(serialized_len(block)));
    }
    let mut prefix_end = slots.len().checked_sub(1);
    let mut turn_ends = Vec::new();
    for (m, message) in messages.iter().enumerate() {
        for (b, block) in message.content.iter().enumerate() {
            if b < from_prefix[m] {
                prefix_end = Some(slots.len());
            }
            slots.push(Slot::Message(m, b));
            tokens.push(estimate_tokens(serialized_len(block)));
        }
        if message.role == "user" {
            turn_ends.push(slots.len() - 1);
        }
    }
    let layout = BlockLayout {
        tokens: &tokens,
        prefix_end,
        turn_ends: &turn_ends,
    };
    for bp in plan_breakpoints(&layout, policy) {
        let marker = CacheControl::new(bp.ttl);
        match slots[bp.block] {
            Slot::Tool(i) => tools[i].cache_control = Some(marker),
            Slot::System(i) => {
                system[i].mark(marker);
            }
            Slot::Message(m, b) => {
                // Never a thinking block: those always precede a text or tool_use block
                // of their turn, so no message ends with one.
                messages[m].content[b].mark(marker);
            }
        }
    }
}

/// The number of bytes `value` serializes to.
fn serialized_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and these types always serialize.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}
