//! The limits of `exec`: a timeout leaves no process behind, 100 MB of output is kept in
//! bounded memory with an exact count of the bytes dropped, and a multi-byte character cut
//! by the head or the tail is dropped whole, never split.

use std::time::Duration;

use halo_core::Sandbox;
use halo_core::sandbox::{ExecOutput, ExecRequest};
use serde_json::json;

use crate::common::{Fixture, survivors};

fn request(command: &str, output_limit: usize, timeout: Duration) -> ExecRequest {
    ExecRequest {
        command: command.to_string(),
        timeout,
        output_limit,
    }
}

async fn exec(f: &Fixture, command: &str, output_limit: usize) -> ExecOutput {
    f.sandbox
        .exec(request(command, output_limit, Duration::from_secs(60)))
        .await
        .expect("exec")
}

#[tokio::test]
async fn a_timeout_leaves_no_process_of_the_command_behind() {
    let f = Fixture::new();
    let marker = format!("halo-leak-marker-{}", std::process::id());
    // bash leads the group: `$$` is its pid and the group id. The background sleeper is
    // renamed so /proc shows the marker; then the command outlives its 1 s timeout.
    let command = format!("echo $$; (exec -a {marker} sleep 300) & sleep 300");
    let out = f
        .sandbox
        .exec(request(&command, 4096, Duration::from_secs(1)))
        .await
        .expect("exec");
    assert!(out.timed_out, "{out:?}");
    assert_eq!((out.exit_code, out.signal), (None, None));
    let pgid = out.stdout.trim().to_string();
    assert!(pgid.parse::<u32>().is_ok(), "{out:?}");
    assert_eq!(survivors(&marker, &pgid), Vec::<String>::new());

    // The same through the tool, with the model's view of it.
    let marker = format!("{marker}-tool");
    let text = f
        .ok(
            "bash",
            json!({"command": format!("echo $$; (exec -a {marker} sleep 300) & sleep 300"),
                   "timeout_secs": 1}),
        )
        .await;
    let (status, pgid) = text.split_once("\nstdout:\n").expect("stdout");
    assert_eq!(
        status,
        "timed out after 1 s; the command and its child processes were killed"
    );
    assert_eq!(survivors(&marker, pgid.trim()), Vec::<String>::new());
}

/// The peak resident memory of this process in bytes, after `run`: the kernel's high-water
/// mark is reset first where /proc allows it, and the resident size is also sampled.
async fn peak_rss_during<T>(run: impl Future<Output = T>) -> (T, u64, u64) {
    fn field(name: &str) -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .expect("status field")
    }
    // "5" resets VmHWM to the current resident size (Linux 4.0+).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = field("VmRSS:");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(field("VmRSS:"));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let value = run.await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sampled = sampler.join().expect("sampler");
    let peak = sampled.max(field("VmHWM:"));
    (value, before, peak)
}

/// Run alone in a child process (so no other test's memory counts): 100 MB of output.
#[tokio::test]
#[ignore = "run by a_100_mb_output_is_capped_in_bounded_memory in a child process"]
async fn hundred_mb_output_child() {
    if std::env::var_os("HALO_SANDBOX_MEMORY_CHILD").is_none() {
        return;
    }
    const TOTAL: u64 = 100_000_000;
    const LIMIT: usize = 64 * 1024;
    let f = Fixture::new();
    let command = format!("head -c {TOTAL} /dev/zero | tr '\\0' a; printf 'E' >&2");
    let (out, before, peak) = peak_rss_during(exec(&f, &command, LIMIT)).await;
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout_dropped, TOTAL - LIMIT as u64);
    let marker = format!("\n[... {} bytes omitted ...]\n", TOTAL - LIMIT as u64);
    assert_eq!(out.stdout.len(), LIMIT + marker.len());
    assert_eq!(
        out.stdout,
        format!("{}{marker}{}", "a".repeat(LIMIT / 2), "a".repeat(LIMIT / 2))
    );
    assert_eq!((out.stderr.as_str(), out.stderr_dropped), ("E", 0));
    let grew = peak.saturating_sub(before);
    assert!(
        grew < 64 * 1024 * 1024,
        "memory grew by {grew} bytes (from {before} to {peak}) for 100 MB of output"
    );

    // Through the tool: the result stays within its output limit plus the notes.
    let f = Fixture::with(|s| s.with_output_limit(8192));
    let (text, _, _) = peak_rss_during(f.ok(
        "bash",
        json!({"command": format!("head -c {TOTAL} /dev/zero | tr '\\0' a")}),
    ))
    .await;
    let omitted = format!("\n[... {} bytes omitted ...]\n", TOTAL - 4096);
    assert_eq!(
        text,
        format!(
            "exit code: 0\nstdout:\n{}{omitted}{}",
            "a".repeat(2048),
            "a".repeat(2048)
        )
    );
    assert!(text.len() <= 8192 + 200, "{}", text.len());
    println!("100 MB checked: memory grew by {grew} bytes");
}

#[test]
fn a_100_mb_output_is_capped_in_bounded_memory() {
    let exe = std::env::current_exe().expect("test binary");
    let out = std::process::Command::new(exe)
        .args([
            "exec_limits::hundred_mb_output_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HALO_SANDBOX_MEMORY_CHILD", "1")
        .output()
        .expect("run the child test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("100 MB checked"), "{stdout}");
}

#[tokio::test]
async fn a_multibyte_character_at_either_cut_is_dropped_whole() {
    let f = Fixture::new();
    // 10 bytes kept: 5 of head, 5 of tail. "€" is E2 82 AC and straddles the head cut
    // (bytes 5-7); "😀" is F0 9F 98 80 and straddles the tail cut (the last 5 bytes are
    // 9F 98 80 'y' 'z').
    let out = exec(&f, "printf 'abcd€middle😀yz'", 10).await;
    assert_eq!(out.stdout, "abcd\n[... 13 bytes omitted ...]\nyz");
    assert_eq!(out.stdout_dropped, 13);
    // Exactly on the boundaries nothing extra is dropped.
    let out = exec(&f, "printf 'abc€middlexy😀'", 12).await;
    assert_eq!(out.stdout, "abc€\n[... 6 bytes omitted ...]\nxy😀");
    assert_eq!(out.stdout_dropped, 6);
    // A 4-byte character across the head cut, a 3-byte one across the tail cut, on
    // stderr; no replacement character anywhere.
    let out = exec(&f, "printf 'ab😀-----€z' >&2", 6).await;
    assert_eq!(out.stderr, "ab\n[... 12 bytes omitted ...]\nz");
    assert_eq!(out.stderr_dropped, 12);
    assert!(!out.stderr.contains('\u{FFFD}'));

    // Through the tool: 4096 bytes a stream, 2048 head and 2048 tail; "€" starts at byte
    // 2047 of stdout, the last 3 bytes of "😀" start the tail.
    let f = Fixture::with(|s| s.with_output_limit(8192));
    let text = f
        .ok(
            "bash",
            json!({"command": "printf 'a%.0s' $(seq 2047); printf '€'; \
                               printf 'm%.0s' $(seq 5000); printf '😀'; \
                               printf 'z%.0s' $(seq 2045)"}),
        )
        .await;
    let omitted = 3 + 5000 + 4;
    assert_eq!(
        text,
        format!(
            "exit code: 0\nstdout:\n{}\n[... {omitted} bytes omitted ...]\n{}",
            "a".repeat(2047),
            "z".repeat(2045)
        )
    );
}
