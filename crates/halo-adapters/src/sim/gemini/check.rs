//! The checks [`GeminiSim`](super::GeminiSim) runs on a generate request before it
//! answers, with the API's 400 messages: `toolConfig` naming declared functions,
//! `generationConfig`, the contents' roles and parts, function call and response pairing,
//! and (when on) the thought signatures of the current turn.

use axum::http::StatusCode;
use serde_json::Value;

use super::{FUNCTION_CALL_TURN_ORDER, invalid};

/// The declared function names of a `tools` value.
pub(super) fn declared(tools: Option<&Value>) -> Vec<String> {
    tools
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
        .flatten()
        .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// `toolConfig.functionCallingConfig`: a known mode, and `allowedFunctionNames` only with
/// `ANY` or `VALIDATED`, naming declared functions
/// (<https://ai.google.dev/api/caching#FunctionCallingConfig>).
pub(super) fn check_tool_config(
    tools: Option<&Value>,
    tool_config: Option<&Value>,
) -> Result<(), (StatusCode, Value)> {
    let Some(config) = tool_config
        .and_then(|c| c.get("functionCallingConfig"))
        .filter(|c| !c.is_null())
    else {
        return Ok(());
    };
    let mode = config.get("mode").and_then(Value::as_str).unwrap_or("AUTO");
    if !["AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"].contains(&mode) {
        return Err(invalid(format!(
            "Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), \"{mode}\""
        )));
    }
    let allowed: Vec<&str> = config
        .get("allowedFunctionNames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if allowed.is_empty() {
        return Ok(());
    }
    if mode != "ANY" && mode != "VALIDATED" {
        return Err(invalid(
            "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: allowed_function_names can only be set when mode is ANY or VALIDATED.",
        ));
    }
    let names = declared(tools);
    if let Some(unknown) = allowed.iter().find(|a| !names.iter().any(|n| n == *a)) {
        return Err(invalid(format!(
            "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: function `{unknown}` is not declared in tools."
        )));
    }
    Ok(())
}

/// `generationConfig`: a `responseSchema` needs `responseMimeType: application/json`, and a
/// JSON response next to function declarations is refused before Gemini 3.
pub(super) fn check_generation_config(
    model: &str,
    config: Option<&Value>,
    tools: Option<&Value>,
) -> Result<(), (StatusCode, Value)> {
    let Some(config) = config else {
        return Ok(());
    };
    let json = config.get("responseMimeType").and_then(Value::as_str) == Some("application/json");
    if config.get("responseSchema").is_some_and(|s| !s.is_null()) && !json {
        return Err(invalid(
            "* GenerateContentRequest.generation_config.response_schema: response_mime_type must be set to application/json when response_schema is set.",
        ));
    }
    if json && !declared(tools).is_empty() && !crate::gemini::json_with_tools(model) {
        return Err(invalid(
            "Function calling with a response mime type: 'application/json' is unsupported",
        ));
    }
    Ok(())
}

/// Roles, and (in requests) that every function-call turn is answered.
pub(super) fn check_contents(
    contents: &Value,
    allow_empty: bool,
) -> Result<(), (StatusCode, Value)> {
    let list = match contents {
        Value::Null if allow_empty => return Ok(()),
        Value::Array(list) if allow_empty || !list.is_empty() => list,
        _ => {
            return Err(invalid(
                "* GenerateContentRequest.contents: contents is not specified",
            ));
        }
    };
    for (i, c) in list.iter().enumerate() {
        let role = role_of(c);
        if role != "user" && role != "model" {
            return Err(invalid(format!(
                "Please use a valid role: user, model. (contents[{i}].role = {role})"
            )));
        }
        let parts = c.get("parts").and_then(Value::as_array);
        if parts.is_none_or(|p| p.is_empty()) {
            return Err(invalid(format!(
                "* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."
            )));
        }
        for (j, part) in parts_of(c).iter().enumerate() {
            if !has_data(part) {
                return Err(invalid(format!(
                    "* GenerateContentRequest.contents[{i}].parts[{j}].data: required oneof field 'data' must have one initialized field"
                )));
            }
        }
    }
    Ok(())
}

/// Whether a part sets its `data` oneof, as the real API checks it: an empty `text` does
/// not count (Gemini answers `{"text": ""}` with HTTP 400 "required oneof field 'data'
/// must have one initialized field"), except on a part that carries a `thoughtSignature`
/// (the signed empty text part Gemini itself sends at the end of an answer).
pub(super) fn has_data(part: &Value) -> bool {
    const DATA: [&str; 6] = [
        "inlineData",
        "fileData",
        "functionCall",
        "functionResponse",
        "executableCode",
        "codeExecutionResult",
    ];
    if DATA
        .iter()
        .any(|f| part.get(*f).is_some_and(|v| !v.is_null()))
    {
        return true;
    }
    match part.get("text").and_then(Value::as_str) {
        Some("") => part.get("thoughtSignature").is_some_and(|s| s.is_string()),
        Some(_) => true,
        None => false,
    }
}

/// A content's role; a content without one is a `user` content.
pub(super) fn role_of(content: &Value) -> &str {
    content
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("user")
}

pub(super) fn parts_of(content: &Value) -> &[Value] {
    content
        .get("parts")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub(super) fn call_names(content: &Value, field: &str) -> Vec<String> {
    parts_of(content)
        .iter()
        .filter_map(|p| p.get(field))
        .map(|f| {
            f.get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The function-call pairing, the ids the simulator never issued, and (with signatures
/// on) the signatures of the current turn.
pub(super) fn check_calls(
    all: &[Value],
    signatures: Option<&[String]>,
) -> Result<(), (StatusCode, Value)> {
    for (i, c) in all.iter().enumerate() {
        for p in parts_of(c) {
            for field in ["functionCall", "functionResponse"] {
                if let Some(id) = p.get(field).and_then(|f| f.get("id")) {
                    return Err(invalid(format!(
                        "contents[{i}]: {field}.id {id} was never issued by this API (the simulator sends calls without ids)"
                    )));
                }
            }
        }
        let calls = call_names(c, "functionCall");
        let responses = call_names(c, "functionResponse");
        if !calls.is_empty() {
            // A user turn and a function-response turn are both `user` contents.
            let after_user = i
                .checked_sub(1)
                .and_then(|j| all.get(j))
                .is_some_and(|before| role_of(before) == "user");
            if !after_user {
                return Err(invalid(FUNCTION_CALL_TURN_ORDER));
            }
            let answered = all
                .get(i + 1)
                .map(|n| call_names(n, "functionResponse"))
                .unwrap_or_default();
            if answered != calls {
                return Err(invalid(format!(
                    "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn. (contents[{i}] calls {calls:?}, the next content answers {answered:?})"
                )));
            }
        }
        if !responses.is_empty() {
            let asked = i
                .checked_sub(1)
                .and_then(|j| all.get(j))
                .map(|p| call_names(p, "functionCall"))
                .unwrap_or_default();
            if asked != responses {
                return Err(invalid(format!(
                    "Please ensure that function response turn comes immediately after a function call turn. (contents[{i}])"
                )));
            }
        }
    }
    if let Some(issued) = signatures {
        // The current turn: from the last user content with ordinary (non-response) parts.
        let start = all
            .iter()
            .rposition(|c| {
                c.get("role").and_then(Value::as_str) != Some("model")
                    && parts_of(c)
                        .iter()
                        .any(|p| p.get("functionResponse").is_none())
            })
            .unwrap_or(0);
        for (i, c) in all.iter().enumerate().skip(start) {
            let first_call = parts_of(c).iter().find(|p| p.get("functionCall").is_some());
            if let Some(part) = first_call {
                let ok = part
                    .get("thoughtSignature")
                    .and_then(Value::as_str)
                    .is_some_and(|s| issued.iter().any(|x| x == s));
                if !ok {
                    return Err(invalid(format!(
                        "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                        part["functionCall"]["name"].as_str().unwrap_or_default(),
                        i + 1
                    )));
                }
            }
        }
    }
    Ok(())
}
