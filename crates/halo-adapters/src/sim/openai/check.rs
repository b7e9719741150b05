//! The checks [`OpenAiSim`](super::OpenAiSim) runs on every request before it answers,
//! with the providers' own 400 messages: tool pairing, `tool_choice`, `response_format`
//! (strict schemas closed and fully required), and each provider's context-window error.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::SimProfile;

/// A 400 in OpenAI's error shape.
pub(super) fn invalid_request(message: &str, param: Option<&str>) -> Response {
    let body = json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "param": param,
        "code": null,
    }});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// The profile's context-window error (see [`OpenAiSim::set_context_window`]) for a request
/// of `prompt` tokens asking for at most `completion` tokens, when they exceed `window`.
pub(super) fn context_error(
    profile: SimProfile,
    window: u64,
    prompt: u64,
    completion: Option<u64>,
) -> Option<Response> {
    let requested = prompt + completion.unwrap_or(0);
    if requested <= window {
        return None;
    }
    let head = format!("This model's maximum context length is {window} tokens. However, ");
    let (message, param, code) = match (profile, completion) {
        (SimProfile::OpenAi, None) => (
            format!(
                "{head}your messages resulted in {prompt} tokens. Please reduce the length of the messages."
            ),
            json!("messages"),
            "context_length_exceeded",
        ),
        (SimProfile::OpenAi, Some(c)) => (
            format!(
                "{head}you requested {requested} tokens ({prompt} in the messages, {c} in the completion). Please reduce the length of the messages or completion."
            ),
            json!("messages"),
            "context_length_exceeded",
        ),
        (SimProfile::DeepSeek, c) => (
            format!(
                "{head}you requested {requested} tokens ({prompt} in the messages, {} in the completion). Please reduce the length of the messages or completion.",
                c.unwrap_or(0)
            ),
            Value::Null,
            "invalid_request_error",
        ),
    };
    let body = json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "param": param,
        "code": code,
    }});
    Some((StatusCode::BAD_REQUEST, axum::Json(body)).into_response())
}

/// `tool_choice`: a mode, a named function of the request, or (OpenAI) the allowed-tools
/// form naming functions of the request, with mode `auto` or `required`
/// (<https://platform.openai.com/docs/api-reference/chat/create#chat-create-tool_choice>).
pub(super) fn check_tool_choice(profile: SimProfile, body: &Value) -> Result<(), String> {
    let Some(choice) = body.get("tool_choice").filter(|c| !c.is_null()) else {
        return Ok(());
    };
    let names: Vec<&str> = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .collect();
    if names.is_empty() {
        return Err("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.".into());
    }
    let known = |name: Option<&str>| -> Result<(), String> {
        match name {
            Some(n) if names.contains(&n) => Ok(()),
            Some(n) => Err(format!(
                "Invalid value for 'tool_choice': no function named '{n}' was specified in the 'tools' parameter."
            )),
            None => Err("Missing required parameter: 'tool_choice.function.name'.".into()),
        }
    };
    match choice {
        Value::String(m) if ["auto", "none", "required"].contains(&m.as_str()) => Ok(()),
        Value::String(m) => Err(format!(
            "Invalid value: '{m}'. Supported values are: 'none', 'auto', and 'required'."
        )),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("function") => known(choice.pointer("/function/name").and_then(Value::as_str)),
            Some("allowed_tools") if profile == SimProfile::OpenAi => {
                let mode = choice
                    .pointer("/allowed_tools/mode")
                    .and_then(Value::as_str);
                if !matches!(mode, Some("auto" | "required")) {
                    return Err("Invalid value for 'tool_choice.allowed_tools.mode': supported values are 'auto' and 'required'.".into());
                }
                let tools = choice
                    .pointer("/allowed_tools/tools")
                    .and_then(Value::as_array)
                    .filter(|t| !t.is_empty())
                    .ok_or("Invalid 'tool_choice.allowed_tools.tools': empty array. Expected an array with minimum length 1.")?;
                for tool in tools {
                    if tool.get("type").and_then(Value::as_str) != Some("function") {
                        return Err("Invalid value for 'tool_choice.allowed_tools.tools[].type': expected 'function'.".into());
                    }
                    known(tool.pointer("/function/name").and_then(Value::as_str))?;
                }
                Ok(())
            }
            other => Err(format!(
                "Invalid value for 'tool_choice.type': {}.",
                other.unwrap_or("missing")
            )),
        },
        _ => Err("Invalid type for 'tool_choice': expected a string or an object.".into()),
    }
}

