//! The `GenerateContentResponse`: wire types, and the assembler that turns one response
//! (or the chunks of a streamed one) into Halo's [`ModelResponse`], [`Usage`] and
//! [`FinishReason`].
//!
//! Shape: <https://ai.google.dev/api/generate-content#generatecontentresponse>. Both paths
//! go through one [`Assembler`], so a streamed turn equals the same turn read whole:
//!
//! - `thought: true` parts → [`Reasoning`]; consecutive thought parts form one run, and a
//!   thought part carrying a `thoughtSignature` closes its run with that signature.
//! - Text parts → the answer text (joined). A `thoughtSignature` on a text part (Gemini
//!   signs the last part of an answer without calls, and may send it alone in a final
//!   empty text part) is kept as a reasoning entry with empty text, which
//!   [`request`](super::request) replays on the text part.
//! - `functionCall` parts (always whole, even when streaming) → [`ToolCall`]s. The
//!   arguments object is kept as its compact JSON text. The API's `id`, when it sends one,
//!   is the call's id and is sent back; otherwise the call gets an internal id
//!   (`gemini-call-<n>`, unique per adapter) that never goes on the wire. Both the id and
//!   the part's `thoughtSignature` live in [`ToolCall::provider_data`] as
//!   `{"functionCallId": …, "thoughtSignature": …}`.
//! - Gemini has no tool-call finish reason: `STOP` with calls (in this chunk or an
//!   earlier one) is [`FinishReason::ToolCalls`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use halo_core::{
    AssistantMessage, FinishReason, ModelError, ModelResponse, ModelStreamEvent, Reasoning,
    ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::request::{CALL_ID_KEY, SIGNATURE_KEY};
use crate::transport::text::{body_excerpt, truncate};

