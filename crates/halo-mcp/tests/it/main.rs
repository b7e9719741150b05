//! Integration tests of halo-mcp (one binary; modules by subject).

mod server;
