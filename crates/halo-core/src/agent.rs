//! [`HaloAgent`]: a model, a stable prefix, tools, hooks and guardrails around one run
//! engine state ([`RunState`]).
//!
//! The agent is a facade: the run is a value ([`crate::engine`]), the drivers that run it —
//! [`generate_text`](HaloAgent::generate_text), [`stream_text`](HaloAgent::stream_text),
//! [`resume`](HaloAgent::resume), the manual [`send`](HaloAgent::send) /
//! [`submit_tool_result`](HaloAgent::submit_tool_result) and
//! `generate_object` — live in `drive.rs` and `output.rs`,
//! tool dispatch in `dispatch.rs`, tracing in `telemetry.rs`.

use std::sync::Arc;

use crate::cancel::CancelToken;
use crate::clock::{Clock, SystemClock};
use crate::context::{Compactor, ContextConfig};
use crate::delegate::AgentTool;
use crate::dispatch::Toolbox;
use crate::engine::RunState;
use crate::error::HaloError;
use crate::guardrail::{InputGuardrail, LoopGuard, OutputGuardrail, StepHook};
use crate::hook::ToolHook;
use crate::ledger::CacheLedger;
use crate::log::{DEFAULT_LOG_CAPACITY, MessageLog};
use crate::message::Message;
use crate::model::{GenerationOptions, ModelAdapter, SharedModel};
use crate::prefix::{SkillMeta, StablePrefix, ToolSpec};
use crate::repair::RepairStrategy;
use crate::session::SessionStore;
use crate::stats::AgentStats;
use crate::steering::SteeringHandle;
use crate::tool::{DynTool, ToolRegistry, ToolSource};
use crate::zones::PromptZones;

/// Default limit on model calls per run: 20.
pub const DEFAULT_MAX_STEPS: usize = 20;

/// Builds a [`HaloAgent`].
pub struct HaloAgentBuilder {
    model: SharedModel,
    pub(crate) prefix: StablePrefix,
    pub(crate) tools: Toolbox,
    options: GenerationOptions,
    max_steps: usize,
    log_capacity: usize,
    session_id: Option<String>,
    pub(crate) guards: Guards,
    clock: Arc<dyn Clock>,
    store: Option<Arc<dyn SessionStore>>,
    state: Option<RunState>,
    pub(crate) context: Option<ContextConfig>,
    pub(crate) compactor: Option<Arc<dyn Compactor>>,
    /// How deep the agent is ([`crate::delegate`]): 0 unless built for a sub-agent.
    pub(crate) depth: usize,
    /// The prompt zones the system text is built from at `build` ([`crate::zones`]).
    pub(crate) zones: Option<PromptZones>,
}

/// The guardrails and step hooks of an agent.
#[derive(Default, Clone)]
pub(crate) struct Guards {
    pub(crate) input: Vec<Arc<dyn InputGuardrail>>,
    pub(crate) output: Vec<Arc<dyn OutputGuardrail>>,
    pub(crate) step: Vec<Arc<dyn StepHook>>,
    /// Repairs the model's turn before it is logged ([`crate::repair`]).
    pub(crate) repair: Option<Arc<dyn RepairStrategy>>,
    /// Watches the run for loops at each step boundary.
    pub(crate) loops: Option<Arc<dyn LoopGuard>>,
}

