//! What a command in [`SandboxMode::WorkspaceWrite`](super::SandboxMode) may not leave
//! behind: the protected files programs outside the sandbox start processes from
//! (`crate::protect`). Before each command the root is walked for them ([`before`]): the
//! protected names at any depth (`.git`), bare repositories when `.git` is protected, the
//! protected paths, and the folders a `.git` file's `gitdir:` line names inside the root.
//! Those that exist are bound read-only in the OS sandbox, each folder above them bound over
//! itself so that no command can rename it away (a folder holding a mount cannot be moved).
//! When the command has ended and every process of its namespace is gone, the root is
//! walked again ([`after`]): whatever protected entry is new, or is no longer the same file
//! (device and inode), was made by the command and is renamed so that nothing outside
//! starts from it — `sub/.git` to `sub/.git.halo-untrusted`, the `HEAD` of a new bare
//! repository to `HEAD.halo-untrusted` — and the command's result says so.
//!
//! The walk follows no link, does not enter protected folders, and reads folders through
//! the root's capability (a link swapped in cannot lead it out). Before a command it stops
//! at [`MAX_SCAN_ENTRIES`] entries and the command is refused: beyond that, a repository
//! could be missed and left writable. After a command it has no limit: whatever the
//! command made must be checked, and making it cost the command more than the walk.
//!
//! The walk after a command needs the command's processes gone: a process still running
//! could make a repository after it. When the command's first process ends, bubblewrap's
//! init in the command's PID namespace ends and the kernel kills and reaps the rest before
//! bubblewrap reports the end; on a timeout, and when the command's future is dropped,
//! [`NamespaceInit`] kills that init and waits for its end through a pidfd.

use std::collections::{BTreeMap, VecDeque};
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cap_std::fs::Dir;
use halo_core::sandbox::SandboxError;

use crate::protect::{Protection, is_repository};

/// The most entries (files, folders, links) the walk before a command reads: 200,000
/// (both walks of a root of 100,000 files add about 170 ms to a command on a loaded 2-core
/// machine; `docs/sandbox.md`). A root with more is refused in `WorkspaceWrite`.
pub(crate) const MAX_SCAN_ENTRIES: usize = 200_000;

/// What a protected entry is renamed with: `NAME.halo-untrusted`.
pub(crate) const UNTRUSTED: &str = ".halo-untrusted";

/// The most bytes read from a `.git` file for its `gitdir:` line.
const MAX_GITFILE_BYTES: u64 = 4096;

/// How long the end of a killed command's namespace is waited for.
const END_WAIT: Duration = Duration::from_secs(10);

/// Which file an entry is: its device and inode, read without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Id {
    dev: u64,
    ino: u64,
}

/// Why an entry is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A protected name (`.git`), or a protected path.
    Entry,
    /// A folder git takes for a bare repository.
    Repository,
}

/// The protected entries of the root before a command, and what to bind read-only.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    found: BTreeMap<PathBuf, (Kind, Id)>,
    /// The paths to bind read-only, relative to the root: the entries found and the
    /// folders their `gitdir:` lines name.
    pub(crate) bind: Vec<String>,
}

