//! `cargo xtask bench context`: runs the context-strategy benchmark, the package
//! `examples/context-bench` (issue 12 §4), over this repository.
//!
//! The package holds the session, the strategies and the table; its docs say what each
//! column means. It is a package of its own, not an example of a leaf crate, because it
//! needs halo-adapters' simulators and halo-strategies together, and tidy's layering rule
//! counts dev-dependencies too. It runs in the dev profile: it counts tokens, it does not
//! time anything. It prints figures; nothing is asserted.

/// Runs the benchmark.
///
/// # Errors
/// The package fails to build or run.
pub fn run() -> anyhow::Result<()> {
    crate::run_cmd(
        crate::cargo()
            .args(["run", "--quiet", "-p", "context-bench", "--"])
            .arg(crate::root()),
    )
}
