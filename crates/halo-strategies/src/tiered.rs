//! [`TieredStrategy`]: evict old tool output in place first, drop whole units only when that
//! is not enough, in layers.
//!
//! - **Layer 0**, the tool-output budget, is the head+tail cut of each result (the sandbox
//!   tools' own, and the agent's tool output limit): it happens before a result enters the
//!   log, not here.
//! - **Layer 1**, from the eviction mark (default 85 % of the window): old tool results and
//!   over-long tool-call arguments are replaced in place by the JSON object
//!   `{"$evicted": N}` (N = bytes removed) — not a marker string a model might copy into a
//!   later `write`. Discardable entries (skill bodies) go first, then the oldest results,
//!   then the oldest long arguments, until the request is down to the low-water mark
//!   (default 55 %). The live tool round is never touched. In Halo's history a tool result
//!   is a message of its own, so this works the same whatever the wire shape: OpenAI-style
//!   `role: tool` messages, or Anthropic `tool_result` blocks that the adapter groups in one
//!   user message.
//! - **Layer 2**, from the truncation mark (default 95 %), or when eviction cannot get half
//!   way down to the low-water mark (what it cannot free — calls, placeholders, short
//!   results — grows with the session): with [`with_compaction`](TieredStrategy::with_compaction),
//!   the model summarizes all but the newest units into one user message (the summary
//!   request is prefix + history + a coding-session instruction, itself a cache hit; a
//!   failed one drops the same messages instead); without it (the default), whole units are
//!   dropped from the front as [`TruncateStrategy`] does, down to the low-water mark, in the
//!   same rewrite.
//!
//! Each layer acts in one chunk between a high- and a low-water mark: every rewrite of the
//! history costs a cache miss on everything after the point it changes, so a layer that
//! evicted one result per step once past its mark would be as bad as a ring buffer.
//!
//! The low-water mark follows the session's recent growth: when each step adds a large
//! share of the window (a model paging through a big file), a rewrite down to a fixed mark
//! would make room for only a step or two, and the history would be rewritten every few
//! steps. So the mark is lowered until one rewrite makes room for
//! [`room_for_steps`](TieredStrategy::room_for_steps) steps (default
//! [`DEFAULT_ROOM_FOR_STEPS`]) of the mean growth of the last ones, never below a floor
//! that keeps the prefix, the task and the newest two rounds.

use halo_core::context::{
    self, COMPACTION_PROMPT, Compaction, ContextBudget, ContextPlan, ContextStrategy,
    SUMMARY_HEADER,
};
use halo_core::{AssistantMessage, ContentPart, Message, MessageLog, StablePrefix, ToolResult};

use crate::TruncateStrategy;

/// Steps of recent growth one rewrite makes room for, by default (see the module docs).
pub const DEFAULT_ROOM_FOR_STEPS: usize = 5;

/// Steps whose growth the low-water mark follows: the newest rounds, at most this many.
const GROWTH_WINDOW: usize = 5;

/// The key of the object that replaces evicted content.
pub const EVICTED_KEY: &str = "$evicted";

/// Whether `text` is already an eviction placeholder.
pub fn is_evicted(text: &str) -> bool {
    text.starts_with("{\"$evicted\":")
}

/// The placeholder for `bytes` removed bytes: `{"$evicted":N}`.
pub fn placeholder(bytes: usize) -> String {
    serde_json::json!({ EVICTED_KEY: bytes }).to_string()
}

/// Layered context management: in-place eviction, then truncation. See the
/// [crate docs](crate) and the module's source docs for the layers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TieredStrategy {
    evict_at: f64,
    truncate_at: f64,
    low_water: f64,
    /// Tool-call arguments longer than this (bytes) may be evicted.
    long_arguments: usize,
    /// Tool results shorter than this (bytes) are not worth a placeholder.
    min_evict: usize,
    keep_task: bool,
    /// Layer 2 by the model: compaction instead of truncation.
    compaction: bool,
    /// The share of the window a compaction keeps unsummarized (the newest units).
    keep_recent: f64,
    /// Steps of recent growth a rewrite makes room for (0: the low-water mark is fixed).
    room_for_steps: usize,
}

