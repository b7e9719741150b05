//! Resource limits of commands in the OS sandbox ([`ExecLimits`]): how each is set, watched
//! and, when a command reaches one, named in its result.
//!
//! | limit | set by | seen by |
//! |---|---|---|
//! | memory | `RLIMIT_DATA` of each process; the sum of the command's processes' anonymous memory, sampled every 100 ms | the sampler kills the command; a process's failed allocation (`ENOMEM`) shows in its stderr |
//! | processes | a `pids` cgroup where this process may make one ([`super::cgroup`]); else `RLIMIT_NPROC` (not enforced for root); and the sampler's count | the cgroup's `max` events; the sampler kills the command; `fork` failing with `EAGAIN` |
//! | file size | `RLIMIT_FSIZE` | `SIGXFSZ`, or `EFBIG` ("File too large") where it is ignored |
//! | CPU time | `RLIMIT_CPU` of each process (soft; hard 5 s later) | `SIGXCPU` |
//! | `/tmp` size | the size of each tmpfs (`/tmp`, `/dev/shm`, `/run`) | `ENOSPC` ("No space left on device") while the root's filesystem has room |
//!
//! The rlimits are set inside the sandbox, after bubblewrap made the command's user
//! namespace (a `bash` that runs `ulimit`, then `exec`s the command): `RLIMIT_NPROC` then
//! counts the processes of that namespace only, not every process of the user. The
//! sampler walks the command's process tree in `/proc` from bubblewrap down.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

/// One kind of [`ExecLimits`] limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Limit {
    /// [`ExecLimits::memory`].
    Memory,
    /// [`ExecLimits::processes`].
    Processes,
    /// [`ExecLimits::file_size`].
    FileSize,
    /// [`ExecLimits::cpu_time`].
    CpuTime,
    /// [`ExecLimits::tmp_size`].
    TmpSize,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Memory => "memory limit",
            Limit::Processes => "process limit",
            Limit::FileSize => "file size limit",
            Limit::CpuTime => "CPU time limit",
            Limit::TmpSize => "/tmp size limit",
        })
    }
}

/// The resources each command of a [`ContainerSandbox`](super::ContainerSandbox) may use in
/// the OS sandbox ([`SandboxMode::ReadOnly`](super::SandboxMode::ReadOnly) and
/// [`WorkspaceWrite`](super::SandboxMode::WorkspaceWrite); unconfined commands,
/// [`FullAccess`](super::SandboxMode::FullAccess), get none). `None` is no limit. A command
/// over a limit fails, and its [`ExecOutput::limit`](halo_core::sandbox::ExecOutput::limit)
/// names the limit (`memory limit 4 GiB reached`).
///
/// How each is enforced, and where it cannot be (the process limit for root without a
/// `pids` cgroup is only sampled), is in `docs/sandbox.md`.
///
/// ```
/// use halo_sandbox::{ExecLimits, Limit};
///
/// let mut limits = ExecLimits::default();
/// assert_eq!(limits.memory, Some(4 << 30));
/// limits.memory = Some(1 << 30);
/// let limits = limits.with_hint(Limit::Memory, "--max-memory");
/// assert_eq!(limits.describe(Limit::Memory), "memory limit 1 GiB reached (--max-memory)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecLimits {
    /// Bytes of memory the command's processes may hold together (anonymous memory: heap,
    /// stacks; files in a tmpfs count against [`tmp_size`](Self::tmp_size)); also the most
    /// one process may allocate. Default 4 GiB.
    pub memory: Option<u64>,
    /// Processes and threads the command may run at once. Default 1024.
    pub processes: Option<u64>,
    /// Bytes of the largest file a command may write. Default 4 GiB.
    pub file_size: Option<u64>,
    /// CPU time each process may use, whole seconds (rounded up). Default 600 s.
    pub cpu_time: Option<Duration>,
    /// Bytes each private tmpfs (`/tmp`, `/dev/shm`, `/run`), which lives in memory, may
    /// hold. Default 1 GiB.
    pub tmp_size: Option<u64>,
    /// How the user changes each limit, shown after it when a command reaches it
    /// (`--max-memory` gives `memory limit 4 GiB reached (--max-memory)`).
    pub hints: BTreeMap<Limit, String>,
}

