//! The chat-completions request body: wire types and the builder that turns a
//! [`ModelRequest`] into them.
//!
//! Shape: <https://platform.openai.com/docs/api-reference/chat/create>. Serialization is
//! deterministic: the system message, the few-shot turns and the `tools` array come from
//! the [`StablePrefix`](halo_core::StablePrefix) in its canonical order through fixed-order
//! structs, so they are byte-identical on every request of a session. The history is
//! rendered the same way every time, so request N+1's `messages` start with request N's.
//! The streaming path reuses [`build`] with `stream: true` (and `stream_options.include_usage`).

use std::borrow::Cow;

use halo_core::{
    ContentPart, Message, ModelError, ModelRequest, ResponseFormat, ToolCall, ToolChoice, ToolSpec,
};
use serde::Serialize;
use serde_json::{Map, Value};

use super::config::{Profile, ReasoningReplay};

/// What the request builder needs from the adapter's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestConfig<'a> {
    pub profile: Profile,
    pub model: &'a str,
    pub reasoning_replay: ReasoningReplay,
    pub prompt_cache_key: bool,
    pub extra: &'a Map<String, Value>,
}

/// The request body, in the field order it is written.
#[derive(Debug, Serialize)]
pub(crate) struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<WireResponseFormat<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// `stream_options` of a streaming request.
#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// One message on the wire.
#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: Cow<'a, str>,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        /// Always a string: `""` on tool-call turns (DeepSeek thinking mode needs `""`, not
        /// `null`; OpenAI, vLLM, llama.cpp and Ollama accept it).
        content: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<WirePart<'a>>),
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WirePart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Debug, Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum WireToolChoice<'a> {
    Mode(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        function: NamedFunction<'a>,
    },
    /// `{"type": "allowed_tools", "allowed_tools": {"mode", "tools"}}` (openai-python
    /// `ChatCompletionAllowedToolChoiceParam`).
    AllowedTools {
        #[serde(rename = "type")]
        kind: &'static str,
        allowed_tools: AllowedTools<'a>,
    },
}

#[derive(Debug, Serialize)]
struct NamedFunction<'a> {
    name: &'a str,
}

/// `ChatCompletionAllowedToolsParam`: `mode` `auto` or `required`, and the tools as
/// `{"type": "function", "function": {"name"}}`.
#[derive(Debug, Serialize)]
struct AllowedTools<'a> {
    mode: &'static str,
    tools: Vec<AllowedTool<'a>>,
}

#[derive(Debug, Serialize)]
struct AllowedTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: NamedFunction<'a>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireResponseFormat<'a> {
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat<'a> },
}

#[derive(Debug, Serialize)]
struct JsonSchemaFormat<'a> {
    name: &'static str,
    schema: Cow<'a, Value>,
    strict: bool,
}

