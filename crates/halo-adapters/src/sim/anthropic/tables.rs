//! The simulator's own reading of Anthropic's prompt-caching documentation
//! (<https://platform.claude.com/docs/en/build-with-claude/prompt-caching>), kept apart
//! from the adapter's (`crate::anthropic::cache`): a table copied from the adapter would
//! agree with it when both are wrong, and a test could not tell.

use std::time::Duration;

// The simulator's own reading of Anthropic's documentation, kept apart from the adapter's
// (`crate::anthropic::cache`): a table copied from the adapter would agree with it when
// both are wrong, and a test could not tell.

/// How many content blocks before a breakpoint Anthropic searches for an earlier cache
/// entry ("the system checks for cache hits at … up to 20 blocks before it",
/// <https://platform.claude.com/docs/en/build-with-claude/prompt-caching>).
pub const LOOKBACK_BLOCKS: usize = 20;

/// The most `cache_control` markers one request may carry (same page: "up to 4 cache
/// breakpoints"; more is HTTP 400).
pub const MAX_BREAKPOINTS: usize = 4;

/// The minimum cacheable prompt length the simulator applies when the model's id matches
/// none of [`MIN_CACHEABLE_TOKENS`]'s prefixes.
pub const DEFAULT_MIN_CACHEABLE_TOKENS: u64 = 1024;

/// Minimum cacheable prompt length in tokens by model id prefix (the longest matching
/// prefix wins), from the prompt-caching page's table: as quoted in
/// `anthropics/anthropic-sdk-python#1194` (early 2026) for the 3.x and 4.x models, and the
/// late-2026 page for Opus 4.7, Opus 4.8, Sonnet 5 and the 5-family. A breakpoint whose
/// prefix is shorter is ignored, without an error.
pub const MIN_CACHEABLE_TOKENS: &[(&str, u64)] = &[
    ("claude-opus-5", 512),
    ("claude-fable-5", 512),
    ("claude-mythos-5", 512),
    ("claude-sonnet-5", 1024),
    ("claude-opus-4-8", 1024),
    ("claude-opus-4-7", 2048),
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 1024),
    ("claude-sonnet-4-5", 1024),
    ("claude-opus-4-1", 1024),
    ("claude-opus-4", 1024),
    ("claude-sonnet-4", 1024),
    ("claude-3-7-sonnet", 1024),
    ("claude-3-5-sonnet", 1024),
    ("claude-3-opus", 1024),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
];

/// The simulator's minimum cacheable length for `model` ([`MIN_CACHEABLE_TOKENS`], a
/// gateway's `vendor/` prefix dropped), else [`DEFAULT_MIN_CACHEABLE_TOKENS`].
pub fn min_cacheable_tokens(model: &str) -> u64 {
    let id = model.trim().rsplit('/').next().unwrap_or_default();
    MIN_CACHEABLE_TOKENS
        .iter()
        .filter(|(prefix, _)| id.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map_or(DEFAULT_MIN_CACHEABLE_TOKENS, |(_, n)| *n)
}

/// A breakpoint's cache lifetime as the simulator reads it from `cache_control.ttl`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SimTtl {
    /// `"5m"`, the default: five minutes, refreshed on every hit.
    #[default]
    FiveMinutes,
    /// `"1h"`: one hour.
    OneHour,
}

impl SimTtl {
    /// The lifetime.
    pub fn duration(self) -> Duration {
        match self {
            SimTtl::FiveMinutes => Duration::from_secs(5 * 60),
            SimTtl::OneHour => Duration::from_secs(60 * 60),
        }
    }
}
