//! Tiered's in-place eviction and truncation on both wire shapes: OpenAI-style `role: tool`
//! messages, and Anthropic `tool_result` blocks grouped in one user message. Each evicted
//! result is the object `{"$evicted":N}` where its content was, the others as they were;
//! after truncation every call still has its one result.

use halo_adapters::anthropic::AnthropicAdapter;
use halo_adapters::openai::OpenAiCompatible;
use halo_core::context::{self, BytesEstimator, ContextBudget, ContextStrategy};
use halo_core::model::{GenerationOptions, ModelRequest};
use halo_core::{AssistantMessage, Message, MessageLog, StablePrefix, ToolCall, ToolResult};
use halo_strategies::TieredStrategy;
use serde_json::Value;

/// A task, then six steps of two parallel reads of 2,000 bytes each.
fn session() -> MessageLog {
    let mut log = MessageLog::default();
    log.push(Message::user("Find the bug."));
    for step in 0..6 {
        let calls: Vec<ToolCall> = (0..2)
            .map(|k| ToolCall::new(format!("c{step}{k}"), "read", r#"{"path":"a.rs"}"#))
            .collect();
        log.push_step(
            Message::Assistant(AssistantMessage {
                tool_calls: calls.clone(),
                ..AssistantMessage::default()
            }),
            calls.iter().map(|c| {
                Message::Tool(ToolResult::ok(c, format!("{} {}", c.id, "x".repeat(2000))))
            }),
        );
    }
    log
}

/// The history after Tiered's plan for a window the session is at 90 % of.
fn evicted() -> Vec<Message> {
    let log = session();
    let used: u64 = log
        .messages()
        .map(|m| context::message_tokens(&BytesEstimator, m))
        .sum();
    let budget = ContextBudget {
        context_window: used * 10 / 9,
        used_tokens: used,
        calibration: 1.0,
        estimator: &BytesEstimator,
    };
    let plan = TieredStrategy::new().plan(&StablePrefix::default(), &log, &budget);
    assert!(!plan.replace.is_empty() && plan.drop.is_empty(), "{plan:?}");
    let mut history: Vec<Message> = log.messages().cloned().collect();
    for (i, m) in plan.replace {
        history[i] = m;
    }
    history
}

fn placeholder_of(content: &str) -> Option<u64> {
    let v: Value = serde_json::from_str(content).ok()?;
    v.get("$evicted")?.as_u64()
}

#[test]
fn openai_tool_messages_carry_the_placeholder_object() {
    let history = evicted();
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key("sk-test")
        .base_url("http://127.0.0.1:9/v1")
        .build()
        .unwrap();
    let prefix = StablePrefix::new("You are a coding agent.");
    let options = GenerationOptions::default();
    let body: Value = serde_json::from_slice(
        &model
            .request_body(&ModelRequest::new(&prefix, &history, &options))
            .unwrap(),
    )
    .unwrap();
    let tools: Vec<&Value> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tools.len(), 12);
    let evicted: Vec<u64> = tools
        .iter()
        .filter_map(|m| placeholder_of(m["content"].as_str().unwrap()))
        .collect();
    assert!(!evicted.is_empty(), "nothing evicted");
    // Oldest first, each the bytes removed; the live round (the last two) untouched.
    assert!(evicted.iter().all(|&n| n == 2004), "{evicted:?}");
    assert_eq!(tools[0]["tool_call_id"], "c00");
    assert!(tools[11]["content"].as_str().unwrap().starts_with("c51 x"));
}

#[test]
fn anthropic_tool_result_blocks_carry_the_placeholder_object() {
    let history = evicted();
    let model = AnthropicAdapter::builder("claude-sonnet-4-5")
        .api_key("sk-ant-test")
        .base_url("http://127.0.0.1:9")
        .build()
        .unwrap();
    let prefix = StablePrefix::new("You are a coding agent.");
    let options = GenerationOptions::default();
    let body: Value = serde_json::from_slice(
        &model
            .request_body(&ModelRequest::new(&prefix, &history, &options))
            .unwrap(),
    )
    .unwrap();
    // Each step's two results are grouped in one user message, in call order.
    let groups: Vec<Vec<&Value>> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_array())
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .collect::<Vec<_>>()
        })
        .filter(|b: &Vec<&Value>| !b.is_empty())
        .collect();
    assert_eq!(groups.len(), 6);
    assert!(groups.iter().all(|g| g.len() == 2));
    let text = |b: &Value| match &b["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts[0]["text"].as_str().unwrap_or_default().to_string(),
        other => other.to_string(),
    };
    assert_eq!(groups[0][0]["tool_use_id"], "c00");
    assert_eq!(placeholder_of(&text(groups[0][0])), Some(2004));
    assert_eq!(placeholder_of(&text(groups[0][1])), Some(2004));
    assert!(
        text(groups[5][1]).starts_with("c51 x"),
        "the live round is untouched"
    );
}

/// Every `tool_use` / call id of a body has exactly one result and every result its call,
/// on OpenAI's shape (`tool_calls` + `role: tool`) or Anthropic's (`tool_use` +
/// `tool_result` blocks).
fn paired(body: &Value) -> bool {
    let text = body.to_string();
    let v: Value = serde_json::from_str(&text).unwrap();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for m in v["messages"].as_array().unwrap() {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            calls.push(c["id"].as_str().unwrap().to_string());
        }
        if m["role"] == "tool" {
            results.push(m["tool_call_id"].as_str().unwrap().to_string());
        }
        for b in m["content"].as_array().into_iter().flatten() {
            match b["type"].as_str() {
                Some("tool_use") => calls.push(b["id"].as_str().unwrap().to_string()),
                Some("tool_result") => results.push(b["tool_use_id"].as_str().unwrap().to_string()),
                _ => {}
            }
        }
    }
    calls.sort();
    results.sort();
    !calls.is_empty() && calls == results
}

#[test]
fn truncation_keeps_calls_and_results_paired_on_both_wire_shapes() {
    let log = session();
    let used: u64 = log
        .messages()
        .map(|m| context::message_tokens(&BytesEstimator, m))
        .sum();
    let budget = ContextBudget {
        context_window: used,
        used_tokens: used,
        calibration: 1.0,
        estimator: &BytesEstimator,
    };
    let plan =
        halo_strategies::TruncateStrategy::new().plan(&StablePrefix::default(), &log, &budget);
    assert!(!plan.drop.is_empty());
    let history: Vec<Message> = log
        .messages()
        .enumerate()
        .filter(|(i, _)| !plan.drop.contains(i))
        .map(|(_, m)| m.clone())
        .collect();
    assert_eq!(history[0].text(), "Find the bug.");
    let prefix = StablePrefix::new("You are a coding agent.");
    let options = GenerationOptions::default();
    let request = ModelRequest::new(&prefix, &history, &options);
    let openai = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key("sk-test")
        .base_url("http://127.0.0.1:9/v1")
        .build()
        .unwrap();
    let anthropic = AnthropicAdapter::builder("claude-sonnet-4-5")
        .api_key("sk-ant-test")
        .base_url("http://127.0.0.1:9")
        .build()
        .unwrap();
    let body = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).unwrap();
    assert!(paired(&body(&openai.request_body(&request).unwrap())));
    assert!(paired(&body(&anthropic.request_body(&request).unwrap())));
}
