//! The history a request carries, made valid whatever the log holds.
//!
//! Providers answer HTTP 400 to a history with a tool result that answers no call (OpenAI:
//! "messages with role 'tool' must be a response to a preceding message with 'tool_calls'"),
//! a tool call left without its result (Anthropic: "tool_use ids were found without
//! tool_result blocks immediately after"), or an empty assistant turn. A log restored from
//! disk or edited by hand can hold any of these, so every request goes through
//! [`valid_history`]:
//!
//! - a tool result that does not directly follow the assistant turn with its call (after
//!   that turn's other results), or repeats a result already given, is dropped (an orphan);
//! - a call left without a result is closed with a synthetic error result the model can read
//!   ([`MAY_HAVE_RUN`]: nothing says whether it ran), placed with the turn's other results,
//!   in call order;
//! - an assistant turn with no text and no tool calls (one made only of reasoning, or of
//!   nothing) is dropped.
//!
//! A valid history, the common case, is borrowed as it is: no copy.
//!
//! The texts of results the engine writes for calls that got none from their tool live here
//! too, each saying what is known: [`NOT_RUN`], [`MAY_HAVE_RUN`], [`unapproved`],
//! [`rejected`].

use std::borrow::Cow;
use std::collections::HashSet;

use crate::message::{Message, ToolCall, ToolResult};

/// The result of a call known not to have run: the run stopped before it started.
pub const NOT_RUN: &str = "this tool call did not run: the run stopped before it started, so it has no result; call it again if you still need it";

/// The result of a call that may have run but whose result was lost (the run stopped while
/// it ran, a process was killed), or whose fate is unknown (a call left without a result in
/// a history edited by hand). The model is told to check before repeating it: a tool that
/// is not safe to run twice is never run again by the agent itself.
pub const MAY_HAVE_RUN: &str = "this tool call may have run, but its result was lost (the run stopped while it was running); check whether it took effect before calling it again";

/// The result that closes `call` as [`MAY_HAVE_RUN`].
pub fn may_have_run(call: &ToolCall) -> ToolResult {
    ToolResult::error(call, MAY_HAVE_RUN)
}

/// The result that closes `call` as [`NOT_RUN`].
pub fn not_run(call: &ToolCall) -> ToolResult {
    ToolResult::error(call, NOT_RUN)
}

/// The result of a call that needs approval no one can give (`reason`: why it needs one).
pub fn unapproved(call: &ToolCall, reason: &str) -> ToolResult {
    ToolResult::error(
        call,
        format!(
            "`{}` did not run: it needs the user's approval ({reason}), which no one can give in this session; go on without it, or ask the user to allow it",
            call.name
        ),
    )
}

/// The result of a call the user rejected, with their `reason`.
pub fn rejected(call: &ToolCall, reason: &str) -> ToolResult {
    let reason = if reason.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", reason.trim())
    };
    ToolResult::error(
        call,
        format!(
            "the user rejected this call, so `{}` did not run{reason}; do not retry it unchanged: go on without it, try another way, or ask the user",
            call.name
        ),
    )
}

/// `history` with orphan results dropped, dangling calls closed and empty assistant turns
/// dropped (see the module docs); borrowed when nothing needed a change.
pub fn valid_history(history: &[Message]) -> Cow<'_, [Message]> {
    if is_valid(history) {
        Cow::Borrowed(history)
    } else {
        Cow::Owned(repaired(history))
    }
}

/// Whether `history` needs no change: every call answered once right after its turn, no
/// orphan, no empty assistant turn.
pub fn is_valid(history: &[Message]) -> bool {
    // The last turn's calls, and which of them have a result (a few words of bits, on the
    // stack for up to 128 calls).
    let mut calls: &[ToolCall] = &[];
    let mut answered = Answered::default();
    for m in history {
        match m {
            Message::Tool(r) => {
                let Some(i) = calls.iter().position(|c| c.id == r.tool_call_id) else {
                    return false;
                };
                if !answered.insert(i) {
                    return false;
                }
            }
            other => {
                if answered.count != calls.len() {
                    return false;
                }
                if let Message::Assistant(a) = other {
                    if a.text.is_empty() && a.tool_calls.is_empty() {
                        return false;
                    }
                    if has_duplicate_ids(&a.tool_calls) {
                        return false;
                    }
                    calls = &a.tool_calls;
                    answered = Answered::default();
                }
            }
        }
    }
    answered.count == calls.len()
}

/// The indexes of the calls of a turn that have a result so far.
#[derive(Default)]
struct Answered {
    small: [u64; 2],
    large: Vec<bool>,
    count: usize,
}

impl Answered {
    /// Marks call `i` answered; false when it already was.
    fn insert(&mut self, i: usize) -> bool {
        let fresh = if i < 128 {
            let (word, bit) = (i / 64, 1u64 << (i % 64));
            let fresh = self.small[word] & bit == 0;
            self.small[word] |= bit;
            fresh
        } else {
            let at = i - 128;
            if self.large.len() <= at {
                self.large.resize(at + 1, false);
            }
            !std::mem::replace(&mut self.large[at], true)
        };
        self.count += usize::from(fresh);
        fresh
    }
}