impl HaloAgentBuilder {
    /// Sets the system prompt.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.prefix.set_system(system);
        self
    }

    /// Adds a tool.
    ///
    /// # Errors
    /// [`HaloError::Prefix`] for a duplicate name, an invalid name or a bad schema.
    pub fn tool(mut self, tool: impl DynTool + 'static) -> Result<Self, HaloError> {
        self.tools.add(&mut self.prefix, Arc::new(tool))?;
        Ok(self)
    }

    /// Adds shared tools (a sandbox's tool set, MCP tools).
    ///
    /// # Errors
    /// As [`tool`](Self::tool).
    pub fn tools(
        mut self,
        tools: impl IntoIterator<Item = Arc<dyn DynTool>>,
    ) -> Result<Self, HaloError> {
        for t in tools {
            self.tools.add(&mut self.prefix, t)?;
        }
        Ok(self)
    }

    /// Adds a source of tools that may change during a run (an MCP server's tools): its
    /// current tools are added now, and at each step boundary before a model call the agent
    /// swaps in its new tools when its [`version`](ToolSource::version) changed, so the
    /// prefix changes only between steps and the ledger sees one expected miss per change.
    /// A tool whose name is taken is left out with a `tracing` warning.
    pub fn tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.tools.add_source(&mut self.prefix, source);
        self
    }

    /// Adds an agent tool: a tool that runs the agent itself, a plan in its context or a
    /// sub-agent on its model ([`crate::delegate`]; halo-strategies' `Plan` and
    /// `Subagent`). Its spec goes into the prefix as any tool's.
    ///
    /// # Errors
    /// As [`tool`](Self::tool).
    pub fn agent_tool(mut self, tool: impl AgentTool + 'static) -> Result<Self, HaloError> {
        self.tools.add_agent(&mut self.prefix, Arc::new(tool))?;
        Ok(self)
    }

    /// Adds a client-side tool: the model sees `spec`, and its calls are handed to the
    /// caller in every mode (as the AI SDK does for a tool without `execute`):
    /// `generate_text` and `stream_text` pause with the calls in
    /// [`GenerateTextResult::pending_tool_calls`](crate::GenerateTextResult::pending_tool_calls),
    /// and [`HaloAgent::submit_tool_result`] continues.
    ///
    /// # Errors
    /// As [`tool`](Self::tool).
    pub fn client_tool(mut self, spec: ToolSpec) -> Result<Self, HaloError> {
        self.tools.add_client(&mut self.prefix, spec)?;
        Ok(self)
    }

    /// Appends few-shot example turns to the prefix.
    pub fn few_shot(mut self, messages: impl IntoIterator<Item = Message>) -> Self {
        self.prefix = self.prefix.with_few_shot(messages);
        self
    }

    /// Adds a skill to the prefix's catalog.
    pub fn skill(mut self, skill: SkillMeta) -> Self {
        self.prefix.add_skill(skill);
        self
    }

    /// Builds the system text from prompt zones ([`crate::zones`]): at
    /// [`build`](Self::build) they replace the system prompt and the skill catalog, and the
    /// date comes from the agent's [`Clock`]. Frozen for the session; see
    /// [`HaloAgent::refresh_prefix`].
    pub fn zones(mut self, zones: PromptZones) -> Self {
        self.zones = Some(zones);
        self
    }

    /// Sets the generation options sent with every call.
    pub fn options(mut self, options: GenerationOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets the most model calls per run (default [`DEFAULT_MAX_STEPS`], at least 1).
    pub fn max_steps(mut self, n: usize) -> Self {
        self.max_steps = n.max(1);
        self
    }

    /// Keeps the history inside the model's context window with `config`'s strategy, asked
    /// before every model call ([`crate::context`]). Without one the log's capacity
    /// ([`log_capacity`](Self::log_capacity)) is the only bound, and each eviction it makes
    /// once full costs a cache miss the ledger reports.
    ///
    /// The window is `config`'s when it sets one; otherwise
    /// ([`ContextConfig::for_model`]) it is read from the model's
    /// [`context_window`](ModelAdapter::context_window) at [`build`](Self::build), and is
    /// [`DEFAULT_CONTEXT_WINDOW`](crate::context::DEFAULT_CONTEXT_WINDOW) when the model
    /// names none. [`HaloAgent::context_window`] tells which it became.
    pub fn context(mut self, config: ContextConfig) -> Self {
        self.context = Some(config);
        self
    }

    /// Answers compactions' summary requests with `compactor` (a [`ModelCompactor`] over a
    /// cheaper model, say) instead of the agent's own model.
    ///
    /// [`ModelCompactor`]: crate::context::ModelCompactor
    pub fn compactor(mut self, compactor: Arc<dyn Compactor>) -> Self {
        self.compactor = Some(compactor);
        self
    }

    /// Sets the log capacity in messages (default [`DEFAULT_LOG_CAPACITY`]).
    pub fn log_capacity(mut self, n: usize) -> Self {
        self.log_capacity = n;
        self
    }

    /// Sets a stable session id, sent as OpenAI's `prompt_cache_key` (DeepSeek's `user_id`
    /// splits its cache per user, so it is only sent when set as a body field on the adapter).
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// Adds a tool hook; hooks run in the order they are added, around every tool call
    /// (see [`hook`](crate::hook)). Hooks are not part of the prefix.
    pub fn hook(mut self, hook: impl ToolHook + 'static) -> Self {
        self.tools.push_hook(Arc::new(hook));
        self
    }

    /// Adds a shared tool hook (see [`hook`](Self::hook)).
    pub fn hook_shared(mut self, hook: Arc<dyn ToolHook>) -> Self {
        self.tools.push_hook(hook);
        self
    }

    /// Adds an input guardrail ([`crate::guardrail`]).
    pub fn input_guardrail(mut self, guardrail: impl InputGuardrail + 'static) -> Self {
        self.guards.input.push(Arc::new(guardrail));
        self
    }

    /// Adds an output guardrail ([`crate::guardrail`]).
    pub fn output_guardrail(mut self, guardrail: impl OutputGuardrail + 'static) -> Self {
        self.guards.output.push(Arc::new(guardrail));
        self
    }

    /// Adds a step hook ([`crate::guardrail::StepHook`]): `prepare_step` before each model
    /// call, `on_step_finish` after each step. With several, later settings win.
    pub fn step_hook(mut self, hook: impl StepHook + 'static) -> Self {
        self.guards.step.push(Arc::new(hook));
        self
    }

    /// Sets the repair strategy ([`crate::repair`]): it sees each model turn before it is
    /// logged, fixes tool names and arguments, and may refuse calls or end the run. Default:
    /// none, calls reach dispatch as the model sent them. Not used in object runs
    /// (`generate_object`), whose answers have their own retry budget.
    pub fn repair(mut self, strategy: impl RepairStrategy + 'static) -> Self {
        self.guards.repair = Some(Arc::new(strategy));
        self
    }

    /// Sets the loop guard ([`crate::guardrail::LoopGuard`]): checked at each step boundary,
    /// it nudges the model or ends the run with
    /// [`HaloError::LoopDetected`]. Default: none.
    pub fn loop_guard(mut self, guard: impl LoopGuard + 'static) -> Self {
        self.guards.loops = Some(Arc::new(guard));
        self
    }

    /// Journals every committed step into `store`, and restores the session it holds
    /// before the first run (or at [`HaloAgent::restore_session`]).
    pub fn session(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Sets the clock the run engine's times come from (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Starts from a saved run state ([`HaloAgent::run_state`], serialized with serde):
    /// the history, a step in flight, the counters and the ledger. The prefix, tools and
    /// model come from this builder, as they are not part of the state.
    pub fn run_state(mut self, state: RunState) -> Self {
        self.state = Some(state);
        self
    }

    /// Builds the agent.
    pub fn build(mut self) -> HaloAgent {
        let restored = self.state.is_some() || self.store.is_none();
        let model_window = self.model.context_window();
        if let Some(zones) = &self.zones {
            zones.apply(&mut self.prefix, self.clock.now_ms());
        }
        HaloAgent {
            model: self.model,
            prefix: self.prefix,
            tools: self.tools,
            state: self
                .state
                .unwrap_or_else(|| RunState::new(MessageLog::with_capacity(self.log_capacity))),
            options: self.options,
            max_steps: self.max_steps,
            log_capacity: self.log_capacity,
            session_id: self.session_id,
            guards: self.guards,
            clock: self.clock,
            store: self.store,
            restored,
            steering: SteeringHandle::default(),
            cancel: CancelToken::default(),
            manual: false,
            context: self.context.map(|mut config| {
                let window = config.window_for(model_window);
                config.context_window = Some(window);
                config
            }),
            compactor: self.compactor,
            depth: self.depth,
        }
    }
}

/// An agent: a stable prefix, a bounded message log, a model and its tools.
///
/// ```
/// # use halo_core::{HaloAgent, testing::ScriptedModel};
/// # futures::executor::block_on(async {
/// let model = ScriptedModel::new().text("Hello!");
/// let mut agent = HaloAgent::builder(model).system("Be brief.").build();
/// let result = agent.generate_text("Hi").await.unwrap();
/// assert_eq!(result.text, "Hello!");
/// assert_eq!(agent.log().len(), 2);
/// # });
/// ```
pub struct HaloAgent {
    pub(crate) model: SharedModel,
    pub(crate) prefix: StablePrefix,
    pub(crate) tools: Toolbox,
    pub(crate) state: RunState,
    pub(crate) options: GenerationOptions,
    pub(crate) max_steps: usize,
    pub(crate) log_capacity: usize,
    pub(crate) session_id: Option<String>,
    pub(crate) guards: Guards,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) store: Option<Arc<dyn SessionStore>>,
    /// Whether the session store's journal was loaded (or there is none).
    pub(crate) restored: bool,
    pub(crate) steering: SteeringHandle,
    pub(crate) cancel: CancelToken,
    /// Whether the last run was driven in manual mode (`send`), so `submit_tool_result`
    /// continues the same way.
    pub(crate) manual: bool,
    /// The context strategy, window and token count.
    pub(crate) context: Option<ContextConfig>,
    /// Who answers summary requests (`None`: the agent's model).
    pub(crate) compactor: Option<Arc<dyn Compactor>>,
    /// How deep the agent is ([`crate::delegate`]).
    pub(crate) depth: usize,
}

