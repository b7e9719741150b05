//! The context-strategy benchmark (`cargo xtask bench context`, which runs
//! `cargo run -p context-bench`): how much of a long tool session's input each provider
//! serves from its prompt cache when the session outgrows the context window, per context
//! strategy.
//!
//! The session: a coding agent works 200 tool steps on one task (then answers) against a
//! 32,000-token window. The model is scripted (each simulator answers from a reply script);
//! the tools are local fakes that answer from this repository's real files, so results are
//! the same for every run of one checkout: file reads of 200 B to 12 KB (sizes skewed small,
//! median about 3 KB), grep results, `cargo test` logs (some with a failing test),
//! `cargo check` logs with compiler errors, and error results (a missing file, a command the
//! session does not have). A fifth of the steps make two or three calls at once. The mix is
//! a fixed pseudo-random sequence ([`Rng`] with [`SEED`]).
//!
//! Each provider runs the session through its real adapter, a [`HaloAgent`] with
//! `generate_text`, against a fresh simulator told the window
//! (`set_context_window(32_000)`: a longer request is answered with the provider's
//! context-window error, and the run ends with it): OpenAI (`OpenAiCompatible::openai`) and
//! DeepSeek (`OpenAiCompatible::deepseek`) against `OpenAiSim`, Anthropic
//! (`AnthropicAdapter`) against `AnthropicSim`, Gemini (`GeminiAdapter`, sharing the
//! simulator's clock) against `GeminiSim`. Per provider, one run per strategy:
//! - **ring buffer**: no strategy; the log's capacity (in messages) is the only bound. It is
//!   set as large as the session allows: the most messages whose fullest stretch of the
//!   session fits 90 % of the window ([`Session::ring_capacity`]), so it evicts and stays
//!   inside the window;
//! - **sliding**: [`Sliding`], the naive per-step window: whenever the request is over 80 %
//!   of the window, drop just enough of the oldest units (the task kept);
//! - **truncate**: [`TruncateStrategy::new`], from 90 % down to 60 % in one chunk;
//! - **tiered**: [`TieredStrategy`](halo_strategies::TieredStrategy): eviction in place from 85 %, compaction by the model from 95 % or when eviction cannot get half way (see
//!   [`tiered`]).
//!
//! Then a large-result workload: the model pages through the repository's longest source
//! files a hundred lines a read for 60 steps on a 16,000-token window, so each step adds a
//! large share of the window; Tiered with the coder's marks, its low-water mark fixed and
//! following the session's growth per step, side by side (cached share, rewrites, peak).
//!
//! Columns: the cached share of input tokens (`cache_read_tokens` / `input_tokens` as the
//! adapter reported them, `AgentStats`); history rewrites (`AgentStats::history_rewrites`,
//! the strategy's planned rewrites; for the ring buffer, which plans nothing, the calls whose
//! history head the ledger saw change, each an eviction); the largest request the simulator
//! accepted, in its own token count, against the window; the ledger's busts; compactions
//! made and the cached share of the summary requests (Tiered's; n/a for the others).
//! Then the goal per provider: TruncateStrategy (and Tiered) keep at least 0.85 of input
//! cached. A run that ends in an error (a request over the window) prints the error.
//! Tokens are `o200k_base` for every simulator. Nothing is asserted; it prints figures.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use halo_adapters::anthropic::AnthropicAdapter;
use halo_adapters::gemini::GeminiAdapter;
use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::sim::anthropic::AnthropicSim;
use halo_adapters::sim::gemini::GeminiSim;
use halo_adapters::sim::openai::{OpenAiSim, SimProfile};
use halo_adapters::sim::{SimReply, count_tokens};
use halo_core::context::{self, ContextBudget, ContextPlan};
use halo_core::{
    AgentStats, ContextConfig, ContextStrategy, DynTool, HaloAgent, Message, MessageLog,
    ModelAdapter, StablePrefix, ToolContext, ToolError, ToolOutput, ToolSpec, async_trait,
};
use halo_strategies::TruncateStrategy;
use serde_json::{Value, json};

/// Tool steps of the session (each one model call); one more call answers.
const STEPS: usize = 200;
/// The model's context window, in tokens, told to every simulator and every strategy.
const WINDOW: u64 = 32_000;
/// The goal for TruncateStrategy and Tiered: at least this share of input cached.
const GOAL: f64 = 0.85;
/// The naive sliding window's mark, as a share of the window.
const SLIDING_MARK: f64 = 0.8;
/// How full the ring buffer may get, at its fullest stretch of the session.
const RING_FILL: f64 = 0.9;
/// Smallest and largest file read, in bytes; every tool output is cut at the largest.
const MIN_READ_BYTES: usize = 200;
const MAX_OUTPUT_BYTES: usize = 12_000;
/// The large-result workload: steps, lines per read, and its window (tokens).
const PAGING_STEPS: usize = 60;
const PAGE_LINES: usize = 100;
const PAGING_WINDOW: u64 = 16_000;
/// Its task.
const PAGING_TASK: &str = "Read the longest source files from the top, a hundred lines at a time, \
and say what each part does.";
/// The seed of the session's mix of calls.
const SEED: u64 = 0x5eed_c0de_2026_0012;
/// The task the session works on.
const TASK: &str = "The 200-step session test of TruncateStrategy sometimes reports a request above the \
context window on DeepSeek. Find out why: read the context seam, the strategy, the engine's budget \
and calibration and the simulators' token counts, run the tests, and fix what is wrong.";
/// The model's answer after the last step.
const ANSWER: &str = "The budget is calibrated from the previous call only, so a step that adds \
several large results can pass the window before the factor catches up. The fix estimates the new \
results with the last factor and truncates before the request; the tests pass.";

/// The Tiered strategy's row, as the coder has it: in-place eviction, then compaction by the
/// model (the simulators answer a summary request with a summary without taking a reply from
/// their scripts).
fn tiered() -> Option<Arc<dyn ContextStrategy>> {
    Some(Arc::new(
        halo_strategies::TieredStrategy::default().with_compaction(0.25),
    ))
}

