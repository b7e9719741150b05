//! Handoffs: an agent hands the conversation to another named agent, which continues it
//! with its own prefix, tools and model (the OpenAI Agents SDK's handoffs, a swarm).
//!
//! # Declaring them
//! Each agent has a name ([`HaloAgentBuilder::name`]); [`HaloAgentBuilder::handoff`] gives
//! an agent the tool `transfer_to_<name>` ([`Handoff::tool_name`]) for each agent it may
//! hand to, and [`HaloAgent::with_peers`] puts the agents together: the agent it is called
//! on starts the conversation, and every handoff target must be one of them.
//!
//! ```
//! use halo_core::{AgentEvent, HaloAgent, handoff::Handoff, testing::ScriptedModel};
//! use serde_json::json;
//!
//! # futures::executor::block_on(async {
//! let model = ScriptedModel::new()
//!     .tool_call("transfer_to_billing", json!({})) // triage hands over
//!     .text("Your refund is on its way.");          // billing answers
//! let triage = HaloAgent::builder(model.clone())
//!     .name("triage")
//!     .system("You route customers.")
//!     .handoff(Handoff::to("billing").description("Refunds and invoices."))
//!     .unwrap()
//!     .build();
//! let billing = HaloAgent::builder(model.clone())
//!     .name("billing")
//!     .system("You handle refunds.")
//!     .build();
//! let mut agent = triage.with_peers([billing]).unwrap();
//! let out = agent.generate_text("I was charged twice.").await.unwrap();
//! assert_eq!(out.agent.as_deref(), Some("billing")); // who answered
//! assert_eq!(out.steps[0].agent.as_deref(), Some("triage"));
//! let requests = model.requests();
//! assert_ne!(requests[0].fingerprint, requests[1].fingerprint); // billing's own prefix
//! assert_eq!(requests[1].history.len(), 3); // the question, the transfer call, its result
//! assert_eq!(agent.name(), Some("billing")); // the next turn goes to billing too
//! # });
//! ```
//!
//! # What happens
//! A call of `transfer_to_<name>` gets the result "the conversation was handed to NAME"
//! and, when its step commits, the run state records the handoff ([`AgentEvent::Handoff`],
//! a [`JournalEvent::Handoff`] in the session journal). From the next step on the run is
//! the other agent's: the agent swaps in its configuration — prefix, tools and hooks,
//! model, options, limits, strategies — and the history goes on (through the receiving
//! agent's [`HistoryFilter`], when it has one). Its first request carries another prefix:
//! the one planned cache miss, which the [`CacheLedger`](crate::CacheLedger) counts as
//! expected ([`CacheVerdict::ExpectedMiss`](crate::CacheVerdict::ExpectedMiss)), once per
//! handoff, never as a bust. The run's result names the agent that answered
//! ([`GenerateTextResult::agent`](crate::GenerateTextResult::agent)), each step the agent that
//! made it, and the next run starts with that agent. Which agent's turn it is is part of
//! the run state, so a restored run (from the [`RunState`](crate::RunState) or the
//! journal) continues with it.
//!
//! The steps of a run count towards the step limit whoever made them, and a loop guard
//! sees them all: agents handing the conversation back and forth
//! (`transfer_to_b`, `transfer_to_a`, ...) are an alternation of calls, which
//! halo-strategies' `LoopSuppression` nudges and then stops. A peer without a loop guard
//! of its own takes the starting agent's ([`HaloAgent::with_peers`]).
//!
//! Only one handoff per step takes effect: a second `transfer_to_` result of the same step
//! becomes an error result that says where the conversation went. A handoff to an agent
//! that is not among the peers (an agent used without [`HaloAgent::with_peers`], a fork, a
//! sub-agent) is refused the same way, and the agent goes on.
//!
//! [`HaloAgentBuilder::name`]: crate::HaloAgentBuilder::name
//! [`HaloAgentBuilder::handoff`]: crate::HaloAgentBuilder::handoff
//! [`HaloAgent::with_peers`]: crate::HaloAgent::with_peers
//! [`AgentEvent::Handoff`]: crate::AgentEvent::Handoff
//! [`JournalEvent::Handoff`]: crate::JournalEvent::Handoff

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::agent::HaloAgent;
use crate::error::HaloError;
use crate::message::{AssistantMessage, Message};
use crate::prefix::ToolSpec;
use crate::tool::{DynTool, ToolAnnotations, ToolContext, ToolError, ToolOutput};

