//! OpenAI's GPT-5.6+ prompt cache as the OpenAI-compatible and Responses simulators
//! compute it: caching at breakpoints, writes billed.
//!
//! The simulators' own reading of the documentation (the OpenAPI spec's
//! `PromptCacheOptions` / `PromptCacheBreakpoint` descriptions as published in the
//! generated SDKs, and <https://developers.openai.com/api/docs/guides/prompt-caching>),
//! kept apart from the adapter's planner (`crate::openai::cache`):
//! - a request writes cache entries at breakpoints: in `implicit` mode (the default) one
//!   implicit breakpoint at the end of the newest eligible input (a user, system or
//!   developer message, or a tool output) and the latest three explicit markers; in
//!   `explicit` mode the latest four explicit markers, and nothing without any;
//! - a request reads the longest written breakpoint prefix that is exactly a prefix of it
//!   (no rounding to 128-token steps, no fallback to a shorter unmarked prefix), among the
//!   latest [`REMEMBERED_BREAKPOINTS`] of its pool; a breakpoint below
//!   [`MIN_CACHED_TOKENS`] is neither written nor read;
//! - written tokens (from the read point to the furthest new breakpoint) are reported as
//!   `cache_write_tokens` and billed at [`WRITE_PRICE`]× the input price, reads at
//!   [`READ_PRICE`]×.
//!
//! Entries do not expire in the simulator (the TTL is 30 minutes and a test session is
//! shorter); `drop_cache` forgets them.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

/// The smallest breakpoint prefix, in tokens, that is written or read (1,024 visible
/// tokens on GPT-5.6 and later).
pub const MIN_CACHED_TOKENS: usize = 1024;

/// The most breakpoints one request writes.
pub const WRITES_PER_REQUEST: usize = 4;

/// How many of a pool's latest breakpoints a request is matched against.
pub const REMEMBERED_BREAKPOINTS: usize = 80;

/// The price of a written token, relative to an uncached input token (GPT-5.6+).
pub const WRITE_PRICE: f64 = 1.25;

/// The price of a cached input token, relative to an uncached one (GPT-5.x).
pub const READ_PRICE: f64 = 0.1;

/// Whether `model` caches at breakpoints: GPT-5.6 and later (`gpt-5.6`, `gpt-5.6-mini`,
/// `gpt-5.10`, `gpt-6…`).
///
/// ```
/// use halo_adapters::sim::breakpoints::breakpoint_model;
/// assert!(breakpoint_model("gpt-5.6") && breakpoint_model("gpt-5.6-mini") && breakpoint_model("gpt-6"));
/// assert!(!breakpoint_model("gpt-5.5") && !breakpoint_model("gpt-5-mini") && !breakpoint_model("gpt-4o"));
/// ```
pub fn breakpoint_model(model: &str) -> bool {
    let Some(version) = model.strip_prefix("gpt-") else {
        return false;
    };
    let version = version.split('-').next().unwrap_or_default();
    let mut parts = version.split('.');
    let major = parts.next().and_then(|m| m.parse::<u32>().ok());
    let minor = parts.next().map_or(Some(0), |m| m.parse::<u32>().ok());
    matches!((major, minor), (Some(major), Some(minor)) if (major, minor) >= (5, 6))
}

/// `prompt_cache_options.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Implicit,
    Explicit,
}

/// The request's cache mode.
///
/// # Errors
/// The API's message for a `prompt_cache_options` it refuses: an unknown mode or TTL, or
/// `prompt_cache_retention` set too ("setting both is rejected").
pub(crate) fn mode_of(body: &Value) -> Result<Mode, String> {
    let Some(options) = body.get("prompt_cache_options").filter(|o| !o.is_null()) else {
        return Ok(Mode::Implicit);
    };
    if body
        .get("prompt_cache_retention")
        .is_some_and(|r| !r.is_null())
    {
        return Err(
            "prompt_cache_options and prompt_cache_retention cannot be set together".into(),
        );
    }
    if let Some(ttl) = options.get("ttl").filter(|t| !t.is_null())
        && ttl.as_str() != Some("30m")
    {
        return Err(format!(
            "Invalid value for 'prompt_cache_options.ttl': {ttl}. Supported values are: '30m'."
        ));
    }
    match options.get("mode").and_then(Value::as_str) {
        None | Some("implicit") => Ok(Mode::Implicit),
        Some("explicit") => Ok(Mode::Explicit),
        Some(other) => Err(format!(
            "Invalid value for 'prompt_cache_options.mode': '{other}'. Supported values are: 'implicit' and 'explicit'."
        )),
    }
}

