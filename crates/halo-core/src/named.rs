//! Named agents as tools: a pre-declared agent — its own instructions, tools and model — that
//! another agent calls as a tool (the OpenAI Agents SDK's `Agent.as_tool`).
//!
//! [`HaloAgent::as_tool`] turns a built agent into a [`NamedAgent`], a [`DynTool`] with one
//! string argument (`task` by default): each call runs the agent on the task and returns its
//! final answer, cut to a bound ([`NamedAgent::max_result_bytes`]), as the tool result. The
//! run's counters roll into the caller's [`AgentStats`] as a sub-agent's do
//! ([`ToolOutput::with_stats`], [`AgentStats::delegated_steps`]). It runs in one of three
//! contexts ([`AgentContext`]):
//!
//! - [`Fresh`](AgentContext::Fresh) (the default): a new conversation per call — the agent's
//!   own prefix, an empty history, the task as its first message. The same agent sends the
//!   same prefix bytes every call, so a second call reads its prefix from the provider's
//!   cache; the agent keeps its cache ledger across calls, so the first request of a call is
//!   judged against the last request of the one before (a hit on the prefix, not a cold
//!   start). Calls are independent and run at the same time
//!   ([`ToolAnnotations::concurrent`]).
//! - [`Fork`](AgentContext::Fork): the caller's conversation — the caller's history as it
//!   stood before the step that calls the tool, then the task — with the agent's own prefix.
//!   The caller's ledger comes along, so the first request's other prefix is the one
//!   expected miss it counts, never a bust. The tool runs the agent
//!   ([`ToolAnnotations::runs_agent`]) to read the caller's history.
//! - [`Continue`](AgentContext::Continue): one conversation across calls, as a team member
//!   has — each task is the next user turn of the agent's own history; calls run one at a
//!   time, and the agent's session store (if it has one) journals it.
//!
//! The agent runs with its own tools and tool hooks, limits and strategies, at one level
//! deeper than its caller ([`ToolContext::depth`]; [`NamedAgent::max_depth`] bounds it). It
//! cannot pause a run: a call that needs approval is denied at once (no one can answer
//! inside a tool call), and a client-side tool's call ends the call with an error result.
//! While the caller's run is streamed, the agent's steps, tool calls and text reach the
//! caller's events ([`crate::inner`]), tagged with its name.
//!
//! ```
//! use halo_core::{HaloAgent, StablePrefix, testing::ScriptedModel};
//! use serde_json::json;
//!
//! # futures::executor::block_on(async {
//! let model = ScriptedModel::new()
//!     .tool_call("researcher", json!({"task": "otters"}))
//!     .text("Otters hold hands.") // the researcher's answer
//!     .text("They hold hands while they sleep.");
//! let researcher = HaloAgent::builder(model.clone())
//!     .name("researcher")
//!     .system("You research animals; answer with facts.")
//!     .build()
//!     .as_tool("researcher", "Looks facts up; give it a topic.");
//! let mut writer = HaloAgent::builder(model.clone()).tool(researcher).unwrap().build();
//! let out = writer.generate_text("Write about otters.").await.unwrap();
//! assert_eq!(out.steps[0].tool_results[0].content, "Otters hold hands.");
//! assert_eq!(out.stats.delegated_steps, 1); // the researcher's model call
//! let requests = model.requests();
//! let own = StablePrefix::new("You research animals; answer with facts.");
//! assert_eq!(requests[1].fingerprint, own.fingerprint()); // its own prefix
//! assert_eq!(requests[1].history.len(), 1); // a fresh conversation: the task
//! # });
//! ```

use std::sync::Mutex;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::agent::HaloAgent;
use crate::engine::RunState;
use crate::error::HaloError;
use crate::inner::Tap;
use crate::ledger::CacheLedger;
use crate::log::MessageLog;
use crate::output::{ObjectResult, Output};
use crate::prefix::ToolSpec;
use crate::run::GenerateTextResult;
use crate::stats::AgentStats;
use crate::text::cut_middle;
use crate::tool::{DynTool, ToolAnnotations, ToolContext, ToolError, ToolOutput};

