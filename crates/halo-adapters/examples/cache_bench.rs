//! The prompt-cache benchmark (`cargo xtask bench cache`, which runs
//! `cargo run -p halo-adapters --features sim --example cache_bench`): how much of a long tool-using session each provider serves
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
//! Each provider runs the session twice through its real adapter, a [`HaloAgent`] with
//! `generate_text` and `max_steps(45)`, against a fresh simulator on loopback: OpenAI
//! (`OpenAiCompatible::openai`, `gpt-5-mini`) and DeepSeek (`OpenAiCompatible::deepseek`)
//! against `OpenAiSim`, Anthropic (`AnthropicAdapter`, `claude-sonnet-4-5`) against
//! `AnthropicSim`, Gemini (`GeminiAdapter`, `gemini-2.5-flash`, sharing the simulator's
//! clock) against `GeminiSim`:
//! - **halo**: the stable prefix and the append-only history as Halo sends them;
//! - **baseline**: the same session, with `Current date and time: …` appended to the system
//!   prompt of every request, the clock advancing 20 s per model call. The baseline wraps
//!   the adapter ([`Clocked`]) and rebuilds the prefix with the time on each call, as agents
//!   that render their system prompt per request do; the agent itself is unchanged, so
//!   both runs carry the same conversation.
//!
//! Columns: input and cached tokens as the adapter reported them (`AgentStats`), the hit
//! share, the theoretical maximum (per request, the longest token prefix it shares with any
//! earlier request of the session, summed; computed by the simulator from the recorded
//! requests, without minimum or rounding), Halo's cached tokens as a fraction of that
//! maximum (goal at least 0.98), the ledger's cache-bust count, and the cost ratio with
//! cached tokens at 10 % of the uncached price and written tokens where reported (Anthropic's
//! at 125 %, inside input; Gemini's created `cachedContents` at 100 %, a separate call).
//! Tokens are `o200k_base` for every simulator. Nothing is asserted; it prints figures.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;
use async_trait::async_trait;
use halo_adapters::anthropic::AnthropicAdapter;
use halo_adapters::gemini::GeminiAdapter;
use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::sim::SimReply;
use halo_adapters::sim::anthropic::AnthropicSim;
use halo_adapters::sim::gemini::GeminiSim;
use halo_adapters::sim::openai::{OpenAiSim, SimProfile};
use halo_core::{
    AgentStats, DynTool, HaloAgent, ModelAdapter, ModelError, ModelRequest, ModelResponse,
    ToolError, ToolOutput, ToolSpec,
};
use serde_json::{Value, json};

/// Model calls made by the scripted session.
const STEPS: usize = 40;
/// Price of a cached input token relative to an uncached one.
const CACHED_PRICE: f64 = 0.10;
/// Anthropic: price of a token written to the cache (5-minute TTL) relative to an uncached
/// one; the written tokens are part of the request's input.
const ANTHROPIC_WRITE_PRICE: f64 = 1.25;
/// Gemini: price of a token of a created `cachedContents` object (billed like input, in a
/// separate call: the request then reads it as cached). Storage per token-hour is left out.
const GEMINI_WRITE_PRICE: f64 = 1.0;
/// Largest tool output, in bytes.
const MAX_OUTPUT_BYTES: usize = 8_000;
/// The task the session answers.
const TASK: &str = "Find out how the OpenAI-compatible adapter keeps the prompt cache warm across \
tool-calling turns, check that the tests cover it, and summarise any gap you find.";

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
        let halo = provider.run(&session, false).await?;
        let baseline = provider.run(&session, true).await?;
        rows.push((provider, halo, baseline));
    }
    print!("{}", table(&session, &rows));
    Ok(())
}

