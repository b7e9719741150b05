//! `coder`: Halo's main job — a coding agent working in a sandboxed folder.
//!
//! ```text
//! cargo run -p coder -- "TASK" [--dir DIR] [--max-steps N] [--context-window N]
//!                              [--read-only] [--yes] [--session FILE|URL] [--json]
//! cargo run -p coder -- --session FILE|URL --resume [--dir DIR] [...]
//! cargo run -p coder -- mcp-serve [--dir DIR] [--read-only] [--yes] [--http ADDR [--token-file FILE]]
//! ```
//!
//! `mcp-serve` (`serve.rs`) serves the same tools, with the same safety hooks, as an MCP
//! server on stdio or over streamable HTTP, instead of running a task.
//!
//! The command line is `cli.rs` (clap). `--session FILE` journals the conversation into FILE
//! (JSON Lines, `halo_stream::journal::JsonlStore`, every committed step fsynced), and
//! `--session postgres://…` or `redis://…` into a shared store (`store.rs`, which also leases
//! the session so a second coder on it is refused): when the session
//! already holds a conversation, it is restored and TASK is its next user turn; `--resume`
//! (no TASK) continues a run that was interrupted — killed, stopped by `--max-steps`, or
//! failed on a provider error — from its last committed step. `--json` prints every agent
//! event as one JSON line on stdout (`{"type":"text_delta","delta":"…"}`, …, a last
//! `{"type":"finish",…}`) or ends with `{"type":"error","kind":"…","message":"…"}` and exit
//! code 1; the startup lines then go to stderr.
//!
//! The model is picked from the environment, first match wins: `ANTHROPIC_API_KEY`
//! (optional `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`) uses Anthropic; `GEMINI_API_KEY`
//! (optional `GEMINI_BASE_URL`, `GEMINI_MODEL`) Gemini; `DEEPSEEK_API_KEY` (optional
//! `DEEPSEEK_BASE_URL`, `DEEPSEEK_MODEL`) DeepSeek; `OPENAI_API_KEY` (optional
//! `OPENAI_BASE_URL`, `OPENAI_MODEL`) any OpenAI-compatible server; otherwise the embedded
//! model (`HALO_MODEL`, or the file `cargo xtask model` fetches). The agent gets the sandbox's
//! tools (`read`, `write`, `edit`, `ls`, `glob`, `grep`, `bash`) confined to DIR. The run streams
//! (`HaloAgent::stream_text`): the model's text token by token, each tool call as it is
//! decided, its (shortened) result, then a stats line.
//!
//! Long sessions stay inside the model's context window (`coder::strategies`): once a request
//! would pass 85 % of it, old tool output is replaced in place down to 55 %, and from 95 % the
//! older rounds are summarized into one turn (one prompt-cache miss, then hits again), the
//! task kept. The window is `--context-window N`, or
//! the model's documented window (the adapters' per-model table), or 32000; the startup line
//! `context: …` says which. Malformed tool calls are repaired (`BasicRepair`) and a looping
//! model is nudged once, then stopped (`LoopSuppression`).
//!
//! Safety hooks (`approval.rs`): a command denylist, a permission policy and output
//! truncation. By default file edits run and each command asks `[Y]es / [N]o / [Q]uit` on
//! the terminal; `--read-only` allows only reading, `--yes` runs commands without asking.
//! With `--json` the question goes to stderr; when stdin is no terminal (a script) nobody can
//! answer, so commands are denied (the model reads why) unless `--yes` is given.
//! The small embedded model always runs read-only.
//!
//! MCP servers (`mcp.rs`): `DIR/.mcp.json`, `DIR/.agent/mcp.json` and each
//! `--mcp-config FILE` (the `mcpServers` JSON of Claude Desktop / Claude Code) are started
//! before the run and their tools added as `mcp__<server>__<tool>`; a startup line says
//! which started with how many tools and which failed. The project's own servers start only
//! from a configuration the user approved at the terminal, remembered by its hash outside
//! DIR (`coder::approvals`). The small embedded model keeps its small tool set and starts
//! none.
//!
//! The sandbox protects what runs outside it later (`coder::sandbox`): `.git` at any depth,
//! `.mcp.json`, `.agent/mcp.json`, and the `--session` journal, `--mcp-config` files and the
//! approvals folder when they lie inside DIR. Everything printed goes through
//! `coder::terminal`, which shows control characters as text.
//!
//! With a hosted model the coder also loads the harness of DIR (`harness.rs`,
//! `docs/harness.md`): `AGENTS.md`, `CLAUDE.md` and `.agent/rules/*.md`, the last 50 lines
//! of `.agent/memory.md` and the skill catalog of `.agents/skills/` (and `.agent/skills/`,
//! `.claude/skills/`) go into the system prompt, frozen for the session; it offers
//! `load_skill`, `read_skill_file` and `skill_run`; each finished task is appended to the
//! memory file. The startup lines say what was loaded.

