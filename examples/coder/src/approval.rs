//! The session's safety hooks and the terminal approval prompt.
//!
//! Every session gets `halo_sandbox::policy`'s command denylist, a permission policy and
//! output truncation. The policy is workspace-write by default: the model reads and changes
//! files freely, and each command (`bash`) waits for the user's answer at a
//! `[Y]es / [N]o / [Q]uit` prompt ([`TerminalApprover`]).

use std::io::{BufRead as _, IsTerminal as _};
use std::sync::Arc;

use async_trait::async_trait;

use crate::terminal;
use halo_core::ToolHook;
use halo_sandbox::policy::{
    ApprovalAnswer, ApprovalRequest, Approver, CommandDenylist, OutputTruncation, PermissionPolicy,
    PermissionPreset,
};

/// Asks on the terminal: `Y` or Enter runs the call, `N` skips it (the model is told the
/// user skipped it), `Q` (or end of input) ends the run.
///
/// The prompt reads stdin on a blocking thread (`tokio::task::spawn_blocking`), so the async
/// runtime keeps going while the user thinks. Only use it when stdin is a terminal; see
/// [`session_hooks`]. The question goes to stdout, or to stderr when stdout carries
/// `--json` lines.
pub struct TerminalApprover {
    /// Write the question to stderr instead of stdout.
    pub to_stderr: bool,
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        // A prompt thread that panicked (a broken terminal) is a quit: stop rather than guess.
        confirm(question(request), self.to_stderr).await
    }
}

/// The question shown for a request: the tool and its summary, indented under it when it
/// spans lines.
fn question(request: &ApprovalRequest) -> String {
    let summary = request.summary.trim_end();
    if summary.contains('\n') {
        let indented: Vec<String> = summary.lines().map(|l| format!("    {l}")).collect();
        format!("? allow `{}`:\n{}\n", request.tool, indented.join("\n"))
    } else {
        format!("? allow `{}`: {summary}\n", request.tool)
    }
}

/// Asks `question` at the terminal (stdout, or stderr with `to_stderr`) and waits for
/// `[Y]es / [N]o / [Q]uit`, on a blocking thread. Only when stdin is a terminal.
pub async fn confirm(question: String, to_stderr: bool) -> ApprovalAnswer {
    tokio::task::spawn_blocking(move || {
        if to_stderr {
            ask(&question, &mut std::io::stderr())
        } else {
            ask(&question, &mut std::io::stdout())
        }
    })
    .await
    .unwrap_or(ApprovalAnswer::Abort)
}

/// Prints `question` to `out`, escaped ([`crate::terminal`]: a command or a server name
/// cannot redraw the question), and reads answers from stdin until one is understood.
fn ask(question: &str, out: &mut dyn std::io::Write) -> ApprovalAnswer {
    let stdin = std::io::stdin();
    terminal::write_to(out, question);
    loop {
        terminal::write_to(out, "  [Y]es / [N]o / [Q]uit: ");
        let _ = out.flush();
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            // End of input or a read error: nobody can answer any more.
            Ok(0) | Err(_) => {
                terminal::write_to(out, "(no answer: quitting)\n");
                return ApprovalAnswer::Abort;
            }
            Ok(_) => {}
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "" | "y" | "yes" => return ApprovalAnswer::Run,
            "n" | "no" => return ApprovalAnswer::Skip,
            "q" | "quit" => return ApprovalAnswer::Abort,
            _ => {
                terminal::write_to(out, "  please answer y, n or q\n");
            }
        }
    }
}

/// How much the session may do, from the command-line flags.
#[derive(Debug, Clone, Copy, Default)]
pub struct Permissions {
    /// `--read-only`: read, ls, glob and grep only.
    pub read_only: bool,
    /// `--yes`: run commands without asking.
    pub yes: bool,
    /// `--json`: stdout carries event lines, so the approval prompt writes to stderr.
    pub json: bool,
}

/// The session's hooks, in order (denylist, permission policy, truncation), and one line
/// that says what the session may do.
///
/// Workspace-write asks at the terminal before each command; when stdin is not a terminal
/// nobody can answer, so commands are denied (the model reads why) unless `--yes` was given.
/// With `--json` the same holds: a person who pipes the JSON lines on (`coder --json … | jq`)
/// still answers on the terminal, the question on stderr; a script, whose stdin is no
/// terminal, never waits for an answer.
pub fn session_hooks(permissions: Permissions) -> (Vec<Arc<dyn ToolHook>>, &'static str) {
    use PermissionPreset::{FullAccess, ReadOnly, WorkspaceWrite};
    let (policy, description) = if permissions.read_only {
        (
            PermissionPolicy::new(ReadOnly),
            "read-only: read, ls, glob and grep; no edits, no commands",
        )
    } else if permissions.yes {
        (
            PermissionPolicy::new(FullAccess),
            "--yes: edits and commands run without asking; the denylist and the command sandbox still apply",
        )
    } else if std::io::stdin().is_terminal() {
        (
            PermissionPolicy::new(WorkspaceWrite).with_approver(TerminalApprover {
                to_stderr: permissions.json,
            }),
            "workspace-write: edits run, each command asks [Y]es / [N]o / [Q]uit",
        )
    } else {
        (
            PermissionPolicy::new(WorkspaceWrite),
            "workspace-write: edits run; stdin is not a terminal, so commands are denied (pass --yes to run them)",
        )
    };
    let hooks: Vec<Arc<dyn ToolHook>> = vec![
        Arc::new(CommandDenylist::new()),
        Arc::new(policy),
        Arc::new(OutputTruncation::default()),
    ];
    (hooks, description)
}
