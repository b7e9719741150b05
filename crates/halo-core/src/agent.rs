//! [`HaloAgent`]: the stable prefix, the message log, a model and tools, and the tool loop.
//!
//! [`HaloAgent::generate_text`] runs the full loop: call the model with the prefix and the
//! history, append the assistant turn, run each tool call, append the results, and repeat
//! until the model answers without tool calls or `max_steps` calls were made. An assistant
//! turn and its tool results enter the log together, so the log holds only complete steps.
//!
//! Every run, step, model call and tool call is a `tracing` span named after the
//! OpenTelemetry GenAI semantic conventions (`invoke_agent`, `chat`, `execute_tool`) with
//! their attribute names (`gen_ai.request.model`, `gen_ai.usage.input_tokens`, ...).

use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use tracing::{Instrument, field::Empty};

use crate::error::HaloError;
use crate::hook::{ToolCallDecision, ToolHook};
use crate::ledger::{CacheCheck, CacheLedger};
use crate::log::{DEFAULT_LOG_CAPACITY, MessageLog};
use crate::message::{AssistantMessage, Message, ToolCall, ToolResult};
use crate::model::{
    FinishReason, GenerationOptions, ModelError, ModelRequest, ModelResponse, ModelStreamEvent,
    SharedModel, Usage,
};
use crate::prefix::{Fingerprint, SkillMeta, StablePrefix};
use crate::tool::{DynTool, ToolRegistry};

/// Default limit on model calls per run.
pub const DEFAULT_MAX_STEPS: usize = 20;

/// Token and cache counters over model calls.
///
/// Counts the provider did not report are left out of the sums; `calls_without_cache_info`
/// says how many calls that was, so a 0 % hit ratio from a server that reports nothing is
/// not mistaken for a cold cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentStats {
    /// Model calls made.
    pub steps: u64,
    /// Input tokens, cached ones included.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache (where reported).
    pub cache_write_tokens: u64,
    /// Input tokens of the calls that reported both input and cache reads (the ratio's
    /// denominator).
    pub cache_reported_input_tokens: u64,
    /// Cache reads of those same calls (the ratio's numerator).
    pub cache_reported_read_tokens: u64,
    /// Calls whose provider did not report cache reads.
    pub calls_without_cache_info: u64,
    /// Times the prefix fingerprint differed from the previous call's: each is one
    /// expected cache miss.
    pub prefix_fingerprint_changes: u64,
    /// Tool calls executed.
    pub tool_calls: u64,
    /// Input tokens the [`CacheLedger`] expected the provider to read from its cache, summed
    /// over the calls where it could estimate them.
    pub expected_cached_tokens: u64,
    /// Calls the ledger judged a cache bust ([`AgentEvent::CacheBust`]).
    pub cache_busts: u64,
}

impl AgentStats {
    /// Cache reads over input tokens, counting only the calls that reported both (so at most
    /// 1); 0 when none did.
    pub fn cache_hit_ratio(&self) -> f64 {
        if self.cache_reported_input_tokens == 0 {
            0.0
        } else {
            self.cache_reported_read_tokens as f64 / self.cache_reported_input_tokens as f64
        }
    }

    fn record(&mut self, usage: &Usage) {
        self.steps += 1;
        self.input_tokens += usage.input_tokens.unwrap_or(0);
        self.output_tokens += usage.output_tokens.unwrap_or(0);
        self.cache_write_tokens += usage.cache_write_tokens.unwrap_or(0);
        match (usage.cache_read_tokens, usage.input_tokens) {
            (Some(read), Some(input)) => {
                self.cache_read_tokens += read;
                self.cache_reported_read_tokens += read;
                self.cache_reported_input_tokens += input;
            }
            (Some(read), None) => self.cache_read_tokens += read,
            _ => self.calls_without_cache_info += 1,
        }
    }
}

