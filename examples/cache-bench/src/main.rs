//! The prompt-cache benchmark (`cargo xtask bench cache`, which runs
//! `cargo run -p cache-bench`): how much of a long tool-using session each provider serves
//! from its prompt cache when the requests are built Halo's way, next to a baseline that
//! puts the current date-time in the system prompt.
//!
//! The session: a coding agent investigates this repository in 40 model calls (39 tool
//! calls, then an answer) with a realistic prefix (instructions plus `ARCHITECTURE.md` as
//! project notes, and four tool schemas: about 3,000 tokens). The model is scripted (the
//! provider simulators of `halo_adapters::sim` answer from a reply script); the tools are
//! local fakes that answer from this repository's real files (`read` slices files, `grep`
//! searches them, `bash` answers `ls`, `wc -l`, `cargo test` and a few more from them), so
//! results vary in size from about 200 B to 8 KB and are the same for every run.
//!
//! Each provider runs the session three times through its real adapter, a [`HaloAgent`](halo_core::HaloAgent) with
//! `generate_text` and `max_steps(45)`, against a fresh simulator on loopback: OpenAI
//! (`OpenAiCompatible::openai`, `gpt-5-mini`) and DeepSeek (`OpenAiCompatible::deepseek`)
//! against `OpenAiSim`, Anthropic (`AnthropicAdapter`, `claude-sonnet-4-5`) against
//! `AnthropicSim`, Gemini (`GeminiAdapter`, `gemini-2.5-flash`, sharing the simulator's
//! clock) against `GeminiSim`:
//! - **halo**: the stable prefix and the append-only history as Halo sends them;
//! - **baseline**: the same session, with `Current date and time: …` appended to the system
//!   prompt of every request, the clock advancing 20 s per model call. The baseline wraps
//!   the adapter ([`Clocked`](crate::baseline::Clocked)) and rebuilds the prefix with the time on each call, as agents
//!   that render their system prompt per request do; the agent itself is unchanged, so
//!   both runs carry the same conversation.
//!
//! - **mcp**: Halo's run with an MCP server's tools in the prefix (`mcp.rs`: halo-mcp's
//!   server and client in this process), the server's tool list growing by one tool after
//!   tool call 20; the second table shows the one expected miss it costs and that there is
//!   no bust.
//!
//! OpenAI's Responses API (`ResponsesAdapter`, `gpt-5-mini`, reasoning items on) runs against
//! `ResponsesSim`; GPT-5.6 (which caches at breakpoints and bills writes at 125 %) runs over
//! chat completions in OpenAI's implicit mode and in explicit mode with Halo's breakpoints,
//! and over the Responses API in explicit mode; for those a last table puts the input cost
//! of the runs side by side, with the first call of a new session on the same prefix.
//!
//! Columns: input and cached tokens as the adapter reported them (`AgentStats`), the hit
//! share, the theoretical maximum (per request, the longest token prefix it shares with any
//! earlier request of the session, summed; computed by the simulator from the recorded
//! requests, without minimum or rounding), Halo's cached tokens as a fraction of that
//! maximum (goal at least 0.98), the ledger's cache-bust count, and the cost ratio with
//! cached tokens at 10 % of the uncached price and written tokens where reported (Anthropic's
//! at 125 %, inside input; Gemini's created `cachedContents` at 100 %, a separate call).
//! Tokens are `o200k_base` for every simulator. Nothing is asserted; it prints figures.

mod baseline;
mod mcp;
mod session;
mod table;
mod workspace;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use halo_adapters::anthropic::AnthropicAdapter;
use halo_adapters::gemini::GeminiAdapter;
use halo_adapters::openai::{OpenAiCompatible, PromptCacheMode};
use halo_adapters::responses::ResponsesAdapter;
use halo_adapters::sim::SimReply;
use halo_adapters::sim::anthropic::AnthropicSim;
use halo_adapters::sim::gemini::GeminiSim;
use halo_adapters::sim::openai::{OpenAiSim, SimProfile};
use halo_adapters::sim::responses::ResponsesSim;

use crate::session::{Session, Variant};

/// The reasoning summary the Responses simulator starts every answer with (its reasoning
/// items, with their encrypted content, are replayed on every later request).
const REASONING: &str = "Look at the code that builds the request body before answering.";
use crate::table::{Figures, Row, table};

/// Runs the benchmark and prints its table. The session reads the repository at the path
/// given as the first argument, by default the workspace this example was built in.
///
/// # Errors
/// A simulator cannot bind a loopback port, an adapter cannot be built, or a run fails.
fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let root = std::env::args_os().nth(1).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        PathBuf::from,
    );
    runtime.block_on(run_all(root))
}

async fn run_all(root: PathBuf) -> anyhow::Result<()> {
    let session = Session::new(root)?;
    let mut rows = Vec::new();
    for provider in Provider::ALL {
        eprintln!("bench cache: {} ...", provider.name());
        let halo = provider.run(&session, Variant::Halo).await?;
        let baseline = provider.run(&session, Variant::Baseline).await?;
        let mcp = provider.run(&session, Variant::Mcp).await?;
        rows.push(Row {
            provider,
            halo,
            baseline,
            mcp,
        });
    }
    print!("{}", table(&session, &rows));
    Ok(())
}

