//! The chat-completions request body: wire types and the builder that turns a
//! [`ModelRequest`] into them.
//!
//! Shape: <https://platform.openai.com/docs/api-reference/chat/create>. Serialization is
//! deterministic: the system message, the few-shot turns and the `tools` array come from
//! the [`StablePrefix`] in its canonical order through fixed-order structs, so they are
//! byte-identical on every request of a session; they are serialized once per prefix
//! ([`PrefixWire`]) and copied into each body as they are. The history is
//! rendered the same way every time, so request N+1's `messages` start with request N's;
//! a body is written in three parts ([`Body`]: head, messages, tail) so the adapter can
//! keep an earlier body's messages and write only the new ones (`history.rs`).
//! The streaming path reuses [`build`] with `stream: true` (and `stream_options.include_usage`).

use std::borrow::Cow;
use std::fmt;
use std::io;

use bytes::BytesMut;
use halo_core::{
    Fingerprint, Message, ModelError, ModelRequest, ResponseFormat, StablePrefix, ToolChoice,
};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::cache::{BREAKPOINT, PromptCacheMode, PromptCacheOptions};
use super::config::{Profile, ReasoningReplay};
use super::wire::{
    AllowedTool, AllowedTools, JsonSchemaFormat, NamedFunction, StreamOptions, TextContent,
    UserContent, WireMessage, WirePart, WireResponseFormat, WireTool, WireToolChoice, wire_message,
    wire_tool,
};

/// What the request builder needs from the adapter's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestConfig<'a> {
    pub profile: Profile,
    pub model: &'a str,
    pub reasoning_replay: ReasoningReplay,
    pub prompt_cache_key: bool,
    pub prompt_cache: PromptCacheMode,
    pub min_cacheable_tokens: u64,
    pub extra: &'a Map<String, Value>,
}

/// The prefix's share of a request body, serialized once per prefix (its
/// [`Fingerprint`]): the system message and the few-shot turns, each as written in
/// `messages`, the `tools` array, and the fingerprint as `prompt_cache_key` would send it.
/// These bytes cannot change while the fingerprint stays, so a step escapes them no more.
/// It also depends on the adapter's profile and reasoning replay, which an adapter never
/// changes.
#[derive(Debug)]
pub(crate) struct PrefixWire {
    fingerprint: Fingerprint,
    fingerprint_hex: String,
    messages: Vec<Box<RawValue>>,
    tools: Option<Box<RawValue>>,
}

impl PrefixWire {
    /// Serializes `prefix`'s share of a body.
    ///
    /// # Errors
    /// [`ModelError::Unsupported`] for a few-shot turn the profile cannot send (an image on
    /// DeepSeek).
    pub(crate) fn new(cfg: RequestConfig<'_>, prefix: &StablePrefix) -> Result<Self, ModelError> {
        let mut messages = Vec::with_capacity(1 + prefix.few_shot().len());
        // Without skills the system text is the system prompt itself: borrowed, not copied.
        let system = if prefix.skills().is_empty() {
            Cow::Borrowed(prefix.system())
        } else {
            Cow::Owned(prefix.system_text())
        };
        // GPT-5.6+ explicit caching: a breakpoint on the prefix's last eligible message.
        let plan =
            super::cache::plan_breakpoints(cfg.prompt_cache, prefix, &[], cfg.min_cacheable_tokens);
        let last_eligible = prefix.few_shot().iter().rposition(super::cache::eligible);
        if !system.is_empty() {
            let content = if plan.prefix && last_eligible.is_none() {
                TextContent::Parts(vec![WirePart::Text {
                    text: Cow::Owned(system.into_owned()),
                    prompt_cache_breakpoint: Some(BREAKPOINT),
                }])
            } else {
                TextContent::Text(system)
            };
            messages.push(raw(&WireMessage::System { content })?);
        }
        for (i, message) in prefix.few_shot().iter().enumerate() {
            let mark = plan.prefix && last_eligible == Some(i);
            messages.push(raw(&wire_message(cfg, message, mark)?)?);
        }
        let tools = if prefix.tools().is_empty() {
            None
        } else {
            let tools: Vec<WireTool<'_>> = prefix.tools().iter().map(wire_tool).collect();
            Some(raw(&tools)?)
        };
        let fingerprint = prefix.fingerprint();
        Ok(PrefixWire {
            fingerprint,
            fingerprint_hex: fingerprint.to_string(),
            messages,
            tools,
        })
    }