impl Default for TieredStrategy {
    /// Evict from 85 %, truncate from 95 %, both down to 55 %; arguments over 2,048 bytes and
    /// results over 256 bytes may be evicted; the task is kept. The 30-point chunk matches
    /// [`TruncateStrategy`]'s, so a provider that caches only at breakpoints (Anthropic), for
    /// which every rewrite costs the whole history, sees no more rewrites than under it.
    fn default() -> Self {
        TieredStrategy {
            evict_at: 0.85,
            truncate_at: 0.95,
            low_water: 0.55,
            long_arguments: 2048,
            min_evict: 256,
            keep_task: true,
            compaction: false,
            keep_recent: 0.25,
            room_for_steps: DEFAULT_ROOM_FOR_STEPS,
        }
    }
}

impl TieredStrategy {
    /// The defaults (see [`Default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the marks, as shares of the window: evict in place from `evict_at`, drop whole
    /// units from `truncate_at`, each down to `low_water` (clamped so that
    /// `low_water <= evict_at <= truncate_at <= 1`).
    pub fn with_marks(mut self, evict_at: f64, truncate_at: f64, low_water: f64) -> Self {
        self.truncate_at = truncate_at.clamp(0.0, 1.0);
        self.evict_at = evict_at.clamp(0.0, self.truncate_at);
        self.low_water = low_water.clamp(0.0, self.evict_at);
        self
    }

    /// Whether the first user message (the task) is kept by the truncation layer (default
    /// `true`).
    pub fn keep_task(mut self, keep: bool) -> Self {
        self.keep_task = keep;
        self
    }

    /// Makes Layer 2 a compaction by the model instead of truncation (default off): the
    /// history but its newest units (up to `keep_recent` of the window, the live round always)
    /// is summarized by the model into one user message, after the task's user message. The
    /// summary request is the prefix, the history and an instruction made for coding sessions
    /// ([`COMPACTION_PROMPT`](halo_core::context::COMPACTION_PROMPT)), itself a cache hit; if
    /// it fails (its own request over the window, say), the same messages are dropped instead.
    /// With several user turns, the tail from the last real user message is kept when it
    /// fits; when it does not (one long task), the task's older rounds are summarized and its
    /// message kept.
    pub fn with_compaction(mut self, keep_recent: f64) -> Self {
        self.compaction = true;
        self.keep_recent = keep_recent.clamp(0.0, self.low_water);
        self
    }

    /// Makes each rewrite leave room for `steps` steps of the session's recent growth per
    /// step, lowering the low-water mark when needed (0 keeps the mark where
    /// [`with_marks`](Self::with_marks) set it). See the module docs.
    pub fn room_for_steps(mut self, steps: usize) -> Self {
        self.room_for_steps = steps;
        self
    }

    /// The low-water mark for this plan, in tokens: the configured mark, lowered so that the
    /// room between it and the eviction mark holds `room_for_steps` steps of the mean growth
    /// of the newest rounds, but not below the prefix, the task and the newest two rounds.
    fn low_mark(&self, prefix: &StablePrefix, log: &MessageLog, budget: &ContextBudget<'_>) -> u64 {
        let low = budget.of_window(self.low_water);
        if self.room_for_steps == 0 {
            return low;
        }
        let messages: Vec<&Message> = log.messages().collect();
        let rounds: Vec<std::ops::Range<usize>> = context::units(log)
            .into_iter()
            .filter(|u| matches!(messages[u.start], Message::Assistant(_)))
            .collect();
        if rounds.is_empty() {
            return low;
        }
        let tokens = |u: &std::ops::Range<usize>| -> u64 {
            u.clone().map(|i| budget.tokens(messages[i])).sum()
        };
        let recent = &rounds[rounds.len().saturating_sub(GROWTH_WINDOW)..];
        let growth = recent.iter().map(tokens).sum::<u64>() / recent.len() as u64;
        let wanted = budget
            .of_window(self.evict_at)
            .saturating_sub(growth.saturating_mul(self.room_for_steps as u64));
        if wanted >= low {
            return low;
        }
        let prefix_tokens = (budget
            .estimator
            .estimate(&String::from_utf8_lossy(prefix.canonical_bytes()))
            as f64
            * budget.calibration)
            .ceil() as u64;
        let task = messages
            .iter()
            .find(|m| matches!(m, Message::User { .. }))
            .map_or(0, |m| budget.tokens(m));
        let newest: u64 = rounds.iter().rev().take(2).map(tokens).sum();
        wanted.max(prefix_tokens + task + newest)
    }

