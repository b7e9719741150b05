//! `cargo xtask bench cache`: runs the prompt-cache benchmark, the example
//! package `examples/cache-bench`, over this repository.
//!
//! The package holds the session and the table; its docs say what each column means. It runs
//! in the dev profile: it counts tokens, it does not time anything. It prints figures;
//! nothing is asserted.

/// Runs the benchmark.
///
/// # Errors
/// The example fails to build or run.
pub fn run() -> anyhow::Result<()> {
    crate::run_cmd(
        crate::cargo()
            .args(["run", "--quiet", "-p", "cache-bench", "--"])
            .arg(crate::root()),
    )
}
