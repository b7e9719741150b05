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
//! - a call after a prefix change is the one [`ExpectedMiss`](CacheVerdict::ExpectedMiss),
//!   and so is a call answered by another provider than the previous one (a fallback:
//!   [`ModelResponse::provider`](crate::ModelResponse::provider)), whose cache is cold;
//! - a call whose reported cache read is below half the expectation (and the shortfall is
//!   at least [`BUST_MIN_TOKENS`]) is a [`Bust`](CacheVerdict::Bust), with its likely cause;
//! - otherwise a [`Hit`](CacheVerdict::Hit), or [`Unreported`](CacheVerdict::Unreported)
//!   when the provider gave no cache figures.
//!
//! The ledger's per-call work is incremental: it keeps a digest of every history message of
//! the last call and, while the log only grew since (same [`LogKey`]), digests only the new
//! messages; a log that was edited is compared message by message once. It holds no clock:
//! the driver passes the time of each call in milliseconds since the Unix epoch, so the
//! ledger serializes with serde and continues in another process.
//!
//! Providers cache in steps (OpenAI: from 1,024 tokens in 128-token increments; Anthropic:
//! at `cache_control` breakpoints; Gemini: the cached-content object plus implicit caching),
//! so a healthy call reads somewhat less than the expectation; the half-and-1,024-token
//! margin keeps those from being reported as busts.

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::message::Message;
use crate::model::Usage;
use crate::prefix::{Fingerprint, StablePrefix};

mod digest;
use digest::{Digest, message_digest};

/// The smallest shortfall, in tokens, reported as a cache bust (OpenAI's minimum cacheable
/// prompt, and the granularity scale of the other providers).
pub const BUST_MIN_TOKENS: u64 = 1024;

/// How many [`CacheCheck`]s the ledger keeps (the oldest are dropped first).
pub const LEDGER_CAPACITY: usize = 1024;

/// A pause between two calls after which an expired cache entry is the likely cause of a
/// bust: 300 s, the default lifetime after last use on OpenAI, DeepSeek and Anthropic (whose
/// 1-hour breakpoints, like Gemini's `cachedContents` TTL, last longer).
pub const LIKELY_EXPIRY: Duration = Duration::from_secs(300);

/// Where a history came from: a [`MessageLog`](crate::MessageLog)'s generation and eviction
/// count. While the generation stays the same, the log only grew at the end and lost
/// messages at the front, so earlier digests stay valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogKey {
    /// [`MessageLog::generation`](crate::MessageLog::generation).
    pub generation: u64,
    /// [`MessageLog::evicted`](crate::MessageLog::evicted).
    pub evicted: u64,
}

impl LogKey {
    /// The key of `log` as it stands.
    pub fn of(log: &crate::MessageLog) -> Self {
        LogKey {
            generation: log.generation(),
            evicted: log.evicted(),
        }
    }
}

/// The ledger's judgement of one model call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum CacheVerdict {
    /// The agent's first call: nothing was sent before.
    Cold,
    /// The stable prefix changed since the previous call, or a context strategy rewrote the
    /// history's head: the one expected miss.
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Whether the head of the history changed since the previous call (not every message
    /// of the previous request leads this one): a context strategy's rewrite, the log's
    /// ring buffer evicting, or an edit.
    #[serde(default)]
    pub history_rewritten: bool,
    /// Input tokens of the call, as reported.
    pub input_tokens: Option<u64>,
    /// The provider that answered, when the response named it
    /// ([`ModelResponse::provider`](crate::ModelResponse::provider): a fallback over several
    /// adapters does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Whether another provider answered than the previous call's (both named): the switch
    /// is an expected miss, the new provider's cache being cold.
    #[serde(default)]
    pub provider_changed: bool,
    /// The judgement.
    pub verdict: CacheVerdict,
}

impl CacheCheck {
    /// Whether this call is a cache bust.
    pub fn is_bust(&self) -> bool {
        matches!(self.verdict, CacheVerdict::Bust { .. })
    }
}

