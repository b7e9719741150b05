//! A loopback fake of OpenAI's `POST /v1/chat/completions` (non-streaming) whose answer is
//! a function of the request alone, so the same request gets the same answer whichever
//! worker sends it, however often, and sessions can run at once in any order.
//!
//! The session's first user message is its script: `steps=N tool=NAME [hold_ms=H]`. With
//! `k` tool results in the request, the answer is a call of `NAME` with id `call_{k+1}`
//! (arguments `{"n": k+1, "hold_ms": H}`, or `{"amount": 100}` for `transfer`) while
//! `k < N`, then the text `done: k tool results`. Every body is kept, byte for byte, by its
//! `prompt_cache_key` (the session id), and checked: each tool call is answered by exactly
//! one tool result, and no result answers no call (a failing body is answered with 400 and
//! counted in `violations`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

#[derive(Default)]
struct Records {
    bodies: HashMap<String, Vec<Bytes>>,
    violations: Vec<String>,
}

/// The fake, serving until dropped.
pub struct FakeModel {
    pub url: String,
    records: Arc<Mutex<Records>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeModel {
    pub async fn start() -> FakeModel {
        let records = Arc::new(Mutex::new(Records::default()));
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(complete))
            .with_state(records.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let url = format!("http://{}/v1", listener.local_addr().expect("its address"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeModel { url, records, task }
    }

    /// The bodies received for `session`, in order.
    pub fn bodies(&self, session: &str) -> Vec<Bytes> {
        let records = self.records.lock().expect("records");
        records.bodies.get(session).cloned().unwrap_or_default()
    }

    /// The `messages` of each request received for `session`, in order.
    pub fn messages(&self, session: &str) -> Vec<Vec<Value>> {
        self.bodies(session)
            .iter()
            .map(|b| {
                let body: Value = serde_json::from_slice(b).expect("a JSON body");
                body["messages"].as_array().cloned().unwrap_or_default()
            })
            .collect()
    }

    /// Every body that broke the tool-call pairing, with why.
    pub fn violations(&self) -> Vec<String> {
        self.records.lock().expect("records").violations.clone()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether every tool call of `messages` has exactly one tool result after it, and every
/// tool result answers a call before it.
fn pairing(messages: &[Value]) -> Result<(), String> {
    let mut open: Vec<String> = Vec::new();
    let mut answered: Vec<String> = Vec::new();
    for m in messages {
        if let Some(calls) = m["tool_calls"].as_array() {
            if let Some(id) = open.first() {
                return Err(format!("call {id} has no result before the next turn"));
            }
            open = calls
                .iter()
                .filter_map(|c| c["id"].as_str().map(str::to_string))
                .collect();
        } else if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default().to_string();
            if answered.contains(&id) {
                return Err(format!("call {id} has two results"));
            }
            let Some(i) = open.iter().position(|o| *o == id) else {
                return Err(format!("the result of {id} answers no open call"));
            };
            open.remove(i);
            answered.push(id);
        } else if let Some(id) = open.first() {
            return Err(format!(
                "call {id} has no result before a {} message",
                m["role"]
            ));
        }
    }
    Ok(())
}

/// The answer to `body`, by the script in its first user message.
fn answer(body: &Value) -> Result<Value, String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    pairing(messages)?;
    let script = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .ok_or("no user message")?;
    let field = |name: &str| {
        script
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
    };
    let steps: usize = field("steps")
        .and_then(|v| v.parse().ok())
        .ok_or("no steps=N")?;
    let tool = field("tool").ok_or("no tool=NAME")?;
    let hold_ms: u64 = field("hold_ms").and_then(|v| v.parse().ok()).unwrap_or(0);
    let done = messages.iter().filter(|m| m["role"] == "tool").count();
    let message = if done < steps {
        let arguments = if tool == "transfer" {
            json!({"amount": 100})
        } else {
            json!({"n": done + 1, "hold_ms": hold_ms})
        };
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{
                "id": format!("call_{}", done + 1),
                "type": "function",
                "function": {"name": tool, "arguments": arguments.to_string()},
            }],
            "refusal": null,
        })
    } else {
        json!({"role": "assistant", "content": format!("done: {done} tool results"), "refusal": null})
    };
    let finish = if done < steps { "tool_calls" } else { "stop" };
    let prompt = (body.to_string().len() / 4) as u64;
    Ok(json!({
        "id": format!("chatcmpl-{done}"),
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 8, "total_tokens": prompt + 8},
    }))
}

async fn complete(State(records): State<Arc<Mutex<Records>>>, raw: Bytes) -> Response {
    let body: Value = match serde_json::from_slice(&raw) {
        Ok(body) => body,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("not JSON: {e}")).into_response(),
    };
    let session = body["prompt_cache_key"].as_str().unwrap_or("").to_string();
    let outcome = if body["stream"] == true {
        Err("this fake does not stream".to_string())
    } else {
        answer(&body)
    };
    let mut records = records.lock().expect("records");
    records.bodies.entry(session.clone()).or_default().push(raw);
    match outcome {
        Ok(answer) => axum::Json(answer).into_response(),
        Err(why) => {
            records.violations.push(format!("{session}: {why}"));
            let error = json!({"error": {"message": why, "type": "invalid_request_error", "param": null, "code": null}});
            (StatusCode::BAD_REQUEST, axum::Json(error)).into_response()
        }
    }
}
