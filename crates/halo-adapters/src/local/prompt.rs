//! The prompt format of the local model: chat turns from a request, the tool section of the
//! system turn, and the parsing of tool calls out of generated text.
//!
//! Everything here is pure string work, so it is unit-tested without a model. The format is
//! documented in the [parent module](super).

use halo_core::{AssistantMessage, ContentPart, Message, ModelError, StablePrefix, ToolCall};
use serde_json::Value;

/// Opens a tool-call block in the model's output.
pub(crate) const CALL_OPEN: &str = "<tool_call>";
/// Closes a tool-call block.
pub(crate) const CALL_CLOSE: &str = "</tool_call>";
/// Wraps each tool result.
const RESPONSE_OPEN: &str = "<tool_response>\n";
const RESPONSE_CLOSE: &str = "\n</tool_response>";

/// One chat turn before the chat template is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Turn {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: &'static str,
    /// The turn's text.
    pub content: String,
}

/// The text of the system turn: the prefix's system text followed, when there are tools, by
/// the tool section (the tool list as JSON and the calling convention).
pub(crate) fn system_content(prefix: &StablePrefix) -> String {
    let mut out = prefix.system_text();
    if prefix.tools().is_empty() {
        return out;
    }
    // Keys in a fixed order (name, description, parameters) whatever map type serde_json was
    // built with; the parameter schemas are already canonical (sorted keys).
    let mut tools = String::from("[");
    for (i, t) in prefix.tools().iter().enumerate() {
        if i > 0 {
            tools.push(',');
        }
        // Serializing strings and `Value`s cannot fail.
        tools.push_str("{\"name\":");
        tools.push_str(&serde_json::to_string(&t.name).unwrap_or_default());
        tools.push_str(",\"description\":");
        tools.push_str(&serde_json::to_string(&t.description).unwrap_or_default());
        tools.push_str(",\"parameters\":");
        tools.push_str(&serde_json::to_string(&t.parameters).unwrap_or_default());
        tools.push('}');
    }
    tools.push(']');
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str("You have access to the following tools:\n<tools>");
    out.push_str(&tools);
    out.push_str(
        "</tools>\n\n\
         To call tools, answer with only a list of calls in this format:\n\
         <tool_call>[{\"name\":\"func_name1\",\"arguments\":{\"argument1\":\"value1\"}}]</tool_call>\n\
         Tool results come back inside <tool_response></tool_response>. \
         When no tool call is needed, answer in plain text.",
    );
    out
}

/// The text an assistant turn is rendered as, byte for byte what the model generated for
/// it: its text, then its calls (if any) as a `<tool_call>` block in the compact form
/// `<tool_call>[{"name":"N","arguments":{..}}]</tool_call>`.
pub(crate) fn assistant_content(message: &AssistantMessage) -> String {
    let mut out = message.text.clone();
    if message.tool_calls.is_empty() {
        return out;
    }
    out.push_str(CALL_OPEN);
    out.push('[');
    for (i, call) in message.tool_calls.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        // A JSON string of the name; names are `[a-zA-Z0-9_-]`, so no escapes in practice.
        out.push_str(&serde_json::to_string(&call.name).unwrap_or_default());
        out.push_str(",\"arguments\":");
        out.push_str(call.replay_arguments());
        out.push('}');
    }
    out.push(']');
    out.push_str(CALL_CLOSE);
    out
}

fn tool_response(content: &str, is_error: bool) -> String {
    let mut out = String::from(RESPONSE_OPEN);
    // Error results from the tool registry already start with "error"; others get the word.
    if is_error
        && !content
            .trim_start()
            .to_ascii_lowercase()
            .starts_with("error")
    {
        out.push_str("error: ");
    }
    out.push_str(content);
    out.push_str(RESPONSE_CLOSE);
    out
}

