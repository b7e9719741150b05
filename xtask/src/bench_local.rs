//! `cargo xtask bench local-cache`: prefill time of a ~1,000-token prompt on the embedded
//! model, cold versus with all but its last few tokens reused from the KV cache, and their
//! ratio (goal: at least 15x); then the generation speed.
//!
//! It fetches the model if needed and runs the example
//! `crates/halo-adapters/examples/local_cache_bench.rs` in the dev profile: the workspace
//! gives `llama-cpp-sys-2` and `llama-cpp-2` `opt-level = 3` there (and llama.cpp's CMake
//! build is `Release` either way), so this reuses the llama.cpp build of the tests instead of
//! compiling it a second time for `--release`. It prints figures; nothing is asserted.

use std::process::Command;

use anyhow::{Context, bail};

/// Runs the benchmark.
///
/// # Errors
/// The model cannot be fetched, or the example fails to build or run.
pub fn run() -> anyhow::Result<()> {
    crate::prereqs::ensure()?;
    let model = crate::model::ensure_model()?;
    let root = crate::root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "bench local-cache: cargo run -p halo-adapters --features local --example local_cache_bench"
    );
    let status = Command::new(cargo)
        .current_dir(&root)
        .args([
            "run",
            "--quiet",
            "-p",
            "halo-adapters",
            "--features",
            "local",
            "--example",
            "local_cache_bench",
        ])
        .env("HALO_MODEL", &model)
        .status()
        .context("cannot run cargo")?;
    if !status.success() {
        bail!("the local-cache benchmark failed ({status})");
    }
    Ok(())
}
