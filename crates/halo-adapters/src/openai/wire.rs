//! The chat-completions wire types of a request body, and the mapping of one message, tool
//! or tool call onto them (<https://platform.openai.com/docs/api-reference/chat/create>).
//! Fixed-order structs, so the same message always gives the same bytes.

use std::borrow::Cow;

use bytes::{BufMut, BytesMut};
use halo_core::{AssistantMessage, ContentPart, Message, ModelError, ToolCall, ToolSpec};
use serde::Serialize;
use serde_json::Value;

use super::cache::{BREAKPOINT, Breakpoint};
use super::config::{Profile, ReasoningReplay};
use super::request::{Out, RequestConfig, serialize_error};

/// `stream_options` of a streaming request.
#[derive(Debug, Serialize)]
pub(super) struct StreamOptions {
    pub(super) include_usage: bool,
}

/// One message on the wire.
#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub(super) enum WireMessage<'a> {
    System {
        content: TextContent<'a>,
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
        #[serde(skip_serializing_if = "WireToolCalls::is_empty")]
        tool_calls: WireToolCalls<'a>,
    },
    Tool {
        tool_call_id: &'a str,
        content: TextContent<'a>,
    },
}

impl WireMessage<'_> {
    /// Appends the message's JSON to `out`: the bytes `serde_json` writes for it.
    ///
    /// The shapes nearly every message has (text content, an assistant turn with its tool
    /// calls) are written here, their strings copied as they are when nothing in them needs
    /// an escape; anything else goes through `serde_json`. A history's messages are most of
    /// a request body, and `serde_json` writes one small piece at a time: this takes about
    /// half the instructions. `write_is_serde_json` checks the bytes over arbitrary messages.
    pub(super) fn write(&self, out: &mut BytesMut) -> Result<(), ModelError> {
        match self {
            WireMessage::System {
                content: TextContent::Text(text),
            } => {
                out.put_slice(br#"{"role":"system","content":"#);
                write_str(out, text)?;
            }
            WireMessage::User {
                content: UserContent::Text(text),
            } => {
                out.put_slice(br#"{"role":"user","content":"#);
                write_str(out, text)?;
            }
            WireMessage::Assistant {
                content,
                reasoning_content,
                tool_calls,
            } => {
                out.put_slice(br#"{"role":"assistant","content":"#);
                write_str(out, content)?;
                if let Some(reasoning) = reasoning_content {
                    out.put_slice(br#","reasoning_content":"#);
                    write_str(out, reasoning)?;
                }
                if !tool_calls.is_empty() {
                    out.put_slice(br#","tool_calls":["#);
                    for (i, call) in tool_calls.0.iter().enumerate() {
                        out.put_slice(if i == 0 { br#"{"id":"# } else { br#",{"id":"# });
                        write_str(out, &call.id)?;
                        out.put_slice(br#","type":"function","function":{"name":"#);
                        write_str(out, &call.name)?;
                        out.put_slice(br#","arguments":"#);
                        write_str(out, call.replay_arguments())?;
                        out.put_slice(b"}}");
                    }
                    out.put_slice(b"]");
                }
            }
            WireMessage::Tool {
                tool_call_id,
                content: TextContent::Text(text),
            } => {
                out.put_slice(br#"{"role":"tool","tool_call_id":"#);
                write_str(out, tool_call_id)?;
                out.put_slice(br#","content":"#);
                write_str(out, text)?;
            }
            other => return serde_json::to_writer(Out(out), other).map_err(serialize_error),
        }
        out.put_slice(b"}");
        Ok(())
    }
}

/// Appends `s` as a JSON string, as `serde_json` writes it: as it is between quotes when
/// it holds no byte `serde_json` escapes (a control character, `"` or `\`), which a check
/// without an early exit finds in vector code; else through `serde_json`.
fn write_str(out: &mut BytesMut, s: &str) -> Result<(), ModelError> {
    let plain = s.as_bytes().iter().fold(true, |plain, &b| {
        plain & (b >= 0x20) & (b != b'"') & (b != b'\\')
    });
    if !plain {
        return serde_json::to_writer(Out(out), s).map_err(serialize_error);
    }
    out.reserve(s.len() + 2);
    out.put_u8(b'"');
    out.put_slice(s.as_bytes());
    out.put_u8(b'"');
    Ok(())
}

/// A system or tool message's content: its text, or one `text` part when it carries a cache
/// breakpoint (a string cannot).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum TextContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<WirePart<'a>>),
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<WirePart<'a>>),
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WirePart<'a> {
    Text {
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        prompt_cache_breakpoint: Option<Breakpoint>,
    },
    ImageUrl {
        image_url: ImageUrl<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        prompt_cache_breakpoint: Option<Breakpoint>,
    },
}

#[derive(Debug, Serialize)]
pub(super) struct ImageUrl<'a> {
    pub(super) url: DataUrl<'a>,
}

/// `data:{media_type};base64,{data}`, written without first copying the image into a string.
#[derive(Debug)]
pub(super) struct DataUrl<'a> {
    pub(super) media_type: &'a str,
    pub(super) data: &'a str,
}

impl Serialize for DataUrl<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!(
            "data:{};base64,{}",
            self.media_type, self.data
        ))
    }
}

/// An assistant turn's tool calls, written straight from the message (no per-message vector).
#[derive(Debug, Clone, Copy)]
pub(super) struct WireToolCalls<'a>(&'a [ToolCall]);

impl WireToolCalls<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for WireToolCalls<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(wire_tool_call))
    }
}

