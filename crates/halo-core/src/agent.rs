//! [`HaloAgent`]: a model, a stable prefix, tools, hooks and guardrails around one run
//! engine state ([`RunState`]).
//!
//! The agent is a facade. What it is configured with — model, prefix, tools and hooks,
//! options, limits, guardrails, strategies — is one value (`Config`, cloned for forks and
//! sub-agents); the run is another ([`RunState`], serializable). The engine
//! ([`crate::engine`]) decides, the drivers ([`crate::driver`]) run what it asks for.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::cancel::CancelToken;
use crate::clock::{Clock, SystemClock};
use crate::context::{Compactor, ContextConfig};
use crate::dispatch::Toolbox;
use crate::engine::RunState;
use crate::error::HaloError;
use crate::guardrail::{InputGuardrail, LoopGuard, OutputGuardrail, StepHook};
use crate::handoff::{Handoff, HistoryFilter};
use crate::hook::ToolHook;
use crate::inner::Tap;
use crate::ledger::CacheLedger;
use crate::log::{DEFAULT_LOG_CAPACITY, MessageLog};
use crate::message::Message;
use crate::model::{GenerationOptions, ModelAdapter, SharedModel};
use crate::prefix::{SkillMeta, StablePrefix, ToolSpec};
use crate::repair::RepairStrategy;
use crate::session::{Append, DEFAULT_SESSION, JournalEvent, Lease, SessionError, SessionStore};
use crate::stats::AgentStats;
use crate::steering::SteeringHandle;
use crate::text::DEFAULT_TOOL_OUTPUT_LIMIT;
use crate::tool::{DynTool, ToolRegistry, ToolSource};
use crate::zones::PromptZones;

/// Default limit on model calls per run: 20.
pub const DEFAULT_MAX_STEPS: usize = 20;

/// The guardrails, step hooks and pure strategies of an agent.
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

/// The limits of an agent's runs; each can be changed on a built or restored agent.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Model calls per run, at least 1.
    pub(crate) max_steps: usize,
    /// Log capacity in messages.
    pub(crate) log_capacity: usize,
    /// Bytes of a tool result that enter the history.
    pub(crate) tool_output: usize,
    /// Per-tool output limits, by tool name.
    pub(crate) tool_output_by_name: BTreeMap<String, usize>,
    /// Whether a call that needs approval pauses the run (someone answers through
    /// `approve` / `reject`) instead of being denied at once.
    pub(crate) pause_for_approvals: bool,
    /// Whether a panicking tool or hook becomes an error result (else the panic goes on).
    pub(crate) catch_panics: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: DEFAULT_MAX_STEPS,
            log_capacity: DEFAULT_LOG_CAPACITY,
            tool_output: DEFAULT_TOOL_OUTPUT_LIMIT,
            tool_output_by_name: BTreeMap::new(),
            pause_for_approvals: false,
            catch_panics: true,
        }
    }
}

impl Limits {
    /// The output limit of the tool `name`, in bytes.
    pub(crate) fn tool_output_for(&self, name: &str) -> usize {
        self.tool_output_by_name
            .get(name)
            .copied()
            .unwrap_or(self.tool_output)
    }
}

/// Everything an agent is configured with: what its runs are made of, apart from the run
/// itself. Cloned whole for a fork or a sub-agent ([`crate::delegate`]).
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) model: SharedModel,
    pub(crate) prefix: StablePrefix,
    pub(crate) tools: Toolbox,
    pub(crate) options: GenerationOptions,
    pub(crate) limits: Limits,
    pub(crate) session_id: Option<String>,
    pub(crate) guards: Guards,
    pub(crate) clock: Arc<dyn Clock>,
    /// The context strategy, window and token count.
    pub(crate) context: Option<ContextConfig>,
    /// Who answers summary requests (`None`: the agent's model).
    pub(crate) compactor: Option<Arc<dyn Compactor>>,
    /// How deep the agent is ([`crate::delegate`]): 0 unless built for a sub-agent.
    pub(crate) depth: usize,
    /// The agent's name: how handoffs, events from inside, results and traces
    /// (`gen_ai.agent.name`) name it.
    pub(crate) name: Option<String>,
    /// Where the agent forwards its events while a tool of a streamed run runs it
    /// ([`crate::inner`]).
    pub(crate) tap: Option<Tap>,
    /// The handoff tools ([`crate::handoff`]): tool name → the agent it hands to.
    pub(crate) handoffs: BTreeMap<String, String>,
    /// The agents a handoff of this one may reach ([`HaloAgent::with_peers`]).
    pub(crate) reachable: Arc<BTreeSet<String>>,
    /// What the agent keeps of a conversation handed to it.
    pub(crate) handoff_filter: Option<Arc<dyn HistoryFilter>>,
}