/// One `GenerateContentResponse` (or one streamed chunk of it). Every field is optional so
/// that a chunk carrying only usage still parses.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct GenerateResponse {
    pub candidates: Vec<Candidate>,
    pub prompt_feedback: Option<PromptFeedback>,
    pub usage_metadata: Option<UsageMetadata>,
    pub model_version: Option<String>,
    /// The response's id, the same on every chunk of a stream.
    pub response_id: Option<String>,
    /// An error some gateways (and the stream) put in a 200 body.
    pub error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct Candidate {
    pub content: Option<WireContent>,
    pub finish_reason: Option<String>,
    /// The provider's explanation of `finish_reason` (sent with `MALFORMED_FUNCTION_CALL`,
    /// `SAFETY` and the like).
    pub finish_message: Option<String>,
    pub index: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireContent {
    pub parts: Vec<WirePart>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct WirePart {
    pub text: Option<String>,
    pub thought: Option<bool>,
    pub thought_signature: Option<String>,
    pub function_call: Option<WireFunctionCall>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WireFunctionCall {
    pub id: Option<String>,
    pub name: Option<String>,
    pub args: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct PromptFeedback {
    pub block_reason: Option<String>,
    /// The provider's explanation of `block_reason`.
    pub block_reason_message: Option<String>,
}

/// `usageMetadata`. Zero counts are left out of proto3 JSON, so an absent count in a
/// present object is `0`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct UsageMetadata {
    pub prompt_token_count: Option<u64>,
    pub cached_content_token_count: Option<u64>,
    pub candidates_token_count: Option<u64>,
    pub thoughts_token_count: Option<u64>,
    pub tool_use_prompt_token_count: Option<u64>,
    pub total_token_count: Option<u64>,
}

/// Normalizes `usageMetadata` (<https://ai.google.dev/api/generate-content#UsageMetadata>,
/// <https://ai.google.dev/gemini-api/docs/caching>):
/// - `input_tokens` = `promptTokenCount`, which already includes the cached tokens;
///   `toolUsePromptTokenCount` (Gemini's built-in tools, which Halo does not use) is not
///   added.
/// - `cache_read_tokens` = `cachedContentTokenCount`: explicit cached-content tokens and
///   implicit cache hits alike.
/// - `output_tokens` = `candidatesTokenCount` + `thoughtsTokenCount`:
///   `candidatesTokenCount` excludes thinking, and Halo's output count includes it.
/// - `reasoning_tokens` = `thoughtsTokenCount`.
/// - `cache_write_tokens`: not reported by Gemini (`None`); the adapter fills it in when it
///   created a cached content for the call.
///
/// No `usageMetadata` at all gives every count `None` (unknown).
pub(crate) fn usage(meta: Option<&UsageMetadata>) -> Usage {
    let Some(m) = meta else {
        return Usage::default();
    };
    let n = |v: Option<u64>| Some(v.unwrap_or(0));
    Usage {
        input_tokens: n(m.prompt_token_count),
        output_tokens: Some(
            m.candidates_token_count
                .unwrap_or(0)
                .saturating_add(m.thoughts_token_count.unwrap_or(0)),
        ),
        cache_read_tokens: n(m.cached_content_token_count),
        cache_write_tokens: None,
        reasoning_tokens: n(m.thoughts_token_count),
    }
}

/// Maps a raw `finishReason` (js-genai `FinishReason`) and settles the turn's tool calls
/// against it ([`crate::finish::settle`]): any turn with calls left is
/// [`FinishReason::ToolCalls`] (Gemini sends calls whole, so `MAX_TOKENS` drops none unless
/// the arguments are not an object).
pub(crate) fn finish_reason(raw: Option<&str>, tool_calls: &mut Vec<ToolCall>) -> FinishReason {
    let mapped = match raw {
        Some("STOP") => FinishReason::Stop,
        Some("MAX_TOKENS") => FinishReason::Length,
        Some(
            "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
            | "IMAGE_RECITATION"
            | "LANGUAGE",
        ) => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_string()),
        None => FinishReason::Other("missing".to_string()),
    };
    crate::finish::settle(mapped, tool_calls)
}

/// The error for a turn Gemini ended without a usable answer, with the provider's own
/// explanation (`finishMessage`, `blockReasonMessage`) kept:
///
/// - `promptFeedback.blockReason` (and no `finishReason`): the prompt was blocked →
///   [`ModelError::Other`] naming the reason; not retryable unchanged.
/// - `MALFORMED_FUNCTION_CALL`: the model wrote a function call that does not parse →
///   [`ModelError::InvalidResponse`] saying to retry (it usually succeeds on a second
///   try; core's retry policy does not retry this variant on its own).
/// - `SAFETY`, `RECITATION`, `PROHIBITED_CONTENT`, `BLOCKLIST`, `SPII`, `LANGUAGE` and the
///   `IMAGE_*` reasons: the answer was withheld → [`ModelError::Other`] naming the
///   category; not retryable unchanged.
///
/// Source: `FinishReason` and `BlockedReason` in js-genai's types
/// (<https://github.com/googleapis/js-genai/blob/main/src/types.ts>) and
/// <https://ai.google.dev/api/generate-content#FinishReason>.
pub(crate) fn stop_error(
    finish: Option<&str>,
    finish_message: Option<&str>,
    blocked: Option<&str>,
    blocked_message: Option<&str>,
) -> Option<ModelError> {
    let explain = |message: Option<&str>| match message {
        Some(m) => format!(": {}", truncate(m)),
        None => String::new(),
    };
    let Some(finish) = finish else {
        let reason = blocked?;
        return Some(ModelError::Other(format!(
            "Gemini blocked the prompt (promptFeedback.blockReason {reason}){}; nothing was \
             generated: change the prompt or the request's safetySettings, retrying it \
             unchanged is blocked again",
            explain(blocked_message)
        )));
    };
    let category = match finish {
        "MALFORMED_FUNCTION_CALL" => {
            return Some(ModelError::InvalidResponse(format!(
                "Gemini generated a malformed function call (finishReason \
                 MALFORMED_FUNCTION_CALL){}; no call was run: retry the request",
                explain(finish_message)
            )));
        }
        "SAFETY" | "IMAGE_SAFETY" => "safety filters",
        "RECITATION" | "IMAGE_RECITATION" => "recitation of copyrighted or training material",
        "PROHIBITED_CONTENT" | "IMAGE_PROHIBITED_CONTENT" => "prohibited content",
        "BLOCKLIST" => "a term on the blocklist",
        "SPII" => "sensitive personally identifiable information",
        "LANGUAGE" => "an unsupported language",
        _ => return None,
    };
    Some(ModelError::Other(format!(
        "Gemini withheld the answer for {category} (finishReason {finish}){}; change the \
         prompt or the request's safetySettings, retrying it unchanged stops the same way",
        explain(finish_message)
    )))
}

/// The source of internal ids for calls the API sent without one: `gemini-call-<n>`,
/// counting per adapter (clones of the source share the count).
#[derive(Debug, Clone, Default)]
pub(crate) struct CallIdSource(Arc<AtomicU64>);

impl CallIdSource {
    pub(crate) fn new(counter: Arc<AtomicU64>) -> Self {
        CallIdSource(counter)
    }

    fn next(&self) -> String {
        format!("gemini-call-{}", self.0.fetch_add(1, Ordering::Relaxed))
    }
}

/// Assembles one turn from a whole response or from its streamed chunks.
#[derive(Debug)]
pub(crate) struct Assembler {
    ids: CallIdSource,
    text: String,
    text_signature: Option<String>,
    reasoning: Vec<Reasoning>,
    /// The last reasoning entry is a thought run still open for more thought text.
    thought_open: bool,
    calls: Vec<ToolCall>,
    finish: Option<String>,
    finish_message: Option<String>,
    blocked: Option<String>,
    blocked_message: Option<String>,
    usage: Option<UsageMetadata>,
    id: Option<String>,
    model: Option<String>,
    saw_candidate: bool,
}

impl Assembler {
    pub(crate) fn new(ids: CallIdSource) -> Self {
        Assembler {
            ids,
            text: String::new(),
            text_signature: None,
            reasoning: Vec::new(),
            thought_open: false,
            calls: Vec::new(),
            finish: None,
            finish_message: None,
            blocked: None,
            blocked_message: None,
            usage: None,
            id: None,
            model: None,
            saw_candidate: false,
        }
    }

    /// Applies one response or chunk, pushing the deltas it carries onto `out`.
    ///
    /// # Errors
    /// An `error` object in the body (mapped by status); [`ModelError::InvalidResponse`]
    /// for a function call without a name.
    pub(crate) fn push(
        &mut self,
        chunk: GenerateResponse,
        out: &mut Vec<ModelStreamEvent>,
        secret: Option<&str>,
    ) -> Result<(), ModelError> {
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(super::error::in_stream(
                &serde_json::json!({ "error": error }),
                secret,
            ));
        }
        if self.model.is_none() {
            self.model = chunk.model_version.filter(|m| !m.is_empty());
        }
        if self.id.is_none() {
            self.id = chunk.response_id.filter(|id| !id.is_empty());
        }
        if chunk.usage_metadata.is_some() {
            self.usage = chunk.usage_metadata;
        }
        if let Some(feedback) = chunk.prompt_feedback {
            if let Some(reason) = feedback.block_reason.filter(|r| !r.is_empty()) {
                self.blocked = Some(reason);
            }
            if let Some(message) = feedback.block_reason_message.filter(|m| !m.is_empty()) {
                self.blocked_message = Some(message);
            }
        }
        for candidate in chunk.candidates {
            // Only the first candidate is the turn (`candidateCount` is not requested).
            if candidate.index.unwrap_or(0) != 0 {
                continue;
            }
            self.saw_candidate = true;
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                self.part(part, out)?;
            }
            if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(reason);
            }
            if let Some(message) = candidate.finish_message.filter(|m| !m.is_empty()) {
                self.finish_message = Some(message);
            }
        }
        Ok(())
    }

    fn part(&mut self, part: WirePart, out: &mut Vec<ModelStreamEvent>) -> Result<(), ModelError> {
        if let Some(call) = part.function_call {
            self.thought_open = false;
            let index = self.calls.len();
            let name = call.name.filter(|n| !n.is_empty()).ok_or_else(|| {
                ModelError::InvalidResponse(format!("function call {index} has no name"))
            })?;
            let wire_id = call.id.filter(|id| !id.is_empty());
            let args = match call.args {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(v) => v,
            };
            let raw_arguments = args.to_string();
            let mut data = Map::new();
            if let Some(id) = &wire_id {
                data.insert(CALL_ID_KEY.into(), Value::String(id.clone()));
            }
            if let Some(sig) = part.thought_signature.filter(|s| !s.is_empty()) {
                data.insert(SIGNATURE_KEY.into(), Value::String(sig));
            }
            let id = wire_id.unwrap_or_else(|| self.ids.next());
            out.push(ModelStreamEvent::ToolCallStart {
                index,
                id: id.clone(),
                name: name.clone(),
            });
            out.push(ModelStreamEvent::ToolCallDelta {
                index,
                arguments: raw_arguments.clone(),
            });
            let mut tool_call = ToolCall::new(id, name, raw_arguments);
            tool_call.provider_data = (!data.is_empty()).then_some(Value::Object(data));
            self.calls.push(tool_call);
            return Ok(());
        }
        let text = part.text.unwrap_or_default();
        let signature = part.thought_signature.filter(|s| !s.is_empty());
        if part.thought == Some(true) {
            if !text.is_empty() {
                out.push(ModelStreamEvent::ReasoningDelta(text.clone()));
                match self.reasoning.last_mut() {
                    Some(run) if self.thought_open => run.text.push_str(&text),
                    _ => self.reasoning.push(Reasoning {
                        text,
                        signature: None,
                    }),
                }
                self.thought_open = true;
            }
            if let Some(sig) = signature {
                match self.reasoning.last_mut() {
                    Some(run) if self.thought_open => run.signature = Some(sig),
                    _ => self.reasoning.push(Reasoning {
                        text: String::new(),
                        signature: Some(sig),
                    }),
                }
                self.thought_open = false;
            }
            return Ok(());
        }
        self.thought_open = false;
        if !text.is_empty() {
            out.push(ModelStreamEvent::TextDelta(text.clone()));
            self.text.push_str(&text);
        }
        if signature.is_some() {
            self.text_signature = signature;
        }
        Ok(())
    }

    /// The assembled turn.
    ///
    /// # Errors
    /// Streaming (`streamed`): [`ModelError::Truncated`] when no chunk carried a
    /// `finishReason` (and the prompt was not blocked). Whole responses:
    /// [`ModelError::InvalidResponse`] when there is neither a candidate nor a block reason.
    /// Both: a blocked prompt, a withheld answer or a malformed function call, as
    /// [`stop_error`] says.
    pub(crate) fn finish(mut self, streamed: bool) -> Result<ModelResponse, ModelError> {
        if let Some(error) = stop_error(
            self.finish.as_deref(),
            self.finish_message.as_deref(),
            self.blocked.as_deref(),
            self.blocked_message.as_deref(),
        ) {
            return Err(error);
        }
        if self.finish.is_none() {
            if streamed {
                return Err(ModelError::Truncated(
                    "the stream ended before a chunk with a finishReason".into(),
                ));
            }
            if !self.saw_candidate {
                return Err(ModelError::InvalidResponse(
                    "the response has no candidates and no promptFeedback.blockReason".into(),
                ));
            }
        }
        if let Some(sig) = self.text_signature.take() {
            self.reasoning.push(Reasoning {
                text: String::new(),
                signature: Some(sig),
            });
        }
        let finish_reason = finish_reason(self.finish.as_deref(), &mut self.calls);
        Ok(ModelResponse {
            id: self.id,
            message: AssistantMessage {
                text: self.text,
                reasoning: self.reasoning,
                tool_calls: self.calls,
            },
            finish_reason,
            usage: usage(self.usage.as_ref()),
            model: self.model,
            provider: None,
        })
    }
}

