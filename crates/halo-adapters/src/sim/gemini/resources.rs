//! The `cachedContents` resources of [`GeminiSim`](super::GeminiSim): creating one (its
//! expiry from `ttl` or `expireTime`, its tokens, the minimum), its JSON form, and the
//! canonical text its tokens are counted on (<https://ai.google.dev/api/caching>).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::http::StatusCode;
use halo_core::prefix::canonicalize;
use serde_json::{Map, Value, json};

use super::check::{check_contents, check_tool_config};
use super::render::rfc3339;
use super::{Answer, CacheObject, DEFAULT_TTL, Reply, SimCachedContent, State, invalid};
use crate::sim::tokens;

/// The tokens of a cached content: those of the canonical JSON (sorted keys, no whitespace)
/// of its `{contents, systemInstruction, tools, toolConfig}` (what is present), as in a
/// `POST cachedContents` body.
pub fn cached_content_tokens(create_body: &Value) -> u64 {
    tokens(&canonical(&cache_content(create_body))).len() as u64
}

/// The cacheable fields of a create body.
pub(super) fn cache_content(body: &Value) -> Value {
    let mut out = Map::new();
    for key in ["contents", "systemInstruction", "tools", "toolConfig"] {
        if let Some(v) = body.get(key).filter(|v| !v.is_null()) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// Canonical JSON text: sorted keys, no whitespace.
pub(super) fn canonical(value: &Value) -> String {
    canonicalize(value.clone()).to_string()
}

/// One contents entry's linearized text.
pub(super) fn content_piece(content: &Value) -> String {
    let mut s = canonical(content);
    s.push('\n');
    s
}

/// `ttl` (a duration) or `expireTime` (not parsed: the simulator takes only `ttl`), else
/// the default TTL.
pub(super) fn expiry(body: &Value, now: SystemTime) -> Result<SystemTime, (StatusCode, Value)> {
    match body.get("ttl") {
        None | Some(Value::Null) => Ok(now + DEFAULT_TTL),
        Some(v) => {
            let secs = v
                .as_str()
                .and_then(|s| s.strip_suffix('s'))
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .ok_or_else(|| {
                    invalid(format!(
                        "Invalid value at 'ttl' ({v}): expected a duration such as \"3600s\""
                    ))
                })?;
            Ok(now + Duration::from_secs_f64(secs))
        }
    }
}

pub(super) fn create(state: &mut State, body: &Value, now: SystemTime) -> Reply {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .filter(|m| m.starts_with("models/"))
        .ok_or_else(|| invalid("* CachedContent.model: model is required as `models/{model}`"))?
        .to_string();
    check_contents(body.get("contents").unwrap_or(&Value::Null), true)?;
    check_tool_config(body.get("tools"), body.get("toolConfig"))?;
    let content = match cache_content(body) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let seq: Arc<[u32]> = tokens(&canonical(&Value::Object(content.clone()))).into();
    let total = seq.len() as u64;
    let minimum = state.minimum(&model);
    if total < minimum {
        return Err(invalid(format!(
            "Cached content is too small. total_token_count={total}, min_total_token_count={minimum}"
        )));
    }
    let expire_time = expiry(body, now)?;
    let name = format!("cachedContents/sim{:08}", state.next_cache_id);
    state.next_cache_id += 1;
    let object = CacheObject {
        public: SimCachedContent {
            name: name.clone(),
            model,
            tokens: total,
            expire_time,
            display_name: body
                .get("displayName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        },
        create_time: now,
        update_time: now,
        content,
        token_seq: seq.clone(),
    };
    let answer = resource(&object);
    state.seen.push(seq);
    state.caches.insert(name, object);
    Ok(Answer::Json(answer))
}

/// The resource JSON of a cached content (without its contents, as the API's `get`).
pub(super) fn resource(c: &CacheObject) -> Value {
    json!({
        "name": c.public.name,
        "model": c.public.model,
        "createTime": rfc3339(c.create_time),
        "updateTime": rfc3339(c.update_time),
        "expireTime": rfc3339(c.public.expire_time),
        "displayName": c.public.display_name,
        "usageMetadata": {"totalTokenCount": c.public.tokens},
    })
}
