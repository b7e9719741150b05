//! `cargo xtask demo "TASK" [--dir DIR] [--read-only] [--yes]`: sets up what is missing, then
//! runs `examples/coder` (the two flags are passed on to it).
//!
//! With `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, `DEEPSEEK_API_KEY` or `OPENAI_API_KEY` set
//! (picked in that order; each with an optional `*_BASE_URL` and `*_MODEL`), the agent uses
//! that provider and the embedded model is not built. Otherwise the embedded model is used: its build
//! prerequisites are checked (and installed with apt-get on Debian/Ubuntu as root) and the
//! model file is fetched on first use.

use std::path::PathBuf;
use std::process::Command;

use anyhow::bail;

use crate::{root, run_cmd};

/// The task when none is given: one of `cargo xtask bench models`'s tasks that the default
/// embedded model answers right (SmolLM2-135M answers "A tiny project for the Halo demo. See
/// notes.txt."; it gets "What does notes.txt say?" wrong).
const DEFAULT_TASK: &str = "What does README.md say this project is?";

/// The sample folder's files, from `examples/coder/sample` (where `cargo xtask bench models`
/// asks the embedded models its tasks), written into `target/halo-demo` when missing.
const SAMPLE_FILES: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../examples/coder/sample/README.md"),
    ),
    (
        "config.toml",
        include_str!("../../examples/coder/sample/config.toml"),
    ),
    (
        "notes.txt",
        include_str!("../../examples/coder/sample/notes.txt"),
    ),
    (
        "src/main.rs",
        include_str!("../../examples/coder/sample/src/main.rs"),
    ),
    (
        "src/parser.rs",
        include_str!("../../examples/coder/sample/src/parser.rs"),
    ),
];

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut task = None;
    let mut dir = None;
    let mut pass_on: Vec<&str> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            flag @ ("--read-only" | "--yes") => pass_on.push(flag),
            "--dir" => match it.next() {
                Some(d) => dir = Some(PathBuf::from(d)),
                None => bail!("--dir needs a folder"),
            },
            s if s.starts_with("--") => {
                bail!(
                    "unknown option `{s}`; usage: cargo xtask demo \"TASK\" [--dir DIR] [--read-only] [--yes]"
                )
            }
            s if s.trim().is_empty() => {
                bail!("the task is empty; say what the agent should do, in quotes")
            }
            s if task.is_none() => task = Some(s.to_string()),
            s => bail!("unexpected argument `{s}`; put the task in quotes"),
        }
    }
    let task = task.unwrap_or_else(|| DEFAULT_TASK.to_string());

    let dir = match dir {
        Some(d) => {
            if !d.is_dir() {
                bail!("--dir {}: not a folder", d.display());
            }
            d
        }
        None => {
            let d = root().join("target/halo-demo");
            for (path, text) in SAMPLE_FILES {
                let p = d.join(path);
                if !p.exists() {
                    if let Some(parent) = p.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::write(&p, text)?;
                }
            }
            eprintln!(
                "xtask demo: no --dir given; using the sample folder {}",
                d.display()
            );
            d
        }
    };

    let remote = [
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "DEEPSEEK_API_KEY",
        "OPENAI_API_KEY",
    ]
    .iter()
    .any(|k| std::env::var(k).is_ok_and(|v| !v.is_empty()));
    let mut cmd = Command::new("cargo");
    // Not `--quiet`: the first run builds llama.cpp for minutes, and its progress shows that.
    cmd.args(["run", "-p", "coder"]);
    if remote {
        cmd.arg("--no-default-features");
    } else {
        crate::prereqs::ensure()?;
        let model = crate::model::ensure_model()?;
        cmd.env("HALO_MODEL", model);
    }
    cmd.arg("--")
        .arg(&task)
        .arg("--dir")
        .arg(&dir)
        .args(&pass_on);
    run_cmd(&mut cmd)
}
