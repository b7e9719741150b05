//! Tool hooks: a pipeline that runs around every tool call of an agent, sandbox tools and
//! user tools alike.
//!
//! For each tool call whose arguments parsed and fit the tool's schema, the agent asks
//! every hook's [`ToolHook::before_tool_call`] in the order they were added:
//!
//! - [`ToolCallDecision::Allow`]: go on to the next hook;
//! - [`ToolCallDecision::Rewrite`]: replace the arguments the tool will get (checked against
//!   the schema again) and go on; the logged tool call keeps the model's own bytes, so the
//!   history replays unchanged and stays cached;
//! - [`ToolCallDecision::Deny`]: do not run the tool; the model reads the message as an
//!   error tool result;
//! - [`ToolCallDecision::Ask`]: the call needs someone's approval. A call already approved
//!   ([`ToolContext::approved`]) goes on as if allowed; otherwise the call does not run now:
//!   the run pauses with it awaiting a decision ([`HaloAgent::approve`](crate::HaloAgent::approve)
//!   / [`reject`](crate::HaloAgent::reject)), or — when no one can answer — it is denied at
//!   once with an error result that says so. A hook that can ask someone itself (an
//!   in-process approver) asks and answers `Allow` or `Deny` instead;
//! - [`ToolCallDecision::Abort`]: end the run with
//!   [`HaloError::Aborted`](crate::HaloError::Aborted); the step is not logged.
//!
//! Then every hook's [`ToolHook::after_tool_call`] sees the result, in the same order, and
//! may transform it (truncate it, redact it). After-hooks see every result of the step: tool
//! output, tool errors, argument errors and denials. Both get the call's [`ToolContext`]:
//! the call, the tool's annotations, whether the call was approved, the agent's tools.
//!
//! A hook that panics is caught like a tool that panics: the call gets an error result with
//! the panic message (unless the agent is built to fail fast).
//!
//! Hooks never touch the stable prefix: switching a permission policy mid-session costs no
//! cache miss.

use async_trait::async_trait;
use serde_json::Value;

use crate::message::ToolResult;
use crate::tool::ToolContext;

/// What a before-hook decides about a tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCallDecision {
    /// Run it (subject to the next hooks).
    Allow,
    /// Run it with these arguments instead (subject to the next hooks).
    Rewrite(Value),
    /// Do not run it; the model reads this message as an error tool result.
    Deny(String),
    /// It needs someone's approval; the text says why (shown to whoever answers, and in the
    /// error result when no one can). Goes on as `Allow` for an approved call.
    Ask(String),
    /// End the run; the reason is in [`HaloError::Aborted`](crate::HaloError::Aborted).
    Abort(String),
}

/// A hook around tool calls. Both methods have pass-through defaults; implement the ones
/// you need.
///
/// An object-safe `#[async_trait]` trait: the agent holds hooks as `Arc<dyn ToolHook>`.
/// Implementers write `async fn`s in an impl marked `#[async_trait]` (re-exported as
/// [`halo_core::async_trait`](crate::async_trait)).
///
/// ```
/// use halo_core::hook::{ToolCallDecision, ToolHook};
/// use halo_core::{async_trait, ToolContext};
/// use serde_json::Value;
///
/// /// Refuses every call of a tool named `bash`.
/// struct NoShell;
///
/// #[async_trait]
/// impl ToolHook for NoShell {
///     async fn before_tool_call(&self, cx: &ToolContext, _args: &Value) -> ToolCallDecision {
///         if cx.call().name == "bash" {
///             ToolCallDecision::Deny("commands are disabled in this session".into())
///         } else {
///             ToolCallDecision::Allow
///         }
///     }
/// }
/// ```
#[async_trait]
pub trait ToolHook: Send + Sync {
    /// Decides about a call before it runs. `arguments` are the parsed, schema-checked
    /// arguments (after earlier hooks' rewrites); `context.call()` is the call as the model
    /// made it. The default allows it.
    ///
    /// # Cancel safety
    /// Dropping the future (the agent's run was dropped) leaves the call unrun.
    async fn before_tool_call(&self, context: &ToolContext, arguments: &Value) -> ToolCallDecision {
        let _ = (context, arguments);
        ToolCallDecision::Allow
    }

    /// Transforms a result before the model reads it. The default returns it unchanged.
    ///
    /// # Cancel safety
    /// Dropping the future (the agent's run was dropped) drops the result with it; the
    /// tool has already run.
    async fn after_tool_call(&self, context: &ToolContext, result: ToolResult) -> ToolResult {
        let _ = context;
        result
    }
}