/// The most bytes of a named agent's answer the tool result carries by default: 16,000.
pub const DEFAULT_RESULT_BYTES: usize = 16_000;

/// How deep named agents nest by default: a call from an agent at depth 3 or deeper is
/// refused.
pub const DEFAULT_MAX_DEPTH: usize = 3;

/// What a named agent's run starts from (see the [module docs](self)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentContext {
    /// A new conversation per call.
    #[default]
    Fresh,
    /// The caller's conversation so far, under the agent's own prefix.
    Fork,
    /// One conversation across calls, one call at a time.
    Continue,
}

type Factory = dyn Fn() -> Result<HaloAgent, HaloError> + Send + Sync;

enum Source {
    /// The agent itself: a template for fresh and forked runs, the conversation itself for
    /// continued ones.
    Agent(Box<futures::lock::Mutex<HaloAgent>>),
    /// A new agent per call.
    Factory(Box<Factory>),
}

/// The agent of one call: the continued agent, locked for the call (with its own tap,
/// depth and pause setting to put back), or an agent of the call's own (and whether it is a
/// fresh run, whose ledger is kept for the next).
enum Running<'a> {
    Shared(
        futures::lock::MutexGuard<'a, HaloAgent>,
        (Option<Tap>, usize, bool),
    ),
    Own(Box<HaloAgent>, bool),
}

impl Running<'_> {
    fn agent(&mut self) -> &mut HaloAgent {
        match self {
            Running::Shared(agent, _) => agent,
            Running::Own(agent, _) => agent,
        }
    }
}

/// A named agent as a tool (see the [module docs](self)); [`HaloAgent::as_tool`] builds one.
pub struct NamedAgent {
    name: String,
    description: String,
    argument: String,
    argument_description: String,
    source: Source,
    context: AgentContext,
    max_result_bytes: usize,
    max_depth: usize,
    /// The ledger of the last fresh run, for the next one's predictions.
    ledger: Mutex<Option<CacheLedger>>,
    /// The counters of every run so far.
    stats: Mutex<AgentStats>,
}

impl std::fmt::Debug for NamedAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedAgent")
            .field("name", &self.name)
            .field("context", &self.context)
            .field("max_result_bytes", &self.max_result_bytes)
            .field("max_depth", &self.max_depth)
            .finish_non_exhaustive()
    }
}

impl HaloAgent {
    /// This agent as a tool named `name` of another agent, described to the model as
    /// `description` (say what the agent is for and what to give it): see [`crate::named`].
    /// Its history so far is where a [`Continue`](AgentContext::Continue)d conversation
    /// starts; fresh and forked runs start from its configuration alone.
    pub fn as_tool(self, name: impl Into<String>, description: impl Into<String>) -> NamedAgent {
        NamedAgent::new(
            name.into(),
            description.into(),
            Source::Agent(Box::new(futures::lock::Mutex::new(self))),
        )
    }
}

impl NamedAgent {
    fn new(name: String, description: String, source: Source) -> Self {
        NamedAgent {
            name,
            description,
            argument: "task".to_string(),
            argument_description: "The task for the agent, complete: what to do and everything \
                                   it needs to know."
                .to_string(),
            source,
            context: AgentContext::Fresh,
            max_result_bytes: DEFAULT_RESULT_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
            ledger: Mutex::new(None),
            stats: Mutex::new(AgentStats::default()),
        }
    }

    /// A tool named `name` whose every call runs a new agent from `factory` (a fresh
    /// context, whatever [`context`](Self::context) says).
    pub fn per_call(
        name: impl Into<String>,
        description: impl Into<String>,
        factory: impl Fn() -> Result<HaloAgent, HaloError> + Send + Sync + 'static,
    ) -> Self {
        NamedAgent::new(
            name.into(),
            description.into(),
            Source::Factory(Box::new(factory)),
        )
    }

    /// Sets what each run starts from (default [`AgentContext::Fresh`]).
    pub fn context(mut self, context: AgentContext) -> Self {
        self.context = context;
        self
    }