/// One line for logs and terminals: steps, tool calls, input tokens, cached input tokens with
/// the hit percentage ([`AgentStats::cache_hit_ratio`]), output tokens; then calls that did
/// not report cache reads and cache busts, when there are any. When no call reported cache
/// reads, the cached part says so instead of showing a 0 % that would look like a cold cache.
///
/// ```
/// use halo_core::AgentStats;
///
/// let mut s = AgentStats { steps: 2, tool_calls: 1, input_tokens: 545, output_tokens: 21,
///     cache_read_tokens: 253, cache_reported_input_tokens: 545,
///     cache_reported_read_tokens: 253, ..AgentStats::default() };
/// assert_eq!(s.to_string(),
///     "2 steps, 1 tool call, 545 input tokens, 253 cached (46.4 % hit), 21 output tokens");
///
/// s.calls_without_cache_info = 1;
/// s.cache_busts = 1;
/// assert!(s.to_string().ends_with(
///     "output tokens, 1 call did not report cache reads, 1 cache bust"));
///
/// let none = AgentStats { steps: 1, input_tokens: 40, output_tokens: 3,
///     calls_without_cache_info: 1, ..AgentStats::default() };
/// assert_eq!(none.to_string(),
///     "1 step, 0 tool calls, 40 input tokens, cache reads not reported, 3 output tokens");
/// ```
impl std::fmt::Display for AgentStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural =
            |n: u64, one: &'static str, many: &'static str| if n == 1 { one } else { many };
        write!(
            f,
            "{} {}, {} {}, {} input tokens, ",
            self.steps,
            plural(self.steps, "step", "steps"),
            self.tool_calls,
            plural(self.tool_calls, "tool call", "tool calls"),
            self.input_tokens,
        )?;
        if self.steps > 0 && self.calls_without_cache_info == self.steps {
            f.write_str("cache reads not reported")?;
        } else {
            write!(
                f,
                "{} cached ({:.1} % hit)",
                self.cache_read_tokens,
                100.0 * self.cache_hit_ratio()
            )?;
        }
        write!(f, ", {} output tokens", self.output_tokens)?;
        if self.calls_without_cache_info > 0 && self.calls_without_cache_info < self.steps {
            let n = self.calls_without_cache_info;
            write!(
                f,
                ", {n} {} not report cache reads",
                plural(n, "call did", "calls did")
            )?;
        }
        if self.cache_busts > 0 {
            let n = self.cache_busts;
            write!(f, ", {n} {}", plural(n, "cache bust", "cache busts"))?;
        }
        Ok(())
    }
}

/// One model call of a run and the tool calls it led to.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// The assistant turn.
    pub message: AssistantMessage,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// Token counts of the call.
    pub usage: Usage,
    /// The results of the step's tool calls, in call order.
    pub tool_results: Vec<ToolResult>,
    /// The prefix fingerprint the call was made with.
    pub prefix_fingerprint: Fingerprint,
    /// The ledger's check of the call's prompt-cache reads.
    pub cache: CacheCheck,
}

/// What [`HaloAgent::generate_text`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateTextResult {
    /// The final answer text (the last step's text).
    pub text: String,
    /// Every step, in order.
    pub steps: Vec<StepResult>,
    /// The counters of this run.
    pub stats: AgentStats,
}

impl GenerateTextResult {
    /// The finish reason of the last step.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.steps.last().map(|s| &s.finish_reason)
    }
}

/// One event of a streamed agent run ([`HaloAgent::stream_text`]), in this order per step:
/// `StepStart`, deltas as the model streams (text, reasoning, tool-call starts and argument
/// pieces), the complete `ToolCall`s, one `ToolResult` per call as each tool finishes, then
/// `StepFinish`. The run ends with `Finish`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// A model call begins (`step` counts from 1).
    StepStart {
        /// The step's number.
        step: usize,
    },
    /// A piece of answer text.
    TextDelta(String),
    /// A piece of reasoning text.
    ReasoningDelta(String),
    /// The model began a tool call.
    ToolCallStart {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// The next piece of a tool call's argument string.
    ToolCallDelta {
        /// The call's id.
        id: String,
        /// The piece.
        arguments: String,
    },
    /// A complete tool call, about to run (its arguments are parsed once, here).
    ToolCall(ToolCall),
    /// The provider read far less from its prompt cache than the request shares with the
    /// previous one (see [`CacheLedger`]); sent after the model call, before its tool calls.
    CacheBust(Box<CacheCheck>),
    /// A tool finished; the model reads this result in the next step.
    ToolResult(ToolResult),
    /// A step is complete and logged: its turn, finish reason, usage and results.
    StepFinish(Box<StepResult>),
    /// The run is complete: the same value [`HaloAgent::generate_text`] returns.
    Finish(Box<GenerateTextResult>),
}

