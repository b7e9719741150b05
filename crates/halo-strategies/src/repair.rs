//! [`BasicRepair`]: Halo's [`RepairStrategy`] — tool-name repair, argument repair and a
//! per-tool retry budget.
//!
//! For each tool call of the model's turn, in call order:
//! 1. the name, when it is not a tool, is matched to the one tool it must mean
//!    ([`crate::names`]); an unknown or ambiguous name is left alone, and dispatch answers it
//!    with an error result listing the valid names;
//! 2. the argument string, when it is not a JSON object, is repaired ([`crate::arguments`]);
//!    an unrepairable one is left alone, and dispatch answers it with an error result that
//!    quotes the tool's schema (never `{}`);
//! 3. the **retry budget**: a call that still fails validation is counted with the calls of
//!    the same tool before it, in the history and earlier in the turn, back to the last one
//!    that was valid (calls of other tools in between do not reset it). At
//!    [`RetryBudget::warn_after`] invalid calls in a row (default 3) the call is not run: its
//!    error result says what is wrong, quotes the schema, and tells the model to stop calling
//!    the tool this way. At [`RetryBudget::stop_after`] (default 5) the run ends with
//!    [`HaloError::RetryBudgetExhausted`](halo_core::HaloError::RetryBudgetExhausted). The
//!    count comes from the history alone, so it survives a resume or a saved run state.
//!
//! Every step is deterministic, so the repaired turn — the one logged and replayed — is the
//! same bytes whenever the same turn is repaired.

use halo_core::{
    AssistantMessage, Refusal, Repair, RepairContext, RepairKind, RepairOutcome, RepairStrategy,
    RetryStop, ToolCall,
};
use serde_json::Value;

use crate::arguments::{ArgumentRepair, repair_arguments};
use crate::names::repair_name;

/// When calls that keep failing validation are refused, and when the run ends. Counts are
/// invalid calls of one tool in a row, the current one included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryBudget {
    /// From this count on, the call is refused with an error result telling the model to stop
    /// (default 3; 0 or 1 refuses the first invalid call).
    pub warn_after: usize,
    /// At this count the run ends (default 5; `usize::MAX` never ends it).
    pub stop_after: usize,
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget {
            warn_after: 3,
            stop_after: 5,
        }
    }
}

/// Halo's repair strategy. See the [module docs](self).
///
/// ```
/// use halo_core::{HaloAgent, testing::ScriptedModel};
/// use halo_strategies::{BasicRepair, RetryBudget};
///
/// let repair = BasicRepair::new().budget(RetryBudget { warn_after: 2, stop_after: 4 });
/// let agent = HaloAgent::builder(ScriptedModel::new()).repair(repair).build();
/// # drop(agent);
/// ```
#[derive(Debug, Clone, Default)]
pub struct BasicRepair {
    budget: RetryBudget,
}

impl BasicRepair {
    /// Name and argument repair with the default [`RetryBudget`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the retry budget.
    pub fn budget(mut self, budget: RetryBudget) -> Self {
        self.budget = budget;
        self
    }
}

impl RepairStrategy for BasicRepair {
    fn repair(&self, turn: &mut AssistantMessage, context: RepairContext<'_>) -> RepairOutcome {
        let mut outcome = RepairOutcome::default();
        for i in 0..turn.tool_calls.len() {
            let call = &mut turn.tool_calls[i];
            if let Some(name) = repair_name(&call.name, context.tools) {
                outcome.repairs.push(Repair {
                    call_id: call.id.to_string(),
                    kind: RepairKind::ToolName,
                    before: std::mem::replace(&mut call.name, name.as_str().into()).into(),
                    after: name,
                });
            }
            if let ArgumentRepair::Repaired(arguments) = repair_arguments(&call.raw_arguments) {
                outcome.repairs.push(Repair {
                    call_id: call.id.to_string(),
                    kind: RepairKind::Arguments,
                    before: std::mem::replace(&mut call.raw_arguments, arguments.as_str().into())
                        .into(),
                    after: arguments,
                });
            }
            let call = &turn.tool_calls[i];
            let Some(problem) = problem(call, &context) else {
                continue;
            };
            let attempts = 1 + invalid_in_a_row(&call.name, &turn.tool_calls[..i], &context);
            if attempts >= self.budget.stop_after {
                outcome.stop = Some(RetryStop {
                    tool: call.name.to_string(),
                    attempts,
                    message: problem,
                });
                break;
            }
            if attempts >= self.budget.warn_after {
                let schema = context
                    .tool(&call.name)
                    .map(|t| t.parameters.to_string())
                    .unwrap_or_default();
                outcome.refusals.push(Refusal {
                    call_id: call.id.to_string(),
                    message: format!(
                        "`{name}` was not run: it was called with invalid arguments {attempts} times in a row ({problem}). Stop calling `{name}` like this: write arguments that fit its schema, {schema}, or use another tool, or answer. After {stop} invalid calls in a row the run ends.",
                        name = call.name,
                        stop = self.budget.stop_after,
                    ),
                });
            }
        }
        outcome
    }
}

/// Why a call of a known tool will fail validation, or `None` when it will not (or the
/// tool is unknown: dispatch lists the valid names, and there is no schema to budget).
fn problem(call: &ToolCall, context: &RepairContext<'_>) -> Option<String> {
    context.tool(&call.name)?;
    match call.arguments() {
        Err(e) => Some(format!("not valid JSON: {e}")),
        Ok(args @ Value::Object(_)) => context.validate(&call.name, &args).err(),
        Ok(_) => Some("not a JSON object".into()),
    }
}

/// Invalid calls of `tool` in a row before this one: in `earlier` (this turn), then back
/// through the history, up to the last valid one.
fn invalid_in_a_row(tool: &str, earlier: &[ToolCall], context: &RepairContext<'_>) -> usize {
    let history = context
        .history
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls().iter().rev());
    earlier
        .iter()
        .rev()
        .chain(history)
        .filter(|c| c.name == tool)
        .take_while(|c| problem(c, context).is_some())
        .count()
}