impl std::fmt::Debug for HaloAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaloAgent")
            .field("model", &self.model.model_name())
            .field("prefix_fingerprint", &self.prefix.fingerprint())
            .field("tools", &self.tools)
            .field("log_len", &self.state.log().len())
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

impl HaloAgent {
    /// Starts building an agent on `model`.
    pub fn builder(model: impl ModelAdapter + 'static) -> HaloAgentBuilder {
        Self::builder_shared(Arc::new(model))
    }

    /// Starts building an agent on a shared model.
    pub fn builder_shared(model: SharedModel) -> HaloAgentBuilder {
        HaloAgentBuilder {
            model,
            prefix: StablePrefix::default(),
            tools: Toolbox::default(),
            options: GenerationOptions::default(),
            max_steps: DEFAULT_MAX_STEPS,
            log_capacity: DEFAULT_LOG_CAPACITY,
            session_id: None,
            guards: Guards::default(),
            clock: Arc::new(SystemClock),
            store: None,
            state: None,
            context: None,
            compactor: None,
            depth: 0,
            zones: None,
        }
    }

    /// The context window the agent's context strategy works with, in tokens: the
    /// [`ContextConfig`]'s, or the model's, or the default (see
    /// [`HaloAgentBuilder::context`]); `None` without a context strategy.
    pub fn context_window(&self) -> Option<u64> {
        self.context.as_ref().and_then(|c| c.context_window)
    }