/// Runs the benchmark and prints its table. The tools answer from the repository at the
/// path given as the first argument, by default the workspace this was built in.
///
/// # Errors
/// The repository cannot be read, a simulator cannot bind a loopback port or an adapter
/// cannot be built. A run that fails is reported in the table, not as an error.
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
    let session = Session::new(&root)?;
    let capacity = session.ring_capacity();
    let mut rows = Vec::new();
    for provider in Provider::ALL {
        for strategy in Strategy::ALL {
            let setup = match strategy {
                Strategy::Ring => Some(Setup::Ring(capacity)),
                Strategy::Sliding => Some(Setup::Strategy(Arc::new(Sliding(SLIDING_MARK)))),
                Strategy::Truncate => Some(Setup::Strategy(Arc::new(TruncateStrategy::new()))),
                Strategy::Tiered => tiered().map(Setup::Strategy),
            };
            let figures = match setup {
                Some(setup) => {
                    eprintln!(
                        "bench context: {} / {} ...",
                        provider.name(),
                        strategy.name()
                    );
                    Some(provider.run(&session, &setup).await?)
                }
                None => None,
            };
            rows.push(Row {
                provider,
                strategy,
                figures,
            });
        }
    }
    print!("{}", table(&session, capacity, &rows));
    let paging = Session::paging(&root)?;
    let mut rows = Vec::new();
    for provider in Provider::ALL {
        for (name, strategy) in paging_strategies() {
            eprintln!("bench context: paging, {} / {name} ...", provider.name());
            let figures = provider.run(&paging, &Setup::Strategy(strategy)).await?;
            rows.push((provider, name, figures));
        }
    }
    print!("{}", paging_table(&paging, &rows));
    Ok(())
}

/// The strategies of the large-result workload: Tiered with the coder's marks (evict from
/// 85 %, truncate from 95 %, down to 55 %), its low-water mark fixed, and following the
/// session's growth per step (the default).
fn paging_strategies() -> [(&'static str, Arc<dyn ContextStrategy>); 2] {
    let coder = || halo_strategies::TieredStrategy::new().with_marks(0.85, 0.95, 0.55);
    [
        (
            "tiered, fixed low water",
            Arc::new(coder().room_for_steps(0)),
        ),
        ("tiered, following growth", Arc::new(coder())),
    ]
}

/// The large-result workload's table.
fn paging_table(session: &Session, rows: &[(Provider, &str, Figures)]) -> String {
    let mut out = String::new();
    let results: Vec<ToolOutput> = session.results().into_iter().flatten().collect();
    let tokens: u64 = results.iter().map(|r| count_tokens(&r.content)).sum();
    let _ = writeln!(
        out,
        "\nlarge results: {} reads of {PAGE_LINES} lines through the longest source files ({} tokens in all, {} a read on average) on a {}-token window",
        session.steps.len(),
        group(tokens),
        group(tokens / session.steps.len().max(1) as u64),
        group(session.window),
    );
    let _ = writeln!(
        out,
        "{:<10} {:<26} {:>8} {:>9} {:>14} {:>9}",
        "provider", "strategy", "cached", "rewrites", "peak request", "refused"
    );
    for (provider, name, f) in rows {
        let _ = writeln!(
            out,
            "{:<10} {:<26} {:>8.3} {:>9} {:>7} ({:>3.0}%) {:>9}{}",
            provider.name(),
            name,
            f.cached(),
            f.rewrites(),
            group(f.peak),
            f.peak as f64 * 100.0 / session.window as f64,
            f.rejected,
            f.run
                .error
                .as_ref()
                .map(|e| format!("  error: {e}"))
                .unwrap_or_default()
        );
    }
    out
}

/// The strategies compared, in column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    Ring,
    Sliding,
    Truncate,
    Tiered,
}

impl Strategy {
    const ALL: [Strategy; 4] = [
        Strategy::Ring,
        Strategy::Sliding,
        Strategy::Truncate,
        Strategy::Tiered,
    ];

    fn name(self) -> &'static str {
        match self {
            Strategy::Ring => "ring buffer",
            Strategy::Sliding => "sliding 80%",
            Strategy::Truncate => "truncate",
            Strategy::Tiered => "tiered",
        }
    }

    /// Whether the goal applies to it.
    fn has_goal(self) -> bool {
        matches!(self, Strategy::Truncate | Strategy::Tiered)
    }
}

/// How one run bounds its history.
enum Setup {
    /// No strategy; the log's capacity in messages.
    Ring(usize),
    /// A context strategy on the window.
    Strategy(Arc<dyn ContextStrategy>),
}

/// The naive sliding window: whenever the request is over the mark (a share of the
/// window), drop just enough of the oldest units, the task (the first unit) kept. Once the
/// window is full it rewrites the head of the history on nearly every step. The same as
/// the control in `crates/halo-strategies/tests/it/truncate.rs`.
#[derive(Debug)]
struct Sliding(f64);

impl ContextStrategy for Sliding {
    fn plan(&self, _: &StablePrefix, log: &MessageLog, budget: &ContextBudget<'_>) -> ContextPlan {
        let messages: Vec<&Message> = log.messages().collect();
        let live = context::live_round_start(log);
        let mut plan = ContextPlan::keep();
        let mut used = budget.used_tokens;
        for unit in context::units(log).into_iter().skip(1) {
            if used <= budget.of_window(self.0) || unit.end > live {
                break;
            }
            used = used.saturating_sub(unit.clone().map(|i| budget.tokens(messages[i])).sum());
            plan.drop.extend(unit);
        }
        plan
    }
}

/// The providers, each through its adapter against its simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    OpenAi,
    DeepSeek,
    Anthropic,
    Gemini,
}

impl Provider {
    const ALL: [Provider; 4] = [
        Provider::OpenAi,
        Provider::DeepSeek,
        Provider::Anthropic,
        Provider::Gemini,
    ];

    fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::DeepSeek => "deepseek",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }

    /// One session against a fresh simulator with the session's context window.
    async fn run(self, session: &Session, setup: &Setup) -> anyhow::Result<Figures> {
        match self {
            Provider::OpenAi | Provider::DeepSeek => {
                let profile = if self == Provider::OpenAi {
                    SimProfile::OpenAi
                } else {
                    SimProfile::DeepSeek
                };
                let sim = OpenAiSim::start(profile)
                    .await
                    .context("cannot start the simulator")?;
                sim.set_context_window(Some(session.window));
                sim.set_reply_script(session.script());
                let builder = match profile {
                    SimProfile::OpenAi => OpenAiCompatible::openai("gpt-5-mini"),
                    SimProfile::DeepSeek => OpenAiCompatible::deepseek("deepseek-chat"),
                };
                let model = builder
                    .api_key("sk-bench")
                    .base_url(sim.base_url())
                    .max_retries(0)
                    .build()
                    .context("cannot build the adapter")?;
                let run = session.run(model, setup).await?;
                let records = sim.records();
                let accepted = records.iter().filter(|r| r.status == 200);
                let peak = accepted.map(|r| r.prompt_tokens).max().unwrap_or(0);
                let rejected = records.iter().filter(|r| r.status == 400).count();
                Ok(Figures::new(run, peak, rejected))
            }
            Provider::Anthropic => {
                let sim = AnthropicSim::start()
                    .await
                    .context("cannot start the simulator")?;
                sim.set_context_window(Some(session.window));
                sim.set_reply_script(session.script());
                let model = AnthropicAdapter::builder("claude-sonnet-4-5")
                    .api_key("sk-ant-bench")
                    .base_url(sim.base_url())
                    .max_retries(0)
                    .build()
                    .context("cannot build the adapter")?;
                let run = session.run(model, setup).await?;
                let records = sim.records();
                let accepted = records.iter().filter(|r| r.status == 200);
                let peak = accepted.map(|r| r.total_input_tokens).max().unwrap_or(0);
                let rejected = records.iter().filter(|r| r.status == 400).count();
                Ok(Figures::new(run, peak, rejected))
            }
            Provider::Gemini => {
                let sim = GeminiSim::start()
                    .await
                    .context("cannot start the simulator")?;
                sim.set_context_window(Some(session.window));
                sim.set_reply_script(session.script());
                let model = GeminiAdapter::builder()
                    .model("gemini-2.5-flash")
                    .api_key("bench-key")
                    .base_url(sim.base_url())
                    .clock(sim.clock())
                    .max_retries(0)
                    .build()
                    .context("cannot build the adapter")?;
                let run = session.run(model, setup).await?;
                let records = sim.generate_records();
                let peak = records
                    .iter()
                    .filter_map(|r| r.usage)
                    .map(|u| u.prompt_tokens)
                    .max()
                    .unwrap_or(0);
                let rejected = records.iter().filter(|r| r.status == 400).count();
                Ok(Figures::new(run, peak, rejected))
            }
        }
    }
}

/// What the agent says about one run.
struct Run {
    stats: AgentStats,
    /// Calls whose history head the ledger saw change since the previous call.
    ledger_rewrites: u64,
    /// Messages the log's ring buffer evicted.
    evicted: u64,
    /// Over the calls right after a rewrite, and over the others: (calls, input tokens,
    /// cached tokens), from the ledger's checks.
    after_rewrite: (u64, u64, u64),
    otherwise: (u64, u64, u64),
    /// The run's error, when it did not finish.
    error: Option<String>,
}

/// One run's figures.
struct Figures {
    run: Run,
    /// The largest request the simulator accepted, in its token count.
    peak: u64,
    /// Requests the simulator refused (over the window, or otherwise invalid).
    rejected: usize,
}

impl Figures {
    fn new(run: Run, peak: u64, rejected: usize) -> Self {
        Figures {
            run,
            peak,
            rejected,
        }
    }

    fn cached(&self) -> f64 {
        let s = &self.run.stats;
        if s.input_tokens == 0 {
            0.0
        } else {
            s.cache_read_tokens as f64 / s.input_tokens as f64
        }
    }

    /// Planned rewrites, or for a run without a strategy the unplanned ones the ledger saw.
    fn rewrites(&self) -> u64 {
        self.run
            .stats
            .history_rewrites
            .max(self.run.ledger_rewrites)
    }
}

/// The cached share of the summary requests' input, or n/a without any.
fn summary_cached(stats: &AgentStats) -> String {
    if stats.compaction_input_tokens == 0 {
        "n/a".into()
    } else {
        format!(
            "{:.3}",
            stats.compaction_cache_read_tokens as f64 / stats.compaction_input_tokens as f64
        )
    }
}

/// One row of the table.
struct Row {
    provider: Provider,
    strategy: Strategy,
    /// `None`: the strategy is not built yet.
    figures: Option<Figures>,
}

/// The prefix, the tools and the script of the session, and the window it runs on.
struct Session {
    system: String,
    corpus: Arc<Corpus>,
    steps: Vec<Vec<(&'static str, Value)>>,
    window: u64,
    task: &'static str,
}

impl Session {
    fn new(root: &Path) -> anyhow::Result<Self> {
        let corpus = Corpus::load(root)?;
        let notes = corpus
            .files
            .get("ARCHITECTURE.md")
            .context("no ARCHITECTURE.md (the project notes of the system prompt)")?;
        // The bird's-eye view and halo-core's code map: about 2,000 tokens of notes.
        let notes = notes
            .find("### `crates/halo-adapters`")
            .map_or(notes.as_str(), |end| &notes[..end]);
        let system = format!("{INSTRUCTIONS}\n\n# Project notes (ARCHITECTURE.md)\n\n{notes}");
        let steps = corpus.script();
        Ok(Session {
            system,
            corpus: Arc::new(corpus),
            steps,
            window: WINDOW,
            task: TASK,
        })
    }