/// The chat turns of a request: the system turn, the few-shot turns, then the history.
/// Consecutive tool results become one turn (role `tool_role`) holding one
/// `<tool_response>` block per result.
///
/// # Errors
/// [`ModelError::Unsupported`] for an image part (the local model reads text only).
pub(crate) fn turns(
    prefix: &StablePrefix,
    history: &[Message],
    tool_role: &'static str,
) -> Result<Vec<Turn>, ModelError> {
    let mut out = Vec::with_capacity(history.len() + prefix.few_shot().len() + 1);
    let system = system_content(prefix);
    if !system.is_empty() {
        out.push(Turn {
            role: "system",
            content: system,
        });
    }
    let mut in_tool_turn = false;
    for message in prefix.few_shot().iter().chain(history) {
        let turn = match message {
            Message::System { content } => Turn {
                role: "system",
                content: content.clone(),
            },
            Message::User { content } => {
                let mut text = String::new();
                for part in content {
                    match part {
                        ContentPart::Text { text: t } => text.push_str(t),
                        ContentPart::Image { .. } => {
                            return Err(ModelError::Unsupported(
                                "the local model reads text only; remove the image part".into(),
                            ));
                        }
                    }
                }
                Turn {
                    role: "user",
                    content: text,
                }
            }
            Message::Assistant(a) => Turn {
                role: "assistant",
                content: assistant_content(a),
            },
            Message::Tool(result) => {
                let block = tool_response(&result.content, result.is_error);

                match out.last_mut() {
                    Some(last) if in_tool_turn => {
                        last.content.push('\n');
                        last.content.push_str(&block);
                        continue;
                    }
                    _ => {
                        in_tool_turn = true;
                        out.push(Turn {
                            role: tool_role,
                            content: block,
                        });
                        continue;
                    }
                }
            }
        };
        in_tool_turn = false;
        out.push(turn);
    }
    Ok(out)
}

/// Generated text split into the answer text and the tool calls.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parsed {
    pub text: String,
    pub calls: Vec<ToolCall>,
}

/// Splits generated text at its `<tool_call>` block into the text around it and the calls.
/// The block is the compact form the grammar produces:
/// `<tool_call>[{"name":"N","arguments":{..}},..]</tool_call>`. Argument strings are kept
/// byte for byte. Output without a complete, well-formed block (cut by `max_tokens`) is all
/// text.
///
/// `next_id` gives each call its id.
pub(crate) fn parse_output(output: &str, next_id: impl FnMut() -> String) -> Parsed {
    let parsed = output.find(CALL_OPEN).and_then(|start| {
        let (calls, after) = parse_block(&output[start + CALL_OPEN.len()..])?;
        Some((format!("{}{after}", &output[..start]), calls))
    });
    match parsed {
        Some((text, calls)) if !calls.is_empty() => Parsed {
            text,
            calls: calls
                .into_iter()
                .zip(std::iter::repeat_with(next_id))
                .map(|((name, raw), id)| ToolCall::new(id, name, raw))
                .collect(),
        },
        _ => Parsed {
            text: output.to_string(),
            calls: Vec::new(),
        },
    }
}

/// Parses `[{"name":"N","arguments":{..}},..]</tool_call>` (what follows `<tool_call>`);
/// returns the calls and the text after the block.
fn parse_block(rest: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut rest = rest.strip_prefix('[')?;
    let mut calls = Vec::new();
    if let Some(after) = rest.strip_prefix(']') {
        return Some((calls, after.strip_prefix(CALL_CLOSE)?));
    }
    loop {
        rest = rest.strip_prefix("{\"name\":")?;
        let (name, len) = json_value(rest)?;
        let name = name.as_str()?.to_string();
        rest = rest[len..].strip_prefix(",\"arguments\":")?;
        let (_, len) = json_value(rest)?;
        let raw = rest[..len].to_string();
        rest = rest[len..].strip_prefix('}')?;
        calls.push((name, raw));
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
            continue;
        }
        rest = rest.strip_prefix(']')?;
        return Some((calls, rest.strip_prefix(CALL_CLOSE)?));
    }
}