impl Config {
    fn new(model: SharedModel) -> Self {
        Config {
            model,
            prefix: StablePrefix::default(),
            tools: Toolbox::default(),
            options: GenerationOptions::default(),
            limits: Limits::default(),
            session_id: None,
            guards: Guards::default(),
            clock: Arc::new(SystemClock),
            context: None,
            compactor: None,
            depth: 0,
            name: None,
            tap: None,
            handoffs: BTreeMap::new(),
            reachable: Arc::default(),
            handoff_filter: None,
        }
    }

    /// The agent `target` a call of the tool `tool` hands the conversation to, when `tool`
    /// is one of this agent's handoff tools.
    pub(crate) fn handoff_target(&self, tool: &str) -> Option<&str> {
        self.handoffs.get(tool).map(String::as_str)
    }
}

/// Builds a [`HaloAgent`].
pub struct HaloAgentBuilder {
    config: Config,
    store: Option<Arc<dyn SessionStore>>,
    /// The session of `store` the agent journals into, and its lease's fence.
    cursor: JournalCursor,
    state: Option<RunState>,
    /// The prompt zones the system text is built from at `build` ([`crate::zones`]).
    zones: Option<PromptZones>,
}

impl HaloAgentBuilder {
    /// A builder over `config` (a sub-agent's: [`crate::delegate`]).
    pub(crate) fn from_config(config: Config) -> Self {
        HaloAgentBuilder {
            config,
            store: None,
            cursor: JournalCursor::default(),
            state: None,
            zones: None,
        }
    }

