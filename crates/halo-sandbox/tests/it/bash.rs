//! `bash`: exit codes and stderr as data, timeouts that kill the whole process group, a
//! scrubbed environment and bounded output.

use serde_json::json;

use halo_sandbox::SandboxMode;

use crate::common::{Fixture, survivors};

/// A marker unique to this test process and `name`, for a process to carry in its command
/// line (`exec -a MARKER sleep 30`), so its survival can be checked from outside any PID
/// namespace.
fn marker(name: &str) -> String {
    format!("halo-bash-{name}-{}", std::process::id())
}

/// Live processes whose command line holds `marker`, after the kernel had a moment to finish
/// a kill in progress.
async fn left_behind(marker: &str) -> Vec<String> {
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    survivors(marker, "none")
}

#[tokio::test]
async fn exit_code_stdout_and_stderr_are_reported_as_data() {
    let f = Fixture::new();
    assert_eq!(
        f.ok("bash", json!({"command": "echo hi; echo oops >&2; exit 3"}))
            .await,
        "exit code: 3\nstdout:\nhi\nstderr:\noops"
    );
    assert_eq!(
        f.ok("bash", json!({"command": "true"})).await,
        "exit code: 0\n(no output)"
    );
    let missing = f
        .ok("bash", json!({"command": "no_such_command_halo"}))
        .await;
    assert!(
        missing.starts_with("exit code: 127\nstderr:\n") && missing.contains("not found"),
        "{missing}"
    );
    assert_eq!(
        f.ok("bash", json!({"command": "kill -9 $$"})).await,
        "killed by signal 9\n(no output)"
    );
}

#[tokio::test]
async fn commands_run_in_the_root_with_stdin_closed() {
    let f = Fixture::new();
    f.file("here.txt", "");
    let root = f.sandbox.root().display().to_string();
    assert_eq!(
        f.ok("bash", json!({"command": "pwd; ls"})).await,
        format!("exit code: 0\nstdout:\n{root}\nhere.txt")
    );
    // `cat` would wait forever on an open stdin.
    assert_eq!(
        f.ok("bash", json!({"command": "cat; echo done"})).await,
        "exit code: 0\nstdout:\ndone"
    );
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let f = Fixture::new();
    let m = marker("timeout");
    let out = f
        .ok(
            "bash",
            json!({"command": format!("(exec -a {m} sleep 30) & sleep 30"), "timeout_secs": 1}),
        )
        .await;
    assert_eq!(
        out,
        "timed out after 1 s; the command and its child processes were killed\n(no output)"
    );
    assert_eq!(left_behind(&m).await, Vec::<String>::new());
}

#[tokio::test]
async fn background_children_are_killed_when_the_command_ends() {
    let f = Fixture::new();
    let m = marker("background");
    let out = f
        .ok(
            "bash",
            json!({"command": format!("(exec -a {m} sleep 30) & echo started")}),
        )
        .await;
    assert_eq!(out, "exit code: 0\nstdout:\nstarted");
    assert_eq!(left_behind(&m).await, Vec::<String>::new());
}

/// A command that starts `sleep` in a new session (`setsid`), waits until it runs, and ends.
fn escape_by_setsid(m: &str) -> String {
    format!(
        "setsid bash -c 'echo > started; exec -a {m} sleep 30' & \
         while [ ! -e started ]; do sleep 0.01; done; echo escaped"
    )
}

// In the OS sandbox a process that left the process group (setsid) still lives in the
// command's PID namespace, and dies with it.
#[tokio::test]
async fn a_process_that_leaves_the_group_dies_with_the_command() {
    let f = Fixture::new();
    let m = marker("setsid");
    let out = f.ok("bash", json!({"command": escape_by_setsid(&m)})).await;
    assert_eq!(out, "exit code: 0\nstdout:\nescaped");
    assert_eq!(left_behind(&m).await, Vec::<String>::new());
}

// Regression, unconfined: a process that leaves the process group (setsid) keeps the output
// pipes open; the call must still return, with what was read and a note saying so.
#[tokio::test]
async fn unconfined_a_process_that_escapes_the_group_cannot_hang_the_call() {
    let f = Fixture::with(|s| s.with_mode(SandboxMode::FullAccess));
    let m = marker("unconfined-setsid");
    let out = f.ok("bash", json!({"command": escape_by_setsid(&m)})).await;
    let survived = survivors(&m, "none");
    for line in &survived {
        let pid = line.split(':').next().expect("pid");
        let _ = std::process::Command::new("kill")
            .args(["-9", pid])
            .status();
    }
    assert_eq!(
        out,
        "exit code: 0\nstdout:\nescaped\nstderr:\n[a process that left the command's process group \
         kept its output open; the output may be incomplete]"
    );
    assert_eq!(survived.len(), 1, "{survived:?}");
}