/// Builds a [`HaloAgent`].
pub struct HaloAgentBuilder {
    model: SharedModel,
    prefix: StablePrefix,
    tools: ToolRegistry,
    options: GenerationOptions,
    max_steps: usize,
    log_capacity: usize,
    session_id: Option<String>,
    hooks: Vec<Arc<dyn ToolHook>>,
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
        add_tool(&mut self.tools, &mut self.prefix, Arc::new(tool))?;
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
            add_tool(&mut self.tools, &mut self.prefix, t)?;
        }
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
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Adds a shared tool hook (see [`hook`](Self::hook)).
    pub fn hook_shared(mut self, hook: Arc<dyn ToolHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Builds the agent.
    pub fn build(self) -> HaloAgent {
        HaloAgent {
            model: self.model,
            prefix: self.prefix,
            tools: self.tools,
            log: MessageLog::with_capacity(self.log_capacity),
            options: self.options,
            max_steps: self.max_steps,
            session_id: self.session_id,
            stats: AgentStats::default(),
            last_fingerprint: None,
            hooks: self.hooks,
            ledger: CacheLedger::default(),
        }
    }
}

fn add_tool(
    tools: &mut ToolRegistry,
    prefix: &mut StablePrefix,
    tool: Arc<dyn DynTool>,
) -> Result<(), HaloError> {
    let spec = tools.insert(tool)?;
    if let Err(e) = prefix.add_tool(spec.clone()) {
        tools.remove(&spec.name);
        return Err(e.into());
    }
    Ok(())
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
    model: SharedModel,
    prefix: StablePrefix,
    tools: ToolRegistry,
    log: MessageLog,
    options: GenerationOptions,
    max_steps: usize,
    session_id: Option<String>,
    stats: AgentStats,
    last_fingerprint: Option<Fingerprint>,
    hooks: Vec<Arc<dyn ToolHook>>,
    ledger: CacheLedger,
}

impl std::fmt::Debug for HaloAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaloAgent")
            .field("model", &self.model.model_name())
            .field("prefix_fingerprint", &self.prefix.fingerprint())
            .field("tools", &self.tools)
            .field("log_len", &self.log.len())
            .field("max_steps", &self.max_steps)
            .field("hooks", &self.hooks.len())
            .finish_non_exhaustive()
    }
}

impl HaloAgent {
    /// Starts building an agent on `model`.
    pub fn builder(model: impl crate::ModelAdapter + 'static) -> HaloAgentBuilder {
        Self::builder_shared(Arc::new(model))
    }

    /// Starts building an agent on a shared model.
    pub fn builder_shared(model: SharedModel) -> HaloAgentBuilder {
        HaloAgentBuilder {
            model,
            prefix: StablePrefix::default(),
            tools: ToolRegistry::new(),
            options: GenerationOptions::default(),
            max_steps: DEFAULT_MAX_STEPS,
            log_capacity: DEFAULT_LOG_CAPACITY,
            session_id: None,
            hooks: Vec::new(),
        }
    }

    /// The stable prefix.
    pub fn prefix(&self) -> &StablePrefix {
        &self.prefix
    }

    /// The message log.
    pub fn log(&self) -> &MessageLog {
        &self.log
    }

    /// The message log, for callers that edit history themselves.
    pub fn log_mut(&mut self) -> &mut MessageLog {
        &mut self.log
    }

    /// Empties the log; the prefix and its fingerprint are untouched.
    pub fn clear_log(&mut self) {
        self.log.clear();
    }

    /// The counters over every run of this agent.
    pub fn stats(&self) -> AgentStats {
        self.stats
    }

    /// The predicted-miss ledger: expected against reported cache reads for every call
    /// (the last [`LEDGER_CAPACITY`](crate::ledger::LEDGER_CAPACITY)).
    pub fn cache_ledger(&self) -> &CacheLedger {
        &self.ledger
    }

    /// The generation options.
    pub fn options(&self) -> &GenerationOptions {
        &self.options
    }

    /// The model.
    pub fn model(&self) -> &SharedModel {
        &self.model
    }

    /// Adds a tool mid-session. This changes the prefix: the next call is one cache miss.
    ///
    /// # Errors
    /// [`HaloError::Prefix`] for a duplicate or invalid tool.
    pub fn add_tool(&mut self, tool: impl DynTool + 'static) -> Result<(), HaloError> {
        add_tool(&mut self.tools, &mut self.prefix, Arc::new(tool))
    }