    /// The compaction that keeps the newest units within `keep_recent` of the window; `None`
    /// when there is nothing before them to summarize.
    fn compaction(&self, log: &MessageLog, budget: &ContextBudget<'_>) -> Option<Compaction> {
        let messages: Vec<&Message> = log.messages().collect();
        let live = context::live_round_start(log);
        let keep = budget.of_window(self.keep_recent);
        let mut keep_from = live;
        let mut kept: u64 = (live..messages.len())
            .map(|i| budget.tokens(messages[i]))
            .sum();
        for unit in context::units(log).iter().rev() {
            if unit.start >= live {
                continue;
            }
            let tokens: u64 = unit.clone().map(|i| budget.tokens(messages[i])).sum();
            if kept + tokens > keep {
                break;
            }
            kept += tokens;
            keep_from = unit.start;
        }
        // The last real user message: not injected by steering, not a discardable entry, not
        // an earlier summary.
        let last_user = (0..live).rev().find(|&i| {
            matches!(messages[i], Message::User { .. })
                && !log.is_injected(i)
                && !log.is_discardable(i)
                && !messages[i].text().starts_with(SUMMARY_HEADER)
        });
        let (keep_from, task) = match last_user {
            // The tail from the last real user message fits: keep it whole.
            Some(u) if u >= keep_from && u > 0 => (u, None),
            // One long task: summarize its older rounds, keep its message.
            Some(u) if u < keep_from && self.keep_task => (keep_from, Some(u)),
            _ => (keep_from, None),
        };
        let summarized = (0..keep_from).filter(|i| Some(*i) != task).count();
        (summarized > 0 && keep_from > 0).then(|| Compaction {
            keep_from,
            task,
            instruction: COMPACTION_PROMPT.to_string(),
        })
    }

    /// The in-place evictions that bring the request down toward `low` tokens, and the
    /// tokens they free.
    fn evictions(
        &self,
        log: &MessageLog,
        budget: &ContextBudget<'_>,
        low: u64,
    ) -> (ContextPlan, u64) {
        let messages: Vec<&Message> = log.messages().collect();
        let live = context::live_round_start(log);
        let excess = budget.used_tokens.saturating_sub(low);
        // Discardable entries first, then results, then long arguments; oldest first in each.
        let mut order: Vec<(u8, usize)> = Vec::new();
        for (i, m) in messages.iter().enumerate().take(live) {
            let rank = match m {
                _ if log.is_discardable(i) && evictable_text(m).is_some() => 0,
                Message::Tool(r)
                    if r.content.len() >= self.min_evict && !is_evicted(&r.content) =>
                {
                    1
                }
                Message::Assistant(a)
                    if a.tool_calls.iter().any(|c| {
                        c.raw_arguments.len() > self.long_arguments && !is_evicted(&c.raw_arguments)
                    }) =>
                {
                    2
                }
                _ => continue,
            };
            order.push((rank, i));
        }
        order.sort();
        let mut plan = ContextPlan::keep();
        let mut freed = 0;
        for (_, i) in order {
            if freed >= excess {
                break;
            }
            let Some(replacement) = self.evicted(messages[i]) else {
                continue;
            };
            let before = budget.tokens(messages[i]);
            let after = budget.tokens(&replacement);
            freed += before.saturating_sub(after);
            plan.replace.push((i, replacement));
        }
        (plan, freed)
    }

