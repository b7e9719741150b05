//! A loopback fake of an OpenAI-compatible `/v1/chat/completions` server (wiremock).
//!
//! It answers from a FIFO script of real `chat.completion` bodies (OpenAI and DeepSeek
//! shapes, built with [`Completion`]) or error bodies ([`error_response`]), records every
//! request (body bytes and `Authorization` header), and checks on every body that each
//! assistant tool call is answered by exactly one `tool` message right after it and that no
//! tool result is an orphan. A violation is recorded and answered with HTTP 418, so the
//! adapter call fails at once; [`FakeChat::finish`] reports it too.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The raw body bytes.
    pub body: Vec<u8>,
    /// The `Authorization` header, if sent.
    pub authorization: Option<String>,
}

impl Recorded {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<ResponseTemplate>,
    requests: Vec<Recorded>,
    violations: Vec<String>,
}

#[derive(Clone)]
struct Responder(Arc<Mutex<State>>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut state = self.0.lock().expect("fake state lock");
        let authorization = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        state.requests.push(Recorded {
            body: request.body.clone(),
            authorization,
        });
        let n = state.requests.len();
        if let Err(why) = check_body(&request.body) {
            let why = format!("request {n}: {why}");
            state.violations.push(why.clone());
            return ResponseTemplate::new(418).set_body_json(json!({"error": {"message": why}}));
        }
        match state.script.pop_front() {
            Some(response) => response,
            None => {
                let why = format!("request {n}: the fake's script is exhausted");
                state.violations.push(why.clone());
                ResponseTemplate::new(418).set_body_json(json!({"error": {"message": why}}))
            }
        }
    }
}

/// The running fake.
pub struct FakeChat {
    server: MockServer,
    state: Arc<Mutex<State>>,
}

impl FakeChat {
    /// Starts a fake that answers with `script`, in order.
    pub async fn start(script: impl IntoIterator<Item = ResponseTemplate>) -> Self {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State {
            script: script.into_iter().collect(),
            ..State::default()
        }));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Responder(state.clone()))
            .mount(&server)
            .await;
        FakeChat { server, state }
    }

    /// The base URL to give the adapter (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().expect("fake state lock").requests.clone()
    }

    /// Asserts that no body broke the tool-pairing invariant and that the script was used up.
    pub fn finish(&self) {
        let state = self.state.lock().expect("fake state lock");
        assert!(
            state.violations.is_empty(),
            "invariant violations: {:?}",
            state.violations
        );
        assert!(
            state.script.is_empty(),
            "{} scripted responses were never requested",
            state.script.len()
        );
    }
}

/// The tool-pairing invariant on one request body: every assistant tool call is answered
/// by exactly one `tool` message among the messages right after it, and every `tool`
/// message answers a call of the assistant message before it.
pub fn check_body(body: &[u8]) -> Result<(), String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let messages = value["messages"]
        .as_array()
        .ok_or("the body has no messages array")?;
    let mut seen_ids = HashSet::new();
    let mut i = 0;
    while i < messages.len() {
        let role = messages[i]["role"].as_str().unwrap_or_default();
        match role {
            "assistant" => {
                let mut pending = HashSet::new();
                for call in messages[i]["tool_calls"].as_array().into_iter().flatten() {
                    let id = call["id"].as_str().unwrap_or_default().to_string();
                    if id.is_empty() || !seen_ids.insert(id.clone()) {
                        return Err(format!(
                            "message {i} has an empty or repeated call id `{id}`"
                        ));
                    }
                    pending.insert(id);
                }
                let mut j = i + 1;
                while j < messages.len() && messages[j]["role"] == "tool" {
                    let id = messages[j]["tool_call_id"].as_str().unwrap_or_default();
                    if !pending.remove(id) {
                        return Err(format!(
                            "tool result {j} (`{id}`) answers no open call of message {i}"
                        ));
                    }
                    j += 1;
                }
                if !pending.is_empty() {
                    return Err(format!("calls {pending:?} of message {i} have no result"));
                }
                i = j;
            }
            "tool" => return Err(format!("tool result {i} follows no assistant tool call")),
            _ => i += 1,
        }
    }
    Ok(())
}

/// The raw JSON text of each element of `messages` and of `tools`, exactly as sent.
pub fn raw_parts(body: &[u8]) -> (Vec<String>, Option<String>) {
    #[derive(serde::Deserialize)]
    struct Parts<'a> {
        #[serde(borrow)]
        messages: Vec<&'a RawValue>,
        #[serde(borrow, default)]
        tools: Option<&'a RawValue>,
    }
    let parts: Parts<'_> = serde_json::from_slice(body).expect("body with messages");
    (
        parts.messages.iter().map(|m| m.get().to_string()).collect(),
        parts.tools.map(|t| t.get().to_string()),
    )
}

/// Which vendor's response shape to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// OpenAI: `content: null` on tool-call turns, `refusal`, `annotations`, `service_tier`.
    OpenAi,
    /// DeepSeek: `content: ""` on tool-call turns, `reasoning_content`.
    DeepSeek,
    /// A minimal compatible server (llama.cpp, Ollama, vLLM without extras).
    Bare,
}

/// A builder of one `chat.completion` body.
#[derive(Debug, Clone)]
pub struct Completion {
    shape: Shape,
    text: Option<String>,
    reasoning: Option<String>,
    calls: Vec<(String, String, String)>,
    finish: Option<String>,
    usage: Option<Value>,
    extra: Vec<(String, Value)>,
}

