//! The cache rules of [`OpenAiSim`](super::OpenAiSim): the pool a request is routed to,
//! the cached tokens by each profile's rule (see the module docs of [`openai`](super)),
//! and the breakpoint positions of a GPT-5.6+ request.

use std::sync::Arc;

use serde_json::Value;

use super::{DeepSeekUnits, Pool, SimProfile, State, openai_cached_tokens};
use crate::sim::common_prefix;

/// The token positions of a request's cache breakpoints (GPT-5.6+): the end of each
/// message one of whose content parts carries `prompt_cache_breakpoint`, and the implicit
/// one at the end of the newest message that is not the assistant's. `ends` are the
/// segment ends of [`linearize`]'s segments, whose last ones are the messages.
pub(super) fn marker_positions(body: &Value, ends: &[usize]) -> (Vec<usize>, Option<usize>) {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let first = ends.len().saturating_sub(messages.len());
    let mut explicit = Vec::new();
    let mut implicit = None;
    for (i, message) in messages.iter().enumerate() {
        let end = ends.get(first + i).copied().unwrap_or(0);
        let marked = message
            .get("content")
            .and_then(Value::as_array)
            .is_some_and(|parts| {
                parts.iter().any(|p| {
                    p.get("prompt_cache_breakpoint")
                        .is_some_and(|b| !b.is_null())
                })
            });
        if marked {
            explicit.push(end);
        }
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            implicit = Some(end);
        }
    }
    (explicit, implicit)
}

/// The cache pool a request is routed to.
pub(super) fn pool_key(profile: SimProfile, body: &Value) -> String {
    let model = body.get("model").and_then(Value::as_str).unwrap_or("");
    let field = match profile {
        SimProfile::OpenAi => "prompt_cache_key",
        SimProfile::DeepSeek => "user_id",
    };
    let key = body.get(field).and_then(Value::as_str).unwrap_or("");
    format!("{model}\u{0}{key}")
}

/// The cached tokens of `prompt` in `pool`, by the profile's rule.
pub(super) fn cached_tokens(state: &State, pool: Option<&Pool>, prompt: &[u32]) -> usize {
    let Some(pool) = pool else { return 0 };
    match state.profile {
        SimProfile::OpenAi => {
            let shared = pool
                .prompts
                .iter()
                .map(|p| common_prefix(p, prompt))
                .max()
                .unwrap_or(0);
            openai_cached_tokens(shared)
        }
        SimProfile::DeepSeek => match state.deepseek_units {
            DeepSeekUnits::Current => pool
                .units
                .iter()
                .filter(|u| u.len() <= prompt.len() && prompt.starts_with(u))
                .map(|u| u.len())
                .max()
                .unwrap_or(0),
            DeepSeekUnits::Fixed(unit) => {
                let shared = pool
                    .units
                    .iter()
                    .map(|u| common_prefix(u, prompt))
                    .max()
                    .unwrap_or(0);
                shared - shared % unit.max(1)
            }
        },
    }
}

pub(super) fn push_unique(list: &mut Vec<Arc<[u32]>>, item: Arc<[u32]>) {
    if !list.iter().any(|x| **x == *item) {
        list.push(item);
    }
}
