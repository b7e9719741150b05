//! A Responses answer read into a [`ModelResponse`]: the `response` object of a unary call
//! (and of a stream's `response.completed` / `.incomplete` / `.failed` event), its output
//! items, usage and status.
//!
//! Shape: openai-python `types/responses/response.py`, `response_usage.py`,
//! `response_reasoning_item.py`, `response_function_tool_call.py`,
//! `response_output_message.py`. Usage is normalized as the chat-completions dialect does:
//! `input_tokens` (cached included) → `input_tokens`, `input_tokens_details.cached_tokens` →
//! `cache_read_tokens`, `input_tokens_details.cache_write_tokens` (GPT-5.6 and later) →
//! `cache_write_tokens`, `output_tokens_details.reasoning_tokens` → `reasoning_tokens`;
//! a count the server did not send stays `None`.

use halo_core::{
    AssistantMessage, FinishReason, ModelError, ModelResponse, Reasoning, ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::item::{call_data, opaque};
use crate::transport::text::{body_excerpt, redact};

/// The `response` object: only what the adapter reads.
#[derive(Debug, Deserialize)]
pub(crate) struct WireResponse<'a> {
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    pub(crate) error: Option<Value>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
    #[serde(default, borrow)]
    output: Vec<&'a RawValue>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Debug, Deserialize)]
struct IncompleteDetails {
    #[serde(default)]
    reason: Option<String>,
}

/// `usage` of a response.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    pub(crate) fn normalize(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self
                .input_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens),
            cache_write_tokens: self
                .input_tokens_details
                .as_ref()
                .and_then(|d| d.cache_write_tokens),
            reasoning_tokens: self
                .output_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens),
        }
    }
}

/// What the adapter reads of an output item.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ItemHead {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    // function_call
    call_id: Option<String>,
    name: Option<String>,
    arguments: Option<String>,
    // reasoning
    summary: Vec<TextPart>,
    // message
    content: Vec<ContentPart>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TextPart {
    text: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    refusal: Option<String>,
}

/// The text of a reasoning item's summary parts, joined by a blank line (the stream
/// emits the same separator between parts).
pub(crate) const SUMMARY_SEPARATOR: &str = "\n\n";

/// The turn of `items` (each with its place in the output), as a completed response with
/// `usage` would give it; `status` and `incomplete` say how it ended.
///
/// # Errors
/// [`ModelError::InvalidResponse`] for a `function_call` item without a `call_id` or a
/// name.
pub(crate) fn turn(
    items: &[(usize, &str)],
    status: Option<&str>,
    incomplete: Option<&str>,
    usage: Usage,
    model: Option<String>,
) -> Result<ModelResponse, ModelError> {
    let mut message = AssistantMessage::default();
    let mut refused = false;
    for &(index, raw) in items {
        let head: ItemHead = serde_json::from_str(raw).map_err(|e| {
            ModelError::InvalidResponse(format!(
                "an output item is not a Responses item ({e}): {}",
                body_excerpt(raw.as_bytes())
            ))
        })?;
        match head.kind.as_str() {
            "reasoning" => {
                let text = head
                    .summary
                    .iter()
                    .map(|p| p.text.as_str())
                    .collect::<Vec<_>>()
                    .join(SUMMARY_SEPARATOR);
                message.reasoning.push(Reasoning {
                    text,
                    signature: Some(opaque(index, "reasoning", raw)),
                });
            }
            "message" => {
                for part in &head.content {
                    match (part.kind.as_str(), &part.text, &part.refusal) {
                        ("output_text", Some(text), _) => message.text.push_str(text),
                        ("refusal", _, Some(refusal)) => {
                            message.text.push_str(refusal);
                            refused = true;
                        }
                        _ => {}
                    }
                }
                message.reasoning.push(Reasoning {
                    text: String::new(),
                    signature: Some(opaque(index, "message", raw)),
                });
            }
            "function_call" => {
                let (Some(call_id), Some(name)) = (head.call_id, head.name) else {
                    return Err(ModelError::InvalidResponse(format!(
                        "a function_call item has no call_id or name: {}",
                        body_excerpt(raw.as_bytes())
                    )));
                };
                let mut call = ToolCall::new(call_id, name, head.arguments.unwrap_or_default());
                call.provider_data = Some(call_data(head.id.as_deref(), index));
                message.tool_calls.push(call);
            }
            // Built-in tools' items (web search, file search…) are never asked for.
            _ => {}
        }
    }
    let mapped = match (status, incomplete) {
        (Some("incomplete"), Some("max_output_tokens")) => FinishReason::Length,
        (Some("incomplete"), Some("content_filter")) => FinishReason::ContentFilter,
        (Some("incomplete"), Some(other)) => FinishReason::Other(other.to_string()),
        _ if refused => FinishReason::ContentFilter,
        _ => FinishReason::Stop,
    };
    let finish_reason = crate::finish::settle(mapped, &mut message.tool_calls);
    Ok(ModelResponse {
        message,
        finish_reason,
        usage,
        model,
        provider: None,
        id: None,
    })
}