/// The prefix of every handoff tool's name: `transfer_to_<agent>`.
pub const TRANSFER_PREFIX: &str = "transfer_to_";

/// A handoff an agent may make: to the agent named `target`, through the tool
/// `transfer_to_<target>` ([`HaloAgentBuilder::handoff`](crate::HaloAgentBuilder::handoff)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    target: String,
    description: Option<String>,
}

impl Handoff {
    /// A handoff to the agent named `target`.
    pub fn to(target: impl Into<String>) -> Self {
        Handoff {
            target: target.into(),
            description: None,
        }
    }

    /// What the target agent is for, in the tool's description (the model reads it to
    /// decide when to hand over).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The target agent's name.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The tool's name: `transfer_to_<target>`.
    pub fn tool_name(&self) -> String {
        format!("{TRANSFER_PREFIX}{}", self.target)
    }

    /// The tool that makes this handoff.
    pub(crate) fn tool(&self) -> HandoffTool {
        HandoffTool {
            spec: self.spec(),
            target: self.target.clone(),
        }
    }

    fn spec(&self) -> ToolSpec {
        let mut description = format!(
            "Hands the conversation to the agent `{}`, which continues it with its own \
             instructions and tools; call it alone when the request is that agent's to answer.",
            self.target
        );
        if let Some(what) = &self.description {
            description.push(' ');
            description.push_str(what.trim());
        }
        ToolSpec::new(
            self.tool_name(),
            description,
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }
}

/// The text of a handoff tool's result.
pub(crate) fn handed_to(target: &str) -> String {
    format!("the conversation was handed to {target}")
}

/// The `transfer_to_<target>` tool: its result says the conversation was handed over; the
/// run engine makes the handoff when the step commits.
#[derive(Debug, Clone)]
pub(crate) struct HandoffTool {
    spec: ToolSpec,
    target: String,
}

#[async_trait::async_trait]
impl DynTool for HandoffTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn annotations(&self) -> ToolAnnotations {
        // It changes nothing outside the run: a read in every permission preset.
        ToolAnnotations::READ_ONLY
    }

    async fn call_json(&self, _args: Value, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(handed_to(&self.target)))
    }
}

/// What the agent receiving a handoff keeps of the history: given the whole history (the
/// handoff's step included), the messages to continue with. Pure and synchronous, as the
/// context strategies are. Whatever it returns, requests stay valid ([`crate::request`]:
/// orphan results and dangling calls are dropped or closed).
///
/// Any `Fn(&[Message]) -> Vec<Message>` is one; [`without_tool_calls`] is a ready one.
pub trait HistoryFilter: Send + Sync {
    /// The history the receiving agent continues with.
    fn filter(&self, history: &[Message]) -> Vec<Message>;
}

impl<F> HistoryFilter for F
where
    F: Fn(&[Message]) -> Vec<Message> + Send + Sync,
{
    fn filter(&self, history: &[Message]) -> Vec<Message> {
        self(history)
    }
}

/// A [`HistoryFilter`] that keeps the conversation and drops the tool work: user and system
/// messages, and the text of assistant turns (a turn that only called tools goes, a turn
/// with text and calls keeps its text; tool results go). The OpenAI Agents SDK's `remove_all_tools`.
pub fn without_tool_calls(history: &[Message]) -> Vec<Message> {
    history
        .iter()
        .filter_map(|m| match m {
            Message::Tool(_) => None,
            Message::Assistant(turn) if turn.tool_calls.is_empty() => Some(m.clone()),
            Message::Assistant(turn) if turn.text.trim().is_empty() => None,
            // Its reasoning went with the calls it led to.
            Message::Assistant(turn) => Some(Message::Assistant(AssistantMessage {
                text: turn.text.clone(),
                ..AssistantMessage::default()
            })),
            other => Some(other.clone()),
        })
        .collect()
}

