//! The `POST /v1/responses` body: wire types and the mapping from a [`ModelRequest`].
//!
//! Shape: <https://platform.openai.com/docs/api-reference/responses/create> (openai-python
//! `response_create_params.py`, `response_input_item_param.py`). The mapping:
//! - `input`: the prefix's system text as a `system` message of one `input_text`, its
//!   few-shot turns, then the history: user turns as `message` items (`input_text`,
//!   `input_image` with a data URL), tool results as `function_call_output` items, and an
//!   assistant turn as the provider items it came with, verbatim and in their order
//!   (`reasoning` items with their `encrypted_content`, the `message` item with its id),
//!   its tool calls as `function_call` items (their `fc_…` id kept, arguments as the log
//!   holds them, repairs included) at their place among them. An assistant turn from
//!   another provider is a `message` with its text and its calls; its reasoning cannot be
//!   replayed and is left out.
//! - `tools`: the prefix's tools in their canonical order, flat (`{"type": "function",
//!   "name", "description", "parameters", "strict": false}`): the API's default is strict,
//!   which most JSON Schemas do not meet.
//! - `tool_choice`, `text.format` (JSON outputs), `reasoning`, `max_output_tokens`,
//!   `temperature`; `seed` and `stop` are not sent (the API has neither).
//! - `store: false` and `include: ["reasoning.encrypted_content"]` (stateless replay), or
//!   `store: true` and `previous_response_id` when chaining.
//! - `prompt_cache_key`, and `prompt_cache_options` with the planner's breakpoints.
//!
//! The same history always gives the same bytes (the markers of explicit caching aside,
//! which move to the newest block), so the prefix rule of the prompt cache holds.

use std::borrow::Cow;

use halo_core::{
    AssistantMessage, ContentPart, Message, ModelError, ModelRequest, ResponseFormat, ToolCall,
    ToolChoice, ToolResult,
};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::TRIMMED_HISTORY_NOTE;
use crate::openai::PromptCacheMode;
use crate::openai::cache::{BREAKPOINT, Breakpoint, PromptCacheOptions, plan_breakpoints};

use super::item::{call_item, opaque_item};

/// What the body needs from the adapter's configuration and the call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestConfig<'a> {
    pub model: &'a str,
    pub encrypted_reasoning: bool,
    pub reasoning_summary: Option<&'a str>,
    pub prompt_cache_key: bool,
    pub prompt_cache: PromptCacheMode,
    pub min_cacheable_tokens: u64,
    pub extra: &'a Map<String, Value>,
    /// `previous_response_id` to chain to, and how many leading history messages the
    /// server already holds through it.
    pub chained: Option<(&'a str, usize)>,
    /// Chaining is on: `store: true`.
    pub store: bool,
}

#[derive(Debug, Serialize)]
struct Body<'a> {
    model: &'a str,
    input: Vec<Item<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_response_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<TextConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    store: bool,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    include: &'static [&'static str],
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_options: Option<PromptCacheOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// One `input` item: a provider item replayed verbatim, or one the adapter writes.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Item<'a> {
    Raw(&'a RawValue),
    Message(WireMessage<'a>),
    AssistantText(AssistantText<'a>),
    FunctionCall(FunctionCall<'a>),
    FunctionCallOutput(FunctionCallOutput<'a>),
}

#[derive(Debug, Serialize)]
pub(crate) struct WireMessage<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: Vec<Part<'a>>,
}

/// An assistant text from another provider (or a few-shot turn): the easy input form.
#[derive(Debug, Serialize)]
pub(crate) struct AssistantText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Part<'a> {
    InputText {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        prompt_cache_breakpoint: Option<Breakpoint>,
    },
    InputImage {
        image_url: String,
        detail: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        prompt_cache_breakpoint: Option<Breakpoint>,
    },
}

impl Part<'_> {
    fn mark(&mut self) {
        match self {
            Part::InputText {
                prompt_cache_breakpoint,
                ..
            }
            | Part::InputImage {
                prompt_cache_breakpoint,
                ..
            } => *prompt_cache_breakpoint = Some(BREAKPOINT),
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct FunctionCall<'a> {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<&'a str>,
    pub(crate) call_id: &'a str,
    pub(crate) name: &'a str,
    pub(crate) arguments: &'a str,
}

#[derive(Debug, Serialize)]
pub(crate) struct FunctionCallOutput<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    call_id: &'a str,
    output: Output<'a>,
}

/// A tool result's `output`: its text, or one `input_text` part when it carries a cache
/// breakpoint (a string cannot).
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Output<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    strict: bool,
}

#[derive(Debug, Serialize)]
struct TextConfig<'a> {
    format: TextFormat<'a>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum TextFormat<'a> {
    JsonObject,
    JsonSchema {
        name: &'static str,
        schema: Cow<'a, Value>,
        strict: bool,
    },
}

/// One history message as input items, appended to `out`; `mark` puts a cache breakpoint
/// on its last block (system, user and tool messages only).
fn push_message<'a>(
    out: &mut Vec<Item<'a>>,
    message: &'a Message,
    mark: bool,
) -> Result<(), ModelError> {
    match message {
        Message::System { content } => out.push(Item::Message(marked(
            "system",
            vec![Part::InputText {
                text: content,
                prompt_cache_breakpoint: None,
            }],
            mark,
        ))),
        Message::User { content } => {
            out.push(Item::Message(marked("user", user_parts(content), mark)));
        }
        Message::Assistant(a) => push_assistant(out, a)?,
        Message::Tool(result) => out.push(Item::FunctionCallOutput(output(result, mark))),
    }
    Ok(())
}

