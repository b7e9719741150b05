//! `cargo xtask bench cache`: runs the prompt-cache benchmark, the example
//! `crates/halo-adapters/examples/cache_bench.rs` (feature `sim`), over this repository.
//!
//! The example holds the session and the table; its docs say what each column means. It runs
//! in the dev profile: it counts tokens, it does not time anything. It prints figures;
//! nothing is asserted.

/// Runs the benchmark.
///
/// # Errors
/// The example fails to build or run.
pub fn run() -> anyhow::Result<()> {
    crate::run_cmd(
        crate::cargo()
            .args([
                "run",
                "--quiet",
                "-p",
                "halo-adapters",
                "--features",
                "sim",
                "--example",
                "cache_bench",
                "--",
            ])
            .arg(crate::root()),
    )
}
