//! [`TruncateStrategy`]: drop whole units from the front of the history, in one chunk, when
//! the context fills up.
//!
//! Every change to the head of the history costs a prompt-cache miss on everything after
//! it. A strategy that drops the oldest unit whenever the window is full (a ring buffer, or a
//! naive sliding window) rewrites the history on every step once full, and every request
//! misses. This one waits until the request passes a high-water mark (default 90 % of the
//! window), then drops enough whole units from the front to come down to a low-water mark
//! (default 60 %) — one rewrite, one expected miss, then many steps of cache hits while the
//! history grows back. A 200-step session rewrites a handful of times.
//!
//! It is pair-safe (a tool call goes with all its results), never touches the live tool
//! round, and by default keeps the first user message (the task).

use halo_core::context::{self, ContextBudget, ContextPlan, ContextStrategy};
use halo_core::{Message, MessageLog, StablePrefix};

/// Drops whole units from the front in one chunk, from a high-water mark down to a low-water
/// mark.
///
/// Every change to the head of the history costs a prompt-cache miss on everything after
/// it; a strategy that drops the oldest unit whenever the window is full rewrites on every
/// step once full. This one waits until a request would pass the high-water mark (default
/// 90 % of the window), then drops enough whole units from the front to come down to the
/// low-water mark (default 60 %): one rewrite, one expected miss, then many steps of cache
/// hits while the history grows back. Measured on a 200-step session with 200 to 3,000-byte
/// tool results on a 32,000-token window: 10 rewrites, 0.93 of input cached, the largest
/// request 28,349 tokens (`crates/halo-strategies/tests/it/truncate.rs`; a per-step sliding
/// window on the same session: about 100 rewrites and 0.42 cached).
///
/// Pair-safe (a tool call goes with all its results), never touching the live tool round,
/// and by default keeping the first user message (the task).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TruncateStrategy {
    high_water: f64,
    low_water: f64,
    keep_task: bool,
}

impl Default for TruncateStrategy {
    /// High water 0.9, low water 0.6, the task kept.
    fn default() -> Self {
        TruncateStrategy {
            high_water: 0.9,
            low_water: 0.6,
            keep_task: true,
        }
    }
}

impl TruncateStrategy {
    /// The default: drop from 90 % down to 60 % of the window, keeping the task.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the marks, as shares of the context window: truncate once a request would use
    /// more than `high`, down to `low`. `low` is kept below `high` (clamped to 0..=1).
    pub fn with_marks(mut self, high: f64, low: f64) -> Self {
        self.high_water = high.clamp(0.0, 1.0);
        self.low_water = low.clamp(0.0, self.high_water);
        self
    }

    /// Whether the first user message (the task) is kept (default `true`).
    pub fn keep_task(mut self, keep: bool) -> Self {
        self.keep_task = keep;
        self
    }
}

