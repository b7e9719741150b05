//! A scripted model for testing agent loops (feature `testing`).
//!
//! [`ScriptedModel`] answers each call with the next scripted step (first in, first out),
//! records every request it receives (the prefix's canonical bytes and fingerprint, the
//! history and the options), and can inject errors. It is for unit-testing the loop, not a
//! stand-in for a real model.
//!
//! ```
//! use halo_core::testing::ScriptedModel;
//! use serde_json::json;
//!
//! let model = ScriptedModel::new()
//!     .tool_call("read", json!({"path": "a.txt"}))
//!     .text("done");
//! assert_eq!(model.remaining(), 2);
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::message::{AssistantMessage, Message, ToolCall};
use crate::model::{
    FinishReason, GenerationOptions, ModelAdapter, ModelCapabilities, ModelError, ModelEventStream,
    ModelRequest, ModelResponse, ModelStreamEvent, Usage, response_events,
};
use crate::prefix::Fingerprint;

/// One request as the scripted model received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The prefix's canonical bytes.
    pub prefix_bytes: Vec<u8>,
    /// The prefix's fingerprint.
    pub fingerprint: Fingerprint,
    /// The tool names in the prefix, in order.
    pub tool_names: Vec<String>,
    /// The history.
    pub history: Vec<Message>,
    /// The options.
    pub options: GenerationOptions,
}

#[derive(Debug)]
enum Step {
    Response(Box<Result<ModelResponse, ModelError>>),
    Events(Vec<Result<ModelStreamEvent, ModelError>>),
}

#[derive(Debug, Default)]
struct State {
    steps: VecDeque<Step>,
    requests: Vec<RecordedRequest>,
    next_call_id: u64,
    capabilities: ModelCapabilities,
    context_window: Option<u64>,
}

/// A model that replays a script. Cheap to clone; clones share the script and the record.
#[derive(Debug, Clone, Default)]
pub struct ScriptedModel {
    state: Arc<Mutex<State>>,
}

impl ScriptedModel {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread poisons the lock; the state is still usable for reporting.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Says the model has `capabilities` (default: none, so
    /// [`OutputMode::Auto`](crate::OutputMode::Auto) picks the prompted mode).
    pub fn with_capabilities(self, capabilities: ModelCapabilities) -> Self {
        self.lock().capabilities = capabilities;
        self
    }

    /// Says the model's context window is `tokens` (default: unknown, `None`), as an
    /// adapter's per-model table would.
    pub fn with_context_window(self, tokens: u64) -> Self {
        self.lock().context_window = Some(tokens);
        self
    }

    /// Appends a full response.
    pub fn respond(self, response: ModelResponse) -> Self {
        self.lock()
            .steps
            .push_back(Step::Response(Box::new(Ok(response))));
        self
    }

    /// Appends a text answer (finish reason `stop`, usage unknown).
    pub fn text(self, text: impl Into<String>) -> Self {
        self.respond(ModelResponse {
            id: None,
            message: AssistantMessage {
                text: text.into(),
                ..Default::default()
            },
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
            model: None,
            provider: None,
        })
    }

    /// Appends a turn with one tool call whose arguments are `arguments` serialized.
    pub fn tool_call(self, name: &str, arguments: serde_json::Value) -> Self {
        self.tool_call_raw(name, &arguments.to_string())
    }

    /// Appends a turn with one tool call whose argument string is `raw`, verbatim.
    pub fn tool_call_raw(self, name: &str, raw: &str) -> Self {
        self.tool_calls_raw(&[(name, raw)])
    }

    /// Appends a turn with several tool calls (name, raw arguments).
    pub fn tool_calls_raw(self, calls: &[(&str, &str)]) -> Self {
        let calls = {
            let mut st = self.lock();
            calls
                .iter()
                .map(|(name, raw)| {
                    st.next_call_id += 1;
                    ToolCall::new(format!("call_{}", st.next_call_id), *name, *raw)
                })
                .collect()
        };
        self.respond(ModelResponse {
            id: None,
            message: AssistantMessage {
                tool_calls: calls,
                ..Default::default()
            },
            finish_reason: FinishReason::ToolCalls,
            usage: Usage::default(),
            model: None,
            provider: None,
        })
    }

    /// Appends an error.
    pub fn error(self, error: ModelError) -> Self {
        self.lock()
            .steps
            .push_back(Step::Response(Box::new(Err(error))));
        self
    }

    /// Appends a step given as the exact events [`ModelAdapter::stream`] yields, to script
    /// split deltas, a stream cut before its `Finish`, or an error mid-stream. Through
    /// [`ModelAdapter::generate`] the step answers with its `Finish` response, or with the
    /// first error, or [`ModelError::Truncated`] when it has neither.
    pub fn events(self, events: Vec<Result<ModelStreamEvent, ModelError>>) -> Self {
        self.lock().steps.push_back(Step::Events(events));
        self
    }

    /// Steps not yet consumed.
    pub fn remaining(&self) -> usize {
        self.lock().steps.len()
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// Panics unless every scripted step was consumed.
    #[track_caller]
    pub fn assert_consumed(&self) {
        let n = self.remaining();
        assert_eq!(n, 0, "the scripted model has {n} unconsumed step(s)");
    }
}

impl ScriptedModel {
    fn next_step(&self, request: &ModelRequest<'_>) -> Step {
        let mut st = self.lock();
        st.requests.push(RecordedRequest {
            prefix_bytes: request.prefix.canonical_bytes().to_vec(),
            fingerprint: request.prefix.fingerprint(),
            tool_names: request
                .prefix
                .tools()
                .iter()
                .map(|t| t.name.clone())
                .collect(),
            history: request.history.to_vec(),
            options: request.options.clone(),
        });
        st.steps.pop_front().unwrap_or_else(|| {
            Step::Response(Box::new(Err(ModelError::Other(
                "the scripted model has no steps left; add more to the script".into(),
            ))))
        })
    }
}

#[async_trait]
impl ModelAdapter for ScriptedModel {
    fn provider(&self) -> &str {
        "scripted"
    }

    fn model_name(&self) -> &str {
        "scripted"
    }

    fn capabilities(&self) -> ModelCapabilities {
        self.lock().capabilities
    }

    fn context_window(&self) -> Option<u64> {
        self.lock().context_window
    }

    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        match self.next_step(&request) {
            Step::Response(r) => *r,
            Step::Events(events) => {
                for event in events {
                    match event? {
                        ModelStreamEvent::Finish(response) => return Ok(response),
                        _ => continue,
                    }
                }
                Err(ModelError::Truncated(
                    "the scripted stream has no finish event".into(),
                ))
            }
        }
    }

    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        let events: Vec<Result<ModelStreamEvent, ModelError>> = match self.next_step(&request) {
            Step::Response(r) => match *r {
                Ok(response) => response_events(response).map(Ok).collect(),
                Err(e) => vec![Err(e)],
            },
            Step::Events(events) => events,
        };
        Box::pin(futures::stream::iter(events))
    }
}
