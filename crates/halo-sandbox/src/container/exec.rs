//! `exec` of [`ContainerSandbox`](super::ContainerSandbox): `bash -c COMMAND` in the root,
//! in the OS sandbox of its [`SandboxMode`] ([`super::os`]) unless that is `FullAccess`, in
//! its own process group, with stdin closed, a scrubbed environment, a timeout and output
//! kept in bounded memory.
//!
//! In the OS sandbox the command also has its own PID namespace, so when it ends or times
//! out every process it started dies with it, `setsid` or not. Unconfined, a process that
//! called `setsid` leaves the group and outlives the kill; the result then says so.
//!
//! The command leads a new process group (`process-wrap`'s `ProcessGroup`). When the
//! command ends, or when the timeout fires, the whole group is killed with `SIGKILL`, so a
//! background child (`sleep 30 &`) dies with it and holds no pipe open. Each output stream
//! keeps its first and last `output_limit / 2` bytes ([`HeadTail`]), however much the
//! command prints. A non-zero exit and a timeout are data ([`ExecOutput`]), not errors.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use halo_core::sandbox::{ExecOutput, ExecRequest, SandboxError};
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::os::{self, SandboxMode};
use crate::text::HeadTail;

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
/// group was reaped (the exec future was dropped mid-run), not only its leader.
struct Group {
    child: Box<dyn ChildWrapper>,
    /// Every member was reaped: the group id may be reused and must not be signalled.
    reaped: bool,
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.start_kill();
        }
    }
}

/// How a command is confined: the sandbox's mode, whether the network is allowed, and the
/// protected paths as written (relative to the root).
pub(super) struct Confinement<'a> {
    pub(super) mode: SandboxMode,
    pub(super) network: bool,
    pub(super) protected: &'a [String],
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
    if confined && let Err(reason) = os::availability() {
        return Err(SandboxError::NoOsSandbox {
            reason: reason.clone(),
        });
    }
    let program = if confined { os::program() } else { "bash" };
    let mut cmd = CommandWrap::with_new(program, |c| {
        if confined {
            let protected = os::existing_protected(root, confinement.protected);
            c.args(os::bwrap_args(
                root,
                &protected,
                confinement.mode,
                confinement.network,
            ))
            .args(["--", "bash"]);
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
        child: cmd.spawn().map_err(|error| SandboxError::Spawn { error })?,
        reaped: false,
    };
    let stdout = group.child.stdout().take();
    let stderr = group.child.stderr().take();
    let mut out = HeadTail::new(request.output_limit);
    let mut err = HeadTail::new(request.output_limit);
    let (killed_tx, killed_rx) = tokio::sync::oneshot::channel::<()>();

    let waiting = async {
        // Wait for the group's leader (bash) only: the group's wait would also wait for
        // background children.
        let status = tokio::time::timeout(request.timeout, group.child.inner_mut().wait()).await;
        // Whatever is left of the group goes now, on exit as on timeout. The group id
        // stays reserved while any member lives, so this cannot hit another group
        // (barring a full wrap of the PID space between these two lines).
        let _ = group.child.start_kill();
        let _ = killed_tx.send(());
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

    let (exit_code, signal, timed_out) = match status {
        Err(_elapsed) => (None, None, true),
        Ok(Ok(status)) if confined => {
            let (code, signal) = os::decode_status(status.code());
            (code, signal.or(status.signal()), false)
        }
        Ok(Ok(status)) => (status.code(), status.signal(), false),
        Ok(Err(_)) => (None, None, false),
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
    if pipes_held {
        if !err.text.is_empty() && !err.text.ends_with('\n') {
            err.text.push('\n');
        }
        err.text.push_str(PIPES_HELD_NOTE);
    }
    Ok(ExecOutput {
        exit_code,
        signal,
        timed_out,
        stdout: out.text,
        stderr: err.text,
        stdout_dropped: out.dropped,
        stderr_dropped: err.dropped,
    })
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
