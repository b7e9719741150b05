//! # halo-strategies
//!
//! Context and repair strategies for Halo agents, behind halo-core's seams.
//!
//! **Context** ([`halo_core::context`]): before each model call the engine asks the agent's
//! strategy how the history fits the context window, and applies its plan between steps.
//!
//! | strategy | what it does |
//! |---|---|
//! | [`TruncateStrategy`] | drops whole units from the front in one chunk, from a high-water mark (90 %) down to a low-water mark (60 %) |
//! | [`TieredStrategy`] | from 85 %, replaces old tool results and long tool-call arguments in place by `{"$evicted": N}` (discardable entries first), down to 55 %; from 95 %, when that is not enough, drops whole units as truncation does |
//!
//! ```
//! use std::sync::Arc;
//! use halo_core::{ContextConfig, HaloAgent, testing::ScriptedModel};
//! use halo_strategies::TruncateStrategy;
//!
//! let agent = HaloAgent::builder(ScriptedModel::new().text("ok"))
//!     .context(ContextConfig::new(Arc::new(TruncateStrategy::new()), 32_000))
//!     .build();
//! # let _ = agent;
//! ```
//!
//! **Repair**: what to do with a model's tool calls that are almost right, and with a model
//! that goes round in circles.
//!
//! - [`BasicRepair`] ([`repair`]) is a [`RepairStrategy`](halo_core::RepairStrategy): before
//!   the model's turn is logged it repairs tool names ([`names`]) and argument strings
//!   ([`arguments`], on jsonrepair-rs, chosen by measurement), and keeps a per-tool retry
//!   budget for calls that keep failing validation.
//! - [`LoopSuppression`] ([`loops`]) is a [`LoopGuard`](halo_core::LoopGuard): repeated
//!   calls, repeated errors, A-B / A-B-C alternation and monologue are nudged first, then
//!   stopped with [`HaloError::LoopDetected`](halo_core::HaloError::LoopDetected).
//!
//! Both are pure and synchronous; halo-core's run engine calls them and applies what they
//! decide (see [`halo_core::repair`]).
//!
//! **Agents** (tools that run the agent, [`halo_core::delegate`]):
//! [`Plan`] is the `plan {"task"}` tool (3 to 5 typed steps run in the caller's context on
//! a fork, `plan` not callable meanwhile, the prefix unchanged) and [`PlanExt`] its
//! plan-then-execute method; [`Subagent`] is `subagent {"role", "task"}` (a fresh agent
//! per call, its prompt from the role, the caller's tools minus itself, a depth limit, its
//! usage in the caller's stats); [`Team`] holds named, persistent agents with inboxes
//! (`hire`, `send`, `broadcast`, `run`, `disband`). See `docs/agents.md`.
//!
//! ```
//! use halo_core::{HaloAgent, async_trait, DynTool, ToolContext, ToolError, ToolOutput, ToolSpec};
//! use halo_core::testing::ScriptedModel;
//! use halo_strategies::{BasicRepair, LoopSuppression};
//! use serde_json::{Value, json};
//!
//! struct Read;
//! #[async_trait]
//! impl DynTool for Read {
//!     fn spec(&self) -> ToolSpec {
//!         ToolSpec::new("read", "Reads a file.", json!({
//!             "type": "object",
//!             "properties": {"path": {"type": "string"}},
//!             "required": ["path"],
//!         }))
//!     }
//!     async fn call_json(&self, args: Value, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
//!         Ok(format!("contents of {}", args["path"].as_str().unwrap_or("?")).into())
//!     }
//! }
//!
//! # futures::executor::block_on(async {
//! // A small model's call: a wrong-case name and Python-style arguments in a fence.
//! let model = ScriptedModel::new()
//!     .tool_call_raw("Read", "```json\n{'path': 'notes.md',}\n```")
//!     .text("The notes say hello.");
//! let mut agent = HaloAgent::builder(model)
//!     .tool(Read).unwrap()
//!     .repair(BasicRepair::new())
//!     .loop_guard(LoopSuppression::default())
//!     .build();
//! let out = agent.generate_text("What do my notes say?").await.unwrap();
//! let step = &out.steps[0];
//! assert_eq!(step.message.tool_calls[0].name, "read");
//! assert_eq!(step.message.tool_calls[0].raw_arguments, r#"{"path":"notes.md"}"#);
//! assert_eq!(step.tool_results[0].content, "contents of notes.md");
//! assert_eq!(out.stats.tool_call_repairs, 2);
//! # });
//! ```

pub mod arguments;
pub mod loops;
pub mod names;
pub mod plan;
pub mod repair;
pub mod subagent;
pub mod team;
mod tiered;
mod truncate;

pub use loops::LoopSuppression;
pub use plan::{Plan, PlanExt, PlanReport, PlanSteps, StepOutcome};
pub use repair::{BasicRepair, RetryBudget};
pub use subagent::Subagent;
pub use team::{Letter, Member, Team, TeamError};
pub use tiered::{EVICTED_KEY, TieredStrategy, is_evicted, placeholder};
pub use truncate::TruncateStrategy;
