//! `cargo xtask bench sse`: decode throughput of the streaming path (Halo's SSE layer plus
//! chat-completion chunk assembly) over a ~32 MB generated stream in OpenAI's chunk format
//! with interleaved tool-call deltas, next to a bare `serde_json` parse of the same chunks,
//! and their ratio (goal: at least 0.5); then the time from the first body byte to the first
//! event, in memory and through the adapter over loopback HTTP.
//!
//! It runs the example `crates/halo-adapters/examples/sse_bench.rs` with `--release`:
//! throughput of unoptimized serde_json says nothing. The first run compiles the adapter's
//! dependencies in the release profile (minutes on two cores); later runs reuse them. It
//! prints figures; nothing is asserted.

use std::process::Command;

/// Runs the benchmark.
///
/// # Errors
/// The example fails to build or run.
pub fn run() -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // Through `run_cmd`, which drops xtask's CARGO_PKG_* variables so ring is not rebuilt.
    crate::run_cmd(Command::new(cargo).args([
        "run",
        "--quiet",
        "--release",
        "-p",
        "halo-adapters",
        "--example",
        "sse_bench",
    ]))
}
