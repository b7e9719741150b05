//! Tool dispatch: the one owner of an agent's tools — their executors and compiled schemas
//! (the [`ToolRegistry`]), their specs (written once, into the [`StablePrefix`]) and the
//! tool hooks — and the code that runs a step's tool calls.
//!
//! A step's calls run in call order, except that consecutive calls of read-only tools
//! ([`ToolAnnotations::concurrency_safe`](crate::tool::ToolAnnotations::concurrency_safe))
//! form a batch that runs concurrently. A fatal error (a tool's `Fatal`, a hook's abort)
//! drops the rest of its batch and ends the run. Calls of client-side tools are not run here:
//! the drivers hand them to the caller.
//!
//! Agent tools ([`crate::delegate`]) are registered like client-side tools (their spec in
//! the prefix, their schema in the registry) and run here, through the same hooks, with the
//! [`Parent`] the driver made for the step; a concurrent one
//! ([`AgentTool::concurrent`]) batches with read-only calls.

use std::sync::Arc;

use tracing::{Instrument as _, field::Empty};

use std::collections::BTreeMap;

use crate::delegate::{AgentContext, AgentTool, Parent};
use crate::error::HaloError;
use crate::hook::{ToolCallDecision, ToolHook};
use crate::message::{ToolCall, ToolResult};
use crate::prefix::{StablePrefix, ToolSpec};
use crate::stats::AgentStats;
use crate::tool::{DynTool, ToolRegistry, output_result};

