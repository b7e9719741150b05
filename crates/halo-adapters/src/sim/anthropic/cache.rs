//! The cache rule of [`AnthropicSim`](super::AnthropicSim): reads from each breakpoint
//! within the lookback, writes at every breakpoint, and the usage split they give (see the
//! module docs of [`anthropic`](super)).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use serde_json::Value;

use super::{Entry, LOOKBACK_BLOCKS, SimBlock, SimTtl, State, min_cacheable_tokens};

/// The figures of one accepted request.
pub(super) struct CacheOutcome {
    pub(super) read: u64,
    pub(super) write_5m: u64,
    pub(super) write_1h: u64,
    pub(super) total: u64,
    pub(super) breakpoints: Vec<usize>,
}

/// Reads and writes the cache for `blocks` (see the module docs).
pub(super) fn run_cache(
    state: &mut State,
    body: &Value,
    model: &str,
    blocks: &[SimBlock],
    automatic: Option<SimTtl>,
) -> CacheOutcome {
    let mut cumulative = Vec::with_capacity(blocks.len());
    let mut hashes = Vec::with_capacity(blocks.len());
    let mut hasher = DefaultHasher::new();
    model.hash(&mut hasher);
    let field = |key: &str| body.get(key).filter(|v| !v.is_null()).map(Value::to_string);
    field("output_config").hash(&mut hasher);
    let tool_choice = field("tool_choice");
    let mut in_messages = false;
    let mut sum = 0u64;
    for b in blocks {
        sum += state.memo.tokens(&b.text).len() as u64;
        cumulative.push(sum);
        if !in_messages && (b.role == "user" || b.role == "assistant") {
            in_messages = true;
            tool_choice.hash(&mut hasher);
        }
        b.role.hash(&mut hasher);
        b.text.hash(&mut hasher);
        hashes.push(hasher.finish());
    }
    let min = state
        .min_tokens
        .unwrap_or_else(|| min_cacheable_tokens(model));
    let mut breakpoints: Vec<(usize, SimTtl)> = blocks
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.breakpoint.map(|ttl| (i, ttl)))
        .collect();
    if let (Some(ttl), Some(last)) = (automatic, blocks.len().checked_sub(1))
        && !breakpoints.iter().any(|(i, _)| *i == last)
    {
        breakpoints.push((last, ttl));
    }
    breakpoints.retain(|(i, _)| cumulative[*i] >= min);
    breakpoints.sort_by_key(|(i, _)| *i);

    let now = state.now();
    state.entries.retain(|_, e| e.expires > now);

    // The longest live entry within the lookback of some breakpoint.
    let mut read_at: Option<usize> = None;
    for &(b, _) in &breakpoints {
        let lowest = b.saturating_sub(LOOKBACK_BLOCKS);
        for j in (lowest..=b).rev() {
            if cumulative[j] < min {
                break;
            }
            if state.entries.contains_key(&hashes[j]) {
                read_at = read_at.max(Some(j));
                break;
            }
        }
    }
    let read = read_at.map_or(0, |j| cumulative[j]);
    if let Some(j) = read_at
        && let Some(entry) = state.entries.get_mut(&hashes[j])
    {
        entry.expires = now + entry.ttl.duration();
    }

    // Writes: each breakpoint past the read point; its span since the previous one is
    // written under its TTL.
    let (mut write_5m, mut write_1h) = (0, 0);
    let mut written_to = read;
    for &(b, ttl) in &breakpoints {
        let entry = state
            .entries
            .entry(hashes[b])
            .or_insert(Entry { expires: now, ttl });
        entry.ttl = entry.ttl.max(ttl);
        entry.expires = entry.expires.max(now + ttl.duration());
        if cumulative[b] > written_to {
            let span = cumulative[b] - written_to;
            match ttl {
                SimTtl::FiveMinutes => write_5m += span,
                SimTtl::OneHour => write_1h += span,
            }
            written_to = cumulative[b];
        }
    }
    CacheOutcome {
        read,
        write_5m,
        write_1h,
        total: sum,
        breakpoints: breakpoints.iter().map(|(i, _)| *i).collect(),
    }
}
