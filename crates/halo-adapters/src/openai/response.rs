//! The chat-completions response: wire types, and their mapping to Halo's
//! [`ModelResponse`], [`Usage`] and [`FinishReason`].
//!
//! Shape: <https://platform.openai.com/docs/api-reference/chat/object>, with DeepSeek's
//! `reasoning_content` and `usage.prompt_cache_hit_tokens` / `prompt_cache_miss_tokens`
//! (<https://api-docs.deepseek.com/guides/kv_cache>) and llama.cpp's `timings.cache_n`.
//! [`usage`] and [`finish_reason`] are shared with the streaming path (`stream.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

use halo_core::{
    AssistantMessage, FinishReason, ModelError, ModelResponse, Reasoning, ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::Value;
use smol_str::SmolStr;

/// A `chat.completion` object. Every field is optional so that servers that leave some
/// out still parse; what Halo needs is checked in [`parse`].
///
/// `scan.rs` reads these structs too, field by field: a field added to any of them is
/// added there and to the generator of its tests, or bodies carrying it are read without it.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(default)]
pub(crate) struct ChatCompletion {
    pub id: Option<String>,
    pub model: Option<String>,
    pub choices: Vec<Choice>,
    pub usage: Option<WireUsage>,
    /// llama.cpp `llama-server`'s non-standard timings
    /// (<https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md>).
    pub timings: Option<Timings>,
    /// Some proxies answer HTTP 200 with an error object.
    pub error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(default)]
pub(crate) struct Choice {
    pub message: Option<ResponseMessage>,
    pub finish_reason: Option<SmolStr>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(default)]
pub(crate) struct ResponseMessage {
    pub content: Option<WireContent>,
    /// DeepSeek, llama.cpp `--reasoning-format deepseek`.
    pub reasoning_content: Option<String>,
    /// vLLM and OpenRouter name it `reasoning`.
    pub reasoning: Option<Value>,
    pub tool_calls: Option<Vec<ResponseToolCall>>,
    pub refusal: Option<String>,
}

/// `content` as a string, or (some servers) an array of `{"type":"text","text":..}` parts.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(untagged)]
pub(crate) enum WireContent {
    Text(String),
    Parts(Vec<Value>),
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(default)]
pub(crate) struct ResponseToolCall {
    pub id: Option<SmolStr>,
    pub function: Option<ResponseFunction>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(default)]
pub(crate) struct ResponseFunction {
    pub name: Option<SmolStr>,
    pub arguments: Option<WireArguments>,
}

/// `function.arguments`: a JSON string on the wire, or (some servers) the object itself,
/// which is still understood.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(untagged)]
pub(crate) enum WireArguments {
    Text(SmolStr),
    Other(Value),
}

/// The `usage` object of OpenAI, DeepSeek and the compatible servers.
#[derive(Debug, Default, Clone, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(default)]
pub(crate) struct WireUsage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// DeepSeek: prompt tokens served from the context cache.
    pub prompt_cache_hit_tokens: Option<u64>,
    /// DeepSeek: prompt tokens not served from the cache.
    pub prompt_cache_miss_tokens: Option<u64>,
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(default)]
pub(crate) struct PromptTokensDetails {
    pub cached_tokens: Option<u64>,
    /// OpenAI GPT-5.6 and later; some llama.cpp forks.
    pub cache_write_tokens: Option<u64>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(default)]
pub(crate) struct CompletionTokensDetails {
    pub reasoning_tokens: Option<u64>,
}

/// llama.cpp `llama-server`'s `timings` (`result_timings::to_json` in
/// <https://github.com/ggml-org/llama.cpp/tree/master/tools/server>): `cache_n` prompt
/// tokens reused from the KV cache, `prompt_n` prompt tokens evaluated for this request,
/// `predicted_n` tokens generated.
#[derive(Debug, Default, Clone, Deserialize)]
#[cfg_attr(test, derive(PartialEq))]
#[serde(default)]
pub(crate) struct Timings {
    pub cache_n: Option<u64>,
    pub prompt_n: Option<u64>,
    pub predicted_n: Option<u64>,
}

