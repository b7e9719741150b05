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
//! `DIR/.agent/mcp.json`: a cloned repository decides them) start only when the user agrees,
//! as a command does ([`admit`]): with `--yes`, or at the terminal's `[Y]es / [N]o / [Q]uit`
//! question; with no terminal to ask and no `--yes` they stay stopped, and the startup line
//! says how to start them. Servers of `--mcp-config FILE`, which the user named, start
//! without a question. `--read-only` starts none.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use halo_mcp::{ClientOptions, McpClients, McpConfig, ServerTransport};

/// The configuration files for `dir` and `extra`: the two in `dir` when they exist, then
/// every `extra` one (which must exist).
pub fn config_files(dir: &Path, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [".mcp.json", ".agent/mcp.json"]
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| p.is_file())
        .collect();
    files.extend(extra.iter().cloned());
    files
}

/// Loads the configuration of `files` (later files win per server name); `None` when no
/// file names a server. A stdio server without `cwd` runs in `dir` (the project, as Claude
/// Code runs them), a relative `cwd` is taken from `dir`.
///
/// # Errors
/// A file that cannot be read or parsed (the message names the file, field and server).
pub fn load_files(dir: &Path, files: &[PathBuf]) -> anyhow::Result<Option<McpConfig>> {
    let mut config = McpConfig::load_all(files).context("reading the MCP server configuration")?;
    for server in config.servers.values_mut() {
        if let ServerTransport::Stdio(stdio) = &mut server.transport {
            stdio.cwd = Some(match stdio.cwd.take() {
                Some(cwd) if cwd.is_absolute() => cwd,
                Some(cwd) => dir.join(cwd),
                None => dir.to_path_buf(),
            });
        }
    }
    Ok((!config.servers.is_empty()).then_some(config))
}

/// The configuration files in `dir` the project itself provides, those that exist.
pub fn project_files(dir: &Path) -> Vec<PathBuf> {
    config_files(dir, &[])
}

/// Whether the servers of a project's own files may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// `--yes`, or the user said yes at the terminal.
    Yes,
    /// The user said no, or there is no terminal to ask and no `--yes`.
    No,
    /// `--read-only`: no server starts.
    ReadOnly,
}

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
        (Some(project), _) => {
            let names: Vec<&str> = project.servers.keys().map(String::as_str).collect();
            lines.push(format!(
                "mcp: not started: {} from the project's .mcp.json / .agent/mcp.json; they would run outside the sandbox, so they start only with --yes or when you answer yes (or name the file with --mcp-config FILE)",
                names.join(", ")
            ));
            None
        }
        (None, _) => None,
    };
    if let Some(given) = given {
        match &mut config {
            Some(c) => c.merge(given),
            None => config = Some(given),
        }
    }
    (config, lines)
}

/// The question asked at the terminal before a project's servers start.
pub fn question(dir: &Path, project: &McpConfig) -> String {
    let mut q = format!(
        "? start the MCP servers of {}? They run on this machine outside the sandbox:\n",
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
