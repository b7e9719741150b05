//! Agent tools: tools that run the agent itself — a plan carried out in the agent's own
//! context, a sub-agent on the agent's model (issue 14 §5–6; halo-strategies' `Plan` and
//! `Subagent` are the two Halo ships).
//!
//! # The design
//! A [`Tool`](crate::Tool) cannot borrow the agent that calls it: the run loop holds the
//! agent mutably while the step's calls run. So the driver knows one more kind of tool, the
//! [`AgentTool`], added with [`HaloAgentBuilder::agent_tool`](crate::HaloAgentBuilder::agent_tool).
//! When a step calls one, the driver takes a snapshot of the agent for the step (a
//! `Parent`: the model, the prefix, the tools and hooks, the options, the step's active
//! tools and a fork of the run state) and hands each call an [`AgentContext`] over it. The
//! tool then runs what it needs as agents of its own, built from the context:
//!
//! - [`AgentContext::fork`]: **the same context**. An agent with a byte-identical prefix,
//!   the same tools, options and history (a clone of the log, which remembers where it
//!   forked, so an adapter's kept body is reused), the same ledger (its first request is
//!   predicted to read all the parent's last request carried from the cache, and the
//!   ledger says whether it did), and the calling tool taken out of the callable tools
//!   through [`GenerationOptions::active_tools`] — never out of the tool list, so the prefix
//!   bytes do not change. This is the recursion guard of `plan`: inside its steps a `plan`
//!   call is not offered (OpenAI `allowed_tools`, Gemini `allowedFunctionNames`) and, where
//!   the provider has no such mechanism, refused with an error result.
//! - [`AgentContext::subagent`]: **a fresh agent** on the same model: its own prefix (the
//!   system prompt the tool builds, the parent's tool specs minus the calling tool: the
//!   recursion guard of `subagent`), its own log, one level deeper
//!   ([`AgentContext::depth`], which a tool can bound).
//!
//! The tool's answer is an ordinary [`ToolOutput`]: the parent's log gets one tool result
//! (the pairing invariant holds: the calls of the step in flight are answered, nothing
//! else enters the parent's log), and [`ToolOutput::with_stats`] carries the forks' and
//! sub-agents' counters, which the engine adds to the parent's
//! ([`AgentStats::delegated_steps`](crate::AgentStats::delegated_steps)). A fork's steps never
//! enter the parent's log: what the parent keeps of a plan is its result, and the parent's
//! next request still shares the prefix and the history the fork's requests began with.
//!
//! The calls go through the agent's tool hooks (an approval prompt sees a `subagent` call
//! as any other), and the forks and sub-agents share the hooks, so their own tool calls do
//! too. A concurrent agent tool ([`AgentTool::concurrent`]) runs together with the other
//! concurrent and read-only calls of its step (two sub-agents of one step at once).
//!
//! What a fork or sub-agent takes from the parent: the model, the tools and hooks, the
//! options, the repair strategy, the loop guard, the context strategy and compactor, the
//! clock, the step limit and the session id. Not taken: the guardrails and step hooks
//! (they guard the parent's own conversation; a step hook's active tools would undo the
//! recursion guard), the session store (a fork's steps are not the parent's), steering.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::agent::{Guards, HaloAgent, HaloAgentBuilder};
use crate::cancel::CancelToken;
use crate::clock::Clock;
use crate::context::{Compactor, ContextConfig};
use crate::dispatch::Toolbox;
use crate::engine::RunState;
use crate::log::MessageLog;
use crate::message::ToolCall;
use crate::model::{GenerationOptions, SharedModel, ToolChoice};
use crate::prefix::{StablePrefix, ToolSpec};
use crate::steering::SteeringHandle;
use crate::tool::{ToolError, ToolOutput};

