//! `cargo xtask interop`: halo-stream checked by clients nobody here wrote.
//!
//! 1. Writes the UI Message Stream of each scripted scenario
//!    (`cargo run -p halo-stream --example transcript`) to `target/halo-stream-interop/`.
//! 2. Feeds them to the `ai` npm package's own parser and chat client with node's test runner
//!    (`crates/halo-stream/tests/node`, `npm ci` first when its `node_modules` is missing).
//!
//! Needs `node` and `npm`; as root on Debian they are installed with apt-get when missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::{root, run_cmd};

/// The folder of the Node test, relative to the workspace root.
const NODE_TEST_DIR: &str = "crates/halo-stream/tests/node";

pub fn run() -> anyhow::Result<()> {
    let started = Instant::now();
    ensure_node()?;
    let root = root();
    let node_dir = root.join(NODE_TEST_DIR);
    npm_ci_if_missing(&node_dir)?;

    let out = target_dir(&root).join("halo-stream-interop");
    run_cmd(
        Command::new("cargo")
            .args([
                "run",
                "--quiet",
                "-p",
                "halo-stream",
                "--example",
                "transcript",
                "--",
            ])
            .arg(&out),
    )?;

    run_cmd(
        Command::new("node")
            .arg("--test")
            .arg(node_dir.join("ui-message-stream.test.mjs"))
            .env("HALO_TRANSCRIPTS", &out),
    )?;
    eprintln!(
        "xtask interop: the ai package accepted halo-stream's output ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `$CARGO_TARGET_DIR`, or `target/` in the workspace.
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root.join(p) })
        .unwrap_or_else(|| root.join("target"))
}

/// Runs `npm ci` in `dir` unless its `node_modules` exists (the lock file pins every package).
pub fn npm_ci_if_missing(dir: &Path) -> anyhow::Result<()> {
    if dir.join("node_modules").is_dir() {
        return Ok(());
    }
    run_cmd(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(dir),
    )
    .with_context(|| format!("installing the node packages of {}", dir.display()))
}

fn on_path(bin: &str) -> bool {
    Command::new(bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Makes sure `node` and `npm` run; as root with apt-get, installs the missing ones.
pub fn ensure_node() -> anyhow::Result<()> {
    let missing: Vec<&str> = [("node", "nodejs"), ("npm", "npm")]
        .into_iter()
        .filter(|(bin, _)| !on_path(bin))
        .map(|(_, pkg)| pkg)
        .collect();
    if !missing.is_empty() {
        if !(is_root() && on_path("apt-get")) {
            bail!(
                "node and npm are needed for the interop tests.\n\
                 On Debian/Ubuntu: sudo apt-get install {}\n\
                 Elsewhere: install Node.js 20 or newer from your package manager",
                missing.join(" ")
            );
        }
        eprintln!("xtask: installing {} with apt-get", missing.join(" "));
        let ok = Command::new("apt-get")
            .args(["update", "-qq"])
            .status()
            .is_ok_and(|s| s.success())
            && Command::new("apt-get")
                .args(["install", "-y", "-qq", "--no-install-recommends"])
                .args(&missing)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success());
        if !ok || !on_path("node") || !on_path("npm") {
            bail!("`apt-get install {}` failed", missing.join(" "));
        }
    }
    let version = Command::new("node").arg("--version").output()?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 22 {
        // `ai` 7 declares `engines.node >=22`; its client code runs on node 20 (these tests
        // pass there), so this is a note, not a failure.
        eprintln!("note: node {version}; the `ai` package declares node >=22");
    }
    Ok(())
}
