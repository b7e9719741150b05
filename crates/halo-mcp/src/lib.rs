//! # halo-mcp
//!
//! Bridges Model Context Protocol servers' tools into Halo agents, over the `rmcp` crate.
//!
//! **Status: empty.** This crate has no API yet; the MCP bridge is a later issue. It exists
//! so the workspace layout is final and the dependency rules (leaf crates depend only on
//! `halo-core`) are checked from the start.
