//! The coder's MCP servers: `mcpServers` read from `DIR/.mcp.json`, then
//! `DIR/.agent/mcp.json`, then each `--mcp-config FILE` (later files win per server name),
//! started concurrently before the run; their tools (`mcp__<server>__<tool>`) join the
//! agent's as a `ToolSource`, so a server's `tools/list_changed` reaches the prompt at the
//! next step. A server that fails to start is reported on a startup line and left out.
//! Stdio servers run in DIR unless their `cwd` says otherwise.
//! Servers' stderr goes to `<tmp>/halo-coder-mcp/<folder>-<hash>/<server>.log`, one folder
//! per project, so same-named servers of two projects keep apart logs.
//!
//! A stdio server is a command that runs on this machine **outside the OS sandbox** (as in
//! Claude Desktop and Claude Code). So the servers a project's own files name (`DIR/.mcp.json`,
//! `DIR/.agent/mcp.json`: a cloned repository, or a command in the sandbox, decides them)
//! start only from a configuration the user approved at the terminal's
//! `[Y]es / [N]o / [Q]uit` question, remembered by its hash outside the project
//! (`coder::approvals`); one that changed since, or was never approved, stays stopped when
//! there is no terminal to ask, `--yes` or not, and the startup line says what changed and
//! how to approve it ([`admit`]). Servers of `--mcp-config FILE`, which the user named, start
//! without a question. `--read-only` starts none.

use std::path::{Path, PathBuf};

use std::io::IsTerminal as _;

use anyhow::Context as _;
use coder::approval;
use coder::approvals::{Approvals, ProjectServers, Verdict};
use halo_mcp::{ClientOptions, McpClients, McpConfig, ServerTransport};
use halo_sandbox::policy::ApprovalAnswer;

/// Loads the configuration of `files` (later files win per server name); `None` when no
/// file names a server. Stdio servers run in `dir` ([`in_dir`]).
///
/// # Errors
/// A file that cannot be read or parsed (the message names the file, field and server).
pub fn load_files(dir: &Path, files: &[PathBuf]) -> anyhow::Result<Option<McpConfig>> {
    let config = McpConfig::load_all(files).context("reading the MCP server configuration")?;
    Ok((!config.servers.is_empty()).then(|| in_dir(dir, config)))
}

/// `config` with each stdio server's `cwd` taken from `dir`: a server without one runs in
/// `dir` (the project, as Claude Code runs them), a relative one is joined to it.
pub fn in_dir(dir: &Path, mut config: McpConfig) -> McpConfig {
    for server in config.servers.values_mut() {
        if let ServerTransport::Stdio(stdio) = &mut server.transport {
            stdio.cwd = Some(match stdio.cwd.take() {
                Some(cwd) if cwd.is_absolute() => cwd,
                Some(cwd) => dir.join(cwd),
                None => dir.to_path_buf(),
            });
        }
    }
    config
}

/// Whether the servers of a project's own files may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The user approved this configuration (now, or before).
    Yes,
    /// Not approved: why, for the startup line.
    No(String),
    /// `--read-only`: no server starts.
    ReadOnly,
}

/// How a configuration gets approved, for the startup line.
pub const HOW_TO_APPROVE: &str = "they run outside the sandbox, so they start only from a \
     configuration you approved: run the coder in this folder at a terminal and answer yes \
     (remembered until the files change), or name the file with --mcp-config FILE";

/// What may start: the project's servers when `trust` allows it, then the ones the user
/// named with `--mcp-config` (later files win per name, as always), and the startup lines
/// that say what was held back and why.
pub fn admit(
    project: Option<McpConfig>,
    given: Option<McpConfig>,
    trust: Trust,
) -> (Option<McpConfig>, Vec<String>) {
    let mut lines = Vec::new();
    if trust == Trust::ReadOnly {
        let names: std::collections::BTreeSet<&String> = [&project, &given]
            .into_iter()
            .flatten()
            .flat_map(|c| c.servers.keys())
            .collect();
        let n = names.len();
        if n > 0 {
            lines.push(format!(
                "mcp: {n} server(s) configured, not started: --read-only runs no commands, and an MCP server is one"
            ));
        }
        return (None, lines);
    }
    let mut config = match (project, trust) {
        (Some(project), Trust::Yes) => Some(project),
        (Some(project), Trust::No(why)) => {
            let names: Vec<&str> = project.servers.keys().map(String::as_str).collect();
            lines.push(format!(
                "mcp: not started: {} from the project's .mcp.json / .agent/mcp.json: {why}",
                names.join(", ")
            ));
            None
        }
        (_, _) => None,
    };
    if let Some(given) = given {
        match &mut config {
            Some(c) => c.merge(given),
            None => config = Some(given),
        }
    }
    (config, lines)
}