/// `response_format`: `text`, `json_object`, or (OpenAI) `json_schema` with a valid name and
/// a schema; `strict: true` needs every object closed and every property required
/// (<https://platform.openai.com/docs/guides/structured-outputs#supported-schemas>).
/// DeepSeek answers `json_schema` as its API does: not available.
pub(super) fn check_response_format(profile: SimProfile, body: &Value) -> Result<(), String> {
    let Some(format) = body.get("response_format").filter(|f| !f.is_null()) else {
        return Ok(());
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text" | "json_object") => Ok(()),
        Some("json_schema") if profile == SimProfile::DeepSeek => {
            Err("This response_format type is unavailable now".into())
        }
        Some("json_schema") => {
            let name = format
                .pointer("/json_schema/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name_ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !name_ok {
                return Err(format!(
                    "Invalid 'response_format.json_schema.name': '{name}'. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
                ));
            }
            let schema = format
                .pointer("/json_schema/schema")
                .filter(|s| s.is_object())
                .ok_or("Missing required parameter: 'response_format.json_schema.schema'.")?;
            if format.pointer("/json_schema/strict") == Some(&Value::Bool(true)) {
                strict_ok(schema, name)?;
            }
            Ok(())
        }
        other => Err(format!(
            "Invalid value: '{}'. Supported values are: 'text', 'json_object', and 'json_schema'.",
            other.unwrap_or("missing")
        )),
    }
}

/// Strict mode's rules for every object of the schema.
pub(super) fn strict_ok(schema: &Value, name: &str) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Ok(());
    };
    if map.get("type").and_then(Value::as_str) == Some("object") || map.contains_key("properties") {
        if map.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Err(format!(
                "Invalid schema for response_format '{name}': In context=(), 'additionalProperties' is required to be supplied and to be false."
            ));
        }
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for key in map
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|p| p.keys())
        {
            if !required.contains(&key.as_str()) {
                return Err(format!(
                    "Invalid schema for response_format '{name}': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing '{key}'."
                ));
            }
        }
    }
    for value in map.values() {
        match value {
            Value::Object(_) => strict_ok(value, name)?,
            Value::Array(items) => {
                for item in items {
                    strict_ok(item, name)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The checks the real APIs make that matter to Halo: `model` and `messages` present, and
/// every assistant tool call answered by exactly one `tool` message right after it, with no
/// orphan `tool` message. Returns `(message, param)` of the 400 to send.
pub(super) fn check_request(
    profile: SimProfile,
    body: &Value,
) -> Result<(), (String, &'static str)> {
    if body.get("model").and_then(Value::as_str).is_none() {
        return Err(("you must provide a model parameter".into(), "model"));
    }
    check_tool_choice(profile, body).map_err(|m| (m, "tool_choice"))?;
    check_response_format(profile, body).map_err(|m| (m, "response_format"))?;
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or((
            "'messages' is a required property and must be a non-empty array".to_string(),
            "messages",
        ))?;
    let mut i = 0;
    while i < messages.len() {
        match messages[i].get("role").and_then(Value::as_str) {
            Some("assistant") => {
                let mut open: Vec<&str> = Vec::new();
                for call in messages[i]
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let id = call.get("id").and_then(Value::as_str).unwrap_or("");
                    if id.is_empty() || open.contains(&id) {
                        return Err((
                            format!("messages.[{i}]: tool call ids must be unique and non-empty"),
                            "messages",
                        ));
                    }
                    open.push(id);
                }
                let mut j = i + 1;
                while let Some(next) = messages.get(j)
                    && next.get("role").and_then(Value::as_str) == Some("tool")
                {
                    let id = next
                        .get("tool_call_id")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let Some(pos) = open.iter().position(|o| *o == id) else {
                        return Err((
                            format!(
                                "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. messages.[{j}].tool_call_id `{id}` answers no open call"
                            ),
                            "messages",
                        ));
                    };
                    open.swap_remove(pos);
                    j += 1;
                }
                if !open.is_empty() {
                    return Err((
                        format!(
                            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                            open.join(", ")
                        ),
                        "messages",
                    ));
                }
                i = j;
            }
            Some("tool") => {
                return Err((
                    format!(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. messages.[{i}] follows none"
                    ),
                    "messages",
                ));
            }
            Some(_) => i += 1,
            None => {
                return Err((
                    format!("messages.[{i}]: 'role' is a required property"),
                    "messages",
                ));
            }
        }
    }
    Ok(())
}