/// Builds the body of one chat-completions request.
///
/// Layout of `messages`: the system message (`prefix.system_text()`, omitted when empty),
/// then the few-shot turns, then [`TRIMMED_HISTORY_NOTE`](crate::TRIMMED_HISTORY_NOTE) as a
/// user turn when the history opens with an assistant turn, then the history. `tools` and `tool_choice` are omitted when
/// the prefix has no tools.
///
/// # Errors
/// [`ModelError::Unsupported`] for what the profile cannot send: images and JSON-Schema
/// response formats on DeepSeek.
pub(crate) fn build<'a>(
    cfg: RequestConfig<'a>,
    request: &ModelRequest<'a>,
    stream: bool,
) -> Result<ChatRequest<'a>, ModelError> {
    let prefix = request.prefix;
    let options = request.options;

    let mut messages = Vec::with_capacity(1 + prefix.few_shot().len() + request.history.len());
    let system = prefix.system_text();
    if !system.is_empty() {
        messages.push(WireMessage::System {
            content: Cow::Owned(system),
        });
    }
    for message in prefix.few_shot() {
        messages.push(wire_message(cfg, message)?);
    }
    // A trimmed log can open with an assistant turn (its user message evicted); DeepSeek's
    // reasoner refuses a first non-system message that is not the user's ("The first
    // message (except the system message) of deepseek-reasoner must be a user message"),
    // so every profile puts the same fixed user turn first, as the Anthropic and Gemini
    // adapters do. The same bytes every call: the cache keeps matching.
    if matches!(request.history.first(), Some(Message::Assistant(_))) {
        messages.push(WireMessage::User {
            content: UserContent::Text(crate::TRIMMED_HISTORY_NOTE),
        });
    }
    for message in request.history {
        messages.push(wire_message(cfg, message)?);
    }

    let tools: Vec<WireTool<'a>> = prefix.tools().iter().map(wire_tool).collect();
    let tool_choice = if tools.is_empty() {
        None
    } else {
        Some(tool_choice(cfg.profile, request))
    };

    let response_format = match &options.response_format {
        ResponseFormat::Text => None,
        ResponseFormat::Json { schema: None } => Some(WireResponseFormat::JsonObject),
        ResponseFormat::Json { schema: Some(_) } if cfg.profile == Profile::DeepSeek => {
            return Err(ModelError::Unsupported(
                "deepseek accepts only response_format json_object; use ResponseFormat::Json { schema: None } and describe the schema in the prompt".into(),
            ));
        }
        ResponseFormat::Json {
            schema: Some(schema),
        } => {
            // Strict mode when the schema can be made strict without accepting less
            // (every object closed, every property required, an optional one nullable);
            // otherwise the schema as given, not enforced (the agent validates answers).
            let strict = crate::strict::strict(schema, &crate::strict::OPENAI);
            Some(WireResponseFormat::JsonSchema {
                json_schema: if strict.lossless {
                    JsonSchemaFormat {
                        name: "response",
                        schema: Cow::Owned(strict.schema),
                        strict: true,
                    }
                } else {
                    JsonSchemaFormat {
                        name: "response",
                        schema: Cow::Borrowed(schema),
                        strict: false,
                    }
                },
            })
        }
    };

    // OpenAI names the output limit `max_completion_tokens` (its reasoning models reject
    // `max_tokens`); DeepSeek and the local servers use `max_tokens`.
    let (max_tokens, max_completion_tokens) = match cfg.profile {
        Profile::OpenAi => (None, options.max_tokens),
        _ => (options.max_tokens, None),
    };

    let prompt_cache_key = cfg.prompt_cache_key.then(|| match request.session_id {
        Some(id) => Cow::Borrowed(id),
        None => Cow::Owned(prefix.fingerprint().to_string()),
    });

    Ok(ChatRequest {
        model: cfg.model,
        messages,
        tools,
        tool_choice,
        max_tokens,
        max_completion_tokens,
        temperature: options.temperature,
        seed: options.seed,
        stop: &options.stop,
        response_format,
        prompt_cache_key,
        stream: stream.then_some(true),
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
        extra: cfg.extra,
    })
}