fn marked<'a>(role: &'static str, mut content: Vec<Part<'a>>, mark: bool) -> WireMessage<'a> {
    if mark && let Some(last) = content.last_mut() {
        last.mark();
    }
    WireMessage {
        kind: "message",
        role,
        content,
    }
}

fn user_parts(parts: &[ContentPart]) -> Vec<Part<'_>> {
    if parts.is_empty() {
        return vec![Part::InputText {
            text: "",
            prompt_cache_breakpoint: None,
        }];
    }
    parts
        .iter()
        .map(|part| match part {
            ContentPart::Text { text } => Part::InputText {
                text,
                prompt_cache_breakpoint: None,
            },
            ContentPart::Image { media_type, data } => Part::InputImage {
                image_url: format!("data:{media_type};base64,{data}"),
                detail: "auto",
                prompt_cache_breakpoint: None,
            },
        })
        .collect()
}

fn output(result: &ToolResult, mark: bool) -> FunctionCallOutput<'_> {
    let output = if mark {
        Output::Parts(vec![Part::InputText {
            text: &result.content,
            prompt_cache_breakpoint: Some(BREAKPOINT),
        }])
    } else {
        Output::Text(&result.content)
    };
    FunctionCallOutput {
        kind: "function_call_output",
        call_id: &result.tool_call_id,
        output,
    }
}

/// An assistant turn's items: the provider items it came with (reasoning, the message) and
/// its calls, in the order of the original output; a turn with no such items (another
/// provider's, a few-shot one) is its text as a message, then its calls.
///
/// # Errors
/// [`ModelError::Other`] for a stored item that is no longer JSON (a log edited by hand).
fn push_assistant<'a>(out: &mut Vec<Item<'a>>, a: &'a AssistantMessage) -> Result<(), ModelError> {
    let mut items: Vec<(usize, usize, Item<'a>)> = Vec::new();
    let mut message_replayed = false;
    for (i, reasoning) in a.reasoning.iter().enumerate() {
        if let Some((index, kind, raw)) = reasoning.signature.as_deref().and_then(opaque_item) {
            let raw: &RawValue = serde_json::from_str(raw).map_err(|e| {
                ModelError::Other(format!(
                    "a stored Responses item of the history is not JSON ({e}); the log was edited"
                ))
            })?;
            message_replayed |= kind == "message";
            items.push((index, i, Item::Raw(raw)));
        }
    }
    if !message_replayed && !a.text.is_empty() {
        // Before the calls, as a model writes text before calling.
        items.push((usize::MAX - 1, 0, assistant_text(&a.text)));
    }
    for (i, call) in a.tool_calls.iter().enumerate() {
        let (id, index) = call_item(call);
        items.push((index.unwrap_or(usize::MAX), i, function_call(call, id)));
    }
    items.sort_by_key(|(index, order, _)| (*index, *order));
    out.extend(items.into_iter().map(|(_, _, item)| item));
    Ok(())
}

fn assistant_text(text: &str) -> Item<'_> {
    Item::AssistantText(AssistantText {
        kind: "message",
        role: "assistant",
        content: text,
    })
}

fn function_call<'a>(call: &'a ToolCall, id: Option<&'a str>) -> Item<'a> {
    Item::FunctionCall(FunctionCall {
        kind: "function_call",
        id,
        call_id: &call.id,
        name: &call.name,
        arguments: call.replay_arguments(),
    })
}

