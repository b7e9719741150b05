//! Integration tests of halo-mcp's client (one binary; modules by subject): an in-process
//! rmcp server over `tokio::io::duplex`, real child processes, and (gated on
//! `HALO_MCP_PEERS`, set by `cargo xtask interop`) the npm reference servers.

mod fake;
mod in_process;
mod peers;
mod stdio;
