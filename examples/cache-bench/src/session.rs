//! The session: its prefix, tools and reply script, run through one adapter.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use halo_adapters::sim::SimReply;
use halo_core::{AgentStats, HaloAgent, ModelAdapter};
use serde_json::{Value, json};

use crate::baseline::Clocked;
use crate::mcp::DocsServer;
use crate::workspace::{FakeTool, Kind, Workspace};

/// Model calls made by the scripted session.
pub(crate) const STEPS: usize = 40;
/// Largest tool output, in bytes.
pub(crate) const MAX_OUTPUT_BYTES: usize = 8_000;
/// The task the session answers.
pub(crate) const TASK: &str = "Find out how the OpenAI-compatible adapter keeps the prompt cache warm across \
tool-calling turns, check that the tests cover it, and summarise any gap you find.";

/// The prefix, tools and script of the session.
pub(crate) struct Session {
    pub(crate) system: String,
    pub(crate) workspace: Arc<Workspace>,
    pub(crate) calls: Vec<(&'static str, Value)>,
}

impl Session {
    pub(crate) fn new(root: PathBuf) -> anyhow::Result<Self> {
        let notes = std::fs::read_to_string(root.join("ARCHITECTURE.md"))
            .context("cannot read ARCHITECTURE.md (the project notes of the system prompt)")?;
        let system = format!("{INSTRUCTIONS}\n\n# Project notes (ARCHITECTURE.md)\n\n{notes}");
        Ok(Session {
            system,
            workspace: Arc::new(Workspace { root }),
            calls: script_calls(),
        })
    }

    /// The model's replies: one tool call per step, then the answer.
    pub(crate) fn script(&self) -> Vec<SimReply> {
        let mut replies: Vec<SimReply> = self
            .calls
            .iter()
            .map(|(name, args)| SimReply::tool_call(*name, args.clone()))
            .collect();
        replies.push(SimReply::text(ANSWER));
        replies
    }

    /// The byte size of each tool result of the session.
    pub(crate) fn result_sizes(&self) -> Vec<usize> {
        self.calls
            .iter()
            .map(|(name, args)| {
                let out = match *name {
                    "read" => self.workspace.read(args),
                    "grep" => self.workspace.grep(args),
                    _ => self.workspace.bash(args),
                };
                out.content.len()
            })
            .collect()
    }

    /// Runs the session through `model` as `variant`: the counters and the ledger's count of
    /// expected misses.
    pub(crate) async fn run<M: ModelAdapter + 'static>(
        &self,
        model: M,
        variant: Variant,
    ) -> anyhow::Result<(AgentStats, usize)> {
        let builder = match variant {
            Variant::Baseline => HaloAgent::builder(Clocked::new(model)),
            Variant::Halo | Variant::Mcp => HaloAgent::builder(model),
        };
        let mut builder = builder
            .system(self.system.clone())
            .max_steps(STEPS + 5)
            .session_id("bench-cache-session");
        for kind in [Kind::Bash, Kind::Edit, Kind::Grep, Kind::Read] {
            builder = builder.tool(FakeTool {
                kind,
                workspace: self.workspace.clone(),
            })?;
        }
        let docs = match variant {
            Variant::Mcp => {
                let docs = DocsServer::start().await?;
                builder = builder.tool_source(docs.tool_source()).hook(docs.trigger());
                Some(docs)
            }
            Variant::Halo | Variant::Baseline => None,
        };
        let mut agent = builder.build();
        let out = agent.generate_text(TASK).await;
        if let Some(docs) = docs {
            docs.shutdown().await;
        }
        let out = out?;
        anyhow::ensure!(
            out.steps.len() == STEPS,
            "the session made {} model calls, not {STEPS}",
            out.steps.len()
        );
        Ok((out.stats, agent.cache_ledger().expected_misses()))
    }
}

impl Session {
    /// The first call of a new session with the same prefix on `model` (another task, a
    /// fresh history): its input and cached tokens, the simulator having served the
    /// 40-call session before.
    pub(crate) async fn probe<M: ModelAdapter + 'static>(
        &self,
        model: M,
    ) -> anyhow::Result<(u64, u64)> {
        let mut builder = HaloAgent::builder(model)
            .system(self.system.clone())
            .session_id("bench-cache-session");
        for kind in [Kind::Bash, Kind::Edit, Kind::Grep, Kind::Read] {
            builder = builder.tool(FakeTool {
                kind,
                workspace: self.workspace.clone(),
            })?;
        }
        let out = builder
            .build()
            .generate_text("What does README.md say?")
            .await?;
        Ok((out.stats.input_tokens, out.stats.cache_read_tokens))
    }
}

/// How a session is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    /// The stable prefix and the append-only history.
    Halo,
    /// The date-time appended to every request's system prompt ([`Clocked`]).
    Baseline,
    /// As `Halo`, with an MCP server's tools in the prefix and its tool list changing once,
    /// after [`CHANGE_AFTER`](crate::mcp::CHANGE_AFTER) tool calls ([`crate::mcp`]).
    Mcp,
}

