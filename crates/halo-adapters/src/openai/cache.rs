//! OpenAI's explicit prompt caching (GPT-5.6 and later), shared by the chat-completions and
//! Responses dialects: the request's `prompt_cache_options` and the planner that places its
//! `prompt_cache_breakpoint` markers.
//!
//! What the API documents (the OpenAPI spec's `PromptCacheOptions` and
//! `PromptCacheBreakpoint`, as published in the generated SDKs — openai-python
//! `response_create_params.py` and `response_input_text_param.py`, async-openai
//! `PromptCacheOptionsParam` — and the prompt-caching guide,
//! <https://developers.openai.com/api/docs/guides/prompt-caching>):
//! - `prompt_cache_options: {"mode": "implicit" | "explicit", "ttl": "30m"}`; `30m` is the
//!   only TTL and the default.
//! - A content block (`input_text`, `input_image`, `input_file` in Responses; a `text` part
//!   in chat completions) may carry `"prompt_cache_breakpoint": {"mode": "explicit"}`,
//!   marking the exact end of a reusable prefix. Assistant output, tool definitions and
//!   `instructions` cannot carry one.
//! - `implicit` (the default): OpenAI writes one implicit breakpoint at the end of the newest
//!   eligible message and up to the latest three explicit ones; `explicit`: no implicit
//!   breakpoint, up to the latest four explicit ones, and without any nothing is cached.
//! - A cached prefix matches exactly at a breakpoint (no fallback to a shorter unmarked
//!   prefix); matching considers the latest 80 breakpoints of the conversation with no
//!   content-block lookback limit; the minimum is 1,024 visible tokens.
//! - Writes cost 1.25× the input price, reads 0.1×; usage reports them as
//!   `cache_write_tokens` and `cached_tokens`.
//!
//! So the planner ([`plan_breakpoints`]) needs no lookback breakpoint, unlike Anthropic's:
//! one breakpoint at the end of the stable prefix (when it reaches the minimum, so a new
//! session with the same prefix reads it), and one on the newest eligible block, which the
//! next request of the session reads back. At most two markers per request, the prefix's
//! first; the API writes at most four.

use halo_core::{Message, StablePrefix};
use serde::Serialize;

/// The smallest prefix, in visible tokens, that OpenAI caches (the prompt-caching guide:
/// 1,024 tokens; for GPT-5.6 and later, 1,024 visible tokens).
pub const MIN_CACHEABLE_TOKENS: u64 = 1024;

/// The most breakpoints one request writes (`explicit` mode; `implicit` writes three
/// explicit ones and its own).
pub const MAX_WRITTEN_BREAKPOINTS: usize = 4;

/// How the adapter asks for GPT-5.6+ prompt caching.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PromptCacheMode {
    /// Send nothing: the provider's default (automatic prefix caching before GPT-5.6, the
    /// implicit breakpoint from GPT-5.6 on). The only mode for other servers.
    #[default]
    Default,
    /// `prompt_cache_options: {"mode": "implicit", "ttl": "30m"}` and the planner's
    /// breakpoints: OpenAI's implicit breakpoint on the newest message, plus the prefix's.
    Implicit,
    /// `prompt_cache_options: {"mode": "explicit", "ttl": "30m"}` and only the planner's
    /// breakpoints (the prefix and the newest eligible block).
    Explicit,
}

impl PromptCacheMode {
    /// The `prompt_cache_options` of a request in this mode, if any.
    pub(crate) fn options(self) -> Option<PromptCacheOptions> {
        match self {
            PromptCacheMode::Default => None,
            PromptCacheMode::Implicit => Some(PromptCacheOptions {
                mode: "implicit",
                ttl: "30m",
            }),
            PromptCacheMode::Explicit => Some(PromptCacheOptions {
                mode: "explicit",
                ttl: "30m",
            }),
        }
    }
}

/// `prompt_cache_options` on the wire.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct PromptCacheOptions {
    mode: &'static str,
    ttl: &'static str,
}

/// `prompt_cache_breakpoint` on the wire: always `{"mode": "explicit"}`.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Breakpoint {
    mode: &'static str,
}

/// The one breakpoint value.
pub(crate) const BREAKPOINT: Breakpoint = Breakpoint { mode: "explicit" };

/// Where a request's markers go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BreakpointPlan {
    /// On the last eligible message of the stable prefix (its system message, or the last
    /// user turn of its few-shot turns).
    pub prefix: bool,
    /// On the last block of this history message (an index into the request's history):
    /// the newest user turn or tool result.
    pub newest: Option<usize>,
}

/// Whether a message can carry a breakpoint: system, user and tool-result messages (their
/// content blocks are input blocks); assistant output cannot.
pub fn eligible(message: &Message) -> bool {
    !matches!(message, Message::Assistant(_))
}

/// The markers of a request in `mode` ([`PromptCacheMode::Default`]: none): the prefix's
/// when its estimated size (its canonical bytes / 4) reaches `min_tokens`, and the newest
/// eligible history message's.
///
/// ```
/// use halo_adapters::openai::{PromptCacheMode, plan_breakpoints};
/// use halo_core::{Message, StablePrefix};
///
/// let prefix = StablePrefix::new("x".repeat(8000));
/// let history = [Message::user("hi"), Message::assistant("hello"), Message::user("bye")];
/// let plan = plan_breakpoints(PromptCacheMode::Explicit, &prefix, &history, 1024);
/// assert!(plan.prefix);
/// assert_eq!(plan.newest, Some(2));
/// assert_eq!(plan_breakpoints(PromptCacheMode::Default, &prefix, &history, 1024).newest, None);
/// ```
pub fn plan_breakpoints(
    mode: PromptCacheMode,
    prefix: &StablePrefix,
    history: &[Message],
    min_tokens: u64,
) -> BreakpointPlan {
    if mode == PromptCacheMode::Default {
        return BreakpointPlan::default();
    }
    let prefix_tokens = prefix.canonical_bytes().len() as u64 / 4;
    BreakpointPlan {
        prefix: prefix_tokens >= min_tokens,
        newest: history.iter().rposition(eligible),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo_core::{ToolCall, ToolResult};

    #[test]
    fn the_newest_eligible_block_is_a_user_turn_or_a_tool_result_never_the_model_turn() {
        let prefix = StablePrefix::new("short");
        let call = ToolCall::new("c1", "read", "{}");
        let mut turn = halo_core::AssistantMessage::default();
        turn.tool_calls.push(call.clone());
        let history = [
            Message::user("read it"),
            Message::Assistant(turn),
            Message::Tool(ToolResult::ok(&call, "text")),
            Message::assistant("done"),
        ];
        let plan = plan_breakpoints(PromptCacheMode::Implicit, &prefix, &history, 1024);
        assert!(
            !plan.prefix,
            "a prefix under the minimum gets no breakpoint"
        );
        assert_eq!(plan.newest, Some(2));
        assert_eq!(
            plan_breakpoints(PromptCacheMode::Explicit, &prefix, &history[1..2], 1024).newest,
            None
        );
    }
}
