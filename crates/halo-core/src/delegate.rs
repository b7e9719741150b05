//! Agent tools: tools that run the agent itself — a plan carried out in the agent's own
//! context, a sub-agent on the agent's model (halo-strategies' `Plan` and `Subagent` are the
//! two Halo ships).
//!
//! # The design
//! A tool cannot borrow the agent that calls it: the run holds the agent mutably while the
//! step's calls run. So a tool that runs the agent says so in its annotations
//! ([`ToolAnnotations::runs_agent`](crate::ToolAnnotations::runs_agent)); when a step calls
//! one, the driver takes a snapshot of the agent for the step (the agent's configuration —
//! model, prefix, tools and hooks, options, limits, strategies — the step's active tools and
//! a fork of the run state) and the call's [`ToolContext`](crate::ToolContext) carries an
//! [`AgentHandle`] over it. The tool then runs what it needs as agents of its own, built from
//! the handle:
//!
//! - [`AgentHandle::fork`]: **the same context**. An agent with a byte-identical prefix,
//!   the same tools, options and history (a clone of the log, which remembers where it
//!   forked, so an adapter's kept body is reused), the same ledger (its first request is
//!   predicted to read all the parent's last request carried from the cache, and the
//!   ledger says whether it did), and the calling tool taken out of the callable tools
//!   through [`GenerationOptions::active_tools`] — never out of the tool list, so the prefix
//!   bytes do not change. This is the recursion guard of `plan`: inside its steps a `plan`
//!   call is not offered (OpenAI `allowed_tools`, Gemini `allowedFunctionNames`) and, where
//!   the provider has no such mechanism, refused with an error result.
//! - [`AgentHandle::subagent`]: **a fresh agent** on the same model: its own prefix (the
//!   system prompt the tool builds, the parent's tool specs minus the calling tool: the
//!   recursion guard of `subagent`), its own log, one level deeper
//!   ([`AgentHandle::depth`], which a tool can bound).
//!
//! The tool's answer is an ordinary [`ToolOutput`](crate::ToolOutput): the parent's log gets one tool result
//! (the pairing invariant holds: the calls of the step in flight are answered, nothing
//! else enters the parent's log), and [`ToolOutput::with_stats`](crate::ToolOutput::with_stats) carries the forks' and
//! sub-agents' counters, which the engine adds to the parent's
//! ([`AgentStats::delegated_steps`](crate::AgentStats::delegated_steps)). A fork's steps never
//! enter the parent's log: what the parent keeps of a plan is its result, and the parent's
//! next request still shares the prefix and the history the fork's requests began with.
//!
//! The calls go through the agent's tool hooks (an approval prompt sees a `subagent` call
//! as any other), and the forks and sub-agents share the hooks, so their own tool calls do
//! too. A concurrent agent tool
//! ([`ToolAnnotations::concurrent`](crate::ToolAnnotations::concurrent)) runs together with
//! the other concurrent and read-only calls of its step (two sub-agents of one step at once).
//!
//! What a fork or sub-agent takes from the parent: the model, the tools and hooks, the
//! options, the repair strategy, the loop guard, the context strategy and compactor, the
//! clock, the step limit and the session id. Not taken: the guardrails and step hooks
//! (they guard the parent's own conversation; a step hook's active tools would undo the
//! recursion guard), the session store (a fork's steps are not the parent's), steering,
//! the handoffs ([`crate::handoff`]: a fork keeps their specs in its prefix but cannot
//! call them, a sub-agent has none) and the parent's name (a fork's events are tagged with
//! the calling tool's name, a sub-agent's with the name its builder gives it).
//!
//! While the parent's run is streamed, a fork's and a sub-agent's steps, tool calls and
//! text reach the parent's events, tagged ([`crate::inner`]): [`AgentHandle::events`] is
//! where they go, and both wire it up themselves.

use std::sync::Arc;