/// Whether the project's servers may start, and the startup lines that say why: with
/// `--read-only` never; a configuration the user approved before starts; else the user is
/// asked at the terminal and a yes is remembered ([`Approvals`]); with no terminal to ask
/// (a script, CI, `--yes` or not) it does not start.
///
/// # Errors
/// The user quit at the question.
pub async fn trust(
    dir: &Path,
    project: &ProjectServers,
    read_only: bool,
    json: bool,
) -> anyhow::Result<(Trust, Vec<String>)> {
    if read_only {
        return Ok((Trust::ReadOnly, Vec::new()));
    }
    let approvals = Approvals::from_env();
    let verdict = approvals
        .as_ref()
        .map_or(Verdict::Never, |a| a.check(dir, project));
    if verdict == Verdict::Approved {
        return Ok((Trust::Yes, Vec::new()));
    }
    if !std::io::stdin().is_terminal() {
        let why = verdict.reason().unwrap_or_default();
        return Ok((Trust::No(format!("{why}; {HOW_TO_APPROVE}")), Vec::new()));
    }
    match approval::confirm(question(dir, &project.config, &verdict), json).await {
        ApprovalAnswer::Run => {
            let line = match approvals.map(|a| a.approve(dir, project)) {
                Some(Ok(file)) => format!(
                    "mcp: approved; remembered in {} until the configuration changes",
                    file.display()
                ),
                Some(Err(e)) => format!("mcp: approved for this run only: {e:#}"),
                None => "mcp: approved for this run only: no folder to remember approvals in \
                         (set XDG_STATE_HOME or HOME)"
                    .to_string(),
            };
            Ok((Trust::Yes, vec![line]))
        }
        ApprovalAnswer::Skip => Ok((Trust::No("you answered no".into()), Vec::new())),
        ApprovalAnswer::Abort => anyhow::bail!("quit before the run started"),
    }
}

/// The question asked at the terminal before a project's servers start, saying what
/// changed since the user's last approval.
pub fn question(dir: &Path, project: &McpConfig, verdict: &Verdict) -> String {
    let since = match verdict {
        Verdict::Changed(changes) => format!(
            " (changed since you approved them: {}; your answer is remembered until they change)",
            changes.join(", ")
        ),
        _ => " (your answer is remembered until they change)".to_string(),
    };
    let mut q = format!(
        "? start the MCP servers of {}? They run on this machine outside the sandbox{since}:\n",
        dir.display()
    );
    for (name, server) in &project.servers {
        let what = match &server.transport {
            ServerTransport::Stdio(stdio) => {
                let mut cmd = stdio.command.clone();
                for a in &stdio.args {
                    cmd.push(' ');
                    cmd.push_str(a);
                }
                cmd
            }
            ServerTransport::Http(http) => http.url.clone(),
            _ => "(a transport this coder does not describe)".to_string(),
        };
        q.push_str(&format!("    {name}: {what}\n"));
    }
    q
}

/// Where the servers of the project in `dir` log: `<tmp>/halo-coder-mcp/<folder>-<hash>`,
/// the hash (FNV-1a, stable across runs and builds) of the folder's absolute path.
pub fn log_dir(dir: &Path) -> PathBuf {
    let path = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let hash = path
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into());
    std::env::temp_dir()
        .join("halo-coder-mcp")
        .join(format!("{name}-{:08x}", hash as u32))
}

/// Starts the enabled servers; returns the clients and the startup lines (which started,
/// with how many tools, which failed and why).
pub async fn start(dir: &Path, config: &McpConfig) -> (McpClients, Vec<String>) {
    let logs = log_dir(dir);
    let clients = McpClients::start(config, ClientOptions::default().with_log_dir(&logs)).await;
    let mut lines = Vec::new();
    let started: Vec<String> = clients
        .servers()
        .iter()
        .map(|s| {
            format!(
                "{} ({} tool{})",
                s.name,
                s.tools,
                if s.tools == 1 { "" } else { "s" }
            )
        })
        .collect();
    let disabled = config.servers.values().filter(|s| s.disabled).count();
    lines.push(format!(
        "mcp: {} started{}{}; stderr logs in {}",
        if started.is_empty() {
            "no server".to_string()
        } else {
            started.join(", ")
        },
        if clients.failures().is_empty() {
            String::new()
        } else {
            format!(", {} failed", clients.failures().len())
        },
        if disabled == 0 {
            String::new()
        } else {
            format!(", {disabled} disabled")
        },
        logs.display()
    ));
    for failure in clients.failures() {
        lines.push(format!("mcp: failed: {failure}"));
    }
    (clients, lines)
}
