//! The Messages response: wire types, and their mapping to Halo's [`ModelResponse`],
//! [`Usage`] and [`FinishReason`].
//!
//! Shape: <https://platform.claude.com/docs/en/api/messages> (usage:
//! <https://platform.claude.com/docs/en/build-with-claude/prompt-caching>). [`WireUsage::normalize`] and [`finish_reason`] are shared with the streaming
//! path (`stream.rs`).

use halo_core::{
    AssistantMessage, FinishReason, ModelError, ModelResponse, Reasoning, ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::Value;

use super::request::REDACTED_THINKING_PREFIX;
use crate::transport::text::{body_excerpt, redact, truncate};

/// A `message` object. Every field is optional so that gateways that leave some out still
/// parse.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireMessage {
    #[serde(rename = "type")]
    kind: Option<String>,
    id: Option<String>,
    model: Option<String>,
    content: Vec<Value>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
    /// A 200 body holding an error (`{"type":"error","error":{…}}`).
    error: Option<Value>,
}

/// Anthropic's `usage`: `input_tokens` counts only the uncached input after the last cache
/// breakpoint; cache reads and writes are counted apart.
///
/// While streaming, `message_start` carries the input side and `message_delta` the
/// cumulative `output_tokens` (and, in newer API versions, the input fields again, also
/// cumulative); [`merge`](Self::merge) overwrites each field with the newest value, like
/// the official SDKs, so nothing is counted twice.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub(crate) struct WireUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Overwrites the fields `newer` reports.
    pub(crate) fn merge(&mut self, newer: WireUsage) {
        let take = |old: &mut Option<u64>, new: Option<u64>| {
            if new.is_some() {
                *old = new;
            }
        };
        take(&mut self.input_tokens, newer.input_tokens);
        take(&mut self.output_tokens, newer.output_tokens);
        take(
            &mut self.cache_creation_input_tokens,
            newer.cache_creation_input_tokens,
        );
        take(
            &mut self.cache_read_input_tokens,
            newer.cache_read_input_tokens,
        );
    }

    /// Halo's usage: `input_tokens` = `input_tokens` + `cache_read_input_tokens` +
    /// `cache_creation_input_tokens` (all input, cached included, as the other providers
    /// count it); `cache_read_tokens` and `cache_write_tokens` are the two cache fields.
    /// A field the server did not send stays `None` (a missing cache field adds nothing to
    /// the input total).
    pub(crate) fn normalize(self) -> Usage {
        let read = self.cache_read_input_tokens;
        let write = self.cache_creation_input_tokens;
        Usage {
            input_tokens: self.input_tokens.map(|uncached| {
                uncached
                    .saturating_add(read.unwrap_or(0))
                    .saturating_add(write.unwrap_or(0))
            }),
            output_tokens: self.output_tokens,
            cache_read_tokens: read,
            cache_write_tokens: write,
            reasoning_tokens: None,
        }
    }
}

/// Maps a `stop_reason` and settles the turn's tool calls against it
/// ([`crate::finish::settle`]): at `max_tokens` a call cut mid-JSON is dropped; whenever
/// calls remain the answer is [`FinishReason::ToolCalls`].
///
/// `end_turn`, `stop_sequence` → [`FinishReason::Stop`]; `max_tokens`,
/// `model_context_window_exceeded` → [`FinishReason::Length`]; `tool_use` →
/// [`FinishReason::ToolCalls`]; `refusal` → [`FinishReason::ContentFilter`]; others
/// (`pause_turn`) → [`FinishReason::Other`].
pub(crate) fn finish_reason(raw: Option<&str>, tool_calls: &mut Vec<ToolCall>) -> FinishReason {
    let mapped = match raw {
        Some("end_turn") | Some("stop_sequence") => FinishReason::Stop,
        Some("max_tokens") | Some("model_context_window_exceeded") => FinishReason::Length,
        Some("tool_use") => FinishReason::ToolCalls,
        Some("refusal") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_string()),
        None => FinishReason::Other("missing".to_string()),
    };
    crate::finish::settle(mapped, tool_calls)
}

/// The error for `stop_reason: "refusal"`: Claude's safety classifiers stopped the answer
/// (<https://docs.claude.com/en/docs/test-and-evaluate/strengthen-guardrails/handle-streaming-refusals>).
/// The text generated before the stop, if any, is kept in the message (bounded). Not
/// retryable unchanged: [`ModelError::Other`].
pub(crate) fn refusal_error(text: &str) -> ModelError {
    let said = if text.trim().is_empty() {
        String::new()
    } else {
        format!("; it had written: {}", truncate(text.trim()))
    };
    ModelError::Other(format!(
        "Claude refused to answer (stop_reason \"refusal\"){said}; change the prompt, \
         retrying it unchanged is refused again"
    ))
}

/// A `redacted_thinking` block kept as reasoning: empty text, the data behind
/// [`REDACTED_THINKING_PREFIX`] as the signature.
pub(crate) fn redacted_reasoning(data: &str) -> Reasoning {
    Reasoning {
        text: String::new(),
        signature: Some(format!("{REDACTED_THINKING_PREFIX}{data}")),
    }
}

