//! `cargo xtask bench models`: the embedded models side by side on the same read-only tool
//! tasks with checkable answers: tasks right out of the total, the verdict per task, mean
//! seconds per task and tokens.
//!
//! It fetches every model `cargo xtask model NAME` knows ([`crate::model::MODELS`]) if
//! needed and runs the example `examples/coder/examples/model_tasks.rs` over them in the dev
//! profile (which reuses the tests' llama.cpp build, as `bench local-cache` does). The tasks,
//! the sample folder and the checks are in that example. It prints figures; nothing is
//! asserted.

use std::process::Command;

use anyhow::Context;

/// Runs the benchmark.
///
/// # Errors
/// A model cannot be fetched, or the example fails to build or run.
pub fn run() -> anyhow::Result<()> {
    crate::prereqs::ensure()?;
    let mut models = Vec::new();
    for model in crate::model::MODELS {
        let path = model.ensure()?;
        models.push(format!("{}={}", model.name, path.display()));
    }
    let mut cmd = Command::new("cargo");
    cmd.args([
        "run",
        "--quiet",
        "-p",
        "coder",
        "--example",
        "model_tasks",
        "--",
    ])
    .args(&models);
    crate::run_cmd(&mut cmd).context("the models benchmark failed")?;
    Ok(())
}