    /// Adds a tool hook after the existing ones. Hooks are not part of the prefix: adding
    /// one costs no cache miss.
    pub fn add_hook(&mut self, hook: impl ToolHook + 'static) {
        self.hooks.push(Arc::new(hook));
    }

    /// Removes every tool hook.
    pub fn clear_hooks(&mut self) {
        self.hooks.clear();
    }

    /// Replaces the system prompt. This changes the prefix: the next call is one cache miss.
    pub fn set_system(&mut self, system: impl Into<String>) {
        self.prefix.set_system(system);
    }

    /// Runs the tool loop on a new user message until the model answers without tool calls.
    ///
    /// Each step calls [`ModelAdapter::generate`](crate::ModelAdapter::generate) (not the
    /// streaming endpoint); [`stream_text`](Self::stream_text) is the streaming twin and
    /// leaves the same log.
    ///
    /// # Errors
    /// - [`HaloError::Model`] when a model call fails; the log keeps the input and every
    ///   step completed before the failure.
    /// - [`HaloError::ToolFatal`] when a tool ends the run; the failing step is not logged.
    /// - [`HaloError::Aborted`] when a tool hook aborts the run (a user quitting at an
    ///   approval prompt); the step is not logged.
    /// - [`HaloError::MaxStepsReached`] after `max_steps` calls that all asked for tools.
    ///
    /// Unknown tools, bad arguments and failing tools are not errors: they become tool
    /// results with `is_error: true` that the model reads.
    ///
    /// # Cancel safety
    /// Dropping the future between steps loses nothing; dropped mid-step, the step's
    /// assistant turn and results are not logged (the log stays complete).
    pub async fn generate_text(
        &mut self,
        input: impl Into<String>,
    ) -> Result<GenerateTextResult, HaloError> {
        Self::drive(self.run(Some(input.into()), false)).await
    }

    /// Continues the tool loop from the log as it stands, without a new user message.
    ///
    /// After a run failed with a retryable [`HaloError::Model`] (a rate limit, a cut stream)
    /// or stopped at [`HaloError::MaxStepsReached`], the log holds the user's message and
    /// every completed step; `resume` picks up from there. Calling `generate_text` again
    /// with the same input instead would put the question in the log twice. The request is
    /// byte-identical to the failed one, so it reads the same prompt-cache entry.
    ///
    /// ```
    /// # use halo_core::{HaloAgent, HaloError, ModelError, testing::ScriptedModel};
    /// # futures::executor::block_on(async {
    /// let model = ScriptedModel::new()
    ///     .error(ModelError::RateLimited { retry_after: None, message: "slow down".into() })
    ///     .text("Hello!");
    /// let mut agent = HaloAgent::builder(model).build();
    /// let err = agent.generate_text("Hi").await.unwrap_err();
    /// assert!(matches!(&err, HaloError::Model(e) if e.is_retryable()));
    /// let out = agent.resume().await.unwrap();
    /// assert_eq!(out.text, "Hello!");
    /// assert_eq!(agent.log().len(), 2); // "Hi" once, then the answer
    /// # });
    /// ```
    ///
    /// # Errors
    /// [`HaloError::NothingToResume`] when the log is empty or ends with an answer (an
    /// assistant turn without tool calls); otherwise those of
    /// [`generate_text`](Self::generate_text).
    pub async fn resume(&mut self) -> Result<GenerateTextResult, HaloError> {
        Self::drive(self.run(None, false)).await
    }