    /// The large-result workload: the model pages through the repository's longest source
    /// files, [`PAGE_LINES`] lines a call, for [`PAGING_STEPS`] steps, on a
    /// [`PAGING_WINDOW`]-token window — each step adds a large share of the window.
    fn paging(root: &Path) -> anyhow::Result<Self> {
        let mut session = Session::new(root)?;
        let mut files: Vec<(&String, usize)> = session
            .corpus
            .files
            .iter()
            .filter(|(path, _)| path.ends_with(".rs"))
            .map(|(path, text)| (path, text.lines().count()))
            .collect();
        files.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut steps = Vec::new();
        'files: for (path, lines) in files {
            let mut offset = 1;
            while offset <= lines {
                if steps.len() == PAGING_STEPS {
                    break 'files;
                }
                steps.push(vec![(
                    "read",
                    json!({"path": path, "offset": offset, "limit": PAGE_LINES}),
                )]);
                offset += PAGE_LINES;
            }
        }
        session.steps = steps;
        session.window = PAGING_WINDOW;
        session.task = PAGING_TASK;
        Ok(session)
    }

    /// The model's replies: each step's calls, then the answer.
    fn script(&self) -> Vec<SimReply> {
        let mut replies: Vec<SimReply> = self
            .steps
            .iter()
            .map(|calls| {
                SimReply::ToolCalls(
                    calls
                        .iter()
                        .map(|(name, args)| ((*name).to_string(), args.clone()))
                        .collect(),
                )
            })
            .collect();
        replies.push(SimReply::text(ANSWER));
        replies
    }

    /// Every tool result of the session, step by step.
    fn results(&self) -> Vec<Vec<ToolOutput>> {
        self.steps
            .iter()
            .map(|calls| {
                calls
                    .iter()
                    .map(|(name, args)| self.corpus.answer(name, args))
                    .collect()
            })
            .collect()
    }

    /// The prefix's tokens: the system prompt and the tool specs' JSON.
    fn prefix_tokens(&self) -> u64 {
        let specs: Vec<Value> = Kind::ALL
            .iter()
            .map(|k| serde_json::to_value(k.spec()).unwrap_or_default())
            .collect();
        count_tokens(&self.system) + count_tokens(&Value::Array(specs).to_string())
    }

    /// The ring buffer's capacity in messages: the most for which every stretch of that
    /// many consecutive history messages of the session (the task, each step's call turn
    /// and its results; tokens of their text and arguments plus 12 for framing) fits
    /// [`RING_FILL`] of the window after the prefix.
    fn ring_capacity(&self) -> usize {
        let mut sizes = vec![count_tokens(self.task) + 12];
        for (calls, results) in self.steps.iter().zip(self.results()) {
            sizes.push(
                calls
                    .iter()
                    .map(|(name, args)| count_tokens(name) + count_tokens(&args.to_string()) + 12)
                    .sum::<u64>()
                    + 12,
            );
            sizes.extend(results.iter().map(|r| count_tokens(&r.content) + 12));
        }
        let budget = (self.window as f64 * RING_FILL) as u64 - self.prefix_tokens();
        let fits = |n: usize| sizes.windows(n).all(|w| w.iter().sum::<u64>() <= budget);
        (1..=sizes.len())
            .take_while(|&n| fits(n))
            .last()
            .unwrap_or(1)
    }

    /// Runs the session through `model` with `setup`.
    async fn run<M: ModelAdapter + 'static>(&self, model: M, setup: &Setup) -> anyhow::Result<Run> {
        let steps = self.steps.len();
        let mut builder = HaloAgent::builder(model)
            .system(self.system.clone())
            .max_steps(steps + 5)
            .session_id("bench-context-session");
        for kind in Kind::ALL {
            builder = builder.tool(FakeTool {
                kind,
                corpus: self.corpus.clone(),
            })?;
        }
        builder = match setup {
            Setup::Ring(capacity) => builder.log_capacity(*capacity),
            Setup::Strategy(strategy) => {
                builder.context(ContextConfig::new(strategy.clone(), self.window))
            }
        };
        let mut agent = builder.build();
        let error = match agent.generate_text(self.task).await {
            Ok(out) if out.steps.len() != steps + 1 => Some(format!(
                "the session made {} model calls, not {}",
                out.steps.len(),
                steps + 1
            )),
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        };
        let mut after_rewrite = (0, 0, 0);
        let mut otherwise = (0, 0, 0);
        for check in agent.cache_ledger().checks().skip(1) {
            let sum = if check.history_rewritten {
                &mut after_rewrite
            } else {
                &mut otherwise
            };
            sum.0 += 1;
            sum.1 += check.input_tokens.unwrap_or(0);
            sum.2 += check.observed_cached_tokens.unwrap_or(0);
        }
        Ok(Run {
            after_rewrite,
            otherwise,
            stats: agent.stats(),
            ledger_rewrites: agent
                .cache_ledger()
                .checks()
                .filter(|c| c.history_rewritten)
                .count() as u64,
            evicted: agent.log().evicted(),
            error,
        })
    }
}

/// The session's tools.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Read,
    Grep,
    Bash,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Bash, Kind::Grep, Kind::Read];

    fn spec(self) -> ToolSpec {
        match self {
            Kind::Read => ToolSpec::new("read", READ_DESCRIPTION, read_schema()),
            Kind::Grep => ToolSpec::new("grep", GREP_DESCRIPTION, grep_schema()),
            Kind::Bash => ToolSpec::new("bash", BASH_DESCRIPTION, bash_schema()),
        }
    }
}

/// A local fake of a coding agent's tool, answering from the repository's files.
struct FakeTool {
    kind: Kind,
    corpus: Arc<Corpus>,
}

#[async_trait]
impl DynTool for FakeTool {
    fn spec(&self) -> ToolSpec {
        self.kind.spec()
    }

