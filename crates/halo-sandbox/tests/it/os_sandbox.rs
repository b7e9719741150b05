//! Ordinary work in the OS sandbox ([`SandboxMode::WorkspaceWrite`], `.git` protected):
//! building and testing a Rust crate with the machine's cargo, a Python project's unittest,
//! git's reading commands, pipes, redirections and here-docs, and output kept within its cap.
//! In [`SandboxMode::ReadOnly`], a here-doc larger than a pipe has no room (pinned).

use std::process::Command;

use halo_sandbox::{DEFAULT_ENV_ALLOWLIST, SandboxMode};
use serde_json::json;

use crate::common::Fixture;

/// Whether `program` runs here (`program --version` succeeds).
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A WorkspaceWrite sandbox with `.git` protected, as a coding agent gets it.
fn workspace() -> Fixture {
    Fixture::with(|s| s.with_protected_paths([".git"]).expect("protect .git"))
}

// cargo needs nothing writable outside the root for a crate without dependencies (nor for
// one whose dependencies are already unpacked in the registry: cargo skips its package-cache
// lock on a read-only CARGO_HOME): `target/` is in the root, rustc's temporary files are in
// the private /tmp. CARGO_HOME and RUSTUP_HOME are in the default allowlist, so a toolchain
// installed elsewhere than ~/.cargo (as in the rust Docker images) is found; RUSTUP_TOOLCHAIN
// (set by rustup's proxy for the test run) is added here; CARGO_TARGET_DIR is not, since a
// target folder outside the root is read-only here.
#[tokio::test]
async fn cargo_builds_and_tests_a_crate_in_the_root() {
    if !runs("cargo") {
        eprintln!("skipped: no cargo");
        return;
    }
    let f = Fixture::with(|s| {
        s.with_protected_paths([".git"])
            .expect("protect .git")
            .with_env_allowlist(
                DEFAULT_ENV_ALLOWLIST
                    .iter()
                    .copied()
                    .chain(["RUSTUP_TOOLCHAIN"]),
            )
    });
    f.file(
        "adder/Cargo.toml",
        "[package]\nname = \"adder\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    );
    f.file(
        "adder/src/lib.rs",
        "/// Adds.\n///\n/// ```\n/// assert_eq!(adder::add(2, 2), 4);\n/// ```\n\
         pub fn add(a: u64, b: u64) -> u64 {\n    a + b\n}\n\n\
         #[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        \
         assert_eq!(super::add(1, 2), 3);\n    }\n}\n",
    );
    let out = f
        .ok(
            "bash",
            json!({"command": "cd adder && cargo test --offline 2>&1", "timeout_secs": 600}),
        )
        .await;
    assert!(out.starts_with("exit code: 0\n"), "{out}");
    assert!(out.contains("test tests::adds ... ok"), "{out}");
    assert!(
        out.contains("src/lib.rs - add (line 3) ... ok"),
        "the doctest: {out}"
    );
    assert!(f.path("adder/target/debug").is_dir(), "{out}");
    assert!(f.path("adder/Cargo.lock").is_file(), "{out}");
}

#[tokio::test]
async fn python_unittest_runs_in_the_root() {
    if !runs("python3") {
        eprintln!("skipped: no python3");
        return;
    }
    let f = workspace();
    f.file("calc/calc.py", "def add(a, b):\n    return a + b\n");
    f.file(
        "calc/test_calc.py",
        "import unittest\n\nimport calc\n\n\nclass TestAdd(unittest.TestCase):\n    \
         def test_add(self):\n        self.assertEqual(calc.add(1, 2), 3)\n\n    \
         def test_strings(self):\n        self.assertEqual(calc.add(\"a\", \"b\"), \"ab\")\n",
    );
    let out = f
        .ok(
            "bash",
            json!({"command": "cd calc && python3 -m unittest -v 2>&1", "timeout_secs": 120}),
        )
        .await;
    assert!(out.starts_with("exit code: 0\n"), "{out}");
    assert!(out.contains("Ran 2 tests"), "{out}");
    assert!(out.ends_with("\nOK"), "{out}");
    // Python wrote its bytecode cache in the root.
    assert!(f.path("calc/__pycache__").is_dir(), "{out}");
}

#[tokio::test]
async fn git_reads_a_repository_whose_git_is_read_only() {
    let f = workspace();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=halo",
                "-c",
                "user.email=halo@example.invalid",
            ])
            .args(args)
            .current_dir(f.sandbox.root())
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    f.file("a.txt", "one\n");
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    let head = git(&["rev-parse", "--short", "HEAD"]);
    f.file("a.txt", "two\n");
    f.file("new.txt", "untracked\n");
    let git_before = git(&["rev-parse", "HEAD"]);

    assert_eq!(
        f.ok("bash", json!({"command": "git status --short"})).await,
        "exit code: 0\nstdout:\n M a.txt\n?? new.txt"
    );
    let diff = f
        .ok("bash", json!({"command": "git diff --no-color"}))
        .await;
    assert!(diff.starts_with("exit code: 0\nstdout:\n"), "{diff}");
    assert!(diff.contains("\n-one\n+two"), "{diff}");
    assert_eq!(
        f.ok("bash", json!({"command": "git log --oneline"})).await,
        format!("exit code: 0\nstdout:\n{} first", head.trim())
    );
    // Writing the repository is what the protection refuses.
    let commit = f
        .ok(
            "bash",
            json!({"command": "git -c user.name=a -c user.email=a@b commit -qam second"}),
        )
        .await;
    assert!(
        commit.starts_with("exit code: 128\nstderr:\n")
            && commit.contains("index.lock': Read-only file system"),
        "{commit}"
    );
    assert_eq!(git(&["rev-parse", "HEAD"]), git_before);
}

