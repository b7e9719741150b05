//! The alternative to bubblewrap that was weighed for the OS sandbox, measured in the exec section: `bash -c`
//! confined in-process by Landlock and seccomp, as codex's linux-sandbox confines its commands.
//!
//! Each command is spawned the way `Sandbox::exec` spawns an unconfined one (process-wrap,
//! its own process group, stdin closed, a scrubbed environment, both outputs piped), plus a
//! `pre_exec` hook. Everything that allocates or opens files is done in the parent before the
//! fork: the Landlock ruleset is built per command (its rules open `/`, the root and
//! `/dev/null`), the seccomp program once. The child only applies them
//! (`RulesetCreated::restrict_self`, `seccompiler::apply_filter`: `prctl` and two system
//! calls) before it execs bash.
//!
//! The ruleset is workspace-write: read and execute everywhere, write only beneath the root
//! (and `/dev/null`); TCP bind and connect denied (Landlock ABI 4), UDP too where the kernel
//! has ABI 10; signals and abstract unix sockets scoped to the sandbox (ABI 6). It asks for
//! the newest ABI this crate knows, best effort: the kernel enforces what it has. The seccomp
//! filter makes `ptrace`, `mount` and `unshare` fail with `EPERM` (a real filter would list
//! more, and `clone` with namespace flags too; a longer filter costs nanoseconds a call).
//!
//! What this cannot give that the OS sandbox requires (and bubblewrap gives): a PID namespace (the
//! machine's processes stay visible, and a `setsid` or double-forked process survives the
//! kill on timeout), a private `/tmp` (the host's is shared, or not writable at all, as
//! here), and the network off for UDP on kernels before Landlock ABI 10.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, LandlockStatus, RestrictionStatus, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};

use super::exec::Outcome;

/// The newest Landlock ABI this crate knows; best effort drops what the kernel lacks.
const WANTED: ABI = ABI::V10;

/// `PATH` for commands, as `Sandbox::exec` gives it when the allowlist passes none on.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Spawns commands under Landlock + seccomp with `root` writable.
pub struct LandlockExec {
    root: PathBuf,
    filter: Arc<BpfProgram>,
}

impl LandlockExec {
    /// Compiles the seccomp filter for this machine's architecture.
    pub fn new(root: &Path) -> Result<Self, Box<dyn std::error::Error>> {
        let denied = [libc::SYS_ptrace, libc::SYS_mount, libc::SYS_unshare]
            .into_iter()
            .map(|nr| (nr, Vec::new()))
            .collect();
        let filter: BpfProgram = SeccompFilter::new(
            denied,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            std::env::consts::ARCH.try_into()?,
        )?
        .try_into()?;
        Ok(LandlockExec {
            root: root.to_path_buf(),
            filter: Arc::new(filter),
        })
    }

    /// The ruleset, created in the kernel with its rules added, not yet enforced.
    fn ruleset(&self) -> Result<RulesetCreated, landlock::RulesetError> {
        Ruleset::default()
            .handle_access(AccessFs::from_all(WANTED))?
            .handle_access(AccessNet::from_all(WANTED))?
            .scope(Scope::from_all(WANTED))?
            .create()?
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(WANTED)))?
            .add_rules(path_beneath_rules(
                [self.root.as_path(), Path::new("/dev/null")],
                AccessFs::from_all(WANTED),
            ))
    }

    /// What the kernel enforces of the ruleset, learnt by enforcing it on a throwaway thread
    /// (`restrict_self` confines the calling thread only), as a line for the output.
    pub fn status(&self) -> Result<String, Box<dyn std::error::Error>> {
        let ruleset = self.ruleset()?;
        let status: RestrictionStatus = std::thread::spawn(move || ruleset.restrict_self())
            .join()
            .map_err(|_| "the Landlock probe thread panicked")??;
        let abi = match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => format!("ABI {effective_abi}"),
            other => format!("{other:?}"),
        };
        let enforced = match status.ruleset {
            RulesetStatus::FullyEnforced => "fully enforced",
            RulesetStatus::PartiallyEnforced => "partially enforced (what this ABI has)",
            RulesetStatus::NotEnforced => "NOT enforced",
        };
        Ok(format!("Landlock {abi} in this kernel; ruleset {enforced}"))
    }

    /// Runs `bash -c command` in the root under the ruleset and the filter.
    pub async fn exec(&self, command: &str) -> io::Result<Outcome> {
        let mut ruleset = Some(self.ruleset().map_err(io::Error::other)?);
        let filter = Arc::clone(&self.filter);
        let mut cmd = CommandWrap::with_new("bash", |c| {
            c.arg("-c")
                .arg(command)
                .current_dir(&self.root)
                .env_clear()
                .env("PATH", PATH)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            #[allow(unsafe_code)]
            // SAFETY: the hook runs in the forked child before exec. It allocates nothing on
            // success: it takes the ruleset built in the parent and makes the system calls
            // that enforce it and the compiled filter; on failure it returns an errno.
            unsafe {
                c.pre_exec(move || confine(ruleset.take(), &filter));
            }
        });
        cmd.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let out = Box::into_pin(cmd.spawn()?.wait_with_output()).await?;
        Ok(Outcome {
            exit_code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// In the child: enforce the ruleset (which also sets `no_new_privs`), then the filter.
fn confine(ruleset: Option<RulesetCreated>, filter: &BpfProgram) -> io::Result<()> {
    let ruleset = ruleset.ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    match ruleset.restrict_self() {
        Ok(status) if status.ruleset == RulesetStatus::NotEnforced => {
            return Err(io::Error::from_raw_os_error(libc::ENOSYS));
        }
        Ok(_) => {}
        Err(_) => return Err(io::Error::last_os_error()),
    }
    seccompiler::apply_filter(filter).map_err(|_| io::Error::last_os_error())
}