/// The JSON value at the start of `s` and its length in bytes.
fn json_value(s: &str) -> Option<(Value, usize)> {
    let mut values = serde_json::Deserializer::from_str(s).into_iter::<Value>();
    let value = values.next()?.ok()?;
    Some((value, values.byte_offset()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo_core::{ToolResult, ToolSpec};
    use serde_json::json;

    fn prefix() -> StablePrefix {
        StablePrefix::new("You are terse.")
            .with_tool(ToolSpec::new(
                "read",
                "Reads a file.",
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ))
            .unwrap()
    }

    #[test]
    fn system_turn_lists_tools_as_json() {
        let s = system_content(&prefix());
        assert!(s.starts_with("You are terse.\n\n"), "{s}");
        assert!(
            s.contains(r#"<tools>[{"name":"read","description":"Reads a file.","parameters":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}}]</tools>"#),
            "{s}"
        );
        assert_eq!(system_content(&StablePrefix::new("plain")), "plain");
    }

    #[test]
    fn tool_results_share_one_turn_and_assistant_calls_render_compactly() {
        let mut a = AssistantMessage::default();
        a.tool_calls
            .push(ToolCall::new("c1", "read", r#"{"path":"a"}"#));
        a.tool_calls.push(ToolCall::new("c2", "read", ""));
        let history = vec![
            Message::user("hi"),
            Message::Assistant(a.clone()),
            Message::Tool(ToolResult::ok(&a.tool_calls[0], "A")),
            Message::Tool(ToolResult::error(&a.tool_calls[1], "no path")),
            Message::assistant("done"),
        ];
        let t = turns(&prefix(), &history, "user").unwrap();
        let roles: Vec<&str> = t.iter().map(|t| t.role).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user", "assistant"]);
        assert_eq!(
            t[2].content,
            r#"<tool_call>[{"name":"read","arguments":{"path":"a"}},{"name":"read","arguments":{}}]</tool_call>"#
        );
        assert_eq!(t[4].content, "done");
        assert_eq!(
            t[3].content,
            "<tool_response>\nA\n</tool_response>\n<tool_response>\nerror: no path\n</tool_response>"
        );
    }

    #[test]
    fn images_are_unsupported() {
        let history = vec![Message::User {
            content: vec![ContentPart::Image {
                media_type: "image/png".into(),
                data: String::new(),
            }],
        }];
        assert!(matches!(
            turns(&prefix(), &history, "user"),
            Err(ModelError::Unsupported(_))
        ));
    }

    #[test]
    fn parse_round_trips_assistant_content() {
        let mut n = 0;
        let mut ids = || {
            n += 1;
            format!("call_{n}")
        };
        let out = r#"Let me look.<tool_call>[{"name":"read","arguments":{"path":"a \"q\" ]}"}},{"name":"ls","arguments":{}}]</tool_call>"#;
        let p = parse_output(out, &mut ids);
        assert_eq!(p.text, "Let me look.");
        assert_eq!(p.calls.len(), 2);
        assert_eq!(p.calls[0].name, "read");
        assert_eq!(p.calls[0].raw_arguments, r#"{"path":"a \"q\" ]}"}"#);
        assert_eq!(p.calls[1].id, "call_2");
        let msg = AssistantMessage {
            text: p.text.clone(),
            tool_calls: p.calls.clone(),
            ..Default::default()
        };
        assert_eq!(assistant_content(&msg), out);
    }

    #[test]
    fn incomplete_blocks_stay_text() {
        for out in [
            r#"<tool_call>[{"name":"read","arguments":{"path":"a"#,
            "plain answer",
            "<tool_call>[]</tool_call>",
        ] {
            let p = parse_output(out, || "x".into());
            assert_eq!((p.text.as_str(), p.calls.len()), (out, 0));
        }
    }
}
