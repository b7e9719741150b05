//! The answers of [`ResponsesSim`](super::ResponsesSim) in the Responses wire shape: the
//! output items of a scripted reply (a reasoning item first when reasoning is on), the
//! `response` object, and its event stream.

use serde_json::{Value, json};

use super::State;
use crate::sim::{SimReply, pieces};

/// The `created_at` of every response (fixed, so answers are deterministic).
const CREATED: u64 = 1_767_225_600;

/// The output items of `reply`: a `reasoning` item when the simulator reasons (with its
/// `encrypted_content` when `encrypted`), then a `message` or the `function_call`s.
pub(super) fn output_items(state: &mut State, reply: &SimReply, encrypted: bool) -> Vec<Value> {
    let mut items = Vec::new();
    if let Some(summary) = state.reasoning.clone() {
        let n = state.next_item;
        state.next_item += 1;
        let mut item = json!({
            "type": "reasoning",
            "id": format!("rs_sim{n:04}"),
            "summary": [{"type": "summary_text", "text": summary}],
        });
        if encrypted {
            item["encrypted_content"] = json!(format!("gAAAA-sim-{n:04}-{}", summary.len()));
        }
        items.push(item);
    }
    match reply {
        SimReply::Text(text) => {
            let n = state.next_item;
            state.next_item += 1;
            items.push(json!({
                "type": "message",
                "id": format!("msg_sim{n:04}"),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }));
        }
        SimReply::ToolCalls(calls) => {
            for (name, arguments) in calls {
                let n = state.next_item;
                state.next_item += 1;
                items.push(json!({
                    "type": "function_call",
                    "id": format!("fc_sim{n:04}"),
                    "call_id": format!("call_sim{n:04}"),
                    "name": name,
                    "arguments": arguments.to_string(),
                    "status": "completed",
                }));
            }
        }
    }
    items
}

/// The text the model generated in `items`, for `output_tokens`.
pub(super) fn output_text(items: &[Value]) -> String {
    let mut out = String::new();
    for item in items {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    out.push_str(part["text"].as_str().unwrap_or_default());
                }
            }
            Some("function_call") => {
                out.push_str(item["name"].as_str().unwrap_or_default());
                out.push_str(item["arguments"].as_str().unwrap_or_default());
            }
            Some("reasoning") => {
                for part in item["summary"].as_array().into_iter().flatten() {
                    out.push_str(part["text"].as_str().unwrap_or_default());
                }
            }
            _ => {}
        }
    }
    out
}

/// The `response` object.
pub(super) fn response(
    id: &str,
    model: &Value,
    status: &str,
    output: &[Value],
    usage: Value,
) -> Value {
    json!({
        "id": id,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": null,
        "incomplete_details": null,
        "model": model,
        "output": output,
        "usage": usage,
    })
}

/// The event stream of a response: `response.created`, then per item `output_item.added`
/// (a reasoning item's `encrypted_content` there incomplete, as the API warns), its deltas
/// and `output_item.done`, then `response.completed`.
pub(super) fn stream_body(done: &Value) -> String {
    let mut out = String::new();
    let mut seq = 0u64;
    let mut event = |out: &mut String, mut data: Value| {
        data["sequence_number"] = json!(seq);
        seq += 1;
        out.push_str("event: ");
        out.push_str(data["type"].as_str().unwrap_or_default());
        out.push_str("\ndata: ");
        out.push_str(&data.to_string());
        out.push_str("\n\n");
    };
    let mut created = done.clone();
    created["status"] = json!("in_progress");
    created["output"] = json!([]);
    created["usage"] = Value::Null;
    event(
        &mut out,
        json!({"type": "response.created", "response": created}),
    );
    for (index, item) in done["output"].as_array().into_iter().flatten().enumerate() {
        let id = item["id"].clone();
        let mut added = item.clone();
        match item["type"].as_str() {
            Some("reasoning") => {
                if let Some(enc) = item["encrypted_content"].as_str() {
                    added["encrypted_content"] = json!(&enc[..enc.len() / 2]);
                }
                added["summary"] = json!([]);
            }
            Some("message") => added["content"] = json!([]),
            Some("function_call") => added["arguments"] = json!(""),
            _ => {}
        }
        added["status"] = json!("in_progress");
        event(
            &mut out,
            json!({"type": "response.output_item.added", "output_index": index, "item": added}),
        );
        match item["type"].as_str() {
            Some("reasoning") => {
                for (s, part) in item["summary"].as_array().into_iter().flatten().enumerate() {
                    for piece in pieces(part["text"].as_str().unwrap_or_default(), 12) {
                        event(
                            &mut out,
                            json!({"type": "response.reasoning_summary_text.delta", "item_id": id, "output_index": index, "summary_index": s, "delta": piece}),
                        );
                    }
                }
            }
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    for piece in pieces(part["text"].as_str().unwrap_or_default(), 16) {
                        event(
                            &mut out,
                            json!({"type": "response.output_text.delta", "item_id": id, "output_index": index, "content_index": 0, "delta": piece, "logprobs": []}),
                        );
                    }
                }
            }
            Some("function_call") => {
                for piece in pieces(item["arguments"].as_str().unwrap_or_default(), 24) {
                    event(
                        &mut out,
                        json!({"type": "response.function_call_arguments.delta", "item_id": id, "output_index": index, "delta": piece}),
                    );
                }
            }
            _ => {}
        }
        event(
            &mut out,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }
    event(
        &mut out,
        json!({"type": "response.completed", "response": done}),
    );
    out
}
