//! [`LoopSuppression`]: Halo's [`LoopGuard`], in the tiers of pydantic-ai's harness.
//!
//! At each step boundary it looks at the run's steps, and finds, in this order:
//! - **a repeated call**: the last [`repeated_call`](LoopSuppression::repeated_call) tool
//!   calls (default 3) are one call — the same name and the same arguments, compared in
//!   canonical form (key order and spacing do not matter);
//! - **an alternation**: the last calls cycle A-B or A-B-C for
//!   [`alternation_cycles`](LoopSuppression::alternation_cycles) full rounds (default 3);
//! - **a repeated error**: the newest result is an error, and the same error (same tool,
//!   same text) is [`repeated_error`](LoopSuppression::repeated_error) (default 3) of the
//!   last [`error_window`](LoopSuppression::error_window) results (default 6);
//! - **a monologue**: the last [`monologue_steps`](LoopSuppression::monologue_steps) steps
//!   (default 3) called no tool. In this engine a step without tool calls is the final
//!   answer, unless an output guardrail (or an object run's schema check) sends it back, so
//!   this is a model that keeps answering in a way that is not accepted.
//!
//! Only loops the newest step takes part in count: the call checks look at the calls when the
//! newest step made some, the monologue check when it made none. Work that changes something
//! each time is not a loop: reading different files, or an edit-test-edit cycle whose edits
//! differ (the same test command between different edits is no repeated call and no A-B
//! alternation).
//!
//! The first [`nudges`](LoopSuppression::nudges) loops found (default 1) get a nudge: a user
//! message, injected before the next model call, that says what was repeated and asks for
//! another approach or the final answer. A loop found after that ends the run with
//! [`HaloError::LoopDetected`](halo_core::HaloError::LoopDetected). A threshold of 0 turns its
//! check off.
//!
//! Sources: pydantic-ai's agent harness (loop detection and nudging), the AI SDK's
//! `stopWhen` conditions (<https://ai-sdk.dev/docs/agents/loop-control>).

use halo_core::{LoopContext, LoopGuard, LoopKind, LoopVerdict, StepResult, ToolCall};

/// The thresholds of each tier and the number of nudges. See the [module docs](self).
///
/// ```
/// use halo_core::{HaloAgent, testing::ScriptedModel};
/// use halo_strategies::LoopSuppression;
///
/// let guard = LoopSuppression { repeated_call: 4, nudges: 2, ..LoopSuppression::default() };
/// let agent = HaloAgent::builder(ScriptedModel::new()).loop_guard(guard).build();
/// # drop(agent);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopSuppression {
    /// Identical calls in a row that are a loop (default 3; 0 off).
    pub repeated_call: usize,
    /// Full rounds of an A-B or A-B-C cycle that are a loop (default 3; 0 off).
    pub alternation_cycles: usize,
    /// Times the same error among the last `error_window` results that are a loop (default
    /// 3; 0 off).
    pub repeated_error: usize,
    /// The results `repeated_error` looks at (default 6).
    pub error_window: usize,
    /// Steps in a row without tool calls that are a loop (default 3; 0 off).
    pub monologue_steps: usize,
    /// Loops answered with a nudge before one ends the run (default 1; 0 stops at once).
    pub nudges: usize,
}

impl Default for LoopSuppression {
    fn default() -> Self {
        LoopSuppression {
            repeated_call: 3,
            alternation_cycles: 3,
            repeated_error: 3,
            error_window: 6,
            monologue_steps: 3,
            nudges: 1,
        }
    }
}

/// A loop found: its kind, the nudge for the model and the stop message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The kind of loop.
    pub kind: LoopKind,
    /// The user message that nudges the model out of it.
    pub nudge: String,
    /// What happened, for [`HaloError::LoopDetected`](halo_core::HaloError::LoopDetected).
    pub message: String,
}

impl LoopSuppression {
    /// The loop the newest of `steps` takes part in, if any.
    pub fn find(&self, steps: &[StepResult]) -> Option<Finding> {
        let last = steps.last()?;
        if last.message.tool_calls.is_empty() {
            return self.find_monologue(steps);
        }
        let calls: Vec<&ToolCall> = steps.iter().flat_map(|s| &s.message.tool_calls).collect();
        let keys: Vec<String> = calls.iter().map(|c| call_key(c)).collect();
        self.find_repeated_call(&calls, &keys)
            .or_else(|| self.find_alternation(&calls, &keys))
            .or_else(|| self.find_repeated_error(steps))
    }

    fn find_repeated_call(&self, calls: &[&ToolCall], keys: &[String]) -> Option<Finding> {
        let n = self.repeated_call;
        let newest = keys.last()?;
        let run = keys.iter().rev().take_while(|k| *k == newest).count();
        if n == 0 || run < n {
            return None;
        }
        let name = &calls.last()?.name;
        Some(Finding {
            kind: LoopKind::RepeatedCall,
            nudge: format!(
                "You have called `{name}` with the same arguments {run} times in a row. Repeating it will not change what it returns. Use the result you already have, try a different approach, or give your final answer."
            ),
            message: format!("`{name}` was called with the same arguments {run} times in a row"),
        })
    }

