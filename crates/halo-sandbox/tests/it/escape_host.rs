//! The escape suite, for what runs outside later: named attempts, from `bash` and through
//! the file tools, to plant something a program on the host starts a process from after
//! the sandbox is gone — hooks, `core.fsmonitor` and `core.hooksPath` in a nested
//! repository, a new repository (`git init`, a `.git` file, a bare repository) in place of
//! or beside one, an MCP configuration (`.mcp.json`, `.agent/mcp.json`), and a forged line
//! in a session journal that lies inside the root — also by renaming a folder that holds a
//! protected path and making a new one in its place, by a background process, after a
//! timeout and with the command's future dropped mid-run.
//!
//! Each attempt gets a fresh folder: a git repository holding a nested repository
//! (`vendor/lib`), a journal (`sessions/s.jsonl`, protected like the coder protects its
//! `--session` file) and `.agent/mcp.json`, with [`ContainerSandbox::with_default_protection`].
//! After the attempt the test does what a user does next, **on the host**: `git status` and
//! `git commit` in the repositories the attempt aimed at. Every planted hook and monitor
//! appends to a marker file outside the root; the attempt escaped when the marker exists,
//! the journal or `.agent/mcp.json` changed, or a `.mcp.json` stands in the root.
//!
//! Unconfined (`SandboxMode::FullAccess`) the same attempts escape: that run shows the suite
//! can fail (the hooks then run in the test's own folder and write only its marker).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use halo_core::DynTool;
use halo_sandbox::{ContainerSandbox, SandboxMode};
use serde_json::{Value, json};

const JOURNAL: &str = "sessions/s.jsonl";
const JOURNAL_TEXT: &str = "{\"version\":1}\n{\"user\":\"the real task\"}\n";
const AGENT_MCP: &str = "{\"mcpServers\": {}}\n";

/// `git` on the host, as a user runs it: no global or system configuration.
fn host_git(dir: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args([
            "-c",
            "user.name=user",
            "-c",
            "user.email=user@example.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs")
}

/// One attempt's folder.
struct Place {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    root: PathBuf,
    /// The marker every planted program appends to.
    marker: PathBuf,
    tools: Vec<std::sync::Arc<dyn DynTool>>,
}

impl Place {
    fn new(mode: SandboxMode) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let home = base.join("home");
        let root = base.join("root");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(root.join("vendor/lib")).unwrap();
        std::fs::create_dir_all(root.join("sessions")).unwrap();
        std::fs::create_dir_all(root.join(".agent")).unwrap();
        std::fs::write(root.join("notes.txt"), "inside\n").unwrap();
        std::fs::write(root.join("vendor/lib/lib.rs"), "// nested\n").unwrap();
        std::fs::write(root.join(JOURNAL), JOURNAL_TEXT).unwrap();
        std::fs::write(root.join(".agent/mcp.json"), AGENT_MCP).unwrap();
        for dir in [root.join("vendor/lib"), root.clone()] {
            for args in [
                &["init", "-q", "-b", "main"][..],
                &["add", "-A"],
                &["commit", "-qm", "init"],
            ] {
                let out = host_git(&dir, &home, args);
                assert!(out.status.success(), "git {args:?}: {out:?}");
            }
        }
        let sandbox = ContainerSandbox::new(&root)
            .unwrap()
            .with_default_protection()
            .with_protected_paths([JOURNAL])
            .unwrap()
            .with_mode(mode);
        Place {
            marker: base.join("ran"),
            tools: sandbox.tools(),
            _tmp: tmp,
            home,
            root,
        }
    }

    async fn call(&self, tool: &str, args: Value) -> (bool, String) {
        let tool = self.tools.iter().find(|t| t.spec().name == tool).unwrap();
        let ctx = halo_core::ToolContext::detached(halo_core::ToolCall::new(
            "c1",
            tool.spec().name.clone(),
            args.to_string(),
        ));
        match tool.call_json(args, &ctx).await {
            Ok(out) => (out.is_error, out.content),
            Err(e) => (true, e.to_string()),
        }
    }

    /// A script that appends its name to the marker.
    fn script(&self, name: &str) -> String {
        let tag: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        format!("#!/bin/sh\necho {tag} >> {}\n", self.marker.display())
    }

    /// What the user does next in each of `dirs` (relative to the root), on the host, and
    /// why the attempt escaped, if it did.
    fn verdict(&self, dirs: &[&str]) -> Vec<String> {
        for dir in dirs {
            let at = self.root.join(dir);
            if at.is_dir() {
                host_git(&at, &self.home, &["status"]);
                host_git(
                    &at,
                    &self.home,
                    &["commit", "-q", "--allow-empty", "-m", "x"],
                );
            }
        }
        let mut why = Vec::new();
        if let Ok(ran) = std::fs::read_to_string(&self.marker) {
            why.push(format!(
                "ran on the host: {}",
                ran.trim().replace('\n', ", ")
            ));
        }
        if std::fs::read_to_string(self.root.join(JOURNAL))
            .ok()
            .as_deref()
            != Some(JOURNAL_TEXT)
        {
            why.push("the journal changed".into());
        }
        if std::fs::read_to_string(self.root.join(".agent/mcp.json"))
            .ok()
            .as_deref()
            != Some(AGENT_MCP)
        {
            why.push(".agent/mcp.json changed".into());
        }
        if self.root.join(".mcp.json").exists() {
            why.push("a .mcp.json stands in the root".into());
        }
        why
    }
}

