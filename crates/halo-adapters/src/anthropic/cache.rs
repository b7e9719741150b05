//! Where Anthropic's `cache_control` breakpoints go: the cache modes, the per-model minimum
//! cacheable lengths, and [`plan_breakpoints`], a pure function from a request's block
//! layout to at most four breakpoints.
//!
//! Source: <https://platform.claude.com/docs/en/build-with-claude/prompt-caching>. What the
//! planner relies on:
//! - A request is cached as one sequence of blocks in the order **tools → system →
//!   messages**. A breakpoint (`cache_control` on a block) makes the prefix up to and
//!   including that block a cache entry; a later request reads the longest entry its own
//!   blocks start with.
//! - At most [`MAX_BREAKPOINTS`] (4) breakpoints per request.
//! - From each breakpoint the API looks for an existing entry at the block boundaries up to
//!   about [`LOOKBACK_BLOCKS`] (20) blocks back, and no further.
//! - A prefix shorter than the model's minimum cacheable length ([`min_cacheable_tokens`])
//!   is neither written nor read; no error is raised.
//! - Where TTLs are mixed, `1h` breakpoints must come before `5m` ones.
//!
//! The plan, for [`CacheMode::Breakpoints`]:
//! 1. **The prefix breakpoint** on the last block of the stable prefix: the last few-shot
//!    block if there are few-shot turns, else the last system block, else the last tool.
//!    The prefix's entry is shared by every request of every session with the same prefix.
//! 2. **The moving breakpoint** on the last block of the newest message, so each request
//!    writes the whole conversation so far and the next one reads it.
//! 3. **The lookback breakpoint**, only when needed: an agent request ends with a user
//!    message (the user's turn, or tool results), and the next request appends an assistant
//!    turn and one more user message. So the previous request's moving breakpoint sat on the
//!    last block of the user message before the newest assistant turn (a *turn end*). When
//!    that block is more than [`LOOKBACK_BLOCKS`] blocks behind the newest block (one
//!    assistant turn with ten parallel tool calls is 21 blocks), the moving breakpoint's
//!    lookback cannot reach it, so a breakpoint goes exactly there and reads it. Placing one
//!    when the turn end is within reach would add nothing.
//!
//! Every breakpoint whose prefix is estimated below the minimum is left out. The estimate
//! is [`estimate_tokens`]: serialized bytes / 4, which is cheap and close for English text
//! and JSON; near the threshold it can be off either way, which costs at most one wasted
//! or one missing breakpoint for that request.

/// The most `cache_control` breakpoints one request may carry.
pub const MAX_BREAKPOINTS: usize = 4;

/// How many blocks before a breakpoint the API searches for an existing cache entry.
pub const LOOKBACK_BLOCKS: usize = 20;

/// The minimum cacheable length, in tokens, for model ids not in [`MIN_CACHEABLE_TOKENS`].
pub const DEFAULT_MIN_CACHEABLE_TOKENS: u64 = 1024;

/// Minimum cacheable prompt length in tokens, by model id prefix (the longest matching
/// prefix wins; see [`min_cacheable_tokens`]).
///
/// Sources, as of late 2026 (these change with every model generation; override with
/// [`AnthropicBuilder::min_cacheable_tokens`](super::AnthropicBuilder::min_cacheable_tokens)):
/// Anthropic's prompt-caching page as quoted in `anthropics/anthropic-sdk-python#1194`
/// (early 2026) for the 3.x and 4.x models, and a late-2026 summary of the same page for
/// Opus 4.7, Opus 4.8, Sonnet 5 and the 5-family
/// (<https://platform.claude.com/docs/en/build-with-claude/prompt-caching>). Where sources
/// disagree (Sonnet 4.6 is reported caching only from 2048 in practice; Bedrock lists Opus
/// 4.7 at 4096) the lower figure is used: a breakpoint below the real minimum costs nothing,
/// while a missing one loses the cache.
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

