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
//!
//! A [`Toolbox`] also stands alone, outside any agent: an MCP server (halo-mcp) runs each
//! `tools/call` through [`Toolbox::run`], so a served tool gets exactly the argument checks
//! and hooks (denylist, permission policy, truncation) it gets inside an agent.

use std::sync::Arc;

use tracing::{Instrument as _, field::Empty};

use std::collections::BTreeMap;

use crate::delegate::{AgentContext, AgentTool, Parent};
use crate::error::HaloError;
use crate::hook::{ToolCallDecision, ToolHook};
use crate::message::{ToolCall, ToolResult};
use crate::prefix::{StablePrefix, ToolSpec};
use crate::stats::AgentStats;
use crate::tool::{DynTool, ToolAnnotations, ToolRegistry, ToolSource, output_result};

/// Tools and the hooks around their calls: the tool pipeline of an agent, usable on its own.
///
/// Inside a [`HaloAgent`](crate::HaloAgent) the specs go into the prefix; a standalone
/// toolbox (built with [`new`](Self::new), [`add_tool`](Self::add_tool) and
/// [`push_hook`](Self::push_hook)) keeps them itself and lists them with
/// [`specs`](Self::specs). [`run`](Self::run) takes one [`ToolCall`] through the pipeline:
/// arguments parsed and checked against the schema, the before-hooks in order (allow,
/// rewrite, deny, abort), the tool, then the after-hooks on every result
/// ([`crate::hook`]).
///
/// ```
/// use halo_core::{Toolbox, ToolCall, ToolCallDecision, ToolHook, Tool, ToolError, ToolOutput, async_trait};
/// use serde_json::Value;
///
/// struct Upper;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Args { text: String }
/// impl Tool for Upper {
///     type Args = Args;
///     fn name(&self) -> &str { "upper" }
///     fn description(&self) -> &str { "Upper-cases text." }
///     async fn call(&self, a: Args) -> Result<ToolOutput, ToolError> {
///         Ok(a.text.to_uppercase().into())
///     }
/// }
/// struct NoSecrets;
/// #[async_trait]
/// impl ToolHook for NoSecrets {
///     async fn before_tool_call(&self, _: &ToolCall, args: &Value) -> ToolCallDecision {
///         if args["text"] == "secret" {
///             ToolCallDecision::Deny("secrets are not upper-cased".into())
///         } else {
///             ToolCallDecision::Allow
///         }
///     }
/// }
///
/// # futures::executor::block_on(async {
/// let mut tools = Toolbox::new();
/// tools.add_tool(std::sync::Arc::new(Upper)).unwrap();
/// tools.push_hook(std::sync::Arc::new(NoSecrets));
/// assert_eq!(tools.specs().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["upper"]);
///
/// let ok = tools.run(&ToolCall::new("1", "upper", r#"{"text":"hi"}"#)).await.unwrap();
/// assert_eq!((ok.content.as_str(), ok.is_error), ("HI", false));
/// let denied = tools.run(&ToolCall::new("2", "upper", r#"{"text":"secret"}"#)).await.unwrap();
/// assert_eq!((denied.content.as_str(), denied.is_error), ("secrets are not upper-cased", true));
/// # });
/// ```
///
/// Cheap to clone (the tools are shared), which forks and sub-agents do.
#[derive(Default, Clone)]
pub struct Toolbox {
    registry: ToolRegistry,
    hooks: Vec<Arc<dyn ToolHook>>,
    sources: Vec<Sourced>,
    /// Tools that run the agent ([`crate::delegate`]), by name; also in the registry, as
    /// client-side entries (spec and schema, no executor).
    agents: BTreeMap<String, Arc<dyn AgentTool>>,
}

