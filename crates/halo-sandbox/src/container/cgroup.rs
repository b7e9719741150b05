//! A `pids` cgroup per command, where this process may make one: the process limit that
//! holds for root too (the kernel does not enforce `RLIMIT_NPROC` for root).
//!
//! The cgroup is made under this process's own cgroup — in the unified (v2) hierarchy
//! where the `pids` controller is enabled for its children, else in a v1 `pids` hierarchy —
//! as `halo-<pid>-<n>`, with `pids.max` set; the command's first process joins it before it
//! runs bubblewrap (it writes `0` to `cgroup.procs`), so every process of the command is
//! counted. Whether a cgroup can be made is learnt once per process, by making and removing
//! one; where none can (no write access, the controller not delegated), commands get
//! `RLIMIT_NPROC` and the sampler instead (see [`super::limits`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A command's `pids` cgroup; removed when dropped (once its processes are gone).
#[derive(Debug)]
pub(crate) struct PidsCgroup {
    dir: PathBuf,
    /// `cgroup.procs`, open for writing: the child writes `0` to it to join.
    procs: File,
}

impl PidsCgroup {
    /// A new cgroup allowing `max` processes and threads, or `None` where none can be made.
    pub(crate) fn create(max: u64) -> Option<Self> {
        let parent = parent()?;
        match make(parent, max) {
            Ok(cgroup) => Some(cgroup),
            Err(e) => {
                tracing::warn!(error = %e, parent = %parent.display(), "no pids cgroup for a command");
                None
            }
        }
    }

    /// `cgroup.procs`, for the child to join (a duplicate of the handle).
    ///
    /// # Errors
    /// The handle cannot be duplicated.
    pub(crate) fn procs(&self) -> std::io::Result<File> {
        self.procs.try_clone()
    }

    /// Whether a process or thread could not be started because the cgroup was full
    /// (`pids.events`: `max` above 0).
    pub(crate) fn reached(&self) -> bool {
        std::fs::read_to_string(self.dir.join("pids.events")).is_ok_and(|events| {
            events.lines().any(|l| {
                l.strip_prefix("max ")
                    .and_then(|n| n.trim().parse::<u64>().ok())
                    .is_some_and(|n| n > 0)
            })
        })
    }
}

impl PidsCgroup {
    /// Removes the cgroup once its processes are gone (killed processes take a moment to
    /// exit, and the kernel releases the last process of a PID namespace late), waiting up
    /// to 2 s; what is left then is removed by [`Drop`] later, and what a process that
    /// ended meanwhile left, by the next process's [`sweep`].
    pub(crate) async fn remove(self) {
        for _ in 0..200 {
            let current = std::fs::read_to_string(self.dir.join("pids.current"));
            if current.is_ok_and(|n| n.trim() == "0") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(self);
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        // The command's processes were killed and are still exiting: retry a little later,
        // off this thread.
        let dir = std::mem::take(&mut self.dir);
        std::thread::spawn(move || {
            for _ in 0..100 {
                std::thread::sleep(Duration::from_millis(50));
                if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    return;
                }
            }
            tracing::warn!(dir = %dir.display(), "a command's pids cgroup could not be removed");
        });
    }
}

/// The folder under which commands' cgroups are made: learnt once per process.
fn parent() -> Option<&'static Path> {
    static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();
    PARENT
        .get_or_init(|| {
            let found = candidates()
                .into_iter()
                .find(|dir| make(dir, 1).is_ok_and(|probe| probe.dir.exists()));
            tracing::debug!(parent = ?found, "pids cgroup for commands");
            if let Some(parent) = &found {
                sweep(parent);
            }
            found
        })
        .as_deref()
}

/// Removes the empty cgroups that processes no longer running left in `parent` (one killed,
/// or one that ended while its last command's cgroup was still counted): `halo-<pid>-<n>`
/// whose process is gone and which is older than a minute. `rmdir` fails on a cgroup that
/// still has processes, so nothing in use is removed.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let own = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("halo-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(60));
        if pid != own && old && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

fn make(parent: &Path, max: u64) -> std::io::Result<PidsCgroup> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = parent.join(format!("halo-{}-{n}", std::process::id()));
    std::fs::create_dir(&dir)?;
    let set_up = || -> std::io::Result<File> {
        std::fs::write(dir.join("pids.max"), max.to_string())?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
    };
    match set_up() {
        Ok(procs) => Ok(PidsCgroup { dir, procs }),
        Err(e) => {
            let _ = std::fs::remove_dir(&dir);
            Err(e)
        }
    }
}

/// This process's cgroup folders that may hold a `pids` cgroup: its unified (v2) cgroup,
/// then its v1 `pids` cgroup.
fn candidates() -> Vec<PathBuf> {
    let (Ok(cgroups), Ok(mounts)) = (
        std::fs::read_to_string("/proc/self/cgroup"),
        std::fs::read_to_string("/proc/self/mountinfo"),
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for unified in [true, false] {
        let own = cgroups.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let matches = if unified {
                id == "0" && controllers.is_empty()
            } else {
                controllers.split(',').any(|c| c == "pids")
            };
            matches.then_some(path)
        });
        let Some(own) = own else { continue };
        for line in mounts.lines() {
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let fields: Vec<&str> = left.split(' ').collect();
            let theirs: Vec<&str> = right.split(' ').collect();
            let (Some(root), Some(point), Some(fstype), Some(options)) =
                (fields.get(3), fields.get(4), theirs.first(), theirs.get(2))
            else {
                continue;
            };
            let wanted = if unified {
                *fstype == "cgroup2"
            } else {
                *fstype == "cgroup" && options.split(',').any(|o| o == "pids")
            };
            if !wanted {
                continue;
            }
            if let Ok(below) = Path::new(own).strip_prefix(root) {
                out.push(Path::new(point).join(below));
            }
        }
    }
    out
}