#[tokio::test]
async fn output_keeps_its_start_and_end_within_the_limit() {
    let f = Fixture::with(|s| s.with_output_limit(4096));
    let out = f
        .ok(
            "bash",
            json!({"command": "printf 'S'; head -c 99998 /dev/zero | tr '\\0' a; printf 'E'"}),
        )
        .await;
    // 2048 bytes for stdout: its first 1024 and its last 1024.
    let expected = format!(
        "exit code: 0\nstdout:\nS{}\n[... 97952 bytes omitted ...]\n{}E",
        "a".repeat(1023),
        "a".repeat(1023)
    );
    assert_eq!(out, expected);
}

/// The environment check, run in a child test process that was given a fake API key.
/// Ignored in normal runs: `the_environment_is_scrubbed` runs it.
#[tokio::test]
#[ignore = "run by the_environment_is_scrubbed in a child process"]
async fn scrubbed_environment_child() {
    let Ok(key) = std::env::var("HALO_SANDBOX_FAKE_API_KEY") else {
        return;
    };
    assert_eq!(key, "sk-fake-123");
    let f = Fixture::new();
    let env = f.ok("bash", json!({"command": "env"})).await;
    assert!(!env.contains("HALO_SANDBOX_FAKE_API_KEY"), "{env}");
    assert!(!env.contains("sk-fake-123"), "{env}");
    assert!(env.contains("\nPATH="), "{env}");
    // An allowlisted name passes through.
    let allowed = Fixture::with(|s| s.with_env_allowlist(["PATH", "HALO_SANDBOX_FAKE_API_KEY"]));
    let env = allowed.ok("bash", json!({"command": "env"})).await;
    assert!(
        env.contains("HALO_SANDBOX_FAKE_API_KEY=sk-fake-123"),
        "{env}"
    );
    println!("environment scrub checked");
}

#[test]
fn the_environment_is_scrubbed() {
    // Setting a variable in this multi-threaded test process would be unsound, so the
    // check runs in a child process that starts with the fake key in its environment.
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([
            "bash::scrubbed_environment_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HALO_SANDBOX_FAKE_API_KEY", "sk-fake-123")
        .output()
        .expect("run the child test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("environment scrub checked"), "{stdout}");
}

// Trigger: each invalid byte kept of a stream became a 3-byte U+FFFD after the byte cut, so
// binary output made a result three times the output limit.
#[tokio::test]
async fn a_result_stays_within_the_output_limit_plus_the_notes_margin() {
    let f = Fixture::new();
    let binary = "head -c 100000 /dev/zero | tr '\\0' '\\377'";
    let out = f
        .ok(
            "bash",
            json!({"command": format!("{binary}; {binary} >&2; sleep 5"), "timeout_secs": 1}),
        )
        .await;
    assert!(
        out.len() <= halo_sandbox::DEFAULT_OUTPUT_LIMIT + halo_sandbox::NOTES_MARGIN,
        "{} bytes",
        out.len()
    );
    assert!(out.starts_with("timed out after 1 s"), "{out}");
    // Each stream keeps its share of text, U+FFFD for each invalid byte.
    let stdout = out
        .split_once("\nstdout:\n")
        .and_then(|(_, rest)| rest.split_once("\nstderr:\n"))
        .map(|(stdout, _)| stdout)
        .expect("both streams");
    let (head, rest) = stdout.split_once("\n[... ").expect("omission marker");
    let (dropped, tail) = rest
        .split_once(" bytes omitted ...]\n")
        .expect("marker end");
    let shown = |s: &str| s.chars().filter(|&c| c == '\u{fffd}').count();
    assert_eq!(head.len(), shown(head) * 3);
    assert!(
        head.len() <= 8 * 1024 && head.len() > 8 * 1024 - 3,
        "{}",
        head.len()
    );
    assert!(
        tail.len() <= 8 * 1024 && tail.len() > 8 * 1024 - 3,
        "{}",
        tail.len()
    );
    assert_eq!(
        dropped.parse::<usize>().unwrap() + shown(head) + shown(tail),
        100_000
    );
}