/// Parses a 200 `generateContent` body.
///
/// # Errors
/// [`ModelError::InvalidResponse`] when the body is not a `GenerateContentResponse`, has
/// no candidate and no block reason, or holds a nameless function call; an `error` object
/// in the body maps by its status.
pub(crate) fn parse(
    body: &[u8],
    ids: CallIdSource,
    secret: Option<&str>,
) -> Result<ModelResponse, ModelError> {
    let response: GenerateResponse = serde_json::from_slice(body).map_err(|e| {
        ModelError::InvalidResponse(format!(
            "the body is not a GenerateContentResponse ({e}): {}",
            body_excerpt(body)
        ))
    })?;
    let mut assembler = Assembler::new(ids);
    let mut ignored = Vec::new();
    assembler.push(response, &mut ignored, secret)?;
    assembler.finish(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_json(v: Value) -> Result<ModelResponse, ModelError> {
        parse(
            &serde_json::to_vec(&v).unwrap(),
            CallIdSource::default(),
            None,
        )
    }

    #[test]
    fn usage_counts_thoughts_as_output_and_cached_inside_input() {
        let m: UsageMetadata = serde_json::from_value(json!({
            "promptTokenCount": 5000, "cachedContentTokenCount": 4096,
            "candidatesTokenCount": 40, "thoughtsTokenCount": 120, "totalTokenCount": 5160
        }))
        .unwrap();
        assert_eq!(
            usage(Some(&m)),
            Usage {
                input_tokens: Some(5000),
                output_tokens: Some(160),
                cache_read_tokens: Some(4096),
                cache_write_tokens: None,
                reasoning_tokens: Some(120),
            }
        );
        // Zero counts are omitted on the wire: present metadata means 0, absent means unknown.
        let m: UsageMetadata =
            serde_json::from_value(json!({"promptTokenCount": 12, "candidatesTokenCount": 3}))
                .unwrap();
        let u = usage(Some(&m));
        assert_eq!(
            (u.cache_read_tokens, u.reasoning_tokens),
            (Some(0), Some(0))
        );
        assert_eq!(usage(None), Usage::default());
    }

    #[test]
    fn stop_with_calls_is_tool_calls_and_ids_are_made_up_only_when_missing() {
        let r = parse_json(
            json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "read", "args": {"path": "a"}}, "thoughtSignature": "sig-1"},
            {"functionCall": {"name": "ls"}},
            {"functionCall": {"id": "fc-7", "name": "grep", "args": {"q": "x"}}}
        ]}, "finishReason": "STOP"}], "modelVersion": "gemini-2.5-flash"}),
        )
        .unwrap();
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        let calls = &r.message.tool_calls;
        assert_eq!(
            calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["gemini-call-0", "gemini-call-1", "fc-7"]
        );
        assert_eq!(calls[0].raw_arguments, "{\"path\":\"a\"}");
        assert_eq!(calls[1].raw_arguments, "{}");
        assert_eq!(
            calls[0].provider_data,
            Some(json!({"thoughtSignature": "sig-1"}))
        );
        assert_eq!(calls[1].provider_data, None);
        assert_eq!(
            calls[2].provider_data,
            Some(json!({"functionCallId": "fc-7"}))
        );
        assert_eq!(r.model.as_deref(), Some("gemini-2.5-flash"));
    }

    #[test]
    fn thoughts_become_reasoning_and_a_text_signature_is_kept() {
        let r = parse_json(json!({"candidates": [{"content": {"parts": [
            {"text": "Let me think.", "thought": true},
            {"text": " Done.", "thought": true, "thoughtSignature": "t-sig"},
            {"text": "Answer"},
            {"text": "!", "thoughtSignature": "a-sig"}
        ]}, "finishReason": "STOP"}]}))
        .unwrap();
        assert_eq!(r.finish_reason, FinishReason::Stop);
        assert_eq!(r.message.text, "Answer!");
        assert_eq!(
            r.message.reasoning,
            [
                Reasoning {
                    text: "Let me think. Done.".into(),
                    signature: Some("t-sig".into())
                },
                Reasoning {
                    text: String::new(),
                    signature: Some("a-sig".into())
                },
            ]
        );
    }

    #[test]
    fn max_tokens_keeps_whole_function_calls() {
        // Trigger: MAX_TOKENS after a complete functionCall (Gemini sends calls whole).
        let r = parse_json(json!({"candidates": [{"content": {"parts": [
            {"functionCall": {"name": "read", "args": {"path": "a"}}}
        ]}, "finishReason": "MAX_TOKENS"}]}))
        .unwrap();
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(r.message.tool_calls.len(), 1);
        let text_only = parse_json(json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "MAX_TOKENS"}]})).unwrap();
        assert_eq!(text_only.finish_reason, FinishReason::Length);
    }

    #[test]
    fn malformed_function_call_is_an_error_that_says_retry_and_keeps_finish_message() {
        // Trigger: finishReason MALFORMED_FUNCTION_CALL with an empty answer.
        let e = parse_json(json!({"candidates": [{"content": {"parts": []}, "finishReason": "MALFORMED_FUNCTION_CALL", "finishMessage": "Malformed function call: print(x"}]})).unwrap_err();
        let ModelError::InvalidResponse(message) = &e else {
            panic!("{e:?}")
        };
        assert!(message.contains("MALFORMED_FUNCTION_CALL"), "{message}");
        assert!(
            message.contains("Malformed function call: print(x"),
            "{message}"
        );
        assert!(message.contains("retry the request"), "{message}");
    }

    #[test]
    fn safety_recitation_and_prohibited_content_are_errors_naming_the_category() {
        // Trigger: finishReason SAFETY / RECITATION / PROHIBITED_CONTENT (answer withheld).
        for (reason, category) in [
            ("SAFETY", "safety filters"),
            ("RECITATION", "recitation"),
            ("PROHIBITED_CONTENT", "prohibited content"),
        ] {
            let e = parse_json(json!({"candidates": [{"finishReason": reason, "finishMessage": "why it stopped"}]})).unwrap_err();
            let ModelError::Other(message) = &e else {
                panic!("{e:?}")
            };
            assert!(message.contains(category), "{message}");
            assert!(message.contains(reason), "{message}");
            assert!(message.contains(": why it stopped;"), "{message}");
            assert!(!e.is_retryable());
        }
    }

    #[test]
    fn a_blocked_prompt_is_an_error_with_the_block_reason_and_message() {
        // Trigger: promptFeedback.blockReason and no candidates.
        let e = parse_json(json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "blockReasonMessage": "The prompt is not allowed."}, "usageMetadata": {"promptTokenCount": 9}})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Gemini blocked the prompt (promptFeedback.blockReason PROHIBITED_CONTENT): The \
             prompt is not allowed.; nothing was generated: change the prompt or the request's \
             safetySettings, retrying it unchanged is blocked again"
        );
        assert!(!e.is_retryable());
    }

    #[test]
    fn finish_reasons_and_blocked_prompts_map() {
        let one = |reason: &str| {
            parse_json(json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]}))
                .unwrap()
                .finish_reason
        };
        assert_eq!(one("MAX_TOKENS"), FinishReason::Length);
        assert_eq!(one("OTHER"), FinishReason::Other("OTHER".into()));
        assert!(matches!(
            parse_json(json!({})),
            Err(ModelError::InvalidResponse(_))
        ));
        assert!(matches!(
            parse_json(
                json!({"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}, "finishReason": "STOP"}]})
            ),
            Err(ModelError::InvalidResponse(_))
        ));
        assert!(matches!(
            parse(b"<html>", CallIdSource::default(), None),
            Err(ModelError::InvalidResponse(_))
        ));
    }
}
