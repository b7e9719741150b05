//! `bash`: runs `bash -c COMMAND` in the sandbox root, in its own process group, with stdin
//! closed, a scrubbed environment, a timeout and bounded output.
//!
//! The command leads a new process group (`process-wrap`'s `ProcessGroup`). When the
//! command ends, or when the timeout fires, the whole group is killed with `SIGKILL`, so a
//! background child (`sleep 30 &`) dies with it and holds no pipe open. A non-zero exit
//! and a timeout are data for the model, reported in the result, not errors.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use halo_core::{Tool, ToolError, ToolOutput};
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::error::SandboxError;
use crate::sandbox::{MAX_EXEC_TIMEOUT, Shared};
use crate::text::HeadTail;

/// How long output pipes may stay open after the process group was killed: a process that
/// left the group (`setsid`) can hold them; its output is then given up.
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// `PATH` for commands when the allowlist does not pass one on.
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

// Arguments of `bash` (no doc comment: it would enter the schema the model reads).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BashArgs {
    /// The command line, run with `bash -c` in the sandbox root folder.
    command: String,
    /// Timeout in seconds (default: the sandbox's; at most 600).
    #[schemars(range(min = 1))]
    timeout_secs: Option<u64>,
}

pub(crate) struct BashTool {
    shared: Arc<Shared>,
    description: String,
}

impl BashTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let description = format!(
            "Runs a shell command with `bash -c` in the sandbox root folder and returns its \
             exit code, stdout and stderr. stdin is closed and only a few environment \
             variables are set. The command and every process it started are killed when it \
             ends or when the timeout ({} unless timeout_secs is given) runs out. Each of \
             stdout and stderr is kept to {} bytes, its start and its end.",
            format_duration(shared.config.exec_timeout),
            shared.config.output_limit / 2
        );
        BashTool {
            shared,
            description,
        }
    }
}

impl Tool for BashTool {
    type Args = BashArgs;

    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        &self.description
    }

    /// # Panics
    /// Outside a tokio runtime with IO and time enabled (tokio's process and timer need
    /// one); without any tokio runtime it returns [`ToolError::Fatal`] instead.
    async fn call(&self, args: BashArgs) -> Result<ToolOutput, ToolError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(ToolError::Fatal(
                "the bash tool needs a tokio runtime with IO and time enabled".to_string(),
            ));
        }
        let timeout = match args.timeout_secs {
            Some(s) => Duration::from_secs(s.max(1)).min(MAX_EXEC_TIMEOUT),
            None => self.shared.config.exec_timeout,
        };
        run(&self.shared, &args.command, timeout)
            .await
            .map(ToolOutput::text)
            .map_err(ToolError::from)
    }
}

/// A spawned command whose whole process group is killed when this is dropped before the
/// group was reaped (the tool call's future was dropped mid-run), not only its leader.
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

async fn run(shared: &Shared, command: &str, timeout: Duration) -> Result<String, SandboxError> {
    let mut cmd = CommandWrap::with_new("bash", |c| {
        c.arg("-c")
            .arg(command)
            .current_dir(&shared.root)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for name in &shared.config.env_allowlist {
            if let Some(value) = std::env::var_os(name) {
                c.env(name, value);
            }
        }
        if std::env::var_os("PATH").is_none()
            || !shared.config.env_allowlist.iter().any(|n| n == "PATH")
        {
            c.env("PATH", FALLBACK_PATH);
        }
    });
    cmd.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let mut group = Group {
        child: cmd
            .spawn()
            .map_err(|source| SandboxError::Spawn { source })?,
        reaped: false,
    };
    let stdout = group.child.stdout().take();
    let stderr = group.child.stderr().take();
    let half = shared.config.output_limit / 2;
    let mut out = HeadTail::new(half);
    let mut err = HeadTail::new(half);
    let (killed_tx, killed_rx) = tokio::sync::oneshot::channel::<()>();

    let waiting = async {
        // Wait for the group's leader (bash) only: the group's wait would also wait for
        // background children.
        let status = tokio::time::timeout(timeout, group.child.inner_mut().wait()).await;
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

    tracing::debug!(
        timed_out = status.is_err(),
        exit_code = status
            .as_ref()
            .ok()
            .and_then(|s| s.as_ref().ok())
            .and_then(|s| s.code()),
        stdout_bytes = out.total(),
        stderr_bytes = err.total(),
        pipes_held,
        "bash command finished"
    );
    let mut text = match status {
        Err(_elapsed) => format!(
            "timed out after {}; the command and its child processes were killed",
            format_duration(timeout)
        ),
        Ok(Ok(status)) => describe(status),
        Ok(Err(e)) => format!("the command's exit status is unknown: {e}"),
    };
    for (name, stream) in [("stdout", &out), ("stderr", &err)] {
        if !stream.is_empty() {
            let body = stream.render();
            let body = body.strip_suffix('\n').unwrap_or(&body);
            text.push_str(&format!("\n{name}:\n{body}"));
        }
    }
    if out.is_empty() && err.is_empty() {
        text.push_str("\n(no output)");
    }
    if pipes_held {
        text.push_str(
            "\n[a process that left the command's process group kept its output open; \
             the output may be incomplete]",
        );
    }
    Ok(text)
}

/// Reads a pipe to its end into `buf`; a read error ends it.
async fn drain(pipe: Option<impl AsyncRead + Unpin>, buf: &mut HeadTail) {
    let Some(mut pipe) = pipe else { return };
    let mut chunk = vec![0u8; 8 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.push(&chunk[..n]),
        }
    }
}

/// `exit code: N`, or `killed by signal N`.
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code: {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "exit status unknown".to_string(),
    }
}

/// `30 s`, or `1500 ms` for a duration that is not whole seconds.
pub(crate) fn format_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}
