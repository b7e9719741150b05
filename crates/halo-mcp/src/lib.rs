//! # halo-mcp
//!
//! Model Context Protocol for Halo agents, over [`rmcp`], the official Rust SDK.
//!
//! **Client** (external MCP servers' tools as Halo tools): an [`McpConfig`] in the
//! `mcpServers` shape of Claude Desktop / Claude Code ([`config`]), started with
//! [`McpClients::start`] (every server concurrently; one that fails is reported in
//! [`McpClients::failures`] and left out). [`McpClients::tool_source`] is a
//! [`halo_core::ToolSource`]: each server's tools as `DynTool`s named
//! `mcp__<server>__<tool>` ([`name`]), swapped in at the next step boundary when a server
//! sends `notifications/tools/list_changed`. See `docs/mcp.md`.
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