/// What the ledger knows of a request before it is sent ([`CacheLedger::plan`]); handed back
/// to [`CacheLedger::record`] with the response's usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planned {
    fingerprint: Fingerprint,
    prefix_bytes: u64,
    history_messages: usize,
    /// Leading history messages byte-identical to the last recorded call's.
    reused: usize,
    /// Bytes of the prefix and of those reused messages (when the fingerprint is unchanged).
    reused_history_bytes: u64,
    /// How the digests of the last recorded call become this request's.
    update: Update,
    key: Option<LogKey>,
    /// A context strategy rewrote the history since the last call, knowingly.
    #[serde(default)]
    rewrite_planned: bool,
}

impl Planned {
    /// The fingerprint of the prefix the request carries.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum Update {
    /// Drop this many digests at the front, append these.
    Grow {
        drop_front: usize,
        tail: Vec<Digest>,
    },
    /// Every digest anew (the log was edited, or the history did not come from a log).
    Replace(Vec<Digest>),
}

/// The history of the last recorded call, as digests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    key: Option<LogKey>,
    digests: VecDeque<Digest>,
    bytes: u64,
    /// How `digests` were hashed: [`DIGESTS`], or another number (0 when absent) for a
    /// ledger saved by a version that hashed differently (its lengths are the same).
    #[serde(default)]
    hashed: u8,
}

/// The way messages are hashed now (2: XXH3-64 chained over their values, keys chained in
/// by constants; 1 hashed the keys too); a ledger saved with another is not compared hash
/// by hash.
const DIGESTS: u8 = 2;

impl Default for Seen {
    fn default() -> Self {
        Seen {
            key: None,
            digests: VecDeque::new(),
            bytes: 0,
            hashed: DIGESTS,
        }
    }
}

/// The last recorded call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Previous {
    fingerprint: Fingerprint,
    prefix_bytes: u64,
    input_tokens: Option<u64>,
    /// When it was made, in milliseconds since the Unix epoch (from the driver's clock).
    at_ms: u64,
    /// The provider that answered it, when named.
    #[serde(default)]
    provider: Option<String>,
}

/// Expected against reported cache reads, call by call. See the [module docs](self).
///
/// Serializes with serde (its checks, the digests of the last call's history, the last
/// call's figures), so a saved run continues with its predictions intact.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheLedger {
    checks: VecDeque<CacheCheck>,
    seen: Seen,
    previous: Option<Previous>,
    calls: u64,
}

