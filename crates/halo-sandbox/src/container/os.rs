//! The OS sandbox of [`ContainerSandbox`](super::ContainerSandbox)'s commands: bubblewrap.
//!
//! Each command runs as `bwrap ARGS -- bash -c COMMAND`, where the arguments ([`bwrap_args`])
//! give it its own view of the machine:
//!
//! - the host's filesystem bound read-only at `/`, with fresh `/proc` (of its own PID
//!   namespace; its machine-wide settings, `/proc/sys` and the like, read-only) and a
//!   minimal `/dev`, `/tmp` a private, empty tmpfs (when the root lies under `/tmp`, the
//!   folders leading to it there are read-only), and `/run` an empty one, hiding the
//!   machine's sockets (D-Bus, Docker);
//! - in [`SandboxMode::WorkspaceWrite`], the root bound read-write at its own path and each
//!   protected path that exists bound read-only over it; in [`SandboxMode::ReadOnly`], the
//!   root read-only too, and `/tmp` remounted read-only;
//! - its own PID namespace (it sees only its own processes, and every one of them dies when
//!   the command's first process ends, times out or is killed: the namespace's init dies and
//!   the kernel kills the rest, whatever `setsid`, `nohup` or `set -m` did), IPC and UTS
//!   namespaces, and unless the network is allowed, its own network namespace (a loopback of
//!   its own and nothing else);
//! - its own user namespace, in which it cannot make another (`--disable-userns`, where the
//!   installed bubblewrap has it; the seccomp filter refuses new user namespaces in any case),
//!   so a command run as root cannot get the capabilities a fresh user namespace gives, which
//!   would let it mount the machine's cgroup filesystem and write its files;
//! - a seccomp filter ([`super::seccomp`]) that answers the kernel keyring calls and new user
//!   namespaces with `ENOSYS`: the keyrings are not namespaced, and root's are the machine's;
//! - every writable tmpfs (`/tmp`, `/dev/shm`, `/run`) of a bounded size, `/dev` itself
//!   read-only;
//! - no capabilities, a new session (no terminal to push input into), and death with the
//!   process that started it.
//!
//! Why bubblewrap and not Landlock + seccomp in the process is in `docs/sandbox.md`: Landlock
//! confines writes and TCP but has no PID namespace, so it can neither hide the machine's
//! processes nor kill what escapes a process group, nor give a private `/tmp`.
//!
//! Whether bubblewrap works here is probed once per process ([`availability`]): `bwrap` must
//! be installed and able to make its namespaces (as root, or with unprivileged user
//! namespaces enabled); the probe also learns whether it knows `--disable-userns` (0.8.0 and
//! later).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use halo_core::sandbox::{FilesystemAccess, Isolation, OsIsolation};

/// What a [`ContainerSandbox`](super::ContainerSandbox) lets its commands do, as the
/// [`PermissionPreset`](crate::policy::PermissionPreset)s name it (codex's sandbox modes).
///
/// | mode | filesystem | network | processes |
/// |---|---|---|---|
/// | `ReadOnly` | all read-only, the root included | off unless allowed | own PID namespace |
/// | `WorkspaceWrite` (default) | the root writable but its protected paths; `/tmp` private | off unless allowed | own PID namespace |
/// | `FullAccess` | no OS sandbox: anything this user can | the machine's | the machine's |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SandboxMode {
    /// Commands may write nothing.
    ReadOnly,
    /// Commands may write in the root, except its protected paths.
    #[default]
    WorkspaceWrite,
    /// Commands run unconfined, as this user: no OS sandbox, chosen explicitly.
    FullAccess,
}

impl SandboxMode {
    /// What the OS sandbox lets a command write in this mode; `None` for
    /// [`FullAccess`](Self::FullAccess).
    pub fn filesystem(self) -> Option<FilesystemAccess> {
        match self {
            SandboxMode::ReadOnly => Some(FilesystemAccess::ReadOnly),
            SandboxMode::WorkspaceWrite => Some(FilesystemAccess::WorkspaceWrite),
            SandboxMode::FullAccess => None,
        }
    }