impl Default for ExecLimits {
    fn default() -> Self {
        ExecLimits {
            memory: Some(Self::DEFAULT_MEMORY),
            processes: Some(Self::DEFAULT_PROCESSES),
            file_size: Some(Self::DEFAULT_FILE_SIZE),
            cpu_time: Some(Self::DEFAULT_CPU_TIME),
            tmp_size: Some(Self::DEFAULT_TMP_SIZE),
            hints: BTreeMap::new(),
        }
    }
}

impl ExecLimits {
    /// The default [`memory`](Self::memory): 4 GiB.
    pub const DEFAULT_MEMORY: u64 = 4 << 30;
    /// The default [`processes`](Self::processes): 1024.
    pub const DEFAULT_PROCESSES: u64 = 1024;
    /// The default [`file_size`](Self::file_size): 4 GiB.
    pub const DEFAULT_FILE_SIZE: u64 = 4 << 30;
    /// The default [`cpu_time`](Self::cpu_time): 600 s, the longest a command may run.
    pub const DEFAULT_CPU_TIME: Duration = Duration::from_secs(600);
    /// The default [`tmp_size`](Self::tmp_size): 1 GiB.
    pub const DEFAULT_TMP_SIZE: u64 = 1 << 30;

    /// No limit at all.
    pub fn none() -> Self {
        ExecLimits {
            memory: None,
            processes: None,
            file_size: None,
            cpu_time: None,
            tmp_size: None,
            hints: BTreeMap::new(),
        }
    }

    /// Says how the user changes `limit` (a flag, a setting), shown after it in a result.
    pub fn with_hint(mut self, limit: Limit, hint: impl Into<String>) -> Self {
        self.hints.insert(limit, hint.into());
        self
    }

    /// `limit`'s value in words: `4 GiB`, `1024`, `600 s`; `none` when unset.
    pub fn value(&self, limit: Limit) -> String {
        let bytes = |b: Option<u64>| b.map_or_else(|| "none".into(), format_bytes);
        match limit {
            Limit::Memory => bytes(self.memory),
            Limit::FileSize => bytes(self.file_size),
            Limit::TmpSize => bytes(self.tmp_size),
            Limit::Processes => self
                .processes
                .map_or_else(|| "none".into(), |n| n.to_string()),
            Limit::CpuTime => self
                .cpu_time
                .map_or_else(|| "none".into(), |d| format!("{} s", whole_seconds(d))),
        }
    }

    /// What a result says when a command reached `limit`:
    /// `memory limit 4 GiB reached (--max-memory)`.
    pub fn describe(&self, limit: Limit) -> String {
        let hint = self
            .hints
            .get(&limit)
            .map(|h| format!(" ({h})"))
            .unwrap_or_default();
        format!("{limit} {} reached{hint}", self.value(limit))
    }

    /// The script run first inside the sandbox: it sets the rlimits, then runs the command
    /// (`"$@"`). A limit it cannot set (a lower hard limit stands) is left as it is.
    pub(crate) fn preamble(&self) -> String {
        let mut script = String::new();
        let mut set = |args: String| script.push_str(&format!("ulimit {args} 2>/dev/null; "));
        if let Some(bytes) = self.memory {
            set(format!("-d {}", bytes.div_ceil(1024)));
        }
        if let Some(n) = self.processes {
            set(format!("-u {n}"));
        }
        if let Some(bytes) = self.file_size {
            set(format!("-f {}", bytes.div_ceil(1024)));
        }
        if let Some(cpu) = self.cpu_time {
            // SIGXCPU at the soft limit names it; SIGKILL at the hard one, 5 s later, ends a
            // process that ignores it.
            let secs = whole_seconds(cpu);
            set(format!("-H -t {}", secs + CPU_GRACE_SECS));
            set(format!("-S -t {secs}"));
        }
        script.push_str("exec \"$@\"");
        script
    }
}