    async fn call_json(
        &self,
        arguments: Value,
        _cx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let name = match self.kind {
            Kind::Read => "read",
            Kind::Grep => "grep",
            Kind::Bash => "bash",
        };
        Ok(self.corpus.answer(name, &arguments))
    }
}

/// A small xorshift64* generator: the session's mix is the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// FNV-1a of `text`: a per-command seed, so a command's output depends on it alone.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The repository's `.rs`, `.md` and `.toml` files, read once, by path relative to the root.
struct Corpus {
    files: BTreeMap<String, String>,
}

const CRATES: [&str; 5] = [
    "halo-core",
    "halo-adapters",
    "halo-strategies",
    "halo-sandbox",
    "halo-stream",
];

const GREP_PATTERNS: [&str; 20] = [
    "ContextPlan",
    "cache_read_tokens",
    "MessageLog",
    "pub fn ",
    "impl ",
    "async fn ",
    "#[test]",
    "Usage {",
    "history_rewrites",
    "calibration",
    "ToolCall::new",
    "Fingerprint",
    "context_window",
    "expect(",
    "Arc<dyn",
    "HaloError::",
    "live_round_start",
    "set_context_window",
    "prompt_tokens",
    "TruncateStrategy",
];

const GREP_PATHS: [&str; 8] = [
    "crates/halo-core/src",
    "crates/halo-core/src/engine.rs",
    "crates/halo-strategies",
    "crates/halo-adapters/src/sim",
    "crates/halo-adapters/src",
    "crates",
    "docs",
    "xtask/src",
];

const TEST_FILTERS: [&str; 10] = [
    "", "context", "truncate", "engine", "ledger", "session", "openai", "sim", "props", "window",
];

const MISSING_FILES: [&str; 6] = [
    "crates/halo-core/src/budget.rs",
    "crates/halo-strategies/src/tiered.rs",
    "crates/halo-core/src/contex.rs",
    "docs/context.md",
    "crates/halo-adapters/src/sim/deepseek.rs",
    "src/main.rs",
];

const OTHER_COMMANDS: [&str; 5] = [
    "rg -n calibration crates",
    "cat crates/halo-core/src/engine.rs | head -50",
    "python3 -c 'print(32000 * 0.9)'",
    "find . -name '*.rs' -newer Cargo.toml",
    "cargo nextest run -p halo-strategies",
];

impl Corpus {
    fn load(root: &Path) -> anyhow::Result<Self> {
        let mut paths = Vec::new();
        collect_files(root, &mut paths);
        let mut files = BTreeMap::new();
        for path in paths {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let rel = path.strip_prefix(root).unwrap_or(&path);
            files.insert(rel.display().to_string(), text);
        }
        anyhow::ensure!(
            files.len() > 20,
            "found only {} source files under {}",
            files.len(),
            root.display()
        );
        Ok(Corpus { files })
    }

    /// The session's calls, step by step: a fifth of the steps make two or three calls.
    fn script(&self) -> Vec<Vec<(&'static str, Value)>> {
        let mut rng = Rng(SEED);
        (0..STEPS)
            .map(|_| {
                let calls = match rng.below(10) {
                    0 => 3,
                    1 => 2,
                    _ => 1,
                };
                (0..calls).map(|_| self.call(&mut rng)).collect()
            })
            .collect()
    }

    /// One call: reads half the time, then greps, test and check logs, and calls that fail.
    fn call(&self, rng: &mut Rng) -> (&'static str, Value) {
        match rng.below(100) {
            0..50 => ("read", self.read_call(rng)),
            50..70 => (
                "grep",
                json!({"pattern": rng.pick(&GREP_PATTERNS), "path": rng.pick(&GREP_PATHS)}),
            ),
            70..82 => {
                let command = format!(
                    "cargo test -p {} --test it {}",
                    rng.pick(&CRATES),
                    rng.pick(&TEST_FILTERS)
                );
                ("bash", json!({"command": command.trim_end()}))
            }
            82..88 => {
                let command = format!("cargo check -p {} --all-targets", rng.pick(&CRATES));
                ("bash", json!({"command": command}))
            }
            88..94 => ("read", json!({"path": rng.pick(&MISSING_FILES)})),
            _ => ("bash", json!({"command": rng.pick(&OTHER_COMMANDS)})),
        }
    }

    /// A read of a file's lines that comes to a chosen size: 200 B to 12 KB, skewed small
    /// (the square of a uniform draw), from a random line of a file long enough.
    fn read_call(&self, rng: &mut Rng) -> Value {
        let u = rng.unit();
        let target = MIN_READ_BYTES + ((MAX_OUTPUT_BYTES - MIN_READ_BYTES) as f64 * u * u) as usize;
        // `cat -n` adds 8 bytes a line (a 6-wide number, a tab, the newline).
        let numbered = |line: &str| line.len() + 8;
        let long: Vec<(&String, &String)> = self
            .files
            .iter()
            .filter(|(_, text)| text.lines().map(numbered).sum::<usize>() >= target)
            .collect();
        let Some((path, text)) = (if long.is_empty() {
            self.files.iter().max_by_key(|(_, t)| t.len())
        } else {
            Some(*rng.pick(&long))
        }) else {
            return json!({"path": "README.md"});
        };
        let lines: Vec<&str> = text.lines().collect();
        let mut last_start = 0;
        let mut suffix = 0;
        for (i, line) in lines.iter().enumerate().rev() {
            suffix += numbered(line);
            if suffix >= target {
                last_start = i;
                break;
            }
        }
        let start = rng.below(last_start + 1);
        let mut bytes = 0;
        let mut limit = 0;
        for line in &lines[start..] {
            if bytes >= target {
                break;
            }
            bytes += numbered(line);
            limit += 1;
        }
        json!({"path": path, "offset": start + 1, "limit": limit.max(1)})
    }

    /// What tool `name` answers to `args`.
    fn answer(&self, name: &str, args: &Value) -> ToolOutput {
        match name {
            "read" => self.read(args),
            "grep" => self.grep(args),
            _ => self.bash(args),
        }
    }

