//! Tools: the typed [`Tool`] trait for authors, the object-safe [`DynTool`] that every tool
//! is (MCP tools and agent tools implement it directly), the [`ToolContext`] each call and
//! hook gets, and the [`ToolRegistry`] that checks and runs tool calls.
//!
//! The registry turns every way a call can go wrong into a [`ToolResult`] with
//! `is_error: true` that the model reads and can correct: an unknown tool name, arguments
//! that are not JSON, arguments that do not fit the tool's JSON Schema, and a tool that
//! fails. Only [`ToolError::Fatal`] ends the run.

mod context;
mod registry;

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{ToolCall, ToolResult};
use crate::prefix::ToolSpec;
use crate::stats::AgentStats;

pub use context::ToolContext;
pub use registry::ToolRegistry;

/// What a tool returns to the model.
///
/// Build it with [`text`](Self::text) or [`error`](Self::error) and the `with_*` methods;
/// the fields are public for reading. Serializes with serde, so a caller's result can be
/// journaled before it is given to a run ([`crate::driver`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The text the model reads.
    pub content: String,
    /// Marks the result as an error for the model (the run goes on).
    pub is_error: bool,
    /// The counters of the model calls the tool made itself — a sub-agent's or a plan's run
    /// ([`crate::delegate`]): the engine adds them to the calling agent's [`AgentStats`]
    /// ([`AgentStats::delegated_steps`] counts their model calls). Not part of the result
    /// the model reads, and not journaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<AgentStats>,
    /// Marks the logged result discardable: a context strategy drops or evicts it first
    /// (a loaded skill body, which the model can load again). Set it with
    /// [`discardable`](Self::discardable).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub discardable: bool,
}

impl ToolOutput {
    /// A successful output.
    pub fn text(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            ..ToolOutput::default()
        }
    }
    /// An error output for the model: `content` exactly as given, marked `is_error`; the run
    /// goes on. `Err(ToolError::Failed(msg))` reads the same to the model, prefixed
    /// `error: `; use whichever fits the code (a `?` on a failure gives the `Err` form).
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
            ..ToolOutput::default()
        }
    }

    /// Attaches the counters of the model calls the tool made (see [`stats`](Self::stats)).
    pub fn with_stats(mut self, stats: AgentStats) -> Self {
        self.stats = Some(stats);
        self
    }

    /// This output, its logged result marked discardable
    /// ([`MessageLog::is_discardable`](crate::MessageLog::is_discardable)): a context
    /// strategy drops or evicts it before anything else.
    ///
    /// ```
    /// use halo_core::ToolOutput;
    /// assert!(ToolOutput::text("skill body").discardable().discardable);
    /// ```
    #[must_use]
    pub fn discardable(mut self) -> Self {
        self.discardable = true;
        self
    }
}

impl From<String> for ToolOutput {
    fn from(s: String) -> Self {
        ToolOutput::text(s)
    }
}

impl From<&str> for ToolOutput {
    fn from(s: &str) -> Self {
        ToolOutput::text(s)
    }
}

/// A result as the output it came from: its content, `is_error` and `discardable` kept (so a
/// result run with [`HaloAgent::run_tool_call`](crate::HaloAgent::run_tool_call) can be
/// given back with `submit_tool_result` unchanged).
///
/// ```
/// use halo_core::{ToolCall, ToolOutput, ToolResult};
/// let call = ToolCall::new("c1", "read", "{}");
/// let output = ToolOutput::from(ToolResult::error(&call, "no such file"));
/// assert!(output.is_error);
/// assert_eq!(output.content, "no such file");
/// ```
impl From<ToolResult> for ToolOutput {
    fn from(r: ToolResult) -> Self {
        ToolOutput {
            content: r.content.into(),
            is_error: r.is_error,
            stats: None,
            discardable: r.discardable,
        }
    }
}

/// Why a tool call failed, split by audience: the model sees `InvalidArguments` and
/// `Failed` as an error tool result and can try again; `Fatal` ends the run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments were wrong in a way the schema could not express.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool ran and failed; the message tells the model what happened.
    #[error("{0}")]
    Failed(String),
    /// The run cannot go on (a broken sandbox, a user abort).
    #[error("fatal tool error: {0}")]
    Fatal(String),
}