/// An agent's tools and hooks. Cheap to clone (the tools are shared), which forks and
/// sub-agents do.
#[derive(Default, Clone)]
pub(crate) struct Toolbox {
    registry: ToolRegistry,
    hooks: Vec<Arc<dyn ToolHook>>,
    /// Tools that run the agent ([`crate::delegate`]), by name; also in the registry, as
    /// client-side entries (spec and schema, no executor).
    agents: BTreeMap<String, Arc<dyn AgentTool>>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.registry)
            .field("hooks", &self.hooks.len())
            .field("agent_tools", &self.agents.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Toolbox {
    /// Adds a tool: its spec goes into `prefix`, its executor and schema into the registry.
    /// Both are checked before either is written, so a refused tool changes nothing.
    pub(crate) fn add(
        &mut self,
        prefix: &mut StablePrefix,
        tool: Arc<dyn DynTool>,
    ) -> Result<(), HaloError> {
        let spec = tool.spec();
        prefix.check_tool(&spec)?;
        self.registry.insert(tool)?;
        prefix.add_tool(spec)?;
        Ok(())
    }

    /// Adds a client-side tool (no executor: its calls go to the caller).
    pub(crate) fn add_client(
        &mut self,
        prefix: &mut StablePrefix,
        spec: ToolSpec,
    ) -> Result<(), HaloError> {
        prefix.check_tool(&spec)?;
        self.registry.insert_client(&spec)?;
        prefix.add_tool(spec)?;
        Ok(())
    }

    /// Adds an agent tool ([`crate::delegate`]).
    pub(crate) fn add_agent(
        &mut self,
        prefix: &mut StablePrefix,
        tool: Arc<dyn AgentTool>,
    ) -> Result<(), HaloError> {
        let spec = tool.spec();
        prefix.check_tool(&spec)?;
        self.registry.insert_client(&spec)?;
        prefix.add_tool(spec.clone())?;
        self.agents.insert(spec.name, tool);
        Ok(())
    }

    /// These tools without the ones named (for a sub-agent's).
    pub(crate) fn without(&self, names: &[&str]) -> Toolbox {
        let mut tools = self.clone();
        for name in names {
            tools.registry.remove(name);
            tools.agents.remove(*name);
        }
        tools
    }

    /// Whether any of `calls` is an agent tool's (so the step needs a [`Parent`]).
    pub(crate) fn calls_agents(&self, calls: &[ToolCall]) -> bool {
        calls.iter().any(|c| self.agents.contains_key(&c.name))
    }

    pub(crate) fn push_hook(&mut self, hook: Arc<dyn ToolHook>) {
        self.hooks.push(hook);
    }

    pub(crate) fn clear_hooks(&mut self) {
        self.hooks.clear();
    }

    pub(crate) fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Whether a call of `name` interrupted before its result may run again on resume.
    pub(crate) fn rerun_safe(&self, name: &str) -> bool {
        self.registry
            .annotations(name)
            .is_some_and(|a| a.rerun_safe())
            && !self.registry.is_client_side(name)
    }

    /// Whether the caller runs calls of `name`.
    pub(crate) fn is_client_side(&self, name: &str) -> bool {
        self.registry.is_client_side(name) && !self.agents.contains_key(name)
    }

    /// `calls` (none client-side) in batches: each batch runs concurrently, batches one
    /// after another. Consecutive read-only calls share a batch; any other call is alone.
    pub(crate) fn batches(&self, calls: Vec<ToolCall>) -> Vec<Vec<ToolCall>> {
        let mut out: Vec<Vec<ToolCall>> = Vec::new();
        let mut open = false;
        for call in calls {
            let safe = match self.agents.get(&call.name) {
                Some(agent) => agent.concurrent(),
                None => self
                    .registry
                    .annotations(&call.name)
                    .is_some_and(|a| a.concurrency_safe()),
            };
            match out.last_mut() {
                Some(batch) if safe && open => batch.push(call),
                _ => {
                    out.push(vec![call]);
                    open = safe;
                }
            }
        }
        out
    }

    /// Runs one call through the hooks and its tool, in an `execute_tool` span. `active`
    /// restricts the tools this step may call; `parent` is what an agent tool's call runs
    /// with (an agent tool's call without one gets an error result). Returns the result and
    /// the counters of the model calls the tool made ([`crate::ToolOutput::stats`]).
    ///
    /// # Errors
    /// [`HaloError::ToolFatal`] and [`HaloError::Aborted`]; every other failure is an error
    /// result the model reads.
    pub(crate) async fn run(
        &self,
        call: &ToolCall,
        active: Option<&[String]>,
        parent: Option<&Arc<Parent>>,
    ) -> Result<(ToolResult, Option<AgentStats>), HaloError> {
        let span = tracing::info_span!(
            "execute_tool",
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = call.name.as_str(),
            "gen_ai.tool.call.id" = call.id.as_str(),
            "halo.tool.is_error" = Empty,
        );
        let result = self
            .run_hooked(call, active, parent)
            .instrument(span.clone())
            .await?;
        span.record("halo.tool.is_error", result.0.is_error);
        Ok(result)
    }

    /// The hook pipeline around one tool call (see [`crate::hook`]).
    async fn run_hooked(
        &self,
        call: &ToolCall,
        active: Option<&[String]>,
        parent: Option<&Arc<Parent>>,
    ) -> Result<(ToolResult, Option<AgentStats>), HaloError> {
        let inactive = active.is_some_and(|names| !names.contains(&call.name));
        let checked = if inactive {
            let active = active.unwrap_or_default();
            Err(if active.is_empty() {
                format!(
                    "`{}` is not available in this step: no tool is; answer without calling tools",
                    call.name
                )
            } else {
                format!(
                    "`{}` is not available in this step; use one of: {}",
                    call.name,
                    active.join(", ")
                )
            })
        } else {
            self.registry.check(call)
        };
        let (mut result, stats) = match checked {
            Err(message) => (ToolResult::error(call, message), None),
            Ok(mut args) => {
                let mut denied = None;
                for hook in &self.hooks {
                    match hook.before_tool_call(call, &args).await {
                        ToolCallDecision::Allow => {}
                        ToolCallDecision::Rewrite(new_args) => {
                            let errors = self.registry.schema_errors(&call.name, &new_args);
                            if let Some(problem) = match errors {
                                Ok(e) if e.is_empty() => None,
                                Ok(e) => Some(e.join("; ")),
                                Err(unknown) => Some(unknown),
                            } {
                                denied = Some(format!(
                                    "`{}` was not run: a tool hook of this session changed its arguments into ones that do not fit its schema ({problem}); your own arguments were valid, so do not retry the same call unchanged",
                                    call.name
                                ));
                                break;
                            }
                            args = new_args;
                        }
                        ToolCallDecision::Deny(message) => {
                            tracing::info!(tool = %call.name, %message, "a tool hook denied the call");
                            denied = Some(message);
                            break;
                        }
                        ToolCallDecision::Abort(reason) => {
                            tracing::info!(tool = %call.name, %reason, "a tool hook aborted the run");
                            return Err(HaloError::Aborted {
                                tool: call.name.clone(),
                                reason,
                            });
                        }
                    }
                }
                let fatal = |message| HaloError::ToolFatal {
                    tool: call.name.clone(),
                    message,
                };
                match (denied, self.agents.get(&call.name), parent) {
                    (Some(message), _, _) => (ToolResult::error(call, message), None),
                    (None, Some(agent), Some(parent)) => {
                        let context = AgentContext::new(parent.clone(), call.clone());
                        output_result(call, agent.call(context, args).await).map_err(fatal)?
                    }
                    (None, Some(_), None) => (
                        ToolResult::error(
                            call,
                            format!(
                                "`{}` runs the agent and cannot be run on its own here",
                                call.name
                            ),
                        ),
                        None,
                    ),
                    (None, None, _) => self
                        .registry
                        .execute_counted(call, args)
                        .await
                        .map_err(fatal)?,
                }
            }
        };
        for hook in &self.hooks {
            result = hook.after_tool_call(call, result).await;
        }
        Ok((result, stats))
    }
}