use crate::agent::{Config, Guards, HaloAgent, HaloAgentBuilder};
use crate::engine::RunState;
use crate::inner::{EventSink, Tap};
use crate::log::MessageLog;
use crate::message::ToolCall;
use crate::model::{GenerationOptions, SharedModel, ToolChoice};
use crate::prefix::StablePrefix;

/// What a tool that runs the agent gets in its [`ToolContext`](crate::ToolContext): a
/// snapshot of the calling agent for the step, and the call. See the [module docs](self).
///
/// ```
/// use halo_core::{async_trait, DynTool, HaloAgent, ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolSpec};
/// use halo_core::testing::ScriptedModel;
/// use serde_json::{Value, json};
///
/// /// Asks the same agent, in its own context, for a second opinion.
/// struct Reflect;
/// #[async_trait]
/// impl DynTool for Reflect {
///     fn spec(&self) -> ToolSpec {
///         ToolSpec::new("reflect", "Thinks again about a question.", json!({
///             "type": "object", "properties": {"question": {"type": "string"}},
///             "required": ["question"],
///         }))
///     }
///     fn annotations(&self) -> ToolAnnotations {
///         ToolAnnotations::default().with_runs_agent(true)
///     }
///     async fn call_json(&self, args: Value, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
///         let agent = cx.agent().ok_or_else(|| ToolError::Failed("no agent to reflect with".into()))?;
///         let mut fork = agent.fork();
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
/// let mut agent = HaloAgent::builder(model.clone()).tool(Reflect).unwrap().build();
/// let out = agent.generate_text("Is 7 prime?").await.unwrap();
/// assert_eq!(out.text, "7 is prime.");
/// assert_eq!(out.stats.delegated_steps, 1); // the fork's model call
/// // In the fork, `reflect` was not callable, and the prefix was the same.
/// let requests = model.requests();
/// assert_eq!(requests[1].options.active_tools, Some(vec![]));
/// assert_eq!(requests[0].prefix_bytes, requests[1].prefix_bytes);
/// # });
/// ```
#[derive(Clone)]
pub struct AgentHandle {
    parent: Arc<Parent>,
    call: ToolCall,
    /// Where the agents this call runs send their events, when the run is streamed.
    events: Option<EventSink>,
}

impl std::fmt::Debug for AgentHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentHandle")
            .field("call", &self.call)
            .field("depth", &self.parent.config.depth)
            .finish_non_exhaustive()
    }
}

/// The calling agent, as a step's agent tool calls see it.
pub(crate) struct Parent {
    /// The agent's configuration, without its guardrails and step hooks (they guard the
    /// parent's own conversation).
    config: Config,
    /// The step's active tools (`None`: all).
    active: Option<Vec<String>>,
    /// A fork of the parent's run state ([`RunState::fork`]).
    state: RunState,
}

impl Parent {
    /// The snapshot of an agent configured with `config`, whose run is `state`, for a step
    /// whose active tools are `active`.
    pub(crate) fn new(config: &Config, state: &RunState, active: Option<Vec<String>>) -> Self {
        let mut config = config.clone();
        config.guards = Guards {
            repair: config.guards.repair.take(),
            loops: config.guards.loops.take(),
            ..Guards::default()
        };
        Parent {
            config,
            active,
            state: state.fork(),
        }
    }
}

impl AgentHandle {
    pub(crate) fn new(parent: Arc<Parent>, call: ToolCall, events: Option<EventSink>) -> Self {
        AgentHandle {
            parent,
            call,
            events,
        }
    }

    /// Where the agents this call runs send their events ([`crate::inner`]): set while the
    /// calling run is streamed. [`fork`](Self::fork) and [`subagent`](Self::subagent) wire
    /// it up themselves.
    pub fn events(&self) -> Option<&EventSink> {
        self.events.as_ref()
    }

