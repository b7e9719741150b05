//! `coder mcp-serve`: the coding tools of a `ContainerSandbox` on DIR, served as an MCP
//! server (`halo_mcp::server::McpServer`) on stdio or, with `--http ADDR`, over streamable
//! HTTP at `http://ADDR/mcp`.
//!
//! Every call runs through the coder's hooks: the command denylist, the permission policy
//! (read-only with `--read-only`, full access with `--yes`, else workspace-write) and output
//! truncation. An MCP server has no one to ask, so under workspace-write a command (`bash`)
//! is denied at once, with a message saying to restart with `--yes`; it never waits.
//! stdout carries only JSON-RPC; the startup lines and logs go to stderr.

use std::sync::Arc;

use anyhow::Context as _;
use async_trait::async_trait;
use coder::EMBEDDED_TOOLS;
use halo_core::{Sandbox as _, ToolCall, ToolCallDecision, ToolHook};
use halo_mcp::server::McpServer;
use halo_sandbox::policy::{
    CommandDenylist, OutputTruncation, Permission, PermissionPolicy, PermissionPreset,
};
use halo_sandbox::{ContainerSandbox, SandboxMode};
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
    async fn before_tool_call(&self, call: &ToolCall, _args: &Value) -> ToolCallDecision {
        let class = self.policy.class_of(&call.name);
        if self.policy.preset().permission(class) == Permission::Ask {
            ToolCallDecision::Deny(no_one_can_approve(&call.name))
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

/// Serves until the client closes stdin (stdio) or the process is stopped (HTTP).
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mode = if args.read_only {
        SandboxMode::ReadOnly
    } else {
        SandboxMode::WorkspaceWrite
    };
    let sandbox = ContainerSandbox::new(&args.dir)
        .and_then(|s| s.with_protected_paths([".git"]))
        .with_context(|| format!("cannot use {} as the sandbox root", args.dir.display()))?
        .with_mode(mode);
    let mut tools = sandbox.tools();
    if args.read_only {
        tools.retain(|t| EMBEDDED_TOOLS.contains(&t.spec().name.as_str()));
    }
    let (hooks, policy) = hooks(&args);
    // Bridge mode: the configured servers' tools beside the local ones.
    let bridged = match crate::mcp::load_files(&args.dir, &args.mcp_config)? {
        Some(config) if args.read_only => {
            eprintln!(
                "mcp: {} server(s) configured, not started: --read-only runs no commands, and an MCP server is one",
                config.servers.len()
            );
            None
        }
        Some(config) => {
            let (clients, lines) = crate::mcp::start(&args.dir, &config).await;
            lines.iter().for_each(|l| eprintln!("{l}"));
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
    eprintln!("folder: {}", args.dir.display());
    eprintln!("tools: {}", server.tool_names().join(", "));
    eprintln!("policy: {policy}");
    if !args.read_only {
        eprintln!("commands: {}", sandbox.capabilities().isolation);
    }
    match args.http {
        None => {
            eprintln!("serving MCP on stdio");
            server.serve_stdio().await?;
        }
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let addr = listener.local_addr()?;
            if !addr.ip().is_loopback() {
                eprintln!(
                    "warning: {addr} is not a loopback address; the server still accepts only loopback Host headers"
                );
            }
            eprintln!("serving MCP at http://{addr}/mcp");
            server
                .serve_http(listener, std::future::pending::<()>())
                .await?;
        }
    }
    Ok(())
}
