//! The finish reason of a turn that has tool calls, settled the same way by every adapter
//! (OpenAI-compatible, Anthropic, Gemini).
//!
//! A provider that stops at the output limit (`finish_reason: "length"`,
//! `stop_reason: "max_tokens"`, `finishReason: "MAX_TOKENS"`) may leave the last tool
//! call cut mid-JSON. Such a call must not be run: [`settle`] drops it.

use halo_core::{FinishReason, ToolCall};

/// Settles `tool_calls` against `mapped`, the provider's finish reason mapped on its own.
///
/// - `mapped` is [`FinishReason::Length`]: calls whose arguments are not a complete JSON
///   object ([`ToolCall::arguments`] fails; the call was cut by the token limit) are
///   dropped. Complete calls of the same turn stay.
/// - Then, if any calls remain, the answer is [`FinishReason::ToolCalls`] (the agent runs
///   them); otherwise `mapped` (so a turn whose only call was cut reads
///   [`FinishReason::Length`] with no calls).
pub(crate) fn settle(mapped: FinishReason, tool_calls: &mut Vec<ToolCall>) -> FinishReason {
    if mapped == FinishReason::Length {
        tool_calls.retain(|call| call.arguments().is_ok());
    }
    if tool_calls.is_empty() {
        mapped
    } else {
        FinishReason::ToolCalls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_drops_only_the_cut_call() {
        // Trigger: max_tokens reached while the second call's arguments were streaming.
        let mut calls = vec![
            ToolCall::new("a", "read", r#"{"path":"x"}"#),
            ToolCall::new("b", "read", r#"{"path":"no"#),
        ];
        assert_eq!(
            settle(FinishReason::Length, &mut calls),
            FinishReason::ToolCalls
        );
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "a");

        let mut only_cut = vec![ToolCall::new("b", "read", r#"{"path":"no"#)];
        assert_eq!(
            settle(FinishReason::Length, &mut only_cut),
            FinishReason::Length
        );
        assert!(only_cut.is_empty());
    }

    #[test]
    fn other_reasons_keep_every_call() {
        // Trigger: a normal stop with calls, one of them with bad JSON (run, then reported).
        let mut calls = vec![ToolCall::new("b", "read", "{bad")];
        assert_eq!(
            settle(FinishReason::Stop, &mut calls),
            FinishReason::ToolCalls
        );
        assert_eq!(calls.len(), 1);
        assert_eq!(
            settle(FinishReason::Stop, &mut Vec::new()),
            FinishReason::Stop
        );
    }
}