/// A tool with typed arguments. The parameter schema is derived from `Args` with schemars
/// 1.x ([`schema_for`]): doc comments on fields become `description`s the model reads.
///
/// ```
/// use halo_core::tool::{Tool, ToolError, ToolOutput};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// struct Add;
/// #[derive(Deserialize, JsonSchema)]
/// struct AddArgs {
///     /// The first addend.
///     a: i64,
///     /// The second addend.
///     b: i64,
/// }
///
/// impl Tool for Add {
///     type Args = AddArgs;
///     fn name(&self) -> &str { "add" }
///     fn description(&self) -> &str { "Adds two integers." }
///     async fn call(&self, args: AddArgs) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text((args.a + args.b).to_string()))
///     }
/// }
/// ```
///
/// # Which schemars
///
/// `Args` must implement schemars **1.x**'s `JsonSchema`. With `schemars = "1"` in your
/// `Cargo.toml`, derive it as above. If your crate uses schemars 0.8 (or none), the derive
/// from 0.8 implements a different trait and the `Tool` impl fails with "the trait bound
/// `…: JsonSchema` is not satisfied"; derive through halo-core's re-export instead, and tell
/// the derive where schemars is with `#[schemars(crate = ...)]`:
///
/// ```
/// use halo_core::tool::{Tool, ToolError, ToolOutput};
/// use serde::Deserialize;
///
/// #[derive(Deserialize, halo_core::JsonSchema)]
/// #[schemars(crate = "halo_core::schemars")]
/// struct EchoArgs {
///     /// The text to send back.
///     text: String,
/// }
///
/// struct Echo;
/// impl Tool for Echo {
///     type Args = EchoArgs;
///     fn name(&self) -> &str { "echo" }
///     fn description(&self) -> &str { "Sends the text back." }
///     async fn call(&self, args: EchoArgs) -> Result<ToolOutput, ToolError> {
///         Ok(args.text.into())
///     }
/// }
/// ```
///
/// # Why `call` is not `#[async_trait]`
///
/// `Tool` is never a trait object: its `Args` type differs from tool to tool, so the
/// registry holds every tool as an `Arc<dyn DynTool>` ([`DynTool`] is the `#[async_trait]`
/// one), and the blanket `impl<T: Tool> DynTool for T` boxes each call once. So `call`
/// returns a plain `impl Future + Send`: a tool author writes `async fn call` with no
/// attribute on the impl, and the future is not boxed a second time.
pub trait Tool: Send + Sync + 'static {
    /// The arguments object: deserialized from the model's JSON and described by its
    /// schemars 1.x schema (see [Which schemars](Tool#which-schemars)).
    type Args: DeserializeOwned + JsonSchema + Send;

    /// The tool's name (`[a-zA-Z0-9_-]{1,64}`), stable across runs: it is in the cached prefix.
    fn name(&self) -> &str;

    /// What the tool does, for the model; stable across runs.
    fn description(&self) -> &str;

    /// What the tool promises about its effects (default: nothing; see [`ToolAnnotations`]).
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default()
    }

    /// Runs the tool.
    ///
    /// # Errors
    /// [`ToolError`]: `Failed` and `InvalidArguments` are shown to the model, `Fatal` ends the run.
    fn call(&self, args: Self::Args) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;

    /// Runs the tool with the call's [`ToolContext`] (its id, annotations, the run's cancel
    /// token). The agent calls this one; the default calls [`call`](Self::call). Implement it
    /// when the tool needs the context, and let `call` run with
    /// [`ToolContext::detached`].
    ///
    /// # Errors
    /// As [`call`](Self::call).
    fn call_with(
        &self,
        args: Self::Args,
        context: &ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        let _ = context;
        self.call(args)
    }
}