#[derive(Debug, Serialize)]
pub(super) struct WireToolCall<'a> {
    pub(super) id: &'a str,
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) function: WireFunctionCall<'a>,
}

#[derive(Debug, Serialize)]
pub(super) struct WireFunctionCall<'a> {
    pub(super) name: &'a str,
    pub(super) arguments: &'a str,
}

#[derive(Debug, Serialize)]
pub(super) struct WireTool<'a> {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) function: WireFunction<'a>,
}

#[derive(Debug, Serialize)]
pub(super) struct WireFunction<'a> {
    pub(super) name: &'a str,
    pub(super) description: &'a str,
    pub(super) parameters: &'a Value,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum WireToolChoice<'a> {
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
pub(super) struct NamedFunction<'a> {
    pub(super) name: &'a str,
}

/// `ChatCompletionAllowedToolsParam`: `mode` `auto` or `required`, and the tools as
/// `{"type": "function", "function": {"name"}}`.
#[derive(Debug, Serialize)]
pub(super) struct AllowedTools<'a> {
    pub(super) mode: &'static str,
    pub(super) tools: Vec<AllowedTool<'a>>,
}

#[derive(Debug, Serialize)]
pub(super) struct AllowedTool<'a> {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) function: NamedFunction<'a>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WireResponseFormat<'a> {
    JsonObject,
    JsonSchema { json_schema: JsonSchemaFormat<'a> },
}

#[derive(Debug, Serialize)]
pub(super) struct JsonSchemaFormat<'a> {
    pub(super) name: &'static str,
    pub(super) schema: Cow<'a, Value>,
    pub(super) strict: bool,
}

pub(super) fn wire_tool(spec: &ToolSpec) -> WireTool<'_> {
    WireTool {
        kind: "function",
        function: WireFunction {
            name: &spec.name,
            description: &spec.description,
            parameters: &spec.parameters,
        },
    }
}

pub(super) fn wire_message<'a>(
    cfg: RequestConfig<'a>,
    message: &'a Message,
    mark: bool,
) -> Result<WireMessage<'a>, ModelError> {
    let marked = |text: &'a str| {
        if mark {
            TextContent::Parts(vec![WirePart::Text {
                text: Cow::Borrowed(text),
                prompt_cache_breakpoint: Some(BREAKPOINT),
            }])
        } else {
            TextContent::Text(Cow::Borrowed(text))
        }
    };
    Ok(match message {
        Message::System { content } => WireMessage::System {
            content: marked(content),
        },
        Message::User { content } => WireMessage::User {
            content: user_content(cfg.profile, content, mark)?,
        },
        Message::Assistant(a) => {
            let reasoning_content = match cfg.reasoning_replay {
                ReasoningReplay::Never => None,
                ReasoningReplay::WhenPresent => reasoning(a),
                ReasoningReplay::EveryAssistantMessage => {
                    Some(reasoning(a).unwrap_or(Cow::Borrowed("")))
                }
            };
            WireMessage::Assistant {
                content: &a.text,
                reasoning_content,
                tool_calls: WireToolCalls(&a.tool_calls),
            }
        }
        Message::Tool(result) => WireMessage::Tool {
            tool_call_id: &result.tool_call_id,
            content: marked(&result.content),
        },
    })
}

/// The turn's reasoning text joined ([`AssistantMessage::reasoning_text`]), borrowed when it
/// is one block (the usual case), so replaying it copies nothing.
pub(super) fn reasoning(a: &AssistantMessage) -> Option<Cow<'_, str>> {
    match a.reasoning.as_slice() {
        [] => None,
        [one] => Some(Cow::Borrowed(&one.text)),
        _ => a.reasoning_text().map(Cow::Owned),
    }
}

