//! The answers of [`OpenAiSim`](super::OpenAiSim) in each provider's wire shape: the
//! assistant message of a scripted reply, the usage object, and the streamed body.

use serde_json::{Value, json};

use super::{CREATED, SimProfile, State, render_message};
use crate::sim::{SimReply, pieces};

/// The reply as the assistant message the next request will carry (the shape the adapter
/// sends back), with the tool calls' ids.
pub(super) fn reply_message(profile: SimProfile, reply: &SimReply, state: &mut State) -> Value {
    match reply {
        SimReply::Text(text) => json!({"role": "assistant", "content": text}),
        SimReply::ToolCalls(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(name, arguments)| {
                    let id = format!("call_{:04}", state.next_call_id);
                    state.next_call_id += 1;
                    json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments.to_string()},
                    })
                })
                .collect();
            let content = match profile {
                SimProfile::OpenAi => Value::Null,
                SimProfile::DeepSeek => Value::String(String::new()),
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
    }
}

/// The generated part of the reply (content and calls, no role marker), for
/// `completion_tokens`.
pub(super) fn completion_text(message: &Value) -> String {
    let rendered = render_message(message);
    rendered
        .strip_prefix("<|assistant|>")
        .and_then(|r| r.strip_suffix("<|end|>"))
        .unwrap_or(&rendered)
        .to_string()
}

/// The usage object in the profile's shape.
pub(super) fn usage_json(profile: SimProfile, prompt: u64, cached: u64, completion: u64) -> Value {
    let mut usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": 0},
    });
    if profile == SimProfile::DeepSeek {
        usage["prompt_cache_hit_tokens"] = json!(cached);
        usage["prompt_cache_miss_tokens"] = json!(prompt - cached);
    }
    usage
}

/// The SSE body of a streamed answer: a role chunk, content or tool-call deltas (the first
/// delta of a call carries id, type, name and `arguments: ""`, then argument pieces), the
/// finish chunk, then `data: [DONE]`. Usage: OpenAI sends it only with `include_usage`, in
/// a last chunk with `choices: []`, and `usage: null` on the others; DeepSeek always puts it
/// on the finish chunk, and `usage: null` on the others only with `include_usage`.
pub(super) fn stream_body(
    profile: SimProfile,
    id: &str,
    model: &Value,
    message: &Value,
    finish: &str,
    usage: Value,
    include_usage: bool,
) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let mut c = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": "fp_sim",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if include_usage {
            c["usage"] = Value::Null;
        }
        c
    };
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if let Some(text) = message.get("content").and_then(Value::as_str) {
        for piece in pieces(text, 16) {
            chunks.push(chunk(json!({"content": piece}), None));
        }
    }
    for (index, call) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        chunks.push(chunk(
            json!({"tool_calls": [{
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }]}),
            None,
        ));
        let arguments = call["function"]["arguments"].as_str().unwrap_or("");
        for piece in pieces(arguments, 24) {
            chunks.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    match profile {
        SimProfile::DeepSeek => {
            let mut last = chunk(json!({"content": ""}), Some(finish));
            last["usage"] = usage;
            chunks.push(last);
        }
        SimProfile::OpenAi => {
            chunks.push(chunk(json!({}), Some(finish)));
            if include_usage {
                let mut last = chunk(json!({}), None);
                last["choices"] = json!([]);
                last["usage"] = usage;
                chunks.push(last);
            }
        }
    }
    let mut out = String::new();
    for c in chunks {
        out.push_str("data: ");
        out.push_str(&c.to_string());
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out
}