/// What a tool promises about its effects, in the words of MCP's tool annotations
/// (<https://modelcontextprotocol.io/specification/2025-06-18/server/tools#tool>:
/// `readOnlyHint`, `idempotentHint`, `openWorldHint`), and how the agent treats its calls.
/// They are not part of the prompt and cost no cache miss; every hook sees them
/// ([`ToolContext::annotations`]).
///
/// - A **read-only** tool changes nothing, so the agent runs it concurrently with the other
///   read-only (and [`concurrent`](Self::concurrent)) calls of a step (the sandbox's `read`,
///   `ls`, `glob`, `grep`), and runs it again when a resumed run finds its call without a
///   result.
/// - An **idempotent** tool may change things, but calling it twice with the same arguments
///   does what calling it once does: a resumed run runs it again too; it still runs alone.
/// - An **open-world** tool may reach beyond the workspace (run a command, call a service):
///   the default, as in MCP. A tool that only changes files of the workspace (the sandbox's
///   `write`, `edit`) says `open_world: false`. A permission policy reads the three:
///   read-only tools read, closed-world ones write, the rest run things.
/// - A tool that **needs approval** never runs before someone approves the call: the run
///   pauses ([`crate::driver`]) or, with no one to ask, the call is denied at once.
/// - A tool that **runs the agent** (a plan, a sub-agent: [`crate::delegate`]) gets the agent
///   handle in its [`ToolContext`]; what it does is what its own calls do, each through the
///   hooks.
///
/// A call of a tool that is neither read-only nor idempotent is journaled as started before
/// it runs; one found started without a result after a crash is closed with an error result
/// saying it may have run ([`request::MAY_HAVE_RUN`](crate::request::MAY_HAVE_RUN)), never
/// run twice.
///
/// Build them from [`default`](Self::default) (no promise, open world) or
/// [`READ_ONLY`](Self::READ_ONLY) with the `with_*` methods:
///
/// ```
/// use halo_core::ToolAnnotations;
/// let edit = ToolAnnotations::default().with_open_world(false);
/// assert!(!edit.read_only && !edit.open_world && !edit.rerun_safe());
/// assert!(ToolAnnotations::READ_ONLY.concurrency_safe());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ToolAnnotations {
    /// The tool does not change its environment (MCP `readOnlyHint`).
    pub read_only: bool,
    /// Repeating a call with the same arguments has no further effect (MCP `idempotentHint`).
    pub idempotent: bool,
    /// The tool may reach beyond the workspace: run commands, call services (MCP
    /// `openWorldHint`; default `true`).
    pub open_world: bool,
    /// Calls may run at the same time as the step's other concurrent and read-only calls,
    /// though the tool is not read-only (two sub-agents of one step).
    pub concurrent: bool,
    /// A call runs only once approved ([`HaloAgent::approve`](crate::HaloAgent::approve)).
    pub needs_approval: bool,
    /// The tool runs the calling agent: its [`ToolContext::agent`] is set.
    pub runs_agent: bool,
}

impl Default for ToolAnnotations {
    /// No promise: not read-only, not idempotent, open world.
    fn default() -> Self {
        ToolAnnotations {
            read_only: false,
            idempotent: false,
            open_world: true,
            concurrent: false,
            needs_approval: false,
            runs_agent: false,
        }
    }
}

impl ToolAnnotations {
    /// A tool that changes nothing (so also safe to run again) and stays in the workspace.
    pub const READ_ONLY: ToolAnnotations = ToolAnnotations {
        read_only: true,
        idempotent: true,
        open_world: false,
        concurrent: false,
        needs_approval: false,
        runs_agent: false,
    };

    /// Sets [`read_only`](Self::read_only).
    #[must_use]
    pub const fn with_read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// Sets [`idempotent`](Self::idempotent).
    #[must_use]
    pub const fn with_idempotent(mut self, yes: bool) -> Self {
        self.idempotent = yes;
        self
    }

    /// Sets [`open_world`](Self::open_world).
    #[must_use]
    pub const fn with_open_world(mut self, yes: bool) -> Self {
        self.open_world = yes;
        self
    }

    /// Sets [`concurrent`](Self::concurrent).
    #[must_use]
    pub const fn with_concurrent(mut self, yes: bool) -> Self {
        self.concurrent = yes;
        self
    }

    /// Sets [`needs_approval`](Self::needs_approval).
    #[must_use]
    pub const fn with_needs_approval(mut self, yes: bool) -> Self {
        self.needs_approval = yes;
        self
    }

    /// Sets [`runs_agent`](Self::runs_agent).
    #[must_use]
    pub const fn with_runs_agent(mut self, yes: bool) -> Self {
        self.runs_agent = yes;
        self
    }

    /// Whether calls may run concurrently with the step's other such calls.
    pub fn concurrency_safe(&self) -> bool {
        self.read_only || self.concurrent
    }

    /// Whether a call interrupted before its result may run again on resume.
    pub fn rerun_safe(&self) -> bool {
        self.read_only || self.idempotent
    }
}

/// The object-safe form of a tool: a spec and a call on JSON arguments, held by the
/// [`ToolRegistry`] as `Arc<dyn DynTool>`. Every [`Tool`] implements it; implement it
/// directly, in an impl marked `#[async_trait]` (re-exported as
/// [`halo_core::async_trait`](crate::async_trait)), for tools known only at runtime (MCP)
/// and for tools that run the agent ([`crate::delegate`]).
///
/// ```
/// use halo_core::{async_trait, DynTool, ToolContext, ToolError, ToolOutput, ToolSpec};
/// use serde_json::{Value, json};
///
/// /// A tool whose name and schema come from configuration.
/// struct Configured { name: String }
///
/// #[async_trait]
/// impl DynTool for Configured {
///     fn spec(&self) -> ToolSpec {
///         ToolSpec::new(&self.name, "Says hello.", json!({"type": "object"}))
///     }
///     async fn call_json(&self, _arguments: Value, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
///         Ok(format!("hello from {} (call {})", self.name, cx.call().id).into())
///     }
/// }
///
/// # futures::executor::block_on(async {
/// let tool: std::sync::Arc<dyn DynTool> = std::sync::Arc::new(Configured { name: "hi".into() });
/// let cx = ToolContext::detached(halo_core::ToolCall::new("c1", "hi", "{}"));
/// assert_eq!(tool.call_json(json!({}), &cx).await.unwrap().content, "hello from hi (call c1)");
/// # });
/// ```
#[async_trait]
pub trait DynTool: Send + Sync {
    /// Name, description and parameter schema.
    fn spec(&self) -> ToolSpec;

