//! A step boundary: the step limit, the loop guard, a handoff's history filter, steering,
//! tool sources, then the model call planned — the prefix fact journaled, the ledger's prediction, the options.

use crate::agent::Config;
use crate::driver::{ModelCall, RunKind};
use crate::guardrail::{LoopContext, LoopVerdict, StepSettings};
use crate::ledger::LogKey;
use crate::message::Message;
use crate::prefix::StablePrefix;
use crate::run::AgentEvent;
use crate::session::JournalEvent;

use super::{Failure, Phase, RunState, Stage};

/// Steps a run makes room for at its first step (at most its step limit).
const STEPS_ROOM: usize = 64;

impl RunState {
    /// A step boundary's first decisions: the step limit, the loop guard, a handoff's
    /// history filter, the steering messages (and a nudge) into the log, changed tool
    /// sources into the prefix.
    pub(super) fn open_boundary(&mut self, config: &mut Config, at_ms: u64) {
        let max_steps = config.limits.max_steps;
        if self.steps.len() >= max_steps {
            self.fail(Failure::MaxSteps { max_steps }, at_ms);
            return;
        }
        if self.steps.capacity() == 0 {
            // Room for the run's steps at once, not a copy of them at 4, 8 and 16; and for
            // their messages in the log (a call and its result a step, and the answer).
            let steps = max_steps.min(STEPS_ROOM);
            self.steps.reserve(steps);
            self.log.reserve(2 * steps + 1);
        }
        let mut nudge = None;
        if self.steps.len() > self.loops.checked {
            self.loops.checked = self.steps.len();
            if let Some(guard) = &config.guards.loops {
                let verdict = guard.check(LoopContext {
                    steps: &self.steps,
                    nudges: self.loops.nudges,
                });
                match verdict {
                    LoopVerdict::Continue => {}
                    LoopVerdict::Nudge(text) => {
                        self.loops.nudges += 1;
                        tracing::info!(
                            "halo.loop.nudges" = self.loops.nudges,
                            "a loop guard nudged the model"
                        );
                        nudge = Some(text);
                    }
                    LoopVerdict::Stop { kind, message } => {
                        tracing::warn!("halo.loop.kind" = %kind, "a loop guard stopped the run: {message}");
                        self.fail(Failure::Loop { kind, message }, at_ms);
                        return;
                    }
                }
            }
        }
        if self.agent.is_none() {
            self.agent = config.name.clone();
        }
        self.push_event(AgentEvent::StepStart {
            step: self.steps.len() + 1,
        });
        self.receive_handoff(config, at_ms);
        let mut injected = std::mem::take(&mut self.steering);
        injected.extend(nudge);
        for text in injected {
            let message = Message::user(text.clone());
            self.push_journal(JournalEvent::User {
                message: message.clone(),
                injected: true,
                at_ms,
            });
            self.log.push_injected(message);
            self.push_event(AgentEvent::Injected(text));
        }
        // Tool sources whose tools changed: swapped in here, between steps, so the prefix
        // of a request never changes mid-step. An object run keeps the prefix it began with.
        if !matches!(self.kind, RunKind::Object(_)) {
            config.tools.refresh_sources(&mut config.prefix);
        }
        self.phase = Phase::Boundary {
            stage: if config.guards.step.is_empty() {
                Stage::Ready {
                    settings: StepSettings::default(),
                    planned: false,
                }
            } else {
                Stage::Settings
            },
        };
    }

    /// The prefix the run's requests carry: an object run's own (tool mode), else the
    /// agent's.
    pub(super) fn prefix<'a>(&'a self, config: &'a Config) -> (&'a StablePrefix, bool) {
        match &self.kind {
            RunKind::Object(spec) => match spec.prefix() {
                Some(own) => (own, true),
                None => (&config.prefix, false),
            },
            _ => (&config.prefix, false),
        }
    }

    /// The model call of the step: the history checked, the prefix fact journaled, the
    /// ledger's prediction, the options.
    pub(super) fn plan_model_call(&mut self, config: &Config, at_ms: u64) {
        let Phase::Boundary {
            stage: Stage::Ready { settings, .. },
        } = std::mem::take(&mut self.phase)
        else {
            return;
        };
        if let RunKind::Object(spec) = &mut self.kind {
            spec.refresh_prefix(&config.prefix);
        }
        self.check_history();
        let (prefix, object_prefix) = self.prefix(config);
        let fingerprint = prefix.fingerprint();
        let previous = self.ledger.previous_fingerprint();
        let journal_prefix = (previous != Some(fingerprint)).then(|| {
            if previous.is_some() {
                tracing::info!(
                    "halo.prefix.fingerprint" = %fingerprint,
                    "the stable prefix changed: expect one prompt-cache miss"
                );
            }
            JournalEvent::Prefix {
                fingerprint,
                prefix_bytes: prefix.canonical_bytes().len() as u64,
                at_ms,
            }
        });
        let key = self.valid.then(|| LogKey::of(&self.log));
        let rewrite_planned = self.rewrite_planned;
        let history = self.history();
        let planned = self.ledger.plan(prefix, &history, key, rewrite_planned);
        drop(history);
        let options = self.call_options(config, &settings);
        let call = ModelCall::new(self.steps.len() + 1, options, object_prefix);
        if let Some(event) = journal_prefix {
            self.push_journal(event);
        }
        self.rewrite_planned = false;
        self.phase = Phase::AwaitingModel {
            planned,
            call,
            settings,
        };
    }

    /// The options of a call, when they differ from the agent's.
    pub(super) fn call_options(
        &self,
        config: &Config,
        settings: &StepSettings,
    ) -> Option<crate::model::GenerationOptions> {
        let spec = match &self.kind {
            RunKind::Object(spec) => Some(spec),
            _ => None,
        };
        if settings.tool_choice.is_none() && settings.active_tools.is_none() && spec.is_none() {
            return None;
        }
        let mut options = config.options.clone();
        if let Some(choice) = &settings.tool_choice {
            options.tool_choice = choice.clone();
        }
        if let Some(active) = &settings.active_tools {
            options.active_tools = Some(active.clone());
        }
        Some(match spec {
            Some(spec) => spec.options(options, settings),
            None => options,
        })
    }
}
