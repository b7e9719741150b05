//! A run state rebuilt from a session journal ([`crate::session`]).

use crate::log::MessageLog;
use crate::message::Message;
use crate::model::ModelResponse;
use crate::prefix::Fingerprint;
use crate::request;
use crate::session::{CallStatus, JournalEvent};

use super::{CallState, PendingStep, Phase, RunState};

impl RunState {
    /// The state of a session rebuilt from its journal: the log (every committed step, the
    /// history as the last boundary record left it), the counters, the last prefix
    /// fingerprint (so a different prefix now counts as the one expected miss), and the
    /// step that was open when the journal ended, if any — its model turn, the results it
    /// got, the calls that started, asked for approval or were approved — paused where it
    /// stood: [`resume`](crate::HaloAgent::resume) goes on with it (a call that started and
    /// has no result runs again only when safe to, and is closed as
    /// [`MAY_HAVE_RUN`](request::MAY_HAVE_RUN) otherwise), and the caller's results and
    /// decisions are accepted for it. The ledger is seeded with the last model call.
    pub fn from_journal(events: &[JournalEvent], log_capacity: usize) -> Self {
        let mut state = RunState::new(MessageLog::with_capacity(log_capacity));
        let mut prefix: Option<(Fingerprint, u64)> = None;
        // The last call: the history it carried, its input tokens and time.
        let mut last_call: Option<(Vec<Message>, Option<u64>, u64)> = None;
        let mut open: Option<PendingStep> = None;
        for event in events {
            match event {
                JournalEvent::Prefix {
                    fingerprint,
                    prefix_bytes,
                    ..
                } => prefix = Some((*fingerprint, *prefix_bytes)),
                JournalEvent::User {
                    message, injected, ..
                } => {
                    // A new turn drops a step left open.
                    open = None;
                    if *injected {
                        state.log.push_injected(message.clone());
                    } else {
                        state.log.push(message.clone());
                    }
                }
                JournalEvent::StepOpened {
                    assistant,
                    finish_reason,
                    usage,
                    at_ms,
                } => {
                    last_call = Some((state.log.to_vec(), usage.input_tokens, *at_ms));
                    let fingerprint = prefix.map_or(Fingerprint([0; 32]), |(f, _)| f);
                    open = Some(PendingStep::new(
                        ModelResponse {
                            id: None,
                            message: assistant.clone(),
                            finish_reason: finish_reason.clone(),
                            usage: *usage,
                            model: None,
                            provider: None,
                        },
                        fingerprint,
                        None,
                        None,
                    ));
                }
                JournalEvent::Call {
                    call_id, status, ..
                } => {
                    if let Some(step) = &mut open
                        && let Some(i) = step.index_of(call_id)
                    {
                        let state = match status {
                            CallStatus::Started => CallState::Started,
                            CallStatus::AwaitingApproval { reason } => CallState::Asked {
                                reason: reason.clone(),
                            },
                            CallStatus::Approved => {
                                step.approved.push(call_id.clone());
                                CallState::Approved
                            }
                        };
                        step.set_state(i, state);
                    }
                }
                JournalEvent::ToolResult { result, .. } => {
                    if let Some(step) = &mut open
                        && let Some(i) = step.index_of(&result.tool_call_id)
                    {
                        step.results[i] = Some(result.clone());
                    }
                }
                JournalEvent::Step {
                    assistant,
                    results,
                    usage,
                    at_ms,
                    ..
                } => {
                    let opened = open.take().is_some();
                    if !opened {
                        last_call = Some((state.log.to_vec(), usage.input_tokens, *at_ms));
                    }
                    state.stats.record(usage);
                    state.stats.tool_calls += results.len() as u64;
                    state.log.push_step(
                        Message::Assistant(assistant.clone()),
                        results.iter().cloned().map(Message::Tool),
                    );
                }
                // An outcome ends the run: a step still open was dropped with it.
                JournalEvent::Outcome { .. } => open = None,
                // The agent's turn after the handoff; a filter's rewrite follows as a
                // boundary record.
                JournalEvent::Handoff { to, .. } => state.agent = Some(to.clone()),
                // A boundary without a history (the reserved shape of earlier journals)
                // changes nothing.
                JournalEvent::CompactBoundary {
                    history,
                    injected,
                    discardable,
                    ..
                } if !history.is_empty() => {
                    state.log.reset_to(history.clone(), injected, discardable);
                }
                _ => {}
            }
        }
        if let Some(step) = open {
            // The model call happened: its usage counts, as it did in the process that made
            // it.
            state.stats.record(&step.response.usage);
            state.phase = Phase::Tools { step };
        }
        if let (Some((fingerprint, prefix_bytes)), Some((history, input_tokens, at_ms))) =
            (prefix, last_call)
        {
            let history = request::valid_history(&history);
            state
                .ledger
                .seed(fingerprint, prefix_bytes, &history, input_tokens, at_ms);
        }
        state.run_start = state.stats;
        state
    }
}
