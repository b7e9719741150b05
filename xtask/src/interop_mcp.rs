//! `cargo xtask interop`, the MCP part: halo-mcp checked by MCP peers nobody here wrote.
//!
//! [`client`] installs `@modelcontextprotocol/server-everything`, `server-filesystem` and
//! `server-memory` with `npm ci` in `crates/halo-mcp/tests/peers/npm` (versions pinned by
//! its lock file) and returns that folder: halo-mcp's peer tests and the coder's MCP tests
//! run with `HALO_MCP_PEERS` naming it (listing, calls, error results, a validation
//! failure, a server killed mid-call, `list_changed`, and the coder calling
//! `mcp__everything__echo` through a loopback model). Without the variable those tests skip.
//!
//! [`server`] checks `coder mcp-serve` over stdio and streamable HTTP (the clients send the
//! bearer token the server gets in `HALO_MCP_TOKEN`, and see `401` without it; the binary
//! `interop::peers` built), in both
//! protocol eras, with two clients:
//! 1. the official Python MCP client (PyPI `mcp` 2.x, pinned in
//!    `crates/halo-mcp/tests/peers/python/requirements.txt`;
//!    `crates/halo-mcp/tests/peers/python/test_server.py`). The packages go into a venv under
//!    the target dir (`$CARGO_TARGET_DIR/mcp-interop/py-venv`), reinstalled when the
//!    requirements file is newer than the venv's stamp. Needs `python3` with `venv` (Debian:
//!    `python3-venv`);
//! 2. the MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`, pinned by the lock file
//!    of `crates/halo-mcp/tests/peers/inspector`, `npm ci` when missing) with node's test
//!    runner. Needs node, which `interop::run` has ensured before.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use crate::interop::target_dir;
use crate::interop::{ensure_node, npm_ci_if_missing};
use crate::{root, run_cmd};
/// The npm project of the MCP servers, relative to the workspace root.
const PEERS_DIR: &str = "crates/halo-mcp/tests/peers/npm";

/// The client side: halo-mcp (and the coder) against the real servers.
pub fn client() -> anyhow::Result<PathBuf> {
    ensure_node()?;
    let peers = root().join(PEERS_DIR);
    npm_ci_if_missing(&peers)?;
    eprintln!(
        "xtask interop: the npm MCP servers are installed in {}",
        peers.display()
    );
    Ok(peers)
}

/// The Python peer's folder, relative to the workspace root.
const PYTHON_PEER_DIR: &str = "crates/halo-mcp/tests/peers/python";

/// The inspector peer's npm project, relative to the workspace root.
const INSPECTOR_PEER_DIR: &str = "crates/halo-mcp/tests/peers/inspector";

/// Runs the Python MCP client and the inspector CLI against `coder mcp-serve`.
pub fn server() -> anyhow::Result<()> {
    let started = Instant::now();
    let root = root();
    let peer = root.join(PYTHON_PEER_DIR);
    let target = target_dir(&root);
    let python = crate::interop::python_venv(
        &target.join("mcp-interop/py-venv"),
        &peer.join("requirements.txt"),
    )?;
    run_cmd(
        Command::new(&python)
            .arg(peer.join("test_server.py"))
            .env("HALO_CODER_BIN", target.join("debug/coder"))
            .env("RUST_LOG", "warn"),
    )?;
    eprintln!(
        "xtask interop: the Python MCP client passed against coder mcp-serve ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let inspector = root.join(INSPECTOR_PEER_DIR);
    crate::interop::npm_ci_if_missing(&inspector)?;
    run_cmd(
        Command::new("node")
            .arg("--test")
            .arg(inspector.join("inspector.test.mjs"))
            .env("HALO_CODER_BIN", target.join("debug/coder"))
            .env("RUST_LOG", "warn"),
    )?;
    eprintln!(
        "xtask interop: the MCP Inspector CLI passed against coder mcp-serve ({:.1} s in all)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