/// The providers, each through its adapter against its simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    OpenAi,
    DeepSeek,
    Anthropic,
    Gemini,
    /// OpenAI's Responses API (`gpt-5-mini`, reasoning items replayed).
    Responses,
    /// Chat completions on `gpt-5.6`, OpenAI's implicit breakpoint (nothing sent).
    OpenAi56,
    /// Chat completions on `gpt-5.6`, explicit mode with Halo's breakpoints.
    OpenAi56Explicit,
    /// The Responses API on `gpt-5.6`, explicit mode with Halo's breakpoints.
    Responses56Explicit,
}

impl Provider {
    const ALL: [Provider; 8] = [
        Provider::OpenAi,
        Provider::DeepSeek,
        Provider::Anthropic,
        Provider::Gemini,
        Provider::Responses,
        Provider::OpenAi56,
        Provider::OpenAi56Explicit,
        Provider::Responses56Explicit,
    ];

    fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::DeepSeek => "deepseek",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Responses => "responses",
            Provider::OpenAi56 => "openai-5.6 implicit",
            Provider::OpenAi56Explicit => "openai-5.6 explicit",
            Provider::Responses56Explicit => "responses-5.6 explicit",
        }
    }

    /// Whether the provider bills cache writes (inside the input, at 1.25×).
    fn bills_writes(self) -> bool {
        matches!(
            self,
            Provider::Anthropic
                | Provider::OpenAi56
                | Provider::OpenAi56Explicit
                | Provider::Responses56Explicit
        )
    }

    /// One session against a fresh simulator.
    async fn run(self, session: &Session, variant: Variant) -> anyhow::Result<Figures> {
        match self {
            Provider::OpenAi
            | Provider::DeepSeek
            | Provider::OpenAi56
            | Provider::OpenAi56Explicit => {
                let profile = match self {
                    Provider::DeepSeek => SimProfile::DeepSeek,
                    _ => SimProfile::OpenAi,
                };
                let sim = OpenAiSim::start(profile)
                    .await
                    .context("cannot start the simulator")?;
                sim.set_reply_script(session.script());
                let builder = match self {
                    Provider::DeepSeek => OpenAiCompatible::deepseek("deepseek-chat"),
                    Provider::OpenAi56 => OpenAiCompatible::openai("gpt-5.6"),
                    Provider::OpenAi56Explicit => {
                        OpenAiCompatible::openai("gpt-5.6").prompt_cache(PromptCacheMode::Explicit)
                    }
                    _ => OpenAiCompatible::openai("gpt-5-mini"),
                };
                let model = builder
                    .api_key("sk-bench")
                    .base_url(sim.base_url())
                    .max_retries(0)
                    .build()
                    .context("cannot build the adapter")?;
                let (stats, expected) = session.run(model.clone(), variant).await?;
                let records = sim.records();
                let max = records.iter().map(|r| r.seen_prefix_tokens).sum();
                let mut figures = Figures::new(self, stats, expected, Some(max));
                if variant == Variant::Halo && self != Provider::DeepSeek {
                    sim.set_reply_script([SimReply::text("ok")]);
                    figures.next_session = Some(session.probe(model).await?);
                }
                Ok(figures)
            }
            Provider::Responses | Provider::Responses56Explicit => {
                let sim = ResponsesSim::start()
                    .await
                    .context("cannot start the simulator")?;
                sim.set_reasoning(Some(REASONING.into()));
                sim.set_reply_script(session.script());
                let builder = match self {
                    Provider::Responses => ResponsesAdapter::builder("gpt-5-mini"),
                    _ => {
                        ResponsesAdapter::builder("gpt-5.6").prompt_cache(PromptCacheMode::Explicit)
                    }
                };
                let model = builder
                    .api_key("sk-bench")
                    .base_url(sim.base_url())
                    .max_retries(0)
                    .build()
                    .context("cannot build the adapter")?;
                let (stats, expected) = session.run(model.clone(), variant).await?;
                let records = sim.records();
                let max = records.iter().map(|r| r.seen_prefix_tokens).sum();
                let mut figures = Figures::new(self, stats, expected, Some(max));
                if variant == Variant::Halo {
                    sim.set_reply_script([SimReply::text("ok")]);
                    figures.next_session = Some(session.probe(model).await?);
                }
                Ok(figures)
            }
            Provider::Anthropic => {
                let sim = AnthropicSim::start()
                    .await
                    .context("cannot start the simulator")?;
                sim.set_reply_script(session.script());
                let model = AnthropicAdapter::builder("claude-sonnet-4-5")
                    .api_key("sk-ant-bench")
                    .base_url(sim.base_url())
                    .max_retries(0)
                    .build()
                    .context("cannot build the adapter")?;
                let (stats, expected) = session.run(model, variant).await?;
                let records = sim.records();
                let max = records.iter().map(|r| r.seen_prefix_tokens).sum();
                Ok(Figures::new(self, stats, expected, Some(max)))
            }
            Provider::Gemini => {
                let sim = GeminiSim::start()
                    .await
                    .context("cannot start the simulator")?;
                sim.set_reply_script(session.script());
                let model = GeminiAdapter::builder()
                    .model("gemini-2.5-flash")
                    .api_key("bench-key")
                    .base_url(sim.base_url())
                    .clock(sim.clock())
                    .max_retries(0)
                    .build()
                    .context("cannot build the adapter")?;
                let (stats, expected) = session.run(model, variant).await?;
                let max = sim
                    .generate_records()
                    .iter()
                    .filter_map(|r| r.usage)
                    .map(|u| u.seen_prefix_tokens)
                    .sum();
                Ok(Figures::new(self, stats, expected, Some(max)))
            }
        }
    }
}