/// `tool_choice` for a request with tools: the choice, restricted to the request's
/// [active tools](halo_core::GenerationOptions::active_tools).
///
/// - `none` and a named function are sent as they are (a named function is a restriction
///   of its own).
/// - `auto` / `required` with active tools: on OpenAI the allowed-tools form
///   (<https://platform.openai.com/docs/api-reference/chat/create#chat-create-tool_choice>,
///   openai-python `ChatCompletionAllowedToolChoiceParam`), so the `tools` array — and the
///   cached prompt — stays byte-identical; the active names that are in the prefix, in its
///   order (all of them active: the plain mode). DeepSeek and other compatible servers document no such form: they get the
///   plain mode, and the agent answers a call of an inactive tool with an error result.
/// - No active tool at all: `none`, whatever the choice.
fn tool_choice<'a>(profile: Profile, request: &ModelRequest<'a>) -> WireToolChoice<'a> {
    let options = request.options;
    let active = options.active_tools.as_deref();
    let mode = match &options.tool_choice {
        ToolChoice::None => return WireToolChoice::Mode("none"),
        ToolChoice::Tool(name) => {
            return WireToolChoice::Function {
                kind: "function",
                function: NamedFunction { name },
            };
        }
        ToolChoice::Auto => "auto",
        ToolChoice::Required => "required",
    };
    let Some(active) = active else {
        return WireToolChoice::Mode(mode);
    };
    let allowed: Vec<AllowedTool<'a>> = request
        .prefix
        .tools()
        .iter()
        .filter(|t| active.contains(&t.name))
        .map(|t| AllowedTool {
            kind: "function",
            function: NamedFunction { name: &t.name },
        })
        .collect();
    if allowed.len() == request.prefix.tools().len() {
        return WireToolChoice::Mode(mode);
    }
    match (allowed.is_empty(), profile) {
        (true, _) => WireToolChoice::Mode("none"),
        (false, Profile::OpenAi) => WireToolChoice::AllowedTools {
            kind: "allowed_tools",
            allowed_tools: AllowedTools {
                mode,
                tools: allowed,
            },
        },
        (false, _) => WireToolChoice::Mode(mode),
    }
}

fn wire_tool(spec: &ToolSpec) -> WireTool<'_> {
    WireTool {
        kind: "function",
        function: WireFunction {
            name: &spec.name,
            description: &spec.description,
            parameters: &spec.parameters,
        },
    }
}

fn wire_message<'a>(
    cfg: RequestConfig<'a>,
    message: &'a Message,
) -> Result<WireMessage<'a>, ModelError> {
    Ok(match message {
        Message::System { content } => WireMessage::System {
            content: Cow::Borrowed(content),
        },
        Message::User { content } => WireMessage::User {
            content: user_content(cfg.profile, content)?,
        },
        Message::Assistant(a) => {
            let reasoning = a.reasoning_text();
            let reasoning_content = match cfg.reasoning_replay {
                ReasoningReplay::Never => None,
                ReasoningReplay::WhenPresent => reasoning.map(Cow::Owned),
                ReasoningReplay::EveryAssistantMessage => {
                    Some(Cow::Owned(reasoning.unwrap_or_default()))
                }
            };
            WireMessage::Assistant {
                content: &a.text,
                reasoning_content,
                tool_calls: a.tool_calls.iter().map(wire_tool_call).collect(),
            }
        }
        Message::Tool(result) => WireMessage::Tool {
            tool_call_id: &result.tool_call_id,
            content: &result.content,
        },
    })
}

fn wire_tool_call(call: &ToolCall) -> WireToolCall<'_> {
    WireToolCall {
        id: &call.id,
        kind: "function",
        function: WireFunctionCall {
            name: &call.name,
            arguments: call.replay_arguments(),
        },
    }
}

/// One text part goes as a plain string (what every compatible server accepts); anything
/// else as an array of `text` and `image_url` parts.
fn user_content(profile: Profile, parts: &[ContentPart]) -> Result<UserContent<'_>, ModelError> {
    match parts {
        [] => return Ok(UserContent::Text("")),
        [ContentPart::Text { text }] => return Ok(UserContent::Text(text)),
        _ => {}
    }
    parts
        .iter()
        .map(|part| match part {
            ContentPart::Text { text } => Ok(WirePart::Text { text }),
            ContentPart::Image { .. } if profile == Profile::DeepSeek => {
                Err(ModelError::Unsupported(
                    "deepseek's chat completions API takes no images; describe the image in text or use a vision model"
                        .into(),
                ))
            }
            ContentPart::Image { media_type, data } => Ok(WirePart::ImageUrl {
                image_url: ImageUrl {
                    url: format!("data:{media_type};base64,{data}"),
                },
            }),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(UserContent::Parts)
}
