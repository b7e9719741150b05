//! `bash`: exit codes and stderr as data, timeouts that kill the whole process group, a
//! scrubbed environment and bounded output.

use serde_json::json;

use crate::common::Fixture;

/// Whether `pid` is a `sleep` that is neither dead nor dying: gone, a zombie, or already
/// exiting (a non-zero exit code in `stat`) count as killed, as does a reused PID.
fn sleeper_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    // `pid (comm) state ... exit_code`: the state follows the last `)`; the exit code
    // (set once SIGKILL is being acted on) is the last field.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let state = fields.first().copied().unwrap_or("X");
    let exiting = fields.last().is_some_and(|code| *code != "0");
    comm.trim() == "sleep" && !matches!(state, "Z" | "X") && !exiting
}

/// The PID the command printed on the first stdout line.
fn printed_pid(out: &str) -> u32 {
    let stdout = out.split_once("stdout:\n").expect("stdout section").1;
    stdout
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {out:?}"))
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
    let out = f
        .ok(
            "bash",
            json!({"command": "sleep 30 & echo $!; sleep 30", "timeout_secs": 1}),
        )
        .await;
    assert!(
        out.starts_with(
            "timed out after 1 s; the command and its child processes were killed\nstdout:\n"
        ),
        "{out}"
    );
    let pid = printed_pid(&out);
    assert!(
        !sleeper_alive(pid),
        "background sleep {pid} survived: {out}"
    );
}

#[tokio::test]
async fn background_children_are_killed_when_the_command_ends() {
    let f = Fixture::new();
    let out = f.ok("bash", json!({"command": "sleep 30 & echo $!"})).await;
    let pid = printed_pid(&out);
    assert_eq!(out, format!("exit code: 0\nstdout:\n{pid}"));
    assert!(!sleeper_alive(pid), "background sleep {pid} survived");
}

// Regression: a process that leaves the process group (setsid) keeps the output pipes
// open; the call must still return, with what was read and a note.
#[tokio::test]
async fn a_process_that_escapes_the_group_cannot_hang_the_call() {
    let f = Fixture::new();
    // The escaped shell writes its PID only after setsid, so the command ends only once
    // the escape happened; then it becomes the sleep (same PID).
    let out = f
        .ok(
            "bash",
            json!({"command": "setsid sh -c 'echo $$ > pid; exec sleep 30' & \
                               while [ ! -s pid ]; do sleep 0.01; done; cat pid"}),
        )
        .await;
    let pid = printed_pid(&out);
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
    assert_eq!(
        out,
        format!(
            "exit code: 0\nstdout:\n{pid}\nstderr:\n[a process that left the command's process group \
             kept its output open; the output may be incomplete]"
        )
    );
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
