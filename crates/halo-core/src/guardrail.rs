//! Guardrails and step hooks: checks around a run that are not part of the prompt.
//!
//! - An [`InputGuardrail`] sees the user's message before the first model call. A rejection
//!   is [`HaloError::InputRejected`](crate::HaloError::InputRejected) and nothing is logged.
//! - An [`OutputGuardrail`] sees the final answer. It accepts it, asks for another step
//!   with feedback the model reads ([`OutputVerdict::Retry`]: the answer and the feedback
//!   enter the log), or ends the run ([`OutputVerdict::Reject`]:
//!   [`HaloError::OutputRejected`](crate::HaloError::OutputRejected), the answer not logged).
//! - Tool guardrails are the tool hooks ([`crate::hook`]).
//! - A [`StepHook`] runs before each model call ([`StepHook::prepare_step`]: restrict the
//!   active tools or change `tool_choice` for this step, without changing a byte of the
//!   prefix) and after each step ([`StepHook::on_step_finish`]).
//! - A [`LoopGuard`] looks at the run's steps at each step boundary and lets it go on, nudges
//!   the model with a user message (injected as steering is, [`crate::steering`]) or stops
//!   the run with [`HaloError::LoopDetected`](crate::HaloError::LoopDetected). Halo's
//!   implementation is `halo_strategies::LoopSuppression` (the tiers of pydantic-ai's
//!   harness: repeated call, repeated error, alternation, monologue).
//!
//! The shapes follow the OpenAI Agents SDK's guardrails
//! (<https://openai.github.io/openai-agents-python/guardrails/>) and the AI SDK's
//! `prepareStep` / `onStepFinish`
//! (<https://ai-sdk.dev/docs/agents/loop-control>).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::message::Message;
use crate::model::ToolChoice;
use crate::run::StepResult;

/// Checks the user's message before the run's first model call.
#[async_trait]
pub trait InputGuardrail: Send + Sync {
    /// The name errors show.
    fn name(&self) -> &str;

    /// `Err(reason)` rejects the message: the run ends before any model call and nothing
    /// is logged.
    async fn check(&self, input: &Message) -> Result<(), String>;
}

/// What an [`OutputGuardrail`] decides about a final answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutputVerdict {
    /// The run ends with the answer.
    Accept,
    /// The answer and this feedback (as a user message marked injected) enter the log, and
    /// the run takes another step.
    Retry(String),
    /// The run ends with [`HaloError::OutputRejected`](crate::HaloError::OutputRejected); the
    /// answer is not logged.
    Reject(String),
}

/// Checks the final answer of a run.
#[async_trait]
pub trait OutputGuardrail: Send + Sync {
    /// The name errors show.
    fn name(&self) -> &str;

    /// The verdict on `answer`.
    async fn check(&self, answer: &str) -> OutputVerdict;
}

/// What a step may change before its model call. Neither changes the prefix bytes: the
/// tools stay in the prompt, and the step restricts which the model may call through the
/// provider's allowed-tools mechanism where one exists (OpenAI `allowed_tools`, Gemini
/// `allowedFunctionNames`); a call to a tool outside the set gets an error result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepSettings {
    /// `tool_choice` for this step only.
    pub tool_choice: Option<ToolChoice>,
    /// The tools the model may call in this step (`None`: all).
    pub active_tools: Option<Vec<String>>,
}

/// What [`StepHook::prepare_step`] sees.
#[derive(Debug, Clone, Copy)]
pub struct StepContext<'a> {
    /// The step's number in this run, from 1.
    pub step: usize,
    /// This run's completed steps.
    pub steps: &'a [StepResult],
    /// The history the call will carry.
    pub history: &'a [Message],
}

/// Runs around each step of a run.
#[async_trait]
pub trait StepHook: Send + Sync {
    /// Settings for the step about to call the model (default: none).
    async fn prepare_step(&self, context: StepContext<'_>) -> StepSettings {
        let _ = context;
        StepSettings::default()
    }

    /// Sees each step once it is logged.
    async fn on_step_finish(&self, step: &StepResult) {
        let _ = step;
    }
}

/// What [`LoopGuard::check`] sees, at a step boundary before the next model call.
#[derive(Debug, Clone, Copy)]
pub struct LoopContext<'a> {
    /// This run's completed steps, oldest first; the last one is new since the previous
    /// check.
    pub steps: &'a [StepResult],
    /// Nudges this guard's verdicts gave in this run so far.
    pub nudges: usize,
}

/// The kind of loop a [`LoopGuard`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LoopKind {
    /// The same tool call (name and canonical arguments) again and again.
    RepeatedCall,
    /// The same error result again and again.
    RepeatedError,
    /// Calls alternating in a cycle: A-B-A-B or A-B-C-A-B-C.
    Alternation,
    /// Steps without tool calls that are not accepted as the answer.
    Monologue,
}

impl std::fmt::Display for LoopKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LoopKind::RepeatedCall => "repeated call",
            LoopKind::RepeatedError => "repeated error",
            LoopKind::Alternation => "alternation",
            LoopKind::Monologue => "monologue",
        })
    }
}

/// What a [`LoopGuard`] decides at a step boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopVerdict {
    /// No loop: the run goes on.
    Continue,
    /// The run goes on, with this user message injected before the next model call (marked
    /// injected in the log, an [`AgentEvent::Injected`](crate::AgentEvent::Injected)).
    Nudge(String),
    /// The run ends with [`HaloError::LoopDetected`](crate::HaloError::LoopDetected); the log
    /// keeps every completed step.
    Stop {
        /// The loop found.
        kind: LoopKind,
        /// What happened, for the error's message (lowercase, no trailing period).
        message: String,
    },
}

/// Watches a run for loops. Pure and synchronous: it plans a verdict from the steps and
/// changes nothing itself; the run engine injects the nudge or ends the run.
///
/// Checked once per completed step, at the boundary before the next model call, in every
/// kind of run. A run continued after a pause (the caller's results, approvals) starts its
/// count of steps anew, so a manual-mode run ([`send`](crate::HaloAgent::send)), which
/// pauses at every step, holds one step and a guard sees too little to judge.
pub trait LoopGuard: Send + Sync {
    /// The verdict on the run so far.
    fn check(&self, context: LoopContext<'_>) -> LoopVerdict;
}
