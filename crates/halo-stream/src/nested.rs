//! Events from inside ([`AgentEvent::Inner`]) as the AI SDK's nested tool output: while a
//! tool runs an agent — a sub-agent, a named agent, a plan's steps — the tool part of the
//! call gets *preliminary* outputs (`tool-output-available` with `"preliminary":true`),
//! each the inner agent's message so far as a `UIMessage` (the shape the AI SDK's
//! sub-agent guide yields from a tool's `execute` generator). The call's own result follows
//! as its final output and replaces them.
//!
//! The nested message is `{"id":CALL_ID,"role":"assistant","metadata":{"agent":..,"depth":..},"parts":[..]}`
//! with the `UIMessage` part types the client renders: `step-start`; `text` and `reasoning`
//! (`state` `streaming`, then `done`); `tool-NAME` (`toolCallId`, `state` `input-streaming`
//! → `input-available` → `output-available` / `output-error`, `input`, `output` or
//! `errorText`). A deeper agent's message is the preliminary `output` of its call's part
//! (`"preliminary":true`), one level down per agent.
//!
//! Each change sends the whole message again, so text is sent in pieces of at least
//! [`TEXT_STEP_BYTES`] bytes (and whatever is left when the part ends), not per delta: the
//! bytes sent grow with the square of the text's length over that step, not of the deltas.

use std::collections::HashMap;

use halo_core::{AgentEvent, InnerEvent, ToolCall, ToolResult};
use serde_json::{Value, json};

/// The least new text or reasoning, in bytes, for which a nested message is sent again
/// while a part streams: 256.
pub const TEXT_STEP_BYTES: usize = 256;

/// One inner agent's message, as the client will see it.
#[derive(Debug)]
struct Nested {
    id: String,
    agent: String,
    depth: usize,
    parts: Vec<Value>,
    /// The streaming text or reasoning part: its index and kind.
    open: Option<(usize, &'static str)>,
    /// Text bytes appended since the message was last sent.
    unsent: usize,
    /// Tool parts by call id.
    tools: HashMap<String, usize>,
    /// The messages of the agents its calls run, by call id.
    children: HashMap<String, Nested>,
}

impl Nested {
    fn new(id: &str, agent: &str, depth: usize) -> Self {
        Nested {
            id: id.to_string(),
            agent: agent.to_string(),
            depth,
            parts: Vec::new(),
            open: None,
            unsent: 0,
            tools: HashMap::new(),
            children: HashMap::new(),
        }
    }

    /// The message as JSON.
    fn message(&self) -> Value {
        json!({
            "id": self.id,
            "role": "assistant",
            "metadata": {"agent": self.agent, "depth": self.depth},
            "parts": self.parts,
        })
    }

    /// Marks the streaming text or reasoning part done; returns whether there was one.
    fn close_open(&mut self) -> bool {
        let Some((i, _)) = self.open.take() else {
            return false;
        };
        self.parts[i]["state"] = json!("done");
        true
    }

    fn delta(&mut self, kind: &'static str, delta: &str) -> bool {
        if delta.is_empty() {
            return false;
        }
        match self.open {
            Some((i, open)) if open == kind => {
                let text = self.parts[i]["text"].as_str().unwrap_or_default();
                self.parts[i]["text"] = json!(format!("{text}{delta}"));
            }
            _ => {
                let _ = self.close_open();
                self.parts
                    .push(json!({"type": kind, "text": delta, "state": "streaming"}));
                self.open = Some((self.parts.len() - 1, kind));
            }
        }
        self.unsent += delta.len();
        if self.unsent >= TEXT_STEP_BYTES {
            self.unsent = 0;
            return true;
        }
        false
    }

    fn tool_part(&mut self, id: &str, name: &str) -> &mut Value {
        let i = match self.tools.get(id) {
            Some(&i) => i,
            None => {
                self.parts.push(json!({
                    "type": format!("tool-{name}"),
                    "toolCallId": id,
                    "state": "input-streaming",
                }));
                self.tools.insert(id.to_string(), self.parts.len() - 1);
                self.parts.len() - 1
            }
        };
        &mut self.parts[i]
    }

    fn call(&mut self, call: &ToolCall) {
        let input = call
            .arguments()
            .unwrap_or_else(|_| Value::String(call.raw_arguments.to_string()));
        let part = self.tool_part(&call.id, &call.name);
        part["state"] = json!("input-available");
        part["input"] = input;
    }

    fn result(&mut self, result: &ToolResult) {
        self.children.remove(result.tool_call_id.as_str());
        let part = self.tool_part(&result.tool_call_id, &result.tool_name);
        let Value::Object(fields) = part else {
            return;
        };
        fields.remove("preliminary");
        fields.remove("output");
        if result.is_error {
            fields.insert("state".into(), json!("output-error"));
            fields.insert("errorText".into(), json!(result.content));
        } else {
            fields.insert("state".into(), json!("output-available"));
            fields.insert("output".into(), json!(result.content));
        }
    }