/// One pool's written breakpoints, newest last.
#[derive(Debug, Default)]
pub(crate) struct Breakpoints {
    written: VecDeque<Arc<[u32]>>,
}

impl Breakpoints {
    /// The longest written breakpoint prefix of `seq`, in tokens (0 when none).
    pub(crate) fn read(&self, seq: &[u32]) -> usize {
        self.written
            .iter()
            .filter(|w| w.len() <= seq.len() && seq.starts_with(w))
            .map(|w| w.len())
            .max()
            .unwrap_or(0)
    }

    /// Writes the request's breakpoints — `explicit` markers (token positions, in request
    /// order) and the `implicit` one — by the mode's rule, after a read of `read` tokens;
    /// returns the tokens written.
    pub(crate) fn write(
        &mut self,
        seq: &[u32],
        explicit: &[usize],
        implicit: Option<usize>,
        mode: Mode,
        read: usize,
    ) -> u64 {
        let explicit_writes = match mode {
            Mode::Implicit => WRITES_PER_REQUEST - 1,
            Mode::Explicit => WRITES_PER_REQUEST,
        };
        let mut positions: Vec<usize> = explicit
            .iter()
            .rev()
            .take(explicit_writes)
            .copied()
            .collect();
        if mode == Mode::Implicit {
            positions.extend(implicit);
        }
        let mut furthest_new = 0;
        for p in positions {
            if p < MIN_CACHED_TOKENS || p > seq.len() {
                continue;
            }
            let prefix = &seq[..p];
            if let Some(at) = self.written.iter().position(|w| **w == *prefix) {
                // Refreshed: moved to the newest end, not billed again.
                let entry = self.written.remove(at).unwrap_or_else(|| prefix.into());
                self.written.push_back(entry);
                continue;
            }
            furthest_new = furthest_new.max(p);
            self.written.push_back(prefix.into());
            while self.written.len() > REMEMBERED_BREAKPOINTS {
                self.written.pop_front();
            }
        }
        furthest_new.saturating_sub(read) as u64
    }
}

/// The input cost of a request in uncached-token units: uncached tokens at 1, cached at
/// [`READ_PRICE`], written at [`WRITE_PRICE`].
pub fn input_cost(input: u64, cached: u64, written: u64) -> f64 {
    let uncached = input.saturating_sub(cached).saturating_sub(written);
    uncached as f64 + cached as f64 * READ_PRICE + written as f64 * WRITE_PRICE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_the_longest_written_breakpoint_exactly() {
        let seq: Vec<u32> = (0..3000).collect();
        let mut cache = Breakpoints::default();
        assert_eq!(cache.read(&seq), 0);
        // First request: the prefix marker at 1,200 and the implicit one at 2,000.
        let written = cache.write(&seq[..2000], &[1200], Some(2000), Mode::Implicit, 0);
        assert_eq!(written, 2000);
        // The next one extends it: it reads the implicit breakpoint, writes its own end.
        assert_eq!(cache.read(&seq), 2000);
        assert_eq!(
            cache.write(&seq, &[1200], Some(3000), Mode::Implicit, 2000),
            1000
        );
        // A request that diverges at 1,500 reads only the prefix marker, not 1,499 tokens.
        let mut other = seq[..1500].to_vec();
        other.push(99_999);
        assert_eq!(cache.read(&other), 1200);
        // Explicit mode without markers writes nothing; below the minimum nothing counts.
        let mut fresh = Breakpoints::default();
        assert_eq!(fresh.write(&seq, &[], Some(3000), Mode::Explicit, 0), 0);
        assert_eq!(fresh.write(&seq, &[500], None, Mode::Explicit, 0), 0);
        assert_eq!(fresh.read(&seq), 0);
        assert!((input_cost(1000, 600, 200) - (200.0 + 60.0 + 250.0)).abs() < 1e-9);
    }
}