    /// `read`: lines `offset..offset+limit` (1-based) numbered like `cat -n`.
    fn read(&self, args: &Value) -> ToolOutput {
        let path = str_arg(args, "path");
        let offset = args
            .get("offset")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .max(1) as usize;
        let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(2000) as usize;
        let Some(text) = self.files.get(path) else {
            return ToolOutput::error(format!(
                "no such file: {path}; use grep or `bash ls -l DIR` to find files"
            ));
        };
        let mut out = String::new();
        for (i, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
            let _ = writeln!(out, "{:>6}\t{line}", i + 1);
        }
        if out.is_empty() {
            out = format!(
                "{path} has {} lines; offset {offset} is past the end",
                text.lines().count()
            );
        }
        ToolOutput::text(cap(out))
    }

    /// `grep`: literal matches under `path` as `path:line:text`, in path order, at most 80.
    fn grep(&self, args: &Value) -> ToolOutput {
        let pattern = str_arg(args, "pattern");
        let under = str_arg(args, "path");
        let mut out = String::new();
        let mut matches = 0;
        for (path, text) in self.files.range(under.to_string()..) {
            if !path.starts_with(under) {
                break;
            }
            for (i, line) in text.lines().enumerate() {
                if line.contains(pattern) && matches < 80 {
                    matches += 1;
                    let line: String = line.trim_end().chars().take(160).collect();
                    let _ = writeln!(out, "{path}:{}:{line}", i + 1);
                }
            }
        }
        if matches == 0 {
            return ToolOutput::text(format!("No matches for `{pattern}` under {under}."));
        }
        ToolOutput::text(cap(out))
    }

    /// `bash`: `cargo test` and `cargo check` answered from the repository; anything else
    /// is not available (an error result).
    fn bash(&self, args: &Value) -> ToolOutput {
        let command = str_arg(args, "command");
        let words: Vec<&str> = command.split_whitespace().collect();
        match words.as_slice() {
            ["cargo", "test", "-p", krate, "--test", "it", rest @ ..] => ToolOutput::text(cap(
                self.cargo_test(command, krate, rest.first().copied().unwrap_or("")),
            )),
            ["cargo", "check", "-p", krate, ..] => {
                ToolOutput::text(cap(self.cargo_check(command, krate)))
            }
            _ => ToolOutput::error(format!(
                "`{command}` is not available in this session; use cargo test -p CRATE --test it \
                 [FILTER] or cargo check -p CRATE, and the read and grep tools"
            )),
        }
    }

    /// `cargo test -p CRATE --test it FILTER`: the crate's integration tests whose path
    /// contains the filter; for a third of the commands (by their hash) one of them fails.
    fn cargo_test(&self, command: &str, krate: &str, filter: &str) -> String {
        let dir = format!("crates/{krate}/tests/it/");
        let mut names = Vec::new();
        for (path, text) in self.files.range(dir.clone()..) {
            let Some(module) = path.strip_prefix(&dir) else {
                break;
            };
            let module = module.trim_end_matches(".rs").replace('/', "::");
            let mut is_test = false;
            for line in text.lines().map(str::trim) {
                if line.starts_with("#[test]") || line.starts_with("#[tokio::test") {
                    is_test = true;
                } else if is_test
                    && let Some(rest) = line.strip_prefix("fn ").or(line.strip_prefix("async fn "))
                {
                    let full = format!("{module}::{}", rest.split('(').next().unwrap_or(rest));
                    if full.contains(filter) {
                        names.push(full);
                    }
                    is_test = false;
                }
            }
        }
        let mut rng = Rng(fnv(command) | 1);
        let failing = (rng.below(3) == 0 && !names.is_empty()).then(|| rng.below(names.len()));
        let mut out = format!(
            "   Compiling {krate} v0.1.0 (/work/halo/crates/{krate})\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 14.82s\n     Running tests/it/main.rs (target/debug/deps/it-{:016x})\n\nrunning {} tests\n",
            fnv(krate),
            names.len()
        );
        for (i, name) in names.iter().enumerate() {
            let verdict = if Some(i) == failing { "FAILED" } else { "ok" };
            let _ = writeln!(out, "test {name} ... {verdict}");
        }
        if let Some(i) = failing {
            let name = &names[i];
            let (left, right) = (rng.below(40_000), rng.below(40_000));
            let _ = write!(
                out,
                "\nfailures:\n\n---- {name} stdout ----\n\nthread '{name}' panicked at crates/{krate}/tests/it/{}.rs:{}:{}:\nassertion `left <= right` failed: a request of {left} tokens on a 32000-token window\n  left: {left}\n right: 32000\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n\nfailures:\n    {name}\n\ntest result: FAILED. {} passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 2.{:02}s\n\nerror: test failed, to rerun pass `-p {krate} --test it`\n",
                name.split("::").next().unwrap_or("main"),
                40 + right % 200,
                9 + right % 30,
                names.len() - 1,
                right % 100,
            );
        } else {
            let _ = writeln!(
                out,
                "\ntest result: ok. {} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.{:02}s",
                names.len(),
                rng.below(100)
            );
        }
        out
    }

