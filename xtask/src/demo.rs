//! `cargo xtask demo ["TASK"] [--dir DIR] [--max-steps N] [--read-only] [--yes]
//! [--sandbox MODE] [--network] [--session FILE] [--resume] [--json]`: sets up what is missing, then runs `examples/coder`
//! (the flags are the coder's and are passed on to it).
//!
//! With `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, `DEEPSEEK_API_KEY` or `OPENAI_API_KEY` set
//! (picked in that order; each with an optional `*_BASE_URL` and `*_MODEL`), the agent uses
//! that provider and the embedded model is not built. Otherwise the embedded model is used: its build
//! prerequisites are checked (and installed with apt-get on Debian/Ubuntu as root) and the
//! model file is fetched on first use.

use anyhow::bail;

use crate::cli::DemoArgs;
use crate::{root, run_cmd};

/// The task when none is given: one of `cargo xtask bench models`'s tasks that the default
/// embedded model answers right (SmolLM2-135M answers "A tiny project for the Halo demo. See
/// notes.txt."; it gets "What does notes.txt say?" wrong).
pub const DEFAULT_TASK: &str = "What does README.md say this project is?";

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

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    let DemoArgs {
        task,
        dir,
        max_steps,
        read_only,
        yes,
        sandbox,
        network,
        session,
        resume,
        json,
    } = args;
    // `--resume` continues the session's run: no task (clap refuses one given with it).
    let task = (!resume).then(|| task.unwrap_or_else(|| DEFAULT_TASK.to_string()));
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
    let mut cmd = crate::cargo();
    // Not `--quiet`: the first run builds llama.cpp for minutes, and its progress shows that.
    cmd.args(["run", "-p", "coder"]);
    if remote {
        // A hosted model gets `bash`, which runs in bubblewrap (the embedded one is read-only).
        crate::prereqs::ensure_sandbox()?;
        cmd.arg("--no-default-features");
        if !built(false) {
            eprintln!(
                "xtask demo: building the coder for a hosted provider (the first build takes \
                 about 2 min on 2 cores)"
            );
        }
    } else {
        crate::prereqs::ensure()?;
        let model = crate::model::ensure_model()?;
        cmd.env("HALO_MODEL", model);
        if !built(true) {
            eprintln!(
                "xtask demo: building the coder with the embedded model; the first build \
                 compiles llama.cpp (C++) and takes about 6 min on 2 cores; later runs start \
                 in seconds"
            );
        }
    }
    cmd.arg("--");
    if let Some(task) = &task {
        cmd.arg(task);
    }
    // The coder runs in the workspace root: paths the user gave relative to their own folder
    // are made absolute first.
    cmd.arg("--dir").arg(std::path::absolute(&dir)?);
    if let Some(n) = max_steps {
        cmd.arg("--max-steps").arg(n.to_string());
    }
    if read_only {
        cmd.arg("--read-only");
    }
    if yes {
        cmd.arg("--yes");
    }
    if let Some(mode) = &sandbox {
        cmd.arg("--sandbox").arg(mode);
    }
    if network {
        cmd.arg("--network");
    }
    if let Some(session) = &session {
        cmd.arg("--session").arg(std::path::absolute(session)?);
    }
    if resume {
        cmd.arg("--resume");
    }
    if json {
        cmd.arg("--json");
    }
    run_cmd(&mut cmd)
}

/// Whether the coder binary was built before, with (`local`) or without the embedded model: a
/// hint for the progress line only (cargo decides what to rebuild).
fn built(local: bool) -> bool {
    let target = crate::interop::target_dir(&root());
    let stamp = if local {
        // llama.cpp's build output: present once the embedded model has been built.
        target.join("debug/build")
    } else {
        target.join("debug/coder")
    };
    if !local {
        return stamp.exists();
    }
    std::fs::read_dir(stamp).is_ok_and(|rd| {
        rd.flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("llama-cpp-sys-2-")
                && e.path().join("output").exists()
        })
    })
}