    /// The streaming twin of [`resume`](Self::resume): continues the tool loop from the log
    /// as [`stream_text`](Self::stream_text) would.
    pub fn resume_stream(
        &mut self,
    ) -> impl Stream<Item = Result<AgentEvent, HaloError>> + Send + '_ {
        self.run(None, true)
    }

    /// Drives a run to its `Finish` event.
    async fn drive(
        run: impl Stream<Item = Result<AgentEvent, HaloError>> + Send,
    ) -> Result<GenerateTextResult, HaloError> {
        let mut run = std::pin::pin!(run);
        while let Some(event) = run.next().await {
            if let AgentEvent::Finish(result) = event? {
                return Ok(*result);
            }
        }
        // The run stream always ends with `Finish` or an error.
        Err(HaloError::Model(ModelError::Other(
            "the run ended without a result".into(),
        )))
    }

    /// Runs the tool loop on a new user message, streaming: model calls go through
    /// [`ModelAdapter::stream`](crate::ModelAdapter::stream) and every delta, tool call,
    /// tool result and step is an [`AgentEvent`]. The stream ends after
    /// [`AgentEvent::Finish`], or with one `Err` item (the errors of
    /// [`generate_text`](Self::generate_text)).
    ///
    /// ```
    /// # use halo_core::{AgentEvent, HaloAgent, testing::ScriptedModel};
    /// # use futures::StreamExt;
    /// # futures::executor::block_on(async {
    /// let mut agent = HaloAgent::builder(ScriptedModel::new().text("Hello!")).build();
    /// let mut text = String::new();
    /// let mut events = std::pin::pin!(agent.stream_text("Hi"));
    /// while let Some(event) = events.next().await {
    ///     if let AgentEvent::TextDelta(delta) = event.unwrap() {
    ///         text.push_str(&delta);
    ///     }
    /// }
    /// assert_eq!(text, "Hello!");
    /// # });
    /// ```
    ///
    /// # Cancel safety
    /// Dropping the stream stops the run at once: the model call or running tool futures are
    /// dropped, and the log keeps only complete steps (an assistant turn enters it together
    /// with all its tool results, after the tools ran). To stop on a signal, end the stream
    /// with `futures::StreamExt::take_until(stream, signal)`.
    pub fn stream_text(
        &mut self,
        input: impl Into<String>,
    ) -> impl Stream<Item = Result<AgentEvent, HaloError>> + Send + '_ {
        self.run(Some(input.into()), true)
    }

    /// The tool loop as a stream of events; `streaming` picks the model's streaming call.
    fn run(
        &mut self,
        input: Option<String>,
        streaming: bool,
    ) -> impl Stream<Item = Result<AgentEvent, HaloError>> + Send + '_ {
        let span = tracing::info_span!(
            "invoke_agent",
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.system" = self.model.provider(),
            "gen_ai.request.model" = self.model.model_name(),
            "halo.prefix.fingerprint" = %self.prefix.fingerprint(),
            "gen_ai.usage.input_tokens" = Empty,
            "gen_ai.usage.output_tokens" = Empty,
            "gen_ai.usage.cache_read.input_tokens" = Empty,
            "halo.steps" = Empty,
        );
        let events = async_stream::try_stream! {
            match input {
                Some(input) => self.log.push(Message::user(input)),
                None => {
                    let resumable = match self.log.messages().last() {
                        None => false,
                        Some(Message::Assistant(turn)) => !turn.tool_calls.is_empty(),
                        Some(_) => true,
                    };
                    if !resumable {
                        Err(HaloError::NothingToResume)?;
                    }
                }
            }
            let mut run_stats = AgentStats::default();
            let mut steps: Vec<StepResult> = Vec::new();
            loop {
                record_run(&run_stats);
                if steps.len() >= self.max_steps {
                    let text = steps.last().map(|s| s.message.text.clone()).unwrap_or_default();
                    Err(HaloError::MaxStepsReached {
                        max_steps: self.max_steps,
                        partial: Box::new(GenerateTextResult { text, steps: steps.clone(), stats: run_stats }),
                    })?;
                }
                let step_no = steps.len() + 1;
                yield AgentEvent::StepStart { step: step_no };

                let fingerprint = self.prefix.fingerprint();
                if self.last_fingerprint.is_some_and(|last| last != fingerprint) {
                    run_stats.prefix_fingerprint_changes += 1;
                    self.stats.prefix_fingerprint_changes += 1;
                    tracing::info!(
                        "halo.prefix.fingerprint" = %fingerprint,
                        "the stable prefix changed: expect one prompt-cache miss"
                    );
                }
                self.last_fingerprint = Some(fingerprint);

                let history = self.log.to_vec();
                let planned = CacheLedger::plan(&self.prefix, &history);
                let step_span = tracing::info_span!("step", "halo.step" = step_no);
                let chat_span = chat_span(&*self.model, &step_span);
                let request = ModelRequest {
                    prefix: &self.prefix,
                    history: &history,
                    options: &self.options,
                    session_id: self.session_id.as_deref(),
                };
                let response = if streaming {
                    let mut model_events = self.model.stream(request);
                    let mut ids: Vec<String> = Vec::new();
                    let mut finished = None;
                    while let Some(event) = model_events.next().instrument(chat_span.clone()).await {
                        match event.inspect_err(|e| warn_failed(&chat_span, e))? {
                            ModelStreamEvent::TextDelta(delta) => yield AgentEvent::TextDelta(delta),
                            ModelStreamEvent::ReasoningDelta(delta) => yield AgentEvent::ReasoningDelta(delta),
                            ModelStreamEvent::ToolCallStart { index, id, name } => {
                                if ids.len() <= index {
                                    ids.resize(index + 1, String::new());
                                }
                                ids[index] = id.clone();
                                yield AgentEvent::ToolCallStart { id, name };
                            }
                            ModelStreamEvent::ToolCallDelta { index, arguments } => {
                                let id = ids.get(index).cloned().unwrap_or_default();
                                yield AgentEvent::ToolCallDelta { id, arguments };
                            }
                            ModelStreamEvent::Finish(response) => {
                                finished = Some(response);
                                break;
                            }
                        }
                    }
                    finished.ok_or_else(|| {
                        let e = ModelError::Truncated("the model's stream ended before its final event".into());
                        warn_failed(&chat_span, &e);
                        e
                    })?
                } else {
                    self.model
                        .generate(request)
                        .instrument(chat_span.clone())
                        .await
                        .inspect_err(|e| warn_failed(&chat_span, e))?
                };
                record_response(&chat_span, &response);
                // The model call is over: close its span before the tools run, so its
                // duration is the call's alone.
                drop(chat_span);
                run_stats.record(&response.usage);
                self.stats.record(&response.usage);
                let cache = self.ledger.record(planned, &response.usage);
                let expected = cache.expected_cached_tokens.unwrap_or(0);
                run_stats.expected_cached_tokens += expected;
                self.stats.expected_cached_tokens += expected;
                if let crate::ledger::CacheVerdict::Bust { cause } = &cache.verdict {
                    run_stats.cache_busts += 1;
                    self.stats.cache_busts += 1;
                    tracing::warn!(
                        "halo.cache.expected_tokens" = expected,
                        "halo.cache.read_tokens" = cache.observed_cached_tokens.unwrap_or(0),
                        "prompt-cache bust: {cause}"
                    );
                    yield AgentEvent::CacheBust(Box::new(cache.clone()));
                }

                for call in &response.message.tool_calls {
                    yield AgentEvent::ToolCall(call.clone());
                }
                let mut results = Vec::with_capacity(response.message.tool_calls.len());
                for call in &response.message.tool_calls {
                    let result = self.run_tool(call).instrument(step_span.clone()).await?;
                    run_stats.tool_calls += 1;
                    self.stats.tool_calls += 1;
                    yield AgentEvent::ToolResult(result.clone());
                    results.push(result);
                }
                self.log.push_step(
                    Message::Assistant(response.message.clone()),
                    results.iter().cloned().map(Message::Tool),
                );
                let step = StepResult {
                    message: response.message,
                    finish_reason: response.finish_reason,
                    usage: response.usage,
                    tool_results: results,
                    prefix_fingerprint: fingerprint,
                    cache,
                };
                let done = step.message.tool_calls.is_empty();
                drop(step_span);
                yield AgentEvent::StepFinish(Box::new(step.clone()));
                steps.push(step);
                if done {
                    record_run(&run_stats);
                    let text = steps.last().map(|s| s.message.text.clone()).unwrap_or_default();
                    yield AgentEvent::Finish(Box::new(GenerateTextResult { text, steps, stats: run_stats }));
                    break;
                }
            }
        };
        instrument_stream(events, span)
    }

    async fn run_tool(&self, call: &ToolCall) -> Result<ToolResult, HaloError> {
        let span = tracing::info_span!(
            "execute_tool",
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = call.name.as_str(),
            "gen_ai.tool.call.id" = call.id.as_str(),
            "halo.tool.is_error" = Empty,
        );
        let result = self.run_hooked(call).instrument(span.clone()).await;
        match result {
            Ok(r) => {
                span.record("halo.tool.is_error", r.is_error);
                Ok(r)
            }
            Err(e) => Err(e),
        }
    }

    /// The hook pipeline around one tool call (see [`crate::hook`]).
    async fn run_hooked(&self, call: &ToolCall) -> Result<ToolResult, HaloError> {
        let mut result = match self.tools.check(call) {
            Err(message) => ToolResult::error(call, message),
            Ok(mut args) => {
                let mut denied = None;
                for hook in &self.hooks {
                    match hook.before_tool_call(call, &args).await {
                        ToolCallDecision::Allow => {}
                        ToolCallDecision::Rewrite(new_args) => {
                            let errors = self.tools.schema_errors(&call.name, &new_args);
                            if let Some(problem) = match errors {
                                Ok(e) if e.is_empty() => None,
                                Ok(e) => Some(e.join("; ")),
                                Err(unknown) => Some(unknown),
                            } {
                                denied = Some(format!(
                                    "`{}` was not run: a tool hook of this session changed its arguments into ones that do not fit its schema ({problem}); your own arguments were valid, so do not retry the same call unchanged",
                                    call.name
                                ));
                                break;
                            }
                            args = new_args;
                        }
                        ToolCallDecision::Deny(message) => {
                            tracing::info!(tool = %call.name, %message, "a tool hook denied the call");
                            denied = Some(message);
                            break;
                        }
                        ToolCallDecision::Abort(reason) => {
                            tracing::info!(tool = %call.name, %reason, "a tool hook aborted the run");
                            return Err(HaloError::Aborted {
                                tool: call.name.clone(),
                                reason,
                            });
                        }
                    }
                }
                match denied {
                    Some(message) => ToolResult::error(call, message),
                    None => self
                        .tools
                        .execute_checked(call, args)
                        .await
                        .map_err(|message| HaloError::ToolFatal {
                            tool: call.name.clone(),
                            message,
                        })?,
                }
            }
        };
        for hook in &self.hooks {
            result = hook.after_tool_call(call, result).await;
        }
        Ok(result)
    }
}

