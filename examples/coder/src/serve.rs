//! `coder mcp-serve`: the coding tools of a `ContainerSandbox` on DIR, served as an MCP
//! server (`halo_mcp::server::McpServer`) on stdio or, with `--http ADDR`, over streamable
//! HTTP at `http://ADDR/mcp`.
//!
//! Every call runs through the coder's hooks: the command denylist, the permission policy
//! (read-only with `--read-only`, full access with `--yes`, else workspace-write) and output
//! truncation. An MCP server has no one to ask, so under workspace-write a command (`bash`)
//! is denied at once, with a message saying to restart with `--yes`; it never waits.
//! stdout carries only JSON-RPC; the startup lines and logs go to stderr.
//!
//! Over HTTP every request needs the bearer token (`--token-file`, `HALO_MCP_TOKEN`, or a
//! generated one in a 0600 file whose path is printed; never the token itself unless
//! `--print-token`), sessions are capped (`--max-sessions`) and expire when idle
//! (`--idle-timeout`), and a closed session's or a gone client's running command is killed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use coder::{EMBEDDED_TOOLS, terminal};
use halo_core::{Sandbox as _, ToolCallDecision, ToolContext, ToolHook};
use halo_mcp::server::{BearerToken, HttpOptions, McpServer};
use halo_sandbox::SandboxMode;
use halo_sandbox::policy::{
    CommandDenylist, OutputTruncation, Permission, PermissionPolicy, PermissionPreset,
};
use serde_json::Value;

use crate::cli::ServeArgs;

/// What the client reads when a call would need an approval no one can give.
fn no_one_can_approve(tool: &str) -> String {
    format!(
        "no one can approve `{tool}` here: this MCP server has no one to ask, so calls that need approval are denied; restart `coder mcp-serve` with --yes to let them run (the denylist and the sandbox still apply)"
    )
}

/// Denies, before the permission policy asks, every call the policy would ask about.
struct Unattended {
    policy: Arc<PermissionPolicy>,
}

#[async_trait]
impl ToolHook for Unattended {
    async fn before_tool_call(&self, cx: &ToolContext, _args: &Value) -> ToolCallDecision {
        if self.policy.permission_for(cx) == Permission::Ask {
            ToolCallDecision::Deny(no_one_can_approve(&cx.call().name))
        } else {
            ToolCallDecision::Allow
        }
    }
}

/// The server's hooks in order (denylist, the unattended approval, permission policy,
/// truncation) and a line that says what the server allows.
fn hooks(args: &ServeArgs) -> (Vec<Arc<dyn ToolHook>>, &'static str) {
    let (preset, description) = if args.read_only {
        (
            PermissionPreset::ReadOnly,
            "read-only: read, ls, glob and grep",
        )
    } else if args.yes {
        (
            PermissionPreset::FullAccess,
            "--yes: edits and commands run without asking; the denylist and the command sandbox still apply",
        )
    } else {
        (
            PermissionPreset::WorkspaceWrite,
            "workspace-write: edits run; commands need approval, which no one can give here, so they are denied (restart with --yes to run them)",
        )
    };
    let policy = Arc::new(PermissionPolicy::new(preset));
    let hooks: Vec<Arc<dyn ToolHook>> = vec![
        Arc::new(CommandDenylist::new()),
        Arc::new(Unattended {
            policy: policy.clone(),
        }),
        policy,
        Arc::new(OutputTruncation::default()),
    ];
    (hooks, description)
}

/// The environment variable a token may come from.
const TOKEN_ENV: &str = "HALO_MCP_TOKEN";

/// The HTTP server's bearer token and where it came from.
struct Token {
    token: BearerToken,
    /// For the startup line: the file or variable it came from, or where it was written.
    origin: String,
    /// The generated token's file, removed when the server stops.
    written: Option<PathBuf>,
    /// The private temp folder made for it, removed too.
    temporary_dir: Option<PathBuf>,
}

impl Token {
    /// `--token-file`, else `HALO_MCP_TOKEN`, else a new token in a private file.
    fn new(args: &ServeArgs, addr: SocketAddr) -> anyhow::Result<Token> {
        if let Some(path) = &args.token_file {
            let token = BearerToken::from_file(path).context("cannot use --token-file")?;
            return Ok(Token {
                token,
                origin: format!("the first line of {}", path.display()),
                written: None,
                temporary_dir: None,
            });
        }
        if let Some(value) = std::env::var_os(TOKEN_ENV).filter(|v| !v.is_empty()) {
            let value = value
                .into_string()
                .map_err(|_| anyhow::anyhow!("{TOKEN_ENV} is not valid UTF-8"))?;
            let token =
                BearerToken::new(value).with_context(|| format!("cannot use {TOKEN_ENV}"))?;
            return Ok(Token {
                token,
                origin: format!("from {TOKEN_ENV}"),
                written: None,
                temporary_dir: None,
            });
        }
        let token = BearerToken::generate()?;
        let (dir, temporary) = token_dir()?;
        let path = dir.join(format!("{}.token", addr.port()));
        token.write_private(&path)?;
        Ok(Token {
            token,
            origin: format!(
                "{} (only you can read it; send it as `Authorization: Bearer <token>`)",
                path.display()
            ),
            written: Some(path),
            temporary_dir: temporary.then_some(dir),
        })
    }

