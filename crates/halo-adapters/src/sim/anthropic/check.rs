//! The checks [`AnthropicSim`](super::AnthropicSim) runs on every request before it
//! answers, with Anthropic's error shape and messages: required fields, role order, the
//! breakpoint rules, thinking signatures, tool pairing, `tool_choice` and `output_config`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{FIRST_MESSAGE_NOT_USER, MAX_BREAKPOINTS, SimBlock, SimTtl};

/// An error in Anthropic's shape.
pub(super) fn error_response(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_sim",
    });
    (status, axum::Json(body)).into_response()
}

pub(super) fn invalid_request(message: &str) -> Response {
    error_response(StatusCode::BAD_REQUEST, "invalid_request_error", message)
}

/// The checks of the real API that matter to Halo (see the module docs).
pub(super) fn check_request(body: &Value, blocks: &[SimBlock]) -> Result<(), String> {
    if body.get("model").and_then(Value::as_str).is_none() {
        return Err("model: Field required".into());
    }
    if body.get("max_tokens").and_then(Value::as_u64).is_none() {
        return Err("max_tokens: Field required".into());
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or("messages: at least one message is required")?;

    let markers = blocks.iter().filter(|b| b.breakpoint.is_some()).count()
        + usize::from(body.get("cache_control").is_some_and(|c| !c.is_null()));
    if markers > MAX_BREAKPOINTS {
        return Err(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {markers}."
        ));
    }
    let mut seen_five_minutes = false;
    for b in blocks {
        match b.breakpoint {
            Some(SimTtl::FiveMinutes) => seen_five_minutes = true,
            Some(SimTtl::OneHour) if seen_five_minutes => {
                return Err("a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block; longer TTLs must come first".into());
            }
            _ => {}
        }
    }

    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let content = |m: &Value| -> Vec<Value> {
        match m.get("content") {
            Some(Value::Array(items)) => items.clone(),
            Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
            _ => Vec::new(),
        }
    };
    let kind = |b: &Value| {
        b.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let str_field = |b: &Value, f: &str| b.get(f).and_then(Value::as_str).unwrap_or("").to_string();

    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if role != "user" && role != "assistant" {
            return Err(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            ));
        }
        if i == 0 && role != "user" {
            return Err(FIRST_MESSAGE_NOT_USER.into());
        }
        let items = content(message);
        if items.is_empty() {
            return Err(format!(
                "messages.{i}: all messages must have non-empty content"
            ));
        }
        for (j, block) in items.iter().enumerate() {
            match kind(block).as_str() {
                "text" if str_field(block, "text").is_empty() => {
                    return Err(format!(
                        "messages.{i}.content.{j}: text content blocks must be non-empty"
                    ));
                }
                "thinking" if block.get("signature").and_then(Value::as_str).is_none() => {
                    return Err(format!(
                        "messages.{i}.content.{j}.thinking.signature: Field required"
                    ));
                }
                "thinking" | "redacted_thinking" if block.get("cache_control").is_some() => {
                    return Err(format!(
                        "messages.{i}.content.{j}: cache_control cannot be set on thinking blocks"
                    ));
                }
                "tool_use" | "tool_result" if !has_tools => {
                    return Err(
                        "Requests which include `tool_use` or `tool_result` blocks must define tools."
                            .into(),
                    );
                }
                _ => {}
            }
        }

        // Tool results answer the tool uses of the message right before, at the start.
        let results: Vec<(usize, String)> = items
            .iter()
            .enumerate()
            .filter(|(_, b)| kind(b) == "tool_result")
            .map(|(j, b)| (j, str_field(b, "tool_use_id")))
            .collect();
        let uses: Vec<String> = if role == "user" && i > 0 {
            content(&messages[i - 1])
                .iter()
                .filter(|b| kind(b) == "tool_use")
                .map(|b| str_field(b, "id"))
                .collect()
        } else {
            Vec::new()
        };
        if role == "assistant" && !results.is_empty() {
            return Err(format!(
                "messages.{i}: tool_result blocks can only be in user messages"
            ));
        }
        for (j, id) in &results {
            if !uses.contains(id) {
                return Err(format!(
                    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                ));
            }
            if results.iter().filter(|(_, other)| other == id).count() > 1 {
                return Err(format!(
                    "messages.{i}.content.{j}: each `tool_use` must have a single result. Found multiple `tool_result` blocks with id: {id}"
                ));
            }
        }
        if let Some(first_other) = items.iter().position(|b| kind(b) != "tool_result")
            && results.iter().any(|(j, _)| *j > first_other)
        {
            return Err(format!(
                "messages.{i}: tool_result blocks must come first in the message; found one after other content"
            ));
        }
        if role == "assistant" {
            let ids: Vec<String> = items
                .iter()
                .filter(|b| kind(b) == "tool_use")
                .map(|b| str_field(b, "id"))
                .collect();
            if ids.is_empty() {
                continue;
            }
            let next = messages.get(i + 1);
            let answered: Vec<String> = next
                .filter(|n| n.get("role").and_then(Value::as_str) == Some("user"))
                .map(|n| {
                    content(n)
                        .iter()
                        .filter(|b| kind(b) == "tool_result")
                        .map(|b| str_field(b, "tool_use_id"))
                        .collect()
                })
                .unwrap_or_default();
            let missing: Vec<&str> = ids
                .iter()
                .filter(|id| !answered.contains(id))
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    missing.join(", ")
                ));
            }
        }
    }
    check_tool_choice(body)?;
    check_output_config(body)
}

/// `tool_choice`: `auto`, `any`, `none`, or `tool` naming a tool of the request
/// (<https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use#forcing-tool-use>).
pub(super) fn check_tool_choice(body: &Value) -> Result<(), String> {
    let Some(choice) = body.get("tool_choice").filter(|c| !c.is_null()) else {
        return Ok(());
    };
    let names: Vec<&str> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect();
    match choice.get("type").and_then(Value::as_str) {
        Some("auto" | "any" | "none") => Ok(()),
        Some("tool") => match choice.get("name").and_then(Value::as_str) {
            Some(n) if names.contains(&n) => Ok(()),
            Some(n) => Err(format!("tool_choice.name: Tool '{n}' not found in provided tools")),
            None => Err("tool_choice.tool.name: Field required".into()),
        },
        _ => Err("tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'".into()),
    }
}

/// `output_config.format`: `json_schema` with a schema, every object of it closed
/// (<https://platform.claude.com/docs/en/build-with-claude/structured-outputs>).
pub(super) fn check_output_config(body: &Value) -> Result<(), String> {
    let Some(format) = body
        .pointer("/output_config/format")
        .filter(|f| !f.is_null())
    else {
        return Ok(());
    };
    if format.get("type").and_then(Value::as_str) != Some("json_schema") {
        return Err("output_config.format.type: Input should be 'json_schema'".into());
    }
    let schema = format
        .get("schema")
        .filter(|s| s.is_object())
        .ok_or("output_config.format.schema: Field required")?;
    closed(schema)
}

pub(super) fn closed(schema: &Value) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Ok(());
    };
    if (map.get("type").and_then(Value::as_str) == Some("object") || map.contains_key("properties"))
        && map.get("additionalProperties") != Some(&Value::Bool(false))
    {
        return Err("output_config.format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false".into());
    }
    for value in map.values() {
        match value {
            Value::Object(_) => closed(value)?,
            Value::Array(items) => items.iter().try_for_each(closed)?,
            _ => {}
        }
    }
    Ok(())
}