/// The minimum cacheable prompt length of `model` in tokens: the entry of
/// [`MIN_CACHEABLE_TOKENS`] with the longest prefix of the id (so
/// `claude-opus-4-5-20251101` is 4096 and `claude-opus-4-20250514` is 1024), else
/// [`DEFAULT_MIN_CACHEABLE_TOKENS`].
///
/// ```
/// use halo_adapters::anthropic::min_cacheable_tokens;
///
/// assert_eq!(min_cacheable_tokens("claude-sonnet-4-5-20250929"), 1024);
/// assert_eq!(min_cacheable_tokens("claude-haiku-4-5"), 4096);
/// assert_eq!(min_cacheable_tokens("claude-3-5-haiku-latest"), 2048);
/// assert_eq!(min_cacheable_tokens("some-gateway-alias"), 1024);
/// ```
pub fn min_cacheable_tokens(model: &str) -> u64 {
    let model = model.trim();
    // Gateways often prefix the vendor (`anthropic/claude-…`).
    let id = model.rsplit('/').next().unwrap_or(model);
    MIN_CACHEABLE_TOKENS
        .iter()
        .filter(|(prefix, _)| id.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map_or(DEFAULT_MIN_CACHEABLE_TOKENS, |(_, n)| *n)
}

/// The lifetime of a cache entry, refreshed at no cost on every hit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CacheTtl {
    /// Five minutes (`"5m"`, the API default). Writes cost 1.25× the input price.
    #[default]
    FiveMinutes,
    /// One hour (`"1h"`). Writes cost 2× the input price; worth it when a session idles
    /// for more than five minutes between calls (a human in the loop).
    OneHour,
}

impl CacheTtl {
    /// The wire value: `5m` or `1h`.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheTtl::FiveMinutes => "5m",
            CacheTtl::OneHour => "1h",
        }
    }

    /// The duration.
    pub fn duration(self) -> std::time::Duration {
        match self {
            CacheTtl::FiveMinutes => std::time::Duration::from_secs(5 * 60),
            CacheTtl::OneHour => std::time::Duration::from_secs(60 * 60),
        }
    }
}

/// How the adapter asks Anthropic to cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheMode {
    /// Explicit `cache_control` breakpoints placed by [`plan_breakpoints`]: the end of the
    /// stable prefix with `prefix_ttl`, the newest message (and, when the lookback needs it,
    /// the previous request's end) with `history_ttl`. A `1h` history TTL after a `5m`
    /// prefix TTL is lowered to `5m`, since `1h` breakpoints must come first.
    Breakpoints {
        /// TTL of the prefix breakpoint.
        prefix_ttl: CacheTtl,
        /// TTL of the breakpoints in the history.
        history_ttl: CacheTtl,
    },
    /// Automatic caching: one top-level `"cache_control": {"type": "ephemeral"}` on the
    /// request; the API puts the breakpoint on the last cacheable block itself and moves it
    /// forward as the conversation grows (GA 2026-02-19). No block carries a marker. There
    /// is no separate prefix entry, so a new session with the same prefix reads only what
    /// the lookback of that one breakpoint reaches.
    Automatic {
        /// TTL of the automatic breakpoint.
        ttl: CacheTtl,
    },
    /// No cache markers at all (nothing is cached).
    Off,
}

impl Default for CacheMode {
    /// Breakpoints, five minutes everywhere (the API's default TTL).
    fn default() -> Self {
        CacheMode::Breakpoints {
            prefix_ttl: CacheTtl::FiveMinutes,
            history_ttl: CacheTtl::FiveMinutes,
        }
    }
}

/// The rules [`plan_breakpoints`] follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakpointPolicy {
    /// TTL of the prefix breakpoint.
    pub prefix_ttl: CacheTtl,
    /// TTL of the history breakpoints.
    pub history_ttl: CacheTtl,
    /// The model's minimum cacheable length, in tokens: no breakpoint goes on a shorter
    /// prefix.
    pub min_tokens: u64,
    /// The most breakpoints to place ([`MAX_BREAKPOINTS`]).
    pub max_breakpoints: usize,
    /// How far back, in blocks, the API looks from a breakpoint ([`LOOKBACK_BLOCKS`]).
    pub lookback_blocks: usize,
}

impl BreakpointPolicy {
    /// The API's limits with these TTLs and this minimum length.
    pub fn new(prefix_ttl: CacheTtl, history_ttl: CacheTtl, min_tokens: u64) -> Self {
        BreakpointPolicy {
            prefix_ttl,
            history_ttl,
            min_tokens,
            max_breakpoints: MAX_BREAKPOINTS,
            lookback_blocks: LOOKBACK_BLOCKS,
        }
    }
}

/// A request as the planner sees it: its blocks in cache order (tools, then system blocks,
/// then every message's content blocks), numbered from 0.
#[derive(Debug, Clone, Copy)]
pub struct BlockLayout<'a> {
    /// Estimated tokens of each block.
    pub tokens: &'a [u64],
    /// The last block of the stable prefix (tools, system, few-shot turns), if it has any.
    pub prefix_end: Option<usize>,
    /// The last block of each user message, ascending: where earlier requests of the same
    /// conversation ended.
    pub turn_ends: &'a [usize],
}