/// The error of a `failed` response (its `error: {code, message}`) or of an `error` event
/// (`{code, message, param}`), as [`ModelError::Stream`]: status 200, the code kept,
/// retryable for `server_error` and `rate_limit_exceeded`, an invalid request (with its
/// kind) for `invalid_prompt` and context-window codes.
pub(crate) fn failure(error: &Value, secret: Option<&str>) -> ModelError {
    let mut error = error.clone();
    if let Some(map) = error.as_object_mut()
        && !map.contains_key("type")
        && map.get("code").and_then(Value::as_str) == Some("invalid_prompt")
    {
        map.insert("type".into(), Value::from("invalid_request_error"));
    }
    crate::openai::error::in_stream(&serde_json::json!({ "error": error }), secret)
}

/// Parses a 200 body: one `response` object.
///
/// # Errors
/// [`ModelError::InvalidResponse`] when the body is not a response; the response's own
/// error ([`failure`]) when it failed or holds only an `error`.
pub(crate) fn parse(body: &[u8], secret: Option<&str>) -> Result<ModelResponse, ModelError> {
    let wire: WireResponse<'_> = serde_json::from_slice(body).map_err(|e| {
        ModelError::InvalidResponse(redact(
            format!(
                "the body is not a Responses object ({e}): {}",
                body_excerpt(body)
            ),
            secret,
        ))
    })?;
    if let Some(error) = wire.error.as_ref().filter(|e| !e.is_null()) {
        return Err(failure(error, secret));
    }
    if wire.object.as_deref().is_some_and(|o| o != "response") || wire.status.is_none() {
        return Err(ModelError::InvalidResponse(redact(
            format!("the body is not a Responses object: {}", body_excerpt(body)),
            secret,
        )));
    }
    finish(wire)
}

/// The turn of a whole `response` object (a unary answer, or a stream's last event).
pub(crate) fn finish(wire: WireResponse<'_>) -> Result<ModelResponse, ModelError> {
    let items: Vec<(usize, &str)> = wire
        .output
        .iter()
        .enumerate()
        .map(|(i, raw)| (i, raw.get()))
        .collect();
    let usage = wire
        .usage
        .as_ref()
        .map(WireUsage::normalize)
        .unwrap_or_default();
    let mut response = turn(
        &items,
        wire.status.as_deref(),
        wire.incomplete_details
            .as_ref()
            .and_then(|d| d.reason.as_deref()),
        usage,
        wire.model,
    )?;
    response.id = wire.id;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::responses::item::{call_item, opaque_item};

    #[test]
    fn items_become_text_reasoning_and_calls_with_their_places() {
        let body = br#"{"id":"resp_1","object":"response","status":"completed","model":"gpt-5",
            "output":[
              {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Plan."},{"type":"summary_text","text":"Read."}],"encrypted_content":"enc=="},
              {"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Reading.","annotations":[]}]},
              {"type":"function_call","id":"fc_1","call_id":"call_1","name":"read","arguments":"{\"path\":\"a\"}","status":"completed"}],
            "usage":{"input_tokens":2000,"input_tokens_details":{"cached_tokens":1024,"cache_write_tokens":128},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":30},"total_tokens":2050}}"#;
        let turn = parse(body, None).unwrap();
        assert_eq!(turn.message.text, "Reading.");
        assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
        assert_eq!(turn.message.reasoning_text().unwrap(), "Plan.\n\nRead.");
        let (index, kind, raw) =
            opaque_item(turn.message.reasoning[0].signature.as_deref().unwrap()).unwrap();
        assert_eq!((index, kind), (0, "reasoning"));
        assert!(raw.contains(r#""encrypted_content":"enc==""#), "{raw}");
        let call = &turn.message.tool_calls[0];
        assert_eq!(
            (call.id.as_str(), call.raw_arguments.as_str()),
            ("call_1", r#"{"path":"a"}"#)
        );
        assert_eq!(call_item(call), (Some("fc_1"), Some(2)));
        assert_eq!(
            turn.usage,
            Usage {
                input_tokens: Some(2000),
                output_tokens: Some(50),
                cache_read_tokens: Some(1024),
                cache_write_tokens: Some(128),
                reasoning_tokens: Some(30),
            }
        );
    }

    #[test]
    fn an_incomplete_or_failed_response_says_why() {
        let body = br#"{"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}"#;
        assert_eq!(
            parse(body, None).unwrap().finish_reason,
            FinishReason::Length
        );
        let body = br#"{"object":"response","status":"failed","error":{"code":"server_error","message":"The model failed."},"output":[]}"#;
        let err = parse(body, None).unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
        assert!(matches!(
            parse(b"<html>", None),
            Err(ModelError::InvalidResponse(_))
        ));
    }
}
