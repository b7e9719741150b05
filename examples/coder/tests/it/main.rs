//! The coder binary end to end, against the loopback OpenAI-compatible fake
//! (`halo_adapters::sim::openai::OpenAiSim`) running in the test process: sessions, resume in
//! a new process with byte-identical requests, the `--json` lines, kill -9 at random
//! moments, `bash` confined by the OS sandbox, and `--context-window` keeping 40 reads inside
//! a 16k window, `plan` and `subagent` offered to a hosted model. Built without the
//! `local` feature: the
//! coder gets its model from `OPENAI_*`.

mod agents;
mod approval;
mod context;
mod escape;
mod harness;
mod kill;
mod limits;
mod mcp;
mod profile;
mod sandbox;
mod serve;
mod serve_http;
mod session;
mod stores;
mod terminal;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use halo_adapters::sim::openai::OpenAiSim;
use halo_core::session::{DEFAULT_SESSION, JournalEvent, SessionError, SessionStore as _};
use halo_stream::journal::JsonlStore;
use serde_json::Value;

/// The coder on `dir`, talking to `sim`, with `--json` and `args`; the environment names no
/// other provider, so the OpenAI-compatible adapter is picked.
pub fn coder(sim: &OpenAiSim, dir: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = coder_text(sim, dir, args);
    cmd.arg("--json");
    cmd
}

/// As [`coder`], without `--json`: the output for people.
pub fn coder_text(sim: &OpenAiSim, dir: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_coder"));
    cmd.args(args)
        .arg("--dir")
        .arg(dir)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("DEEPSEEK_API_KEY")
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", sim.base_url())
        .env("OPENAI_MODEL", "sim-model")
        // No user profiles: a config file that does not exist.
        .env("HALO_CONFIG", dir.with_extension("no-profiles.toml"))
        .env("RUST_LOG", "warn")
        // Approvals of projects' MCP servers go to the test's state folder, never the
        // user's.
        .env("XDG_STATE_HOME", state_home())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// The `XDG_STATE_HOME` every coder of the tests runs with (approvals are kept per
/// project, and every test's project is a folder of its own).
pub fn state_home() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("coder-state")
}

/// Where the coders of the tests remember approvals of projects' MCP servers.
pub fn approvals() -> coder::approvals::Approvals {
    coder::approvals::Approvals::at(state_home().join("halo/mcp-approvals"))
}

/// Approves the MCP servers `dir` configures now, as a yes at the terminal would.
pub fn approve(dir: &Path) {
    let servers = coder::approvals::ProjectServers::read(dir)
        .expect("the project's MCP configuration reads")
        .expect("the project configures servers");
    approvals()
        .approve(dir, &servers)
        .expect("the approval is written");
}

/// Runs `cmd` to its end (at most 180 s: a run takes seconds, but one killed for its memory
/// has taken 33–60 s beside the sandbox escape suites, which make sandboxes by the
/// hundred; the limit only catches a coder that hangs).
pub async fn run(mut cmd: tokio::process::Command) -> Output {
    let child = cmd.spawn().expect("the coder binary starts");
    tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("the coder finishes within 180 s")
        .expect("the coder's output is read")
}

/// The stdout lines of a `--json` run, each parsed.
pub fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}")))
        .collect()
}

/// A run's stdout and stderr, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The journal at `path`, loaded as the coder loads it (no coder may have it open).
///
/// Right after a `kill -9` the journal's lock can still be held for a moment: a command
/// the coder was starting, forked but not yet exec'd, holds a copy of the lock's
/// descriptor until its exec closes it. So a store that finds it in use tries again for up
/// to 10 s, as the error tells a user to.
pub async fn journal(path: &Path) -> Vec<JournalEvent> {
    let mut tries = 0;
    let store = loop {
        match JsonlStore::open(path) {
            Err(SessionError::InUse { .. }) if tries < 100 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            opened => break opened,
        }
    };
    store
        .unwrap_or_else(|e| panic!("the journal {} opens: {e}", path.display()))
        .load(DEFAULT_SESSION)
        .await
        .unwrap_or_else(|e| panic!("the journal {} loads: {e}", path.display()))
}
