//! The checks [`ResponsesSim`](super::ResponsesSim) runs on a request before it answers,
//! with the API's 400 messages: the input items' shapes, call and output pairing, the
//! reasoning items it issued replayed verbatim and followed by their item, `tool_choice`,
//! `text.format` and the cache options.

use std::collections::HashMap;

use serde_json::Value;

use super::Issued;

/// A rejected request: the message, and the parameter it names.
pub(super) type Rejection = (String, &'static str);

/// The reasoning rule: each reasoning item the simulator issued comes back with its
/// `encrypted_content` unchanged and directly followed by the item that followed it in
/// its output; an item that followed a reasoning item comes back right after it. The
/// API's wording, as reported by its users (`openai/openai-node#1567`,
/// `continuedev/continue#12620`).
pub(super) fn check_reasoning(
    items: &[Value],
    issued: &HashMap<String, Issued>,
    followers: &HashMap<String, String>,
) -> Result<(), Rejection> {
    let id_of = |item: &Value| item.get("id").and_then(Value::as_str).map(str::to_owned);
    for (i, item) in items.iter().enumerate() {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        let Some(id) = id_of(item) else { continue };
        if kind == "reasoning" {
            let Some(known) = issued.get(&id) else {
                return Err((
                    format!(
                        "Item with id '{id}' not found. Items are not persisted when `store` is set to false."
                    ),
                    "input",
                ));
            };
            let sent = item.get("encrypted_content").and_then(Value::as_str);
            if known.encrypted_content.is_some() && sent != known.encrypted_content.as_deref() {
                return Err((
                    format!("The encrypted content for item {id} could not be verified."),
                    "input",
                ));
            }
            let next = items.get(i + 1).and_then(id_of);
            if next.as_deref() != Some(known.follower.as_str()) {
                return Err((
                    format!(
                        "Item '{id}' of type 'reasoning' was provided without its required following item."
                    ),
                    "input",
                ));
            }
        } else if let Some(reasoning) = followers.get(&id) {
            let previous = i.checked_sub(1).and_then(|p| items.get(p)).and_then(id_of);
            if previous.as_deref() != Some(reasoning.as_str()) {
                return Err((
                    format!(
                        "Item '{id}' of type '{kind}' was provided without its required 'reasoning' item: '{reasoning}'."
                    ),
                    "input",
                ));
            }
        }
    }
    Ok(())
}

/// The items' shapes and the pairing of function calls with their outputs.
pub(super) fn check_items(items: &[Value]) -> Result<(), Rejection> {
    let mut open: Vec<String> = Vec::new();
    let mut answered: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                let role = item.get("role").and_then(Value::as_str).unwrap_or_default();
                if !["user", "system", "developer", "assistant"].contains(&role) {
                    return Err((
                        format!(
                            "Invalid value: '{role}'. Supported values are: 'user', 'system', 'developer', and 'assistant'."
                        ),
                        "input",
                    ));
                }
                check_breakpoints(item, role == "assistant", i)?;
            }
            "function_call" => {
                let call_id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                if call_id.is_empty() || item.get("name").and_then(Value::as_str).is_none() {
                    return Err((
                        format!(
                            "Missing required parameter: 'input[{i}].call_id' or 'input[{i}].name'."
                        ),
                        "input",
                    ));
                }
                open.push(call_id.to_owned());
            }
            "function_call_output" => {
                let call_id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                let Some(pos) = open.iter().position(|c| c == call_id) else {
                    return Err((
                        format!(
                            "No tool call found for function call output with call_id {call_id}."
                        ),
                        "input",
                    ));
                };
                open.swap_remove(pos);
                answered.push(call_id.to_owned());
                check_breakpoints(item, false, i)?;
            }
            "reasoning" => {}
            other => {
                return Err((
                    format!(
                        "Invalid value: '{other}'. Supported values are: 'message', 'function_call', 'function_call_output', and 'reasoning'."
                    ),
                    "input",
                ));
            }
        }
    }
    if let Some(call_id) = open.first() {
        return Err((
            format!("No tool output found for function call {call_id}."),
            "input",
        ));
    }
    Ok(())
}

/// `prompt_cache_breakpoint` only on input blocks: never on assistant output.
fn check_breakpoints(item: &Value, assistant: bool, i: usize) -> Result<(), Rejection> {
    let parts = item
        .get("content")
        .or_else(|| item.get("output"))
        .and_then(Value::as_array);
    for part in parts.into_iter().flatten() {
        let marked = part
            .get("prompt_cache_breakpoint")
            .is_some_and(|b| !b.is_null());
        if !marked {
            continue;
        }
        let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
        if assistant || !["input_text", "input_image", "input_file"].contains(&kind) {
            return Err((
                format!("Unknown parameter: 'input[{i}].content.prompt_cache_breakpoint'."),
                "input",
            ));
        }
        if part
            .pointer("/prompt_cache_breakpoint/mode")
            .and_then(Value::as_str)
            != Some("explicit")
        {
            return Err((
                format!(
                    "Invalid value for 'input[{i}].prompt_cache_breakpoint.mode'. Supported values are: 'explicit'."
                ),
                "input",
            ));
        }
    }
    Ok(())
}

/// `tools` in the flat shape, and a `tool_choice` naming one of them.
pub(super) fn check_tools(body: &Value) -> Result<(), Rejection> {
    let tools = body.get("tools").and_then(Value::as_array);
    let mut names = Vec::new();
    for (i, tool) in tools.into_iter().flatten().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            continue;
        }
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            return Err((
                format!("Missing required parameter: 'tools[{i}].name'."),
                "tools",
            ));
        };
        if tool.get("function").is_some() {
            return Err((
                format!("Unknown parameter: 'tools[{i}].function'."),
                "tools",
            ));
        }
        names.push(name);
    }
    let named = |name: &str| names.contains(&name);
    match body.get("tool_choice") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(mode)) if ["auto", "none", "required"].contains(&mode.as_str()) => {
            Ok(())
        }
        Some(choice) if choice.get("type").and_then(Value::as_str) == Some("function") => {
            match choice.get("name").and_then(Value::as_str) {
                Some(name) if named(name) => Ok(()),
                _ => Err((
                    format!("Tool choice '{choice}' not found in 'tools' parameter."),
                    "tool_choice",
                )),
            }
        }
        Some(choice) if choice.get("type").and_then(Value::as_str) == Some("allowed_tools") => {
            let all_named = choice
                .get("tools")
                .and_then(Value::as_array)
                .is_some_and(|ts| {
                    ts.iter()
                        .all(|t| t.get("name").and_then(Value::as_str).is_some_and(named))
                });
            if all_named {
                Ok(())
            } else {
                Err((
                    format!("Allowed tools '{choice}' name tools not in 'tools'."),
                    "tool_choice",
                ))
            }
        }
        Some(other) => Err((
            format!("Invalid value for 'tool_choice': {other}."),
            "tool_choice",
        )),
    }
}

/// `text.format`: `text`, `json_object`, or `json_schema` with a name and a schema.
pub(super) fn check_text(body: &Value) -> Result<(), Rejection> {
    let Some(format) = body.pointer("/text/format") else {
        return Ok(());
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text" | "json_object") => Ok(()),
        Some("json_schema")
            if format.get("name").and_then(Value::as_str).is_some()
                && format.get("schema").is_some_and(Value::is_object) =>
        {
            Ok(())
        }
        _ => Err((
            format!("Invalid value for 'text.format': {format}."),
            "text.format",
        )),
    }
}