impl HaloAgent {
    /// Swaps in the configuration of the agent the run state says it is the turn of, after
    /// a handoff ([`crate::handoff`]).
    pub(crate) fn follow_handoff(&mut self) {
        let Some(want) = self.run_state().agent() else {
            return;
        };
        if self.config().name.as_deref() == Some(want) {
            return;
        }
        let want = want.to_string();
        let Some(mut next) = self.peers.remove(&want) else {
            return;
        };
        let config = self.config_mut();
        // What the caller set at run time goes along: a tap, the depth.
        next.tap = config.tap.take();
        next.depth = config.depth;
        std::mem::swap(config, &mut next);
        if let Some(name) = next.name.clone() {
            self.peers.insert(name, next);
        }
    }

    /// Puts this agent together with the agents its handoffs reach (and theirs reach):
    /// `peers`, each with a name. This agent starts the conversation; a handoff hands the
    /// rest of the run, and the next runs, to another ([`crate::handoff`]). A peer without
    /// a loop guard gets this agent's. Only the peers' configurations are kept: their
    /// histories, session stores and peers are not.
    ///
    /// # Errors
    /// [`HaloError::InvalidAgents`] when this agent or a peer has no name, two agents share
    /// one, or a handoff names an agent that is not among them.
    pub fn with_peers(
        mut self,
        peers: impl IntoIterator<Item = HaloAgent>,
    ) -> Result<HaloAgent, HaloError> {
        let invalid = |message: String| HaloError::InvalidAgents { message };
        let Some(home) = self.config().name.clone() else {
            return Err(invalid(
                "the agent that starts the conversation has no name; give it one with \
                 `HaloAgentBuilder::name`"
                    .into(),
            ));
        };
        let mut configs = std::mem::take(&mut self.peers);
        for peer in peers {
            let (config, theirs) = peer.template();
            for (name, c) in std::iter::once((config.name.clone(), config))
                .chain(theirs.into_iter().map(|(n, c)| (Some(n), c)))
            {
                let Some(name) = name else {
                    return Err(invalid(
                        "a peer has no name; give each agent one with `HaloAgentBuilder::name`"
                            .into(),
                    ));
                };
                if name == home || configs.contains_key(&name) {
                    return Err(invalid(format!("two agents are named `{name}`")));
                }
                configs.insert(name, c);
            }
        }
        let names: BTreeSet<String> = configs
            .keys()
            .cloned()
            .chain(std::iter::once(home.clone()))
            .collect();
        for config in configs.values().chain(std::iter::once(self.config())) {
            let from = config.name.as_deref().unwrap_or_default();
            if let Some(target) = config.handoffs.values().find(|t| !names.contains(*t)) {
                return Err(invalid(format!(
                    "`{from}` hands off to `{target}`, which is not among the agents ({})",
                    names.iter().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
        }
        let reachable = Arc::new(names);
        let loops = self.config().guards.loops.clone();
        for config in configs.values_mut() {
            config.reachable = reachable.clone();
            if config.guards.loops.is_none() {
                config.guards.loops = loops.clone();
            }
        }
        self.config_mut().reachable = reachable;
        self.peers = configs;
        Ok(self)
    }

    /// The name of the agent whose turn it is: this agent's
    /// ([`HaloAgentBuilder::name`](crate::HaloAgentBuilder::name)), or after a handoff the
    /// agent it handed to.
    pub fn name(&self) -> Option<&str> {
        self.run_state().agent().or(self.config().name.as_deref())
    }

    /// The names of the agents a handoff may reach ([`HaloAgent::with_peers`]), sorted.
    pub fn peer_names(&self) -> Vec<&str> {
        self.config().reachable.iter().map(String::as_str).collect()
    }
}
