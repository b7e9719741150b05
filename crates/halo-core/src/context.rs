//! The context seam: keeping a session inside the model's context window without churning
//! the prompt cache.
//!
//! Before each model call the engine asks the agent's [`ContextStrategy`] for a
//! [`ContextPlan`] — given the prefix, the log and a [`ContextBudget`] — and applies it
//! between steps (the run engine, [`crate::engine`]), never inside one, never touching the
//! prefix. The plan says which whole messages to drop, which
//! to replace in place (an evicted tool result, say) and where to insert a summary. Every
//! change to the head of the history costs a prompt-cache miss on everything after it, so a
//! good strategy rewrites rarely and in chunks (high- and low-water marks); the engine tells
//! the [`CacheLedger`](crate::CacheLedger) about each rewrite before the request goes out, so
//! the ledger counts it as the one expected miss, and a change nobody planned (the log's ring
//! buffer evicting, a hand edit) as a bust.
//!
//! The strategies themselves live in `halo-strategies`; this module is the seam:
//! [`ContextStrategy`] (pure and synchronous), [`ContextBudget`] (the window, the tokens in
//! use and how to estimate more) and [`TokenEstimator`] (a local token count, calibrated
//! against the provider's reports).
//!
//! Tokens in use are estimated as the local estimate of the request times a
//! calibration factor `max(1, reported / estimated)` from the last call (the provider's
//! `input_tokens`, cached tokens included once), so thresholds only ever move up when the
//! local count is low.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use crate::log::MessageLog;
use crate::message::Message;
use crate::model::{ModelError, ModelRequest, ModelResponse, SharedModel};
use crate::prefix::StablePrefix;
use async_trait::async_trait;

/// Counts tokens locally, for the [`ContextBudget`]. Calibrated against the provider's
/// reported input tokens, so a rough count that runs low is corrected upward.
pub trait TokenEstimator: Send + Sync + fmt::Debug {
    /// About how many tokens `text` is.
    fn estimate(&self, text: &str) -> u64;
}

/// The estimate of last resort: one token per 4 bytes, rounded up (English prose runs about
/// 4 characters per token in GPT and Claude tokenizers; code and JSON run denser, which the
/// calibration factor corrects).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BytesEstimator;

impl TokenEstimator for BytesEstimator {
    fn estimate(&self, text: &str) -> u64 {
        (text.len() as u64).div_ceil(4)
    }
}

/// About how many tokens `message` is, by `estimator` over its JSON form (text, tool calls
/// and their arguments, tool results), plus 4 for the role and framing.
pub fn message_tokens(estimator: &dyn TokenEstimator, message: &Message) -> u64 {
    let json = serde_json::to_string(message).unwrap_or_default();
    estimator.estimate(&json) + 4
}

/// How full the context is before a model call, for a [`ContextStrategy`].
#[derive(Debug, Clone, Copy)]
pub struct ContextBudget<'a> {
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// The tokens the request would use as the log stands (prefix and history), calibrated.
    pub used_tokens: u64,
    /// The calibration factor, at least 1: the last call's reported input tokens over the
    /// local estimate of that request.
    pub calibration: f64,
    /// The local token count behind the estimates.
    pub estimator: &'a dyn TokenEstimator,
}

impl ContextBudget<'_> {
    /// `used_tokens` as a share of the window (0.0 to, when over, above 1.0).
    pub fn usage(&self) -> f64 {
        self.used_tokens as f64 / self.context_window.max(1) as f64
    }

    /// The calibrated tokens of one message.
    pub fn tokens(&self, message: &Message) -> u64 {
        (message_tokens(self.estimator, message) as f64 * self.calibration).ceil() as u64
    }

    /// `share` of the window, in tokens.
    pub fn of_window(&self, share: f64) -> u64 {
        (self.context_window as f64 * share) as u64
    }
}

