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
//! - [`ToolCallDecision::Abort`]: end the run with
//!   [`HaloError::Aborted`](crate::HaloError::Aborted); the step is not logged.
//!
//! Then every hook's [`ToolHook::after_tool_call`] sees the result, in the same order, and
//! may transform it (truncate it, redact it). After-hooks see every result of the step: tool
//! output, tool errors, argument errors and denials.
//!
//! Hooks never touch the stable prefix: switching a permission policy mid-session costs no
//! cache miss.

use serde_json::Value;

use crate::message::{ToolCall, ToolResult};

/// What a before-hook decides about a tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCallDecision {
    /// Run it (subject to the next hooks).
    Allow,
    /// Run it with these arguments instead (subject to the next hooks).
    Rewrite(Value),
    /// Do not run it; the model reads this message as an error tool result.
    Deny(String),
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
/// use halo_core::{async_trait, ToolCall};
/// use serde_json::Value;
///
/// /// Refuses every call of a tool named `bash`.
/// struct NoShell;
///
/// #[async_trait]
/// impl ToolHook for NoShell {
///     async fn before_tool_call(&self, call: &ToolCall, _args: &Value) -> ToolCallDecision {
///         if call.name == "bash" {
///             ToolCallDecision::Deny("commands are disabled in this session".into())
///         } else {
///             ToolCallDecision::Allow
///         }
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait ToolHook: Send + Sync {
    /// Decides about a call before it runs. `arguments` are the parsed, schema-checked
    /// arguments (after earlier hooks' rewrites); `call` is the call as the model made it.
    /// The default allows it.
    ///
    /// # Cancel safety
    /// Dropping the future (the agent's run was dropped) leaves the call unrun.
    async fn before_tool_call(&self, call: &ToolCall, arguments: &Value) -> ToolCallDecision {
        let _ = (call, arguments);
        ToolCallDecision::Allow
    }

    /// Transforms a result before the model reads it. The default returns it unchanged.
    ///
    /// # Cancel safety
    /// Dropping the future (the agent's run was dropped) drops the result with it; the
    /// tool has already run.
    async fn after_tool_call(&self, call: &ToolCall, result: ToolResult) -> ToolResult {
        let _ = call;
        result
    }
}
