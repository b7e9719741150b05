//! `subagent {"role", "task"}`: a task handed to a fresh agent.
//!
//! [`Subagent`] is a tool that runs the agent ([`ToolAnnotations::runs_agent`]): each call
//! runs a fresh agent ([`AgentHandle::subagent`]) on the caller's model (the same `SharedModel`), with
//! - a system prompt built from the role alone ([`role_prompt`]: no date, no counter, so
//!   the same role gives the same prefix bytes and a second sub-agent of a role reads its
//!   prefix from the provider's cache);
//! - its own log, empty;
//! - the caller's tools minus `subagent` (the recursion guard), and a depth limit
//!   ([`Subagent::max_depth`]) for agents that reach another sub-agent tool some other way;
//! - its final text as the tool result, cut at [`Subagent::max_result_bytes`];
//! - its counters added to the caller's ([`ToolOutput::with_stats`]);
//! - its role as its name: while the caller's run is streamed, its steps, tool calls and
//!   text reach the caller's events tagged with it ([`halo_core::inner`]).
//!
//! The tool is concurrent ([`ToolAnnotations::concurrent`]): sub-agents called in one step
//! run at the same time.

use halo_core::{
    AgentHandle, DynTool, HaloError, ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolSpec,
    async_trait, tool::schema_for,
};
use serde::Deserialize;
use serde_json::Value;

use crate::plan::bounded;

/// The sub-agent tool's name.
pub const SUBAGENT_TOOL: &str = "subagent";

/// How deep sub-agents nest by default: an agent at depth 2 (a sub-agent's sub-agent, or a
/// plan inside a sub-agent) gets no sub-agent of its own.
pub const DEFAULT_MAX_DEPTH: usize = 2;

/// The most bytes of a sub-agent's answer the tool result carries by default: 16,000.
pub const DEFAULT_RESULT_BYTES: usize = 16_000;

/// The arguments of a `subagent` call.
#[derive(Debug, Deserialize, halo_core::JsonSchema)]
#[schemars(crate = "halo_core::schemars")]
struct SubagentArgs {
    /// Who the sub-agent is, in a few words (for example "test writer" or "code
    /// reviewer"); the same role gives the same sub-agent prompt.
    role: String,
    /// The task, complete: the sub-agent sees nothing of this conversation.
    task: String,
}

/// The system prompt of a sub-agent with `role` (trimmed): the same role, the same bytes.
pub fn role_prompt(role: &str) -> String {
    format!(
        "You are a sub-agent. Your role: {}.\n\nA parent agent gives you one task. Do it with \
         your tools, then answer with the result only: what you found or did, complete and \
         concise. The parent reads your answer as a tool result and sees nothing else of your \
         work.",
        role.trim()
    )
}

/// The `subagent` tool (see the [module docs](self)).
///
/// ```
/// use halo_core::{HaloAgent, StablePrefix, testing::ScriptedModel};
/// use halo_strategies::{Subagent, subagent::role_prompt};
/// use serde_json::json;
///
/// # futures::executor::block_on(async {
/// let model = ScriptedModel::new()
///     .tool_call("subagent", json!({"role": "poet", "task": "a haiku on rain"}))
///     .text("Soft rain on the roof") // the sub-agent's answer
///     .text("Here is a haiku: Soft rain on the roof");
/// let mut agent = HaloAgent::builder(model.clone()).tool(Subagent::new()).unwrap().build();
/// let out = agent.generate_text("Write a haiku").await.unwrap();
/// assert_eq!(out.steps[0].tool_results[0].content, "Soft rain on the roof");
/// let requests = model.requests();
/// assert_eq!(requests[1].history.len(), 1); // the sub-agent's own log: its task
/// assert!(requests[1].tool_names.is_empty()); // no `subagent` of its own
/// assert_eq!(requests[1].fingerprint, StablePrefix::new(role_prompt("poet")).fingerprint());
/// assert_eq!(out.stats.delegated_steps, 1);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Subagent {
    name: String,
    max_depth: usize,
    max_result_bytes: usize,
    max_steps: Option<usize>,
}

impl Default for Subagent {
    fn default() -> Self {
        Subagent::new()
    }
}

impl Subagent {
    /// The `subagent` tool with the defaults ([`DEFAULT_MAX_DEPTH`],
    /// [`DEFAULT_RESULT_BYTES`], the caller's step limit).
    pub fn new() -> Self {
        Subagent {
            name: SUBAGENT_TOOL.to_string(),
            max_depth: DEFAULT_MAX_DEPTH,
            max_result_bytes: DEFAULT_RESULT_BYTES,
            max_steps: None,
        }
    }

    /// The tool under another name (a second kind of sub-agent beside `subagent`; the
    /// depth limit still holds across both).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Refuses a call from an agent at `depth` or deeper ([`AgentHandle::depth`]).
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth;
        self
    }

    /// Cuts the sub-agent's answer at `bytes`.
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }

    /// The sub-agents' step limit (default: the caller's).
    pub fn max_steps(mut self, steps: usize) -> Self {
        self.max_steps = Some(steps);
        self
    }
}

#[async_trait]
impl DynTool for Subagent {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            &self.name,
            "Hands a self-contained task to a fresh sub-agent with the given role and your \
             tools; returns its final answer. The sub-agent sees only the task, so state it \
             completely. Several calls in one turn run at the same time.",
            schema_for::<SubagentArgs>(),
        )
    }

    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default()
            .with_runs_agent(true)
            .with_concurrent(true)
    }

    async fn call_json(&self, args: Value, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let context: &AgentHandle = cx.agent().ok_or_else(|| {
            ToolError::Failed(format!("`{}` runs only inside an agent", self.name))
        })?;
        let args: SubagentArgs =
            serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        if context.depth() >= self.max_depth {
            return Ok(ToolOutput::error(format!(
                "`{}` is not available here: this agent is at depth {} and sub-agents nest at \
                 most {} deep; do the task yourself",
                self.name,
                context.depth(),
                self.max_depth
            )));
        }
        let (role, task) = (args.role.trim(), args.task.trim());
        if role.is_empty() || task.is_empty() {
            return Err(ToolError::InvalidArguments(
                "`role` and `task` must not be empty".into(),
            ));
        }
        // Named after its role: its events in a streamed caller's are tagged with it.
        let mut builder = context.subagent(role_prompt(role)).name(role);
        if let Some(n) = self.max_steps {
            builder = builder.max_steps(n);
        }
        let mut agent = builder.build();
        let run = agent.generate_text(task).await;
        let stats = agent.stats();
        match run {
            Ok(run) => {
                Ok(ToolOutput::text(bounded(&run.text, self.max_result_bytes)).with_stats(stats))
            }
            Err(e @ (HaloError::Aborted { .. } | HaloError::ToolFatal { .. })) => {
                Err(ToolError::Fatal(format!("in a sub-agent ({role}): {e}")))
            }
            Err(HaloError::MaxStepsReached { max_steps, partial }) => {
                Ok(ToolOutput::error(format!(
                    "the sub-agent ({role}) stopped after {max_steps} steps without a final \
                     answer; its last text: {}",
                    bounded(&partial.text, self.max_result_bytes)
                ))
                .with_stats(stats))
            }
            Err(e) => Ok(ToolOutput::error(format!(
                "the sub-agent ({role}) failed: {e}; try again or do the task yourself"
            ))
            .with_stats(stats)),
        }
    }
}
