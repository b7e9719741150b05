//! The MCP variant: the same session with an MCP server's tools in the prefix, and the
//! server's tool list changing once, midway.
//!
//! The server is Halo's own (`halo_mcp::McpServer`) in this process, over a
//! `tokio::io::duplex` pipe, and the agent reaches it through `halo_mcp::McpClients`, so the
//! whole MCP path runs: `initialize`, `tools/list`, and after [`CHANGE_AFTER`] tool calls the
//! server's `add_tool`, its `notifications/tools/list_changed`, the client's re-listing, and
//! the agent's swap of the source's tools at the next step boundary. The bench waits for the
//! re-listing before that boundary (an after-hook on the triggering call), so the change
//! always lands in the same request: one expected miss in the ledger, and no bust.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_trait::async_trait;
use halo_core::{
    DynTool, ToolContext, ToolError, ToolHook, ToolOutput, ToolResult, ToolSource, ToolSpec,
};
use halo_mcp::{ClientOptions, InProcess, McpClients, McpServer, McpToolSet};
use serde_json::{Value, json};

/// The tool call after which the server's tool list changes (of the session's 39).
pub(crate) const CHANGE_AFTER: usize = 20;
/// The MCP server's name in the configuration, so its tools are `mcp__docs__…`.
const SERVER: &str = "docs";

/// An MCP server of the project's docs, started in this process, and the client's tool set.
pub(crate) struct DocsServer {
    server: McpServer,
    clients: McpClients,
}

impl DocsServer {
    /// Starts the server with one tool (`search_docs`) and connects the client to it.
    pub(crate) async fn start() -> anyhow::Result<DocsServer> {
        let server = McpServer::builder()
            .name("docs", "0.1.0")
            .tool(Arc::new(DocsTool::Search))
            .build()
            .context("cannot build the docs MCP server")?;
        let served = server.clone();
        let connect: InProcess = Arc::new(move || {
            let (client_io, server_io) = tokio::io::duplex(1 << 16);
            let server = served.clone();
            tokio::spawn(async move {
                if let Ok(running) = rmcp::ServiceExt::serve(server, server_io).await {
                    let _ = running.waiting().await;
                }
            });
            client_io
        });
        let clients =
            McpClients::start_in_process([(SERVER.to_string(), connect)], ClientOptions::default())
                .await;
        anyhow::ensure!(
            clients.failures().is_empty(),
            "the docs MCP server did not start: {:?}",
            clients.failures()
        );
        Ok(DocsServer { server, clients })
    }

    /// The client's tool set, the agent's [`ToolSource`].
    pub(crate) fn tool_source(&self) -> Arc<McpToolSet> {
        self.clients.tool_source()
    }

    /// The after-hook that changes the server's tool list after [`CHANGE_AFTER`] calls.
    pub(crate) fn trigger(&self) -> ChangeTools {
        ChangeTools {
            server: self.server.clone(),
            source: self.tool_source(),
            calls: AtomicUsize::new(0),
        }
    }

    pub(crate) async fn shutdown(&self) {
        self.clients.shutdown().await;
    }
}

/// Counts the session's tool calls; after the [`CHANGE_AFTER`]th, adds `read_doc` to the
/// server and waits until the client has re-listed (at most 10 s).
pub(crate) struct ChangeTools {
    server: McpServer,
    source: Arc<McpToolSet>,
    calls: AtomicUsize,
}

#[async_trait]
impl ToolHook for ChangeTools {
    async fn after_tool_call(&self, _cx: &ToolContext, result: ToolResult) -> ToolResult {
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 != CHANGE_AFTER {
            return result;
        }
        let before = self.source.version();
        if let Err(e) = self.server.add_tool(Arc::new(DocsTool::Read)).await {
            eprintln!("bench cache: the docs server refused read_doc: {e}");
            return result;
        }
        let started = Instant::now();
        while self.source.version() == before && started.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        result
    }
}

/// The docs server's tools. The session's script never calls them: they are there for the
/// prefix (their schemas), as most of an agent's MCP tools are in any one session.
enum DocsTool {
    Search,
    Read,
}

#[async_trait]
impl DynTool for DocsTool {
    fn spec(&self) -> ToolSpec {
        match self {
            DocsTool::Search => ToolSpec::new(
                "search_docs",
                "Searches the project's documentation (docs/*.md, README.md, ARCHITECTURE.md) for a \
                 phrase and returns the matching paragraphs with their file and heading.",
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "The phrase to look for."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 20,
                                  "description": "The most paragraphs to return (default 5)."}
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
            ),
            DocsTool::Read => ToolSpec::new(
                "read_doc",
                "Reads one document of the project's documentation by its path, optionally one \
                 section of it by heading.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "The document, such as docs/mcp.md."},
                        "section": {"type": "string", "description": "A heading of the document."}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
            ),
        }
    }

    async fn call_json(
        &self,
        arguments: Value,
        _cx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("no match for {arguments}")))
    }
}