    /// `message` with its bulky content replaced by placeholders; `None` when nothing in it
    /// is worth evicting.
    fn evicted(&self, message: &Message) -> Option<Message> {
        match message {
            Message::Tool(r) if !is_evicted(&r.content) && r.content.len() >= self.min_evict => {
                Some(Message::Tool(ToolResult {
                    content: placeholder(r.content.len()).into(),
                    ..r.clone()
                }))
            }
            Message::Assistant(a) => {
                let mut changed = false;
                let calls = a
                    .tool_calls
                    .iter()
                    .map(|c| {
                        let mut c = c.clone();
                        if c.raw_arguments.len() > self.long_arguments
                            && !is_evicted(&c.raw_arguments)
                        {
                            c.raw_arguments = placeholder(c.raw_arguments.len()).into();
                            changed = true;
                        }
                        c
                    })
                    .collect();
                changed.then(|| {
                    Message::Assistant(AssistantMessage {
                        tool_calls: calls,
                        ..a.clone()
                    })
                })
            }
            Message::User { .. } => {
                let text = evictable_text(message)?;
                Some(Message::User {
                    content: vec![ContentPart::Text {
                        text: placeholder(text.len()),
                    }],
                })
            }
            Message::System { content } if !is_evicted(content) => Some(Message::System {
                content: placeholder(content.len()),
            }),
            _ => None,
        }
    }
}

/// The text of a user or system message that could be evicted (not already a placeholder).
fn evictable_text(message: &Message) -> Option<String> {
    match message {
        Message::User { .. } | Message::System { .. } => {
            let text = message.text();
            (!text.is_empty() && !is_evicted(&text)).then_some(text)
        }
        Message::Tool(r) => (!is_evicted(&r.content)).then(|| r.content.to_string()),
        Message::Assistant(_) => None,
    }
}

impl ContextStrategy for TieredStrategy {
    fn plan(
        &self,
        prefix: &StablePrefix,
        log: &MessageLog,
        budget: &ContextBudget<'_>,
    ) -> ContextPlan {
        if budget.used_tokens <= budget.of_window(self.evict_at) {
            return ContextPlan::keep();
        }
        let low = self.low_mark(prefix, log, budget);
        let (plan, freed) = self.evictions(log, budget, low);
        let after = budget.used_tokens.saturating_sub(freed);
        // What eviction cannot free — the calls, the placeholders, short results — grows
        // with the session. Once eviction gets less than half way down to the low-water
        // mark, or the request is past the truncation mark anyway, whole units go too, in
        // the same rewrite: one chunk, not a rewrite that frees a little every few steps.
        let evict = budget.of_window(self.evict_at);
        let halfway = low + evict.saturating_sub(low) / 2;
        if after <= budget.of_window(self.truncate_at) && after <= halfway {
            return plan;
        }
        if self.compaction
            && let Some(compaction) = self.compaction(log, budget)
        {
            return ContextPlan {
                compact: Some(compaction),
                ..ContextPlan::keep()
            };
        }
        // Eviction was not enough: drop whole units from the front (with the evictions of
        // the units that stay), down to the low-water mark.
        let low_share = low as f64 / budget.context_window.max(1) as f64;
        let truncate = TruncateStrategy::new()
            .with_marks(0.0, low_share)
            .keep_task(self.keep_task);
        let reduced = ContextBudget {
            used_tokens: after,
            ..*budget
        };
        let mut dropped = truncate.plan(prefix, log, &reduced);
        dropped.replace = plan
            .replace
            .into_iter()
            .filter(|(i, _)| !dropped.drop.contains(i))
            .collect();
        dropped
    }
}

#[cfg(test)]
mod tests {
    use halo_core::ToolCall;
    use halo_core::context::BytesEstimator;

    use super::*;

