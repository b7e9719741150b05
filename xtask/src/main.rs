//! `cargo xtask`: Halo's developer tasks.
//!
//! - `cargo xtask ci`: every check CI runs (fmt, clippy, tests, doctests, docs, tidy).
//! - `cargo xtask model [NAME]`: fetch the default (or the named) GGUF model into the cache
//!   folder; prints its path.
//! - `cargo xtask demo "TASK" [--dir DIR] [--read-only] [--yes]`: set up what is missing, then run the coding agent.
//! - `cargo xtask bench <name>`: print measurements (`cache`, `local-cache`, `models`, `sse`, `tools`).

mod bench_cache;
mod bench_local;
mod bench_models;
mod bench_sse;
mod bench_tools;
mod ci;
mod demo;
mod interop;
mod model;
mod prereqs;

use anyhow::bail;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  ci                        run every check CI runs (fmt, clippy, tests, doctests, docs, tidy)
  model [NAME]              fetch the default GGUF model (SmolLM2-135M-Instruct Q4_1), or the one
                            named (smollm2-135m, gemma3-270m); prints its path
  demo \"TASK\" [--dir DIR] [--read-only] [--yes]
                            run the coding agent on TASK in DIR (default: a sample folder);
                            --read-only: reading tools only; --yes: run commands without asking
  interop                   check halo-stream with the `ai` npm package (node)
  bench <name>              print a benchmark's figures; names: cache, local-cache, models, sse, tools";

fn main() {
    if let Err(e) = real_main() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("ci") => ci::run(rest),
        Some("model") => model::run(rest),
        Some("demo") => demo::run(rest),
        Some("interop") => interop::run(),
        Some("bench") => match rest.first().map(String::as_str) {
            Some("cache") => bench_cache::run(),
            Some("local-cache") => bench_local::run(),
            Some("models") => bench_models::run(),
            Some("sse") => bench_sse::run(),
            Some("tools") => bench_tools::run(),
            Some(name) => bail!("unknown benchmark `{name}`\n\n{USAGE}"),
            None => bail!("name a benchmark\n\n{USAGE}"),
        },
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown command `{other}`\n\n{USAGE}"),
        None => bail!("{USAGE}"),
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

/// Runs a command in the workspace root, echoing it; fails on a non-zero exit.
pub fn run_cmd(cmd: &mut std::process::Command) -> anyhow::Result<()> {
    let shown = format!(
        "{} {}",
        cmd.get_program().to_string_lossy(),
        cmd.get_args()
            .map(|a| {
                let a = a.to_string_lossy();
                // A NUL byte cannot be quoted; show the argument as it is then.
                shlex::try_quote(&a).map_or_else(|_| a.to_string(), |q| q.into_owned())
            })
            .collect::<Vec<_>>()
            .join(" ")
    );
    eprintln!("$ {shown}");
    // `cargo run` gave this process the xtask package's CARGO_PKG_* variables. Passed on,
    // they change the environment that build scripts with `rerun-if-env-changed` (ring's)
    // are fingerprinted with, and the whole TLS stack rebuilds for nothing.
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
    let status = cmd
        .current_dir(root())
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run `{shown}`: {e}"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}
