//! The answers of [`AnthropicSim`](super::AnthropicSim) in Anthropic's wire shape: the
//! content blocks of a scripted reply and the named-event stream.

use serde_json::{Value, json};

use super::State;
use crate::sim::{SimReply, pieces};

/// The content blocks of the reply, with fresh tool-use ids.
pub(super) fn reply_content(reply: &SimReply, state: &mut State) -> (Vec<Value>, &'static str) {
    match reply {
        SimReply::Text(text) => (vec![json!({"type": "text", "text": text})], "end_turn"),
        SimReply::ToolCalls(calls) => {
            let blocks = calls
                .iter()
                .map(|(name, input)| {
                    let id = format!("toolu_01{:022}", state.next_call_id);
                    state.next_call_id += 1;
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                })
                .collect();
            (blocks, "tool_use")
        }
    }
}

pub(super) fn sse_event(out: &mut String, data: &Value) {
    let kind = data
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    out.push_str("event: ");
    out.push_str(kind);
    out.push_str("\ndata: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

/// The whole message as an event stream.
pub(super) fn render_stream(message: &Value) -> String {
    let mut out = String::new();
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    sse_event(
        &mut out,
        &json!({"type": "message_start", "message": start}),
    );
    sse_event(&mut out, &json!({"type": "ping"}));
    let empty = Vec::new();
    let content = message["content"].as_array().unwrap_or(&empty);
    for (index, block) in content.iter().enumerate() {
        match block["type"].as_str() {
            Some("tool_use") => {
                let mut head = block.clone();
                head["input"] = json!({});
                sse_event(
                    &mut out,
                    &json!({"type": "content_block_start", "index": index, "content_block": head}),
                );
                let input = block["input"].to_string();
                let size = input.len().div_ceil(3).max(1);
                for piece in pieces(&input, size) {
                    sse_event(
                        &mut out,
                        &json!({"type": "content_block_delta", "index": index,
                                "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    );
                }
            }
            _ => {
                sse_event(
                    &mut out,
                    &json!({"type": "content_block_start", "index": index,
                            "content_block": {"type": "text", "text": ""}}),
                );
                for piece in pieces(block["text"].as_str().unwrap_or(""), 24) {
                    sse_event(
                        &mut out,
                        &json!({"type": "content_block_delta", "index": index,
                                "delta": {"type": "text_delta", "text": piece}}),
                    );
                }
            }
        }
        sse_event(
            &mut out,
            &json!({"type": "content_block_stop", "index": index}),
        );
    }
    // Newer API versions repeat the input figures here, cumulative, like output_tokens.
    let usage = &message["usage"];
    sse_event(
        &mut out,
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
            "usage": {
                "input_tokens": usage["input_tokens"],
                "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
                "cache_read_input_tokens": usage["cache_read_input_tokens"],
                "output_tokens": usage["output_tokens"],
            },
        }),
    );
    sse_event(&mut out, &json!({"type": "message_stop"}));
    out
}
