//! A loopback fake of `POST /v1/messages` (wiremock) that answers from a FIFO script of
//! prepared responses (JSON messages, event streams, error bodies) and records every
//! request's body and headers. For the cache arithmetic use `AnthropicSim` instead; this
//! fake is for exact bytes: error bodies, `retry-after`, hand-written event streams.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The raw body bytes.
    pub body: Vec<u8>,
    /// The headers, names lowercase.
    pub headers: Vec<(String, String)>,
}

impl Recorded {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<ResponseTemplate>,
    requests: Vec<Recorded>,
}

#[derive(Clone)]
struct Responder(Arc<Mutex<State>>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut state = self.0.lock().expect("fake state lock");
        state.requests.push(Recorded {
            body: request.body.clone(),
            headers: request
                .headers
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_string(),
                        v.to_str().unwrap_or_default().to_string(),
                    )
                })
                .collect(),
        });
        state.script.pop_front().unwrap_or_else(|| {
            error(
                418,
                "sim_script_exhausted",
                "the fake's script is exhausted",
            )
        })
    }
}

/// The running fake.
pub struct FakeMessages {
    server: MockServer,
    state: Arc<Mutex<State>>,
}

impl FakeMessages {
    /// Starts a fake that answers with `script`, in order.
    pub async fn start(script: impl IntoIterator<Item = ResponseTemplate>) -> Self {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State {
            script: script.into_iter().collect(),
            requests: Vec::new(),
        }));
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(Responder(state.clone()))
            .mount(&server)
            .await;
        FakeMessages { server, state }
    }

    /// The base URL to give the adapter.
    pub fn base_url(&self) -> String {
        self.server.uri()
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().expect("fake state lock").requests.clone()
    }

    /// Responses not yet used.
    pub fn remaining(&self) -> usize {
        self.state.lock().expect("fake state lock").script.len()
    }
}

/// An error answer in Anthropic's shape.
pub fn error(status: u16, kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CTest",
    }))
}

/// A 200 `message` with these content blocks, stop reason and usage.
pub fn message(content: Value, stop_reason: &str, usage: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_01Test",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": usage,
    }))
}

/// A 200 event stream with this exact body.
pub fn event_stream(body: impl Into<String>) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body.into())
}

/// One SSE event: `event: <data.type>` and its data.
pub fn event(data: Value) -> String {
    let kind = data["type"].as_str().unwrap_or("message").to_string();
    format!("event: {kind}\ndata: {data}\n\n")
}