    /// An agent this call runs, made to forward its events ([`crate::inner`]) and not to
    /// hand the conversation anywhere (its handoffs' targets are the caller's peers).
    fn inner(&self, config: &mut Config) {
        config.depth += 1;
        config.tap = self
            .events
            .clone()
            .map(|sink| Tap::new(sink, &self.call.id, &self.call.name));
        config.reachable = Arc::default();
    }

    /// The call being run.
    pub fn call(&self) -> &ToolCall {
        &self.call
    }

    /// How deep the calling agent is: 0 for an agent built by the application, one more
    /// for each fork or sub-agent between it and that agent.
    pub fn depth(&self) -> usize {
        self.parent.config.depth
    }

    /// The calling agent's model.
    pub fn model(&self) -> &SharedModel {
        &self.parent.config.model
    }

    /// The calling agent's prefix.
    pub fn prefix(&self) -> &StablePrefix {
        &self.parent.config.prefix
    }

    /// The calling agent's history: every committed step, without the step in flight (the
    /// one whose call this is).
    pub fn history(&self) -> &MessageLog {
        self.parent.state.log()
    }

    /// A fork of the calling agent's run state: its history and ledger.
    pub(crate) fn fork_state(&self) -> RunState {
        self.parent.state.fork()
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
                .config
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
        let mut options = self.parent.config.options.clone();
        if matches!(&options.tool_choice, ToolChoice::Tool(name) if *name == self.call.name) {
            options.tool_choice = ToolChoice::Auto;
        }
        options
    }

    /// An agent in the calling agent's context: the same prefix bytes, tools, options and
    /// history, the ledger carried over, one level deeper, and this call's tool (and the
    /// handoff tools) not callable (taken out of [`GenerationOptions::active_tools`], not
    /// out of the prefix). Its steps never enter the caller's log; while the caller's run
    /// is streamed, its events reach the caller's, tagged with this call's tool name. See
    /// the [module docs](self).
    pub fn fork(&self) -> HaloAgent {
        let mut config = self.parent.config.clone();
        let mut options = self.own_options();
        options.active_tools = Some(
            self.callable_tools()
                .into_iter()
                .filter(|name| *name != self.call.name && !config.handoffs.contains_key(name))
                .collect(),
        );
        config.options = options;
        // Its events are tagged with the tool that runs it (`plan`).
        config.name = None;
        self.inner(&mut config);
        HaloAgent::from_parts(config, self.parent.state.fork())
    }

    /// A builder for a fresh agent on the calling agent's model, one level deeper: `system`
    /// as its system prompt, the caller's tools and hooks except this call's tool and the
    /// handoff tools (and its specs in the same canonical order), the caller's options, limits, repair strategy,
    /// loop guard, context strategy and clock; an empty log. The same `system` gives the
    /// same prefix bytes, so a second sub-agent of a role reads its prefix from the
    /// provider's cache.
    pub fn subagent(&self, system: impl Into<String>) -> HaloAgentBuilder {
        let mut config = self.parent.config.clone();
        // Not its own tool, nor the caller's handoffs.
        let mut left_out: Vec<&str> = config.handoffs.keys().map(String::as_str).collect();
        left_out.push(self.call.name.as_str());
        let mut prefix = StablePrefix::new(system);
        for spec in config
            .prefix
            .tools()
            .iter()
            .filter(|t| !left_out.contains(&t.name.as_str()))
        {
            // The specs come from a valid prefix: adding them again cannot fail.
            let _ = prefix.add_tool(spec.clone());
        }
        let mut options = self.own_options();
        if let Some(active) = &mut options.active_tools {
            active.retain(|name| !left_out.contains(&name.as_str()));
        }
        let tools = config.tools.without(&left_out);
        config.options = options;
        config.handoffs.clear();
        config.handoff_filter = None;
        config.name = None;
        self.inner(&mut config);
        HaloAgentBuilder::from_config(config).set_prefix_and_tools(prefix, tools)
    }
}