/// What a [`ContextStrategy`] wants done to the history before the next model call. Indices
/// are into the log as it stands ([`MessageLog::messages`]). The engine applies a plan
/// whole or, where it breaks a rule, not at all (with a warning): it never drops or replaces
/// a message of the live tool round (from the last assistant message on, whose results the
/// model has not seen), a replacement keeps the message's role (a tool result stays the
/// result of the same call), and a call and its results are dropped together or not at all
/// (a partial unit is widened to the whole unit by [`MessageLog::retain`]'s pairing repair).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextPlan {
    /// Messages to drop.
    pub drop: BTreeSet<usize>,
    /// Messages to replace in place, with their replacements.
    pub replace: Vec<(usize, Message)>,
    /// A message (a summary) to insert before the message at this index, after the drops
    /// and replacements, counted in the log as it stands.
    pub insert: Option<(usize, Message)>,
    /// Part of the history for the model to summarize, before the next model call. A plan
    /// with a compaction changes nothing else; see [`Compaction`].
    pub compact: Option<Compaction>,
}

/// The instruction that ends a compaction's summary request: a summary made for coding
/// sessions (what coding agents' compactions commonly keep).
pub const COMPACTION_PROMPT: &str = "The conversation so far is about to be replaced by your \
summary of it, so that the session fits the context window. Write that summary now, as plain \
text, for yourself to continue the task from: the task and what is left to do; every file path \
read or changed and what was learned or changed in it; the commands run and their results; the \
errors met and how they were resolved or not; the decisions made and why. Be specific and \
complete; do not call any tool.";

/// Who answers a compaction's summary request: the step of context management that needs a
/// model call, apart from the pure [`ContextStrategy`] that decides it. By default the agent's
/// own model answers (its summary request is then a prompt-cache hit on the session's
/// prefix and history); give the agent a [`ModelCompactor`] over another model
/// (`HaloAgentBuilder::compactor`) to summarize with a cheaper one.
#[async_trait]
pub trait Compactor: Send + Sync + fmt::Debug {
    /// Answers `request`: the prefix, the history ending with the compaction's instruction,
    /// the session's generation options. The answer's text is the summary (a tool call in it
    /// is ignored).
    ///
    /// # Errors
    /// The model's error; one that
    /// [`is_context_window_exceeded`](ModelError::is_context_window_exceeded) makes the
    /// compaction go on in halves.
    async fn summarize(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError>;
}

/// A [`Compactor`] that asks a model.
#[derive(Clone)]
pub struct ModelCompactor(pub SharedModel);

impl fmt::Debug for ModelCompactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ModelCompactor")
            .field(&self.0.model_name())
            .finish()
    }
}

#[async_trait]
impl Compactor for ModelCompactor {
    async fn summarize(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.0.generate(request).await
    }
}

/// The first line of the user message that carries a compaction's summary in the history.
pub const SUMMARY_HEADER: &str = "Summary of the earlier part of this session:";

/// A compaction ([`ContextPlan::compact`]): the model summarizes the history, and the
/// messages before `keep_from` are replaced by its summary — a user message headed
/// [`SUMMARY_HEADER`] — with the message at `task` (the user message of the task under way,
/// when it lies before `keep_from`) kept ahead of it. Keeping from the last real user message
/// gives Layer 2's "summary plus the tail from the last user message"; keeping from a later
/// unit, with `task` that user message, summarizes the older rounds of one long task.
///
/// The summary request is the agent's prefix, the history as it stands and `instruction`
/// as a last user message, with the session's generation options — its tool choice too: a
/// different one would cost the history's cache on Anthropic, whose cache a change of
/// `tool_choice` invalidates for message blocks, and on Gemini — so it is
/// itself a prompt-cache hit. The engine asks the driver for it between steps
/// ([`Effect::Summarize`](crate::driver::Effect::Summarize)). A summary request is never
/// larger than the window: when the whole history would not fit, what is summarized goes
/// in chunks (the older half, then the newer half with the first half's summary; a chunk
/// still too large is halved again, and texts too long for any chunk — a huge tool result,
/// long reasoning — are cut inside the request). When that fails too, or on any other
/// error, the messages before `keep_from` are dropped instead, as truncation would, and the
/// run says so ([`AgentEvent::HistoryRewritten`](crate::AgentEvent::HistoryRewritten), and
/// the journal's boundary record).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Compaction {
    /// The first message kept after the summary; the start of a unit, at or before the live
    /// round.
    pub keep_from: usize,
    /// A message before `keep_from` that stays, ahead of the summary: the user message of
    /// the task under way (it must be a user message).
    pub task: Option<usize>,
    /// The summary request's last user message (default [`COMPACTION_PROMPT`]).
    pub instruction: String,
}