/// Polls `stream` inside `span`, as `Instrument` does for a future.
fn instrument_stream<S: Stream + Send>(
    stream: S,
    span: tracing::Span,
) -> impl Stream<Item = S::Item> + Send {
    let mut stream = Box::pin(stream);
    futures::stream::poll_fn(move |cx| {
        let _entered = span.enter();
        stream.as_mut().poll_next(cx)
    })
}

fn chat_span(model: &dyn crate::ModelAdapter, step: &tracing::Span) -> tracing::Span {
    tracing::info_span!(
        parent: step,
        "chat",
        "gen_ai.operation.name" = "chat",
        "gen_ai.system" = model.provider(),
        "gen_ai.request.model" = model.model_name(),
        "gen_ai.response.model" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "gen_ai.usage.cache_creation.input_tokens" = Empty,
    )
}

fn warn_failed(span: &tracing::Span, error: &ModelError) {
    tracing::warn!(parent: span, error = %error, "model call failed");
}

/// Records the run's totals on the current (`invoke_agent`) span.
fn record_run(stats: &AgentStats) {
    let span = tracing::Span::current();
    span.record("gen_ai.usage.input_tokens", stats.input_tokens);
    span.record("gen_ai.usage.output_tokens", stats.output_tokens);
    span.record(
        "gen_ai.usage.cache_read.input_tokens",
        stats.cache_read_tokens,
    );
    span.record("halo.steps", stats.steps);
}

fn record_response(span: &tracing::Span, response: &ModelResponse) {
    if let Some(m) = &response.model {
        span.record("gen_ai.response.model", m.as_str());
    }
    span.record(
        "gen_ai.response.finish_reasons",
        format!("{:?}", response.finish_reason),
    );
    record_usage(span, &response.usage);
}

fn record_usage(span: &tracing::Span, usage: &Usage) {
    if let Some(n) = usage.input_tokens {
        span.record("gen_ai.usage.input_tokens", n);
    }
    if let Some(n) = usage.output_tokens {
        span.record("gen_ai.usage.output_tokens", n);
    }
    if let Some(n) = usage.cache_read_tokens {
        span.record("gen_ai.usage.cache_read.input_tokens", n);
    }
    if let Some(n) = usage.cache_write_tokens {
        span.record("gen_ai.usage.cache_creation.input_tokens", n);
    }
}