pub(super) fn wire_tool_call(call: &ToolCall) -> WireToolCall<'_> {
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
/// else as an array of `text` and `image_url` parts, as does a message whose last part
/// carries a cache breakpoint (`mark`).
pub(super) fn user_content(
    profile: Profile,
    parts: &[ContentPart],
    mark: bool,
) -> Result<UserContent<'_>, ModelError> {
    match parts {
        [] if !mark => return Ok(UserContent::Text("")),
        [ContentPart::Text { text }] if !mark => return Ok(UserContent::Text(text)),
        [] => {
            return Ok(UserContent::Parts(vec![WirePart::Text {
                text: Cow::Borrowed(""),
                prompt_cache_breakpoint: Some(BREAKPOINT),
            }]));
        }
        _ => {}
    }
    let mut wire = parts
        .iter()
        .map(|part| match part {
            ContentPart::Text { text } => Ok(WirePart::Text {
                text: Cow::Borrowed(text),
                prompt_cache_breakpoint: None,
            }),
            ContentPart::Image { .. } if profile == Profile::DeepSeek => {
                Err(ModelError::Unsupported(
                    "deepseek's chat completions API takes no images; describe the image in text or use a vision model"
                        .into(),
                ))
            }
            ContentPart::Image { media_type, data } => Ok(WirePart::ImageUrl {
                image_url: ImageUrl {
                    url: DataUrl { media_type, data },
                },
                prompt_cache_breakpoint: None,
            }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if mark && let Some(last) = wire.last_mut() {
        match last {
            WirePart::Text {
                prompt_cache_breakpoint,
                ..
            }
            | WirePart::ImageUrl {
                prompt_cache_breakpoint,
                ..
            } => *prompt_cache_breakpoint = Some(BREAKPOINT),
        }
    }
    Ok(UserContent::Parts(wire))
}

#[cfg(test)]
mod tests {
    use halo_core::{Reasoning, ToolResult};
    use proptest::prelude::*;
    use serde_json::Map;

    use super::*;
    use crate::openai::cache::PromptCacheMode;

    fn text() -> impl Strategy<Value = String> {
        // Plain text, quotes, backslashes, every control character, DEL, non-ASCII.
        prop::collection::vec(
            prop_oneof![
                "[a-z {}:,]{0,8}",
                Just("\"".to_string()),
                Just("\\".to_string()),
                (0u8..0x20).prop_map(|b| char::from(b).to_string()),
                Just("é→\u{7f}𝄞".to_string()),
            ],
            0..5,
        )
        .prop_map(|parts| parts.concat())
    }

    fn message() -> impl Strategy<Value = Message> {
        let call = (text(), text(), prop_oneof![text(), Just(" ".to_string())])
            .prop_map(|(id, name, args)| ToolCall::new(id, name, args));
        let part = prop_oneof![
            text().prop_map(|text| ContentPart::Text { text }),
            (text(), text()).prop_map(|(media_type, data)| ContentPart::Image { media_type, data }),
        ];
        prop_oneof![
            text().prop_map(|content| Message::System { content }),
            prop::collection::vec(part, 0..3).prop_map(|content| Message::User { content }),
            (
                text(),
                prop::collection::vec(text(), 0..3),
                prop::collection::vec(call, 0..3)
            )
                .prop_map(|(text, reasoning, tool_calls)| {
                    Message::Assistant(AssistantMessage {
                        text,
                        reasoning: reasoning
                            .into_iter()
                            .map(|text| Reasoning {
                                text,
                                signature: None,
                            })
                            .collect(),
                        tool_calls,
                    })
                }),
            (text(), text(), text()).prop_map(|(id, name, content)| {
                Message::Tool(ToolResult::ok(&ToolCall::new(id, name, "{}"), content))
            }),
        ]
    }

    proptest! {
        /// `WireMessage::write` gives the bytes `serde_json` gives, for every message,
        /// reasoning replay and cache mark.
        #[test]
        fn write_is_serde_json(
            message in message(),
            mark in any::<bool>(),
            replay in prop_oneof![
                Just(ReasoningReplay::Never),
                Just(ReasoningReplay::WhenPresent),
                Just(ReasoningReplay::EveryAssistantMessage),
            ],
        ) {
            let extra = Map::new();
            let cfg = RequestConfig {
                profile: Profile::Custom,
                model: "m",
                reasoning_replay: replay,
                prompt_cache_key: false,
                prompt_cache: PromptCacheMode::Default,
                min_cacheable_tokens: 0,
                extra: &extra,
            };
            let wire = wire_message(cfg, &message, mark).unwrap();
            let mut out = BytesMut::new();
            wire.write(&mut out).unwrap();
            prop_assert_eq!(
                String::from_utf8(out.to_vec()).unwrap(),
                serde_json::to_string(&wire).unwrap()
            );
        }
    }
}