impl ContextPlan {
    /// The plan that changes nothing.
    pub fn keep() -> Self {
        ContextPlan::default()
    }

    /// Whether the plan changes nothing.
    pub fn is_keep(&self) -> bool {
        self.drop.is_empty()
            && self.replace.is_empty()
            && self.insert.is_none()
            && self.compact.is_none()
    }
}

/// Decides, before each model call, how the history fits the context window. Pure and
/// synchronous: the same prefix, log and budget give the same plan. A strategy that needs a
/// model call (summarizing) does it in a `Compactor` between runs; this seam only plans.
pub trait ContextStrategy: Send + Sync + fmt::Debug {
    /// The plan for the history before the next model call.
    fn plan(
        &self,
        prefix: &StablePrefix,
        log: &MessageLog,
        budget: &ContextBudget<'_>,
    ) -> ContextPlan;
}

/// The window an agent's context strategy works with when neither its [`ContextConfig`] nor
/// its model names one
/// ([`ModelAdapter::context_window`](crate::ModelAdapter::context_window) is `None`):
/// 32,000 tokens, which every model the adapters know holds, and the window the strategies'
/// tests are measured on.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 32_000;

/// An agent's context settings: the strategy, the model's window and the token count.
///
/// The window is the one set here ([`new`](Self::new),
/// [`with_context_window`](Self::with_context_window)), or else the model's own, taken from
/// [`ModelAdapter::context_window`] (each adapter's per-model table) when the agent is built
/// ([`for_model`](Self::for_model)), or else [`DEFAULT_CONTEXT_WINDOW`]:
///
/// ```
/// use std::sync::Arc;
/// use halo_core::context::{ContextConfig, ContextPlan, ContextStrategy, DEFAULT_CONTEXT_WINDOW};
/// use halo_core::{HaloAgent, testing::ScriptedModel};
///
/// #[derive(Debug)]
/// struct Keep;
/// impl ContextStrategy for Keep {
///     fn plan(&self, _: &halo_core::StablePrefix, _: &halo_core::MessageLog,
///             _: &halo_core::ContextBudget<'_>) -> ContextPlan { ContextPlan::keep() }
/// }
///
/// let model = || ScriptedModel::new().with_context_window(128_000);
/// // From the model's table:
/// let agent = HaloAgent::builder(model()).context(ContextConfig::for_model(Arc::new(Keep))).build();
/// assert_eq!(agent.context_window(), Some(128_000));
/// // Set per agent, whatever the model says:
/// let config = ContextConfig::for_model(Arc::new(Keep)).with_context_window(16_000);
/// let agent = HaloAgent::builder(model()).context(config).build();
/// assert_eq!(agent.context_window(), Some(16_000));
/// // A model that names no window gets the default:
/// let agent = HaloAgent::builder(ScriptedModel::new())
///     .context(ContextConfig::for_model(Arc::new(Keep)))
///     .build();
/// assert_eq!(agent.context_window(), Some(DEFAULT_CONTEXT_WINDOW));
/// ```
///
/// [`ModelAdapter::context_window`]: crate::ModelAdapter::context_window
#[derive(Debug, Clone)]
pub struct ContextConfig {
    /// The strategy.
    pub strategy: Arc<dyn ContextStrategy>,
    /// The context window, in tokens; `None`: the model's, resolved when the agent is built
    /// (see the [type docs](Self)). An agent's config always holds `Some` once built.
    pub context_window: Option<u64>,
    /// The local token count (default [`BytesEstimator`]).
    pub estimator: Arc<dyn TokenEstimator>,
}