    /// The stable prefix.
    pub fn prefix(&self) -> &StablePrefix {
        &self.prefix
    }

    /// The message log.
    pub fn log(&self) -> &MessageLog {
        self.state.log()
    }

    /// The message log, for callers that edit history themselves. Whatever it then holds,
    /// requests stay valid ([`crate::request`]). Edits are not journaled: a session store
    /// records only what the engine commits.
    pub fn log_mut(&mut self) -> &mut MessageLog {
        self.state.log_mut()
    }

    /// Empties the log; the prefix and its fingerprint are untouched.
    pub fn clear_log(&mut self) {
        self.state.log_mut().clear();
    }

    /// The run engine's state: the history, the step in flight, the counters and the
    /// ledger. Serialize it with serde to continue elsewhere
    /// ([`HaloAgentBuilder::run_state`]).
    pub fn run_state(&self) -> &RunState {
        &self.state
    }

    /// The counters over every run of this agent.
    pub fn stats(&self) -> AgentStats {
        self.state.stats()
    }

    /// The predicted-miss ledger: expected against reported cache reads for every call
    /// (the last [`LEDGER_CAPACITY`](crate::ledger::LEDGER_CAPACITY)).
    pub fn cache_ledger(&self) -> &CacheLedger {
        self.state.ledger()
    }