    fn session(steps: usize, result_bytes: usize) -> MessageLog {
        let mut log = MessageLog::default();
        log.push(Message::user("Find the bug."));
        for i in 0..steps {
            let call = ToolCall::new(format!("c{i}"), "read", r#"{"path":"src/lib.rs"}"#);
            log.push_step(
                Message::Assistant(AssistantMessage {
                    tool_calls: vec![call.clone()],
                    ..AssistantMessage::default()
                }),
                [Message::Tool(ToolResult::ok(
                    &call,
                    "y".repeat(result_bytes),
                ))],
            );
        }
        log
    }

    fn budget(log: &MessageLog, window: u64) -> ContextBudget<'static> {
        ContextBudget {
            context_window: window,
            used_tokens: log
                .messages()
                .map(|m| context::message_tokens(&BytesEstimator, m))
                .sum(),
            calibration: 1.0,
            estimator: &BytesEstimator,
        }
    }

    #[test]
    fn past_the_eviction_mark_old_results_become_placeholders_oldest_first() {
        let log = session(10, 1000);
        let b = budget(&log, 3500);
        assert!(b.usage() > 0.8 && b.usage() < 0.95, "{}", b.usage());
        let plan = TieredStrategy::new().plan(&StablePrefix::default(), &log, &b);
        assert!(plan.drop.is_empty() && plan.insert.is_none(), "{plan:?}");
        let replaced: Vec<usize> = plan.replace.iter().map(|(i, _)| *i).collect();
        // Results sit at 2, 4, 6, ...; the oldest go first, the live round (19, 20) stays.
        assert_eq!(
            replaced,
            (0..replaced.len()).map(|k| 2 + 2 * k).collect::<Vec<_>>()
        );
        assert!(replaced.iter().all(|&i| i < 19));
        let Message::Tool(r) = &plan.replace[0].1 else {
            panic!("not a tool result")
        };
        assert_eq!(r.content, r#"{"$evicted":1000}"#);
        assert_eq!(r.tool_call_id, "c0");
    }

    #[test]
    fn below_the_eviction_mark_nothing_changes() {
        let log = session(10, 1000);
        let b = budget(&log, 10_000);
        assert!(
            TieredStrategy::new()
                .plan(&StablePrefix::default(), &log, &b)
                .is_keep()
        );
    }

    #[test]
    fn discardable_entries_go_first_and_long_arguments_last() {
        let mut log = session(4, 1000);
        log.push_discardable(Message::user("SKILL BODY ".repeat(100)));
        let call = ToolCall::new(
            "w",
            "write",
            format!(r#"{{"content":"{}"}}"#, "z".repeat(3000)),
        );
        log.push_step(
            Message::Assistant(AssistantMessage {
                tool_calls: vec![call.clone()],
                ..AssistantMessage::default()
            }),
            [Message::Tool(ToolResult::ok(&call, "ok"))],
        );
        let tail = ToolCall::new("t", "read", "{}");
        log.push_step(
            Message::Assistant(AssistantMessage {
                tool_calls: vec![tail.clone()],
                ..AssistantMessage::default()
            }),
            [Message::Tool(ToolResult::ok(&tail, "live"))],
        );
        // A window where everything evictable must go.
        let b = budget(&log, 1000);
        // The eviction layer alone (the plan would also drop units at this size).
        let (plan, _) = TieredStrategy::new()
            .with_marks(0.8, 1.0, 0.0)
            .evictions(&log, &b, 0);
        let replaced: Vec<usize> = plan.replace.iter().map(|(i, _)| *i).collect();
        assert_eq!(replaced, [9, 2, 4, 6, 8, 10]);
        let Message::Assistant(a) = &plan.replace[5].1 else {
            panic!("not the write call")
        };
        assert_eq!(a.tool_calls[0].raw_arguments, r#"{"$evicted":3014}"#);
    }

    #[test]
    fn when_eviction_is_not_enough_whole_units_go_from_the_front() {
        // Many small results: nothing to evict (under 256 bytes), so truncation.
        let log = session(60, 100);
        let b = budget(&log, 2000);
        assert!(b.usage() > 0.95, "{}", b.usage());
        let plan = TieredStrategy::new().plan(&StablePrefix::default(), &log, &b);
        assert!(!plan.drop.is_empty() && !plan.drop.contains(&0), "{plan:?}");
    }
}
