//! The coder's MCP servers: `mcpServers` read from `DIR/.mcp.json`, then
//! `DIR/.agent/mcp.json`, then each `--mcp-config FILE` (later files win per server name),
//! started concurrently before the run; their tools (`mcp__<server>__<tool>`) join the
//! agent's as a `ToolSource`, so a server's `tools/list_changed` reaches the prompt at the
//! next step. A server that fails to start is reported on a startup line and left out.
//! Stdio servers run in DIR unless their `cwd` says otherwise.
//! Servers' stderr goes to `<tmp>/halo-coder-mcp/<server>.log`.

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

/// Loads the configuration; `None` when no file names a server. A stdio server without
/// `cwd` runs in `dir` (the project, as Claude Code runs them), a relative `cwd` is taken
/// from `dir`.
///
/// # Errors
/// A file that cannot be read or parsed (the message names the file, field and server).
pub fn load(dir: &Path, extra: &[PathBuf]) -> anyhow::Result<Option<McpConfig>> {
    load_files(dir, &config_files(dir, extra))
}

/// Loads the configuration of `files` only, as [`load`] does (`coder mcp-serve
/// --mcp-config FILE`: the servers it bridges).
///
/// # Errors
/// As [`load`].
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

/// Starts the enabled servers; returns the clients and the startup lines (which started,
/// with how many tools, which failed and why).
pub async fn start(config: &McpConfig) -> (McpClients, Vec<String>) {
    let logs = std::env::temp_dir().join("halo-coder-mcp");
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
