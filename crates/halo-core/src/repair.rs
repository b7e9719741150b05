//! The repair seam: a [`RepairStrategy`] sees the model's turn after the response and
//! before it is logged, and may fix its tool calls (a misspelt tool name, arguments that are
//! almost JSON), refuse calls that keep failing, or end the run.
//!
//! This is the design's `repair.repair(toolCalls, content)`. The strategy is pure and
//! synchronous: it gets the turn, the tools' specs, a validator and the history, and returns
//! what it did ([`RepairOutcome`]); it does no IO and never touches the log or the prefix.
//! The run engine calls it on every model turn it is fed (every kind of run except object
//! runs), before anything else sees the turn, and then:
//! - logs the **repaired** turn (the model's own bytes are gone from the history, so the next
//!   request carries the repaired call; a deterministic strategy keeps requests byte-stable);
//! - answers each [`Refusal`] with an `is_error` tool result instead of running the call;
//! - on [`RepairOutcome::stop`], ends the run with
//!   [`HaloError::RetryBudgetExhausted`](crate::HaloError::RetryBudgetExhausted), the step
//!   not logged;
//! - counts the repairs in [`AgentStats::tool_call_repairs`](crate::AgentStats::tool_call_repairs)
//!   and traces each one (`halo.repair`).
//!
//! Without a strategy ([`HaloAgentBuilder::repair`](crate::HaloAgentBuilder::repair) not
//! called) nothing changes: calls reach dispatch as the model sent them. Either way, a call
//! whose arguments are not a JSON object gets an error result that quotes the tool's schema
//! ([`ToolRegistry::check`]); nothing turns unreadable arguments into `{}`.
//!
//! Halo's implementation is `halo_strategies::BasicRepair`.

use crate::message::{AssistantMessage, Message};
use crate::prefix::ToolSpec;
use crate::tool::ToolRegistry;

/// What a strategy may look at. See the [module docs](self).
#[derive(Debug, Clone, Copy)]
pub struct RepairContext<'a> {
    /// The tools in the prefix, in prefix order.
    pub tools: &'a [ToolSpec],
    /// The history the turn answers (the request's history, valid: every call paired).
    pub history: &'a [Message],
    registry: &'a ToolRegistry,
}

impl<'a> RepairContext<'a> {
    /// A context over `tools` (their schemas compiled in `registry`) and `history`.
    pub fn new(tools: &'a [ToolSpec], registry: &'a ToolRegistry, history: &'a [Message]) -> Self {
        RepairContext {
            tools,
            history,
            registry,
        }
    }

    /// The spec of the tool `name`, if the prefix has it.
    pub fn tool(&self, name: &str) -> Option<&'a ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Checks parsed arguments against the schema of `name`, as dispatch will.
    ///
    /// # Errors
    /// The text the model would read: an unknown tool, or the first five schema errors.
    pub fn validate(&self, name: &str, arguments: &serde_json::Value) -> Result<(), String> {
        self.registry.validate(name, arguments)
    }
}

/// What was changed in one call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RepairKind {
    /// The tool name (case, `-` for `_`, a server prefix).
    ToolName,
    /// The argument string (a fence, prose, quotes, commas, literals, closing brackets, a
    /// double-encoded string).
    Arguments,
}

/// One change a strategy made to a tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The call's id.
    pub call_id: String,
    /// What changed.
    pub kind: RepairKind,
    /// The value before (the name, or the raw argument string).
    pub before: String,
    /// The value after.
    pub after: String,
}

/// A call the engine does not run: it gets an `is_error` result with `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The call's id.
    pub call_id: String,
    /// The result text the model reads.
    pub message: String,
}

/// Why a strategy ends the run: a tool's calls kept failing validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryStop {
    /// The tool whose calls failed.
    pub tool: String,
    /// Invalid calls of it in a row, this one included.
    pub attempts: usize,
    /// The last validation error.
    pub message: String,
}

/// What a [`RepairStrategy`] did to one turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairOutcome {
    /// The changes, in call order.
    pub repairs: Vec<Repair>,
    /// Calls answered with an error result instead of being run.
    pub refusals: Vec<Refusal>,
    /// `Some` ends the run with
    /// [`HaloError::RetryBudgetExhausted`](crate::HaloError::RetryBudgetExhausted).
    pub stop: Option<RetryStop>,
}

/// Repairs the model's turn before it is logged. See the [module docs](self).
///
/// Must be deterministic (the same turn and context give the same changes), so a repaired
/// history is the same bytes in every request and a replayed run repairs the same way.
pub trait RepairStrategy: Send + Sync {
    /// Fixes `turn`'s tool calls in place and says what it did.
    fn repair(&self, turn: &mut AssistantMessage, context: RepairContext<'_>) -> RepairOutcome;
}