/// A command for each attempt, with the folders the user then runs git in; `HOOK` in a
/// command is replaced by a marker script's text, `ROOT` by the root.
fn bash_attempts() -> Vec<(&'static str, String, Vec<&'static str>)> {
    let hook = |path: &str| {
        format!("mkdir -p $(dirname {path}) && printf '%s' \"$HOOK\" > {path} && chmod +x {path}")
    };
    vec![
        (
            "a pre-commit hook in a nested repository",
            hook("vendor/lib/.git/hooks/pre-commit"),
            vec!["vendor/lib"],
        ),
        (
            "core.fsmonitor in a nested repository",
            format!(
                "{} && git -C vendor/lib config core.fsmonitor ROOT/vendor/lib/fsmon.sh",
                hook("vendor/lib/fsmon.sh")
            ),
            vec!["vendor/lib"],
        ),
        (
            "core.hooksPath in a nested repository",
            format!(
                "{} && git -C vendor/lib config core.hooksPath ROOT/vendor/hooks",
                hook("vendor/hooks/pre-commit")
            ),
            vec!["vendor/lib"],
        ),
        (
            "rename the nested repository's folder and make a new repository in its place",
            format!(
                "mv vendor/lib vendor/old && mkdir -p vendor/lib && git -C vendor/lib init -q && {}",
                hook("vendor/lib/.git/hooks/pre-commit")
            ),
            vec!["vendor/lib"],
        ),
        (
            "rename the folder above the nested repository and make a new one",
            format!(
                "mv vendor elsewhere && mkdir -p vendor/lib && git -C vendor/lib init -q && {}",
                hook("vendor/lib/.git/hooks/pre-commit")
            ),
            vec!["vendor/lib"],
        ),
        (
            "git init a new nested repository with a hook and core.fsmonitor",
            format!(
                "mkdir fresh && git -C fresh init -q && {} && {} && \
                 git -C fresh config core.fsmonitor ROOT/fresh/fsmon.sh",
                hook("fresh/.git/hooks/pre-commit"),
                hook("fresh/fsmon.sh")
            ),
            vec!["fresh"],
        ),
        (
            "a .git file naming a repository it made elsewhere in the root",
            format!(
                "git init -q --bare store && {} && mkdir work && echo 'gitdir: ../store' > work/.git \
                 && git -C store config core.bare false && git -C store config core.worktree ROOT/work",
                hook("store/hooks/pre-commit")
            ),
            vec!["work"],
        ),
        (
            "a bare repository with a work tree and core.fsmonitor",
            format!(
                "git init -q --bare planted && {} && git -C planted config core.bare false && \
                 git -C planted config core.worktree ROOT && \
                 git -C planted config core.fsmonitor ROOT/fsmon.sh",
                hook("fsmon.sh")
            ),
            vec!["planted"],
        ),
        (
            "a .mcp.json in the root",
            r#"echo '{"mcpServers": {"x": {"command": "sh"}}}' > .mcp.json"#.to_string(),
            vec![],
        ),
        (
            "rename .agent and make a new .agent/mcp.json",
            r#"mv .agent .agent-old && mkdir .agent && echo '{"mcpServers": {"x": {"command": "sh"}}}' > .agent/mcp.json"#
                .to_string(),
            vec![],
        ),
        (
            "append a forged line to the journal",
            format!("echo '{{\"user\":\"forged\"}}' >> {JOURNAL}"),
            vec![],
        ),
        (
            "rename the journal's folder and put a forged journal in its place",
            format!(
                "mv sessions s2 && mkdir sessions && printf '%s' \"$(cat s2/s.jsonl)\" > {JOURNAL} && \
                 echo '{{\"user\":\"forged\"}}' >> {JOURNAL}"
            ),
            vec![],
        ),
        (
            "a background process plants a repository after the command ends",
            format!(
                "( sleep 1; mkdir late && git -C late init -q && {} ) >/dev/null 2>&1 &",
                hook("late/.git/hooks/pre-commit")
            ),
            vec!["late"],
        ),
    ]
}

