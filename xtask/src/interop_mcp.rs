//! `cargo xtask interop`, the MCP part: halo-mcp's client against the npm reference servers.
//!
//! `client()` installs `@modelcontextprotocol/server-everything`, `server-filesystem` and
//! `server-memory` with `npm ci` in `crates/halo-mcp/tests/peers/npm` (versions pinned by
//! its lock file), then runs halo-mcp's tests and the coder's MCP test with
//! `HALO_MCP_PEERS` set to that folder: listing, calls, error results, a validation
//! failure, a server killed mid-call, `list_changed`, and the coder calling
//! `mcp__everything__echo` through a loopback model. Without the variable those tests skip.

use std::process::Command;
use std::time::Instant;

use crate::interop::{ensure_node, npm_ci_if_missing};
use crate::{root, run_cmd};

/// The npm project of the MCP servers, relative to the workspace root.
const PEERS_DIR: &str = "crates/halo-mcp/tests/peers/npm";

/// The client side: halo-mcp (and the coder) against the real servers.
pub fn client() -> anyhow::Result<()> {
    let started = Instant::now();
    ensure_node()?;
    let peers = root().join(PEERS_DIR);
    npm_ci_if_missing(&peers)?;
    let nextest = Command::new("cargo")
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    let runs: [&[&str]; 2] = [
        &["-p", "halo-mcp"],
        &[
            "-p",
            "coder",
            "--no-default-features",
            "--test",
            "it",
            "mcp",
        ],
    ];
    for args in runs {
        let mut cmd = Command::new("cargo");
        if nextest {
            cmd.args(["nextest", "run", "--no-fail-fast"]);
        } else {
            cmd.arg("test");
        }
        cmd.args(args).env("HALO_MCP_PEERS", &peers);
        run_cmd(&mut cmd)?;
    }
    eprintln!(
        "xtask interop: halo-mcp's client passed against the npm MCP servers ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
