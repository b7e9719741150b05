//! The npm reference servers (gated on `HALO_MCP_PEERS`).