    /// The isolation commands get in this mode on this machine, as
    /// [`Capabilities::isolation`](halo_core::sandbox::Capabilities::isolation) reports it.
    pub fn isolation(self, network: bool) -> Isolation {
        let Some(filesystem) = self.filesystem() else {
            return Isolation::Unconfined;
        };
        match availability() {
            Ok(_) => Isolation::Os(OsIsolation::new(MECHANISM, filesystem, network, true)),
            Err(reason) => Isolation::Unavailable {
                reason: reason.clone(),
            },
        }
    }
}

/// The name [`OsIsolation::mechanism`] reports.
pub(crate) const MECHANISM: &str = "bubblewrap";

/// The program run; looked up on the `PATH` of this process.
const BWRAP: &str = "bwrap";

/// What the installed bubblewrap can do, as the probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Features {
    /// It knows `--disable-userns` (bubblewrap 0.8.0 and later).
    pub(crate) disable_userns: bool,
}

/// Whether the OS sandbox works on this machine: probed once per process by running `true`
/// in it, first with `--disable-userns`, then without. `Err` says why not and what to
/// install or enable.
pub(crate) fn availability() -> &'static Result<Features, String> {
    static PROBE: OnceLock<Result<Features, String>> = OnceLock::new();
    PROBE.get_or_init(probe)
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Result<Features, String> {
    Err(
        "the OS sandbox for commands is bubblewrap, which needs Linux; run commands \
         unconfined only if you trust them (SandboxMode::FullAccess)"
            .into(),
    )
}

#[cfg(target_os = "linux")]
fn probe() -> Result<Features, String> {
    let run = |disable_userns: bool| {
        let extras = Extras {
            disable_userns,
            ..Extras::default()
        };
        std::process::Command::new(BWRAP)
            .args(bwrap_args(
                Path::new("/tmp"),
                &[],
                SandboxMode::ReadOnly,
                false,
                &extras,
            ))
            .arg("--")
            .arg("true")
            .stdin(std::process::Stdio::null())
            .output()
    };
    let output = match run(true) {
        Ok(out) if out.status.success() => {
            return Ok(Features {
                disable_userns: true,
            });
        }
        // An older bubblewrap: without `--disable-userns`, the seccomp filter alone keeps
        // commands from making user namespaces.
        Ok(out) if String::from_utf8_lossy(&out.stderr).contains("disable-userns") => run(false),
        other => other,
    };
    match output {
        Ok(out) if out.status.success() => Ok(Features {
            disable_userns: false,
        }),
        Ok(out) => Err(format!(
            "bubblewrap (bwrap) cannot make its namespaces here ({}: {}); run as root or \
             enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 \
             and user.max_user_namespaces > 0)",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(
            "bubblewrap (bwrap) is not installed; install it (`apt-get install bubblewrap` on \
             Debian and Ubuntu, `dnf install bubblewrap` on Fedora)"
                .into(),
        ),
        Err(e) => Err(format!("bubblewrap (bwrap) cannot be started: {e}")),
    }
}

/// The parts of the command's `/proc` bound read-only over it: the machine-wide ones
/// bubblewrap means to cover (`/proc/sys`: kernel settings; `sysrq-trigger`; `irq`; `bus`).
const PROC_COVERED: [&str; 4] = ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"];

/// The files of the command's `/proc` covered by an empty file: the keyrings' listings.
const PROC_HIDDEN: [&str; 2] = ["/proc/keys", "/proc/key-users"];

/// The program to run a command under the OS sandbox.
pub(crate) fn program() -> &'static str {
    BWRAP
}

/// What a command's bubblewrap gets besides its view of the files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Extras {
    /// Pass `--disable-userns` ([`Features::disable_userns`]).
    pub(crate) disable_userns: bool,
    /// The size of each writable tmpfs (`/tmp`, `/dev/shm`, `/run`) in bytes; `None`: the
    /// kernel's default (half the machine's memory).
    pub(crate) tmp_size: Option<u64>,
    /// A file descriptor, open in the child, from which bubblewrap reads the seccomp
    /// program (`--seccomp FD`).
    pub(crate) seccomp_fd: Option<i32>,
}