    /// Cuts the agent's answer at `bytes` (default [`DEFAULT_RESULT_BYTES`]), keeping its
    /// head and tail ([`cut_middle`]).
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes;
        self
    }

    /// Refuses calls from an agent at `depth` or deeper (default [`DEFAULT_MAX_DEPTH`]).
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth;
        self
    }

    /// Names the tool's one argument and describes it (default `task`).
    pub fn argument(mut self, name: impl Into<String>, description: impl Into<String>) -> Self {
        self.argument = name.into();
        self.argument_description = description.into();
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The counters of every run of the agent through this tool, summed.
    pub fn stats(&self) -> AgentStats {
        *self
            .stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs the agent on `task` as a call in `cx` would (the depth limit, the context,
    /// events to `cx`'s watcher), and returns its result and the counters of its model
    /// calls. For callers that want the whole result rather than the bounded tool output
    /// (a workflow step, a server that reports progress).
    ///
    /// # Errors
    /// The run's [`HaloError`]; [`HaloError::InvalidAgents`] when the call comes from an
    /// agent at the depth limit, or a forked run has no caller to fork.
    pub async fn run(
        &self,
        task: &str,
        cx: &ToolContext,
    ) -> Result<(GenerateTextResult, AgentStats), HaloError> {
        let mut run = self.start(cx).await?;
        let before = run.agent().stats();
        let result = run.agent().generate_text(task).await;
        let stats = self.end(run, before);
        result.map(|r| (r, stats))
    }

    /// [`run`](Self::run) with a typed answer ([`HaloAgent::generate_text_with_output`]):
    /// the agent's tools stay available, and its final answer must fit `output`'s schema.
    ///
    /// # Errors
    /// As [`run`](Self::run); [`HaloError::InvalidObject`] when no answer fit.
    pub async fn run_object<T: DeserializeOwned>(
        &self,
        output: Output<T>,
        task: &str,
        cx: &ToolContext,
    ) -> Result<(ObjectResult<T>, AgentStats), HaloError> {
        let mut run = self.start(cx).await?;
        let before = run.agent().stats();
        let result = run.agent().generate_text_with_output(output, task).await;
        let stats = self.end(run, before);
        result.map(|r| (r, stats))
    }

    /// The agent a call runs, set up as the call's: one level deeper than the caller, its
    /// events to the caller's watcher, no pause.
    async fn start(&self, cx: &ToolContext) -> Result<Running<'_>, HaloError> {
        if cx.depth() >= self.max_depth {
            return Err(HaloError::InvalidAgents {
                message: format!(
                    "`{}` is not available here: the calling agent is at depth {} and named \
                     agents nest at most {} deep; do the task yourself",
                    self.name,
                    cx.depth(),
                    self.max_depth
                ),
            });
        }
        let mut run = match (&self.source, self.context) {
            (Source::Agent(agent), AgentContext::Continue) => {
                let mut agent = agent.lock().await;
                agent.discard_pending();
                let config = agent.config();
                let saved = (
                    config.tap.clone(),
                    config.depth,
                    config.limits.pause_for_approvals,
                );
                Running::Shared(agent, saved)
            }
            (Source::Agent(agent), context) => {
                let (config, peers) = agent.lock().await.template();
                let state = match context {
                    AgentContext::Fork => {
                        let Some(caller) = cx.agent() else {
                            return Err(HaloError::InvalidAgents {
                                message: format!(
                                    "`{}` continues the calling agent's conversation and runs \
                                     only inside an agent",
                                    self.name
                                ),
                            });
                        };
                        caller.fork_state()
                    }
                    _ => RunState::with_ledger(
                        MessageLog::with_capacity(config.limits.log_capacity),
                        self.last_ledger(),
                    ),
                };
                let fresh = context == AgentContext::Fresh;
                Running::Own(
                    Box::new(HaloAgent::from_template(config, peers, state)),
                    fresh,
                )
            }
            (Source::Factory(factory), _) => Running::Own(Box::new(factory()?), false),
        };
        let config = run.agent().config_mut();
        config.depth = cx.depth() + 1;
        config.tap = cx
            .events()
            .cloned()
            .map(|sink| Tap::new(sink, &cx.call().id, &self.name));
        config.limits.pause_for_approvals = false;
        Ok(run)
    }

    /// After a run: its counters (since `before`) summed into the tool's, a fresh run's
    /// ledger kept, a continued agent's own settings put back.
    fn end(&self, mut run: Running<'_>, before: AgentStats) -> AgentStats {
        let stats = run.agent().stats().since(&before);
        {
            // The agent's own counters, summed: its delegated steps are its tools' runs.
            let mut total = self
                .stats
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let delegated = total.delegated_steps + stats.delegated_steps;
            total.add_delegated(&stats);
            total.delegated_steps = delegated;
        }
        match run {
            Running::Shared(mut agent, (tap, depth, pause)) => {
                let config = agent.config_mut();
                (config.tap, config.depth) = (tap, depth);
                config.limits.pause_for_approvals = pause;
            }
            Running::Own(agent, true) => self.keep_ledger(&agent),
            Running::Own(..) => {}
        }
        stats
    }

    fn last_ledger(&self) -> CacheLedger {
        self.ledger
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .unwrap_or_default()
    }

    fn keep_ledger(&self, agent: &HaloAgent) {
        *self
            .ledger
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(agent.cache_ledger().clone());
    }

    /// The tool output of a run: the answer cut to the bound, or an error result that says
    /// what happened; an abort or a fatal tool error in the agent ends the caller's run too.
    fn output(
        &self,
        run: Result<(GenerateTextResult, AgentStats), HaloError>,
    ) -> Result<ToolOutput, ToolError> {
        let name = &self.name;
        let bounded = |text: &str| {
            cut_middle(
                text,
                self.max_result_bytes,
                "the answer was longer than the limit",
            )
            .unwrap_or_else(|| text.to_string())
        };
        let stats = match &run {
            Ok((_, stats)) => Some(*stats),
            Err(_) => None,
        };
        let output = match run {
            Ok((result, _))
                if result.pending_tool_calls.is_empty() && result.pending_approvals.is_empty() =>
            {
                ToolOutput::text(bounded(&result.text))
            }
            Ok(_) => ToolOutput::error(format!(
                "the agent `{name}` stopped for tool calls its application must run; it cannot \
                 answer as a tool"
            )),
            Err(e @ (HaloError::Aborted { .. } | HaloError::ToolFatal { .. })) => {
                return Err(ToolError::Fatal(format!("in the agent `{name}`: {e}")));
            }
            Err(HaloError::MaxStepsReached { max_steps, partial }) => {
                return Ok(ToolOutput::error(format!(
                    "the agent `{name}` stopped after {max_steps} steps without a final \
                     answer; its last text: {}",
                    bounded(&partial.text)
                ))
                .with_stats(partial.stats));
            }
            Err(HaloError::InvalidAgents { message }) => ToolOutput::error(message),
            Err(e) => ToolOutput::error(format!(
                "the agent `{name}` failed: {e}; try again or do the task yourself"
            )),
        };
        Ok(match stats {
            Some(stats) => output.with_stats(stats),
            None => output,
        })
    }
}

#[async_trait::async_trait]
impl DynTool for NamedAgent {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            &self.name,
            &self.description,
            json!({
                "type": "object",
                "properties": {
                    self.argument.as_str(): {
                        "type": "string",
                        "description": self.argument_description,
                        "minLength": 1
                    }
                },
                "required": [self.argument],
                "additionalProperties": false
            }),
        )
    }

    fn annotations(&self) -> ToolAnnotations {
        match (&self.source, self.context) {
            (Source::Agent(_), AgentContext::Continue) => ToolAnnotations::default(),
            (Source::Agent(_), AgentContext::Fork) => ToolAnnotations::default()
                .with_runs_agent(true)
                .with_concurrent(true),
            _ => ToolAnnotations::default().with_concurrent(true),
        }
    }

    async fn call_json(&self, args: Value, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(task) = args[self.argument.as_str()].as_str() else {
            return Err(ToolError::InvalidArguments(format!(
                "`{}` must be a string",
                self.argument
            )));
        };
        if task.trim().is_empty() {
            return Ok(ToolOutput::error(format!(
                "`{}` is empty: give the agent a task",
                self.argument
            )));
        }
        self.output(self.run(task, cx).await)
    }
}
