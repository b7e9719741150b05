//! The `generateContent` and `cachedContents` request bodies: wire types and the builder
//! that turns a [`ModelRequest`] into them.
//!
//! Shapes: <https://ai.google.dev/api/generate-content#request-body> and
//! <https://ai.google.dev/api/caching#CachedContent>. Serialization is deterministic
//! (fixed-order structs, tools in the prefix's canonical order, schemas through
//! [`sanitize_schema`]), so the prefix part is byte-identical on every request and the
//! history is rendered the same way every time: request N+1's `contents` start with
//! request N's.
//!
//! Mapping:
//! - The prefix's system text → `systemInstruction`; its tools → one
//!   `tools[{functionDeclarations}]` entry; a tool choice other than auto → `toolConfig`;
//!   its few-shot turns → the first `contents`. With a cached content all four live in the
//!   `cachedContents` object ([`Prefix`]) and the request names it in `cachedContent`.
//! - User turns → `user` contents (`text`, images as `inlineData`); system messages inside
//!   the history → `user` text (Gemini has no system role in `contents`).
//! - Assistant turns → `model` contents whose parts replay what the model sent: thought
//!   parts (`thought: true`, with their `thoughtSignature`), then the text part (with the
//!   text part's signature), then one `functionCall` part per call (with its signature and,
//!   when the API gave one, its `id`). Ids Halo made up for id-less calls are never sent.
//! - Consecutive tool results → one `user` content of `functionResponse` parts in the order
//!   of the calls they answer, each `{name, response: {"result": text}}` (`{"error": text}`
//!   for a failed call): `response` must be an object.
//! - A `user` content with the fixed text [`TRIMMED_HISTORY_NOTE`] goes before a history
//!   that opens with a `model` content (a bounded log evicted the user's turn from the
//!   front), and before a `model` content with a function call that follows another `model`
//!   content: Gemini answers 400 `Please ensure that function call turn comes immediately
//!   after a user turn or after a function response turn.` otherwise. The note is part of
//!   the history, never of the cached prefix, and the same history always gets it in the
//!   same places.
//! - Empty text is never sent as a part: Gemini rejects `{"text": ""}` with 400 `required
//!   oneof field 'data' must have one initialized field`. The one exception is the empty
//!   text part that carries a `thoughtSignature` (Gemini sends it so and wants it back). A
//!   user, system or assistant turn left with no parts is skipped, as the Anthropic adapter
//!   drops an empty assistant turn; turns with function calls or responses always have
//!   parts, so call/response pairing is unchanged.

use halo_core::{
    ContentPart, Message, ModelRequest, ResponseFormat, StablePrefix, ToolCall, ToolChoice,
    ToolResult,
};
use serde::Serialize;
use serde_json::{Map, Value};

use super::schema::sanitize_schema;
use crate::TRIMMED_HISTORY_NOTE;

/// `ToolCall::provider_data` key holding the `thoughtSignature` of the call's part.
pub(crate) const SIGNATURE_KEY: &str = "thoughtSignature";
/// `ToolCall::provider_data` key holding the `functionCall.id` the API sent, if it sent one.
pub(crate) const CALL_ID_KEY: &str = "functionCallId";

/// What the request builder needs from the adapter's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestConfig {
    pub thinking_budget: Option<i64>,
    pub include_thoughts: bool,
}

/// The `generateContent` body, in the order it is written.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GenerateRequest<'a> {
    contents: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Content>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_config: Option<GenerationConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cached_content: Option<&'a str>,
}

/// The part of a request that can live in a `cachedContents` object: everything the
/// stable prefix (and the tool choice) decides.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Prefix {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contents: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<Content>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<WireTool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<ToolConfig>,
}

/// The `POST cachedContents` body.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CreateCachedContent<'a> {
    pub model: String,
    #[serde(flatten)]
    pub prefix: &'a Prefix,
    pub ttl: String,
    pub display_name: String,
}

/// One `Content`: a role and its parts.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Content {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    parts: Vec<Part>,
}

/// One `Part`; exactly one of the data fields is set.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Part {
    #[serde(skip_serializing_if = "Option::is_none")]
    thought: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inline_data: Option<InlineData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_call: Option<FunctionCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    function_response: Option<FunctionResponse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thought_signature: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct InlineData {
    mime_type: String,
    data: String,
}

#[derive(Debug, Clone, Serialize)]
struct FunctionCall {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    name: String,
    args: Value,
}