    fn remove(&self) {
        if let Some(path) = &self.written {
            let _ = std::fs::remove_file(path);
        }
        if let Some(dir) = &self.temporary_dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// `$XDG_RUNTIME_DIR/halo-coder-mcp` (the runtime dir is private to the user), else a new
/// private folder (mode 0700) in the temp dir; and whether it is that new folder.
fn token_dir() -> anyhow::Result<(PathBuf, bool)> {
    use std::os::unix::fs::DirBuilderExt as _;
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && runtime.is_absolute()
        && runtime.is_dir()
    {
        let dir = runtime.join("halo-coder-mcp");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        return Ok((dir, false));
    }
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::Builder::new()
        .prefix("halo-coder-mcp-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .context("cannot create a private folder for the token")?;
    Ok((dir.keep(), true))
}

/// Completes on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch for SIGTERM");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Serves until the client closes stdin (stdio), or until Ctrl-C or SIGTERM (HTTP).
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mode = if args.read_only {
        SandboxMode::ReadOnly
    } else {
        SandboxMode::WorkspaceWrite
    };
    // `.git` at any depth, the project's MCP configuration, and the files named with
    // --mcp-config when they lie inside DIR: a command must not write what starts later.
    let named: Vec<&std::path::Path> = args.mcp_config.iter().map(|p| p.as_path()).collect();
    let sandbox = coder::sandbox(&args.dir, &named)?
        .with_mode(mode)
        .with_limits(args.limits.exec_limits());
    let mut tools = sandbox.tools();
    if args.read_only {
        tools.retain(|t| EMBEDDED_TOOLS.contains(&t.spec().name.as_str()));
    }
    let (hooks, policy) = hooks(&args);
    // Bridge mode: the configured servers' tools beside the local ones.
    let bridged = match crate::mcp::load_files(&args.dir, &args.mcp_config)? {
        Some(config) if args.read_only => {
            terminal::eline(format_args!(
                "mcp: {} server(s) configured, not started: --read-only runs no commands, and an MCP server is one",
                config.servers.len()
            ));
            None
        }
        Some(config) => {
            let (clients, lines) = crate::mcp::start(&args.dir, &config).await;
            lines.iter().for_each(terminal::eline);
            Some(clients)
        }
        None => None,
    };
    let local = tools.clone();
    let server = McpServer::builder()
        .name("halo-coder", env!("CARGO_PKG_VERSION"))
        .instructions(
            "Halo's coding tools, confined to one project folder: paths are relative to it and no tool reaches outside it.",
        )
        .tools(tools)
        .bridge(bridged.iter().flat_map(|c| c.tools()))
        .hooks(hooks)
        .build()
        .context("cannot set up the MCP server")?;
    // The bridged servers' tool-list changes reach this server's clients.
    let _follower = bridged.as_ref().map(|clients| {
        tokio::spawn(server.clone().follow_source(
            local,
            clients.tool_source(),
            std::time::Duration::from_millis(500),
        ))
    });
    terminal::eline(format_args!("folder: {}", args.dir.display()));
    terminal::eline(format_args!("tools: {}", server.tool_names().join(", ")));
    terminal::eline(format_args!("policy: {policy}"));
    if !args.read_only {
        terminal::eline(format_args!(
            "commands: {}",
            sandbox.capabilities().isolation
        ));
        terminal::eline(format_args!("limits per command: {}", sandbox.limits()));
    }
    match args.http {
        None => {
            terminal::eline("serving MCP on stdio");
            server.serve_stdio().await?;
        }
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let addr = listener.local_addr()?;
            if !addr.ip().is_loopback() {
                terminal::eline(format_args!(
                    "warning: {addr} is not a loopback address; the server still accepts only loopback Host headers"
                ));
            }
            let token = Token::new(&args, addr)?;
            terminal::eline(format_args!("token: {}", token.origin));
            if args.print_token {
                terminal::eline(format_args!("token value: {}", token.token.secret()));
            }
            let options = HttpOptions::new(token.token.clone())
                .with_max_sessions(args.max_sessions)
                .with_idle_timeout(Duration::from_secs(args.idle_timeout));
            terminal::eline(format_args!(
                "sessions: at most {}, closed after {} s idle",
                args.max_sessions, args.idle_timeout
            ));
            terminal::eline(format_args!("serving MCP at http://{addr}/mcp"));
            let served = server.serve_http(listener, options, stop_signal()).await;
            token.remove();
            served?;
        }
    }
    Ok(())
}
