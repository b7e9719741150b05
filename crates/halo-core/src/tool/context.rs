//! [`ToolContext`]: what every tool call and every tool hook is given besides the arguments.

use std::sync::Arc;

use super::{ToolAnnotations, ToolRegistry};
use crate::agent::HaloAgent;
use crate::cancel::CancelToken;
use crate::delegate::AgentHandle;
use crate::inner::{EventSink, Tap};
use crate::message::ToolCall;

/// One tool call as the tool and the hooks around it see it: the call (its id, name and raw
/// arguments), the tool's [`ToolAnnotations`], the run's [`CancelToken`], whether the call was
/// approved, the agent's tools, and — for a tool that runs the agent
/// ([`ToolAnnotations::runs_agent`]) — the [`AgentHandle`] to fork or start sub-agents with.
///
/// Cheap to clone. A call made outside an agent (a [`Toolbox`](crate::Toolbox) on its own, a
/// test) gets a [`detached`](Self::detached) context: no agent, a token nobody cancels.
#[derive(Clone)]
pub struct ToolContext {
    call: ToolCall,
    annotations: ToolAnnotations,
    cancel: CancelToken,
    approved: bool,
    tools: Option<Arc<ToolRegistry>>,
    agent: Option<AgentHandle>,
    events: Option<EventSink>,
    depth: usize,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("call", &self.call)
            .field("annotations", &self.annotations)
            .field("approved", &self.approved)
            .field("agent", &self.agent.is_some())
            .field("events", &self.events.is_some())
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// The context of `call` outside any agent: default annotations, not approved, no tools
    /// listed, no agent, a cancel token of its own.
    pub fn detached(call: ToolCall) -> Self {
        ToolContext {
            call,
            annotations: ToolAnnotations::default(),
            cancel: CancelToken::default(),
            approved: false,
            tools: None,
            agent: None,
            events: None,
            depth: 0,
        }
    }

    pub(crate) fn new(
        call: ToolCall,
        annotations: ToolAnnotations,
        cancel: CancelToken,
        tools: Arc<ToolRegistry>,
    ) -> Self {
        ToolContext {
            call,
            annotations,
            cancel,
            approved: false,
            tools: Some(tools),
            agent: None,
            events: None,
            depth: 0,
        }
    }

    pub(crate) fn approve(mut self, approved: bool) -> Self {
        self.approved = approved;
        self
    }

    pub(crate) fn with_agent(mut self, agent: Option<AgentHandle>) -> Self {
        self.agent = agent;
        self
    }

    /// Sets where the agents this call runs send their events ([`crate::inner`]): a
    /// streamed run sets it for every call; a caller that runs a tool itself (an MCP
    /// server reporting progress) can set its own.
    #[must_use]
    pub fn with_events(mut self, events: Option<EventSink>) -> Self {
        self.events = events;
        self
    }

    pub(crate) fn at_depth(mut self, depth: usize) -> Self {
        self.depth = depth;
        self
    }

    /// How deep the calling agent is ([`HaloAgent::depth`]): 0 for an agent the
    /// application built, and outside agents.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Sets the annotations (for a detached context in a test, or a hook's own checks).
    #[must_use]
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// The call: its id, the tool's name, the arguments as the model sent them.
    pub fn call(&self) -> &ToolCall {
        &self.call
    }

    /// The tool's annotations.
    pub fn annotations(&self) -> ToolAnnotations {
        self.annotations
    }

    /// The run's cancel token: a long tool can stop early when it is cancelled (the run's
    /// future is dropped anyway; this lets work outside it stop too).
    pub fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    /// Whether someone approved this call ([`HaloAgent::approve`](crate::HaloAgent::approve)):
    /// a hook that would ask ([`ToolCallDecision::Ask`](crate::ToolCallDecision::Ask)) lets
    /// it through.
    pub fn approved(&self) -> bool {
        self.approved
    }

    /// The agent's tools (names, annotations, schemas), when the call runs in an agent or a
    /// toolbox: what a hook can name as alternatives in a denial.
    pub fn tools(&self) -> Option<&ToolRegistry> {
        self.tools.as_deref()
    }

    /// Where the agents this call runs send their events ([`crate::inner`]), when someone
    /// watches: a streamed run, or a caller that set one ([`with_events`](Self::with_events)).
    pub fn events(&self) -> Option<&EventSink> {
        self.events.as_ref()
    }

    /// Makes `agent`, which this call runs, forward its events to whoever watches the call
    /// ([`events`](Self::events)), tagged with its name (or this tool's) and its depth — one
    /// deeper than the calling agent — and stream its model calls; without a watcher, only
    /// the depth is set. Agents built from the [`AgentHandle`] (`fork`, `subagent`) and
    /// named agents ([`crate::named`]) are wired up already.
    pub fn forward_events(&self, agent: &mut HaloAgent) {
        let config = agent.config_mut();
        config.depth = self.depth + 1;
        config.tap = self
            .events
            .clone()
            .map(|sink| Tap::new(sink, &self.call.id, &self.call.name));
    }

    /// The calling agent, for a tool that runs it ([`ToolAnnotations::runs_agent`]): fork it
    /// or start a sub-agent from it ([`crate::delegate`]). `None` for other tools and outside
    /// an agent.
    pub fn agent(&self) -> Option<&AgentHandle> {
        self.agent.as_ref()
    }
}