/// bubblewrap's arguments up to (not including) `--` for a command with `root` as its
/// working folder. `protected` are the real (canonical) paths of the protected paths that
/// exist under the root; each is bound read-only over the writable root.
///
/// The order matters: bubblewrap applies them in turn, so the private `/tmp` comes before the
/// root (which may lie under `/tmp`) and the protected paths after it.
pub(crate) fn bwrap_args(
    root: &Path,
    protected: &[PathBuf],
    mode: SandboxMode,
    network: bool,
    extras: &Extras,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    push(
        &mut args,
        &[
            "--die-with-parent",
            "--new-session",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--cap-drop",
            "ALL",
        ],
    );
    if extras.disable_userns {
        push(&mut args, &["--disable-userns"]);
    }
    if !network {
        push(&mut args, &["--unshare-net"]);
    }
    if let Some(fd) = extras.seccomp_fd {
        push(&mut args, &["--seccomp", &fd.to_string()]);
    }
    push(&mut args, &["--ro-bind", "/", "/", "--proc", "/proc"]);
    // bubblewrap covers these with read-only binds only where `access(W_OK)` says they are
    // writable, and on the `/proc/sys` folder it says no even to root, whose writes to the
    // sysctl files in it need no capability for many of them: a command run as root would
    // change the machine's kernel settings (`vm.*`; `kernel.core_pattern`, whose pipe runs
    // a program as root outside every namespace). So bind them read-only whoever runs.
    // The source is the machine's /proc; a sysctl file shows the settings of the reader's
    // own namespaces (network, UTS), so commands still read theirs.
    for covered in PROC_COVERED {
        push(&mut args, &["--ro-bind-try", covered, covered]);
    }
    // The kernel keyrings' listings show the ids and names of the keys of every user the
    // command's namespace maps (root's, for a command run as root); hidden, as Docker does.
    for hidden in PROC_HIDDEN {
        push(&mut args, &["--ro-bind-try", "/dev/null", hidden]);
    }
    // Every tmpfs a command can write holds memory, so each gets the size limit. `/dev` is
    // a tmpfs too, bubblewrap's, with no size: read-only once `/dev/shm` is mounted in it.
    let size = extras.tmp_size.map(|bytes| bytes.to_string());
    let tmpfs = |args: &mut Vec<OsString>, path: &str| {
        if let Some(size) = &size {
            push(args, &["--size", size]);
        }
        push(args, &["--tmpfs", path]);
    };
    push(&mut args, &["--dev", "/dev"]);
    tmpfs(&mut args, "/dev/shm");
    push(&mut args, &["--remount-ro", "/dev", "--perms", "1777"]);
    tmpfs(&mut args, "/tmp");
    // The machine's sockets (`/run/dbus`, `/run/docker.sock`, ...) are files a command could
    // connect to through the read-only bind, whatever the network namespace.
    tmpfs(&mut args, "/run");
    if network {
        // `/etc/resolv.conf` is a link into `/run` on systemd-resolved machines (Ubuntu):
        // with the network allowed, keep DNS working.
        push(
            &mut args,
            &[
                "--ro-bind-try",
                "/run/systemd/resolve",
                "/run/systemd/resolve",
            ],
        );
    }
    // A root under /tmp is bound into the private tmpfs, whose folders leading to it would be
    // writable: make them read-only (0555; the command has no CAP_DAC_OVERRIDE), so `../x`
    // fails as it does for a root elsewhere instead of landing in the discarded tmpfs.
    if let Ok(below) = root.strip_prefix("/tmp") {
        let mut at = PathBuf::from("/tmp");
        let mut parts: Vec<_> = below.components().collect();
        parts.pop();
        for part in parts {
            at.push(part);
            args.extend([
                "--perms".into(),
                "0555".into(),
                "--dir".into(),
                at.clone().into(),
            ]);
        }
    }
    let bind = match mode {
        SandboxMode::WorkspaceWrite => "--bind",
        SandboxMode::ReadOnly | SandboxMode::FullAccess => "--ro-bind",
    };
    args.extend([bind.into(), root.into(), root.into()]);
    if mode == SandboxMode::WorkspaceWrite {
        // Each folder between the root and a protected path is bound over itself first: a
        // folder holding a mount cannot be renamed, so no command can move a protected
        // path away and put its own in its place.
        for folder in folders_above(root, protected) {
            args.extend(["--bind".into(), folder.clone().into(), folder.into()]);
        }
        for path in protected {
            args.extend(["--ro-bind".into(), path.into(), path.into()]);
        }
    } else {
        args.extend(["--remount-ro".into(), "/tmp".into()]);
    }
    args.extend(["--chdir".into(), root.into()]);
    args
}

