//! Tool dispatch: the one owner of an agent's tools — their executors and compiled schemas
//! (the [`ToolRegistry`]), their specs (written once, into the [`StablePrefix`]) and the
//! tool hooks — and the code that runs one tool call.
//!
//! Which calls run, in which batches, and what happens to their outcomes is the run
//! engine's decision ([`crate::engine`]); here one call goes through the pipeline: the
//! step's active tools, the schema, the before-hooks, an approval the hooks or the tool's
//! annotations ask for, the tool itself, the after-hooks. A panicking tool or hook becomes an
//! error result with the panic message (unless the agent fails fast). Tools that run the
//! agent ([`crate::delegate`]) get the step's snapshot of it in their [`ToolContext`].
//!
//! A [`Toolbox`] also stands alone, outside any agent: an MCP server (halo-mcp) runs each
//! `tools/call` through [`Toolbox::run`], so a served tool gets exactly the argument checks
//! and hooks (denylist, permission policy, truncation) it gets inside an agent.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt as _;
use tracing::{Instrument as _, field::Empty};

use crate::cancel::CancelToken;
use crate::delegate::{AgentHandle, Parent};
use crate::driver::ToolOutcome;
use crate::error::HaloError;
use crate::hook::{ToolCallDecision, ToolHook};
use crate::inner::EventSink;
use crate::message::{ToolCall, ToolResult};
use crate::prefix::{StablePrefix, ToolSpec};
use crate::request;
use crate::tool::{DynTool, ToolAnnotations, ToolContext, ToolRegistry, ToolSource, output_result};

/// Tools and the hooks around their calls: the tool pipeline of an agent, usable on its own.
///
/// Inside a [`HaloAgent`](crate::HaloAgent) the specs go into the prefix; a standalone
/// toolbox (built with [`new`](Self::new), [`add_tool`](Self::add_tool) and
/// [`push_hook`](Self::push_hook)) keeps them itself and lists them with
/// [`specs`](Self::specs). [`run`](Self::run) takes one [`ToolCall`] through the pipeline:
/// arguments parsed and checked against the schema, the before-hooks in order (allow,
/// rewrite, deny, ask, abort), the tool, then the after-hooks on every result
/// ([`crate::hook`]). A call that needs approval is denied there at once: a toolbox on its
/// own has no one to ask.
///
/// ```
/// use halo_core::{Toolbox, ToolCall, ToolCallDecision, ToolContext, ToolHook, Tool, ToolError, ToolOutput, async_trait};
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
///     async fn before_tool_call(&self, _: &ToolContext, args: &Value) -> ToolCallDecision {
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
    /// Shared with every call's [`ToolContext`]; copied on write.
    registry: Arc<ToolRegistry>,
    hooks: Vec<Arc<dyn ToolHook>>,
    sources: Vec<Sourced>,
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
            .finish()
    }
}

/// What one call runs with besides the toolbox: the step's active tools, the agent's
/// snapshot for tools that run it, the run's cancel token, whether the call was approved,
/// whether panics are caught.
pub(crate) struct CallEnv<'a> {
    pub(crate) active: Option<&'a [String]>,
    pub(crate) parent: Option<Arc<Parent>>,
    /// Where inner agents' events go, while the run is streamed ([`crate::inner`]).
    pub(crate) events: Option<EventSink>,
    /// How deep the calling agent is (0 outside agents).
    pub(crate) depth: usize,
    pub(crate) cancel: CancelToken,
    pub(crate) approved: bool,
    pub(crate) catch_panics: bool,
}