    /// The generation options.
    pub fn options(&self) -> &GenerationOptions {
        &self.options
    }

    /// Replaces the generation options sent with every call from the next one on. They are
    /// not part of the prefix: restricting [`active_tools`](GenerationOptions::active_tools)
    /// this way changes no prefix byte.
    pub fn set_options(&mut self, options: GenerationOptions) {
        self.options = options;
    }

    /// How deep the agent is: 0 for an agent the application built, one more for each
    /// fork or sub-agent between it and that agent ([`crate::delegate`]).
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The model.
    pub fn model(&self) -> &SharedModel {
        &self.model
    }

    /// The tools' executors and schemas.
    pub fn tool_registry(&self) -> &ToolRegistry {
        self.tools.registry()
    }

    /// A handle that queues user messages into this agent's runs from another task
    /// ([`crate::steering`]).
    pub fn steering(&self) -> SteeringHandle {
        self.steering.clone()
    }

    /// A token that cancels this agent's run in flight from another task
    /// ([`crate::cancel`]).
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// Adds a tool mid-session. This changes the prefix: the next call is one cache miss.
    ///
    /// # Errors
    /// [`HaloError::Prefix`] for a duplicate or invalid tool.
    pub fn add_tool(&mut self, tool: impl DynTool + 'static) -> Result<(), HaloError> {
        self.tools.add(&mut self.prefix, Arc::new(tool))
    }

    /// Adds a tool hook after the existing ones. Hooks are not part of the prefix: adding
    /// one costs no cache miss.
    pub fn add_hook(&mut self, hook: impl ToolHook + 'static) {
        self.tools.push_hook(Arc::new(hook));
    }

    /// Removes every tool hook.
    pub fn clear_hooks(&mut self) {
        self.tools.clear_hooks();
    }

    /// Replaces the system prompt. This changes the prefix: the next call is one cache miss.
    pub fn set_system(&mut self, system: impl Into<String>) {
        self.prefix.set_system(system);
    }

    /// Rebuilds the prefix from `zones` (re-read rules, skills and memory) with today's date
    /// from the agent's [`Clock`]; tools and few-shot turns are kept. The prefix is frozen
    /// otherwise, so a file that changes mid-session changes nothing until this is called.
    /// When the bytes differ, the next call is one expected miss in the
    /// [`CacheLedger`]; equal zones on the same day change nothing. Returns whether the
    /// prefix changed.
    pub fn refresh_prefix(&mut self, zones: &PromptZones) -> bool {
        let before = self.prefix.fingerprint();
        zones.apply(&mut self.prefix, self.clock.now_ms());
        self.prefix.fingerprint() != before
    }

    /// Loads the session store's journal into the log (done before the first run
    /// otherwise). Does nothing without a store, or once loaded.
    ///
    /// # Errors
    /// The store's [`HaloError::Session`] errors.
    pub async fn restore_session(&mut self) -> Result<(), HaloError> {
        if self.restored {
            return Ok(());
        }
        if let Some(store) = &self.store {
            let events = store.load().await?;
            self.state = RunState::from_journal(&events, self.log_capacity);
        }
        self.restored = true;
        Ok(())
    }

    /// Writes the journal events the engine produced to the session store (or drops them
    /// when there is none). When the store fails, the events stay queued, so the next
    /// write (the next step, or a retry of the run) carries them and the journal never has
    /// a gap.
    pub(crate) async fn flush_journal(&mut self) -> Result<(), HaloError> {
        let events = self.state.take_journal();
        if let (Some(store), false) = (&self.store, events.is_empty())
            && let Err(e) = store.append(&events).await
        {
            self.state.requeue_journal(events);
            return Err(e.into());
        }
        Ok(())
    }
}