    /// The fingerprint of the prefix these bytes are of.
    pub(crate) fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
}

fn raw(value: &impl Serialize) -> Result<Box<RawValue>, ModelError> {
    serde_json::value::to_raw_value(value)
        .map_err(|e| ModelError::Other(format!("cannot serialize the request body: {e}")))
}

/// One request's body, written in three parts: the head (`{"model":…,"messages":[`, the
/// prefix's messages as serialized once, the trimmed-history note), the history's messages,
/// and the tail (`],"tools":…}`: every field after `messages`, in the order below). The
/// parts concatenated are the bytes `serde_json` writes for the whole request, so an
/// adapter that kept the head and the first messages of an earlier body writes only the
/// new messages and the tail ([`Body::write_messages`]).
#[derive(Debug)]
pub(crate) struct Body<'a> {
    cfg: RequestConfig<'a>,
    prefix: &'a PrefixWire,
    note: bool,
    history: &'a [Message],
    /// The history message carrying the newest cache breakpoint (GPT-5.6+ caching).
    newest: Option<usize>,
    tail: Tail<'a>,
}

/// The fields after `messages`, in the order they are written ([`Tail::write_fields`]; a
/// field added here is written there too, and set in its test).
#[derive(Debug, Serialize)]
struct Tail<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
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
    reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<WireResponseFormat<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_options: Option<PromptCacheOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    /// Written as `#[serde(flatten)]` writes it; the derive is the reference that
    /// [`Tail::write_fields`] is tested against.
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// `io::Write` into a [`BytesMut`], every write one `extend_from_slice` (serde_json writes
/// in small pieces; the buffer grows by doubling).
pub(super) struct Out<'b>(pub(super) &'b mut BytesMut);

impl io::Write for Out<'_> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.extend_from_slice(buf);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub(super) fn serialize_error(e: impl fmt::Display) -> ModelError {
    ModelError::Other(format!("cannot serialize the request body: {e}"))
}

impl Body<'_> {
    /// Whether `messages` starts with the trimmed-history note (the history opens with an
    /// assistant turn). The head depends on it and on the prefix only.
    pub(crate) fn note(&self) -> bool {
        self.note
    }

    /// The history's messages.
    pub(crate) fn history_len(&self) -> usize {
        self.history.len()
    }

    /// Whether the body's messages can be continued by a later body: not when a cache
    /// breakpoint marks its newest message, which a later body writes without it.
    pub(crate) fn reusable(&self) -> bool {
        self.newest.is_none()
    }

    /// Appends the head: `{"model":…,"messages":[`, the prefix's messages and the note.
    pub(crate) fn write_head(&self, out: &mut BytesMut) -> Result<(), ModelError> {
        out.extend_from_slice(b"{\"model\":");
        serde_json::to_writer(Out(out), self.cfg.model).map_err(serialize_error)?;
        out.extend_from_slice(b",\"messages\":[");
        for (i, message) in self.prefix.messages.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b",");
            }
            out.extend_from_slice(message.get().as_bytes());
        }
        if self.note {
            if !self.prefix.messages.is_empty() {
                out.extend_from_slice(b",");
            }
            let note = WireMessage::User {
                content: UserContent::Text(crate::TRIMMED_HISTORY_NOTE),
            };
            serde_json::to_writer(Out(out), &note).map_err(serialize_error)?;
        }
        Ok(())
    }

    /// Appends the history's messages from index `from` on (the head and the messages
    /// before `from` are already in `out`), pushing the end offset of each into `ends`.
    ///
    /// # Errors
    /// [`ModelError::Unsupported`] for a message the profile cannot send (an image on
    /// DeepSeek).
    pub(crate) fn write_messages(
        &self,
        out: &mut BytesMut,
        from: usize,
        ends: &mut Vec<usize>,
    ) -> Result<(), ModelError> {
        // The first element of `messages` has no comma before it.
        let bare = self.prefix.messages.is_empty() && !self.note;
        for (i, message) in self.history.iter().enumerate().skip(from) {
            if i > 0 || !bare {
                out.extend_from_slice(b",");
            }
            wire_message(self.cfg, message, self.newest == Some(i))?.write(out)?;
            ends.push(out.len());
        }
        Ok(())
    }

    /// Appends the tail: `]`, the fields after `messages`, `}`.
    pub(crate) fn write_tail(&self, out: &mut BytesMut) -> Result<(), ModelError> {
        out.extend_from_slice(b"]");
        self.tail.write_fields(out)?;
        out.extend_from_slice(b"}");
        Ok(())
    }
}

