//! `cargo xtask demo ["TASK"] [--dir DIR] [--max-steps N] [--context-window N] [--read-only]
//! [--yes] [--sandbox MODE] [--network] [--session FILE|URL] [--resume] [--json]
//! [--mcp-config FILE]...`: sets up what is
//! missing, then runs `examples/coder`
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
        context_window,
        read_only,
        yes,
        sandbox,
        network,
        session,
        resume,
        json,
        mcp_config,
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
    cmd.args(coder_flags(
        &dir,
        &Flags {
            max_steps,
            context_window,
            read_only,
            yes,
            sandbox,
            network,
            session,
            resume,
            json,
            mcp_config,
        },
    )?);
    run_cmd(&mut cmd)
}

/// The coder flags `cargo xtask demo` passes on, as given.
#[derive(Debug, Default)]
struct Flags {
    max_steps: Option<u32>,
    context_window: Option<u64>,
    read_only: bool,
    yes: bool,
    sandbox: Option<String>,
    network: bool,
    session: Option<String>,
    resume: bool,
    json: bool,
    mcp_config: Vec<std::path::PathBuf>,
}

/// The coder's arguments after TASK: `--dir DIR`, then each flag that was given. The coder
/// runs in the workspace root, so paths the user gave relative to their own folder are made
/// absolute first.
///
/// # Errors
/// When the current directory cannot be read to make a path absolute.
fn coder_flags(dir: &std::path::Path, f: &Flags) -> anyhow::Result<Vec<std::ffi::OsString>> {
    let mut out: Vec<std::ffi::OsString> =
        vec!["--dir".into(), std::path::absolute(dir)?.into_os_string()];
    let mut flag = |name: &str, value: Option<std::ffi::OsString>| {
        out.push(name.into());
        out.extend(value);
    };
    if let Some(n) = f.max_steps {
        flag("--max-steps", Some(n.to_string().into()));
    }
    if let Some(n) = f.context_window {
        flag("--context-window", Some(n.to_string().into()));
    }
    if f.read_only {
        flag("--read-only", None);
    }
    if f.yes {
        flag("--yes", None);
    }
    if let Some(mode) = &f.sandbox {
        flag("--sandbox", Some(mode.into()));
    }
    if f.network {
        flag("--network", None);
    }
    if let Some(session) = &f.session {
        // A store URL goes through as given; a file is made absolute, as the coder runs in
        // another folder.
        let value = if session.contains("://") {
            session.into()
        } else {
            std::path::absolute(session)?.into_os_string()
        };
        flag("--session", Some(value));
    }
    if f.resume {
        flag("--resume", None);
    }
    if f.json {
        flag("--json", None);
    }
    for file in &f.mcp_config {
        flag(
            "--mcp-config",
            Some(std::path::absolute(file)?.into_os_string()),
        );
    }
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_is_passed_on_to_the_coder() {
        let flags = Flags {
            max_steps: Some(41),
            context_window: Some(16_000),
            read_only: true,
            yes: true,
            sandbox: Some("full-access".into()),
            network: true,
            session: Some("/tmp/s.jsonl".into()),
            resume: true,
            json: true,
            mcp_config: vec!["/tmp/a.json".into(), "/tmp/b.json".into()],
        };
        let args = coder_flags(std::path::Path::new("/tmp/p"), &flags).unwrap();
        assert_eq!(
            args,
            [
                "--dir",
                "/tmp/p",
                "--max-steps",
                "41",
                "--context-window",
                "16000",
                "--read-only",
                "--yes",
                "--sandbox",
                "full-access",
                "--network",
                "--session",
                "/tmp/s.jsonl",
                "--resume",
                "--json",
                "--mcp-config",
                "/tmp/a.json",
                "--mcp-config",
                "/tmp/b.json",
            ]
        );
        for url in [
            "postgres://halo@127.0.0.1:5432/halo?session=team",
            "redis://127.0.0.1:6379",
        ] {
            let flags = Flags {
                session: Some(url.into()),
                ..Flags::default()
            };
            let args = coder_flags(std::path::Path::new("/tmp/p"), &flags).unwrap();
            assert_eq!(
                args,
                ["--dir", "/tmp/p", "--session", url],
                "a URL passes unchanged"
            );
        }
        let none = coder_flags(std::path::Path::new("/tmp/p"), &Flags::default()).unwrap();
        assert_eq!(none, ["--dir", "/tmp/p"], "flags not given are not passed");
    }
}