    /// Sets the system prompt.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.config.prefix.set_system(system);
        self
    }

    /// Names the agent: handoffs reach it by this name ([`crate::handoff`]), its events
    /// inside another agent's run are tagged with it ([`crate::inner`]), and results say
    /// which agent answered ([`GenerateTextResult::agent`](crate::GenerateTextResult::agent)).
    /// A name that handoffs reach must be a valid part of a tool name
    /// (`[a-zA-Z0-9_-]`, at most 52 characters). Traces carry it as `gen_ai.agent.name` and
    /// in the run span's name (`invoke_agent {name}`; see `docs/telemetry.md`). Not part of
    /// the prefix, and not sent to the model.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.name = Some(name.into());
        self
    }

    /// Lets the agent hand the conversation to another agent: adds the tool
    /// `transfer_to_<target>` (see [`crate::handoff`]); the target must be among the agents
    /// given to [`HaloAgent::with_peers`].
    ///
    /// # Errors
    /// [`HaloError::Prefix`] when the tool's name is taken or invalid (a target name with
    /// characters a tool name cannot have, or too long).
    pub fn handoff(mut self, handoff: Handoff) -> Result<Self, HaloError> {
        let tool = handoff.tool();
        let c = &mut self.config;
        c.tools.add(&mut c.prefix, Arc::new(tool))?;
        c.handoffs
            .insert(handoff.tool_name(), handoff.target().to_string());
        Ok(self)
    }

    /// What the agent keeps of a conversation handed to it ([`crate::handoff`]): `filter`
    /// is applied to the history when a handoff reaches this agent, before its first step.
    /// Default: the whole history.
    pub fn handoff_filter(mut self, filter: impl HistoryFilter + 'static) -> Self {
        self.config.handoff_filter = Some(Arc::new(filter));
        self
    }

    /// Adds a tool: a typed [`Tool`](crate::Tool), an MCP tool, or a tool that runs the agent
    /// ([`crate::delegate`]).
    ///
    /// # Errors
    /// [`HaloError::Prefix`] for a duplicate name, an invalid name or a bad schema.
    pub fn tool(mut self, tool: impl DynTool + 'static) -> Result<Self, HaloError> {
        let c = &mut self.config;
        c.tools.add(&mut c.prefix, Arc::new(tool))?;
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
        let c = &mut self.config;
        for t in tools {
            c.tools.add(&mut c.prefix, t)?;
        }
        Ok(self)
    }

    /// Adds a source of tools that may change during a run (an MCP server's tools): its
    /// current tools are added now, and at each step boundary before a model call the agent
    /// swaps in its new tools when its [`version`](ToolSource::version) changed, so the
    /// prefix changes only between steps and the ledger sees one expected miss per change.
    /// A tool whose name is taken is left out with a `tracing` warning.
    pub fn tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        let c = &mut self.config;
        c.tools.add_source(&mut c.prefix, source);
        self
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
        let c = &mut self.config;
        c.tools.add_client(&mut c.prefix, spec)?;
        Ok(self)
    }

    /// Appends few-shot example turns to the prefix.
    pub fn few_shot(mut self, messages: impl IntoIterator<Item = Message>) -> Self {
        self.config.prefix = self.config.prefix.with_few_shot(messages);
        self
    }

    /// Adds a skill to the prefix's catalog.
    pub fn skill(mut self, skill: SkillMeta) -> Self {
        self.config.prefix.add_skill(skill);
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
        self.config.options = options;
        self
    }

    /// Sets the most model calls per run (default [`DEFAULT_MAX_STEPS`], at least 1).
    pub fn max_steps(mut self, n: usize) -> Self {
        self.config.limits.max_steps = n.max(1);
        self
    }

    /// Sets how many bytes of a tool result enter the history (default
    /// [`DEFAULT_TOOL_OUTPUT_LIMIT`], at least [`MIN_CUT_BYTES`](crate::text::MIN_CUT_BYTES)):
    /// a longer result keeps its head and tail, with a line saying how much was cut
    /// ([`cut_middle`](crate::text::cut_middle)). It applies to every result, the caller's
    /// submitted ones too.
    pub fn tool_output_limit(mut self, bytes: usize) -> Self {
        self.config.limits.tool_output = bytes;
        self
    }

    /// Sets the output limit of the tool `name` alone (see
    /// [`tool_output_limit`](Self::tool_output_limit)).
    pub fn tool_output_limit_for(mut self, name: impl Into<String>, bytes: usize) -> Self {
        self.config
            .limits
            .tool_output_by_name
            .insert(name.into(), bytes);
        self
    }

    /// Makes a call that needs approval (a hook answered
    /// [`Ask`](crate::ToolCallDecision::Ask), or the tool's annotations say so) pause the
    /// run instead of being denied at once: the run ends with the calls in
    /// [`GenerateTextResult::pending_approvals`](crate::GenerateTextResult::pending_approvals),
    /// its state serializes, and [`HaloAgent::approve`] / [`HaloAgent::reject`] continue it,
    /// in this process or another after a restore. Use it when someone will answer (a UI, a
    /// gateway); without it no one can, and such calls are denied with an error result that
    /// says so.
    pub fn pause_for_approvals(mut self) -> Self {
        self.config.limits.pause_for_approvals = true;
        self
    }

    /// Whether a panic in a tool or a tool hook becomes an error result the model reads,
    /// with the panic message (default `true`); `false` lets the panic unwind through the
    /// run (fail fast).
    pub fn catch_panics(mut self, catch: bool) -> Self {
        self.config.limits.catch_panics = catch;
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
        self.config.context = Some(config);
        self
    }

    /// Answers compactions' summary requests with `compactor` (a [`ModelCompactor`] over a
    /// cheaper model, say) instead of the agent's own model.
    ///
    /// [`ModelCompactor`]: crate::context::ModelCompactor
    pub fn compactor(mut self, compactor: Arc<dyn Compactor>) -> Self {
        self.config.compactor = Some(compactor);
        self
    }

    /// Sets the log capacity in messages (default [`DEFAULT_LOG_CAPACITY`]).
    pub fn log_capacity(mut self, n: usize) -> Self {
        self.config.limits.log_capacity = n;
        self
    }

    /// Sets a stable session id, sent as OpenAI's `prompt_cache_key` (DeepSeek's `user_id`
    /// splits its cache per user, so it is only sent when set as a body field on the adapter).
    /// Traces carry it as `gen_ai.conversation.id` (`docs/telemetry.md`).
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.config.session_id = Some(id.into());
        self
    }

    /// Adds a tool hook; hooks run in the order they are added, around every tool call
    /// (see [`hook`](crate::hook)). Hooks are not part of the prefix.
    pub fn hook(mut self, hook: impl ToolHook + 'static) -> Self {
        self.config.tools.push_hook(Arc::new(hook));
        self
    }

    /// Adds a shared tool hook (see [`hook`](Self::hook)).
    pub fn hook_shared(mut self, hook: Arc<dyn ToolHook>) -> Self {
        self.config.tools.push_hook(hook);
        self
    }

    /// Adds an input guardrail ([`crate::guardrail`]).
    pub fn input_guardrail(mut self, guardrail: impl InputGuardrail + 'static) -> Self {
        self.config.guards.input.push(Arc::new(guardrail));
        self
    }

    /// Adds an output guardrail ([`crate::guardrail`]).
    pub fn output_guardrail(mut self, guardrail: impl OutputGuardrail + 'static) -> Self {
        self.config.guards.output.push(Arc::new(guardrail));
        self
    }

    /// Adds a step hook ([`crate::guardrail::StepHook`]): `prepare_step` before each model
    /// call, `on_step_finish` after each step. With several, later settings win.
    pub fn step_hook(mut self, hook: impl StepHook + 'static) -> Self {
        self.config.guards.step.push(Arc::new(hook));
        self
    }

    /// Sets the repair strategy ([`crate::repair`]): it sees each model turn before it is
    /// logged, fixes tool names and arguments, and may refuse calls or end the run. Default:
    /// none, calls reach dispatch as the model sent them. Not used in object runs
    /// (`generate_object`), whose answers have their own retry budget.
    pub fn repair(mut self, strategy: impl RepairStrategy + 'static) -> Self {
        self.config.guards.repair = Some(Arc::new(strategy));
        self
    }

    /// Sets the loop guard ([`crate::guardrail::LoopGuard`]): checked at each step boundary,
    /// it nudges the model or ends the run with
    /// [`HaloError::LoopDetected`]. Default: none.
    pub fn loop_guard(mut self, guard: impl LoopGuard + 'static) -> Self {
        self.config.guards.loops = Some(Arc::new(guard));
        self
    }

    /// Journals every committed step into `store`'s session [`DEFAULT_SESSION`], and
    /// restores the session it holds before the first run (or at
    /// [`HaloAgent::restore_session`]). Each append expects the session to hold what this
    /// agent loaded and wrote, so another writer's appends end the run with
    /// [`SessionError::Conflict`] instead of being merged.
    pub fn session(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// As [`session`](Self::session), into the session `id` of `store`.
    pub fn session_named(mut self, store: Arc<dyn SessionStore>, id: impl Into<String>) -> Self {
        self.store = Some(store);
        self.cursor.session = id.into();
        self
    }

    /// Journals under `lease` (from [`SessionStore::acquire`] on the store given to
    /// [`session`](Self::session)): into its session, every append fenced with its token,
    /// so once another owner takes the session over, the next append fails with
    /// [`SessionError::Fenced`] and writes nothing. Renewing
    /// the lease is the caller's ([`SessionStore::renew`] keeps the token).
    pub fn session_lease(mut self, lease: &Lease) -> Self {
        self.cursor.session = lease.session.clone();
        self.cursor.fence = Some(lease.fence);
        self
    }

    /// Sets the clock the run engine's times come from (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.config.clock = clock;
        self
    }

    /// Starts from a saved run state ([`HaloAgent::run_state`], serialized with serde):
    /// the history, a step in flight or a paused run, the counters and the ledger. The
    /// prefix, tools and model come from this builder, as they are not part of the state.
    pub fn run_state(mut self, state: RunState) -> Self {
        self.state = Some(state);
        self
    }

    /// The prefix being built (for a sub-agent's, [`crate::delegate`]).
    pub(crate) fn set_prefix_and_tools(mut self, prefix: StablePrefix, tools: Toolbox) -> Self {
        self.config.prefix = prefix;
        self.config.tools = tools;
        self
    }

    /// Builds the agent.
    pub fn build(mut self) -> HaloAgent {
        let restored = self.state.is_some() || self.store.is_none();
        let model_window = self.config.model.context_window();
        if let Some(zones) = &self.zones {
            zones.apply(&mut self.config.prefix, self.config.clock.now_ms());
        }
        if let Some(context) = &mut self.config.context {
            let window = context.window_for(model_window);
            context.context_window = Some(window);
        }
        let capacity = self.config.limits.log_capacity;
        HaloAgent {
            config: self.config,
            state: self
                .state
                .unwrap_or_else(|| RunState::new(MessageLog::with_capacity(capacity))),
            store: self.store,
            cursor: self.cursor,
            restored,
            steering: SteeringHandle::default(),
            cancel: CancelToken::default(),
            peers: BTreeMap::new(),
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
    config: Config,
    state: RunState,
    store: Option<Arc<dyn SessionStore>>,
    /// Where in `store` the agent appends.
    cursor: JournalCursor,
    /// Whether the session store's journal was loaded (or there is none).
    restored: bool,
    steering: SteeringHandle,
    cancel: CancelToken,
    /// The configurations of the agents a handoff may reach, by name, but the one in
    /// `config` (whose turn it is): [`HaloAgent::with_peers`].
    pub(crate) peers: BTreeMap<String, Config>,
}

impl std::fmt::Debug for HaloAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaloAgent")
            .field("model", &self.config.model.model_name())
            .field("prefix_fingerprint", &self.config.prefix.fingerprint())
            .field("tools", &self.config.tools)
            .field("log_len", &self.state.log().len())
            .field("max_steps", &self.config.limits.max_steps)
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
        HaloAgentBuilder::from_config(Config::new(model))
    }

    /// An agent over `config` and `state`, with no session store (a fork:
    /// [`crate::delegate`]).
    pub(crate) fn from_parts(config: Config, state: RunState) -> Self {
        Self::from_template(config, BTreeMap::new(), state)
    }

    /// An agent over `config`, its handoff `peers` and `state`, with no session store (a
    /// named agent's fresh run: [`crate::named`]).
    pub(crate) fn from_template(
        config: Config,
        peers: BTreeMap<String, Config>,
        state: RunState,
    ) -> Self {
        HaloAgent {
            config,
            state,
            store: None,
            cursor: JournalCursor::default(),
            restored: true,
            steering: SteeringHandle::default(),
            cancel: CancelToken::default(),
            peers,
        }
    }

    /// The configuration (the agent's whose turn it is) and the handoff peers'.
    pub(crate) fn template(&self) -> (Config, BTreeMap<String, Config>) {
        (self.config.clone(), self.peers.clone())
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The configuration, mutable (for the tap of a named agent's run).
    pub(crate) fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// The run state and the configuration, apart, for a driver. The configuration is the
    /// one of the agent whose turn it is ([`crate::handoff`]).
    pub(crate) fn parts(&mut self) -> (&mut RunState, &mut Config) {
        self.follow_handoff();
        (&mut self.state, &mut self.config)
    }

    /// The run state, mutable, and the configuration, shared: while a step's tools run
    /// (borrowing the configuration), their outcomes are fed to the state.
    pub(crate) fn split(&mut self) -> (&mut RunState, &Config) {
        self.follow_handoff();
        (&mut self.state, &self.config)
    }

    /// The context window the agent's context strategy works with, in tokens: the
    /// [`ContextConfig`]'s, or the model's, or the default (see
    /// [`HaloAgentBuilder::context`]); `None` without a context strategy.
    pub fn context_window(&self) -> Option<u64> {
        self.config.context.as_ref().and_then(|c| c.context_window)
    }

    /// The stable prefix.
    pub fn prefix(&self) -> &StablePrefix {
        &self.config.prefix
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

    /// The run engine's state: the history, the step in flight (or the paused run), the
    /// counters and the ledger. Serialize it with serde to continue elsewhere
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
        &self.config.options
    }

    /// Replaces the generation options sent with every call from the next one on. They are
    /// not part of the prefix: restricting [`active_tools`](GenerationOptions::active_tools)
    /// this way changes no prefix byte.
    pub fn set_options(&mut self, options: GenerationOptions) {
        self.config.options = options;
    }

    /// The most model calls per run.
    pub fn max_steps(&self) -> usize {
        self.config.limits.max_steps
    }

    /// Sets the most model calls per run (at least 1), from the next run on; works on a
    /// built or restored agent as on the builder ([`HaloAgentBuilder::max_steps`]).
    pub fn set_max_steps(&mut self, n: usize) {
        self.config.limits.max_steps = n.max(1);
    }

    /// Sets the tool output limit in bytes ([`HaloAgentBuilder::tool_output_limit`]).
    pub fn set_tool_output_limit(&mut self, bytes: usize) {
        self.config.limits.tool_output = bytes;
    }

    /// Sets the output limit of the tool `name` alone
    /// ([`HaloAgentBuilder::tool_output_limit_for`]).
    pub fn set_tool_output_limit_for(&mut self, name: impl Into<String>, bytes: usize) {
        self.config
            .limits
            .tool_output_by_name
            .insert(name.into(), bytes);
    }

    /// Whether calls that need approval pause the run
    /// ([`HaloAgentBuilder::pause_for_approvals`]) or are denied at once.
    pub fn set_pause_for_approvals(&mut self, pause: bool) {
        self.config.limits.pause_for_approvals = pause;
    }

    /// Replaces the context settings ([`HaloAgentBuilder::context`]); the window is resolved
    /// against the model's as at build.
    pub fn set_context(&mut self, mut config: ContextConfig) {
        let window = config.window_for(self.config.model.context_window());
        config.context_window = Some(window);
        self.config.context = Some(config);
    }

    /// How deep the agent is: 0 for an agent the application built, one more for each
    /// fork or sub-agent between it and that agent ([`crate::delegate`]).
    pub fn depth(&self) -> usize {
        self.config.depth
    }

    /// The model.
    pub fn model(&self) -> &SharedModel {
        &self.config.model
    }

    /// The tools' executors and schemas.
    pub fn tool_registry(&self) -> &ToolRegistry {
        self.config.tools.registry()
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
        let c = &mut self.config;
        c.tools.add(&mut c.prefix, Arc::new(tool))
    }

    /// Adds a tool hook after the existing ones. Hooks are not part of the prefix: adding
    /// one costs no cache miss.
    pub fn add_hook(&mut self, hook: impl ToolHook + 'static) {
        self.config.tools.push_hook(Arc::new(hook));
    }

    /// Removes every tool hook.
    pub fn clear_hooks(&mut self) {
        self.config.tools.clear_hooks();
    }

    /// Replaces the system prompt. This changes the prefix: the next call is one cache miss.
    pub fn set_system(&mut self, system: impl Into<String>) {
        self.config.prefix.set_system(system);
    }

    /// Rebuilds the prefix from `zones` (re-read rules, skills and memory) with today's date
    /// from the agent's [`Clock`]; tools and few-shot turns are kept. The prefix is frozen
    /// otherwise, so a file that changes mid-session changes nothing until this is called.
    /// When the bytes differ, the next call is one expected miss in the
    /// [`CacheLedger`]; equal zones on the same day change nothing. Returns whether the
    /// prefix changed.
    pub fn refresh_prefix(&mut self, zones: &PromptZones) -> bool {
        let before = self.config.prefix.fingerprint();
        zones.apply(&mut self.config.prefix, self.config.clock.now_ms());
        self.config.prefix.fingerprint() != before
    }

    /// Loads the session store's journal into the run state (done before the first run
    /// otherwise): the committed history, and a step that was open when the journal ended —
    /// its results so far, the calls that started, the approvals asked and given — so a run
    /// paused in another process continues here. Does nothing without a store, or once
    /// loaded.
    ///
    /// # Errors
    /// The store's [`HaloError::Session`] errors.
    pub async fn restore_session(&mut self) -> Result<(), HaloError> {
        if self.restored {
            return Ok(());
        }
        if let Some(store) = &self.store {
            let events = store.load(&self.cursor.session).await?;
            self.cursor.seq = Some(events.len() as u64);
            self.state = RunState::from_journal(&events, self.config.limits.log_capacity);
        }
        self.restored = true;
        Ok(())
    }

    /// Writes the journal events the engine produced to the session store (or drops them
    /// when there is none). When the store fails, the events stay queued, so the next
    /// write (the next step, or a retry of the run) carries them and the journal never has
    /// a gap. The one place a driver writes the journal.
    pub(crate) async fn flush_journal(&mut self) -> Result<(), HaloError> {
        let events = self.state.take_journal();
        let Some(store) = &self.store else {
            return Ok(());
        };
        if events.is_empty() {
            return Ok(());
        }
        let written = self
            .cursor
            .append(store.as_ref(), &events, self.config.clock.now_ms())
            .await;
        if let Err(e) = written {
            self.state.requeue_journal(events);
            return Err(e.into());
        }
        Ok(())
    }

    /// Whether the agent journals into a session store.
    pub(crate) fn has_store(&self) -> bool {
        self.store.is_some()
    }

    /// The id of the session the agent journals into ([`DEFAULT_SESSION`] unless the
    /// builder named one).
    pub fn session_name(&self) -> &str {
        &self.cursor.session
    }

    /// Moves the messages queued through the steering handle into the run state, where the
    /// engine injects them at the next step boundary.
    pub(crate) fn take_steering(&mut self) {
        let queued = self.steering.drain();
        if !queued.is_empty() {
            self.state.steer(queued);
        }
    }

    /// The cancel token, reset for a new run.
    pub(crate) fn reset_cancel(&self) -> CancelToken {
        self.cancel.reset();
        self.cancel.clone()
    }
}

/// Where an agent appends in its store: the session, the number of entries it holds (known
/// once loaded or written) and the fence of the agent's lease.
#[derive(Debug, Clone)]
pub(crate) struct JournalCursor {
    session: String,
    seq: Option<u64>,
    fence: Option<u64>,
}

impl Default for JournalCursor {
    fn default() -> Self {
        JournalCursor {
            session: DEFAULT_SESSION.to_string(),
            seq: None,
            fence: None,
        }
    }
}

impl JournalCursor {
    /// Appends `events` at the session's known length (loading it once when the agent
    /// started from a saved run state instead of the journal).
    async fn append(
        &mut self,
        store: &dyn SessionStore,
        events: &[JournalEvent],
        at_ms: u64,
    ) -> Result<(), SessionError> {
        let expected = match self.seq {
            Some(seq) => seq,
            None => store.load(&self.session).await?.len() as u64,
        };
        let mut append = Append::new(&self.session, expected, events, at_ms);
        if let Some(fence) = self.fence {
            append = append.fenced(fence);
        }
        self.seq = Some(store.append(append).await?);
        Ok(())
    }
}
