//! Commands over a resource limit ([`ExecLimits`]) fail, and the `bash` result names the
//! limit: memory (the sum of the command's processes, and one process's allocation),
//! processes, file size, CPU time and the private `/tmp`. Each runs in the OS sandbox with a
//! small limit; the others keep their defaults.

use halo_sandbox::{ExecLimits, Limit, SandboxMode};
use serde_json::json;

use crate::common::Fixture;

/// A sandbox with `limits` (the hint `--flag` for each), in `mode`.
fn fixture(mode: SandboxMode, configure: impl FnOnce(&mut ExecLimits)) -> Fixture {
    let mut limits = ExecLimits::default()
        .with_hint(Limit::Memory, "--max-memory")
        .with_hint(Limit::Processes, "--max-processes")
        .with_hint(Limit::FileSize, "--max-file-size")
        .with_hint(Limit::CpuTime, "--max-cpu")
        .with_hint(Limit::TmpSize, "--max-tmp");
    configure(&mut limits);
    Fixture::with(|s| s.with_mode(mode).with_limits(limits))
}

async fn bash(f: &Fixture, command: &str) -> String {
    f.ok("bash", json!({"command": command, "timeout_secs": 30}))
        .await
}

// Four processes of 100 MiB each stay under the per-process cap but not under the sum.
#[tokio::test]
async fn a_command_whose_processes_together_hold_too_much_memory_is_killed() {
    let f = fixture(SandboxMode::WorkspaceWrite, |l| l.memory = Some(256 << 20));
    // `tail -c N` of an endless pipe keeps its last N bytes in memory.
    let out = bash(
        &f,
        "for i in 1 2 3 4; do cat /dev/zero | tail -c 100M > /dev/null & done; wait",
    )
    .await;
    assert!(
        out.starts_with("killed: memory limit 256 MiB reached (--max-memory)"),
        "{out}"
    );
}

// One process asking for more than the limit at once gets ENOMEM, and says so.
#[tokio::test]
async fn a_process_allocating_past_the_memory_limit_fails_naming_it() {
    let f = fixture(SandboxMode::ReadOnly, |l| l.memory = Some(64 << 20));
    // `tail` holds a line until its end: /dev/zero has none.
    let out = bash(&f, "tail /dev/zero").await;
    assert!(
        out.starts_with("exit code: 1 (memory limit 64 MiB reached (--max-memory))")
            || out.starts_with("killed: memory limit 64 MiB reached (--max-memory)"),
        "{out}"
    );
}

#[tokio::test]
async fn a_command_starting_too_many_processes_fails_naming_the_limit() {
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let f = fixture(mode, |l| l.processes = Some(32));
        // dash gives up on the first fork that fails (bash would retry for 15 s).
        let out = bash(&f, "sh -c 'for i in $(seq 100); do sleep 3 & done; wait'").await;
        assert!(
            out.starts_with("exit code: 2 (process limit 32 reached (--max-processes))")
                || out.starts_with("killed: process limit 32 reached (--max-processes)"),
            "{mode:?}: {out}"
        );
    }
}

#[tokio::test]
async fn a_command_writing_a_file_past_the_limit_is_stopped_naming_it() {
    let f = fixture(SandboxMode::WorkspaceWrite, |l| l.file_size = Some(1 << 20));
    let out = bash(&f, "head -c 2M /dev/zero > big.bin").await;
    assert!(
        out.starts_with("killed: file size limit 1 MiB reached (--max-file-size)"),
        "{out}"
    );
    let written = std::fs::metadata(f.path("big.bin")).unwrap().len();
    assert_eq!(written, 1 << 20);
}

#[tokio::test]
async fn a_command_filling_the_private_tmp_fails_naming_the_limit() {
    let f = fixture(SandboxMode::WorkspaceWrite, |l| l.tmp_size = Some(1 << 20));
    for path in ["/tmp/fill", "/dev/shm/fill"] {
        let out = bash(&f, &format!("head -c 2M /dev/zero > {path}")).await;
        assert!(
            out.starts_with("exit code: 1 (/tmp size limit 1 MiB reached (--max-tmp))")
                && out.contains("No space left on device"),
            "{path}: {out}"
        );
    }
    // /dev itself (a tmpfs of no size) is read-only.
    let out = bash(&f, "echo x > /dev/fill").await;
    assert!(out.contains("Read-only file system"), "{out}");
}

#[tokio::test]
async fn a_command_spinning_past_the_cpu_time_limit_is_killed_naming_it() {
    let f = fixture(SandboxMode::WorkspaceWrite, |l| {
        l.cpu_time = Some(std::time::Duration::from_secs(1));
    });
    let out = bash(&f, "while :; do :; done").await;
    assert!(
        out.starts_with("killed: CPU time limit 1 s reached (--max-cpu)"),
        "{out}"
    );
}

// Under every limit, a command's result is as it always was.
#[tokio::test]
async fn a_command_within_its_limits_reports_no_limit() {
    let f = fixture(SandboxMode::WorkspaceWrite, |_| {});
    let out = bash(&f, "head -c 1M /dev/zero > /tmp/x && echo fine").await;
    assert_eq!(out, "exit code: 0\nstdout:\nfine");
    let out = bash(&f, "exit 3").await;
    assert_eq!(out, "exit code: 3\n(no output)");
}
