//! `cargo xtask`: Halo's developer tasks (`cargo xtask --help` lists them).
//!
//! - `cargo xtask ci`: every check CI runs (tidy, fmt, clippy, doctests, interop, tests, docs).
//! - `cargo xtask fresh [--all] [--keep]`: the README's first command (with `--all` also `ci`)
//!   in a clean Debian chroot made with debootstrap, as on a new machine.
//! - `cargo xtask model [NAME]`: fetch the default (or the named) GGUF model into the cache
//!   folder; prints its path.
//! - `cargo xtask demo ["TASK"] [--dir DIR] [--max-steps N] [--read-only] [--yes]`: set up
//!   what is missing, then run the coding agent.
//! - `cargo xtask bench <name>`: print measurements (`cache`, `context`, `local-cache`, `loop`,
//!   `models`, `sessions`, `sse`, `tools`).
//! - `cargo xtask release`: check versions and the changelog, package every crate, print the tag.
//! - `cargo xtask restate`: install the Restate server the durable-run tests start (npm, pinned
//!   by `examples/durable/restate`, installed there); prints its path.
//!
//! xtask depends on no Halo crate: what needs one runs as an example (or, for `bench context`,
//! the package `examples/context-bench`) through `cargo run`, so a broken adapter cannot break
//! the CI entry point and `tidy` does not wait for reqwest.

mod bench_cache;
mod bench_context;
mod bench_local;
mod bench_loop;
mod bench_models;
mod bench_sessions;
mod bench_sse;
mod bench_tools;
mod ci;
mod cli;
mod demo;
mod fresh;
mod interop;
mod interop_gateway;
mod interop_mcp;
mod interop_otel;
mod interop_skills;
mod model;
mod prereqs;
mod release;
mod restate;

use anyhow::bail;
use clap::Parser as _;

fn main() {
    let cli = cli::Cli::parse();
    if let Err(e) = cli::dispatch(cli) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// The workspace root (the parent of xtask/).
///
/// Read from `CARGO_MANIFEST_DIR` at run time (`cargo run`, which the `cargo xtask` alias
/// uses, sets it): two checkouts sharing one target dir share one xtask binary, and the path
/// compiled into it would point at whichever checkout built it last.
pub fn root() -> std::path::PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or(manifest)
}

/// The command line as it can be pasted into a shell (arguments quoted where needed).
pub fn shown(cmd: &std::process::Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| {
            let a = a.to_string_lossy();
            // A NUL byte cannot be quoted; show the argument as it is then.
            shlex::try_quote(&a).map_or_else(|_| a.to_string(), |q| q.into_owned())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `cargo` command: the cargo running xtask, else `cargo` on the PATH.
pub fn cargo() -> std::process::Command {
    std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Removes the variables `cargo run` gave xtask from what `cmd` inherits.
///
/// Passed on, `CARGO_PKG_*` and friends change the environment that build scripts with
/// `rerun-if-env-changed` (ring's) are fingerprinted with, and the whole TLS stack rebuilds
/// for nothing.
fn drop_cargo_run_env(cmd: &mut std::process::Command) {
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_PKG_")
            || [
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&key.as_ref())
        {
            cmd.env_remove(key.as_ref());
        }
    }
}

/// Runs a command in the workspace root, echoing it; fails on a non-zero exit.
pub fn run_cmd(cmd: &mut std::process::Command) -> anyhow::Result<()> {
    let shown = shown(cmd);
    eprintln!("$ {shown}");
    drop_cargo_run_env(cmd);
    let status = cmd
        .current_dir(root())
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run `{shown}`: {e}"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}
