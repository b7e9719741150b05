//! `exec` of [`ContainerSandbox`](super::ContainerSandbox): `bash -c COMMAND` in the root,
//! in the OS sandbox of its [`SandboxMode`] ([`super::os`]) unless that is `FullAccess`, in
//! its own process group, with stdin closed, a scrubbed environment, a timeout and output
//! kept in bounded memory.
//!
//! In the OS sandbox the command also has its own PID namespace, so when it ends or times
//! out every process it started dies with it, `setsid` or not. Unconfined, a process that
//! called `setsid` leaves the group and outlives the kill; the result then says so.
//!
//! In the OS sandbox the command also gets the sandbox's [`ExecLimits`]: rlimits set by a
//! `bash` preamble inside, a `pids` cgroup where one can be made, and a sampler that reads
//! the command's process tree every [`SAMPLE_EVERY`] and kills it over its memory or process
//! limit; a limit it reached is named in [`ExecOutput::limit`] ([`super::limits`]).
//!
//! The command leads a new process group (`process-wrap`'s `ProcessGroup`). When the
//! command ends, or when the timeout fires, the whole group is killed with `SIGKILL`, so a
//! background child (`sleep 30 &`) dies with it and holds no pipe open. Each output stream
//! keeps its first and last `output_limit / 2` bytes ([`HeadTail`]), however much the
//! command prints. A non-zero exit and a timeout are data ([`ExecOutput`]), not errors.

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use cap_std::fs::Dir;
use halo_core::sandbox::{ExecOutput, ExecRequest, SandboxError};
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::cgroup::PidsCgroup;
use super::guard;
use super::limits::{self, ExecLimits, Limit};
use super::os::{self, SandboxMode};
use crate::protect::Protection;
use crate::text::HeadTail;

/// How often the sampler reads the command's memory and processes: 100 ms.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// How long output pipes may stay open after the process group was killed: a process that
/// left the group (`setsid`) can hold them; its output is then given up.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// `PATH` for commands when the allowlist does not pass one on.
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The size of one read from an output pipe: 64 KiB.
const READ_CHUNK: usize = 64 * 1024;

/// The line added to stderr when a process that left the group kept the pipes open.
pub(crate) const PIPES_HELD_NOTE: &str = "[a process that left the command's process group \
     kept its output open; the output may be incomplete]";

/// A spawned command whose whole process group is killed when this is dropped before the
/// group was reaped (the exec future was dropped mid-run), not only its leader; the check
/// of what the command left behind ([`guard`]) then runs once its namespace has ended.
struct Group {
    child: Box<dyn ChildWrapper>,
    /// Every member was reaped: the group id may be reused and must not be signalled.
    reaped: bool,
    /// The walk after the command, while it is still to do.
    pending: Option<guard::Pending>,
}

impl Drop for Group {
    fn drop(&mut self) {
        let init = match (&self.pending, self.reaped) {
            (Some(_), false) => self.child.id().and_then(guard::NamespaceInit::of),
            _ => None,
        };
        if !self.reaped {
            let _ = self.child.start_kill();
        }
        if let Some(pending) = self.pending.take() {
            // Blocking, in the dropping thread: nothing else will check the root.
            if let Some(init) = init {
                init.end();
            }
            pending.finish();
        }
    }
}

/// How a command is confined: the sandbox's mode, whether the network is allowed, what is
/// protected in the root (the capability the walks of [`guard`] go through), and the
/// resource limits.
pub(super) struct Confinement<'a> {
    pub(super) mode: SandboxMode,
    pub(super) network: bool,
    pub(super) dir: Arc<Dir>,
    pub(super) protection: Protection,
    pub(super) limits: &'a ExecLimits,
}

