//! An MCP `tools/call` result as the text the model reads (MCP server/tools, "Tool
//! Result"): text blocks as they are; structured content as JSON text unless it only
//! repeats the content (its JSON in a text block, or members equal to the text or the
//! blocks); resource links as `[resource: <name> <uri>]`; embedded text
//! resources with their URI and text; images, audio and binary resources as a short note
//! (`[image: image/png, 1234 bytes]`); `isError` as an error result.

use halo_core::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The bytes a base64 string of `len` characters decodes to (padding ignored).
fn decoded_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=').len();
    trimmed * 3 / 4
}

/// Whether `structured` only repeats what `content` says, so the model needs it once:
/// - its JSON is a text block's (MCP's advice: "a tool that returns structured content
///   SHOULD also return the serialized JSON in a TextContent block");
/// - or it is an object each of whose members repeats the content: a string equal to a text
///   block or to all text blocks joined by newlines, or an array equal to the content blocks
///   themselves. npm `@modelcontextprotocol/server-filesystem` answers every call so:
///   `{"content": [{"type": "text", "text": T}], "structuredContent": {"content": T}}`, and
///   for media `{"content": [B], "structuredContent": {"content": [B]}}`.
fn repeats_content(structured: &serde_json::Value, result: &CallToolResult) -> bool {
    use serde_json::Value;
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let json = structured.to_string();
    if texts
        .iter()
        .any(|t| *t == json || serde_json::from_str::<Value>(t).is_ok_and(|v| &v == structured))
    {
        return true;
    }
    let Value::Object(members) = structured else {
        return false;
    };
    let joined = texts.join("\n");
    let blocks = || serde_json::to_value(&result.content).ok();
    !members.is_empty()
        && members.values().all(|member| match member {
            Value::String(s) => texts.contains(&s.as_str()) || (!texts.is_empty() && *s == joined),
            Value::Array(_) => blocks().is_some_and(|b| &b == member),
            _ => false,
        })
}

/// The model's view of one `tools/call` result.
pub(crate) fn to_output(result: &CallToolResult) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(i) => parts.push(format!(
                "[image: {}, {} bytes]",
                i.mime_type,
                decoded_len(&i.data)
            )),
            ContentBlock::Audio(a) => parts.push(format!(
                "[audio: {}, {} bytes]",
                a.mime_type,
                decoded_len(&a.data)
            )),
            ContentBlock::ResourceLink(r) => {
                let mut line = format!("[resource: {} {}", r.name, r.uri);
                if let Some(mime) = &r.mime_type {
                    line.push_str(&format!(", {mime}"));
                }
                line.push(']');
                if let Some(d) = r.description.as_deref().filter(|d| !d.is_empty()) {
                    line.push_str(&format!(" {d}"));
                }
                parts.push(line);
            }
            ContentBlock::Resource(e) => match &e.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    parts.push(format!("[resource {uri}]\n{text}"));
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => parts.push(format!(
                    "[resource {uri}: {}, {} bytes]",
                    mime_type.as_deref().unwrap_or("application/octet-stream"),
                    decoded_len(blob)
                )),
                _ => parts.push("[a resource of a kind this client does not read]".into()),
            },
            // `ContentBlock` is non-exhaustive: a block of a newer kind.
            #[allow(unreachable_patterns)]
            _ => parts.push("[content of a kind this client does not read]".into()),
        }
    }
    if let Some(structured) = &result.structured_content
        && !repeats_content(structured, result)
    {
        parts.push(structured.to_string());
    }
    let content = parts.join("\n");
    if result.is_error == Some(true) {
        ToolOutput::error(if content.is_empty() {
            "the tool failed without saying why".to_string()
        } else {
            content
        })
    } else {
        ToolOutput::text(content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_images_links_and_structured_content_reach_the_model() {
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "mem://x", "text": "inside"}},
                {"type": "resource", "resource": {"uri": "mem://b", "blob": "AAAAAAAA", "mimeType": "application/zip"}},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
            ],
            "structuredContent": {"temperature": 21}
        }))
        .unwrap();
        let out = to_output(&result);
        assert!(!out.is_error);
        assert_eq!(
            out.content,
            "hello\n[image: image/png, 3 bytes]\n[resource: a.txt file:///a.txt, text/plain]\n\
             [resource mem://x]\ninside\n[resource mem://b: application/zip, 6 bytes]\n\
             [audio: audio/wav, 3 bytes]\n{\"temperature\":21}"
        );
    }

    #[test]
    fn structured_content_with_a_text_copy_is_not_repeated() {
        let result = CallToolResult::structured(json!({"a": 1}));
        assert_eq!(to_output(&result).content, "{\"a\":1}");
    }

    // npm server-filesystem 2026.8.31 repeats every text in `structuredContent.content`
    // (read_text_file, list_directory, write_file, ...); the model read each file twice.
    #[test]
    fn server_filesystems_structured_copy_of_its_text_is_sent_once() {
        let text = "first line\nsecond line\n";
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"content": text}
        }))
        .unwrap();
        assert_eq!(to_output(&result).content, text);

        // read_media_file: the block itself, repeated as an array.
        let image = json!({"type": "image", "data": "AAAA", "mimeType": "image/png"});
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [image],
            "structuredContent": {"content": [image]}
        }))
        .unwrap();
        assert_eq!(to_output(&result).content, "[image: image/png, 3 bytes]");

        // Structured content that says more than the text is still sent.
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"content": text, "size": 23}
        }))
        .unwrap();
        assert_eq!(
            to_output(&result).content,
            format!("{text}\n{{\"content\":{},\"size\":23}}", json!(text))
        );
        let result: CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "structuredContent": {"all": "a\nb"}
        }))
        .unwrap();
        assert_eq!(to_output(&result).content, "a\nb");
    }

    #[test]
    fn is_error_becomes_an_error_result() {
        let result = CallToolResult::error(vec![ContentBlock::text("bad input")]);
        assert_eq!(to_output(&result), ToolOutput::error("bad input"));
        let empty: CallToolResult = serde_json::from_value(json!({"isError": true})).unwrap();
        assert!(to_output(&empty).is_error);
    }
}