/// Normalizes usage. Each count comes from `usage` when the server reported it there, else
/// from llama.cpp's `timings`, which some llama.cpp builds send *instead of* `usage`:
///
/// - `input_tokens`: `prompt_tokens` (cached included), or DeepSeek's hit + miss when
///   `prompt_tokens` is missing, or `timings.prompt_n + timings.cache_n` (evaluated plus
///   reused: the whole prompt).
/// - `output_tokens`: `completion_tokens`, or `timings.predicted_n`.
/// - `cache_read_tokens`: DeepSeek's `prompt_cache_hit_tokens`, else
///   `prompt_tokens_details.cached_tokens` (OpenAI, llama.cpp, vLLM, newer Ollama), else
///   `timings.cache_n`.
///
/// A count no source reports is `None` (unknown), never `0` (many Ollama versions send no
/// cache field: <https://github.com/ollama/ollama/issues/8008>).
pub(crate) fn usage(wire: Option<&WireUsage>, timings: Option<&Timings>) -> Usage {
    let details = wire.and_then(|u| u.prompt_tokens_details.as_ref());
    let cache_n = timings.and_then(|t| t.cache_n);
    let input_tokens = wire
        .and_then(|u| {
            u.prompt_tokens.or_else(|| {
                u.prompt_cache_hit_tokens
                    .zip(u.prompt_cache_miss_tokens)
                    .map(|(hit, miss)| hit.saturating_add(miss))
            })
        })
        .or_else(|| {
            timings
                .and_then(|t| t.prompt_n.zip(t.cache_n))
                .map(|(evaluated, reused)| evaluated.saturating_add(reused))
        });
    Usage {
        input_tokens,
        output_tokens: wire
            .and_then(|u| u.completion_tokens)
            .or_else(|| timings.and_then(|t| t.predicted_n)),
        cache_read_tokens: wire
            .and_then(|u| u.prompt_cache_hit_tokens)
            .or_else(|| details.and_then(|d| d.cached_tokens))
            .or(cache_n),
        cache_write_tokens: details.and_then(|d| d.cache_write_tokens),
        reasoning_tokens: wire
            .and_then(|u| u.completion_tokens_details.as_ref())
            .and_then(|d| d.reasoning_tokens),
    }
}

/// Maps a raw `finish_reason` and settles the turn's tool calls against it
/// ([`crate::finish::settle`]): at `length` a call cut mid-JSON is dropped; whenever calls
/// remain the answer is [`FinishReason::ToolCalls`], whatever the server said (Ollama says
/// `stop`).
pub(crate) fn finish_reason(raw: Option<&str>, tool_calls: &mut Vec<ToolCall>) -> FinishReason {
    let mapped = match raw {
        Some("stop") => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        Some("tool_calls") | Some("function_call") => FinishReason::ToolCalls,
        Some("content_filter") => FinishReason::ContentFilter,
        Some(other) => FinishReason::Other(other.to_string()),
        None => FinishReason::Other("missing".to_string()),
    };
    crate::finish::settle(mapped, tool_calls)
}

/// Ids for tool calls a server sent without one (some local servers): unique in the process.
static NEXT_CALL_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id (`call_halo_N`) for a tool call the server sent without one.
pub(crate) fn fresh_call_id() -> String {
    format!("call_halo_{}", NEXT_CALL_ID.fetch_add(1, Ordering::Relaxed))
}

/// DeepSeek's `finish_reason` when it interrupted inference for lack of resources
/// (<https://api-docs.deepseek.com/api/create-chat-completion>).
pub(crate) const INSUFFICIENT_SYSTEM_RESOURCE: &str = "insufficient_system_resource";

/// The error for a turn DeepSeek cut short with [`INSUFFICIENT_SYSTEM_RESOURCE`]:
/// [`ModelError::Truncated`], which is retryable, because the turn is incomplete and asking
/// again later can succeed. (It is not an HTTP failure: the status was 200.)
pub(crate) fn insufficient_system_resource() -> ModelError {
    ModelError::Truncated(format!(
        "{INSUFFICIENT_SYSTEM_RESOURCE}: the provider interrupted inference for lack of resources"
    ))
}