/// One planned breakpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Breakpoint {
    /// The block it goes on (an index into [`BlockLayout::tokens`]).
    pub block: usize,
    /// Its TTL.
    pub ttl: CacheTtl,
}

/// The estimated token count of `bytes` bytes of request JSON: bytes / 4, rounded up.
pub fn estimate_tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// Plans the breakpoints of one request (see the [module docs](self) for the rules):
/// ascending by block, at most `policy.max_breakpoints`, none on a prefix estimated below
/// `policy.min_tokens`, TTLs never rising from one breakpoint to the next.
///
/// ```
/// use halo_adapters::anthropic::{BlockLayout, Breakpoint, BreakpointPolicy, CacheTtl, plan_breakpoints};
///
/// // 2 tools, 1 system block (prefix ends at block 2), then user, assistant, user.
/// let tokens = [300, 300, 900, 40, 60, 50];
/// let layout = BlockLayout { tokens: &tokens, prefix_end: Some(2), turn_ends: &[3, 5] };
/// let policy = BreakpointPolicy::new(CacheTtl::OneHour, CacheTtl::FiveMinutes, 1024);
/// assert_eq!(
///     plan_breakpoints(&layout, &policy),
///     [
///         Breakpoint { block: 2, ttl: CacheTtl::OneHour },
///         Breakpoint { block: 5, ttl: CacheTtl::FiveMinutes },
///     ]
/// );
/// ```
pub fn plan_breakpoints(layout: &BlockLayout<'_>, policy: &BreakpointPolicy) -> Vec<Breakpoint> {
    let tokens = layout.tokens;
    if tokens.is_empty() || policy.max_breakpoints == 0 {
        return Vec::new();
    }
    let mut cumulative = Vec::with_capacity(tokens.len());
    let mut sum = 0u64;
    for t in tokens {
        sum = sum.saturating_add(*t);
        cumulative.push(sum);
    }
    let cacheable = |block: usize| cumulative[block] >= policy.min_tokens;
    let last = tokens.len() - 1;

    // In priority order: the moving breakpoint, the prefix, the lookback one.
    let mut chosen: Vec<Breakpoint> = Vec::new();
    let prefix = layout
        .prefix_end
        .filter(|&p| p <= last && cacheable(p))
        .map(|block| Breakpoint {
            block,
            ttl: policy.prefix_ttl,
        });
    let has_history = layout.prefix_end.is_none_or(|p| last > p);
    if has_history && cacheable(last) {
        chosen.push(Breakpoint {
            block: last,
            ttl: policy.history_ttl,
        });
    }
    chosen.extend(prefix);
    if has_history && cacheable(last) {
        // The previous request's end: the last turn end before the newest block, after
        // the prefix breakpoint.
        let floor = prefix.map(|b| b.block);
        let previous_end = layout
            .turn_ends
            .iter()
            .rev()
            .copied()
            .find(|&e| e < last && floor.is_none_or(|f| e > f));
        if let Some(end) = previous_end
            && last - end > policy.lookback_blocks
            && cacheable(end)
        {
            chosen.push(Breakpoint {
                block: end,
                ttl: policy.history_ttl,
            });
        }
    }
    chosen.truncate(policy.max_breakpoints);
    chosen.sort_by_key(|b| b.block);
    chosen.dedup_by_key(|b| b.block);

    // `1h` entries must come before `5m` ones: once a 5-minute breakpoint is placed, the
    // later ones are 5 minutes too.
    let mut ceiling = CacheTtl::OneHour;
    for b in &mut chosen {
        b.ttl = b.ttl.min(ceiling);
        ceiling = b.ttl;
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: CacheTtl = CacheTtl::OneHour;
    const M: CacheTtl = CacheTtl::FiveMinutes;

    fn bp(block: usize, ttl: CacheTtl) -> Breakpoint {
        Breakpoint { block, ttl }
    }

    fn plan(tokens: &[u64], prefix_end: Option<usize>, turn_ends: &[usize]) -> Vec<Breakpoint> {
        let layout = BlockLayout {
            tokens,
            prefix_end,
            turn_ends,
        };
        plan_breakpoints(&layout, &BreakpointPolicy::new(H, M, 1024))
    }

    #[test]
    fn prefix_and_moving_breakpoint() {
        // tools 0-1, system 2, few-shot 3-4 (prefix ends at 4), then user 5.
        let tokens = [400, 400, 400, 10, 10, 20];
        assert_eq!(
            plan(&tokens, Some(4), &[3, 5]),
            [bp(4, H), bp(5, M)],
            "few-shots end the prefix"
        );
        // No history: the prefix breakpoint alone.
        assert_eq!(plan(&tokens[..5], Some(4), &[3]), [bp(4, H)]);
        // No prefix at all: only the newest message.
        let tokens = [2000, 10, 10];
        assert_eq!(plan(&tokens, None, &[0, 2]), [bp(2, M)]);
    }

    #[test]
    fn short_prefix_gets_no_breakpoint_but_the_history_may() {
        // The prefix is 600 tokens (< 1024); the whole request is 1100.
        let tokens = [300, 300, 250, 250];
        assert_eq!(plan(&tokens, Some(1), &[2, 3]), [bp(3, M)]);
        // Everything below the minimum: nothing at all.
        assert_eq!(plan(&[100, 100, 100], Some(1), &[2]), []);
    }

    #[test]
    fn one_hour_never_follows_five_minutes() {
        let tokens = [2000, 10, 10, 10];
        let layout = BlockLayout {
            tokens: &tokens,
            prefix_end: Some(0),
            turn_ends: &[1, 3],
        };
        // Prefix 5m, history 1h: the history is lowered to 5m.
        let policy = BreakpointPolicy::new(M, H, 1024);
        assert_eq!(plan_breakpoints(&layout, &policy), [bp(0, M), bp(3, M)]);
        let policy = BreakpointPolicy::new(H, H, 1024);
        assert_eq!(plan_breakpoints(&layout, &policy), [bp(0, H), bp(3, H)]);
    }

    #[test]
    fn previous_end_beyond_the_lookback_gets_its_own_breakpoint() {
        // prefix 0; user 1; assistant with 12 tool calls 2-13; user with 12 results 14-25.
        let mut tokens = vec![2000];
        tokens.extend([10; 25]);
        // The previous request ended at block 1: 24 blocks behind the newest block 25.
        assert_eq!(
            plan(&tokens, Some(0), &[1, 25]),
            [bp(0, H), bp(1, M), bp(25, M)]
        );
        // One call fewer: the previous end is 22 blocks back, still out of reach.
        assert_eq!(
            plan(&tokens[..24], Some(0), &[1, 23]),
            [bp(0, H), bp(1, M), bp(23, M)]
        );
        // Within 20 blocks the moving breakpoint's lookback finds it: no extra breakpoint.
        assert_eq!(
            plan(&tokens[..22], Some(0), &[1, 21]),
            [bp(0, H), bp(21, M)]
        );
        // The turn end must lie after the prefix breakpoint to be the previous request's.
        assert_eq!(plan(&tokens, Some(0), &[0, 25]), [bp(0, H), bp(25, M)]);
    }

    #[test]
    fn max_breakpoints_keeps_the_moving_one_first() {
        let mut tokens = vec![2000];
        tokens.extend([10; 25]);
        let layout = BlockLayout {
            tokens: &tokens,
            prefix_end: Some(0),
            turn_ends: &[1, 25],
        };
        let mut policy = BreakpointPolicy::new(M, M, 1024);
        policy.max_breakpoints = 1;
        assert_eq!(plan_breakpoints(&layout, &policy), [bp(25, M)]);
        policy.max_breakpoints = 2;
        assert_eq!(plan_breakpoints(&layout, &policy), [bp(0, M), bp(25, M)]);
        policy.max_breakpoints = 0;
        assert_eq!(plan_breakpoints(&layout, &policy), []);
        assert_eq!(plan(&[], None, &[]), []);
    }

    #[test]
    fn min_cacheable_tokens_takes_the_longest_prefix() {
        assert_eq!(min_cacheable_tokens("claude-opus-4-5-20251101"), 4096);
        assert_eq!(min_cacheable_tokens("claude-opus-4-1-20250805"), 1024);
        assert_eq!(min_cacheable_tokens("claude-opus-4-20250514"), 1024);
        assert_eq!(min_cacheable_tokens("claude-opus-4-7"), 2048);
        assert_eq!(min_cacheable_tokens("claude-3-haiku-20240307"), 2048);
        assert_eq!(min_cacheable_tokens("anthropic/claude-opus-5"), 512);
        assert_eq!(min_cacheable_tokens(""), DEFAULT_MIN_CACHEABLE_TOKENS);
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(9), 3);
    }
}