#[derive(Debug, Clone, Serialize)]
struct FunctionResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    name: String,
    response: Value,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireTool {
    function_declarations: Vec<FunctionDeclaration>,
}

#[derive(Debug, Clone, Serialize)]
struct FunctionDeclaration {
    name: String,
    description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Value>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolConfig {
    function_calling_config: FunctionCallingConfig,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCallingConfig {
    mode: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allowed_function_names: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    stop_sequences: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ThinkingConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_budget: Option<i64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    include_thoughts: bool,
}

impl GenerationConfig {
    fn is_empty(&self) -> bool {
        self.max_output_tokens.is_none()
            && self.temperature.is_none()
            && self.seed.is_none()
            && self.stop_sequences.is_empty()
            && self.response_mime_type.is_none()
            && self.thinking_config.is_none()
    }
}

/// The cacheable part of `request`: system instruction, tools, tool config and few-shot
/// turns, as they go into a `cachedContents` object or at the start of a full request.
pub(crate) fn prefix(request: &ModelRequest<'_>) -> Prefix {
    let p = request.prefix;
    let system = p.system_text();
    let tools = tools(p);
    let tool_config = if tools.is_empty() {
        None
    } else {
        tool_config(
            &request.options.tool_choice,
            request.options.active_tools.as_deref(),
            p,
        )
    };
    Prefix {
        contents: contents(p.few_shot(), &CallIds::of(p.few_shot(), &[])),
        system_instruction: (!system.is_empty()).then(|| Content {
            role: None,
            parts: vec![Part {
                text: Some(system),
                ..Part::default()
            }],
        }),
        tools,
        tool_config,
    }
}

/// The `generateContent` body. With `cached` (a `cachedContents/…` name) the cacheable
/// part is left out and the cached content is named instead; without it `prefix` comes
/// first in full.
pub(crate) fn build<'a>(
    cfg: RequestConfig,
    request: &ModelRequest<'_>,
    prefix: &Prefix,
    cached: Option<&'a str>,
) -> GenerateRequest<'a> {
    let calls = CallIds::of(request.prefix.few_shot(), request.history);
    let history = with_trimmed_notes(contents(request.history, &calls));
    let options = request.options;
    let (response_mime_type, response_schema) = match &options.response_format {
        ResponseFormat::Text => (None, None),
        ResponseFormat::Json { schema } => (
            Some("application/json"),
            schema.as_ref().map(sanitize_schema),
        ),
    };
    let thinking_config =
        // The builder's budget (the provider's own value) wins over the portable setting.
        {
            let budget = cfg.thinking_budget.or_else(|| {
                request
                    .options
                    .reasoning
                    .map(|r| i64::from(r.budget_tokens()))
            });
            (budget.is_some() || cfg.include_thoughts).then_some(ThinkingConfig {
                thinking_budget: budget,
                include_thoughts: cfg.include_thoughts,
            })
        };
    let generation_config = GenerationConfig {
        max_output_tokens: options.max_tokens,
        temperature: options.temperature,
        // Gemini's seed is an int32: the low 31 bits of Halo's u64 seed.
        seed: options.seed.map(|s| (s & 0x7fff_ffff) as i32),
        stop_sequences: options.stop.clone(),
        response_mime_type,
        response_schema,
        thinking_config,
    };
    let generation_config = (!generation_config.is_empty()).then_some(generation_config);
    match cached {
        Some(name) => GenerateRequest {
            contents: history,
            system_instruction: None,
            tools: Vec::new(),
            tool_config: None,
            generation_config,
            cached_content: Some(name),
        },
        None => GenerateRequest {
            contents: prefix.contents.iter().cloned().chain(history).collect(),
            system_instruction: prefix.system_instruction.clone(),
            tools: prefix.tools.clone(),
            tool_config: prefix.tool_config.clone(),
            generation_config,
            cached_content: None,
        },
    }
}

fn tools(prefix: &StablePrefix) -> Vec<WireTool> {
    if prefix.tools().is_empty() {
        return Vec::new();
    }
    let function_declarations = prefix
        .tools()
        .iter()
        .map(|spec| {
            let parameters = sanitize_schema(&spec.parameters);
            // A function without arguments has no `parameters` (an OBJECT without
            // properties is refused).
            let empty = parameters
                .get("properties")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty);
            FunctionDeclaration {
                name: spec.name.clone(),
                description: spec.description.clone(),
                parameters: (!empty).then_some(parameters),
            }
        })
        .collect();
    vec![WireTool {
        function_declarations,
    }]
}

