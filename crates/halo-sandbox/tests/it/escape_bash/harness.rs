//! The escape suite's tools: snapshots of folders and their restoring, an outside `sleep`
//! to signal and trace, unmounting and probes of the machine.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::survivors;

/// A `sleep 300` started by the test, outside any sandbox, its command line a marker.
pub(super) struct Outsider {
    child: Child,
    pub(super) marker: String,
}

impl Outsider {
    pub(super) fn spawn(marker: String) -> Self {
        let child = Command::new("bash")
            .args(["-c", &format!("exec -a {marker} sleep 300")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the outside sleep");
        let deadline = Instant::now() + Duration::from_secs(5);
        let cmdline = format!("/proc/{}/cmdline", child.id());
        while !std::fs::read_to_string(&cmdline).is_ok_and(|c| c.contains(&marker)) {
            assert!(Instant::now() < deadline, "the outside sleep did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        Outsider { child, marker }
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn died(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A file, folder or link as the suite compares it: content and permission bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Entry {
    Missing,
    Dir { mode: u32 },
    File { mode: u32, bytes: Vec<u8> },
    Link { target: PathBuf },
    Other { mode: u32 },
}

/// `dir` itself (at the empty path) and everything under it.
pub(super) type Snapshot = BTreeMap<PathBuf, Entry>;

pub(super) fn snapshot(dir: &Path) -> Snapshot {
    let mut out = Snapshot::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let path = dir.join(&rel);
        let entry = match std::fs::symlink_metadata(&path) {
            Err(_) => Entry::Missing,
            Ok(meta) => {
                let mode = meta.permissions().mode() & 0o7777;
                if meta.is_symlink() {
                    Entry::Link {
                        target: std::fs::read_link(&path).expect("readlink"),
                    }
                } else if meta.is_dir() {
                    for child in std::fs::read_dir(&path).expect("read_dir") {
                        stack.push(rel.join(child.expect("entry").file_name()));
                    }
                    Entry::Dir { mode }
                } else if meta.is_file() {
                    Entry::File {
                        mode,
                        bytes: std::fs::read(&path).expect("read"),
                    }
                } else {
                    Entry::Other { mode }
                }
            }
        };
        out.insert(rel, entry);
    }
    out
}

/// Removes `path` and everything under it, whatever its permission bits.
pub(super) fn remove_all(path: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_dir() {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        for child in std::fs::read_dir(path).expect("read_dir") {
            remove_all(&child.expect("entry").path());
        }
        std::fs::remove_dir(path).expect("rmdir");
    } else {
        std::fs::remove_file(path).expect("rm");
    }
}

/// Makes `dir` what `pristine` recorded, if it is not.
pub(super) fn restore(dir: &Path, pristine: &Snapshot) {
    if snapshot(dir) == *pristine {
        return;
    }
    remove_all(dir);
    // Parents sort before their children.
    for (rel, entry) in pristine {
        let path = dir.join(rel);
        match entry {
            Entry::Dir { .. } => std::fs::create_dir_all(&path).expect("mkdir"),
            Entry::File { mode, bytes } => {
                std::fs::write(&path, bytes).expect("write");
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
                    .expect("chmod");
            }
            Entry::Link { target } => std::os::unix::fs::symlink(target, &path).expect("ln"),
            Entry::Missing | Entry::Other { .. } => panic!("cannot restore {}", path.display()),
        }
    }
    for (rel, entry) in pristine.iter().rev() {
        if let Entry::Dir { mode } = entry {
            std::fs::set_permissions(dir.join(rel), std::fs::Permissions::from_mode(*mode))
                .expect("chmod");
        }
    }
    assert_eq!(snapshot(dir), *pristine, "{} not restored", dir.display());
}

/// Unmounts what an unconfined attempt mounted at or under one of `folders`.
pub(super) fn unmount_under(folders: &[&Path]) {
    for _ in 0..10 {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let points: Vec<&str> = mountinfo
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|p| folders.iter().any(|f| Path::new(p).starts_with(f)))
            .collect();
        if points.is_empty() {
            return;
        }
        for point in points.iter().rev() {
            let _ = Command::new("umount").args(["-l", point]).status();
        }
    }
    panic!("mounts left under {folders:?}");
}

/// Whether `program` is on this process's `PATH`.
pub(super) fn installed(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program)).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
        })
    })
}

pub(super) fn python_works() -> bool {
    Command::new("python3")
        .args(["-c", "import ctypes, socket"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The machine's first non-loopback IPv4 address, if `hostname -I` gives one.
pub(super) fn machine_address() -> Option<Ipv4Addr> {
    let out = Command::new("hostname").arg("-I").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|a| a.parse::<Ipv4Addr>().ok())
        .find(|a| !a.is_loopback())
}

/// `marker` with its last character in brackets: a pattern `pgrep -f` and `pkill -f` match
/// against the marker but not against their own command line.
pub(super) fn bracketed(marker: &str) -> String {
    let (head, last) = marker.split_at(marker.len() - 1);
    format!("{head}[{last}]")
}

/// How many times `step` succeeded before it would block (a non-blocking accept or receive).
pub(super) fn drain(mut step: impl FnMut() -> std::io::Result<()>) -> usize {
    let mut n = 0;
    loop {
        match step() {
            Ok(()) => n += 1,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return n,
            Err(e) => panic!("listener: {e}"),
        }
    }
}

/// Live processes with `marker` once a kill in progress had up to a second to finish.
pub(super) async fn settled_survivors(marker: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let left = survivors(marker, "none");
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The path from `from` to `to`, both absolute: `..` up to `/`, then `to`.
pub(super) fn climbing(from: &Path, to: &Path) -> String {
    let ups = from.components().count() - 1;
    format!(
        "{}{}",
        "../".repeat(ups),
        to.display().to_string().trim_start_matches('/')
    )
}
