//! The step in flight: the model's turn and what became of each of its tool calls.

use serde::{Deserialize, Serialize};

use crate::driver::PendingApproval;
use crate::ledger::CacheCheck;
use crate::message::{ToolCall, ToolResult};
use crate::model::ModelResponse;
use crate::prefix::Fingerprint;

/// The step in flight: the model's turn, what became of each of its tool calls, the results
/// gathered so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingStep {
    pub(super) response: ModelResponse,
    /// The prefix fingerprint the call was made with.
    pub(super) fingerprint: Fingerprint,
    /// The ledger's check of the call; `None` for a turn taken back from the log or the
    /// journal (no model call made it in this run).
    pub(super) cache: Option<CacheCheck>,
    /// One slot per tool call, in call order.
    pub(super) results: Vec<Option<ToolResult>>,
    /// One per tool call, in call order.
    #[serde(default)]
    pub(super) calls: Vec<CallState>,
    /// The tools the step may call (`None`: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) active: Option<Vec<String>>,
    /// An object run's output call whose answer waits for the output guardrails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) reviewing: Option<usize>,
    /// The ids of the calls someone approved (they stay approved once started).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) approved: Vec<String>,
}

/// What became of one tool call of the step in flight.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(crate) enum CallState {
    /// Not handed to a tool yet.
    #[default]
    Waiting,
    /// Handed to its tool; its result may not have come.
    Started,
    /// Waits for someone's approval.
    Asked {
        /// Why it needs one.
        reason: String,
    },
    /// Approved; runs next.
    Approved,
}

impl PendingStep {
    pub(super) fn new(
        response: ModelResponse,
        fingerprint: Fingerprint,
        cache: Option<CacheCheck>,
        active: Option<Vec<String>>,
    ) -> Self {
        let n = response.message.tool_calls.len();
        PendingStep {
            response,
            fingerprint,
            cache,
            results: vec![None; n],
            calls: vec![CallState::Waiting; n],
            active,
            reviewing: None,
            approved: Vec::new(),
        }
    }

    /// The model's response whose tool calls this step runs.
    pub fn response(&self) -> &ModelResponse {
        &self.response
    }

    /// The step's tool calls, in call order.
    pub fn tool_calls(&self) -> &[ToolCall] {
        &self.response.message.tool_calls
    }

    /// The calls that still have no result, in call order.
    pub fn missing(&self) -> Vec<ToolCall> {
        self.tool_calls()
            .iter()
            .zip(&self.results)
            .filter(|(_, r)| r.is_none())
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// The results so far, one slot per call.
    pub fn results(&self) -> &[Option<ToolResult>] {
        &self.results
    }

    /// The calls waiting for someone's approval.
    pub fn awaiting_approval(&self) -> Vec<PendingApproval> {
        self.tool_calls()
            .iter()
            .zip(&self.results)
            .enumerate()
            .filter_map(|(i, (call, result))| match (self.state(i), result) {
                (CallState::Asked { reason }, None) => Some(PendingApproval {
                    call: call.clone(),
                    reason: reason.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The tools the step may call (`None`: all).
    pub fn active(&self) -> Option<&[String]> {
        self.active.as_deref()
    }

    pub(super) fn state(&self, i: usize) -> &CallState {
        self.calls.get(i).unwrap_or(&CallState::Waiting)
    }

    pub(super) fn set_state(&mut self, i: usize, state: CallState) {
        if self.calls.len() < self.results.len() {
            self.calls.resize(self.results.len(), CallState::Waiting);
        }
        self.calls[i] = state;
    }

    pub(super) fn index_of(&self, call_id: &str) -> Option<usize> {
        self.tool_calls().iter().position(|c| c.id == call_id)
    }

    pub(super) fn complete(&self) -> bool {
        self.results.iter().all(Option::is_some)
    }

    /// Whether every call but call `i` has its result (so `i`'s completes the step).
    pub(super) fn complete_but(&self, i: usize) -> bool {
        self.results
            .iter()
            .enumerate()
            .all(|(j, r)| j == i || r.is_some())
    }
}