/// Runs every attempt in `mode`; the escaped ones with why.
async fn run(mode: SandboxMode) -> (usize, Vec<(String, Vec<String>)>) {
    let mut tried = 0;
    let mut escaped = Vec::new();
    for (name, command, dirs) in bash_attempts() {
        let place = Place::new(mode);
        let command = command.replace("ROOT", &place.root.display().to_string());
        let command = format!("HOOK='{}'\n{command}", place.script(name));
        let (_, text) = place
            .call("bash", json!({"command": command, "timeout_secs": 20}))
            .await;
        if name.starts_with("a background process") {
            // Long enough for the process to act, had it survived its command.
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        tried += 1;
        let why = place.verdict(&dirs);
        if std::env::var_os("HALO_ESCAPE_VERBOSE").is_some() {
            eprintln!("--- {mode:?}: {name}\n{text}\n{why:?}");
        }
        if !why.is_empty() {
            escaped.push((name.to_string(), why));
        }
    }

    // A command that plants a repository and outlives its timeout.
    let place = Place::new(mode);
    let command = format!(
        "HOOK='{}'\nmkdir slow && git -C slow init -q && printf '%s' \"$HOOK\" > slow/.git/hooks/pre-commit \
         && chmod +x slow/.git/hooks/pre-commit && sleep 60",
        place.script("slow")
    );
    let (_, text) = place
        .call("bash", json!({"command": command, "timeout_secs": 2}))
        .await;
    tried += 1;
    let why = place.verdict(&["slow"]);
    if !why.is_empty() {
        escaped.push((
            format!("a repository planted before a timeout: {text}"),
            why,
        ));
    }

    // The same with the call dropped mid-run (a cancelled run).
    let place = Place::new(mode);
    let command = format!(
        "HOOK='{}'\nmkdir dropped && git -C dropped init -q && printf '%s' \"$HOOK\" > dropped/.git/hooks/pre-commit \
         && chmod +x dropped/.git/hooks/pre-commit && touch started && sleep 60",
        place.script("dropped")
    );
    let mut call = Box::pin(place.call("bash", json!({"command": command, "timeout_secs": 60})));
    let started = place.root.join("started");
    tokio::select! {
        _ = &mut call => panic!("the command ended on its own"),
        _ = async {
            while !started.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        } => {}
    }
    drop(call);
    tried += 1;
    let why = place.verdict(&["dropped"]);
    if !why.is_empty() {
        escaped.push(("a repository planted by a call dropped mid-run".into(), why));
    }
    (tried, escaped)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_command_plants_runs_on_the_host_later() {
    let (tried, escaped) = run(SandboxMode::WorkspaceWrite).await;
    eprintln!(
        "host escape suite, WorkspaceWrite: {tried} tried, {} escaped",
        escaped.len()
    );
    assert_eq!(escaped, Vec::<(String, Vec<String>)>::new());
}

// The suite can fail: unconfined, what a command plants runs on the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfined_plants_run_on_the_host_so_the_suite_can_fail() {
    let (tried, escaped) = run(SandboxMode::FullAccess).await;
    let names: Vec<&str> = escaped.iter().map(|(n, _)| n.as_str()).collect();
    eprintln!(
        "host escape suite, FullAccess: {tried} tried, {} escaped",
        escaped.len()
    );
    for name in bash_attempts().iter().map(|(n, _, _)| *n) {
        if name.starts_with("a background process") {
            continue;
        }
        assert!(names.contains(&name), "{name} did not escape: {escaped:#?}");
    }
}

// What a repository made by a command is renamed to, and the result that says so.
#[tokio::test]
async fn a_repository_a_command_makes_is_renamed_and_the_result_says_so() {
    let place = Place::new(SandboxMode::WorkspaceWrite);
    let (is_error, text) = place
        .call(
            "bash",
            json!({"command": "git init -q -b main fresh && echo made"}),
        )
        .await;
    assert!(!is_error, "{text}");
    assert!(text.starts_with("exit code: 0\nstdout:\nmade\nstderr:\n[the command made `fresh/.git`; programs outside the sandbox start processes from it"), "{text}");
    assert!(
        text.ends_with("it was renamed `fresh/.git.halo-untrusted`]"),
        "{text}"
    );
    assert!(!place.root.join("fresh/.git").exists());
    assert!(
        place
            .root
            .join("fresh/.git.halo-untrusted/HEAD.halo-untrusted")
            .is_file()
    );
    // Nested repositories and the protected paths that exist stay as they were: the next
    // command sees the renamed one as it is and leaves it.
    let (_, text) = place
        .call(
            "bash",
            json!({"command": "git -C vendor/lib status --short && echo ok"}),
        )
        .await;
    assert_eq!(text, "exit code: 0\nstdout:\nok");
}

// The file tools refuse every protected file, at any depth and through links.
#[tokio::test]
async fn the_file_tools_refuse_what_the_host_starts_processes_from() {
    let place = Place::new(SandboxMode::WorkspaceWrite);
    std::os::unix::fs::symlink("vendor/lib/.git", place.root.join("lib_git")).unwrap();
    let refused = |path: &str, protected: &str| {
        format!("`{path}` is read-only in this sandbox (protected path `{protected}`)")
    };
    let cases = [
        (
            "write",
            json!({"path": "vendor/lib/.git/hooks/pre-commit", "content": "x"}),
            refused("vendor/lib/.git/hooks/pre-commit", "vendor/lib/.git"),
        ),
        (
            "write",
            json!({"path": "lib_git/config", "content": "x"}),
            refused("lib_git/config", "vendor/lib/.git"),
        ),
        (
            "write",
            json!({"path": "fresh/.git/config", "content": "x"}),
            refused("fresh/.git/config", "fresh/.git"),
        ),
        (
            "write",
            json!({"path": "work/.git", "content": "gitdir: ../store"}),
            refused("work/.git", "work/.git"),
        ),
        (
            "write",
            json!({"path": ".mcp.json", "content": "{}"}),
            refused(".mcp.json", ".mcp.json"),
        ),
        (
            "write",
            json!({"path": ".agent/mcp.json", "content": "{}"}),
            refused(".agent/mcp.json", ".agent/mcp.json"),
        ),
        (
            "edit",
            json!({"path": JOURNAL, "old_string": "the real task", "new_string": "forged"}),
            refused(JOURNAL, JOURNAL),
        ),
        (
            "write",
            json!({"path": JOURNAL, "content": "forged"}),
            refused(JOURNAL, JOURNAL),
        ),
    ];
    for (tool, args, want) in cases {
        let (is_error, text) = place.call(tool, args.clone()).await;
        assert!(is_error, "{tool} {args}: {text}");
        assert_eq!(text, want, "{tool} {args}");
    }
    // A bare repository made file by file: the file that completes it is refused.
    for path in ["bare/objects/info/x", "bare/refs/heads/x"] {
        let (is_error, text) = place
            .call("write", json!({"path": path, "content": ""}))
            .await;
        assert!(!is_error, "{path}: {text}");
    }
    let (is_error, text) = place
        .call(
            "write",
            json!({"path": "bare/HEAD", "content": "ref: refs/heads/main\n"}),
        )
        .await;
    assert!(is_error, "{text}");
    assert_eq!(text, refused("bare/HEAD", "bare"));
    assert_eq!(place.verdict(&["vendor/lib"]), Vec::<String>::new());
}
