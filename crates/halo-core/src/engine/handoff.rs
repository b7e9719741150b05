//! Handoffs in the run ([`crate::handoff`]): a handoff tool's result checked, the handoff
//! made when its step commits, and the receiving agent's history filter applied at the next
//! step boundary.

use crate::agent::Config;
use crate::message::ToolResult;
use crate::run::{AgentEvent, HistoryRewrite, RewriteKind};
use crate::session::JournalEvent;

use super::{Phase, RunState};

impl RunState {
    /// A handoff tool's result stays a handoff only when its target is among the agent's
    /// peers and no other result of the step made one; else it becomes an error result that
    /// says so ([`crate::handoff`]).
    pub(super) fn check_handoff(&self, result: &mut ToolResult, config: &Config) {
        if result.is_error {
            return;
        }
        let Some(target) = config.handoff_target(&result.tool_name) else {
            return;
        };
        let earlier = match &self.phase {
            Phase::Tools { step } => step
                .results
                .iter()
                .flatten()
                .filter(|r| !r.is_error)
                .find_map(|r| config.handoff_target(&r.tool_name)),
            _ => None,
        };
        let refusal = if let Some(earlier) = earlier {
            format!(
                "only one handoff per turn takes effect: the conversation was already handed \
                 to {earlier}"
            )
        } else if !config.reachable.contains(target) {
            format!(
                "no agent named `{target}` can take the conversation here; go on with the task \
                 yourself"
            )
        } else {
            return;
        };
        result.content = refusal.into();
        result.is_error = true;
    }

    /// The conversation goes to the agent `to` from the next step on: recorded, reported
    /// and journaled; the agent swaps in `to`'s configuration, and `to`'s history filter
    /// is applied at the next step boundary.
    pub(super) fn hand_off(&mut self, to: String, at_ms: u64) {
        let from = self.agent.replace(to.clone());
        tracing::info!(
            "halo.handoff.to" = to.as_str(),
            "the conversation was handed to another agent: expect one prompt-cache miss"
        );
        self.handed_off = true;
        self.push_journal(JournalEvent::Handoff {
            from: from.clone(),
            to: to.clone(),
            at_ms,
        });
        self.push_event(AgentEvent::Handoff { from, to });
    }

    /// At the first step boundary after a handoff: the receiving agent's history filter, if
    /// it has one, applied to the log, journaled as a boundary record and reported. The
    /// prefix changes with the handoff anyway, so the ledger counts the next call as the
    /// one expected miss whatever the filter did.
    pub(super) fn receive_handoff(&mut self, config: &Config, at_ms: u64) {
        if !std::mem::take(&mut self.handed_off) {
            return;
        }
        let Some(filter) = &config.handoff_filter else {
            return;
        };
        let before = self.log.to_vec();
        let after = filter.filter(&before);
        if after == before {
            return;
        }
        let to = self.agent.clone().unwrap_or_default();
        let description = format!(
            "the history handed to {to} was filtered: {} of {} messages kept",
            after.len(),
            before.len()
        );
        self.log.reset_to(after.clone(), &[], &[]);
        self.rewrite_planned = true;
        self.push_journal(JournalEvent::CompactBoundary {
            history: after.clone(),
            injected: Vec::new(),
            discardable: Vec::new(),
            reason: Some(description.clone()),
            at_ms,
        });
        self.push_event(AgentEvent::HistoryRewritten(Box::new(HistoryRewrite {
            kind: RewriteKind::Handoff,
            messages_before: before.len(),
            messages_after: after.len(),
            description,
        })));
    }
}