/// The serialized body of `request`.
///
/// # Errors
/// [`ModelError::Other`] for a history item that cannot be replayed, or a body that
/// cannot be serialized.
pub(crate) fn build(
    cfg: RequestConfig<'_>,
    request: &ModelRequest<'_>,
    stream: bool,
) -> Result<Vec<u8>, ModelError> {
    let options = request.options;
    let prefix = request.prefix;
    let (previous_response_id, skip) = match cfg.chained {
        Some((id, skip)) if skip <= request.history.len() => (Some(id), skip),
        _ => (None, 0),
    };
    let history = &request.history[skip..];
    let plan = plan_breakpoints(cfg.prompt_cache, prefix, history, cfg.min_cacheable_tokens);

    let mut input: Vec<Item<'_>> = Vec::new();
    let system = if prefix.skills().is_empty() {
        Cow::Borrowed(prefix.system())
    } else {
        Cow::Owned(prefix.system_text())
    };
    if previous_response_id.is_none() {
        // The prefix's last eligible message carries its breakpoint.
        let last_eligible = prefix
            .few_shot()
            .iter()
            .rposition(crate::openai::cache::eligible);
        if !system.is_empty() {
            input.push(Item::Message(marked(
                "system",
                vec![Part::InputText {
                    text: system_text(&system),
                    prompt_cache_breakpoint: None,
                }],
                plan.prefix && last_eligible.is_none(),
            )));
        }
        for (i, message) in prefix.few_shot().iter().enumerate() {
            push_message(&mut input, message, plan.prefix && last_eligible == Some(i))?;
        }
        if matches!(history.first(), Some(Message::Assistant(_))) {
            input.push(Item::Message(WireMessage {
                kind: "message",
                role: "user",
                content: vec![Part::InputText {
                    text: TRIMMED_HISTORY_NOTE,
                    prompt_cache_breakpoint: None,
                }],
            }));
        }
    }
    for (i, message) in history.iter().enumerate() {
        push_message(&mut input, message, plan.newest == Some(i))?;
    }

    let tools: Vec<WireTool<'_>> = prefix
        .tools()
        .iter()
        .map(|spec| WireTool {
            kind: "function",
            name: &spec.name,
            description: &spec.description,
            parameters: &spec.parameters,
            strict: false,
        })
        .collect();
    let tool_choice = (!tools.is_empty()).then(|| tool_choice(request));
    let text = match &options.response_format {
        ResponseFormat::Text => None,
        ResponseFormat::Json { schema: None } => Some(TextConfig {
            format: TextFormat::JsonObject,
        }),
        ResponseFormat::Json {
            schema: Some(schema),
        } => {
            let strict = crate::strict::strict(schema, &crate::strict::OPENAI);
            Some(TextConfig {
                format: if strict.lossless {
                    TextFormat::JsonSchema {
                        name: "response",
                        schema: Cow::Owned(strict.schema),
                        strict: true,
                    }
                } else {
                    TextFormat::JsonSchema {
                        name: "response",
                        schema: Cow::Borrowed(schema),
                        strict: false,
                    }
                },
            })
        }
    };
    // A `reasoning` object among the extra body fields is the provider's own value: it is
    // sent as given, in place of the portable one.
    let reasoning = if cfg.extra.contains_key("reasoning") {
        None
    } else {
        let mut reasoning = Map::new();
        if let Some(effort) = options.reasoning {
            reasoning.insert("effort".into(), Value::from(effort.as_str()));
        }
        if let Some(summary) = cfg.reasoning_summary {
            reasoning.insert("summary".into(), Value::from(summary));
        }
        (!reasoning.is_empty()).then_some(reasoning)
    };
    let include: &'static [&'static str] = if cfg.encrypted_reasoning && !cfg.store {
        &["reasoning.encrypted_content"]
    } else {
        &[]
    };
    let prompt_cache_key = cfg.prompt_cache_key.then(|| match request.session_id {
        Some(id) => Cow::Borrowed(id),
        None => Cow::Owned(prefix.fingerprint().to_string()),
    });
    let body = Body {
        model: cfg.model,
        input,
        previous_response_id,
        tools,
        tool_choice,
        text,
        reasoning,
        max_output_tokens: options.max_tokens,
        temperature: options.temperature,
        store: cfg.store,
        include,
        prompt_cache_key,
        prompt_cache_options: cfg.prompt_cache.options(),
        stream: stream.then_some(true),
        extra: cfg.extra,
    };
    serde_json::to_vec(&body)
        .map_err(|e| ModelError::Other(format!("cannot serialize the request body: {e}")))
}

/// The system text, borrowed from the prefix.
fn system_text<'a>(system: &'a Cow<'a, str>) -> &'a str {
    system
}

/// `tool_choice` for a request with tools, restricted to the request's active tools as the
/// chat-completions dialect does (`allowed_tools` keeps `tools` byte-identical).
fn tool_choice(request: &ModelRequest<'_>) -> Value {
    let options = request.options;
    let mode = match &options.tool_choice {
        ToolChoice::None => return Value::from("none"),
        ToolChoice::Tool(name) => {
            return serde_json::json!({"type": "function", "name": name});
        }
        ToolChoice::Auto => "auto",
        ToolChoice::Required => "required",
    };
    let Some(active) = options.active_tools.as_deref() else {
        return Value::from(mode);
    };
    let allowed: Vec<Value> = request
        .prefix
        .tools()
        .iter()
        .filter(|t| active.contains(&t.name))
        .map(|t| serde_json::json!({"type": "function", "name": t.name}))
        .collect();
    if allowed.len() == request.prefix.tools().len() {
        Value::from(mode)
    } else if allowed.is_empty() {
        Value::from("none")
    } else {
        serde_json::json!({"type": "allowed_tools", "mode": mode, "tools": allowed})
    }
}