    /// `cargo check -p CRATE`: one to four compiler errors at real lines of the crate's
    /// sources (chosen by the command's hash), then cargo's summary.
    fn cargo_check(&self, command: &str, krate: &str) -> String {
        const ERRORS: [(&str, &str, &str); 4] = [
            ("E0308", "mismatched types", "expected `u64`, found `usize`"),
            (
                "E0599",
                "no method named `of_window` found for reference `&ContextConfig` in the current scope",
                "method not found in `&ContextConfig`",
            ),
            (
                "E0425",
                "cannot find value `calibration` in this scope",
                "not found in this scope",
            ),
            (
                "E0277",
                "the trait bound `TokenEstimator: Clone` is not satisfied",
                "the trait `Clone` is not implemented for `dyn TokenEstimator`",
            ),
        ];
        let dir = format!("crates/{krate}/src/");
        let sources: Vec<(&String, &String)> = self
            .files
            .range(dir.clone()..)
            .take_while(|(p, _)| p.starts_with(&dir))
            .filter(|(_, t)| t.lines().count() > 10)
            .collect();
        let mut rng = Rng(fnv(command) | 1);
        let mut out = format!(
            "    Checking halo-agent-core v0.1.0 (/work/halo/crates/halo-core)\n    Checking {krate} v0.1.0 (/work/halo/crates/{krate})\n"
        );
        let count = 1 + rng.below(4);
        for _ in 0..count {
            let Some((path, text)) = (!sources.is_empty()).then(|| *rng.pick(&sources)) else {
                break;
            };
            let lines: Vec<&str> = text.lines().collect();
            let n = rng.below(lines.len());
            let (code, title, label) = *rng.pick(&ERRORS);
            let line = lines[n];
            let col = line.len() - line.trim_start().len() + 1;
            let width = line.trim().len().clamp(1, 40);
            let _ = write!(
                out,
                "error[{code}]: {title}\n  --> {path}:{}:{col}\n   |\n{:>3}| {line}\n   | {}{} {label}\n   |\n",
                n + 1,
                n + 1,
                " ".repeat(col - 1),
                "^".repeat(width),
            );
            if let Some(next) = lines.get(n + 1) {
                let _ = writeln!(out, "{:>3}| {next}\n", n + 2);
            }
        }
        let _ = writeln!(
            out,
            "error: could not compile `{krate}` (lib) due to {count} previous error{}",
            if count == 1 { "" } else { "s" }
        );
        out
    }
}

/// `s` cut to at most [`MAX_OUTPUT_BYTES`] on a character boundary, with a note when cut.
fn cap(mut s: String) -> String {
    const NOTE: &str = "\n[output truncated]";
    if s.len() <= MAX_OUTPUT_BYTES {
        return s;
    }
    let mut end = MAX_OUTPUT_BYTES - NOTE.len();
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str(NOTE);
    s
}

fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Files under `dir` (`.rs`, `.md`, `.toml`), skipping `target`, `node_modules` and hidden
/// folders.
fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                collect_files(&path, out);
            }
        } else if path
            .extension()
            .is_some_and(|e| e == "rs" || e == "md" || e == "toml")
        {
            out.push(path);
        }
    }
}

/// The table: per provider, one row per strategy; then the goal per provider.
fn table(session: &Session, capacity: usize, rows: &[Row]) -> String {
    let mut out = String::new();
    let calls: usize = session.steps.iter().map(Vec::len).sum();
    let parallel = session.steps.iter().filter(|s| s.len() > 1).count();
    let results: Vec<ToolOutput> = session.results().into_iter().flatten().collect();
    let errors = results.iter().filter(|r| r.is_error).count();
    let mut sizes: Vec<usize> = results.iter().map(|r| r.content.len()).collect();
    sizes.sort_unstable();
    let _ = writeln!(
        out,
        "\ncontext bench: one session of {STEPS} tool steps ({calls} calls, {parallel} steps with parallel calls), then an answer,\n\
per provider and strategy, through its adapter against its loopback simulator with a {}-token window;\n\
prefix {} tokens (system prompt and 3 tool schemas); o200k_base tokens",
        group(WINDOW),
        group(session.prefix_tokens()),
    );
    if let (Some(min), Some(max)) = (sizes.first(), sizes.last()) {
        let _ = writeln!(
            out,
            "tool results: {} B to {} B, median {} B, {} B in all ({} tokens); {errors} error results",
            group(*min as u64),
            group(*max as u64),
            group(sizes[sizes.len() / 2] as u64),
            group(sizes.iter().sum::<usize>() as u64),
            group(results.iter().map(|r| count_tokens(&r.content)).sum()),
        );
    }
    let _ = writeln!(
        out,
        "ring buffer: log_capacity {capacity} messages (the most whose fullest stretch of the session fits {:.0}% of the window)\n",
        RING_FILL * 100.0
    );
    let _ = writeln!(
        out,
        "{:<9} | {:<11} | {:>6} | {:>8} | {:>21} | {:>5} | {:>11} | {:>14} | run",
        "provider",
        "strategy",
        "cached",
        "rewrites",
        "peak / window",
        "busts",
        "compactions",
        "summary cached"
    );
    let _ = writeln!(out, "{}", "-".repeat(112));
    let mut notes = Vec::new();
    for row in rows {
        let provider = if row.strategy == Strategy::ALL[0] {
            row.provider.name()
        } else {
            ""
        };
        let Some(f) = &row.figures else {
            let _ = writeln!(
                out,
                "{provider:<9} | {:<11} | not built yet (halo_strategies exports no TieredStrategy)",
                row.strategy.name()
            );
            continue;
        };
        let peak = format!(
            "{} / {} ({:.0}%)",
            group(f.peak),
            group(WINDOW),
            f.peak as f64 * 100.0 / WINDOW as f64
        );
        let run = match &f.run.error {
            None => format!("ok, {} calls", f.run.stats.steps),
            Some(_) => format!("FAILED after {} calls", f.run.stats.steps),
        };
        let _ = writeln!(
            out,
            "{provider:<9} | {:<11} | {:>6.3} | {:>8} | {:>21} | {:>5} | {:>11} | {:>14} | {run}",
            row.strategy.name(),
            f.cached(),
            f.rewrites(),
            peak,
            f.run.stats.cache_busts,
            f.run.stats.compactions,
            summary_cached(&f.run.stats),
        );
        if let Some(e) = &f.run.error {
            notes.push(format!(
                "{} / {}: {e} ({} request(s) refused by the simulator)",
                row.provider.name(),
                row.strategy.name(),
                f.rejected
            ));
        }
        if row.strategy == Strategy::Ring && f.run.evicted > 0 {
            notes.push(format!(
                "{} / ring buffer: {} messages evicted",
                row.provider.name(),
                group(f.run.evicted)
            ));
        }
    }
    let _ = writeln!(
        out,
        "\ngoal: TruncateStrategy and Tiered keep >= {GOAL:.2} of input cached on every provider"
    );
    for provider in Provider::ALL {
        let verdicts: Vec<String> = rows
            .iter()
            .filter(|r| r.provider == provider && r.strategy.has_goal())
            .map(|r| match &r.figures {
                None => format!("{} not built yet", r.strategy.name()),
                Some(f) if f.run.error.is_some() => {
                    format!(
                        "{} {:.3} FAILED (the run did not finish)",
                        r.strategy.name(),
                        f.cached()
                    )
                }
                Some(f) => format!(
                    "{} {:.3} {}",
                    r.strategy.name(),
                    f.cached(),
                    if f.cached() >= GOAL {
                        "meets it"
                    } else {
                        "MISSES it"
                    }
                ),
            })
            .collect();
        let _ = writeln!(out, "  {:<9} {}", provider.name(), verdicts.join("; "));
    }
    let _ = writeln!(
        out,
        "\ncached share of the calls right after a rewrite / of the others (the first call left out):"
    );
    for provider in Provider::ALL {
        let parts: Vec<String> = rows
            .iter()
            .filter(|r| r.provider == provider)
            .filter_map(|r| {
                let f = r.figures.as_ref()?;
                let share = |(calls, input, cached): (u64, u64, u64)| {
                    if calls == 0 {
                        "-".to_string()
                    } else {
                        format!("{:.3}", cached as f64 / input.max(1) as f64)
                    }
                };
                Some(format!(
                    "{} {} / {} ({} / {} calls)",
                    r.strategy.name(),
                    share(f.run.after_rewrite),
                    share(f.run.otherwise),
                    f.run.after_rewrite.0,
                    f.run.otherwise.0
                ))
            })
            .collect();
        let _ = writeln!(out, "  {:<9} {}", provider.name(), parts.join("; "));
    }
    if !notes.is_empty() {
        let _ = writeln!(out);
        for note in notes {
            let _ = writeln!(out, "{note}");
        }
    }
    let _ = writeln!(
        out,
        "\ncached: cache_read_tokens / input_tokens over the session's calls, as each adapter reported them.\n\
rewrites: the strategy's planned history rewrites (AgentStats::history_rewrites), each one expected miss; for the\n\
ring buffer, which plans nothing, the calls whose history head the cache ledger saw change (evictions).\n\
peak: the largest request the simulator accepted, in its own token count. busts: calls the ledger flagged as reading\n\
far less than expected. compactions, summary cached: Tiered's summary requests, and the share of their input read\nfrom the cache."
    );
    out
}