fn has_duplicate_ids(calls: &[ToolCall]) -> bool {
    // The few calls of a turn are compared pairwise (no set to build); many go through one.
    if calls.len() <= 16 {
        return calls
            .iter()
            .enumerate()
            .any(|(i, c)| calls[..i].iter().any(|d| d.id == c.id));
    }
    let mut seen = HashSet::new();
    calls.iter().any(|c| !seen.insert(c.id.as_str()))
}

fn repaired(history: &[Message]) -> Vec<Message> {
    let mut out = Vec::with_capacity(history.len() + 1);
    let mut i = 0;
    while i < history.len() {
        match &history[i] {
            Message::Tool(_) => {
                // Not preceded by its turn (turns consume their own results below): an orphan.
                i += 1;
            }
            Message::Assistant(a) if a.text.is_empty() && a.tool_calls.is_empty() => i += 1,
            Message::Assistant(a) => {
                let mut turn = a.clone();
                // A second call with the same id could never be told apart from the first.
                let mut ids = HashSet::new();
                turn.tool_calls.retain(|c| ids.insert(c.id.clone()));
                let mut results: Vec<Option<ToolResult>> = vec![None; turn.tool_calls.len()];
                let mut j = i + 1;
                while let Some(Message::Tool(r)) = history.get(j) {
                    if let Some(k) = turn.tool_calls.iter().position(|c| c.id == r.tool_call_id)
                        && results[k].is_none()
                    {
                        results[k] = Some(r.clone());
                    }
                    j += 1;
                }
                let calls = turn.tool_calls.clone();
                out.push(Message::Assistant(turn));
                for (call, result) in calls.iter().zip(results) {
                    out.push(Message::Tool(result.unwrap_or_else(|| may_have_run(call))));
                }
                i = j;
            }
            other => {
                out.push(other.clone());
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AssistantMessage, Reasoning};

    fn turn(text: &str, calls: &[&str]) -> Message {
        Message::Assistant(AssistantMessage {
            text: text.into(),
            tool_calls: calls
                .iter()
                .map(|id| ToolCall::new(*id, "ls", "{}"))
                .collect(),
            ..Default::default()
        })
    }

    fn result(id: &str) -> Message {
        Message::Tool(ToolResult::ok(
            &ToolCall::new(id, "ls", "{}"),
            format!("r{id}"),
        ))
    }

    #[test]
    fn a_valid_history_is_borrowed() {
        let h = vec![
            Message::user("hi"),
            turn("", &["a", "b"]),
            result("b"),
            result("a"),
            turn("done", &[]),
        ];
        assert!(matches!(valid_history(&h), Cow::Borrowed(_)));
    }

    #[test]
    fn a_turn_of_many_calls_is_checked_past_the_first_128() {
        // The answered calls are kept in bits up to 128, in a list beyond.
        let ids: Vec<String> = (0..140).map(|i| format!("c{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut h = vec![Message::user("hi"), turn("", &ids)];
        h.extend(ids.iter().rev().map(|id| result(id)));
        h.push(turn("done", &[]));
        assert!(is_valid(&h));
        // A second result for a call past 128, in place of one for the call before it.
        let mut twice = h.clone();
        let c139 = twice.len() - 2 - 139;
        twice[c139 + 1] = result("c139");
        assert!(!is_valid(&twice));
        // One result missing past 128.
        let mut missing = h.clone();
        missing.remove(2);
        assert!(!is_valid(&missing));
    }

    #[test]
    fn orphans_are_dropped_and_dangling_calls_closed_in_call_order() {
        let h = vec![
            result("x"), // answers nothing
            Message::user("hi"),
            turn("", &["a", "b"]),
            result("b"),
            result("b"), // a second result for b
            Message::user("late"),
            result("a"), // too late: a user turn came between
        ];
        let v = valid_history(&h);
        assert_eq!(
            v.as_ref(),
            [
                Message::user("hi"),
                turn("", &["a", "b"]),
                Message::Tool(may_have_run(&ToolCall::new("a", "ls", "{}"))),
                result("b"),
                Message::user("late"),
            ]
        );
        assert!(is_valid(&v));
    }

    #[test]
    fn reasoning_only_and_empty_turns_are_dropped() {
        let reasoning_only = Message::Assistant(AssistantMessage {
            reasoning: vec![Reasoning {
                text: "hmm".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let h = vec![
            Message::user("hi"),
            reasoning_only,
            turn("", &[]),
            turn("ok", &[]),
        ];
        assert_eq!(
            valid_history(&h).as_ref(),
            [Message::user("hi"), turn("ok", &[])]
        );
    }

    #[test]
    fn a_call_at_the_end_is_closed() {
        let h = vec![Message::user("hi"), turn("", &["a"])];
        let v = valid_history(&h);
        assert_eq!(v.len(), 3);
        assert!(matches!(&v[2], Message::Tool(r) if r.is_error && r.content == MAY_HAVE_RUN));
    }

    #[test]
    fn duplicate_call_ids_in_one_turn_keep_the_first() {
        let h = vec![Message::user("hi"), turn("", &["a", "a"]), result("a")];
        let v = valid_history(&h);
        assert_eq!(
            v.as_ref(),
            [Message::user("hi"), turn("", &["a"]), result("a")]
        );
    }
}