impl Tail<'_> {
    /// Appends `,"name":value` for each field that is present, in declaration order, then
    /// the extra fields: the bytes `serde_json` writes for the struct after its `{`
    /// (`tests::tail_fields_are_serde_json`). Field names are written as constants, values
    /// through `serde_json`: serializing the struct (a map, for its flattened extra fields)
    /// escaped every name and took about three times as long.
    fn write_fields(&self, out: &mut BytesMut) -> Result<(), ModelError> {
        fn field<T: Serialize + ?Sized>(
            out: &mut BytesMut,
            name: &[u8],
            value: &T,
        ) -> Result<(), ModelError> {
            out.extend_from_slice(name);
            serde_json::to_writer(Out(out), value).map_err(serialize_error)
        }
        if let Some(tools) = self.tools {
            out.extend_from_slice(br#","tools":"#);
            out.extend_from_slice(tools.get().as_bytes());
        }
        if let Some(choice) = &self.tool_choice {
            field(out, br#","tool_choice":"#, choice)?;
        }
        if let Some(n) = self.max_tokens {
            field(out, br#","max_tokens":"#, &n)?;
        }
        if let Some(n) = self.max_completion_tokens {
            field(out, br#","max_completion_tokens":"#, &n)?;
        }
        if let Some(t) = self.temperature {
            field(out, br#","temperature":"#, &t)?;
        }
        if let Some(seed) = self.seed {
            field(out, br#","seed":"#, &seed)?;
        }
        if !self.stop.is_empty() {
            field(out, br#","stop":"#, self.stop)?;
        }
        if let Some(effort) = self.reasoning_effort {
            field(out, br#","reasoning_effort":"#, effort)?;
        }
        if let Some(format) = &self.response_format {
            field(out, br#","response_format":"#, format)?;
        }
        if let Some(key) = self.prompt_cache_key {
            field(out, br#","prompt_cache_key":"#, key)?;
        }
        if let Some(options) = &self.prompt_cache_options {
            field(out, br#","prompt_cache_options":"#, options)?;
        }
        if let Some(stream) = self.stream {
            field(out, br#","stream":"#, &stream)?;
        }
        if let Some(options) = &self.stream_options {
            field(out, br#","stream_options":"#, options)?;
        }
        for (name, value) in self.extra {
            out.extend_from_slice(b",");
            serde_json::to_writer(Out(out), name).map_err(serialize_error)?;
            field(out, b":", value)?;
        }
        Ok(())
    }
}

/// DeepSeek's non-thinking chat model, and the model the portable reasoning setting picks
/// instead (<https://api-docs.deepseek.com/guides/reasoning_model>).
const DEEPSEEK_CHAT: &str = "deepseek-chat";
const DEEPSEEK_REASONER: &str = "deepseek-reasoner";

/// The model a request names: `model`, except `deepseek-chat` on DeepSeek when the request
/// asks for reasoning, which is `deepseek-reasoner` (DeepSeek's thinking model; its V4
/// models think on their own and take `reasoning_effort`).
pub(crate) fn effective_model<'a>(
    profile: Profile,
    model: &'a str,
    request: &ModelRequest<'_>,
) -> &'a str {
    if profile == Profile::DeepSeek && model == DEEPSEEK_CHAT && request.options.reasoning.is_some()
    {
        DEEPSEEK_REASONER
    } else {
        model
    }
}

/// Builds the body of one chat-completions request around `prefix`, the request's prefix
/// as serialized once ([`PrefixWire::new`] of `request.prefix`).
///
/// Layout of `messages`: the system message (`prefix.system_text()`, omitted when empty),
/// then the few-shot turns, then [`TRIMMED_HISTORY_NOTE`](crate::TRIMMED_HISTORY_NOTE) as a
/// user turn when the history opens with an assistant turn, then the history. `tools` and `tool_choice` are omitted when
/// the prefix has no tools.
///
/// # Errors
/// [`ModelError::Unsupported`] for what the profile cannot send: images and JSON-Schema
/// response formats on DeepSeek (an image in the history is reported when its message is
/// written: see [`Body::write_messages`]).
pub(crate) fn build<'a>(
    cfg: RequestConfig<'a>,
    prefix: &'a PrefixWire,
    request: &ModelRequest<'a>,
    stream: bool,
) -> Result<Body<'a>, ModelError> {
    let options = request.options;

    // A trimmed log can open with an assistant turn (its user message evicted); DeepSeek's
    // reasoner refuses a first non-system message that is not the user's ("The first
    // message (except the system message) of deepseek-reasoner must be a user message"),
    // so every profile puts the same fixed user turn first, as the Anthropic and Gemini
    // adapters do. The same bytes every call: the cache keeps matching.
    let note = matches!(request.history.first(), Some(Message::Assistant(_)));

    let tools = prefix.tools.as_deref();
    let tool_choice = if tools.is_none() {
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

    let prompt_cache_key = cfg
        .prompt_cache_key
        .then_some(request.session_id.unwrap_or(&prefix.fingerprint_hex));

    // The portable reasoning setting: OpenAI's `reasoning_effort`; on DeepSeek the thinking
    // model for `deepseek-chat` (see `effective_model`: the reasoner takes no effort), the
    // effort for the others; nothing
    // for other servers. A `reasoning_effort` body field (the provider's own value) wins.
    let reasoning_effort = match (options.reasoning, cfg.profile) {
        (Some(_), Profile::DeepSeek) if cfg.model == DEEPSEEK_REASONER => None,
        (Some(effort), Profile::OpenAi | Profile::DeepSeek)
            if !cfg.extra.contains_key("reasoning_effort") =>
        {
            Some(effort.as_str())
        }
        _ => None,
    };

    let newest = super::cache::plan_breakpoints(
        cfg.prompt_cache,
        request.prefix,
        request.history,
        cfg.min_cacheable_tokens,
    )
    .newest;
    Ok(Body {
        cfg,
        prefix,
        note,
        history: request.history,
        newest,
        tail: Tail {
            tools,
            tool_choice,
            max_tokens,
            max_completion_tokens,
            temperature: options.temperature,
            seed: options.seed,
            stop: &options.stop,
            reasoning_effort,
            response_format,
            prompt_cache_key,
            prompt_cache_options: cfg.prompt_cache.options(),
            stream: stream.then_some(true),
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
            extra: cfg.extra,
        },
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::wire::StreamOptions;

    #[test]
    fn tail_fields_are_serde_json() {
        let tools = RawValue::from_string(r#"[{"type":"function"}]"#.to_string()).unwrap();
        let stop = ["END".to_string(), "a\"b".to_string()];
        let mut extra = Map::new();
        extra.insert("x_b".into(), serde_json::json!([1, null]));
        extra.insert("cache_prompt".into(), Value::Bool(true));
        let none = Map::new();
        // Every field present or not: 13 optional fields, with and without extra fields.
        for mask in 0u32..1 << 14 {
            let on = |bit: u32| mask & (1 << bit) != 0;
            let tail = Tail {
                tools: on(0).then_some(&*tools),
                tool_choice: on(1).then_some(WireToolChoice::Mode("auto")),
                max_tokens: on(2).then_some(5),
                max_completion_tokens: on(3).then_some(7),
                temperature: on(4).then_some(0.3),
                seed: on(5).then_some(u64::MAX),
                stop: if on(6) { &stop } else { &[] },
                reasoning_effort: on(7).then_some("low"),
                response_format: on(8).then_some(WireResponseFormat::JsonObject),
                prompt_cache_key: on(9).then_some("k\u{1}"),
                prompt_cache_options: if on(10) {
                    PromptCacheMode::Explicit.options()
                } else {
                    None
                },
                stream: on(11).then_some(true),
                stream_options: on(12).then_some(StreamOptions {
                    include_usage: true,
                }),
                extra: if on(13) { &extra } else { &none },
            };
            let mut out = BytesMut::new();
            tail.write_fields(&mut out).unwrap();
            let written = String::from_utf8(out.to_vec()).unwrap();
            let reference = serde_json::to_string(&tail).unwrap();
            // serde_json's `{"a":1,"b":2}` is `,"a":1,"b":2` after the messages' `]`.
            let expected = if reference == "{}" {
                String::new()
            } else {
                format!(",{}", &reference[1..reference.len() - 1])
            };
            assert_eq!(written, expected, "fields {mask:014b}");
        }
    }
}
