//! The models' context windows: one table for every adapter, read by each adapter's
//! [`ModelAdapter::context_window`](halo_core::ModelAdapter::context_window).
//!
//! The window is the most tokens a request may hold, prompt and answer together, as each
//! provider documents it for the model id. Ids are matched by family prefix
//! (`claude-sonnet-4-5-20250929` is a `claude-sonnet-4`, `gemini-2.5-flash-lite` a
//! `gemini-2.5-flash`), ignoring case and anything up to a last `/` (`models/gemini-2.5-pro`,
//! `openai/gpt-4o` through a router). A prefix matches only whole parts of the id: it must be
//! followed by the end or one of `-` `.` `:` `@` `_`, so `gpt-5` is `gpt-5.1` and
//! `gpt-5-mini`, never a `gpt-50`. An id the table does not know gets `None`, and the agent
//! then uses its own default ([`halo_core::DEFAULT_CONTEXT_WINDOW`]).
//!
//! Where a family's window grew over time, or depends on a beta flag, the table keeps the
//! smaller documented value: a window that is too small only truncates early, one that is
//! too large fails the request with the provider's context-window error. Each row says
//! where its figure comes from; the ones we are not sure of say so. Providers change these
//! figures: override them per agent (`ContextConfig::with_context_window`).

/// One family: an id prefix and its window in tokens. Rows are tried in order, so a longer
/// prefix comes before a shorter one it extends (`o1-mini` before `o1`).
const TABLE: &[(&str, u64)] = &[
    // --- OpenAI (https://platform.openai.com/docs/models, each model's page) ---
    // gpt-4o, gpt-4o-mini and dated snapshots: 128,000 ("Context window 128,000").
    ("gpt-4o", 128_000),
    // gpt-4.1, gpt-4.1-mini, gpt-4.1-nano: 1,047,576.
    ("gpt-4.1", 1_047_576),
    // gpt-5-chat-latest: 128,000 (the chat model is not the API's 400K reasoning model).
    ("gpt-5-chat", 128_000),
    // gpt-5, -mini, -nano, -codex, 5.1, 5.2: 400,000 (272,000 input + 128,000 output).
    // Later 5.x models are listed with about 1,050,000 by gateways (Vercel AI Gateway,
    // OpenRouter; not checked against OpenAI's own page): 400,000 is the safe floor.
    ("gpt-5", 400_000),
    // o1-mini: 128,000; o1, o1-pro, o3, o3-mini, o3-pro, o4-mini: 200,000.
    ("o1-mini", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    // --- DeepSeek (https://api-docs.deepseek.com/quick_start/pricing) ---
    // deepseek-chat / deepseek-reasoner: 64K in early 2025 (V3, R1), 128K from V3.1/V3.2
    // (the pricing page of late 2025); from 2026-04 they aliased deepseek-v4-flash (1M)
    // until retired on 2026-07-24 (DeepSeek's release notes). 128K is the value of the
    // longest-lived version; unsure for accounts still on the 64K deployment.
    ("deepseek-chat", 128_000),
    ("deepseek-reasoner", 128_000),
    // deepseek-v4-flash, deepseek-v4-pro and their successor deepseek-flash: "1M context"
    // (DeepSeek's 2026-04 release notes), taken as 1,000,000.
    ("deepseek-v4", 1_000_000),
    ("deepseek-flash", 1_000_000),
    // --- Anthropic (https://platform.claude.com/docs/en/about-claude/models/overview) ---
    // Claude 3, 3.5, 3.7 and the Claude 4 family through 4.5 (Sonnet, Opus, Haiku):
    // 200,000. Sonnet 4 and 4.5 (and Opus 4.6) take 1,000,000 only with the
    // `context-1m-2025-08-07` beta header, so the table keeps 200,000; set the window per
    // agent when you send that beta.
    ("claude-3", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-opus-4", 200_000),
    ("claude-haiku-4", 200_000),
    // --- Gemini (https://ai.google.dev/gemini-api/docs/models, "Input token limit") ---
    // Gemini's window is its input token limit (https://ai.google.dev/gemini-api/docs/tokens,
    // "Context windows"). 1.5 Pro: 2,097,152; 1.5 Flash, 2.0 Flash (and Flash-Lite), 2.5 Pro,
    // 2.5 Flash, 3 Pro / 3.1 Pro preview, 3 Flash: 1,048,576.
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-1.5-flash", 1_048_576),
    ("gemini-2.0-flash", 1_048_576),
    ("gemini-2.5-pro", 1_048_576),
    ("gemini-2.5-flash", 1_048_576),
    ("gemini-3", 1_048_576),
];

/// The context window of `model` in tokens, from the table above, or `None` for an id it
/// does not know (a local server's model, a new family).
///
/// ```
/// use halo_adapters::window::context_window;
///
/// assert_eq!(context_window("gpt-4o-2024-08-06"), Some(128_000));
/// assert_eq!(context_window("claude-sonnet-4-5-20250929"), Some(200_000));
/// assert_eq!(context_window("models/gemini-2.5-pro"), Some(1_048_576));
/// assert_eq!(context_window("qwen2.5-coder:7b"), None);
/// ```
pub fn context_window(model: &str) -> Option<u64> {
    let id = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    TABLE
        .iter()
        .find(|(prefix, _)| {
            id.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.', ':', '@', '_']))
        })
        .map(|(_, window)| *window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_have_their_documented_windows() {
        let cases = [
            ("gpt-4o", Some(128_000)),
            ("gpt-4o-mini", Some(128_000)),
            ("gpt-4.1-nano-2025-04-14", Some(1_047_576)),
            ("gpt-5", Some(400_000)),
            ("gpt-5-mini", Some(400_000)),
            ("gpt-5.1", Some(400_000)),
            ("gpt-5-chat-latest", Some(128_000)),
            ("o1-mini", Some(128_000)),
            ("o1", Some(200_000)),
            ("o3-mini", Some(200_000)),
            ("o4-mini-2025-04-16", Some(200_000)),
            ("deepseek-chat", Some(128_000)),
            ("deepseek-reasoner", Some(128_000)),
            ("deepseek-v4-flash", Some(1_000_000)),
            ("claude-3-5-sonnet-20241022", Some(200_000)),
            ("claude-3-7-sonnet-latest", Some(200_000)),
            ("claude-opus-4-1-20250805", Some(200_000)),
            ("claude-haiku-4-5", Some(200_000)),
            ("gemini-1.5-pro-002", Some(2_097_152)),
            ("gemini-1.5-flash", Some(1_048_576)),
            ("gemini-2.0-flash-lite", Some(1_048_576)),
            ("gemini-2.5-flash", Some(1_048_576)),
            ("gemini-3-pro-preview", Some(1_048_576)),
            ("gemini-3.1-pro-preview", Some(1_048_576)),
        ];
        for (model, window) in cases {
            assert_eq!(context_window(model), window, "{model}");
        }
    }

    #[test]
    fn ids_are_matched_by_whole_parts_whatever_the_case_and_path() {
        assert_eq!(context_window("models/gemini-2.5-pro"), Some(1_048_576));
        assert_eq!(context_window("openai/GPT-4o"), Some(128_000));
        // A prefix is not a part: no `gpt-50`, `o10`, `o3x` or `claude-30`.
        for model in [
            "gpt-50",
            "o10",
            "o3x",
            "claude-30-sonnet",
            "gpt-4",
            "gpt-4.10",
        ] {
            assert_eq!(context_window(model), None, "{model}");
        }
    }

    #[test]
    fn unknown_and_odd_ids_have_no_window() {
        for model in [
            "",
            "/",
            "sim-model",
            "llama3.1:8b",
            "mistral-large",
            "gemini",
            "ünïcode",
        ] {
            assert_eq!(context_window(model), None, "{model:?}");
        }
    }
}