impl Default for CallEnv<'_> {
    fn default() -> Self {
        CallEnv {
            active: None,
            parent: None,
            events: None,
            depth: 0,
            cancel: CancelToken::default(),
            approved: false,
            catch_panics: true,
        }
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
        Ok(Arc::make_mut(&mut self.registry).insert(tool)?)
    }

    /// Removes a tool from a standalone toolbox; returns whether it was there. (Inside an
    /// agent the prefix would still name it; agents change tools through their own API.)
    pub fn remove_tool(&mut self, name: &str) -> bool {
        Arc::make_mut(&mut self.registry).remove(name)
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
        Arc::make_mut(&mut self.registry).insert(tool)?;
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
        Arc::make_mut(&mut self.registry).insert_client(&spec)?;
        prefix.add_tool(spec)?;
        Ok(())
    }

    /// These tools without the ones named (for a sub-agent's).
    pub(crate) fn without(&self, names: &[&str]) -> Toolbox {
        let mut tools = self.clone();
        let registry = Arc::make_mut(&mut tools.registry);
        for name in names {
            registry.remove(name);
        }
        tools
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
                let registry = Arc::make_mut(&mut self.registry);
                for tool in tools {
                    let name = tool.spec().name;
                    registry.remove(&name);
                    if let Err(e) = registry.insert(tool) {
                        tracing::warn!(tool = %name, error = %e, "a source's tool was left out");
                    }
                }
                self.sources[i].specs = old;
                continue;
            }
            for spec in &old {
                Arc::make_mut(&mut self.registry).remove(&spec.name);
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
        self.registry.is_client_side(name)
    }

    /// Whether calls of `name` may share a batch with other such calls.
    pub(crate) fn concurrency_safe(&self, name: &str) -> bool {
        self.registry
            .annotations(name)
            .is_some_and(|a| a.concurrency_safe())
    }

    /// Whether any of `calls` is of a tool that runs the agent (so the step needs a
    /// snapshot of it, a [`Parent`]).
    pub(crate) fn runs_agent(&self, calls: &[ToolCall]) -> bool {
        calls.iter().any(|c| {
            self.registry
                .annotations(&c.name)
                .is_some_and(|a| a.runs_agent)
        })
    }

    /// Runs one call through the hooks and its tool, as an agent runs each call of a
    /// step, in an `execute_tool` tracing span.
    ///
    /// An unknown tool, arguments that are not a JSON object or do not fit the schema, a
    /// hook's deny, a tool's `Failed` or `InvalidArguments`, a panic all come back as a
    /// result with `is_error: true` whose text says what to do. A call that needs approval
    /// is denied at once (a toolbox on its own has no one to ask), and so is the call of a
    /// tool that runs the agent (there is no agent here).
    ///
    /// # Errors
    /// [`HaloError::ToolFatal`] (the tool's `Fatal`) and [`HaloError::Aborted`] (a hook's
    /// abort); an agent ends its run on them.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the call; what the tool already did is not undone.
    pub async fn run(&self, call: &ToolCall) -> Result<ToolResult, HaloError> {
        match self.run_call(call.clone(), CallEnv::default()).await {
            ToolOutcome::Result { result, .. } => Ok(result),
            ToolOutcome::NeedsApproval { reason, .. } => Ok(request::unapproved(call, &reason)),
            ToolOutcome::Fatal { tool, message, .. } => Err(HaloError::ToolFatal { tool, message }),
            ToolOutcome::Aborted { tool, reason, .. } => Err(HaloError::Aborted { tool, reason }),
        }
    }

    /// Runs one call through the hooks and its tool, in an `execute_tool` span, and says
    /// what came of it ([`ToolOutcome`]): a result (with the counters of the model calls the
    /// tool made), an approval to ask, or a fatal end.
    pub(crate) async fn run_call(&self, call: ToolCall, env: CallEnv<'_>) -> ToolOutcome {
        let cx = self.context(call, &env);
        let call = cx.call();
        // The name is formatted only when a subscriber takes the span.
        let span = tracing::info_span!(
            "execute_tool",
            "otel.name" = %format_args!("execute_tool {}", call.name),
            "otel.kind" = "internal",
            "otel.status_code" = Empty,
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = call.name.as_str(),
            "gen_ai.tool.call.id" = call.id.as_str(),
            "gen_ai.tool.type" = "function",
            "error.type" = Empty,
            "halo.tool.is_error" = Empty,
        );
        let outcome = self.run_hooked(&cx, &env).instrument(span.clone()).await;
        let error = match &outcome {
            ToolOutcome::Result { result, .. } => {
                span.record("halo.tool.is_error", result.is_error);
                result.is_error.then_some("tool_error")
            }
            ToolOutcome::NeedsApproval { .. } => None,
            ToolOutcome::Fatal { .. } => Some("fatal"),
            ToolOutcome::Aborted { .. } => Some("aborted"),
        };
        if let Some(error) = error {
            span.record("error.type", error);
            span.record("otel.status_code", "error");
        }
        outcome
    }

    /// The call's context.
    fn context(&self, call: ToolCall, env: &CallEnv<'_>) -> ToolContext {
        let annotations = self.registry.annotations(&call.name).unwrap_or_default();
        let agent = match (&env.parent, annotations.runs_agent) {
            (Some(parent), true) => Some(AgentHandle::new(
                parent.clone(),
                call.clone(),
                env.events.clone(),
            )),
            _ => None,
        };
        ToolContext::new(call, annotations, env.cancel.clone(), self.registry.clone())
            .approve(env.approved)
            .with_agent(agent)
            .with_events(env.events.clone())
            .at_depth(env.depth)
    }

    /// The hook pipeline around one tool call (see [`crate::hook`]).
    async fn run_hooked(&self, cx: &ToolContext, env: &CallEnv<'_>) -> ToolOutcome {
        let call = cx.call();
        let done = |result: ToolResult| ToolOutcome::Result {
            result,
            delegated: None,
        };
        let inactive = env
            .active
            .is_some_and(|names| !names.iter().any(|n| n.as_str() == call.name));
        let checked = if inactive {
            let active = env.active.unwrap_or_default();
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
        let (result, delegated) = match checked {
            Err(message) => (ToolResult::error(call, message), None),
            Ok(args) => match self.before(call, cx, args, env.catch_panics).await {
                Before::Run(args) => {
                    if cx.annotations().needs_approval && !cx.approved() {
                        return ToolOutcome::NeedsApproval {
                            call_id: call.id.to_string(),
                            reason: format!("`{}` runs only once approved", call.name),
                        };
                    }
                    match self.execute(call, args, cx, env).await {
                        Ok(done) => done,
                        Err(message) => {
                            return ToolOutcome::Fatal {
                                call_id: call.id.to_string(),
                                tool: call.name.to_string(),
                                message,
                            };
                        }
                    }
                }
                Before::Denied(message) => (ToolResult::error(call, message), None),
                Before::Ask(reason) => {
                    return ToolOutcome::NeedsApproval {
                        call_id: call.id.to_string(),
                        reason,
                    };
                }
                Before::Abort(reason) => {
                    return ToolOutcome::Aborted {
                        call_id: call.id.to_string(),
                        tool: call.name.to_string(),
                        reason,
                    };
                }
            },
        };
        let mut result = result;
        for hook in &self.hooks {
            let after = AssertUnwindSafe(hook.after_tool_call(cx, result));
            result = if env.catch_panics {
                match after.catch_unwind().await {
                    Ok(r) => r,
                    Err(panic) => ToolResult::error(
                        call,
                        format!(
                            "`{}` ran, but a tool hook of this session failed on its result (it panicked: {}), so the result was lost; check what the call did before calling it again",
                            call.name,
                            panic_message(&*panic)
                        ),
                    ),
                }
            } else {
                after.0.await
            };
        }
        match delegated {
            None => done(result),
            Some(stats) => ToolOutcome::Result {
                result,
                delegated: Some(stats),
            },
        }
    }

    /// The before-hooks, in order.
    async fn before(
        &self,
        call: &ToolCall,
        cx: &ToolContext,
        mut args: serde_json::Value,
        catch_panics: bool,
    ) -> Before {
        let mut asked = None;
        for hook in &self.hooks {
            let decision = {
                let asking = AssertUnwindSafe(hook.before_tool_call(cx, &args));
                if catch_panics {
                    match asking.catch_unwind().await {
                        Ok(d) => d,
                        Err(panic) => {
                            return Before::Denied(format!(
                                "`{}` did not run: a tool hook of this session failed on the call (it panicked: {})",
                                call.name,
                                panic_message(&*panic)
                            ));
                        }
                    }
                } else {
                    asking.0.await
                }
            };
            match decision {
                ToolCallDecision::Allow => {}
                ToolCallDecision::Rewrite(new_args) => {
                    let errors = self.registry.schema_errors(&call.name, &new_args);
                    if let Some(problem) = match errors {
                        Ok(e) if e.is_empty() => None,
                        Ok(e) => Some(e.join("; ")),
                        Err(unknown) => Some(unknown),
                    } {
                        return Before::Denied(format!(
                            "`{}` was not run: a tool hook of this session changed its arguments into ones that do not fit its schema ({problem}); your own arguments were valid, so do not retry the same call unchanged",
                            call.name
                        ));
                    }
                    args = new_args;
                }
                ToolCallDecision::Deny(message) => {
                    tracing::info!(tool = %call.name, %message, "a tool hook denied the call");
                    return Before::Denied(message);
                }
                ToolCallDecision::Ask(reason) => {
                    if !cx.approved() && asked.is_none() {
                        tracing::info!(tool = %call.name, %reason, "a tool hook asks for approval");
                        asked = Some(reason);
                    }
                }
                ToolCallDecision::Abort(reason) => {
                    tracing::info!(tool = %call.name, %reason, "a tool hook aborted the run");
                    return Before::Abort(reason);
                }
            }
        }
        match asked {
            Some(reason) => Before::Ask(reason),
            None => Before::Run(args),
        }
    }

    /// Runs the tool itself.
    ///
    /// # Errors
    /// The tool's `Fatal` message.
    async fn execute(
        &self,
        call: &ToolCall,
        args: serde_json::Value,
        cx: &ToolContext,
        env: &CallEnv<'_>,
    ) -> Result<(ToolResult, Option<crate::stats::AgentStats>), String> {
        let Some(tool) = self.registry.executor(&call.name) else {
            return self.registry.execute_checked(call, args, cx).await;
        };
        if cx.annotations().runs_agent && cx.agent().is_none() {
            return Ok((
                ToolResult::error(
                    call,
                    format!(
                        "`{}` runs the agent and cannot be run on its own here",
                        call.name
                    ),
                ),
                None,
            ));
        }
        let answer = AssertUnwindSafe(tool.call_json(args, cx));
        let answer = if env.catch_panics {
            match answer.catch_unwind().await {
                Ok(a) => a,
                Err(panic) => {
                    let message = panic_message(&*panic);
                    tracing::warn!(tool = %call.name, %message, "a tool panicked");
                    return Ok((
                        ToolResult::error(
                            call,
                            format!(
                                "error: `{}` failed unexpectedly (it panicked: {message}); what it did before is unknown, so check before calling it again",
                                call.name
                            ),
                        ),
                        None,
                    ));
                }
            }
        } else {
            answer.0.await
        };
        output_result(call, answer)
    }
}

/// What the before-hooks decided.
enum Before {
    Run(serde_json::Value),
    Denied(String),
    Ask(String),
    Abort(String),
}

/// The message of a caught panic (`panic!("...")` carries a `&str` or a `String`).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}
