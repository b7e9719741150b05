//! The predicted-miss ledger: for every model call, how many input tokens the agent expects
//! the provider to read from its prompt cache, next to what the provider reported.
//!
//! The agent knows which part of a request is byte-identical to the previous request: the
//! stable prefix when its fingerprint did not change, then the leading history messages
//! that are unchanged (the log is append-only, so that is normally all of them). Every
//! byte of that shared part was sent before, so a provider with a warm prompt cache reads
//! it from the cache. The ledger turns the shared bytes into tokens with the previous
//! call's own tokens-per-byte figure and judges each call ([`CacheVerdict`]):
//!
//! - the first call of an agent is [`Cold`](CacheVerdict::Cold);
//! - a call after a prefix change is the one [`ExpectedMiss`](CacheVerdict::ExpectedMiss);
//! - a call whose reported cache read is below half the expectation (and the shortfall is
//!   at least [`BUST_MIN_TOKENS`]) is a [`Bust`](CacheVerdict::Bust), with its likely cause;
//! - otherwise a [`Hit`](CacheVerdict::Hit), or [`Unreported`](CacheVerdict::Unreported)
//!   when the provider gave no cache figures.
//!
//! Providers cache in steps (OpenAI: from 1,024 tokens in 128-token increments; Anthropic:
//! at `cache_control` breakpoints; Gemini: the cached-content object plus implicit caching),
//! so a healthy call reads somewhat less than the expectation; the half-and-1,024-token
//! margin keeps those from being reported as busts.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::time::{Duration, Instant};

use crate::message::Message;
use crate::model::Usage;
use crate::prefix::{Fingerprint, StablePrefix};

/// The smallest shortfall, in tokens, reported as a cache bust (OpenAI's minimum cacheable
/// prompt, and the granularity scale of the other providers).
pub const BUST_MIN_TOKENS: u64 = 1024;

/// How many [`CacheCheck`]s the ledger keeps (the oldest are dropped first).
pub const LEDGER_CAPACITY: usize = 1024;

/// A pause between two calls after which an expired cache entry is the likely cause of a
/// bust: 300 s, the default lifetime after last use on OpenAI, DeepSeek and Anthropic (whose
/// 1-hour breakpoints, like Gemini's `cachedContents` TTL, last longer).
pub const LIKELY_EXPIRY: Duration = Duration::from_secs(300);

/// The ledger's judgement of one model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheVerdict {
    /// The agent's first call: nothing was sent before.
    Cold,
    /// The stable prefix changed since the previous call: the one expected miss.
    ExpectedMiss,
    /// The provider read at least half of what was expected, or the shortfall is under
    /// [`BUST_MIN_TOKENS`] (too small to judge: providers cache in steps).
    Hit,
    /// The provider read far less than the request shares with the previous one.
    Bust {
        /// The likely cause, for people reading logs.
        cause: String,
    },
    /// The provider reported no cache figures (or no input tokens on the previous call).
    Unreported,
}

/// One model call in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheCheck {
    /// The agent's call number, from 1, over its lifetime.
    pub call: u64,
    /// The prefix fingerprint the call was made with.
    pub prefix_fingerprint: Fingerprint,
    /// Whether the fingerprint differs from the previous call's.
    pub prefix_changed: bool,
    /// History messages of the request.
    pub history_messages: usize,
    /// Leading history messages byte-identical to the previous request's.
    pub reused_history_messages: usize,
    /// Input tokens expected to be read from the cache (`None` when the previous call
    /// reported no input tokens to scale by).
    pub expected_cached_tokens: Option<u64>,
    /// `cache_read_tokens` the provider reported.
    pub observed_cached_tokens: Option<u64>,
    /// Input tokens of the call, as reported.
    pub input_tokens: Option<u64>,
    /// The judgement.
    pub verdict: CacheVerdict,
}

impl CacheCheck {
    /// Whether this call is a cache bust.
    pub fn is_bust(&self) -> bool {
        matches!(self.verdict, CacheVerdict::Bust { .. })
    }
}

/// What the ledger knows of a request before it is sent.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    fingerprint: Fingerprint,
    prefix_bytes: u64,
    history: Vec<(u64, u64)>,
}

#[derive(Debug, Clone)]
struct Previous {
    planned: Planned,
    input_tokens: Option<u64>,
    at: Instant,
}

/// Expected against observed prompt-cache reads, call by call (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct CacheLedger {
    checks: VecDeque<CacheCheck>,
    previous: Option<Previous>,
    calls: u64,
}