/// `1234567` → `1,234,567`.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

const INSTRUCTIONS: &str = "You are a coding agent working in a Rust repository on the user's behalf. You \
read code, run commands, change code and explain what you found. Be precise and terse.

# How to work
- Investigate before you change anything. Read the files that matter instead of guessing from their \
names, and quote paths with line numbers (`path:line`) when you point at code.
- Prefer `grep` to find where something is defined or used, then `read` the surrounding lines. Read only \
the ranges you need: large files are expensive to read whole, and the session is long.
- Use `bash` for tests (`cargo test -p CRATE --test it FILTER`) and builds (`cargo check -p CRATE`). \
Commands run in the repository root; there is no network.
- A failing test or a compiler error is information, not a reason to stop: read it, find the cause, \
and say what you would change.
- When a tool fails, read its message: it says what to do instead. Do not repeat a failing call unchanged.
- Several independent reads may be made in one turn; they run at once.

# Answer style
- Lead with the answer in one or two sentences, then the evidence as a short list.
- Name files and functions exactly. Keep code excerpts under ten lines.
- Say what you did not check. If the evidence is incomplete, say so rather than guess.

# Rust conventions in this repository
- Edition 2024, `cargo clippy -D warnings` clean, every file opens with a `//!` header, public items have \
docs with units and `# Errors` sections.
- Errors are typed with `thiserror` in libraries and `anyhow` only in binaries; bad input never panics.
- Tests assert real values, touch nothing off the machine, and live in one integration-test binary per crate.";

const READ_DESCRIPTION: &str = "Reads a text file of the repository and returns its lines numbered like \
`cat -n` (line number, a tab, the line). Paths are relative to the repository root. By default up to 2000 \
lines from the start are returned; use `offset` (1-based first line) and `limit` (number of lines) to read a \
part of a large file. Output over 12,000 bytes is cut and marked `[output truncated]`. Reading a missing \
file returns an error that says how to find files.";

const GREP_DESCRIPTION: &str = "Searches the repository's `.rs`, `.md` and `.toml` files for a literal \
string (not a regular expression; case-sensitive) and returns matching lines as `path:line:text`, in path \
order, at most 80 matches. `path` limits the search to a folder or a single file (default: the whole \
repository). Lines longer than 160 characters are cut. Use it to find definitions and uses before reading.";

const BASH_DESCRIPTION: &str = "Runs a shell command in the repository root and returns its output. \
Available: `cargo test -p CRATE --test it [FILTER]` and `cargo check -p CRATE`. Other commands return an \
error. Output over 12,000 bytes is cut. There is no network.";

fn read_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the repository root, e.g. `crates/halo-core/src/agent.rs`."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to return, 1-based (default 1)."},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to return (default 2000)."}
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

fn grep_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The literal text to find (case-sensitive)."},
            "path": {"type": "string", "description": "A folder or file to search, relative to the repository root (default: everything)."}
        },
        "required": ["pattern"],
        "additionalProperties": false
    })
}

fn bash_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run in the repository root."},
            "timeout_ms": {"type": "integer", "minimum": 1000, "maximum": 600000, "description": "Time limit in milliseconds (default 120000)."}
        },
        "required": ["command"],
        "additionalProperties": false
    })
}
