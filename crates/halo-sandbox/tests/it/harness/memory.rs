//! The memory file: atomic appends under concurrent writers on both
//! sandboxes, the snapshot of the last lines, memory off.

use std::collections::BTreeSet;
use std::sync::Arc;

use halo_core::SharedSandbox;
use halo_sandbox::harness::{Memory, MemoryConfig};
use halo_sandbox::{ContainerSandbox, VirtualSandbox};

use super::{p, put};

const WRITERS: usize = 8;
const ENTRIES: usize = 40;

/// Each writer's entries are long (about 3 KB) so that a torn write would show.
fn task(writer: usize, n: usize) -> String {
    format!("w{writer}-n{n} {}", "z".repeat(300))
}

async fn concurrent_appends_never_interleave(sandboxes: Vec<SharedSandbox>) {
    let mut handles = Vec::new();
    for w in 0..WRITERS {
        let sandbox = Arc::clone(&sandboxes[w % sandboxes.len()]);
        handles.push(tokio::spawn(async move {
            let memory = Memory::new(sandbox, MemoryConfig::default());
            for n in 0..ENTRIES {
                memory
                    .append(&task(w, n), &"r".repeat(380), 1_000 * n as u64)
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let text = String::from_utf8(sandboxes[0].read(&p(".agent/memory.md")).await.unwrap()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), WRITERS * ENTRIES);
    let mut seen = BTreeSet::new();
    for (w, n) in (0..WRITERS).flat_map(|w| (0..ENTRIES).map(move |n| (w, n))) {
        let want = Memory::entry(&task(w, n), &"r".repeat(380), 1_000 * n as u64);
        assert!(text.contains(&want), "entry {w}/{n} is whole");
        seen.insert(want);
    }
    for line in lines {
        assert!(
            seen.contains(&format!("{line}\n")),
            "no torn line: {line:.80}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_on_a_real_folder_never_interleave_half_entries() {
    let dir = tempfile::tempdir().unwrap();
    // Two sandboxes over one folder: two writers that share no lock.
    let a: SharedSandbox = Arc::new(ContainerSandbox::new(dir.path()).unwrap());
    let b: SharedSandbox = Arc::new(ContainerSandbox::new(dir.path()).unwrap());
    concurrent_appends_never_interleave(vec![a, b]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_on_a_virtual_sandbox_never_interleave_half_entries() {
    let s: SharedSandbox = Arc::new(VirtualSandbox::new());
    concurrent_appends_never_interleave(vec![s]).await;
}

#[tokio::test]
async fn the_snapshot_is_the_last_lines_naming_the_file_and_memory_can_be_off() {
    let s: SharedSandbox = Arc::new(VirtualSandbox::new());
    let lines: String = (1..=60).map(|i| format!("- entry {i}\n")).collect();
    put(s.as_ref(), "notes/mem.md", lines).await;
    let config = MemoryConfig {
        path: p("notes/mem.md"),
        ..MemoryConfig::default()
    };
    let snap = Memory::new(Arc::clone(&s), config.clone()).snapshot().await;
    assert_eq!(snap.lines, 50);
    let section = snap.section.unwrap();
    assert_eq!(section.path.as_deref(), Some("notes/mem.md"));
    assert!(section.body.starts_with("- entry 11\n"));
    assert!(section.body.ends_with("- entry 60"));
    let short = MemoryConfig {
        lines: 3,
        ..config.clone()
    };
    assert_eq!(
        Memory::new(Arc::clone(&s), short)
            .snapshot()
            .await
            .section
            .unwrap()
            .body,
        "- entry 58\n- entry 59\n- entry 60"
    );

    // Off: no snapshot and nothing written.
    let off = Memory::new(Arc::clone(&s), MemoryConfig::off());
    assert_eq!(off.snapshot().await.lines, 0);
    assert!(!off.append("task", "result", 0).await.unwrap());
    assert!(s.read(&p(".agent/memory.md")).await.is_err());
    // Missing: nothing, no diagnostic.
    let fresh = Memory::new(s, MemoryConfig::default()).snapshot().await;
    assert_eq!((fresh.section, fresh.diagnostic), (None, None));
}

#[test]
fn an_entry_is_one_timestamped_bounded_line() {
    let e = Memory::entry("fix\nthe   bug", &"x".repeat(1000), 1_796_119_245_000);
    assert!(e.starts_with("- 2026-12-01T10:00:45Z task: fix the bug | result: xxx"));
    assert!(e.ends_with("...\n"));
    assert_eq!(e.lines().count(), 1);
}