mod cli;
mod harness;
mod mcp;
mod model;
mod profile;
mod serve;
mod store;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::bail;

use clap::Parser as _;
use coder::{EMBEDDED_TOOLS, EVICT_AT, LOW_WATER, SYSTEM, TRUNCATE_AT, approval, terminal};
use futures::StreamExt as _;
use halo_adapters::profiles::ProfileFile;
use halo_core::Sandbox;
use halo_core::{AgentEvent, FinishReason, GenerateTextResult, HaloAgent, HaloError, Message};

use crate::cli::Cli;
use crate::model::{Picked, pick_model};

/// At most `max` characters of `s` on one line, with a note of how much was cut.
fn shorten(s: &str, max: usize) -> String {
    let flat = s.replace('\n', "⏎");
    let n = flat.chars().count();
    if n <= max {
        flat
    } else {
        let head: String = flat.chars().take(max).collect();
        format!("{head}… ({} more chars)", n - max)
    }
}

/// Where the human-readable lines go: stdout, or stderr when stdout carries `--json` lines.
#[derive(Debug, Clone, Copy)]
struct Out {
    json: bool,
}

impl Out {
    /// Prints one informational line.
    fn line(self, text: impl std::fmt::Display) {
        if self.json {
            terminal::eline(text);
        } else {
            terminal::line(text);
        }
    }
}

fn print_stats(out: Out, result: &GenerateTextResult, started: Instant) {
    for (i, step) in result.steps.iter().enumerate() {
        let u = &step.usage;
        let fmt = |v: Option<u64>| v.map_or("?".to_string(), |n| n.to_string());
        out.line(format_args!(
            "  step {}: input {} tokens, cached {} read / {} written, output {}",
            i + 1,
            fmt(u.input_tokens),
            fmt(u.cache_read_tokens),
            fmt(u.cache_write_tokens),
            fmt(u.output_tokens)
        ));
        if let halo_core::CacheVerdict::Bust { cause } = &step.cache.verdict {
            out.line(format_args!("    cache bust: {cause}"));
        }
    }
    let s = &result.stats;
    // Providers that report no cache writes (OpenAI, DeepSeek) show `?`, not 0.
    let written = if result
        .steps
        .iter()
        .any(|st| st.usage.cache_write_tokens.is_some())
    {
        s.cache_write_tokens.to_string()
    } else {
        "?".to_string()
    };
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    out.line(format_args!(
        "stats: {}, {}, input {} tokens, output {} tokens, cached {} tokens read / {written} written (expected {} read, {}), {}, hit ratio {:.1} %, wall time {:.1} s",
        plural(s.steps, "step", "steps"),
        plural(s.tool_calls, "tool call", "tool calls"),
        s.input_tokens,
        s.output_tokens,
        s.cache_read_tokens,
        s.expected_cached_tokens,
        plural(s.cache_busts, "cache bust", "cache busts"),
        plural(s.history_rewrites, "history rewrite", "history rewrites"),
        100.0 * s.cache_hit_ratio(),
        started.elapsed().as_secs_f64()
    ));
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,llama-cpp-2=error")),
        )
        // No colours, and every log line escaped: a log may quote a server's or a model's
        // words.
        .with_ansi(false)
        .with_writer(|| terminal::EscapedStderr)
        .init();
    let cli = Cli::parse();
    if let Some(cli::Command::McpServe(args)) = cli.command {
        return match serve::run(args).await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                terminal::eline(format_args!("error: {e:#}"));
                std::process::ExitCode::FAILURE
            }
        };
    }
    if let Some(cli::Command::Profile(args)) = &cli.command {
        return match profile::command(&args.action, &ProfileFile::default_path()) {
            Ok(text) => {
                terminal::line(text);
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                terminal::eline(format_args!("error: {e}"));
                std::process::ExitCode::FAILURE
            }
        };
    }
    let json = cli.json;
    match session(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if json => {
            // Written out so `type` comes first, as in the event lines.
            let text = |s: &str| serde_json::Value::from(s).to_string();
            terminal::line(terminal::json(&format!(
                "{{\"type\":\"error\",\"kind\":{},\"message\":{}}}",
                text(error_kind(&e)),
                text(&format!("{e:#}"))
            )));
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            terminal::eline(format_args!("error: {e:#}"));
            std::process::ExitCode::FAILURE
        }
    }
}