/// The folders strictly between `root` and each of the `protected` paths, each once,
/// parents before their children.
fn folders_above(root: &Path, protected: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = protected
        .iter()
        .flat_map(|p| p.ancestors().skip(1))
        .filter(|a| a.starts_with(root) && *a != root)
        .map(Path::to_path_buf)
        .collect();
    out.sort();
    out.dedup();
    out
}

fn push(args: &mut Vec<OsString>, parts: &[&str]) {
    args.extend(parts.iter().map(OsString::from));
}

/// The real paths of the `protected` paths (relative to `root`) that exist and, once links
/// are resolved, still lie under `root`: what [`bwrap_args`] binds read-only. One that does
/// not exist cannot be bound; a command may create it (`docs/sandbox.md` says so).
pub(crate) fn existing_protected(root: &Path, protected: &[String]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = protected
        .iter()
        .filter_map(|rel| root.join(rel).canonicalize().ok())
        .filter(|real| real.starts_with(root) && real != root)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The exit status of a command under bubblewrap: bubblewrap reports a command killed by
/// signal N as exit code 128 + N (as a shell's `$?` does), so that is read back as the signal.
/// An `exit 137` therefore reads as signal 9 inside the OS sandbox.
pub(crate) fn decode_status(code: Option<i32>) -> (Option<i32>, Option<i32>) {
    match code {
        Some(c) if (129..=128 + 64).contains(&c) => (None, Some(c - 128)),
        other => (other, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn workspace_write_binds_the_root_writable_and_the_protected_paths_over_it() {
        let root = Path::new("/tmp/r");
        let args = strings(&bwrap_args(
            root,
            &[PathBuf::from("/tmp/r/.git")],
            SandboxMode::WorkspaceWrite,
            false,
            &Extras::default(),
        ));
        let joined = args.join(" ");
        assert!(
            joined.ends_with(
                "--unshare-net --ro-bind / / --proc /proc \
                 --ro-bind-try /proc/sys /proc/sys \
                 --ro-bind-try /proc/sysrq-trigger /proc/sysrq-trigger \
                 --ro-bind-try /proc/irq /proc/irq --ro-bind-try /proc/bus /proc/bus \
                 --ro-bind-try /dev/null /proc/keys --ro-bind-try /dev/null /proc/key-users \
                 --dev /dev --tmpfs /dev/shm --remount-ro /dev --perms 1777 --tmpfs /tmp \
                 --tmpfs /run \
                 --bind /tmp/r /tmp/r --ro-bind /tmp/r/.git /tmp/r/.git --chdir /tmp/r"
            ),
            "{joined}"
        );
        let nested = strings(&bwrap_args(
            root,
            &[
                PathBuf::from("/tmp/r/.git"),
                PathBuf::from("/tmp/r/a/b/.git"),
                PathBuf::from("/tmp/r/a/c/.git"),
            ],
            SandboxMode::WorkspaceWrite,
            false,
            &Extras::default(),
        ))
        .join(" ");
        assert!(
            nested.ends_with(
                "--bind /tmp/r /tmp/r --bind /tmp/r/a /tmp/r/a --bind /tmp/r/a/b /tmp/r/a/b \
                 --bind /tmp/r/a/c /tmp/r/a/c --ro-bind /tmp/r/.git /tmp/r/.git \
                 --ro-bind /tmp/r/a/b/.git /tmp/r/a/b/.git --ro-bind /tmp/r/a/c/.git /tmp/r/a/c/.git \
                 --chdir /tmp/r"
            ),
            "{nested}"
        );
        let deep = strings(&bwrap_args(
            Path::new("/tmp/a/b/r"),
            &[],
            SandboxMode::WorkspaceWrite,
            false,
            &Extras::default(),
        ))
        .join(" ");
        assert!(
            deep.contains(
                "--tmpfs /run --perms 0555 --dir /tmp/a --perms 0555 --dir /tmp/a/b \
                 --bind /tmp/a/b/r /tmp/a/b/r"
            ),
            "{deep}"
        );
        assert!(joined.starts_with("--die-with-parent --new-session --unshare-user --unshare-pid"));
        assert!(joined.contains("--cap-drop ALL"));
    }

    #[test]
    fn extras_add_a_user_namespace_without_more_the_filter_and_tmpfs_sizes() {
        let extras = Extras {
            disable_userns: true,
            tmp_size: Some(1 << 20),
            seccomp_fd: Some(7),
        };
        let args = strings(&bwrap_args(
            Path::new("/w"),
            &[],
            SandboxMode::WorkspaceWrite,
            false,
            &extras,
        ))
        .join(" ");
        assert!(
            args.contains(
                "--cap-drop ALL --disable-userns --unshare-net --seccomp 7 --ro-bind / /"
            ),
            "{args}"
        );
        assert!(
            args.contains(
                "--dev /dev --size 1048576 --tmpfs /dev/shm --remount-ro /dev --perms 1777 \
                 --size 1048576 --tmpfs /tmp --size 1048576 --tmpfs /run --bind /w /w"
            ),
            "{args}"
        );
    }

    #[test]
    fn read_only_binds_the_root_read_only_and_tmp_read_only() {
        let args = strings(&bwrap_args(
            Path::new("/w"),
            &[],
            SandboxMode::ReadOnly,
            true,
            &Extras::default(),
        ))
        .join(" ");
        assert!(!args.contains("--unshare-net"), "{args}");
        assert!(
            args.ends_with(
                "--perms 1777 --tmpfs /tmp --tmpfs /run \
                 --ro-bind-try /run/systemd/resolve /run/systemd/resolve \
                 --ro-bind /w /w --remount-ro /tmp --chdir /w"
            ),
            "{args}"
        );
    }

    #[test]
    fn statuses_above_128_are_signals() {
        assert_eq!(decode_status(Some(0)), (Some(0), None));
        assert_eq!(decode_status(Some(3)), (Some(3), None));
        assert_eq!(decode_status(Some(128)), (Some(128), None));
        assert_eq!(decode_status(Some(137)), (None, Some(9)));
        assert_eq!(decode_status(Some(255)), (Some(255), None));
        assert_eq!(decode_status(None), (None, None));
    }

    #[test]
    fn protected_paths_that_exist_under_the_root_are_bound() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join(".git")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("up")).unwrap();
        let got = existing_protected(
            &root,
            &[".git".into(), "missing".into(), "up".into(), ".git".into()],
        );
        assert_eq!(got, [root.join(".git")]);
    }
}