    fn find_alternation(&self, calls: &[&ToolCall], keys: &[String]) -> Option<Finding> {
        let cycles = self.alternation_cycles;
        if cycles == 0 {
            return None;
        }
        for period in [2, 3] {
            let len = period * cycles;
            if keys.len() < len {
                continue;
            }
            let tail = &keys[keys.len() - len..];
            let cyclic = (period..len).all(|i| tail[i] == tail[i - period]);
            // Not a shorter cycle (A-A-A is a repeated call, A-B-A-B not an A-B-C cycle).
            let distinct =
                (1..period).all(|i| tail[i] != tail[0]) && (period != 3 || tail[1] != tail[2]);
            if cyclic && distinct {
                let names: Vec<&str> = calls[calls.len() - period..]
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                let cycle = names.join(" → ");
                return Some(Finding {
                    kind: LoopKind::Alternation,
                    nudge: format!(
                        "You are going round in a cycle ({cycle}) with the same arguments, {cycles} times now, and nothing changes. Break the cycle: do something different with what you learned, or give your final answer."
                    ),
                    message: format!(
                        "the calls cycled {cycle} with the same arguments {cycles} times"
                    ),
                });
            }
        }
        None
    }

    fn find_repeated_error(&self, steps: &[StepResult]) -> Option<Finding> {
        let n = self.repeated_error;
        if n == 0 {
            return None;
        }
        let results: Vec<_> = steps.iter().flat_map(|s| &s.tool_results).collect();
        let newest = steps
            .last()?
            .tool_results
            .iter()
            .rev()
            .find(|r| r.is_error)?;
        let window = &results[results.len().saturating_sub(self.error_window.max(n))..];
        let count = window
            .iter()
            .filter(|r| {
                r.is_error && r.tool_name == newest.tool_name && r.content == newest.content
            })
            .count();
        if count < n {
            return None;
        }
        let tool = &newest.tool_name;
        let excerpt = excerpt(&newest.content, 300);
        Some(Finding {
            kind: LoopKind::RepeatedError,
            nudge: format!(
                "`{tool}` has failed {count} times with the same error: {excerpt}\nTrying it the same way will fail again. Change your approach, or give your final answer and say what is blocking you."
            ),
            message: format!("`{tool}` failed {count} times with the same error: {excerpt}"),
        })
    }

    fn find_monologue(&self, steps: &[StepResult]) -> Option<Finding> {
        let n = self.monologue_steps;
        let run = steps
            .iter()
            .rev()
            .take_while(|s| s.message.tool_calls.is_empty())
            .count();
        if n == 0 || run < n {
            return None;
        }
        Some(Finding {
            kind: LoopKind::Monologue,
            nudge: format!(
                "Your last {run} replies called no tool and were not accepted as the answer. Call a tool to make progress, or give a final answer that addresses the feedback."
            ),
            message: format!("{run} steps in a row called no tool and were not accepted"),
        })
    }
}

impl LoopGuard for LoopSuppression {
    fn check(&self, context: LoopContext<'_>) -> LoopVerdict {
        match self.find(context.steps) {
            None => LoopVerdict::Continue,
            Some(f) if context.nudges < self.nudges => LoopVerdict::Nudge(f.nudge),
            Some(f) => LoopVerdict::Stop {
                kind: f.kind,
                message: match context.nudges {
                    0 => f.message,
                    n => format!(
                        "{}, after {n} {}",
                        f.message,
                        if n == 1 { "nudge" } else { "nudges" }
                    ),
                },
            },
        }
    }
}

/// A call's identity: its name and its arguments in canonical form (the raw string when it
/// is not JSON).
fn call_key(call: &ToolCall) -> String {
    let args = match call.arguments() {
        Ok(v) => halo_core::prefix::canonicalize(v).to_string(),
        Err(_) => call.raw_arguments.trim().to_string(),
    };
    format!("{}\u{0}{args}", call.name)
}

/// At most `max` characters of `text`, with `…` when cut.
fn excerpt(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_cuts_at_a_character_boundary() {
        assert_eq!(excerpt("ééé", 2), "éé…");
        assert_eq!(excerpt(" ab ", 5), "ab");
    }

    #[test]
    fn key_order_and_spacing_do_not_make_a_different_call() {
        let a = ToolCall::new("1", "read", r#"{"path": "a", "limit": 3}"#);
        let b = ToolCall::new("2", "read", r#"{"limit":3,"path":"a"}"#);
        assert_eq!(call_key(&a), call_key(&b));
        assert_ne!(
            call_key(&a),
            call_key(&ToolCall::new("3", "read", r#"{"path":"b"}"#))
        );
    }
}