/// The protected entries in the root, walked from it; `None` past `limit` entries.
fn scan(
    dir: &Dir,
    protection: &Protection,
    limit: Option<usize>,
) -> Option<BTreeMap<PathBuf, (Kind, Id)>> {
    let mut found = BTreeMap::new();
    let mut record = |path: PathBuf, kind: Kind| {
        if let Ok(meta) = dir.symlink_metadata(&path) {
            use cap_fs_ext::MetadataExt as _;
            let id = Id {
                dev: meta.dev(),
                ino: meta.ino(),
            };
            found.insert(path, (kind, id));
        }
    };
    // With no protected name there is nothing to find below the protected paths.
    let mut queue: VecDeque<PathBuf> = if protection.names.is_empty() {
        VecDeque::new()
    } else {
        VecDeque::from([PathBuf::new()])
    };
    let mut seen = 0usize;
    while let Some(at) = queue.pop_front() {
        let listing = if at.as_os_str().is_empty() {
            dir.read_dir(".")
        } else {
            dir.read_dir(&at)
        };
        // A folder that vanished or cannot be read: a command as this user cannot write
        // there either.
        let Ok(listing) = listing else { continue };
        let entries: Vec<(String, bool)> = listing
            .filter_map(Result::ok)
            .map(|e| {
                let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                (e.file_name().to_string_lossy().into_owned(), is_dir)
            })
            .collect();
        seen += entries.len();
        if limit.is_some_and(|limit| seen > limit) {
            return None;
        }
        if protection.repositories()
            && !at.as_os_str().is_empty()
            && is_repository(|n| entries.iter().any(|(name, _)| name == n))
        {
            record(at, Kind::Repository);
            continue;
        }
        for (name, is_dir) in entries {
            let path = at.join(&name);
            if protection.is_name(&name) {
                record(path, Kind::Entry);
            } else if is_dir {
                queue.push_back(path);
            }
        }
    }
    for p in &protection.paths {
        if !p.is_root() {
            record(PathBuf::from(p.as_str()), Kind::Entry);
        }
    }
    Some(found)
}