/// The 39 tool calls of the session: an investigation of the OpenAI-compatible adapter's
/// cache handling, reading and searching this repository.
pub(crate) fn script_calls() -> Vec<(&'static str, Value)> {
    let read = |path: &str, offset: u64, limit: u64| {
        (
            "read",
            json!({"path": path, "offset": offset, "limit": limit}),
        )
    };
    let grep = |pattern: &str, path: &str| ("grep", json!({"pattern": pattern, "path": path}));
    let bash = |command: &str| ("bash", json!({"command": command}));
    vec![
        grep("prompt_cache_key", "crates"),
        read("crates/halo-adapters/src/openai/request.rs", 1, 120),
        read("crates/halo-adapters/src/openai/request.rs", 180, 90),
        grep("cache_read_tokens", "crates/halo-core/src"),
        read("crates/halo-core/src/model.rs", 1, 140),
        read("crates/halo-core/src/prefix.rs", 1, 200),
        bash("ls -l crates/halo-adapters/src/openai"),
        read("crates/halo-adapters/src/openai/response.rs", 100, 60),
        grep("fn usage", "crates/halo-adapters/src"),
        read("crates/halo-adapters/src/openai/stream.rs", 1, 150),
        bash("cargo test -p halo-adapters --test it openai"),
        read("crates/halo-core/src/agent.rs", 1, 100),
        grep("fingerprint", "crates/halo-core/src/agent.rs"),
        read("crates/halo-core/src/agent.rs", 280, 160),
        read("crates/halo-core/src/log.rs", 1, 120),
        grep("fn push", "crates/halo-core/src"),
        bash("wc -l crates/halo-core/src/*.rs"),
        read("docs/cache-first.md", 1, 80),
        read("crates/halo-adapters/src/openai/config.rs", 200, 120),
        grep("session_id", "crates/halo-adapters"),
        read("crates/halo-adapters/src/sse.rs", 1, 80),
        bash("git log --oneline -n 15"),
        read("crates/halo-core/src/message.rs", 140, 100),
        grep("replay_arguments", "crates"),
        read("crates/halo-adapters/tests/it/openai.rs", 80, 60),
        bash("cargo test -p halo-core --test it"),
        read("crates/halo-core/src/tool.rs", 160, 140),
        grep("is_error", "crates/halo-core/src/tool.rs"),
        read("crates/halo-adapters/src/openai/error.rs", 1, 90),
        bash("ls -l crates/halo-core/src"),
        read("crates/halo-adapters/src/sim.rs", 1, 60),
        grep("Usage {", "crates/halo-adapters/src"),
        read("crates/halo-core/src/prefix.rs", 200, 100),
        bash("cargo clippy -p halo-adapters -- -D warnings"),
        read("README.md", 1, 40),
        grep("DEFAULT_LOG_CAPACITY", "crates"),
        read("crates/halo-adapters/src/openai.rs", 1, 60),
        bash("wc -l crates/halo-adapters/src/openai/*.rs"),
        read("crates/halo-core/src/error.rs", 1, 80),
    ]
}

pub(crate) const ANSWER: &str = "The OpenAI-compatible adapter keeps the cache warm in three ways: the system message, \
few-shot turns and `tools` come from the StablePrefix and are serialized byte-identically on every request; the \
history is append-only and tool-call arguments are replayed byte for byte; and on OpenAI `prompt_cache_key` is the \
session id (else the prefix fingerprint), so every turn of a session is routed to the same cache. DeepSeek gets \
`reasoning_content` on every assistant turn so replayed history never changes. The loopback tests pin all of this \
on every recorded body. Gap: nothing checks that `max_completion_tokens` stays constant across a session, which an \
unverified report says can split DeepSeek's cache; a test could pin it.";

pub(crate) const INSTRUCTIONS: &str = "You are a coding agent working in a Rust repository on the user's behalf. You \
read code, run commands and explain what you found. Be precise and terse.

# How to work
- Investigate before you answer. Read the files that matter instead of guessing from their names, and quote \
paths with line numbers (`path:line`) when you point at code.
- Prefer `grep` to find where something is defined or used, then `read` the surrounding lines. Read only the \
ranges you need: large files are expensive to read whole.
- Use `bash` for listings (`ls -l`), line counts (`wc -l`), tests (`cargo test -p CRATE --test it FILTER`), \
lints (`cargo clippy`) and history (`git log`). Commands run in the repository root; there is no network.
- This session is read-only: `edit` will refuse. Describe changes as a short plan or a diff in your answer.
- When a tool fails, read its message: it says what to do instead. Do not repeat a failing call unchanged.
- Stop when you can answer; do not run tools for the sake of it.

# Answer style
- Lead with the answer in one or two sentences, then the evidence as a short list.
- Name files and functions exactly. Keep code excerpts under ten lines.
- Say what you did not check. If the evidence is incomplete, say so rather than guess.

# Rust conventions in this repository
- Edition 2024, `cargo clippy -D warnings` clean, every file opens with a `//!` header, public items have \
docs with units and `# Errors` sections.
- Errors are typed with `thiserror` in libraries and `anyhow` only in binaries; bad input never panics.
- Tests assert real values, touch nothing off the machine, and live in one integration-test binary per crate.";