impl CacheLedger {
    /// The recorded calls, oldest first (at most [`LEDGER_CAPACITY`]).
    pub fn checks(&self) -> impl ExactSizeIterator<Item = &CacheCheck> + '_ {
        self.checks.iter()
    }

    /// The most recent call's check.
    pub fn last(&self) -> Option<&CacheCheck> {
        self.checks.back()
    }

    /// Calls judged a bust among the recorded ones.
    pub fn busts(&self) -> usize {
        self.checks.iter().filter(|c| c.is_bust()).count()
    }

    /// Calls judged an expected miss (a prefix change) among the recorded ones.
    pub fn expected_misses(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.verdict == CacheVerdict::ExpectedMiss)
            .count()
    }

    /// Measures a request about to be sent.
    pub(crate) fn plan(prefix: &StablePrefix, history: &[Message]) -> Planned {
        Planned {
            fingerprint: prefix.fingerprint(),
            prefix_bytes: prefix.canonical_bytes().len() as u64,
            history: history.iter().map(message_digest).collect(),
        }
    }

    /// Records a call made with `planned` that reported `usage`, and judges it.
    pub(crate) fn record(&mut self, planned: Planned, usage: &Usage) -> CacheCheck {
        self.calls += 1;
        let now = Instant::now();
        let history_messages = planned.history.len();
        let mut check = CacheCheck {
            call: self.calls,
            prefix_fingerprint: planned.fingerprint,
            prefix_changed: false,
            history_messages,
            reused_history_messages: 0,
            expected_cached_tokens: Some(0),
            observed_cached_tokens: usage.cache_read_tokens,
            input_tokens: usage.input_tokens,
            verdict: CacheVerdict::Cold,
        };
        if let Some(prev) = &self.previous {
            check.prefix_changed = prev.planned.fingerprint != planned.fingerprint;
            check.reused_history_messages = prev
                .planned
                .history
                .iter()
                .zip(&planned.history)
                .take_while(|(a, b)| a == b)
                .count();
            if check.prefix_changed {
                check.verdict = CacheVerdict::ExpectedMiss;
            } else {
                let shared_bytes = planned.prefix_bytes
                    + planned.history[..check.reused_history_messages]
                        .iter()
                        .map(|(_, bytes)| bytes)
                        .sum::<u64>();
                let prev_bytes = prev.planned.prefix_bytes
                    + prev.planned.history.iter().map(|(_, b)| b).sum::<u64>();
                check.expected_cached_tokens = prev.input_tokens.map(|tokens| {
                    // Tokens per byte of the previous request, applied to the shared bytes.
                    (u128::from(tokens) * u128::from(shared_bytes) / u128::from(prev_bytes.max(1)))
                        as u64
                });
                check.verdict = match (check.expected_cached_tokens, usage.cache_read_tokens) {
                    (Some(expected), Some(observed)) => {
                        if observed < expected / 2 && expected - observed >= BUST_MIN_TOKENS {
                            CacheVerdict::Bust {
                                cause: bust_cause(now.duration_since(prev.at), expected, observed),
                            }
                        } else {
                            CacheVerdict::Hit
                        }
                    }
                    _ => CacheVerdict::Unreported,
                };
            }
        }
        self.previous = Some(Previous {
            planned,
            input_tokens: usage.input_tokens,
            at: now,
        });
        if self.checks.len() == LEDGER_CAPACITY {
            self.checks.pop_front();
        }
        self.checks.push_back(check.clone());
        check
    }
}

fn bust_cause(gap: Duration, expected: u64, observed: u64) -> String {
    if gap >= LIKELY_EXPIRY {
        format!(
            "the provider read {observed} of about {expected} cacheable tokens; the previous call was {} s ago, longer than the default cache lifetime of most providers (5 minutes after last use; Anthropic's 1-hour breakpoints and Gemini's cachedContents TTL last longer), so the entry has likely expired",
            gap.as_secs()
        )
    } else {
        format!(
            "the provider read {observed} of about {expected} cacheable tokens although the request repeats the previous one; the cache entry was likely evicted, or the request reached another cache server (on OpenAI, a session id sent as prompt_cache_key keeps a session's requests on one)"
        )
    }
}

/// A hash and the canonical JSON length, in bytes, of one history message.
fn message_digest(message: &Message) -> (u64, u64) {
    // Serializing a message cannot fail (no maps with non-string keys); an empty rendering
    // only makes the estimate smaller.
    let bytes = serde_json::to_vec(message).unwrap_or_default();
    let mut hasher = DefaultHasher::new();
    bytes.hash(&mut hasher);
    (hasher.finish(), bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, read: Option<u64>) -> Usage {
        Usage {
            input_tokens: Some(input),
            cache_read_tokens: read,
            ..Usage::default()
        }
    }

    #[test]
    fn verdicts_follow_the_shared_prefix() {
        let mut prefix = StablePrefix::new("x".repeat(8000));
        let mut history = vec![Message::user("hello")];
        let mut ledger = CacheLedger::default();

        let first = ledger.record(CacheLedger::plan(&prefix, &history), &usage(2000, Some(0)));
        assert_eq!(first.verdict, CacheVerdict::Cold);

        history.push(Message::user("more"));
        let hit = ledger.record(
            CacheLedger::plan(&prefix, &history),
            &usage(2010, Some(1920)),
        );
        assert_eq!(hit.verdict, CacheVerdict::Hit);
        assert_eq!(hit.reused_history_messages, 1);
        let expected = hit.expected_cached_tokens.unwrap();
        assert!((1990..=2000).contains(&expected), "{expected}");

        history.push(Message::user("again"));
        let bust = ledger.record(CacheLedger::plan(&prefix, &history), &usage(2020, Some(0)));
        assert!(bust.is_bust(), "{bust:?}");

        prefix.set_system("changed");
        let miss = ledger.record(CacheLedger::plan(&prefix, &history), &usage(30, Some(0)));
        assert_eq!(miss.verdict, CacheVerdict::ExpectedMiss);
        assert!(miss.prefix_changed);

        let unreported = ledger.record(CacheLedger::plan(&prefix, &history), &usage(30, None));
        assert_eq!(unreported.verdict, CacheVerdict::Unreported);
        assert_eq!((ledger.busts(), ledger.expected_misses()), (1, 1));
        assert_eq!(ledger.checks().len(), 5);
    }

    #[test]
    fn small_shortfalls_are_not_busts() {
        // 900 tokens shared, nothing read: below BUST_MIN_TOKENS (OpenAI caches nothing
        // under 1,024 tokens).
        let prefix = StablePrefix::new("x".repeat(3600));
        let history = vec![Message::user("a")];
        let mut ledger = CacheLedger::default();
        ledger.record(CacheLedger::plan(&prefix, &history), &usage(900, Some(0)));
        let second = ledger.record(CacheLedger::plan(&prefix, &history), &usage(900, Some(0)));
        assert_eq!(second.verdict, CacheVerdict::Hit);
    }
}
