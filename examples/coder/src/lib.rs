//! The coding agent's set-up, shared by the `coder` binary and the `model_tasks` example
//! (`cargo xtask bench models`), so the benchmark measures exactly what the demo runs.
//!
//! Every model gets [`SYSTEM`]. The small embedded model also gets only the read-only tools
//! ([`EMBEDDED_TOOLS`]), two worked examples as few-shot turns ([`embedded_examples`]), short
//! answers ([`embedded_options`]) and, in its adapter, `Auto` resolved by the conversation's
//! shape ([`embedded_config`]): [`embedded_agent`] applies all of it. [`approval`] holds the
//! session's safety hooks and the terminal approval prompt.

pub mod approval;

use std::sync::Arc;

use halo_core::{
    AssistantMessage, DynTool, GenerationOptions, HaloAgentBuilder, HaloError, Message, ToolCall,
    ToolResult,
};

/// The system prompt.
pub const SYSTEM: &str = "You are a coding agent working in a project folder. \
Use the tools to look at files before you answer; paths are relative to the project folder. \
When you know the answer, reply briefly in plain text.";

/// The tools the small embedded model gets: it must not overwrite files it misreads.
pub const EMBEDDED_TOOLS: &[&str] = &["glob", "grep", "ls", "read"];

/// Few-shot turns for the small embedded model: a call, its result and an answer, twice
/// (with one example it copies the example's path).
pub fn embedded_examples() -> Vec<Message> {
    let c1 = ToolCall::new("example_1", "read", r#"{"path":"todo.md"}"#);
    let c2 = ToolCall::new("example_2", "read", r#"{"path":"docs/setup.txt"}"#);
    let calls = |c: &ToolCall| {
        Message::Assistant(AssistantMessage {
            tool_calls: vec![c.clone()],
            ..Default::default()
        })
    };
    vec![
        Message::user("What is in todo.md?"),
        calls(&c1),
        Message::Tool(ToolResult::ok(&c1, "     1\t- fix the login bug")),
        Message::assistant("todo.md says: fix the login bug."),
        Message::user("Read docs/setup.txt and tell me how to install."),
        calls(&c2),
        Message::Tool(ToolResult::ok(&c2, "     1\tRun `make install`.")),
        Message::assistant("To install, run `make install`."),
    ]
}

/// The generation options of the small embedded model: answers of at most 96 tokens.
pub fn embedded_options() -> GenerationOptions {
    GenerationOptions::default().with_max_tokens(96)
}

/// The adapter settings of the small embedded model: it does not decide well by itself when
/// to call a tool, so `Auto` is resolved by the conversation's shape (call a tool right
/// after the user's message, answer after one round of results). Greedy decoding (the
/// default temperature 0), so a task gets the same answer every time.
#[cfg(feature = "local")]
pub fn embedded_config() -> halo_adapters::local::LocalConfig {
    use halo_adapters::local::{AutoToolChoice, LocalConfig};
    LocalConfig::default().with_auto_tool_choice(AutoToolChoice::CallThenAnswer { rounds: 1 })
}

/// Gives `builder` the small embedded model's set-up: [`SYSTEM`], the [`EMBEDDED_TOOLS`] out
/// of `tools`, the few-shot turns and the options.
///
/// # Errors
/// As [`HaloAgentBuilder::tools`].
pub fn embedded_agent(
    builder: HaloAgentBuilder,
    mut tools: Vec<Arc<dyn DynTool>>,
) -> Result<HaloAgentBuilder, HaloError> {
    tools.retain(|t| EMBEDDED_TOOLS.contains(&t.spec().name.as_str()));
    builder
        .system(SYSTEM)
        .few_shot(embedded_examples())
        .options(embedded_options())
        .tools(tools)
}