    /// What the tool promises about its effects (default: nothing).
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default()
    }

    /// Runs the tool on arguments already checked against the spec's schema, with the
    /// call's [`ToolContext`].
    ///
    /// # Errors
    /// [`ToolError`]: `Failed` and `InvalidArguments` are shown to the model, `Fatal` ends
    /// the run. For a [`Tool`], also `InvalidArguments` when the arguments do not deserialize
    /// into its `Args`.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the call; what the tool already did (a file written) is
    /// not undone.
    async fn call_json(
        &self,
        arguments: Value,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}

/// A set of tools that can change while an agent runs (an MCP server's tools after
/// `notifications/tools/list_changed`), added with
/// [`HaloAgentBuilder::tool_source`](crate::HaloAgentBuilder::tool_source).
///
/// The agent reads [`tools`](Self::tools) when it is built and again at each step boundary,
/// before a model call, whenever [`version`](Self::version) differs from the version it last
/// read: the source's old tools leave the [`StablePrefix`](crate::StablePrefix) and the
/// registry, the new ones are added after the other tools. So the prefix changes only between
/// steps, and the [`CacheLedger`](crate::CacheLedger) records the next call as one
/// `ExpectedMiss`. A version bump whose tool specs are unchanged leaves the prefix as it is.
///
/// Both methods are synchronous and cheap (a source keeps its tool list in memory and
/// updates it in the background); the run engine calls them at step boundaries.
///
/// ```
/// use std::sync::Arc;
/// use halo_core::{DynTool, ToolSource};
///
/// /// A source whose tools never change.
/// struct Fixed(Vec<Arc<dyn DynTool>>);
/// impl ToolSource for Fixed {
///     fn version(&self) -> u64 { 0 }
///     fn tools(&self) -> Vec<Arc<dyn DynTool>> { self.0.clone() }
/// }
/// let source: Arc<dyn ToolSource> = Arc::new(Fixed(Vec::new()));
/// assert!(source.tools().is_empty());
/// ```
pub trait ToolSource: Send + Sync {
    /// A number that changes whenever [`tools`](Self::tools) would answer differently.
    fn version(&self) -> u64;

    /// The source's tools as of [`version`](Self::version). A tool whose name is already
    /// taken by another tool of the agent is left out (with a `tracing` warning).
    fn tools(&self) -> Vec<Arc<dyn DynTool>>;
}

/// The typed-to-erased bridge: deserializes the JSON arguments into `T::Args`, then calls
/// [`Tool::call_with`].
#[async_trait]
impl<T: Tool> DynTool for T {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(self.name(), self.description(), schema_for::<T::Args>())
    }

    fn annotations(&self) -> ToolAnnotations {
        Tool::annotations(self)
    }

    async fn call_json(
        &self,
        arguments: Value,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: T::Args = serde_json::from_value(arguments)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        self.call_with(args, context).await
    }
}

/// Arguments of a tool that takes none: `{}`.
#[derive(Debug, Clone, Default, serde::Deserialize, JsonSchema)]
pub struct NoArgs {}

/// The JSON Schema of `T` as tools use it: draft 2020-12, subschemas inlined (no `$ref`,
/// which some providers reject), no `$schema` key.
pub fn schema_for<T: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// The result the model reads for a tool's answer, and the counters the tool reported
/// ([`ToolOutput::stats`]).
///
/// # Errors
/// [`ToolError::Fatal`]'s message; every other failure is an error result.
pub(crate) fn output_result(
    call: &ToolCall,
    answer: Result<ToolOutput, ToolError>,
) -> Result<(ToolResult, Option<AgentStats>), String> {
    match answer {
        Ok(out) => Ok((
            ToolResult {
                is_error: out.is_error,
                discardable: out.discardable,
                ..ToolResult::ok(call, out.content)
            },
            out.stats,
        )),
        Err(ToolError::Fatal(msg)) => Err(msg),
        Err(e @ ToolError::InvalidArguments(_)) => Ok((
            ToolResult::error(
                call,
                format!("{e}; call `{}` again with corrected arguments", call.name),
            ),
            None,
        )),
        Err(e) => Ok((ToolResult::error(call, format!("error: {e}")), None)),
    }
}