/// The providers, each through its adapter against its simulator.
#[derive(Debug, Clone, Copy)]
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

    /// One session against a fresh simulator.
    async fn run(self, session: &Session, baseline: bool) -> anyhow::Result<Figures> {
        match self {
            Provider::OpenAi | Provider::DeepSeek => {
                let profile = match self {
                    Provider::OpenAi => SimProfile::OpenAi,
                    _ => SimProfile::DeepSeek,
                };
                let sim = OpenAiSim::start(profile)
                    .await
                    .context("cannot start the simulator")?;
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
                let stats = session.run(model, baseline).await?;
                let records = sim.records();
                let max = records.iter().map(|r| r.seen_prefix_tokens).sum();
                Ok(Figures::new(self, stats, Some(max)))
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
                let stats = session.run(model, baseline).await?;
                let records = sim.records();
                let max = records.iter().map(|r| r.seen_prefix_tokens).sum();
                Ok(Figures::new(self, stats, Some(max)))
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
                let stats = session.run(model, baseline).await?;
                let max = sim
                    .generate_records()
                    .iter()
                    .filter_map(|r| r.usage)
                    .map(|u| u.seen_prefix_tokens)
                    .sum();
                Ok(Figures::new(self, stats, Some(max)))
            }
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Copy)]
struct Figures {
    provider: Provider,
    requests: u64,
    input: u64,
    cached: u64,
    written: u64,
    /// The theoretical maximum of cached tokens, when the simulator records it.
    max: Option<u64>,
    busts: u64,
}

impl Figures {
    fn new(provider: Provider, stats: AgentStats, max: Option<u64>) -> Self {
        Figures {
            provider,
            requests: stats.steps,
            input: stats.input_tokens,
            cached: stats.cache_read_tokens,
            written: stats.cache_write_tokens,
            max,
            busts: stats.cache_busts,
        }
    }

    /// Input cost in uncached-token equivalents: cached tokens at [`CACHED_PRICE`], written
    /// ones at the provider's write price.
    fn cost(&self) -> f64 {
        let cached = self.cached as f64 * CACHED_PRICE;
        let written = self.written as f64;
        match self.provider {
            // Anthropic's normalized input holds the writes: take them out of the full-price part.
            Provider::Anthropic => {
                let uncached = self.input.saturating_sub(self.cached + self.written);
                uncached as f64 + cached + written * ANTHROPIC_WRITE_PRICE
            }
            // Gemini's writes are a separate create call; the request reads them as cached.
            Provider::Gemini => {
                (self.input - self.cached.min(self.input)) as f64
                    + cached
                    + written * GEMINI_WRITE_PRICE
            }
            Provider::OpenAi | Provider::DeepSeek => {
                (self.input - self.cached.min(self.input)) as f64 + cached
            }
        }
    }