/// Parses a 200 body into a [`ModelResponse`].
///
/// # Errors
/// [`ModelError::InvalidResponse`] when the body is not a chat completion: not JSON, no
/// choices, a tool call without a name. [`ModelError::Truncated`] (retryable) for DeepSeek's
/// `insufficient_system_resource` finish reason.
pub(crate) fn parse(body: &[u8]) -> Result<ModelResponse, ModelError> {
    let not_completion = |e: &dyn std::fmt::Display| {
        ModelError::InvalidResponse(format!(
            "the body is not a chat completion ({e}): {}",
            crate::transport::text::body_excerpt(body)
        ))
    };
    // UTF-8 is checked once for the whole body, not string by string (`from_slice` checks
    // each string it reads: a quarter of the parse of a small completion).
    let text = std::str::from_utf8(body).map_err(|e| not_completion(&e))?;
    // The common shapes directly; anything else (and every error) through serde_json.
    let completion = match super::scan::read(text) {
        Some(completion) => completion,
        None => serde_json::from_str(text).map_err(|e| not_completion(&e))?,
    };
    if completion.choices.is_empty() {
        let why = match &completion.error {
            Some(err) => format!(
                "the body holds an error instead of choices: {}",
                super::error::error_value_message(err)
                    .unwrap_or_else(|| crate::transport::text::body_excerpt(body))
            ),
            None => "the response has no choices".to_string(),
        };
        return Err(ModelError::InvalidResponse(why));
    }
    let usage = usage(completion.usage.as_ref(), completion.timings.as_ref());
    let mut choices = completion.choices;
    let choice = choices.swap_remove(0);
    if choice.finish_reason.as_deref() == Some(INSUFFICIENT_SYSTEM_RESOURCE) {
        return Err(insufficient_system_resource());
    }
    let wire = choice.message.unwrap_or_default();

    let mut text = match wire.content {
        Some(WireContent::Text(t)) => t,
        Some(WireContent::Parts(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        None => String::new(),
    };
    // A Structured Outputs refusal comes as `message.refusal` with `content: null`
    // (<https://platform.openai.com/docs/guides/structured-outputs#refusals>): its text is
    // the answer, and the turn finishes as filtered so an object run does not ask again.
    let mut refused = false;
    if text.is_empty()
        && let Some(refusal) = wire.refusal.filter(|r| !r.is_empty())
    {
        text = refusal;
        refused = true;
    }

    let reasoning_text = wire
        .reasoning_content
        .or(match wire.reasoning {
            Some(Value::String(s)) => Some(s),
            _ => None,
        })
        .filter(|r| !r.is_empty());
    let reasoning = reasoning_text
        .map(|text| {
            vec![Reasoning {
                text,
                signature: None,
            }]
        })
        .unwrap_or_default();

    let wire_calls = wire.tool_calls.unwrap_or_default();
    let mut tool_calls = Vec::with_capacity(wire_calls.len());
    for (index, call) in wire_calls.into_iter().enumerate() {
        let function = call.function.unwrap_or_default();
        let name = function.name.filter(|n| !n.is_empty()).ok_or_else(|| {
            ModelError::InvalidResponse(format!("tool call {index} has no function name"))
        })?;
        let raw_arguments = match function.arguments {
            Some(WireArguments::Text(s)) => s,
            None | Some(WireArguments::Other(Value::Null)) => SmolStr::default(),
            // Not the documented shape, but lossless: the object's JSON text.
            Some(WireArguments::Other(other)) => other.to_string().into(),
        };
        let id = call
            .id
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| fresh_call_id().into());
        tool_calls.push(ToolCall::new(id, name, raw_arguments));
    }

    let mut finish_reason = finish_reason(choice.finish_reason.as_deref(), &mut tool_calls);
    if refused && tool_calls.is_empty() {
        finish_reason = FinishReason::ContentFilter;
    }
    Ok(ModelResponse {
        id: completion.id.filter(|id| !id.is_empty()),
        message: AssistantMessage {
            text,
            reasoning,
            tool_calls,
        },
        finish_reason,
        usage,
        model: completion.model,
        provider: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_cut_by_length_is_dropped_and_a_complete_one_kept() {
        // Trigger: finish_reason "length" with the last call's arguments cut mid-JSON.
        let body = br#"{"choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":null,"tool_calls":[
            {"id":"call_ok","type":"function","function":{"name":"read","arguments":"{\"path\":\"a\"}"}},
            {"id":"call_cut","type":"function","function":{"name":"read","arguments":"{\"path\":\"no"}}]}}]}"#;
        let turn = parse(body).unwrap();
        assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
        let ids: Vec<_> = turn
            .message
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(ids, ["call_ok"]);
    }

    #[test]
    fn deepseek_usage_prefers_hit_tokens_and_sums_when_prompt_tokens_missing() {
        let u: WireUsage = serde_json::from_str(
            r#"{"completion_tokens":5,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}"#,
        )
        .unwrap();
        let got = usage(Some(&u), None);
        assert_eq!(got.input_tokens, Some(100));
        assert_eq!(got.cache_read_tokens, Some(64));
        assert_eq!(got.output_tokens, Some(5));
        assert_eq!(got.cache_write_tokens, None);
    }

    #[test]
    fn llama_cpp_timings_fill_in_cache_reads() {
        let u: WireUsage = serde_json::from_str(r#"{"prompt_tokens":300}"#).unwrap();
        let t: Timings = serde_json::from_str(r#"{"cache_n":292}"#).unwrap();
        assert_eq!(usage(Some(&u), Some(&t)).cache_read_tokens, Some(292));
        assert_eq!(usage(Some(&u), Some(&t)).input_tokens, Some(300));
        assert_eq!(usage(Some(&u), None).cache_read_tokens, None);
        assert_eq!(usage(None, None), Usage::default());
    }

    #[test]
    fn llama_cpp_timings_alone_give_the_whole_usage() {
        // Trigger: a llama.cpp build that sends `timings` and no `usage` lost all counts.
        let t: Timings = serde_json::from_str(
            r#"{"cache_n":236,"prompt_n":14,"prompt_ms":51.2,"predicted_n":9,"predicted_ms":80.1}"#,
        )
        .unwrap();
        assert_eq!(
            usage(None, Some(&t)),
            Usage {
                input_tokens: Some(250),
                output_tokens: Some(9),
                cache_read_tokens: Some(236),
                cache_write_tokens: None,
                reasoning_tokens: None,
            }
        );
        // Without `cache_n` the prompt's size is unknown: `prompt_n` alone is not all of it.
        let t: Timings = serde_json::from_str(r#"{"prompt_n":14,"predicted_n":9}"#).unwrap();
        assert_eq!(usage(None, Some(&t)).input_tokens, None);
        assert_eq!(usage(None, Some(&t)).output_tokens, Some(9));
    }
}