pub(super) async fn exec(
    root: &Path,
    env_allowlist: &[String],
    confinement: Confinement<'_>,
    request: ExecRequest,
) -> Result<ExecOutput, SandboxError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(SandboxError::Spawn {
            error: std::io::Error::other("exec needs a tokio runtime with IO and time enabled"),
        });
    }
    let confined = confinement.mode != SandboxMode::FullAccess;
    let features = match confined.then(os::availability) {
        Some(Ok(features)) => Some(*features),
        Some(Err(reason)) => {
            return Err(SandboxError::NoOsSandbox {
                reason: reason.clone(),
            });
        }
        None => None,
    };
    // What the command must not change, found before it runs (WorkspaceWrite: in the other
    // modes it can write nothing, or anything).
    let watch = if confinement.mode == SandboxMode::WorkspaceWrite {
        let (dir, protection, at) = (
            Arc::clone(&confinement.dir),
            confinement.protection.clone(),
            root.to_path_buf(),
        );
        let found = tokio::task::spawn_blocking(move || guard::before(&dir, &at, &protection))
            .await
            .map_err(|e| SandboxError::Spawn {
                error: std::io::Error::other(e),
            })??;
        Some(found)
    } else {
        None
    };
    let limits = confinement.limits;
    let spawn_error = |error| SandboxError::Spawn { error };
    // What the child keeps open for bubblewrap: the seccomp program's pipe, and the cgroup
    // it joins.
    let seccomp = match (confined, seccomp_program()) {
        (true, Some(program)) => Some(super::seccomp::pipe(program).map_err(spawn_error)?),
        _ => None,
    };
    let cgroup = limits
        .processes
        .filter(|_| confined)
        .and_then(PidsCgroup::create);
    let join = cgroup
        .as_ref()
        .map(PidsCgroup::procs)
        .transpose()
        .map_err(spawn_error)?;
    let program = if confined { os::program() } else { "bash" };
    let mut cmd = CommandWrap::with_new(program, |c| {
        if confined {
            let bind = watch
                .as_ref()
                .map(|w| w.bind.as_slice())
                .unwrap_or_default();
            let protected = os::existing_protected(root, bind);
            let extras = os::Extras {
                disable_userns: features.is_some_and(|f| f.disable_userns),
                tmp_size: limits.tmp_size,
                seccomp_fd: seccomp.as_ref().map(AsRawFd::as_raw_fd),
            };
            c.args(os::bwrap_args(
                root,
                &protected,
                confinement.mode,
                confinement.network,
                &extras,
            ))
            .args([
                "--",
                "bash",
                "-c",
                &limits.preamble(),
                "halo-limits",
                "bash",
            ]);
            let seccomp = seccomp.as_ref().map(|p| p.as_raw_fd());
            let join = join;
            #[allow(unsafe_code)]
            // SAFETY: the hook runs in the forked child before exec and only makes system
            // calls (`write`, `fcntl`) on descriptors opened in the parent; it allocates
            // nothing.
            unsafe {
                c.pre_exec(move || {
                    if let Some(procs) = &join {
                        // `0`: the writing process joins the cgroup, before it starts any.
                        (&*procs).write_all(b"0")?;
                    }
                    if let Some(fd) = seccomp {
                        // SAFETY: the parent keeps the pipe open until the child has run.
                        let fd = std::os::fd::BorrowedFd::borrow_raw(fd);
                        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
                    }
                    Ok(())
                });
            }
        }
        c.arg("-c")
            .arg(&request.command)
            .current_dir(root)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for name in env_allowlist {
            if let Some(value) = std::env::var_os(name) {
                c.env(name, value);
            }
        }
        if std::env::var_os("PATH").is_none() || !env_allowlist.iter().any(|n| n == "PATH") {
            c.env("PATH", FALLBACK_PATH);
        }
    });
    cmd.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let mut group = Group {
        child: cmd.spawn().map_err(spawn_error)?,
        reaped: false,
        pending: watch.map(|watch| guard::Pending {
            dir: Arc::clone(&confinement.dir),
            protection: confinement.protection.clone(),
            watch,
        }),
    };
    let watching = group.pending.is_some();
    // The child has its own copy now.
    drop(seccomp);
    let sampled = confined.then_some(limits);
    let pid = group.child.id();
    let stdout = group.child.stdout().take();
    let stderr = group.child.stderr().take();
    let mut out = HeadTail::new(request.output_limit);
    let mut err = HeadTail::new(request.output_limit);
    let (killed_tx, killed_rx) = tokio::sync::oneshot::channel::<()>();

    let waiting = async {
        // Wait for the group's leader (bash or bubblewrap) only: the group's wait would also
        // wait for background children. The sampler ends the wait when the command goes
        // over a limit.
        let status = tokio::time::timeout(request.timeout, async {
            tokio::select! {
                status = group.child.inner_mut().wait() => Ok(status),
                limit = sample(pid, sampled) => Err(limit),
            }
        })
        .await;
        // On a timeout or a limit the command's namespace still runs: find its init before
        // the kill, to wait for its end before the root is walked.
        let init = match (&status, watching) {
            (Err(_) | Ok(Err(_)), true) => group.child.id().and_then(guard::NamespaceInit::of),
            _ => None,
        };
        // Whatever is left of the group goes now, on exit as on timeout. The group id
        // stays reserved while any member lives, so this cannot hit another group
        // (barring a full wrap of the PID space between these two lines).
        let _ = group.child.start_kill();
        let _ = killed_tx.send(());
        if let Some(init) = init {
            let _ = tokio::task::spawn_blocking(move || init.end()).await;
        }
        status
    };
    let reading = async {
        let both = async { tokio::join!(drain(stdout, &mut out), drain(stderr, &mut err)) };
        tokio::select! {
            _ = both => false,
            _ = async {
                let _ = killed_rx.await;
                tokio::time::sleep(PIPE_GRACE).await;
            } => true,
        }
    };
    let (status, pipes_held) = tokio::join!(waiting, reading);
    // Reap the killed members of the group (zombies otherwise).
    if let Ok(Ok(_)) = tokio::time::timeout(PIPE_GRACE, group.child.wait()).await {
        group.reaped = true;
    }
    // The command's processes are gone (bubblewrap reports the end of its first process
    // once the kernel has reaped the rest of its namespace; on a timeout or a limit its init
    // was waited for above): rename what it made that must not be there.
    let notes = match group.pending.take() {
        Some(pending) => tokio::task::spawn_blocking(move || pending.finish())
            .await
            .unwrap_or_default(),
        None => Vec::new(),
    };

    const SIGKILL: i32 = 9;
    let mut killed_at = None;
    let (exit_code, signal, timed_out) = match status {
        Err(_elapsed) => (None, None, true),
        Ok(Err(limit)) => {
            killed_at = Some(limit);
            (None, Some(SIGKILL), false)
        }
        Ok(Ok(Ok(status))) if confined => {
            let (code, signal) = os::decode_status(status.code());
            (code, signal.or(status.signal()), false)
        }
        Ok(Ok(Ok(status))) => (status.code(), status.signal(), false),
        Ok(Ok(Err(_))) => (None, None, false),
    };
    tracing::debug!(
        timed_out,
        exit_code,
        signal,
        stdout_bytes = out.total(),
        stderr_bytes = err.total(),
        pipes_held,
        "command finished"
    );
    let out = out.finish();
    let mut err = err.finish();
    let failed = exit_code != Some(0);
    let limit = match killed_at {
        Some(limit) => Some(limit),
        None if !confined || !failed => None,
        None if cgroup.as_ref().is_some_and(PidsCgroup::reached) => Some(Limit::Processes),
        None => limits.reached(signal, &err.text, root),
    };
    if let Some(cgroup) = cgroup {
        // The command's processes are gone, but the kernel may count the last of them in
        // the cgroup for another second or two (measured: 1.2–1.8 s after a command in a
        // PID namespace of its own, which every bubblewrap command has). The result need
        // not wait for that.
        tokio::spawn(cgroup.remove());
    }
    if pipes_held {
        if !err.text.is_empty() && !err.text.ends_with('\n') {
            err.text.push('\n');
        }
        err.text.push_str(PIPES_HELD_NOTE);
    }
    for note in notes {
        if !err.text.is_empty() && !err.text.ends_with('\n') {
            err.text.push('\n');
        }
        err.text.push_str(&note);
    }
    Ok(ExecOutput {
        exit_code,
        signal,
        timed_out,
        stdout: out.text,
        stderr: err.text,
        stdout_dropped: out.dropped,
        stderr_dropped: err.dropped,
        limit: limit.map(|l| limits.describe(l)),
    })
}

/// The seccomp program for commands, where one can be compiled here.
fn seccomp_program() -> Option<&'static [u8]> {
    #[cfg(target_os = "linux")]
    return super::seccomp::program();
    #[cfg(not(target_os = "linux"))]
    return None;
}

/// Reads the use of the process tree under `pid` every [`SAMPLE_EVERY`] until it goes over
/// one of `limits`' (memory, processes); never ends without limits to watch.
async fn sample(pid: Option<u32>, limits: Option<&ExecLimits>) -> Limit {
    let (Some(pid), Some(limits)) = (pid, limits) else {
        return std::future::pending().await;
    };
    if limits.memory.is_none() && limits.processes.is_none() {
        return std::future::pending().await;
    }
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Some(limit) = limits.over(limits::usage(pid)) {
            return limit;
        }
    }
}

/// Reads a pipe to its end into `buf`; a read error ends it.
async fn drain(pipe: Option<impl AsyncRead + Unpin>, buf: &mut HeadTail) {
    let Some(mut pipe) = pipe else { return };
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.push(&chunk[..n]),
        }
    }
}