/// `toolConfig.functionCallingConfig` for a tool choice and the request's
/// [active tools](halo_core::GenerationOptions::active_tools); `None` for auto with every
/// tool, Gemini's default
/// (<https://ai.google.dev/api/caching#FunctionCallingConfig>).
///
/// `allowedFunctionNames` may be set only with mode `ANY` or `VALIDATED`, so:
/// - required → `ANY`, with the active tools (in the prefix's order) as
///   `allowedFunctionNames` when some are inactive;
/// - auto with active tools → `VALIDATED` ("constrained to predict either function calls or
///   natural language response"; the calls limited to `allowedFunctionNames`), which keeps
///   auto's freedom to answer in text — `ANY` would force a call;
/// - a named tool → `ANY` with that one name;
/// - none, or no active tool at all → `NONE`.
///
/// The function declarations stay as they are, so the prefix bytes do not change; with the
/// explicit cache, though, the tool config lives in the `cachedContents` object, so each
/// different tool config is an object of its own (see [the cache](super#the-cache)).
fn tool_config(
    choice: &ToolChoice,
    active: Option<&[String]>,
    prefix: &StablePrefix,
) -> Option<ToolConfig> {
    // The active names the prefix declares, in its order; `None` when all are active.
    let allowed = active.and_then(|active| {
        let names: Vec<String> = prefix
            .tools()
            .iter()
            .filter(|t| active.contains(&t.name))
            .map(|t| t.name.clone())
            .collect();
        (names.len() < prefix.tools().len()).then_some(names)
    });
    let (mode, allowed_function_names) = match (choice, allowed) {
        (ToolChoice::None, _) => ("NONE", Vec::new()),
        (ToolChoice::Tool(name), _) => ("ANY", vec![name.clone()]),
        (_, Some(names)) if names.is_empty() => ("NONE", Vec::new()),
        (ToolChoice::Auto, None) => return None,
        (ToolChoice::Auto, Some(names)) => ("VALIDATED", names),
        (ToolChoice::Required, names) => ("ANY", names.unwrap_or_default()),
    };
    Some(ToolConfig {
        function_calling_config: FunctionCallingConfig {
            mode,
            allowed_function_names,
        },
    })
}

/// The wire id (if the API sent one) of every tool call of the conversation, by Halo id,
/// and each call's position in its turn, so tool results can be ordered and named.
struct CallIds<'m> {
    calls: Vec<&'m ToolCall>,
}

impl<'m> CallIds<'m> {
    fn of(few_shot: &'m [Message], history: &'m [Message]) -> Self {
        CallIds {
            calls: few_shot
                .iter()
                .chain(history)
                .flat_map(Message::tool_calls)
                .collect(),
        }
    }

    /// The `functionCall.id` the API sent for the call with this Halo id.
    fn wire_id(&self, id: &str) -> Option<String> {
        self.calls
            .iter()
            .rev()
            .find(|c| c.id == id)
            .and_then(|c| provider_str(c, CALL_ID_KEY))
            .map(str::to_string)
    }
}

fn provider_str<'c>(call: &'c ToolCall, key: &str) -> Option<&'c str> {
    call.provider_data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Messages → `contents`; see the module docs for the mapping.
fn contents(messages: &[Message], calls: &CallIds<'_>) -> Vec<Content> {
    let mut out: Vec<Content> = Vec::with_capacity(messages.len());
    let mut last_calls: &[ToolCall] = &[];
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            // A turn left without parts (all its text empty) is skipped: Gemini rejects an
            // empty text part and an empty `parts` alike (HTTP 400).
            Message::System { content } if content.is_empty() => {}
            Message::System { content } => out.push(user_text(content)),
            Message::User { content } => {
                let parts = user_parts(content);
                if !parts.is_empty() {
                    out.push(Content {
                        role: Some("user"),
                        parts,
                    });
                }
            }
            Message::Assistant(a) => {
                last_calls = &a.tool_calls;
                let parts = model_parts(a);
                if !parts.is_empty() {
                    out.push(Content {
                        role: Some("model"),
                        parts,
                    });
                }
            }
            Message::Tool(_) => {
                let mut group: Vec<&ToolResult> = Vec::new();
                while let Some(Message::Tool(r)) = messages.get(i) {
                    group.push(r);
                    i += 1;
                }
                // In call order; results of unknown calls keep their place at the end.
                group.sort_by_key(|r| {
                    last_calls
                        .iter()
                        .position(|c| c.id == r.tool_call_id)
                        .unwrap_or(usize::MAX)
                });
                out.push(Content {
                    role: Some("user"),
                    parts: group
                        .into_iter()
                        .map(|r| function_response(r, calls))
                        .collect(),
                });
                continue;
            }
        }
        i += 1;
    }
    out
}

