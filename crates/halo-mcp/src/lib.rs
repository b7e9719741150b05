//! # halo-mcp
//!
//! Model Context Protocol both ways for Halo, over the official Rust SDK `rmcp` 3.11:
//!
//! - [`server`]: a Halo tool set (and optionally the agent itself) served as an MCP server
//!   over stdio or streamable HTTP, each call run through the same hooks as in an agent
//!   (denylist, permission policy, truncation); bridge mode re-exports external MCP
//!   servers' tools next to the local ones.
//!
//! See `docs/mcp.md` for what of the MCP spec is supported.

// The server side (`src/server/`).
pub mod server;
pub use server::{AgentTool, McpServer, McpServerBuilder, Progress, ServerError};
