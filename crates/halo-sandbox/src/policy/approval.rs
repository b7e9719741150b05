//! User approval of tool calls: the [`Approver`] callback and the [`ApprovalHook`] that asks
//! it.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use halo_core::{ToolCall, ToolCallDecision, ToolContext, ToolHook};
use serde_json::Value;

/// Bytes of a summary made from a call's whole arguments (tools without a `command` or
/// `path` argument); longer ones are cut with `…`.
const MAX_JSON_SUMMARY_BYTES: usize = 500;

/// A tool call waiting for the user's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The tool's name, e.g. `bash`.
    pub tool: String,
    /// The call's parsed, schema-checked arguments (after earlier hooks' rewrites).
    pub arguments: Value,
    /// One line to show the user: the `command` argument when there is one (`bash`), else the
    /// `path` argument (`write`, `edit`), else the arguments as compact JSON, cut to 500
    /// bytes.
    pub summary: String,
}

impl ApprovalRequest {
    /// The request for a call of `tool` with `arguments`.
    pub fn new(tool: impl Into<String>, arguments: Value) -> Self {
        let summary = summarize(&arguments);
        ApprovalRequest {
            tool: tool.into(),
            arguments,
            summary,
        }
    }
}

fn summarize(arguments: &Value) -> String {
    for key in ["command", "path"] {
        if let Some(s) = arguments.get(key).and_then(Value::as_str) {
            return s.to_string();
        }
    }
    let json = arguments.to_string();
    if json.len() <= MAX_JSON_SUMMARY_BYTES {
        return json;
    }
    let mut end = MAX_JSON_SUMMARY_BYTES;
    while !json.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &json[..end])
}

/// The user's answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Run the call.
    Run,
    /// Do not run it; the model reads [`skipped_message`] as the call's error result and the
    /// run goes on.
    Skip,
    /// Do not run it and end the run: the agent returns
    /// [`HaloError::Aborted`](halo_core::HaloError::Aborted) and does not log the step.
    Abort,
}

/// Asks the user whether a tool call may run.
///
/// Implementations may wait as long as they like (the agent's run waits with them), but
/// must not block the async runtime: read a terminal through
/// `tokio::task::spawn_blocking`, a web UI through a channel. A plain closure
/// `Fn(&ApprovalRequest) -> ApprovalAnswer` is an approver too, for answers that need no
/// waiting (tests, fixed rules).
///
/// An object-safe `#[async_trait]` trait, held as `Arc<dyn Approver>`: implementers write
/// `async fn approve` in an impl marked `#[async_trait]` (`halo_core::async_trait`).
///
/// ```
/// use halo_sandbox::policy::{ApprovalAnswer, ApprovalHook, ApprovalRequest};
///
/// // Lets `ls`-like commands run, skips everything else.
/// let hook = ApprovalHook::new(|request: &ApprovalRequest| {
///     if request.summary.starts_with("ls") { ApprovalAnswer::Run } else { ApprovalAnswer::Skip }
/// });
/// # let _ = hook;
/// ```
#[async_trait]
pub trait Approver: Send + Sync {
    /// The user's answer to `request`.
    ///
    /// # Cancel safety
    /// The future is dropped when the agent's run is dropped; a prompt on screen should
    /// not outlive it in a way that confuses the user.
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer;
}

#[async_trait]
impl<F> Approver for F
where
    F: Fn(&ApprovalRequest) -> ApprovalAnswer + Send + Sync,
{
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self(request)
    }
}

/// The error result the model reads when the user skipped a call of `tool`.
pub fn skipped_message(tool: &str) -> String {
    format!(
        "the user skipped this tool call: `{tool}` did not run; do not retry it blindly: \
         go on without it, try another way, or ask the user what they want"
    )
}

/// The reason in [`HaloError::Aborted`](halo_core::HaloError::Aborted) when the user
/// answered [`ApprovalAnswer::Abort`].
pub const ABORT_REASON: &str = "the user stopped the run when asked to approve this tool call";