/// `history` with a [`TRIMMED_HISTORY_NOTE`] user content before each `model` content the
/// API would refuse where it stands: the first one (the front of the history was trimmed),
/// and one with a function call right after another `model` content. Gemini wants a
/// function-call turn "immediately after a user turn or after a function response turn"
/// (HTTP 400 otherwise); both kinds are `user` contents.
fn with_trimmed_notes(history: Vec<Content>) -> Vec<Content> {
    let is_model = |c: &Content| c.role == Some("model");
    let calls = |c: &Content| c.parts.iter().any(|p| p.function_call.is_some());
    let mut out: Vec<Content> = Vec::with_capacity(history.len() + 1);
    for content in history {
        let refused = match out.last() {
            None => is_model(&content),
            Some(before) => is_model(before) && is_model(&content) && calls(&content),
        };
        if refused {
            out.push(user_text(TRIMMED_HISTORY_NOTE));
        }
        out.push(content);
    }
    out
}

fn user_text(text: &str) -> Content {
    Content {
        role: Some("user"),
        parts: vec![Part {
            text: Some(text.to_string()),
            ..Part::default()
        }],
    }
}

/// The parts of a user turn; empty text parts are left out (Gemini rejects them), so the
/// list may be empty.
fn user_parts(content: &[ContentPart]) -> Vec<Part> {
    content
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text { text } if text.is_empty() => None,
            ContentPart::Text { text } => Some(Part {
                text: Some(text.clone()),
                ..Part::default()
            }),
            ContentPart::Image { media_type, data } => Some(Part {
                inline_data: Some(InlineData {
                    mime_type: media_type.clone(),
                    data: data.clone(),
                }),
                ..Part::default()
            }),
        })
        .collect()
}

/// The parts of a model turn, in the order the response gave them (see the module docs).
/// A reasoning entry with empty text holds the signature of the turn's text part. An empty
/// text part is sent only to carry that signature; a turn with nothing to send gives no
/// parts (the caller skips it).
fn model_parts(a: &halo_core::AssistantMessage) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut text_signature = None;
    for r in &a.reasoning {
        // An OpenAI Responses item kept as reasoning means nothing to Gemini.
        if r.signature
            .as_deref()
            .is_some_and(crate::responses::is_responses_item)
        {
            continue;
        }
        if r.text.is_empty() {
            text_signature = r.signature.clone();
            continue;
        }
        parts.push(Part {
            thought: Some(true),
            text: Some(r.text.clone()),
            thought_signature: r.signature.clone(),
            ..Part::default()
        });
    }
    if !a.text.is_empty() || text_signature.is_some() {
        parts.push(Part {
            text: Some(a.text.clone()),
            thought_signature: text_signature,
            ..Part::default()
        });
    }
    for call in &a.tool_calls {
        parts.push(Part {
            function_call: Some(FunctionCall {
                id: provider_str(call, CALL_ID_KEY).map(str::to_string),
                name: call.name.to_string(),
                args: call_args(call),
            }),
            thought_signature: provider_str(call, SIGNATURE_KEY).map(str::to_string),
            ..Part::default()
        });
    }
    parts
}

/// `functionCall.args` from the raw argument string: the object the model sent. Arguments
/// that are not a JSON object (history from another provider) are kept as
/// `{"raw_arguments": "<the string>"}` rather than lost.
fn call_args(call: &ToolCall) -> Value {
    match call.arguments() {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => {
            let mut map = Map::new();
            map.insert(
                "raw_arguments".into(),
                Value::String(call.raw_arguments.to_string()),
            );
            Value::Object(map)
        }
    }
}

fn function_response(result: &ToolResult, calls: &CallIds<'_>) -> Part {
    let key = if result.is_error { "error" } else { "result" };
    let mut response = Map::new();
    response.insert(key.into(), Value::String(result.content.to_string()));
    Part {
        function_response: Some(FunctionResponse {
            id: calls.wire_id(&result.tool_call_id),
            name: result.tool_name.to_string(),
            response: Value::Object(response),
        }),
        ..Part::default()
    }
}