    fn hit(&self) -> f64 {
        ratio(self.cached, self.input)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The prefix, tools and script of the session.
struct Session {
    system: String,
    workspace: Arc<Workspace>,
    calls: Vec<(&'static str, Value)>,
}

impl Session {
    fn new(root: PathBuf) -> anyhow::Result<Self> {
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
    fn script(&self) -> Vec<SimReply> {
        let mut replies: Vec<SimReply> = self
            .calls
            .iter()
            .map(|(name, args)| SimReply::tool_call(*name, args.clone()))
            .collect();
        replies.push(SimReply::text(ANSWER));
        replies
    }

    /// The byte size of each tool result of the session.
    fn result_sizes(&self) -> Vec<usize> {
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

    /// Runs the session through `model`; with `baseline`, through [`Clocked`].
    async fn run<M: ModelAdapter + 'static>(
        &self,
        model: M,
        baseline: bool,
    ) -> anyhow::Result<AgentStats> {
        let builder = if baseline {
            HaloAgent::builder(Clocked::new(model))
        } else {
            HaloAgent::builder(model)
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
        let mut agent = builder.build();
        let out = agent.generate_text(TASK).await?;
        anyhow::ensure!(
            out.steps.len() == STEPS,
            "the session made {} model calls, not {STEPS}",
            out.steps.len()
        );
        Ok(out.stats)
    }
}

/// The baseline: the inner adapter, with the current date-time appended to the system
/// prompt of every request. The clock starts at 2026-03-02T09:14:05Z and advances 20 s per
/// call, as a real session's would.
struct Clocked<M> {
    inner: M,
    calls: AtomicU64,
}

impl<M> Clocked<M> {
    fn new(inner: M) -> Self {
        Clocked {
            inner,
            calls: AtomicU64::new(0),
        }
    }
}

/// `2026-03-02T09:14:05Z` plus `seconds` (within the day).
fn clock(seconds: u64) -> String {
    let t = 9 * 3600 + 14 * 60 + 5 + seconds;
    format!(
        "2026-03-02T{:02}:{:02}:{:02}Z",
        t / 3600 % 24,
        t / 60 % 60,
        t % 60
    )
}

#[async_trait]
impl<M: ModelAdapter> ModelAdapter for Clocked<M> {
    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn capabilities(&self) -> halo_core::ModelCapabilities {
        self.inner.capabilities()
    }

    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let mut prefix = request.prefix.clone();
        prefix.set_system(format!(
            "{}\n\nCurrent date and time: {}",
            request.prefix.system(),
            clock(20 * n)
        ));
        let mut request = request;
        request.prefix = &prefix;
        self.inner.generate(request).await
    }
}

/// The repository the fake tools answer from.
struct Workspace {
    root: PathBuf,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Read,
    Grep,
    Bash,
    Edit,
}

/// A local fake of a coding agent's tool, answering from the repository's files.
struct FakeTool {
    kind: Kind,
    workspace: Arc<Workspace>,
}

#[async_trait]
impl DynTool for FakeTool {
    fn spec(&self) -> ToolSpec {
        match self.kind {
            Kind::Read => ToolSpec::new("read", READ_DESCRIPTION, read_schema()),
            Kind::Grep => ToolSpec::new("grep", GREP_DESCRIPTION, grep_schema()),
            Kind::Bash => ToolSpec::new("bash", BASH_DESCRIPTION, bash_schema()),
            Kind::Edit => ToolSpec::new("edit", EDIT_DESCRIPTION, edit_schema()),
        }
    }

    async fn call_json(&self, arguments: Value) -> Result<ToolOutput, ToolError> {
        let ws = &self.workspace;
        let out = match self.kind {
            Kind::Read => ws.read(&arguments),
            Kind::Grep => ws.grep(&arguments),
            Kind::Bash => ws.bash(&arguments),
            Kind::Edit => ToolOutput::error(
                "this session is read-only: describe the change in your answer instead",
            ),
        };
        Ok(out)
    }
}

/// `s` cut to at most `max` bytes on a character boundary, with a note when cut.
fn cap(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    const NOTE: &str = "\n[output truncated]";
    let mut end = max - NOTE.len();
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

impl Workspace {
    /// `read`: lines `offset..offset+limit` (1-based) numbered like `cat -n`.
    fn read(&self, args: &Value) -> ToolOutput {
        let path = str_arg(args, "path");
        let offset = args
            .get("offset")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .max(1) as usize;
        let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(2000) as usize;
        let Ok(text) = std::fs::read_to_string(self.root.join(path)) else {
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
        ToolOutput::text(cap(out, MAX_OUTPUT_BYTES))
    }

    /// `grep`: literal matches in `.rs`, `.md` and `.toml` files under `path`, as
    /// `path:line:text`, in path order.
    fn grep(&self, args: &Value) -> ToolOutput {
        let pattern = str_arg(args, "pattern");
        let under = match str_arg(args, "path") {
            "" => ".",
            p => p,
        };
        if pattern.is_empty() {
            return ToolOutput::error("pattern is empty; give the text to search for");
        }
        let mut files = Vec::new();
        collect_files(&self.root.join(under), &mut files);
        let mut out = String::new();
        let mut matches = 0;
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let rel = file
                .strip_prefix(&self.root)
                .unwrap_or(&file)
                .display()
                .to_string();
            for (i, line) in text.lines().enumerate() {
                if line.contains(pattern) && matches < 80 {
                    matches += 1;
                    let line: String = line.trim_end().chars().take(160).collect();
                    let _ = writeln!(out, "{rel}:{}:{line}", i + 1);
                }
            }
        }
        if matches == 0 {
            return ToolOutput::text(format!("No matches for `{pattern}` under {under}."));
        }
        ToolOutput::text(cap(out, MAX_OUTPUT_BYTES))
    }

    /// `bash`: the few commands the session runs, answered from the repository.
    fn bash(&self, args: &Value) -> ToolOutput {
        let command = str_arg(args, "command");
        let words: Vec<&str> = command.split_whitespace().collect();
        let out = match words.as_slice() {
            ["ls", "-l", dir] => self.ls(dir),
            ["wc", "-l", pattern] => self.wc(pattern),
            ["cargo", "test", "-p", krate, "--test", "it", rest @ ..] => {
                self.cargo_test(krate, rest.first().copied().unwrap_or(""))
            }
            ["cargo", "clippy", "-p", krate, ..] => format!(
                "    Checking halo-core v0.1.0 (/work/halo/crates/halo-core)\n    Checking {krate} v0.1.0 (/work/halo/crates/{krate})\n    Finished `dev` profile [unoptimized + debuginfo] target(s) in 7.31s\n"
            ),
            ["git", "log", ..] => GIT_LOG.to_string(),
            _ => {
                return ToolOutput::error(format!(
                    "`{command}` is not available in this session; use ls -l, wc -l, cargo test, cargo clippy or git log"
                ));
            }
        };
        ToolOutput::text(cap(out, MAX_OUTPUT_BYTES))
    }

    fn ls(&self, dir: &str) -> String {
        let mut entries: Vec<(String, u64, bool)> = std::fs::read_dir(self.root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((
                    e.file_name().to_string_lossy().into_owned(),
                    meta.len(),
                    meta.is_dir(),
                ))
            })
            .collect();
        entries.sort();
        let mut out = format!("total {}\n", entries.len());
        for (name, len, is_dir) in entries {
            let mode = if is_dir { "drwxr-xr-x" } else { "-rw-r--r--" };
            let _ = writeln!(out, "{mode} 1 dev dev {len:>8} Mar  2 09:00 {name}");
        }
        out
    }

    /// `wc -l DIR/*.EXT`.
    fn wc(&self, pattern: &str) -> String {
        let (dir, ext) = pattern.rsplit_once("/*.").unwrap_or((pattern, "rs"));
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        files.sort();
        let mut total = 0;
        let mut out = String::new();
        for file in files {
            let lines = std::fs::read_to_string(&file)
                .map(|t| t.lines().count())
                .unwrap_or(0);
            total += lines;
            let rel = file
                .strip_prefix(&self.root)
                .unwrap_or(&file)
                .display()
                .to_string();
            let _ = writeln!(out, "{lines:>6} {rel}");
        }
        let _ = writeln!(out, "{total:>6} total");
        out
    }

    /// `cargo test -p CRATE --test it FILTER`: the crate's integration tests whose path
    /// contains the filter, all passing.
    fn cargo_test(&self, krate: &str, filter: &str) -> String {
        let dir = self.root.join("crates").join(krate).join("tests/it");
        let mut files = Vec::new();
        collect_files(&dir, &mut files);
        let mut names = Vec::new();
        for file in files {
            let module = file
                .strip_prefix(&dir)
                .unwrap_or(&file)
                .with_extension("")
                .display()
                .to_string()
                .replace('/', "::");
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let mut is_test = false;
            for line in text.lines() {
                let line = line.trim();
                if line.starts_with("#[test]") || line.starts_with("#[tokio::test") {
                    is_test = true;
                } else if is_test
                    && let Some(rest) = line.strip_prefix("fn ").or(line.strip_prefix("async fn "))
                {
                    let name = rest.split('(').next().unwrap_or(rest);
                    let full = format!("{module}::{name}");
                    if full.contains(filter) {
                        names.push(full);
                    }
                    is_test = false;
                }
            }
        }
        let mut out = format!(
            "    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.41s\n     Running tests/it/main.rs (target/debug/deps/it-5f2c9a1e7b3d8c04)\n\nrunning {} tests\n",
            names.len()
        );
        for name in &names {
            let _ = writeln!(out, "test {name} ... ok");
        }
        let _ = writeln!(
            out,
            "\ntest result: ok. {} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.42s",
            names.len()
        );
        out
    }
}

/// Files under `dir` (`.rs`, `.md`, `.toml`), sorted, skipping `target`, `node_modules` and
/// hidden folders.
fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return;
    }
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

/// The table: one row per provider, Halo's run beside the baseline's.
fn table(session: &Session, rows: &[(Provider, Figures, Figures)]) -> String {
    let mut out = String::new();
    let prefix_tokens = halo_adapters::sim::count_tokens(&session.system);
    let _ = writeln!(
        out,
        "\ncache bench: one {STEPS}-call session ({} tool calls, then an answer) per provider, through its adapter, against its loopback cache simulator; system prompt {} tokens + 4 tool schemas; o200k_base tokens",
        session.calls.len(),
        group(prefix_tokens)
    );
    let mut sizes = session.result_sizes();
    sizes.sort_unstable();
    if let (Some(min), Some(max)) = (sizes.first(), sizes.last()) {
        let _ = writeln!(
            out,
            "tool results: {} B to {} B, median {} B, {} B in all\n",
            group(*min as u64),
            group(*max as u64),
            group(sizes[sizes.len() / 2] as u64),
            group(sizes.iter().sum::<usize>() as u64)
        );
    }
    let _ = writeln!(
        out,
        "{:<9} | {:^46} | {:^39} |",
        "", "halo: stable prefix", "baseline: date-time in system prompt"
    );
    let _ = writeln!(
        out,
        "{:<9} | {:>9} {:>9} {:>6} {:>6} {:>6} {:>5} | {:>9} {:>9} {:>6} {:>6} {:>5} | {:>6}",
        "provider",
        "input",
        "cached",
        "hit",
        "max",
        "of max",
        "busts",
        "input",
        "cached",
        "hit",
        "of max",
        "busts",
        "cost x"
    );
    let _ = writeln!(out, "{}", "-".repeat(109));
    let mut notes = Vec::new();
    for (provider, halo, base) in rows {
        let (max_share, of_max, base_of_max) = match halo.max {
            Some(max) => (
                pct(ratio(max, halo.input)),
                format!("{:.3}", ratio(halo.cached, max)),
                format!("{:.3}", ratio(base.cached, max)),
            ),
            None => ("n/a".into(), "n/a".into(), "n/a".into()),
        };
        let _ = writeln!(
            out,
            "{:<9} | {:>9} {:>9} {:>6} {:>6} {:>6} {:>5} | {:>9} {:>9} {:>6} {:>6} {:>5} | {:>6}",
            provider.name(),
            group(halo.input),
            group(halo.cached),
            pct(halo.hit()),
            max_share,
            of_max,
            halo.busts,
            group(base.input),
            group(base.cached),
            pct(base.hit()),
            base_of_max,
            base.busts,
            format!("{:.2}", base.cost() / halo.cost()),
        );
        if halo.written > 0 || base.written > 0 {
            let how = match provider {
                Provider::Gemini => format!(
                    "cachedContents created, a separate call at {:.0}%",
                    GEMINI_WRITE_PRICE * 100.0
                ),
                _ => format!("part of input, at {:.0}%", ANTHROPIC_WRITE_PRICE * 100.0),
            };
            notes.push(format!(
                "{}: tokens written to the cache ({how}): halo {}, baseline {}",
                provider.name(),
                group(halo.written),
                group(base.written)
            ));
        }
        if halo.requests != STEPS as u64 || base.requests != STEPS as u64 {
            let _ = writeln!(
                out,
                "  note: {} made {} / {} calls",
                provider.name(),
                halo.requests,
                base.requests
            );
        }
    }
    for note in notes {
        let _ = writeln!(out, "{note}");
    }
    let _ = writeln!(
        out,
        "\ninput, cached: tokens summed over the {STEPS} requests, as the adapter reported them; hit = cached / input.\n\
max: the theoretical maximum, every token of a request already sent in an earlier request of the session (longest\n\
common token prefix, no minimum, no rounding), as a share of input; of max = cached / that maximum (halo's goal: >= 0.98;\n\
deepseek can pass 1.0: it also caches the answers it generated). The baseline's \"of max\" is against the same maximum.\n\
busts: calls Halo's cache ledger flagged as reading far less than expected.\n\
cost x: the baseline's input cost over halo's, cached tokens at {:.0}% of the uncached price, written tokens as noted\n\
(Gemini's storage per token-hour left out).",
        CACHED_PRICE * 100.0,
    );
    out
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
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

/// The 39 tool calls of the session: an investigation of the OpenAI-compatible adapter's
/// cache handling, reading and searching this repository.
fn script_calls() -> Vec<(&'static str, Value)> {
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

const ANSWER: &str = "The OpenAI-compatible adapter keeps the cache warm in three ways: the system message, \
few-shot turns and `tools` come from the StablePrefix and are serialized byte-identically on every request; the \
history is append-only and tool-call arguments are replayed byte for byte; and on OpenAI `prompt_cache_key` is the \
session id (else the prefix fingerprint), so every turn of a session is routed to the same cache. DeepSeek gets \
`reasoning_content` on every assistant turn so replayed history never changes. The loopback tests pin all of this \
on every recorded body. Gap: nothing checks that `max_completion_tokens` stays constant across a session, which an \
unverified report says can split DeepSeek's cache; a test could pin it.";

const INSTRUCTIONS: &str = "You are a coding agent working in a Rust repository on the user's behalf. You \
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

const READ_DESCRIPTION: &str = "Reads a text file of the repository and returns its lines numbered like \
`cat -n` (line number, a tab, the line). Paths are relative to the repository root. By default up to 2000 \
lines from the start are returned; use `offset` (1-based first line) and `limit` (number of lines) to read a \
part of a large file. Output over 8,000 bytes is cut and marked `[output truncated]`. Reading a missing file \
returns an error that says how to find files.";

const GREP_DESCRIPTION: &str = "Searches the repository's `.rs`, `.md` and `.toml` files for a literal \
string (not a regular expression; case-sensitive) and returns matching lines as `path:line:text`, in path \
order, at most 80 matches. `path` limits the search to a folder or a single file (default: the whole \
repository). Lines longer than 160 characters are cut. Use it to find definitions and uses before reading.";

const BASH_DESCRIPTION: &str = "Runs a shell command in the repository root and returns its output. \
Available: `ls -l DIR`, `wc -l DIR/*.EXT`, `cargo test -p CRATE --test it [FILTER]`, `cargo clippy -p CRATE`, \
`git log --oneline -n N`. Other commands return an error. Output over 8,000 bytes is cut. There is no network \
and no write access.";

const EDIT_DESCRIPTION: &str = "Replaces exactly one occurrence of `old_string` with `new_string` in a file. \
`old_string` must match the file's text exactly, including whitespace, and must occur once; include enough \
context to make it unique. Use `replace_all` to change every occurrence. Refused in read-only sessions.";

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

fn edit_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the repository root."},
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The replacement text."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": false
    })
}

const GIT_LOG: &str = "\
bf30ef3 Fixes from a fresh-clone trial: redact the API key before cutting error excerpts
218089c halo-adapters openai: first_event_timeout bounds the wait for a stream's first event
3b33278 xtask ci runs interop (ai npm client and headless Chromium) before nextest
636ddee xtask interop: run npm ci again when a lock file is newer than what node_modules holds
1592c4b cargo xtask bench sse: decode throughput of the SSE layer + chunk assembly
3724d18 Enable reqwest's stream feature (bytes_stream for the SSE layer) and lock sseer
335bd4e halo-adapters: streaming for the OpenAI-compatible adapter over a shared SSE layer
c926ea3 halo-stream: agent runs as the AI SDK UI Message Stream (v1)
099e9d2 ARCHITECTURE: the streaming run loop and its invariants
bcb3207 examples/coder streams through stream_text
067cff1 LocalAdapter streams: answer text token by token through ModelStreamEvent
d293c0a halo-core streaming: ModelAdapter::stream (default from generate), ModelStreamEvent
385ae2d halo-core: test the GenAI tracing spans and attributes
52645aa docs: cache-first requests and the embedded model
60ad532 Demo on the embedded model: CallThenAnswer, read-only tools and two worked examples
";