/// Asks `approver` about a call and turns the answer into a hook decision.
pub(crate) async fn ask(
    approver: &dyn Approver,
    call: &ToolCall,
    arguments: &Value,
) -> ToolCallDecision {
    let request = ApprovalRequest::new(call.name.clone(), arguments.clone());
    let answer = approver.approve(&request).await;
    tracing::info!(tool = %call.name, ?answer, "approval answer");
    match answer {
        ApprovalAnswer::Run => ToolCallDecision::Allow,
        ApprovalAnswer::Skip => ToolCallDecision::Deny(skipped_message(&call.name)),
        ApprovalAnswer::Abort => ToolCallDecision::Abort(ABORT_REASON.into()),
    }
}

/// A filter over tool calls and their parsed arguments.
type CallFilter = Box<dyn Fn(&ToolCall, &Value) -> bool + Send + Sync>;

/// Which calls an [`ApprovalHook`] asks about.
enum Selection {
    Tools(BTreeSet<String>),
    When(CallFilter),
}

/// A before-hook that asks an [`Approver`] before selected tool calls run: by default
/// every call of `bash`, `write` and `edit`.
///
/// [`ApprovalAnswer::Run`] lets the call go on to the next hook, [`ApprovalAnswer::Skip`]
/// gives the model [`skipped_message`] as an error result, [`ApprovalAnswer::Abort`] ends
/// the run with [`HaloError::Aborted`](halo_core::HaloError::Aborted) (reason
/// [`ABORT_REASON`]). Put it after a [`CommandDenylist`](super::CommandDenylist), so the
/// user is never asked about a command the denylist refuses anyway.
pub struct ApprovalHook {
    approver: Arc<dyn Approver>,
    selection: Selection,
}

impl std::fmt::Debug for ApprovalHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let selection = match &self.selection {
            Selection::Tools(names) => format!("{names:?}"),
            Selection::When(_) => "a filter".into(),
        };
        f.debug_struct("ApprovalHook")
            .field("selection", &selection)
            .finish_non_exhaustive()
    }
}

impl ApprovalHook {
    /// Asks `approver` about `bash`, `write` and `edit` calls.
    pub fn new(approver: impl Approver + 'static) -> Self {
        Self::shared(Arc::new(approver))
    }

    /// [`new`](Self::new) with a shared approver.
    pub fn shared(approver: Arc<dyn Approver>) -> Self {
        ApprovalHook {
            approver,
            selection: Selection::Tools(["bash", "write", "edit"].map(String::from).into()),
        }
    }

    /// Asks about calls of exactly these tools instead.
    pub fn for_tools(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.selection = Selection::Tools(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Asks about the calls `filter` selects instead (it sees the call and its parsed
    /// arguments).
    pub fn when(
        mut self,
        filter: impl Fn(&ToolCall, &Value) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.selection = Selection::When(Box::new(filter));
        self
    }

    fn selects(&self, call: &ToolCall, arguments: &Value) -> bool {
        match &self.selection {
            Selection::Tools(names) => names.contains(call.name.as_str()),
            Selection::When(filter) => filter(call, arguments),
        }
    }
}

#[async_trait]
impl ToolHook for ApprovalHook {
    async fn before_tool_call(&self, cx: &ToolContext, arguments: &Value) -> ToolCallDecision {
        let call = cx.call();
        if self.selects(call, arguments) {
            ask(&*self.approver, call, arguments).await
        } else {
            ToolCallDecision::Allow
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summaries_show_the_command_the_path_or_the_arguments() {
        let bash =
            ApprovalRequest::new("bash", json!({"command": "cargo test", "timeout_secs": 5}));
        assert_eq!(bash.summary, "cargo test");
        let write = ApprovalRequest::new("write", json!({"path": "src/a.rs", "content": "x"}));
        assert_eq!(write.summary, "src/a.rs");
        let other = ApprovalRequest::new("deploy", json!({"env": "prod"}));
        assert_eq!(other.summary, r#"{"env":"prod"}"#);
        let long = ApprovalRequest::new("deploy", json!({"note": "é".repeat(400)}));
        assert!(long.summary.ends_with('…'));
        assert!(long.summary.len() <= MAX_JSON_SUMMARY_BYTES + '…'.len_utf8());
    }
}
