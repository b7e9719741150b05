//! Events from inside: the steps, tool calls and text of the agents a tool runs — a fork
//! (a plan's steps), a sub-agent, a named agent ([`crate::named`]), a workflow step —
//! forwarded to whoever watches the calling run, each tagged with the inner agent's name and
//! depth ([`InnerEvent`]).
//!
//! # How they travel
//! A streamed run ([`HaloAgent::stream_text`](crate::HaloAgent::stream_text),
//! [`resume_stream`](crate::HaloAgent::resume_stream)) opens an [`EventSink`] for the tool
//! calls of its steps; every call's [`ToolContext`](crate::ToolContext) carries it
//! ([`ToolContext::events`](crate::ToolContext::events)). An agent a tool builds from its
//! [`AgentHandle`](crate::AgentHandle) ([`fork`](crate::AgentHandle::fork),
//! [`subagent`](crate::AgentHandle::subagent)), a named agent, or any agent given to
//! [`ToolContext::forward_events`](crate::ToolContext::forward_events) then sends each of
//! its own events (all but its `Finish`: the call's tool result follows) into the sink as
//! an [`AgentEvent::Inner`], and the calling run hands them out among its own events,
//! before the call's [`AgentEvent::ToolResult`]. Such an inner agent streams its model
//! calls, so its text arrives as deltas, and its own tool calls' inner agents reach it the
//! same way: a grandchild's event arrives wrapped twice, outermost the child's tag
//! ([`InnerEvent::innermost`] unwraps it).
//!
//! A run that is not streamed ([`generate_text`](crate::HaloAgent::generate_text)) opens no
//! sink: nobody watches, and inner agents run as they always did. Nothing here enters a
//! history, a prefix or a journal: what the caller's log gets of an inner agent is its tool
//! result.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use futures::channel::mpsc;
use serde::Serialize;

use crate::run::AgentEvent;

/// An event of an agent a tool runs, as the calling run hands it out
/// ([`AgentEvent::Inner`]). Serializes with the event inline:
/// `{"type":"inner","agent":"researcher","depth":1,"call_id":"call_1","event":{"type":"text_delta","delta":"Otters"}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InnerEvent {
    /// The inner agent's name ([`HaloAgentBuilder::name`](crate::HaloAgentBuilder::name)),
    /// or, when it has none, the name of the tool that runs it (`plan`, `subagent`).
    pub agent: String,
    /// How deep the inner agent is ([`HaloAgent::depth`](crate::HaloAgent::depth)): 1 for
    /// an agent a top-level agent's tool runs.
    pub depth: usize,
    /// The id of the calling run's tool call that runs the inner agent.
    pub call_id: String,
    /// The inner agent's event (itself an [`AgentEvent::Inner`] for a deeper agent's).
    pub event: AgentEvent,
}

impl InnerEvent {
    /// The event as the agent that produced it sent it: this one, or for an event passed up
    /// from deeper agents, the innermost wrapper.
    pub fn innermost(&self) -> &InnerEvent {
        let mut event = self;
        while let AgentEvent::Inner(inner) = &event.event {
            event = inner;
        }
        event
    }
}

/// Where inner agents' events go: the sending half of an unbounded channel. Cheap to clone;
/// sending never blocks, and sending into a channel whose [`EventReceiver`] is gone drops
/// the event.
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: mpsc::UnboundedSender<AgentEvent>,
}

/// The receiving half of an [`EventSink`]'s channel: a [`Stream`] of the events sent, in
/// order, which ends once every sink is dropped.
#[derive(Debug)]
pub struct EventReceiver {
    rx: mpsc::UnboundedReceiver<AgentEvent>,
}

impl EventSink {
    /// A new channel.
    pub fn channel() -> (EventSink, EventReceiver) {
        let (tx, rx) = mpsc::unbounded();
        (EventSink { tx }, EventReceiver { rx })
    }

    /// Sends `event`; returns whether a receiver still listens.
    pub fn send(&self, event: AgentEvent) -> bool {
        self.tx.unbounded_send(event).is_ok()
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl EventReceiver {
    /// The next event already sent, without waiting; `None` when there is none yet (or the
    /// channel ended).
    pub fn try_next(&mut self) -> Option<AgentEvent> {
        self.rx.try_recv().ok()
    }
}

impl Stream for EventReceiver {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        Pin::new(&mut self.rx).poll_next(cx)
    }
}

/// Where an inner agent forwards its events: the calling run's sink, the call that runs
/// the agent, and the name to tag them with when the agent has none.
#[derive(Debug, Clone)]
pub(crate) struct Tap {
    pub(crate) sink: EventSink,
    pub(crate) call_id: String,
    /// The tool that runs the agent: the tag of an agent without a name.
    pub(crate) tool: String,
}

impl Tap {
    pub(crate) fn new(sink: EventSink, call_id: &str, tool: &str) -> Self {
        Tap {
            sink,
            call_id: call_id.to_string(),
            tool: tool.to_string(),
        }
    }

    /// Sends `event` of the agent `name` at `depth`, tagged; a `Finish` is not sent (the
    /// call's tool result follows it).
    pub(crate) fn forward(&self, name: Option<&str>, depth: usize, event: &AgentEvent) {
        if matches!(event, AgentEvent::Finish(_)) || self.sink.is_closed() {
            return;
        }
        self.sink.send(AgentEvent::Inner(Box::new(InnerEvent {
            agent: name.unwrap_or(&self.tool).to_string(),
            depth,
            call_id: self.call_id.clone(),
            event: event.clone(),
        })));
    }
}
