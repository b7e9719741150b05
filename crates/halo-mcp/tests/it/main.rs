//! Integration tests of halo-mcp (one binary; modules by subject). The client: an in-process
//! rmcp server over `tokio::io::duplex`, real child processes, and (gated on
//! `HALO_MCP_PEERS`, set by `cargo xtask interop`) the npm reference servers, and an
//! `https://` server with a certificate of a CA made for the test. The server:
//! rmcp's own client over duplex pipes and loopback HTTP.

mod fake;
mod https;
mod in_process;
mod peers;
mod server;
mod stdio;