/// Parses a 200 body into a [`ModelResponse`].
///
/// # Errors
/// [`ModelError::InvalidResponse`] when the body is not a message (not JSON, a `tool_use`
/// block without an id or name); `stop_reason: "refusal"` → [`refusal_error`]; an error
/// object inside a 200 body maps as an `error` event would
/// ([`in_stream`](super::error::in_stream)). Excerpts never hold `secret`.
pub(crate) fn parse(body: &[u8], secret: Option<&str>) -> Result<ModelResponse, ModelError> {
    let message: WireMessage = serde_json::from_slice(body).map_err(|e| {
        ModelError::InvalidResponse(redact(
            format!("the body is not a message ({e}): {}", body_excerpt(body)),
            secret,
        ))
    })?;
    if message.kind.as_deref() == Some("error") || message.error.is_some() {
        return Err(super::error::in_stream(
            &String::from_utf8_lossy(body),
            secret,
        ));
    }
    let mut text = String::new();
    let mut reasoning = Vec::new();
    let mut tool_calls = Vec::new();
    for (index, block) in message.content.iter().enumerate() {
        let field = |name: &str| block.get(name).and_then(Value::as_str);
        match field("type") {
            Some("text") => text.push_str(field("text").unwrap_or_default()),
            Some("thinking") => reasoning.push(Reasoning {
                text: field("thinking").unwrap_or_default().to_string(),
                signature: field("signature").map(str::to_string),
            }),
            Some("redacted_thinking") => {
                reasoning.push(redacted_reasoning(field("data").unwrap_or_default()));
            }
            Some("tool_use") => {
                let (Some(id), Some(name)) = (field("id"), field("name")) else {
                    return Err(ModelError::InvalidResponse(format!(
                        "content block {index} is a tool_use without an id or a name"
                    )));
                };
                let raw_arguments = match block.get("input") {
                    None | Some(Value::Null) => String::new(),
                    Some(input) => input.to_string(),
                };
                tool_calls.push(ToolCall::new(id, name, raw_arguments));
            }
            // Server tools, citations and future block types carry nothing Halo replays.
            _ => {}
        }
    }
    if message.stop_reason.as_deref() == Some("refusal") {
        return Err(refusal_error(&text));
    }
    let finish_reason = finish_reason(message.stop_reason.as_deref(), &mut tool_calls);
    Ok(ModelResponse {
        id: message.id.filter(|id| !id.is_empty()),
        message: AssistantMessage {
            text,
            reasoning,
            tool_calls,
        },
        finish_reason,
        usage: message.usage.map(WireUsage::normalize).unwrap_or_default(),
        model: message.model,
        provider: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_tokens_with_only_a_cut_tool_call_is_length_without_calls() {
        // Trigger: a whole (non-streamed) body whose tool_use input came back as an
        // unfinished string at stop_reason "max_tokens" (some gateways pass it through).
        let mut calls = vec![ToolCall::new("toolu_cut", "read", r#"{"path":"no"#)];
        assert_eq!(
            finish_reason(Some("max_tokens"), &mut calls),
            FinishReason::Length
        );
        assert!(calls.is_empty());
        let mut whole = vec![ToolCall::new("toolu_ok", "read", r#"{"path":"a"}"#)];
        assert_eq!(
            finish_reason(Some("max_tokens"), &mut whole),
            FinishReason::ToolCalls
        );
        assert_eq!(whole.len(), 1);
    }

    #[test]
    fn usage_adds_cache_reads_and_writes_to_the_input_total() {
        let wire: WireUsage = serde_json::from_str(
            r#"{"input_tokens":21,"cache_creation_input_tokens":188,"cache_read_input_tokens":1800,"output_tokens":393}"#,
        )
        .unwrap();
        assert_eq!(
            wire.normalize(),
            Usage {
                input_tokens: Some(2009),
                output_tokens: Some(393),
                cache_read_tokens: Some(1800),
                cache_write_tokens: Some(188),
                reasoning_tokens: None,
            }
        );
        let bare: WireUsage = serde_json::from_str(r#"{"input_tokens":5}"#).unwrap();
        assert_eq!(bare.normalize().input_tokens, Some(5));
        assert_eq!(bare.normalize().cache_read_tokens, None);
        assert_eq!(WireUsage::default().normalize(), Usage::default());
    }

    #[test]
    fn merge_overwrites_only_reported_fields() {
        let mut u = WireUsage {
            input_tokens: Some(10),
            output_tokens: Some(1),
            cache_creation_input_tokens: Some(0),
            cache_read_input_tokens: Some(2000),
        };
        u.merge(WireUsage {
            output_tokens: Some(50),
            ..WireUsage::default()
        });
        assert_eq!(u.output_tokens, Some(50));
        assert_eq!(u.normalize().input_tokens, Some(2010));
    }
}
