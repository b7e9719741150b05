//! A generate call of [`GeminiSim`](super::GeminiSim): the checks, the cache (a named
//! cached content, else the implicit cache above the model's minimum), the context window,
//! the reply and its usage, rendered whole or as `alt=sse` chunks.

use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Map, Value};

use super::check::{check_calls, check_contents, check_generation_config, check_tool_config};
use super::render::{Turn, usage_json};
use super::resources::{canonical, content_piece};
use super::{Answer, CACHE_NOT_FOUND, Reply, SimUsage, State, error, invalid, json_response};
use crate::sim::{SCRIPT_EXHAUSTED, common_prefix};

pub(super) fn generate(
    state: &mut State,
    model: &str,
    body: &Value,
    stream: Option<bool>,
) -> Reply {
    check_contents(body.get("contents").unwrap_or(&Value::Null), false)?;
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    let model_path = format!("models/{model}");
    let cached = match body.get("cachedContent").and_then(Value::as_str) {
        None => None,
        Some(name) => {
            if ["systemInstruction", "tools", "toolConfig"]
                .iter()
                .any(|k| body.get(*k).is_some_and(|v| !v.is_null()))
            {
                return Err(invalid(
                    "CachedContent can not be used with GenerateContent request setting system_instruction, tools or tool_config.\n\nProposed fix: move those values to CachedContent from GenerateContent request.",
                ));
            }
            let c = state.caches.get(name).ok_or_else(|| {
                error(StatusCode::FORBIDDEN, "PERMISSION_DENIED", CACHE_NOT_FOUND)
            })?;
            if c.public.model != model_path {
                return Err(invalid(format!(
                    "Model used by GenerateContent request ({model_path}) and CachedContent ({}) has to be the same.",
                    c.public.model
                )));
            }
            Some(c.clone())
        }
    };
    // Tools and tool config from the request or from its cached content.
    let tools = cached
        .as_ref()
        .and_then(|c| c.content.get("tools").cloned())
        .or_else(|| body.get("tools").cloned());
    let tool_config = cached
        .as_ref()
        .and_then(|c| c.content.get("toolConfig").cloned())
        .or_else(|| body.get("toolConfig").cloned());
    check_tool_config(tools.as_ref(), tool_config.as_ref())?;
    check_generation_config(model, body.get("generationConfig"), tools.as_ref())?;
    let all_contents: Vec<Value> = cached
        .as_ref()
        .and_then(|c| c.content.get("contents"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(&contents)
        .cloned()
        .collect();
    let issued = state.issued_signatures.clone();
    check_calls(
        &all_contents,
        state.thought_signatures.then_some(issued.as_slice()),
    )?;
    // The linearized request.
    let head: Arc<[u32]> = match &cached {
        Some(c) => c.token_seq.clone(),
        None => {
            let mut h = Map::new();
            for key in ["systemInstruction", "tools", "toolConfig"] {
                if let Some(v) = body.get(key).filter(|v| !v.is_null()) {
                    h.insert(key.to_string(), v.clone());
                }
            }
            if h.is_empty() {
                Arc::from(Vec::new())
            } else {
                state.memo.tokens(&canonical(&Value::Object(h)))
            }
        }
    };
    let mut seq: Vec<u32> = head.to_vec();
    for c in &contents {
        seq.extend_from_slice(&state.memo.tokens(&content_piece(c)));
    }
    let seq: Arc<[u32]> = seq.into();
    if let Some(window) = state.harness.exceeded(seq.len() as u64) {
        return Err(invalid(format!(
            "The input token count ({}) exceeds the maximum number of tokens allowed ({window}).",
            seq.len()
        )));
    }
    let Some(reply) = state.harness.reply(body.get("contents")) else {
        return Err(error(
            StatusCode::IM_A_TEAPOT,
            "FAILED_PRECONDITION",
            SCRIPT_EXHAUSTED,
        ));
    };
    let explicit = cached.as_ref().map_or(0, |c| c.public.tokens);
    let minimum = state.minimum(model);
    let implicit = state
        .implicit
        .iter()
        .filter(|(m, _)| m == model)
        .map(|(_, earlier)| common_prefix(&seq, earlier) as u64)
        .max()
        .unwrap_or(0);
    let implicit = if implicit >= minimum { implicit } else { 0 };
    let seen = state.seen.longest_prefix(&seq) as u64;
    state.implicit.push((model.to_string(), seq.clone()));
    state.seen.push(seq.clone());

    let response_id = format!("sim-response-{}", state.next_response);
    state.next_response += 1;
    let signature = state
        .thought_signatures
        .then(|| format!("sim-signature-{response_id}"));
    if let Some(s) = &signature {
        state.issued_signatures.push(s.clone());
    }
    let thoughts = state.thoughts.clone();
    let turn = Turn::new(reply, signature, thoughts);
    let usage = SimUsage {
        prompt_tokens: seq.len() as u64,
        cached_tokens: explicit.max(implicit),
        explicit_tokens: explicit,
        output_tokens: turn.output_tokens(),
        thoughts_tokens: turn.thought_tokens(),
        seen_prefix_tokens: seen,
    };
    let body = match stream {
        None => json_response(
            StatusCode::OK,
            &turn.whole(&usage_json(&usage), model, &response_id),
        ),
        Some(sse) => {
            let chunks = turn.chunks(&usage_json(&usage), model, &response_id);
            if sse {
                let text: String = chunks
                    .iter()
                    .map(|c| format!("data: {c}\r\n\r\n"))
                    .collect();
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    text,
                )
                    .into_response()
            } else {
                json_response(StatusCode::OK, &Value::Array(chunks))
            }
        }
    };
    Ok(Answer::Generated { body, usage })
}