impl CacheLedger {
    /// The checks recorded, oldest first (at most [`LEDGER_CAPACITY`]).
    pub fn checks(&self) -> impl ExactSizeIterator<Item = &CacheCheck> + '_ {
        self.checks.iter()
    }

    /// The newest check.
    pub fn last(&self) -> Option<&CacheCheck> {
        self.checks.back()
    }

    /// The prefix fingerprint of the last recorded call (or the one a restored session was
    /// seeded with): the one place the engine learns whether the prefix changed.
    pub fn previous_fingerprint(&self) -> Option<Fingerprint> {
        self.previous.as_ref().map(|p| p.fingerprint)
    }

    /// How many kept checks are busts.
    pub fn busts(&self) -> usize {
        self.checks.iter().filter(|c| c.is_bust()).count()
    }

    /// How many kept checks are expected misses (prefix changes, and history rewrites a
    /// context strategy planned).
    pub fn expected_misses(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.verdict == CacheVerdict::ExpectedMiss)
            .count()
    }

    /// Plans the request of `prefix` and `history` against the last recorded call. `key`
    /// is the log the history was borrowed from as it stands ([`LogKey::of`]), or `None`
    /// for a history built some other way: with a key that only grew, only the new messages
    /// are digested. `rewrite_planned` says a context strategy rewrote the history since the
    /// last call, so a changed head is the one expected miss rather than a bust.
    pub fn plan(
        &self,
        prefix: &StablePrefix,
        history: &[Message],
        key: Option<LogKey>,
        rewrite_planned: bool,
    ) -> Planned {
        let fingerprint = prefix.fingerprint();
        let prefix_bytes = prefix.canonical_bytes().len() as u64;
        let seen = &self.seen;
        if seen.hashed != DIGESTS {
            // Digests saved by a version that hashed otherwise: the leading messages are
            // taken as the last call's (as for a log that only grew), and digested anew.
            let all: Vec<Digest> = history.iter().map(message_digest).collect();
            let reused = seen.digests.len().min(all.len());
            return Planned {
                fingerprint,
                prefix_bytes,
                history_messages: history.len(),
                reused,
                reused_history_bytes: all[..reused].iter().map(|(_, b)| b).sum(),
                update: Update::Replace(all),
                key,
                rewrite_planned,
            };
        }
        let grown = match (key, seen.key) {
            (Some(k), Some(prev))
                if k.generation == prev.generation && k.evicted >= prev.evicted =>
            {
                let drop_front = usize::try_from(k.evicted - prev.evicted).unwrap_or(usize::MAX);
                let kept = seen.digests.len().saturating_sub(drop_front);
                (history.len() >= kept).then_some((drop_front, kept))
            }
            _ => None,
        };
        let (reused, reused_bytes, update) = match grown {
            Some((0, kept)) => (
                kept,
                seen.bytes,
                Update::Grow {
                    drop_front: 0,
                    tail: history[kept..].iter().map(message_digest).collect(),
                },
            ),
            Some((drop_front, kept)) => {
                let tail: Vec<Digest> = history[kept..].iter().map(message_digest).collect();
                let now = seen.digests.iter().skip(drop_front).chain(&tail);
                let (reused, bytes) = leading_equal(seen.digests.iter(), now);
                (reused, bytes, Update::Grow { drop_front, tail })
            }
            None => {
                let all: Vec<Digest> = history.iter().map(message_digest).collect();
                let (reused, bytes) = leading_equal(seen.digests.iter(), all.iter());
                (reused, bytes, Update::Replace(all))
            }
        };
        Planned {
            fingerprint,
            prefix_bytes,
            history_messages: history.len(),
            reused,
            reused_history_bytes: reused_bytes,
            update,
            key,
            rewrite_planned,
        }
    }

    /// Seeds the ledger with a call made before it existed (a session restored from its
    /// journal): the prefix it was made with, its history and its reported input tokens, at
    /// `at_ms`. The next call is then judged against it — a different prefix is the one
    /// expected miss — instead of being cold.
    pub fn seed(
        &mut self,
        fingerprint: Fingerprint,
        prefix_bytes: u64,
        history: &[Message],
        input_tokens: Option<u64>,
        at_ms: u64,
    ) {
        let digests: VecDeque<Digest> = history.iter().map(message_digest).collect();
        self.seen = Seen {
            key: None,
            bytes: digests.iter().map(|(_, b)| b).sum(),
            hashed: DIGESTS,
            digests,
        };
        self.previous = Some(Previous {
            fingerprint,
            prefix_bytes,
            input_tokens,
            at_ms,
            provider: None,
        });
    }

    /// Records the call planned as `planned`, made at `at_ms` (milliseconds since the Unix
    /// epoch, from the driver's clock), with the usage the provider reported; returns its
    /// check.
    pub fn record(&mut self, planned: Planned, usage: &Usage, at_ms: u64) -> CacheCheck {
        self.record_answer(planned, usage, None, at_ms)
    }

    /// [`record`](Self::record) of a call answered by `provider` (the response's
    /// [`provider`](crate::ModelResponse::provider)): when the previous call named another
    /// one, this call is an [`ExpectedMiss`](CacheVerdict::ExpectedMiss) with
    /// [`provider_changed`](CacheCheck::provider_changed), never a bust.
    pub fn record_answer(
        &mut self,
        planned: Planned,
        usage: &Usage,
        provider: Option<&str>,
        at_ms: u64,
    ) -> CacheCheck {
        self.calls += 1;
        let mut check = CacheCheck {
            call: self.calls,
            prefix_fingerprint: planned.fingerprint,
            prefix_changed: false,
            history_messages: planned.history_messages,
            reused_history_messages: 0,
            expected_cached_tokens: Some(0),
            observed_cached_tokens: usage.cache_read_tokens,
            history_rewritten: false,
            input_tokens: usage.input_tokens,
            provider: provider.map(str::to_string),
            provider_changed: false,
            verdict: CacheVerdict::Cold,
        };
        if let Some(prev) = &self.previous {
            check.history_rewritten = planned.reused < self.seen.digests.len();
            check.prefix_changed = prev.fingerprint != planned.fingerprint;
            check.reused_history_messages = planned.reused;
            check.provider_changed = matches!(
                (prev.provider.as_deref(), provider),
                (Some(before), Some(now)) if before != now
            );
            if check.prefix_changed || check.provider_changed {
                check.verdict = CacheVerdict::ExpectedMiss;
            } else {
                // After a rewrite a context strategy planned, only the prefix is sure to be
                // read again: a provider that caches at breakpoints (Anthropic) has no entry
                // that ends between the prefix and the first changed message, while one that
                // matches any prefix (OpenAI) reads more — a bonus, not a bust.
                let shared_bytes =
                    if planned.rewrite_planned && planned.reused < self.seen.digests.len() {
                        planned.prefix_bytes
                    } else {
                        planned.prefix_bytes + planned.reused_history_bytes
                    };
                let prev_bytes = prev.prefix_bytes + self.seen.bytes;
                check.expected_cached_tokens = prev.input_tokens.map(|tokens| {
                    (u128::from(tokens) * u128::from(shared_bytes) / u128::from(prev_bytes.max(1)))
                        as u64
                });
                check.verdict = match (check.expected_cached_tokens, usage.cache_read_tokens) {
                    (Some(expected), Some(observed)) => {
                        if observed < expected / 2 && expected - observed >= BUST_MIN_TOKENS {
                            let gap = Duration::from_millis(at_ms.saturating_sub(prev.at_ms));
                            CacheVerdict::Bust {
                                cause: bust_cause(gap, expected, observed),
                            }
                        } else {
                            CacheVerdict::Hit
                        }
                    }
                    _ => CacheVerdict::Unreported,
                };
                if check.history_rewritten && !check.is_bust() {
                    // What the previous request had cached that this one no longer repeats.
                    let lost = prev.input_tokens.map(|tokens| {
                        (u128::from(tokens) * u128::from(prev_bytes.saturating_sub(shared_bytes))
                            / u128::from(prev_bytes.max(1))) as u64
                    });
                    if planned.rewrite_planned {
                        check.verdict = CacheVerdict::ExpectedMiss;
                    } else if let Some(lost) = lost.filter(|l| *l >= BUST_MIN_TOKENS) {
                        check.verdict = CacheVerdict::Bust {
                            cause: format!(
                                "the history changed at message {} of {} without a context \
                                 strategy planning it (the log's capacity evicted its oldest \
                                 messages, or it was edited), so about {lost} tokens the \
                                 provider had cached were sent again uncached; give the agent \
                                 a context strategy that rewrites in chunks",
                                planned.reused,
                                self.seen.digests.len()
                            ),
                        };
                    }
                }
            }
        }
        match planned.update {
            Update::Grow { drop_front, tail } => {
                let drop_front = drop_front.min(self.seen.digests.len());
                for (_, bytes) in self.seen.digests.drain(..drop_front) {
                    self.seen.bytes -= bytes;
                }
                self.seen.bytes += tail.iter().map(|(_, b)| b).sum::<u64>();
                self.seen.digests.extend(tail);
            }
            Update::Replace(all) => {
                self.seen.bytes = all.iter().map(|(_, b)| b).sum();
                self.seen.digests = all.into();
                self.seen.hashed = DIGESTS;
            }
        }
        self.seen.key = planned.key;
        self.previous = Some(Previous {
            fingerprint: planned.fingerprint,
            prefix_bytes: planned.prefix_bytes,
            input_tokens: usage.input_tokens,
            at_ms,
            provider: provider.map(str::to_string),
        });
        if self.checks.len() == LEDGER_CAPACITY {
            self.checks.pop_front();
        }
        self.checks.push_back(check.clone());
        check
    }
}