/// A tool that runs the agent that calls it: the driver gives each call an
/// [`AgentContext`] (see the [module docs](self)). Object-safe; implement with
/// `#[halo_core::async_trait]`.
///
/// ```
/// use halo_core::{AgentContext, AgentTool, HaloAgent, ToolError, ToolOutput, ToolSpec, async_trait};
/// use halo_core::testing::ScriptedModel;
/// use serde_json::{Value, json};
///
/// /// Asks the same agent, in its own context, for a second opinion.
/// struct Reflect;
/// #[async_trait]
/// impl AgentTool for Reflect {
///     fn spec(&self) -> ToolSpec {
///         ToolSpec::new("reflect", "Thinks again about a question.", json!({
///             "type": "object", "properties": {"question": {"type": "string"}},
///             "required": ["question"],
///         }))
///     }
///     async fn call(&self, cx: AgentContext, args: Value) -> Result<ToolOutput, ToolError> {
///         let mut fork = cx.fork();
///         let question = args["question"].as_str().unwrap_or_default().to_string();
///         let run = fork.generate_text(question).await.map_err(|e| ToolError::Failed(e.to_string()))?;
///         Ok(ToolOutput::text(run.text).with_stats(fork.stats()))
///     }
/// }
///
/// # futures::executor::block_on(async {
/// let model = ScriptedModel::new()
///     .tool_call("reflect", json!({"question": "Is 7 prime?"}))
///     .text("Yes: 7 has no divisor but 1 and 7.") // the fork's answer
///     .text("7 is prime.");
/// let mut agent = HaloAgent::builder(model.clone()).agent_tool(Reflect).unwrap().build();
/// let out = agent.generate_text("Is 7 prime?").await.unwrap();
/// assert_eq!(out.text, "7 is prime.");
/// assert_eq!(out.stats.delegated_steps, 1); // the fork's model call
/// // In the fork, `reflect` was not callable, and the prefix was the same.
/// let requests = model.requests();
/// assert_eq!(requests[1].options.active_tools, Some(vec![]));
/// assert_eq!(requests[0].prefix_bytes, requests[1].prefix_bytes);
/// # });
/// ```
#[async_trait]
pub trait AgentTool: Send + Sync {
    /// The tool's spec, which goes into the prefix as any tool's (stable across runs).
    fn spec(&self) -> ToolSpec;

    /// Whether calls may run concurrently with the step's other concurrent and read-only
    /// calls (default: no, they run one by one).
    fn concurrent(&self) -> bool {
        false
    }

    /// Runs a call whose arguments fit the spec's schema.
    ///
    /// # Errors
    /// [`ToolError`]: `Failed` and `InvalidArguments` are shown to the model, `Fatal` ends
    /// the calling agent's run.
    async fn call(&self, context: AgentContext, arguments: Value) -> Result<ToolOutput, ToolError>;
}

/// What an agent tool's call runs with: a snapshot of the calling agent for the step, and
/// the call. See the [module docs](self).
pub struct AgentContext {
    parent: Arc<Parent>,
    call: ToolCall,
}

impl std::fmt::Debug for AgentContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentContext")
            .field("call", &self.call)
            .field("depth", &self.parent.depth)
            .finish_non_exhaustive()
    }
}

/// The calling agent, as a step's agent tool calls see it.
pub(crate) struct Parent {
    model: SharedModel,
    prefix: StablePrefix,
    tools: Toolbox,
    options: GenerationOptions,
    /// The step's active tools (`None`: all).
    active: Option<Vec<String>>,
    /// A fork of the parent's run state ([`RunState::fork`]).
    state: RunState,
    max_steps: usize,
    log_capacity: usize,
    session_id: Option<String>,
    guards: Guards,
    clock: Arc<dyn Clock>,
    context: Option<ContextConfig>,
    compactor: Option<Arc<dyn Compactor>>,
    depth: usize,
}

impl HaloAgent {
    /// The snapshot a step's agent tool calls run with; `active` are the step's active
    /// tools.
    pub(crate) fn parent(&self, active: Option<Vec<String>>) -> Parent {
        Parent {
            model: self.model.clone(),
            prefix: self.prefix.clone(),
            tools: self.tools.clone(),
            options: self.options.clone(),
            active,
            state: self.state.fork(),
            max_steps: self.max_steps,
            log_capacity: self.log_capacity,
            session_id: self.session_id.clone(),
            guards: Guards {
                repair: self.guards.repair.clone(),
                loops: self.guards.loops.clone(),
                ..Guards::default()
            },
            clock: self.clock.clone(),
            context: self.context.clone(),
            compactor: self.compactor.clone(),
            depth: self.depth,
        }
    }
}