/// The folder a `.git` file at `path` names (`gitdir: DIR`), relative to the root, when it
/// lies inside it.
fn gitdir_target(dir: &Dir, root: &Path, path: &Path) -> Option<PathBuf> {
    let file = dir.open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_GITFILE_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let target = Path::new(target);
    let joined = if target.is_absolute() {
        target.strip_prefix(root).ok()?.to_path_buf()
    } else {
        path.parent().unwrap_or(Path::new("")).join(target)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// Walks the root before a command.
///
/// # Errors
/// [`SandboxError::NoOsSandbox`] when the root holds more than [`MAX_SCAN_ENTRIES`]
/// entries.
pub(crate) fn before(
    dir: &Dir,
    root: &Path,
    protection: &Protection,
) -> Result<Watch, SandboxError> {
    let Some(found) = scan(dir, protection, Some(MAX_SCAN_ENTRIES)) else {
        return Err(SandboxError::NoOsSandbox {
            reason: format!(
                "the folder holds more than {MAX_SCAN_ENTRIES} files and folders, more than \
                 the sandbox walks before each command to find the git repositories a command \
                 must not change (their hooks would run outside the sandbox); run commands in \
                 a smaller folder, or with the sandbox read-only"
            ),
        });
    };
    let mut bind: Vec<String> = Vec::new();
    for path in found.keys() {
        bind.push(path.to_string_lossy().into_owned());
        if path
            .file_name()
            .is_some_and(|n| protection.is_name(&n.to_string_lossy()))
            && let Some(target) = gitdir_target(dir, root, path)
        {
            bind.push(target.to_string_lossy().into_owned());
        }
    }
    Ok(Watch { found, bind })
}

/// Walks the root after a command (whose processes are all gone) and renames every
/// protected entry it made; returns one note per entry for the command's result.
pub(crate) fn after(dir: &Dir, protection: &Protection, watch: &Watch) -> Vec<String> {
    let Some(now) = scan(dir, protection, None) else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for (path, (kind, id)) in now {
        if watch.found.get(&path).is_some_and(|(_, was)| *was == id) {
            continue;
        }
        let note = quarantine(dir, &path, kind);
        tracing::warn!(path = %path.display(), "{note}");
        notes.push(note);
    }
    notes
}

/// A free name beside `path` for it: `NAME.halo-untrusted`, else with `-2`, `-3`, ...
fn untrusted(dir: &Dir, path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    (1..=1000).find_map(|n| {
        let candidate = if n == 1 {
            path.with_file_name(format!("{name}{UNTRUSTED}"))
        } else {
            path.with_file_name(format!("{name}{UNTRUSTED}-{n}"))
        };
        dir.symlink_metadata(&candidate)
            .is_err()
            .then_some(candidate)
    })
}

/// Renames what a command made at `path` so that nothing outside the sandbox starts from
/// it; the note for the command's result.
fn quarantine(dir: &Dir, path: &Path, kind: Kind) -> String {
    let shown = path.display();
    let why = "programs outside the sandbox start processes from it (git hooks and settings, \
               MCP servers), so a command may not make it; ask the user to make it";
    // A repository's `HEAD` goes: git no longer takes the folder for one.
    let head_away = |folder: &Path| -> std::io::Result<()> {
        let head = folder.join("HEAD");
        if dir.symlink_metadata(&head).is_err() {
            return Ok(());
        }
        let to = untrusted(dir, &head).ok_or_else(|| std::io::Error::other("no free name"))?;
        dir.rename(&head, dir, &to)
    };
    match kind {
        Kind::Repository => match head_away(path) {
            Ok(()) => format!(
                "[the command made `{shown}` a git repository; {why}: its `HEAD` was renamed \
                 `HEAD{UNTRUSTED}`]"
            ),
            Err(e) => format!(
                "[the command made `{shown}` a git repository; {why}; renaming its `HEAD` \
                 failed ({e}): do not run git in `{shown}`]"
            ),
        },
        Kind::Entry => {
            let moved = untrusted(dir, path)
                .ok_or_else(|| std::io::Error::other("no free name"))
                .and_then(|to| dir.rename(path, dir, &to).map(|()| to));
            match moved {
                Ok(to) => {
                    if dir.symlink_metadata(&to).is_ok_and(|m| m.is_dir()) {
                        let _ = head_away(&to);
                    }
                    format!(
                        "[the command made `{shown}`; {why}: it was renamed `{}`]",
                        to.display()
                    )
                }
                Err(e) => format!(
                    "[the command made `{shown}`; {why}; renaming it failed ({e}): remove it \
                     before using git or starting an agent in this folder]"
                ),
            }
        }
    }
}

/// The first process of a running command's PID namespace (bubblewrap's init), held by a
/// pidfd so that its end can be waited for.
pub(crate) struct NamespaceInit {
    pidfd: OwnedFd,
}

impl NamespaceInit {
    /// The child of bubblewrap's process `outer` (still running), found in `/proc`.
    pub(crate) fn of(outer: u32) -> Option<Self> {
        let outer = outer.to_string();
        let child = std::fs::read_dir("/proc")
            .ok()?
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .find(|pid| {
                let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    return false;
                };
                // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    .is_some_and(|ppid| ppid == outer)
            })?;
        let pid = rustix::process::Pid::from_raw(child)?;
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()?;
        Some(NamespaceInit { pidfd })
    }

    /// Kills the namespace's init (the kernel then kills and reaps every other process of
    /// the namespace before the init's end is reported) and waits for that end, at most
    /// [`END_WAIT`]. Blocking.
    pub(crate) fn end(self) {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let _ = rustix::process::pidfd_send_signal(&self.pidfd, rustix::process::Signal::KILL);
        let timeout = Timespec {
            tv_sec: END_WAIT.as_secs() as _,
            tv_nsec: 0,
        };
        let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
        if !matches!(poll(&mut fds, Some(&timeout)), Ok(n) if n > 0) {
            tracing::warn!("a killed command's processes did not end within 10 s");
        }
    }
}

/// What is left to do after a command: walk the root and rename what it made. Done by
/// [`finish`](Self::finish), or on drop (the command's future dropped mid-run) after the
/// command's namespace ended.
pub(crate) struct Pending {
    pub(crate) dir: Arc<Dir>,
    pub(crate) protection: Protection,
    pub(crate) watch: Watch,
}

impl Pending {
    /// Walks the root after the command; the notes for its result. Blocking.
    pub(crate) fn finish(self) -> Vec<String> {
        after(&self.dir, &self.protection, &self.watch)
    }
}