/// How many leading digests of `a` and `b` are equal, and the bytes of those messages.
fn leading_equal<'a>(
    a: impl Iterator<Item = &'a Digest>,
    b: impl Iterator<Item = &'a Digest>,
) -> (usize, u64) {
    a.zip(b)
        .take_while(|(x, y)| x == y)
        .fold((0, 0), |(n, bytes), (x, _)| (n + 1, bytes + x.1))
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
    fn a_ledger_saved_with_other_hashes_judges_its_next_call_without_a_bust() {
        let prefix = StablePrefix::new("x".repeat(8000));
        let mut history: Vec<Message> = (0..40).map(|i| Message::user(format!("m{i}"))).collect();
        let mut ledger = CacheLedger::default();
        ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(20_000, Some(0)),
            0,
        );
        // As an earlier version saved it: no `hashed`, other hashes, the same lengths.
        let mut saved = serde_json::to_value(&ledger).unwrap();
        let seen = saved["seen"].as_object_mut().unwrap();
        assert_eq!(seen.remove("hashed"), Some(serde_json::json!(DIGESTS)));
        for digest in seen["digests"].as_array_mut().unwrap() {
            digest[0] = serde_json::json!(7);
        }
        let mut restored: CacheLedger = serde_json::from_value(saved).unwrap();
        history.push(Message::user("more"));
        let check = restored.record(
            restored.plan(&prefix, &history, None, false),
            &usage(20_050, Some(19_900)),
            1,
        );
        assert!(!check.history_rewritten);
        assert_eq!(check.reused_history_messages, 40);
        assert_eq!(check.verdict, CacheVerdict::Hit);
        // From then on it compares its own digests.
        history.push(Message::user("again"));
        let next = restored.record(
            restored.plan(&prefix, &history, None, false),
            &usage(20_100, Some(20_000)),
            2,
        );
        assert_eq!(next.reused_history_messages, 41);
        assert_eq!(next.verdict, CacheVerdict::Hit);
    }

    #[test]
    fn verdicts_follow_the_shared_prefix() {
        let mut prefix = StablePrefix::new("x".repeat(8000));
        let mut history = vec![Message::user("hello")];
        let mut ledger = CacheLedger::default();

        let first = ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(2000, Some(0)),
            0,
        );
        assert_eq!(first.verdict, CacheVerdict::Cold);

        history.push(Message::user("more"));
        let hit = ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(2010, Some(1920)),
            0,
        );
        assert_eq!(hit.verdict, CacheVerdict::Hit);
        assert_eq!(hit.reused_history_messages, 1);
        let expected = hit.expected_cached_tokens.unwrap();
        assert!((1990..=2000).contains(&expected), "{expected}");

        history.push(Message::user("again"));
        let bust = ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(2020, Some(0)),
            0,
        );
        assert!(bust.is_bust(), "{bust:?}");

        prefix.set_system("changed");
        let miss = ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(30, Some(0)),
            0,
        );
        assert_eq!(miss.verdict, CacheVerdict::ExpectedMiss);
        assert!(miss.prefix_changed);

        let unreported = ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(30, None),
            0,
        );
        assert_eq!(unreported.verdict, CacheVerdict::Unreported);
        assert_eq!((ledger.busts(), ledger.expected_misses()), (1, 1));
        assert_eq!(ledger.checks().len(), 5);
    }

    #[test]
    fn a_provider_switch_is_an_expected_miss_not_a_bust() {
        // Trigger: a fallback answered with another provider, whose cache is cold; read 0
        // of 2,000 expected tokens looked like a bust.
        let prefix = StablePrefix::new("x".repeat(8000));
        let mut history = vec![Message::user("hello")];
        let mut ledger = CacheLedger::default();
        let first = ledger.record_answer(
            ledger.plan(&prefix, &history, None, false),
            &usage(2000, Some(0)),
            Some("openai"),
            0,
        );
        assert_eq!(first.verdict, CacheVerdict::Cold);
        assert_eq!(first.provider.as_deref(), Some("openai"));
        history.push(Message::user("more"));
        let switched = ledger.record_answer(
            ledger.plan(&prefix, &history, None, false),
            &usage(2010, Some(0)),
            Some("anthropic"),
            0,
        );
        assert_eq!(switched.verdict, CacheVerdict::ExpectedMiss);
        assert!(switched.provider_changed && !switched.is_bust());
        history.push(Message::user("again"));
        let warm = ledger.record_answer(
            ledger.plan(&prefix, &history, None, false),
            &usage(2020, Some(0)),
            Some("anthropic"),
            0,
        );
        assert!(!warm.provider_changed);
        assert!(
            warm.is_bust(),
            "the same provider reading nothing is a bust: {warm:?}"
        );
        // A call that names no provider is never a switch.
        history.push(Message::user("unnamed"));
        let unnamed = ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(2030, Some(2000)),
            0,
        );
        assert!(!unnamed.provider_changed);
        assert_eq!(ledger.expected_misses(), 1);
    }

    #[test]
    fn small_shortfalls_are_not_busts() {
        // 900 tokens shared, nothing read: below BUST_MIN_TOKENS (OpenAI caches nothing
        // under 1,024 tokens).
        let prefix = StablePrefix::new("x".repeat(3600));
        let history = vec![Message::user("a")];
        let mut ledger = CacheLedger::default();
        ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(900, Some(0)),
            0,
        );
        let second = ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(900, Some(0)),
            0,
        );
        assert_eq!(second.verdict, CacheVerdict::Hit);
    }

    fn log_of(n: usize, capacity: usize) -> crate::MessageLog {
        let mut log = crate::MessageLog::with_capacity(capacity);
        for i in 0..n {
            log.push(Message::user(format!("message {i}")));
        }
        log
    }

    // The ledger digested the whole history on every step (O(history) per step).
    #[test]
    fn a_growing_log_is_digested_only_where_it_grew() {
        let prefix = StablePrefix::new("x".repeat(8000));
        let mut log = log_of(3, 100);
        let mut ledger = CacheLedger::default();
        let key = LogKey::of(&log);
        let planned = ledger.plan(&prefix, log.as_slice(), Some(key), false);
        assert!(matches!(&planned.update, Update::Replace(d) if d.len() == 3));
        ledger.record(planned, &usage(3000, Some(0)), 0);

        log.push(Message::user("message 3"));
        log.push(Message::user("message 4"));
        let key = LogKey::of(&log);
        let planned = ledger.plan(&prefix, log.as_slice(), Some(key), false);
        assert!(matches!(&planned.update, Update::Grow { drop_front: 0, tail } if tail.len() == 2));
        assert_eq!(planned.reused, 3);
        // The same figures as digesting everything anew.
        let full = ledger.plan(&prefix, log.as_slice(), None, false);
        assert_eq!(
            (full.reused, full.reused_history_bytes),
            (3, planned.reused_history_bytes)
        );
        let check = ledger.record(planned, &usage(3020, Some(2944)), 1_000);
        assert_eq!(check.verdict, CacheVerdict::Hit);
        assert_eq!(check.reused_history_messages, 3);
    }

    #[test]
    fn an_evicted_front_or_an_edit_is_seen() {
        let prefix = StablePrefix::new("x".repeat(8000));
        let mut log = log_of(4, 4);
        let mut ledger = CacheLedger::default();
        let key = LogKey::of(&log);
        let planned = ledger.plan(&prefix, log.as_slice(), Some(key), false);
        ledger.record(planned, &usage(3000, Some(0)), 0);
        log.push(Message::user("message 4")); // evicts message 0
        let key = LogKey::of(&log);
        let planned = ledger.plan(&prefix, log.as_slice(), Some(key), false);
        assert!(matches!(&planned.update, Update::Grow { drop_front: 1, tail } if tail.len() == 1));
        assert_eq!(planned.reused, 0, "the first message changed");
        ledger.record(planned, &usage(3000, Some(2900)), 0);

        log.retain(|i, _, _| i != 2); // an edit: a new generation
        let key = LogKey::of(&log);
        let planned = ledger.plan(&prefix, log.as_slice(), Some(key), false);
        assert!(matches!(&planned.update, Update::Replace(d) if d.len() == 3));
        assert_eq!(planned.reused, 2);
    }

    #[test]
    fn the_gap_for_the_expiry_cause_comes_from_the_driver_clock() {
        let prefix = StablePrefix::new("x".repeat(8000));
        let history = vec![Message::user("a")];
        let mut ledger = CacheLedger::default();
        ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(2000, Some(0)),
            1_000,
        );
        let late = ledger.record(
            ledger.plan(&prefix, &history, None, false),
            &usage(2000, Some(0)),
            601_000,
        );
        let CacheVerdict::Bust { cause } = &late.verdict else {
            panic!("{late:?}")
        };
        assert!(cause.contains("600 s ago"), "{cause}");
        // And the whole ledger survives serde.
        let back: CacheLedger =
            serde_json::from_str(&serde_json::to_string(&ledger).unwrap()).unwrap();
        assert_eq!(back, ledger);
    }
}