impl ContextStrategy for TruncateStrategy {
    fn plan(
        &self,
        _prefix: &StablePrefix,
        log: &MessageLog,
        budget: &ContextBudget<'_>,
    ) -> ContextPlan {
        if budget.used_tokens <= budget.of_window(self.high_water) {
            return ContextPlan::keep();
        }
        let excess = budget
            .used_tokens
            .saturating_sub(budget.of_window(self.low_water));
        let live = context::live_round_start(log);
        let messages: Vec<&Message> = log.messages().collect();
        let task = self
            .keep_task
            .then(|| {
                messages
                    .iter()
                    .enumerate()
                    // The task: not injected by steering, not a discardable entry (a skill).
                    .find(|(i, m)| {
                        matches!(m, Message::User { .. })
                            && !log.is_injected(*i)
                            && !log.is_discardable(*i)
                    })
                    .map(|(i, _)| i)
            })
            .flatten();
        let mut plan = ContextPlan::keep();
        let mut freed = 0;
        for unit in context::units(log) {
            if freed >= excess || unit.end > live {
                break;
            }
            if task.is_some_and(|t| unit.contains(&t)) {
                continue;
            }
            freed += unit
                .clone()
                .map(|i| budget.tokens(messages[i]))
                .sum::<u64>();
            plan.drop.extend(unit);
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use halo_core::context::BytesEstimator;
    use halo_core::{AssistantMessage, ToolCall, ToolResult};

    use super::*;

    fn step(log: &mut MessageLog, id: &str, result: &str) {
        let call = ToolCall::new(id, "read", "{}");
        log.push_step(
            Message::Assistant(AssistantMessage {
                tool_calls: vec![call.clone()],
                ..Default::default()
            }),
            [Message::Tool(ToolResult::ok(&call, result))],
        );
    }

    fn budget(log: &MessageLog, window: u64) -> ContextBudget<'static> {
        let used = log
            .messages()
            .map(|m| context::message_tokens(&BytesEstimator, m))
            .sum();
        ContextBudget {
            context_window: window,
            used_tokens: used,
            calibration: 1.0,
            estimator: &BytesEstimator,
        }
    }

    fn session(steps: usize) -> MessageLog {
        let mut log = MessageLog::default();
        log.push(Message::user("Find the bug."));
        for i in 0..steps {
            step(&mut log, &format!("c{i}"), &"x".repeat(400));
        }
        log
    }

    #[test]
    fn below_the_high_water_mark_nothing_changes() {
        let log = session(10);
        let b = budget(&log, 10_000);
        assert!(b.usage() < 0.9, "{}", b.usage());
        let plan = TruncateStrategy::new().plan(&StablePrefix::default(), &log, &b);
        assert!(plan.is_keep(), "{plan:?}");
    }

    #[test]
    fn past_the_high_water_mark_whole_units_go_down_to_the_low_water_mark() {
        let log = session(20);
        let b = budget(&log, 2_600);
        assert!(b.usage() > 0.9, "{}", b.usage());
        let plan = TruncateStrategy::new().plan(&StablePrefix::default(), &log, &b);
        // The task (0) stays; calls go with their results, in pairs from 1.
        assert!(!plan.drop.contains(&0));
        let dropped: Vec<usize> = plan.drop.iter().copied().collect();
        assert_eq!(dropped, (1..=dropped.len()).collect::<Vec<_>>());
        assert_eq!(dropped.len() % 2, 0, "{dropped:?}");
        let freed: u64 = dropped
            .iter()
            .map(|&i| b.tokens(log.messages().nth(i).unwrap()))
            .sum();
        let after = b.used_tokens - freed;
        assert!(after <= b.of_window(0.6), "{after} tokens left");
        // Not one unit more than needed: without the last unit dropped it would be above.
        let unit: u64 = dropped[dropped.len() - 2..]
            .iter()
            .map(|&i| b.tokens(log.messages().nth(i).unwrap()))
            .sum();
        assert!(
            after + unit > b.of_window(0.6),
            "dropped more than needed: used {} freed {freed} after {after} unit {unit} low {}",
            b.used_tokens,
            b.of_window(0.6)
        );
    }

    #[test]
    fn the_live_round_is_never_dropped() {
        let log = session(3);
        // A window so small every unit would have to go.
        let b = budget(&log, 10);
        let plan = TruncateStrategy::new().plan(&StablePrefix::default(), &log, &b);
        let live = context::live_round_start(&log);
        assert_eq!(live, 5);
        assert_eq!(plan.drop.iter().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
    }

    #[test]
    fn the_task_is_the_first_user_message_that_is_neither_injected_nor_discardable() {
        let mut log = MessageLog::default();
        log.push_discardable(Message::user("Skill: how to fix parsers"));
        log.push(Message::user("Find the bug."));
        for i in 0..20 {
            step(&mut log, &format!("c{i}"), &"x".repeat(400));
        }
        let b = budget(&log, 2_600);
        let plan = TruncateStrategy::new().plan(&StablePrefix::default(), &log, &b);
        assert!(plan.drop.contains(&0), "the skill goes: {plan:?}");
        assert!(!plan.drop.contains(&1), "the task stays: {plan:?}");
    }

    #[test]
    fn without_keep_task_the_task_goes_first() {
        let log = session(20);
        let b = budget(&log, 2_600);
        let plan =
            TruncateStrategy::new()
                .keep_task(false)
                .plan(&StablePrefix::default(), &log, &b);
        assert!(plan.drop.contains(&0));
    }
}