/// `memory 4 GiB, processes 1024, file size 4 GiB, CPU time 600 s, /tmp 1 GiB` (`none`
/// for a limit not set).
impl fmt::Display for ExecLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "memory {}, processes {}, file size {}, CPU time {}, /tmp {}",
            self.value(Limit::Memory),
            self.value(Limit::Processes),
            self.value(Limit::FileSize),
            self.value(Limit::CpuTime),
            self.value(Limit::TmpSize)
        )
    }
}

/// Seconds between the soft and the hard CPU time limit.
const CPU_GRACE_SECS: u64 = 5;

fn whole_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// `4 GiB`, `512 MiB`, `10 KiB` when exact, else bytes: `1000 bytes`.
pub(crate) fn format_bytes(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// What the command's processes use at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Processes and threads.
    pub(crate) tasks: u64,
    /// Anonymous resident memory, bytes.
    pub(crate) anon_bytes: u64,
}

/// The use of the process tree under `pid` (itself included), read from `/proc`: each
/// process's `status` (threads, `RssAnon`) and each thread's `children`. Processes that end
/// while it reads are skipped.
pub(crate) fn usage(pid: u32) -> Usage {
    let mut total = Usage::default();
    let mut stack = vec![pid];
    let mut seen = std::collections::HashSet::new();
    while let Some(pid) = stack.pop() {
        if !seen.insert(pid) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        for line in status.lines() {
            if let Some(n) = line.strip_prefix("Threads:") {
                total.tasks += n.trim().parse::<u64>().unwrap_or(1);
            } else if let Some(kb) = line.strip_prefix("RssAnon:") {
                let kb = kb.trim().trim_end_matches("kB").trim();
                total.anon_bytes += kb.parse::<u64>().unwrap_or(0) * 1024;
            }
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children = task.path().join("children");
            if let Ok(list) = std::fs::read_to_string(children) {
                stack.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    total
}

impl ExecLimits {
    /// The limit `usage` is over, if any: the sampler then kills the command.
    pub(crate) fn over(&self, usage: Usage) -> Option<Limit> {
        if self.memory.is_some_and(|max| usage.anon_bytes >= max) {
            return Some(Limit::Memory);
        }
        if self.processes.is_some_and(|max| usage.tasks > max) {
            return Some(Limit::Processes);
        }
        None
    }

    /// The limit a failed command most likely reached, from how it ended: the signal that
    /// ended it, what its stderr says a call failed with (`ENOMEM`, `EFBIG`, `ENOSPC`, a
    /// failed `fork`). `root` is the sandbox root, whose filesystem tells a full disk from a
    /// full `/tmp`.
    pub(crate) fn reached(&self, signal: Option<i32>, stderr: &str, root: &Path) -> Option<Limit> {
        const SIGXCPU: i32 = 24;
        const SIGXFSZ: i32 = 25;
        match signal {
            Some(SIGXFSZ) if self.file_size.is_some() => return Some(Limit::FileSize),
            Some(SIGXCPU) if self.cpu_time.is_some() => return Some(Limit::CpuTime),
            _ => {}
        }
        let says = |phrases: &[&str]| phrases.iter().any(|p| stderr.contains(p));
        if self.file_size.is_some() && says(&["File too large", "File size limit exceeded"]) {
            return Some(Limit::FileSize);
        }
        if self.cpu_time.is_some() && says(&["CPU time limit exceeded"]) {
            return Some(Limit::CpuTime);
        }
        if self.memory.is_some()
            && says(&[
                "Cannot allocate memory",
                "memory allocation of",
                "MemoryError",
                "Out of memory",
                "out of memory",
                "memory exhausted",
                "std::bad_alloc",
            ])
        {
            return Some(Limit::Memory);
        }
        if self.processes.is_some()
            && says(&[
                "fork: retry",
                "fork: Resource temporarily unavailable",
                "Cannot fork",
                "can't fork",
            ])
        {
            return Some(Limit::Processes);
        }
        if self.tmp_size.is_some() && says(&["No space left on device"]) && has_room(root) {
            return Some(Limit::TmpSize);
        }
        None
    }
}

/// Whether the filesystem of `path` has more than 64 MiB free: then a command's `ENOSPC`
/// came from one of its tmpfs, not from it.
fn has_room(path: &Path) -> bool {
    rustix::fs::statvfs(path).is_ok_and(|s| s.f_bavail.saturating_mul(s.f_frsize) > 64 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_their_largest_exact_unit() {
        assert_eq!(format_bytes(4 << 30), "4 GiB");
        assert_eq!(format_bytes(512 << 20), "512 MiB");
        assert_eq!(format_bytes(3 << 10), "3 KiB");
        assert_eq!(format_bytes(1000), "1000 bytes");
        assert_eq!(format_bytes((1 << 30) + 1), "1073741825 bytes");
    }

    #[test]
    fn the_preamble_sets_each_limit_then_runs_the_command() {
        let limits = ExecLimits {
            file_size: Some(1000),
            ..ExecLimits::default()
        };
        assert_eq!(
            limits.preamble(),
            "ulimit -d 4194304 2>/dev/null; ulimit -u 1024 2>/dev/null; \
             ulimit -f 1 2>/dev/null; ulimit -H -t 605 2>/dev/null; \
             ulimit -S -t 600 2>/dev/null; exec \"$@\""
        );
        assert_eq!(ExecLimits::none().preamble(), "exec \"$@\"");
    }

    #[test]
    fn a_result_names_the_limit_and_how_to_change_it() {
        let limits = ExecLimits::default()
            .with_hint(Limit::Processes, "--max-processes")
            .with_hint(Limit::CpuTime, "--max-cpu");
        assert_eq!(
            limits.describe(Limit::Processes),
            "process limit 1024 reached (--max-processes)"
        );
        assert_eq!(
            limits.describe(Limit::CpuTime),
            "CPU time limit 600 s reached (--max-cpu)"
        );
        assert_eq!(
            limits.describe(Limit::TmpSize),
            "/tmp size limit 1 GiB reached"
        );
    }

    #[test]
    fn signals_and_messages_tell_which_limit_a_command_reached() {
        let limits = ExecLimits::default();
        let root = Path::new("/");
        assert_eq!(limits.reached(Some(25), "", root), Some(Limit::FileSize));
        assert_eq!(limits.reached(Some(24), "", root), Some(Limit::CpuTime));
        assert_eq!(limits.reached(Some(9), "", root), None);
        assert_eq!(
            limits.reached(None, "OSError: [Errno 27] File too large", root),
            Some(Limit::FileSize)
        );
        assert_eq!(
            limits.reached(
                None,
                "bash: fork: retry: Resource temporarily unavailable",
                root
            ),
            Some(Limit::Processes)
        );
        assert_eq!(
            limits.reached(None, "MemoryError", root),
            Some(Limit::Memory)
        );
        assert_eq!(limits.reached(None, "all fine", root), None);
        assert_eq!(
            ExecLimits::none().reached(Some(25), "MemoryError", root),
            None
        );
    }

    #[test]
    fn the_sampler_counts_this_process_and_its_children() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let usage = usage(std::process::id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(usage.tasks >= 2, "{usage:?}");
        assert!(usage.anon_bytes > 0, "{usage:?}");
        let limits = ExecLimits {
            processes: Some(1),
            ..ExecLimits::none()
        };
        assert_eq!(limits.over(usage), Some(Limit::Processes));
        assert_eq!(ExecLimits::none().over(usage), None);
    }
}
