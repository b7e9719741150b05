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

use futures::future::BoxFuture;
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
/// ```
/// use futures::future::{BoxFuture, FutureExt as _};
/// use halo_core::hook::{ToolCallDecision, ToolHook};
/// use halo_core::ToolCall;
/// use serde_json::Value;
///
/// /// Refuses every call of a tool named `bash`.
/// struct NoShell;
/// impl ToolHook for NoShell {
///     fn before_tool_call<'a>(&'a self, call: &'a ToolCall, _args: &'a Value) -> BoxFuture<'a, ToolCallDecision> {
///         let decision = if call.name == "bash" {
///             ToolCallDecision::Deny("commands are disabled in this session".into())
///         } else {
///             ToolCallDecision::Allow
///         };
///         async move { decision }.boxed()
///     }
/// }
/// ```
pub trait ToolHook: Send + Sync {
    /// Decides about a call before it runs. `arguments` are the parsed, schema-checked
    /// arguments (after earlier hooks' rewrites); `call` is the call as the model made it.
    fn before_tool_call<'a>(
        &'a self,
        call: &'a ToolCall,
        arguments: &'a Value,
    ) -> BoxFuture<'a, ToolCallDecision> {
        let _ = (call, arguments);
        Box::pin(futures::future::ready(ToolCallDecision::Allow))
    }

    /// Transforms a result before the model reads it.
    fn after_tool_call<'a>(
        &'a self,
        call: &'a ToolCall,
        result: ToolResult,
    ) -> BoxFuture<'a, ToolResult> {
        let _ = call;
        Box::pin(futures::future::ready(result))
    }
}
