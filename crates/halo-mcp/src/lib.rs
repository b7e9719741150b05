//! # halo-mcp
//!
//! Model Context Protocol both ways for Halo, over [`rmcp`] 3.11, the official Rust SDK.
//!
//! **Client** (external MCP servers' tools as Halo tools): an [`McpConfig`] in the
//! `mcpServers` shape of Claude Desktop / Claude Code ([`config`]), started with
//! [`McpClients::start`] (every server concurrently; one that fails is reported in
//! [`McpClients::failures`] and left out). [`McpClients::tool_source`] is a
//! [`halo_core::ToolSource`]: each server's tools as `DynTool`s named
//! `mcp__<server>__<tool>` ([`name`]), swapped in at the next step boundary when a server
//! sends `notifications/tools/list_changed`.
//!
//! **Server** ([`server`]): a Halo tool set (and optionally the agent itself) served as an
//! MCP server over stdio or streamable HTTP, each call run through the same hooks as in an
//! agent (denylist, permission policy, truncation); bridge mode re-exports external MCP
//! servers' tools next to the local ones.
//!
//! See `docs/mcp.md` for what of the MCP spec is supported.
//!
//! ```
//! use halo_mcp::{McpConfig, name::tool_name};
//!
//! let config = McpConfig::parse(
//!     r#"{"mcpServers": {"everything": {"command": "mcp-server-everything"}}}"#,
//!     ".mcp.json",
//! ).unwrap();
//! assert_eq!(config.servers.len(), 1);
//! assert_eq!(tool_name("everything", "echo"), "mcp__everything__echo");
//! ```

// The client side (config, names, client).
pub mod client;
pub mod config;
pub mod name;
pub use client::{ClientOptions, InProcess, McpClients, McpToolSet, ServerError, ServerStatus};
pub use config::{ConfigError, HttpConfig, McpConfig, ServerConfig, ServerTransport, StdioConfig};

// The server side (`src/server/`).
pub mod server;
#[allow(deprecated)]
pub use server::AgentAsTool;
pub use server::{McpServer, McpServerBuilder, Progress, ServeError, ServedAgent};
