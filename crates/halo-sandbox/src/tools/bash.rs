//! `bash`: runs a command through [`Sandbox::exec`] and reports its exit code (or timeout),
//! stdout and stderr as data for the model.
//!
//! [`Sandbox::exec`]: halo_core::Sandbox::exec

use std::sync::Arc;
use std::time::Duration;

use halo_core::sandbox::{ExecOutput, ExecRequest};
use halo_core::{Tool, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Ctx, MAX_EXEC_TIMEOUT, failed};

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

pub(super) struct BashTool {
    ctx: Arc<Ctx>,
    description: String,
}

impl BashTool {
    pub(super) fn new(ctx: Arc<Ctx>) -> Self {
        let description = format!(
            "Runs a shell command with `bash -c` in the sandbox root folder and returns its \
             exit code, stdout and stderr. stdin is closed and only a few environment \
             variables are set. The command and every process it started are killed when it \
             ends or when the timeout ({} unless timeout_secs is given) runs out. Each of \
             stdout and stderr is kept to {} bytes, its start and its end.",
            format_duration(ctx.options.exec_timeout()),
            stream_limit(ctx.options.output_limit())
        );
        BashTool { ctx, description }
    }
}

/// The bytes kept of each of stdout and stderr: half the output limit.
fn stream_limit(output_limit: usize) -> usize {
    output_limit / 2
}

impl Tool for BashTool {
    type Args = BashArgs;

    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn call(&self, args: BashArgs) -> Result<ToolOutput, ToolError> {
        let timeout = match args.timeout_secs {
            Some(s) => Duration::from_secs(s.max(1)).min(MAX_EXEC_TIMEOUT),
            None => self.ctx.options.exec_timeout(),
        };
        let out = self
            .ctx
            .sandbox
            .exec(ExecRequest {
                command: args.command,
                timeout,
                output_limit: stream_limit(self.ctx.options.output_limit()),
            })
            .await
            .map_err(failed)?;
        Ok(ToolOutput::text(render(&out, timeout)))
    }
}

/// The status line (naming the resource limit the command reached, if any), then each
/// non-empty stream under its name.
fn render(out: &ExecOutput, timeout: Duration) -> String {
    let mut text = if out.timed_out {
        format!(
            "timed out after {}; the command and its child processes were killed",
            format_duration(timeout)
        )
    } else {
        match (out.exit_code, out.signal, &out.limit) {
            (Some(code), _, Some(limit)) => format!("exit code: {code} ({limit})"),
            (Some(code), _, None) => format!("exit code: {code}"),
            (None, _, Some(limit)) => format!("killed: {limit}"),
            (None, Some(signal), None) => format!("killed by signal {signal}"),
            (None, None, None) => "exit status unknown".to_string(),
        }
    };
    if out.timed_out
        && let Some(limit) = &out.limit
    {
        text.push_str(&format!(" ({limit})"));
    }
    for (name, stream) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        if !stream.is_empty() {
            let body = stream.strip_suffix('\n').unwrap_or(stream);
            text.push_str(&format!("\n{name}:\n{body}"));
        }
    }
    if out.stdout.is_empty() && out.stderr.is_empty() {
        text.push_str("\n(no output)");
    }
    text
}

/// `30 s`, or `1500 ms` for a duration that is not whole seconds.
pub(crate) fn format_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}