/// A [`ToolSource`] and what the toolbox last took from it.
#[derive(Clone)]
struct Sourced {
    source: Arc<dyn ToolSource>,
    version: u64,
    /// The specs of the source's tools now in the prefix, in order.
    specs: Vec<ToolSpec>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.registry)
            .field("hooks", &self.hooks.len())
            .field("sources", &self.sources.len())
            .field("agent_tools", &self.agents.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Toolbox {
    /// An empty toolbox: no tools, no hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool to a standalone toolbox; returns its spec. The name and schema follow
    /// the prefix's rules (`[a-zA-Z0-9_-]{1,64}`, an object schema), so a tool that a
    /// standalone toolbox takes is one an agent takes too.
    ///
    /// # Errors
    /// [`HaloError::Prefix`] for a duplicate or invalid name, or a schema that is not an
    /// object schema or does not compile; the toolbox is unchanged.
    pub fn add_tool(&mut self, tool: Arc<dyn DynTool>) -> Result<ToolSpec, HaloError> {
        let spec = tool.spec();
        StablePrefix::default().check_tool(&spec)?;
        Ok(self.registry.insert(tool)?)
    }

    /// Removes a tool from a standalone toolbox; returns whether it was there. (Inside an
    /// agent the prefix would still name it; agents change tools through their own API.)
    pub fn remove_tool(&mut self, name: &str) -> bool {
        self.registry.remove(name)
    }

    /// The specs of the tools, sorted by name.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.registry.specs()
    }

    /// The annotations of the tool `name` (`None` for an unknown tool).
    pub fn annotations(&self, name: &str) -> Option<ToolAnnotations> {
        self.registry.annotations(name)
    }

    /// Whether a tool `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.registry.spec(name).is_some()
    }

    /// The number of tool hooks.
    pub fn hook_count(&self) -> usize {
        self.hooks.len()
    }

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

    /// Adds a tool source and its current tools (see [`ToolSource`]).
    pub(crate) fn add_source(&mut self, prefix: &mut StablePrefix, source: Arc<dyn ToolSource>) {
        let version = source.version();
        let specs = self.add_sourced(prefix, source.tools());
        self.sources.push(Sourced {
            source,
            version,
            specs,
        });
    }

    /// At a step boundary: swaps in the tools of every source whose version changed.
    /// Returns whether the prefix changed.
    pub(crate) fn refresh_sources(&mut self, prefix: &mut StablePrefix) -> bool {
        let mut changed = false;
        for i in 0..self.sources.len() {
            let version = self.sources[i].source.version();
            if version == self.sources[i].version {
                continue;
            }
            let tools = self.sources[i].source.tools();
            let specs: Vec<ToolSpec> = tools.iter().map(|t| t.spec()).collect();
            let old = std::mem::take(&mut self.sources[i].specs);
            self.sources[i].version = version;
            if specs == old {
                // Same specs: new executors (a restarted server), the prefix unchanged.
                for tool in tools {
                    let name = tool.spec().name;
                    self.registry.remove(&name);
                    if let Err(e) = self.registry.insert(tool) {
                        tracing::warn!(tool = %name, error = %e, "a source's tool was left out");
                    }
                }
                self.sources[i].specs = old;
                continue;
            }
            for spec in &old {
                self.registry.remove(&spec.name);
                prefix.remove_tool(&spec.name);
            }
            self.sources[i].specs = self.add_sourced(prefix, tools);
            tracing::info!(
                before = old.len(),
                after = self.sources[i].specs.len(),
                version,
                "a tool source changed its tools"
            );
            changed = true;
        }
        changed
    }

    /// Adds a source's tools, leaving out (with a warning) those the prefix refuses.
    fn add_sourced(
        &mut self,
        prefix: &mut StablePrefix,
        tools: Vec<Arc<dyn DynTool>>,
    ) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        for tool in tools {
            let spec = tool.spec();
            match self.add(prefix, tool) {
                Ok(()) => specs.push(spec),
                Err(e) => {
                    tracing::warn!(tool = %spec.name, error = %e, "a source's tool was left out");
                }
            }
        }
        specs
    }

    /// Adds a tool hook after the existing ones (hooks run in the order they were added).
    pub fn push_hook(&mut self, hook: Arc<dyn ToolHook>) {
        self.hooks.push(hook);
    }

    /// Removes every tool hook.
    pub fn clear_hooks(&mut self) {
        self.hooks.clear();
    }

    /// The tools' executors and compiled schemas.
    pub fn registry(&self) -> &ToolRegistry {
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

    /// Runs one call through the hook pipeline and its tool, in an `execute_tool` tracing
    /// span, as an agent runs each call of a step.
    ///
    /// An unknown tool, arguments that are not a JSON object or do not fit the schema, a
    /// hook's deny, a tool's `Failed` or `InvalidArguments` all come back as a result with
    /// `is_error: true` whose text says what to do. An agent tool's call ([`AgentTool`])
    /// needs the agent that runs it: here, on its own, it is an error result.
    ///
    /// # Errors
    /// [`HaloError::ToolFatal`] (the tool's `Fatal`) and [`HaloError::Aborted`] (a hook's
    /// abort); an agent ends its run on them.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the call; what the tool already did is not undone.
    pub async fn run(&self, call: &ToolCall) -> Result<ToolResult, HaloError> {
        Ok(self.run_in_step(call, None, None).await?.0)
    }

    /// Runs one call through the hooks and its tool, in an `execute_tool` span. `active`
    /// restricts the tools this step may call; `parent` is what an agent tool's call runs
    /// with (an agent tool's call without one gets an error result). Returns the result and
    /// the counters of the model calls the tool made ([`crate::ToolOutput::stats`]).
    ///
    /// # Errors
    /// [`HaloError::ToolFatal`] and [`HaloError::Aborted`]; every other failure is an error
    /// result the model reads.
    pub(crate) async fn run_in_step(
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