#[tokio::test]
async fn pipes_redirections_and_a_small_here_doc_work() {
    let f = workspace();
    let command = "printf 'b\\na\\nc\\n' | sort | tr a-z A-Z > sorted.txt\n\
                   wc -l < sorted.txt\n\
                   head -n 2 sorted.txt\n\
                   { echo out; echo err >&2; } 2>&1 | paste -sd, -\n\
                   echo only-stderr >&2\n\
                   echo appended >> sorted.txt\n\
                   cat <<'EOF' > note.txt\n\
                   $HOME is not expanded\n\
                   EOF\n\
                   cat note.txt";
    assert_eq!(
        f.ok("bash", json!({ "command": command })).await,
        "exit code: 0\nstdout:\n3\nA\nB\nout,err\n$HOME is not expanded\nstderr:\nonly-stderr"
    );
    assert_eq!(
        std::fs::read_to_string(f.path("sorted.txt")).unwrap(),
        "A\nB\nC\nappended\n"
    );
}

// bash keeps a here-doc larger than a pipe holds (64 KiB) in a temporary file: in the
// private, writable /tmp of WorkspaceWrite.
#[tokio::test]
async fn a_here_doc_larger_than_64_kib_works() {
    let f = workspace();
    let command = format!(
        "cat > big.txt <<'EOF'\n{}\nEOF\nwc -c < big.txt",
        "x".repeat(70_000)
    );
    let out = f.ok("bash", json!({ "command": command })).await;
    assert_eq!(out, "exit code: 0\nstdout:\n70001");
    assert_eq!(std::fs::read(f.path("big.txt")).unwrap().len(), 70_001);
}

// Pinned: the command is one argument of `bash -c`, and Linux refuses an argument longer
// than 128 KiB (MAX_ARG_STRLEN), sandbox or not: such a command does not start.
#[tokio::test]
async fn a_command_longer_than_128_kib_does_not_start() {
    let f = workspace();
    let command = format!("cat > big.txt <<'EOF'\n{}\nEOF", "x".repeat(128 * 1024));
    match f.call("bash", json!({ "command": command })).await {
        Err(halo_core::ToolError::Failed(msg)) => {
            assert!(msg.contains("Argument list too long"), "{msg}")
        }
        other => panic!("expected a failure, got {:?}", other.map(|o| o.content)),
    }
}

// Pinned: in ReadOnly, /tmp is read-only too, so a here-doc that does not fit in a pipe has
// nowhere to go.
#[tokio::test]
async fn in_read_only_a_here_doc_larger_than_a_pipe_has_no_room() {
    let f = Fixture::with(|s| s.with_mode(SandboxMode::ReadOnly));
    let command = format!("cat <<'EOF' | wc -c\n{}\nEOF", "x".repeat(70_000));
    let out = f.ok("bash", json!({ "command": command })).await;
    assert!(
        out.contains("cannot create temp file for here-document: Read-only file system"),
        "{out}"
    );
}

#[tokio::test]
async fn long_output_is_capped_in_the_sandbox() {
    let f = workspace();
    let out = f
        .ok(
            "bash",
            json!({"command": "seq 1 200000 | cat | tee seq.txt"}),
        )
        .await;
    let total: usize = (1..=200_000u32).map(|n| n.to_string().len() + 1).sum();
    let kept = halo_sandbox::DEFAULT_OUTPUT_LIMIT / 2;
    assert!(out.starts_with("exit code: 0\nstdout:\n1\n2\n3\n"), "{out}");
    assert!(
        out.contains(&format!("[... {} bytes omitted ...]", total - kept)),
        "{out}"
    );
    assert!(out.ends_with("\n199999\n200000"), "{out}");
    assert!(out.len() <= halo_sandbox::DEFAULT_OUTPUT_LIMIT + halo_sandbox::NOTES_MARGIN);
    // The file got all of it.
    assert_eq!(
        std::fs::metadata(f.path("seq.txt")).unwrap().len() as usize,
        total
    );
}