/// A session that stops before any model call, with the `kind` of its `--json` error line.
#[derive(Debug)]
struct Stop {
    kind: &'static str,
    message: String,
}

impl Stop {
    fn nothing_to_resume(message: String) -> Self {
        Stop {
            kind: "nothing_to_resume",
            message,
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Stop {}

/// The `kind` of a `--json` error line: what a script may branch on.
fn error_kind(e: &anyhow::Error) -> &'static str {
    if let Some(stop) = e.downcast_ref::<Stop>() {
        return stop.kind;
    }
    match e.downcast_ref::<HaloError>() {
        Some(HaloError::MaxStepsReached { .. }) => "max_steps_reached",
        Some(HaloError::Aborted { .. }) => "aborted",
        Some(HaloError::NothingToResume) => "nothing_to_resume",
        Some(HaloError::Model(m)) if m.is_retryable() => "model_retryable",
        Some(HaloError::Model(_)) => "model",
        Some(HaloError::Session(halo_core::SessionError::InUse { .. })) => "session_in_use",
        Some(HaloError::Session(_)) => "session",
        Some(_) => "run",
        None => "setup",
    }
}

/// One coder session: open the session's store and take its lease, then [`work`], then
/// release the lease whatever happened.
async fn session(cli: Cli) -> anyhow::Result<()> {
    let opened = match &cli.session {
        Some(value) => Some(
            store::open(&store::Target::parse(value))
                .await
                .map_err(HaloError::Session)?,
        ),
        None => None,
    };
    let outcome = work(cli, opened.as_ref()).await;
    if let Some(opened) = opened {
        opened.close().await;
    }
    outcome
}

/// Set up, restore the journal, run (or resume), clean up.
async fn work(mut cli: Cli, opened: Option<&store::Opened>) -> anyhow::Result<()> {
    let out = Out { json: cli.json };
    let profiles = ProfileFile::load(ProfileFile::default_path())?;
    let recorded = match opened {
        Some(o) => profile::session_choice(o.store.as_ref(), &o.lease.session)
            .await
            .map_err(HaloError::Session)?,
        None => None,
    };
    let settings = profile::resolve(&mut cli, &profiles, recorded.as_ref())?;
    if let Some(name) = &settings.name {
        out.line(format_args!(
            "profile: {name} ({})",
            profiles.path().display()
        ));
    }
    // A session run on a profile records it (and the permission mode) in its own journal.
    if let Some(o) = opened
        && settings.name.is_some()
        && !cli.resume
    {
        let choice = profile::choice_of(&cli, &settings);
        profile::record(&o.store, &o.lease, &choice, store::now_ms())
            .await
            .map_err(HaloError::Session)?;
    }
    // Besides `.git` at any depth and the project's MCP configuration, what a later run
    // reads from inside DIR: the journal, named configurations, remembered approvals.
    let approvals = coder::approvals::Approvals::from_env();
    let mut later: Vec<&Path> = cli.mcp_config.iter().map(PathBuf::as_path).collect();
    let journal = match cli.session.as_deref().map(store::Target::parse) {
        Some(store::Target::File(path)) => Some(path),
        _ => None,
    };
    later.extend(journal.as_deref());
    later.extend(approvals.as_ref().map(|a| a.dir()));
    let sandbox = coder::sandbox(&cli.dir, &later)?
        .with_mode(cli.sandbox_mode())
        .with_network(cli.network)
        .with_limits(cli.limits.exec_limits());
    let Picked {
        model,
        desc,
        small,
        gemini,
    } = pick_model(&settings)?;
    out.line(format_args!("model: {desc}"));
    let window_source = coder::window_source(cli.context_window, &*model);
    let model_window = model.context_window();
    let mut harness = None;
    out.line(format_args!("folder: {}", cli.dir.display()));
    // The project's own MCP servers and the ones named with --mcp-config: what starts is
    // decided below (`mcp::admit`), as commands are.
    let project = coder::approvals::ProjectServers::read(&cli.dir)?;
    let project_mcp = project
        .as_ref()
        .map(|p| mcp::in_dir(&cli.dir, p.config.clone()));
    let given_mcp = mcp::load_files(&cli.dir, &cli.mcp_config)?;
    let mut mcp_clients = None;

    let mut builder = HaloAgent::builder_shared(model)
        .system(SYSTEM)
        .max_steps(cli.max_steps);
    let tools = sandbox.tools();
    let mut permissions = cli.permissions();
    if small {
        if permissions.yes {
            out.line("(--yes has no effect: the small embedded model always runs read-only)");
        }
        permissions.read_only = true;
        // A small embedded model gets the read-only tools and two worked examples.
        builder = coder::embedded_agent(builder, tools)?;
        out.line(format_args!(
            "tools: {} (read-only, for the small embedded model)",
            EMBEDDED_TOOLS.join(", ")
        ));
    } else {
        // The small model has no `bash`; for the others, how its commands are confined.
        out.line(format_args!(
            "commands: {}",
            sandbox.capabilities().isolation
        ));
        if sandbox.mode() != halo_sandbox::SandboxMode::FullAccess {
            out.line(format_args!("limits per command: {}", sandbox.limits()));
        }
        builder = builder.tools(tools)?;
        let window = cli
            .context_window
            .or(model_window)
            .unwrap_or(halo_core::DEFAULT_CONTEXT_WINDOW);
        let loaded = harness::load(Arc::new(sandbox.clone()), SYSTEM, window).await;
        loaded.lines.iter().for_each(|l| out.line(l));
        builder = builder
            .zones(loaded.zones.clone())
            .tools(loaded.tools.clone())?;
        for hook in loaded.hooks() {
            builder = builder.hook_shared(hook);
        }
        harness = Some(loaded);
        builder = coder::agents::agent_tools(builder)?;
        out.line(format_args!(
            "agents: {}",
            coder::agents::AGENT_TOOLS.join(", ")
        ));
        let trust = match &project {
            Some(project) => {
                let (trust, lines) =
                    mcp::trust(&cli.dir, project, permissions.read_only, cli.json).await?;
                lines.iter().for_each(|l| out.line(l));
                trust
            }
            None if permissions.read_only => mcp::Trust::ReadOnly,
            None => mcp::Trust::Yes,
        };
        let (mcp_config, lines) = mcp::admit(project_mcp.clone(), given_mcp.clone(), trust);
        lines.iter().for_each(|l| out.line(l));
        if let Some(config) = &mcp_config {
            let (clients, lines) = mcp::start(&cli.dir, config).await;
            for line in lines {
                out.line(line);
            }
            builder = builder.tool_source(clients.tool_source());
            mcp_clients = Some(clients);
        }
    }
    let configured = [&project_mcp, &given_mcp]
        .iter()
        .filter_map(|c| c.as_ref())
        .map(|c| c.servers.len())
        .sum::<usize>();
    if small && configured > 0 {
        out.line(format_args!(
            "mcp: {configured} server(s) configured, not started: the small embedded model keeps its small tool set"
        ));
    }
    let (hooks, policy) = approval::session_hooks(permissions);
    out.line(format_args!("policy: {policy}"));
    for hook in hooks {
        builder = builder.hook_shared(hook);
    }
    if let Some(opened) = opened {
        builder = builder
            .session(Arc::clone(&opened.store))
            .session_lease(&opened.lease);
    }
    builder = coder::strategies(builder, cli.context_window);
    let mut agent = builder.build();
    out.line(format_args!(
        "context: {} tokens ({window_source}), tool output evicted from {:.0} %, older rounds summarized from {:.0} %, down to {:.0} %",
        agent.context_window().unwrap_or_default(),
        EVICT_AT * 100.0,
        TRUNCATE_AT * 100.0,
        LOW_WATER * 100.0
    ));
    if let Some(value) = &cli.session {
        agent.restore_session().await?;
        out.line(session_line(value, agent.log().len()));
    }
    out.line(format_args!(
        "prefix: {} tools, fingerprint {}",
        agent.prefix().tools().len(),
        agent.prefix().fingerprint()
    ));
    let task = match (&cli.task, &cli.session) {
        (Some(task), _) => {
            out.line(format_args!("task: {task}"));
            if cli.session.is_some() && agent.discard_pending() {
                out.line(
                    "note: the session's last run stopped in the middle of a step; that step \
                     was dropped and this task is its next user turn (`--resume` without a \
                     task would have finished the step instead)",
                );
            } else if cli.session.is_some() && interrupted(&agent) {
                out.line(
                    "note: the session's last run did not finish; this task is its next user \
                     turn (`--resume` without a task would have continued it instead)",
                );
            }
            Some(task.clone())
        }
        (None, Some(value)) => {
            if agent.log().is_empty() {
                return Err(Stop::nothing_to_resume(format!(
                    "nothing to resume: {value} holds no conversation; start one with `coder --session {value} \"TASK\"`"
                ))
                .into());
            }
            out.line("task: (resuming the interrupted run)");
            None
        }
        // clap requires a task unless --resume, and --resume requires --session.
        (None, None) => bail!("give a TASK, or --session FILE --resume"),
    };

    let started = Instant::now();
    let outcome = run(
        &mut agent,
        task.clone(),
        out,
        cli.session.as_deref(),
        started,
    )
    .await;
    if let Some(h) = &harness
        && let Some(warning) = h
            .remember(task.as_deref(), &agent, &outcome, cli.session.is_some())
            .await
    {
        out.line(warning);
    }
    if let Some(clients) = mcp_clients {
        clients.shutdown().await;
    }
    if let Some(gemini) = gemini {
        match gemini.delete_cached_content().await {
            Ok(Some(name)) => out.line(format_args!(
                "deleted the session's Gemini cached content {name}"
            )),
            Ok(None) => {}
            Err(e) => terminal::eline(format_args!(
                "could not delete the Gemini cached content: {e}"
            )),
        }
    }
    outcome
}

/// The startup line of a session.
fn session_line(session: &str, messages: usize) -> String {
    match messages {
        0 => format!("session: {session} (new)"),
        1 => format!("session: {session} (restored 1 message)"),
        n => format!("session: {session} (restored {n} messages)"),
    }
}

/// Whether the restored conversation stopped before the model's answer.
fn interrupted(agent: &HaloAgent) -> bool {
    match agent.log().last() {
        None => false,
        Some(Message::Assistant(turn)) => !turn.tool_calls.is_empty(),
        Some(_) => true,
    }
}

/// Streams one run — on `task`, or resuming without one — printing text, tool calls, results
/// and stats, or with `--json` every event as a JSON line.
async fn run(
    agent: &mut HaloAgent,
    task: Option<String>,
    out: Out,
    session: Option<&str>,
    started: Instant,
) -> anyhow::Result<()> {
    let mut events = match task {
        Some(task) => agent.stream_text(task).boxed(),
        None => agent.resume_stream().boxed(),
    };
    // Whether the current step has printed text (so the next line starts fresh).
    let mut in_text = false;
    let resume_hint = |out: Out| {
        if let Some(session) = session {
            out.line(format_args!(
                "the session {session} keeps every completed step: `--session {session} --resume` continues"
            ));
        }
    };
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(HaloError::NothingToResume) => {
                let path = session.unwrap_or_default();
                return Err(Stop::nothing_to_resume(format!(
                    "nothing to resume in {path}: its last run ended with the model's answer; give a TASK to continue the conversation"
                ))
                .into());
            }
            Err(e) if out.json => return Err(e.into()),
            Err(HaloError::MaxStepsReached { max_steps, partial }) => {
                end_text(&mut in_text);
                terminal::line(format_args!(
                    "\nstopped: the model still wanted tools after {max_steps} steps (raise --max-steps)\n"
                ));
                print_stats(out, &partial, started);
                resume_hint(out);
                return Ok(());
            }
            Err(HaloError::Aborted { tool, .. }) => {
                end_text(&mut in_text);
                terminal::line(format_args!(
                    "\nstopped: you quit at the approval prompt for `{tool}`"
                ));
                return Ok(());
            }
            Err(e) => {
                end_text(&mut in_text);
                if matches!(&e, HaloError::Model(m) if m.is_retryable()) {
                    resume_hint(out);
                }
                return Err(e.into());
            }
        };
        if out.json {
            terminal::line(terminal::json(&serde_json::to_string(&event)?));
            continue;
        }
        match event {
            AgentEvent::TextDelta(delta) => {
                if !in_text {
                    terminal::line("");
                    in_text = true;
                }
                terminal::text(&delta);
            }
            AgentEvent::ToolCall(call) => {
                end_text(&mut in_text);
                terminal::line(format_args!(
                    "→ {} {}",
                    call.name,
                    shorten(call.replay_arguments(), 200)
                ));
            }
            AgentEvent::ToolResult(result) => {
                let tag = if result.is_error { " (error)" } else { "" };
                terminal::line(format_args!(
                    "← {}{tag} {}",
                    result.tool_name,
                    shorten(&result.content, 300)
                ));
            }
            AgentEvent::StepFinish(_) => end_text(&mut in_text),
            AgentEvent::Finish(result) => {
                end_text(&mut in_text);
                if result.finish_reason() == Some(&FinishReason::Length) {
                    terminal::line("(the answer was cut off at the max_tokens limit)");
                }
                terminal::line("");
                print_stats(out, &result, started);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Ends a line of streamed text, if one is open.
fn end_text(in_text: &mut bool) {
    if std::mem::take(in_text) {
        terminal::line("");
    }
}