impl ContextConfig {
    /// `strategy` over a window of `context_window` tokens, counting with [`BytesEstimator`].
    pub fn new(strategy: Arc<dyn ContextStrategy>, context_window: u64) -> Self {
        Self::for_model(strategy).with_context_window(context_window)
    }

    /// `strategy` over the model's own window ([`ModelAdapter::context_window`], read when
    /// the agent is built; [`DEFAULT_CONTEXT_WINDOW`] when the model names none), counting
    /// with [`BytesEstimator`].
    ///
    /// [`ModelAdapter::context_window`]: crate::ModelAdapter::context_window
    pub fn for_model(strategy: Arc<dyn ContextStrategy>) -> Self {
        ContextConfig {
            strategy,
            context_window: None,
            estimator: Arc::new(BytesEstimator),
        }
    }

    /// Sets the window, in tokens, whatever the model says (a command-line flag, a smaller
    /// budget than the model allows).
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Counts tokens with `estimator` instead.
    pub fn with_estimator(mut self, estimator: Arc<dyn TokenEstimator>) -> Self {
        self.estimator = estimator;
        self
    }

    /// The window in tokens: the one set, else `model_window` (the model's
    /// [`context_window`](crate::ModelAdapter::context_window)), else
    /// [`DEFAULT_CONTEXT_WINDOW`].
    pub fn window_for(&self, model_window: Option<u64>) -> u64 {
        self.context_window
            .or(model_window)
            .unwrap_or(DEFAULT_CONTEXT_WINDOW)
    }
}

/// Where the live tool round starts: the index of the last assistant message (its results,
/// and anything injected after them, the model has not seen yet), or the log's length when
/// it holds no assistant message.
pub fn live_round_start(log: &MessageLog) -> usize {
    let n = log.len();
    log.messages()
        .enumerate()
        .filter(|(_, m)| matches!(m, Message::Assistant(_)))
        .last()
        .map_or(n, |(i, _)| i)
}

/// The log's units, in order, as index ranges: a user or system message on its own, or an
/// assistant message with the tool results that follow it (the unit a call and its results
/// are dropped as). A result without its call ahead of it is a unit of its own.
pub fn units(log: &MessageLog) -> Vec<std::ops::Range<usize>> {
    let messages: Vec<&Message> = log.messages().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let start = i;
        i += 1;
        if matches!(messages[start], Message::Assistant(_)) {
            while i < messages.len() && matches!(messages[i], Message::Tool(_)) {
                i += 1;
            }
        }
        out.push(start..i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_estimate_rounds_up() {
        assert_eq!(BytesEstimator.estimate(""), 0);
        assert_eq!(BytesEstimator.estimate("abcd"), 1);
        assert_eq!(BytesEstimator.estimate("abcde"), 2);
    }

    #[test]
    fn the_live_round_starts_at_the_last_assistant_message() {
        let mut log = MessageLog::default();
        assert_eq!(live_round_start(&log), 0);
        log.push(Message::user("task"));
        assert_eq!(live_round_start(&log), 1);
        log.push(Message::assistant("a"));
        log.push(Message::user("b"));
        assert_eq!(live_round_start(&log), 1);
    }

    #[derive(Debug)]
    struct Keep;
    impl ContextStrategy for Keep {
        fn plan(&self, _: &StablePrefix, _: &MessageLog, _: &ContextBudget<'_>) -> ContextPlan {
            ContextPlan::keep()
        }
    }

    #[test]
    fn the_window_set_wins_over_the_models_which_wins_over_the_default() {
        let set = ContextConfig::new(Arc::new(Keep), 16_000);
        assert_eq!(set.window_for(Some(128_000)), 16_000);
        assert_eq!(set.window_for(None), 16_000);
        let from_model = ContextConfig::for_model(Arc::new(Keep));
        assert_eq!(from_model.context_window, None);
        assert_eq!(from_model.window_for(Some(128_000)), 128_000);
        assert_eq!(from_model.window_for(None), DEFAULT_CONTEXT_WINDOW);
        assert_eq!(
            from_model
                .with_context_window(8_000)
                .window_for(Some(128_000)),
            8_000
        );
    }
}