impl AgentContext {
    pub(crate) fn new(parent: Arc<Parent>, call: ToolCall) -> Self {
        AgentContext { parent, call }
    }

    /// The call being run.
    pub fn call(&self) -> &ToolCall {
        &self.call
    }

    /// How deep the calling agent is: 0 for an agent built by the application, one more
    /// for each fork or sub-agent between it and that agent.
    pub fn depth(&self) -> usize {
        self.parent.depth
    }

    /// The calling agent's model.
    pub fn model(&self) -> &SharedModel {
        &self.parent.model
    }

    /// The calling agent's prefix.
    pub fn prefix(&self) -> &StablePrefix {
        &self.parent.prefix
    }

    /// The calling agent's history: every committed step, without the step in flight (the
    /// one whose call this is).
    pub fn history(&self) -> &MessageLog {
        self.parent.state.log()
    }

    /// The tools the calling agent may call in this step, sorted.
    pub fn callable_tools(&self) -> Vec<String> {
        match &self.parent.active {
            Some(active) => {
                let mut names = active.clone();
                names.sort();
                names
            }
            None => self
                .parent
                .tools
                .registry()
                .names()
                .map(str::to_string)
                .collect(),
        }
    }

    /// The caller's options for an agent this call runs: a `tool_choice` that forces this
    /// call's tool (which that agent may not call) becomes `auto`.
    fn own_options(&self) -> GenerationOptions {
        let mut options = self.parent.options.clone();
        if matches!(&options.tool_choice, ToolChoice::Tool(name) if *name == self.call.name) {
            options.tool_choice = ToolChoice::Auto;
        }
        options
    }

    /// An agent in the calling agent's context: the same prefix bytes, tools, options and
    /// history, the ledger carried over, one level deeper, and this call's tool not
    /// callable (taken out of [`GenerationOptions::active_tools`], not out of the prefix).
    /// Its steps never enter the caller's log. See the [module docs](self).
    pub fn fork(&self) -> HaloAgent {
        let p = &*self.parent;
        let mut options = self.own_options();
        options.active_tools = Some(
            self.callable_tools()
                .into_iter()
                .filter(|name| *name != self.call.name)
                .collect(),
        );
        HaloAgent {
            model: p.model.clone(),
            prefix: p.prefix.clone(),
            tools: p.tools.clone(),
            state: p.state.fork(),
            options,
            max_steps: p.max_steps,
            log_capacity: p.log_capacity,
            session_id: p.session_id.clone(),
            guards: p.guards.clone(),
            clock: p.clock.clone(),
            store: None,
            restored: true,
            steering: SteeringHandle::default(),
            cancel: CancelToken::default(),
            manual: false,
            context: p.context.clone(),
            compactor: p.compactor.clone(),
            depth: p.depth + 1,
        }
    }

    /// A builder for a fresh agent on the calling agent's model, one level deeper: `system`
    /// as its system prompt, the caller's tools and hooks except this call's tool (and its
    /// specs in the same canonical order), the caller's options, step limit, repair
    /// strategy, loop guard, context strategy and clock; an empty log. The same `system`
    /// gives the same prefix bytes, so a second sub-agent of a role reads its prefix from
    /// the provider's cache.
    pub fn subagent(&self, system: impl Into<String>) -> HaloAgentBuilder {
        let p = &*self.parent;
        let own = self.call.name.as_str();
        let mut prefix = StablePrefix::new(system);
        for spec in p.prefix.tools().iter().filter(|t| t.name != own) {
            // The specs come from a valid prefix: adding them again cannot fail.
            let _ = prefix.add_tool(spec.clone());
        }
        let mut options = self.own_options();
        if let Some(active) = &mut options.active_tools {
            active.retain(|name| name != own);
        }
        let mut builder = HaloAgent::builder_shared(p.model.clone())
            .options(options)
            .max_steps(p.max_steps)
            .log_capacity(p.log_capacity)
            .clock(p.clock.clone());
        builder.prefix = prefix;
        builder.tools = p.tools.without(&[own]);
        builder.guards = p.guards.clone();
        builder.context = p.context.clone();
        builder.compactor = p.compactor.clone();
        builder.depth = p.depth + 1;
        builder
    }
}