impl Completion {
    /// An empty answer of this shape.
    pub fn new(shape: Shape) -> Self {
        Completion {
            shape,
            text: None,
            reasoning: None,
            calls: Vec::new(),
            finish: None,
            usage: None,
            extra: Vec::new(),
        }
    }

    /// Answer text.
    pub fn text(mut self, text: &str) -> Self {
        self.text = Some(text.to_string());
        self
    }

    /// DeepSeek `reasoning_content`.
    pub fn reasoning(mut self, text: &str) -> Self {
        self.reasoning = Some(text.to_string());
        self
    }

    /// A tool call with this raw argument string.
    pub fn tool_call(mut self, id: &str, name: &str, raw_arguments: &str) -> Self {
        self.calls
            .push((id.to_string(), name.to_string(), raw_arguments.to_string()));
        self
    }

    /// The raw `finish_reason` (default: `tool_calls` with calls, else `stop`).
    pub fn finish(mut self, reason: &str) -> Self {
        self.finish = Some(reason.to_string());
        self
    }

    /// The `usage` object as sent.
    pub fn usage(mut self, usage: Value) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Another top-level field (llama.cpp `timings`).
    pub fn field(mut self, name: &str, value: Value) -> Self {
        self.extra.push((name.to_string(), value));
        self
    }

    /// The body as JSON.
    pub fn to_json(&self) -> Value {
        let has_calls = !self.calls.is_empty();
        let content = match (&self.text, self.shape) {
            (Some(t), _) => json!(t),
            (None, Shape::DeepSeek) => json!(""),
            (None, _) => Value::Null,
        };
        let mut message = json!({"role": "assistant", "content": content});
        if self.shape == Shape::DeepSeek {
            message["reasoning_content"] =
                self.reasoning.as_deref().map_or(Value::Null, |r| json!(r));
        }
        if has_calls {
            message["tool_calls"] = self
                .calls
                .iter()
                .map(|(id, name, args)| {
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
                })
                .collect();
        }
        if self.shape == Shape::OpenAi {
            message["refusal"] = Value::Null;
            message["annotations"] = json!([]);
        }
        let finish = self
            .finish
            .clone()
            .unwrap_or_else(|| if has_calls { "tool_calls" } else { "stop" }.to_string());
        let model = match self.shape {
            Shape::OpenAi => "gpt-4o-mini-2024-07-18",
            Shape::DeepSeek => "deepseek-chat",
            Shape::Bare => "qwen2.5-7b-instruct",
        };
        let mut body = json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1_750_000_000,
            "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        });
        if let Some(usage) = &self.usage {
            body["usage"] = usage.clone();
        }
        match self.shape {
            Shape::OpenAi => {
                body["service_tier"] = json!("default");
                body["system_fingerprint"] = json!("fp_0123456789");
            }
            Shape::DeepSeek => body["system_fingerprint"] = json!("fp_deepseek_v3"),
            Shape::Bare => {}
        }
        for (k, v) in &self.extra {
            body[k] = v.clone();
        }
        body
    }

    /// A 200 response with this body.
    pub fn respond(&self) -> ResponseTemplate {
        ResponseTemplate::new(200).set_body_raw(
            serde_json::to_vec(&self.to_json()).expect("serializable"),
            "application/json",
        )
    }
}

/// OpenAI `usage`: `prompt_tokens` includes the cached ones.
pub fn openai_usage(prompt: u64, completion: u64, cached: u64) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0
        }
    })
}

/// DeepSeek `usage` (the documented fields: hit + miss = prompt).
pub fn deepseek_usage(hit: u64, miss: u64, completion: u64) -> Value {
    json!({
        "prompt_tokens": hit + miss,
        "completion_tokens": completion,
        "total_tokens": hit + miss + completion,
        "prompt_cache_hit_tokens": hit,
        "prompt_cache_miss_tokens": miss
    })
}

/// An error answer in the OpenAI/DeepSeek shape `{"error":{"message","type","param","code"}}`.
pub fn error_response(
    status: u16,
    message: &str,
    kind: &str,
    code: Option<&str>,
) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "error": {"message": message, "type": kind, "param": null, "code": code}
    }))
}

#[test]
fn pairing_check_finds_missing_orphan_and_misplaced_results() {
    let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let body = |messages: Value| serde_json::to_vec(&json!({"messages": messages})).unwrap();
    let ok = body(json!([
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "b", "content": "1"},
        {"role": "tool", "tool_call_id": "a", "content": "2"},
        {"role": "assistant", "content": "done"}
    ]));
    assert_eq!(check_body(&ok), Ok(()));
    let missing = body(json!([
        {"role": "assistant", "content": "", "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "2"}
    ]));
    assert!(check_body(&missing).unwrap_err().contains("have no result"));
    let orphan = body(json!([
        {"role": "user", "content": "u"},
        {"role": "tool", "tool_call_id": "x", "content": "2"}
    ]));
    assert!(
        check_body(&orphan)
            .unwrap_err()
            .contains("follows no assistant")
    );
    let twice = body(json!([
        {"role": "assistant", "content": "", "tool_calls": [call("a")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "a", "content": "2"}
    ]));
    assert!(
        check_body(&twice)
            .unwrap_err()
            .contains("answers no open call")
    );
}