    /// Applies the inner agent's `event`; returns whether the message changed enough to be
    /// sent again.
    fn apply(&mut self, event: &AgentEvent) -> bool {
        match event {
            AgentEvent::TextDelta(delta) => return self.delta("text", delta),
            AgentEvent::ReasoningDelta(delta) => return self.delta("reasoning", delta),
            AgentEvent::ToolCallDelta { .. } => return false,
            _ => {}
        }
        let closed = self.close_open();
        self.unsent = 0;
        match event {
            AgentEvent::StepStart { .. } => self.parts.push(json!({"type": "step-start"})),
            AgentEvent::ToolCallStart { id, name } => {
                self.tool_part(id, name);
            }
            AgentEvent::ToolCall(call) => self.call(call),
            AgentEvent::ToolResult(result) => self.result(result),
            AgentEvent::Inner(deeper) => {
                let child = self
                    .children
                    .entry(deeper.call_id.clone())
                    .or_insert_with(|| Nested::new(&deeper.call_id, &deeper.agent, deeper.depth));
                if !child.apply(&deeper.event) {
                    return false;
                }
                let message = child.message();
                let Some(&i) = self.tools.get(&deeper.call_id) else {
                    return false;
                };
                let Value::Object(fields) = &mut self.parts[i] else {
                    return false;
                };
                fields.insert("state".into(), json!("output-available"));
                fields.insert("output".into(), message);
                fields.insert("preliminary".into(), json!(true));
            }
            // A finished step (or any other event) shows only as the text it closed.
            _ => return closed,
        }
        true
    }
}

/// The nested messages of the calls in flight, by the calling run's call id.
#[derive(Debug, Default)]
pub(crate) struct NestedCalls {
    calls: HashMap<String, Nested>,
}

impl NestedCalls {
    /// Applies `inner`; returns the call id and its nested message when it is to be sent
    /// (as a preliminary output).
    pub(crate) fn apply(&mut self, inner: &InnerEvent) -> Option<(String, Value)> {
        let nested = self
            .calls
            .entry(inner.call_id.clone())
            .or_insert_with(|| Nested::new(&inner.call_id, &inner.agent, inner.depth));
        nested
            .apply(&inner.event)
            .then(|| (inner.call_id.clone(), nested.message()))
    }

    /// The call `call_id` has its result, which replaces the nested message: forgotten.
    pub(crate) fn finish(&mut self, call_id: &str) {
        self.calls.remove(call_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inner(call_id: &str, event: AgentEvent) -> InnerEvent {
        InnerEvent {
            agent: "researcher".into(),
            depth: 1,
            call_id: call_id.into(),
            event,
        }
    }

    #[test]
    fn a_nested_message_has_the_ui_message_parts_of_the_inner_agents_events() {
        let mut calls = NestedCalls::default();
        let call = ToolCall::new("c2", "wiki", r#"{"topic":"otters"}"#);
        let events = [
            AgentEvent::StepStart { step: 1 },
            AgentEvent::ToolCall(call.clone()),
            AgentEvent::ToolResult(ToolResult::ok(&call, "hands")),
            AgentEvent::StepStart { step: 2 },
            AgentEvent::TextDelta("Otters ".into()),
            AgentEvent::TextDelta("hold hands.".into()),
        ];
        let mut sent = Vec::new();
        for event in events {
            sent.extend(calls.apply(&inner("c1", event)));
        }
        // The deltas were short: not sent on their own.
        assert_eq!(sent.len(), 4);
        let (id, last) = calls
            .apply(&inner("c1", AgentEvent::StepFinish(Box::new(step()))))
            .unwrap();
        assert_eq!(id, "c1");
        assert_eq!(
            last,
            json!({
                "id": "c1", "role": "assistant",
                "metadata": {"agent": "researcher", "depth": 1},
                "parts": [
                    {"type": "step-start"},
                    {"type": "tool-wiki", "toolCallId": "c2", "state": "output-available",
                     "input": {"topic": "otters"}, "output": "hands"},
                    {"type": "step-start"},
                    {"type": "text", "text": "Otters hold hands.", "state": "done"},
                ]
            })
        );
        calls.finish("c1");
        assert!(calls.calls.is_empty());
    }

    #[test]
    fn long_text_is_sent_in_steps_and_a_deeper_agent_is_the_preliminary_output_of_its_call() {
        let mut calls = NestedCalls::default();
        let mut sent = 0;
        for _ in 0..100 {
            sent += usize::from(
                calls
                    .apply(&inner("c1", AgentEvent::TextDelta("0123456789".into())))
                    .is_some(),
            );
        }
        assert_eq!(sent, 1000 / TEXT_STEP_BYTES);

        let call = ToolCall::new("c7", "plan", "{}");
        calls.apply(&inner("c1", AgentEvent::ToolCall(call)));
        let deeper = InnerEvent {
            agent: "plan".into(),
            depth: 2,
            call_id: "c7".into(),
            event: AgentEvent::StepStart { step: 1 },
        };
        let (_, message) = calls
            .apply(&inner("c1", AgentEvent::Inner(Box::new(deeper))))
            .unwrap();
        let part = &message["parts"][1];
        assert_eq!(part["type"], "tool-plan");
        assert_eq!(part["preliminary"], true);
        assert_eq!(part["state"], "output-available");
        assert_eq!(
            part["output"]["metadata"],
            json!({"agent": "plan", "depth": 2})
        );
        assert_eq!(part["output"]["parts"], json!([{"type": "step-start"}]));
    }

    fn step() -> halo_core::StepResult {
        serde_json::from_value(json!({
            "message": {"text": "Otters hold hands."},
            "finish_reason": "stop",
            "usage": {},
            "tool_results": [],
            "prefix_fingerprint": "00".repeat(32),
            "cache": {"call": 1, "prefix_fingerprint": "00".repeat(32), "prefix_changed": false,
                      "history_messages": 1, "reused_history_messages": 0,
                      "expected_cached_tokens": 0, "observed_cached_tokens": null,
                      "input_tokens": null, "verdict": {"verdict": "cold"}},
        }))
        .unwrap()
    }
}
