//! Tools: the typed [`Tool`] trait for authors, the object-safe [`DynTool`] for tools
//! defined at runtime (MCP), and the [`ToolRegistry`] that runs tool calls.
//!
//! The registry turns every way a call can go wrong into a [`ToolResult`] with
//! `is_error: true` that the model reads and can correct: an unknown tool name, arguments
//! that are not JSON, arguments that do not fit the tool's JSON Schema, and a tool that
//! fails. Only [`ToolError::Fatal`] ends the run.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::message::{ToolCall, ToolResult};
use crate::prefix::{PrefixError, ToolSpec};
use crate::stats::AgentStats;

/// What a tool returns to the model.
///
/// Build it with [`text`](Self::text) or [`error`](Self::error) and the `with_*` methods;
/// the fields are public for reading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text the model reads.
    pub content: String,
    /// Marks the result as an error for the model (the run goes on).
    pub is_error: bool,
    /// The counters of the model calls the tool made itself — a sub-agent's or a plan's run
    /// ([`crate::delegate`]): the engine adds them to the calling agent's [`AgentStats`]
    /// ([`AgentStats::delegated_steps`] counts their model calls). Not part of the result
    /// the model reads, and not journaled.
    pub stats: Option<AgentStats>,
    /// Marks the logged result discardable: a context strategy drops or evicts it first
    /// (a loaded skill body, which the model can load again). Set it with
    /// [`discardable`](Self::discardable).
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
}

/// What a tool promises about its effects, in the words of MCP's tool annotations
/// (<https://modelcontextprotocol.io/specification/2025-06-18/server/tools#tool>:
/// `readOnlyHint`, `idempotentHint`). They are not part of the prompt and cost no cache miss.
///
/// - A **read-only** tool changes nothing, so the agent runs it concurrently with the other
///   read-only calls of a step (the sandbox's `read`, `ls`, `glob`, `grep`), and runs it
///   again when a resumed run finds its call without a result.
/// - An **idempotent** tool may change things, but calling it twice with the same arguments
///   does what calling it once does: a resumed run runs it again too; it still runs alone.
///
/// A call of a tool with neither, interrupted before its result was recorded, is closed with
/// an error result saying so ([`request::INTERRUPTED`](crate::request::INTERRUPTED)) instead
/// of being run twice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolAnnotations {
    /// The tool does not change its environment.
    pub read_only: bool,
    /// Repeating a call with the same arguments has no further effect.
    pub idempotent: bool,
}

impl ToolAnnotations {
    /// A tool that changes nothing (so also safe to run again).
    pub const READ_ONLY: ToolAnnotations = ToolAnnotations {
        read_only: true,
        idempotent: true,
    };

    /// Whether calls may run concurrently with the step's other such calls.
    pub fn concurrency_safe(&self) -> bool {
        self.read_only
    }

    /// Whether an interrupted call may run again on resume.
    pub fn rerun_safe(&self) -> bool {
        self.read_only || self.idempotent
    }
}

/// The object-safe form of a tool: a spec and a call on JSON arguments, held by the
/// [`ToolRegistry`] as `Arc<dyn DynTool>`. Every [`Tool`] implements it; implement it
/// directly, in an impl marked `#[async_trait]` (re-exported as
/// [`halo_core::async_trait`](crate::async_trait)), for tools known only at runtime (MCP).
///
/// ```
/// use halo_core::{async_trait, DynTool, ToolError, ToolOutput, ToolSpec};
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
///     async fn call_json(&self, _arguments: Value) -> Result<ToolOutput, ToolError> {
///         Ok(format!("hello from {}", self.name).into())
///     }
/// }
///
/// # futures::executor::block_on(async {
/// let tool: std::sync::Arc<dyn DynTool> = std::sync::Arc::new(Configured { name: "hi".into() });
/// assert_eq!(tool.call_json(json!({})).await.unwrap().content, "hello from hi");
/// # });
/// ```
#[async_trait::async_trait]
pub trait DynTool: Send + Sync {
    /// Name, description and parameter schema.
    fn spec(&self) -> ToolSpec;

    /// What the tool promises about its effects (default: nothing).
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default()
    }

    /// Runs the tool on arguments already checked against the spec's schema.
    ///
    /// # Errors
    /// [`ToolError`]: `Failed` and `InvalidArguments` are shown to the model, `Fatal` ends
    /// the run. For a [`Tool`], also `InvalidArguments` when the arguments do not deserialize
    /// into its `Args`.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the call; what the tool already did (a file written) is
    /// not undone.
    async fn call_json(&self, arguments: Value) -> Result<ToolOutput, ToolError>;
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
/// updates it in the background); they are called from the agent's run loop.
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
/// [`Tool::call`].
#[async_trait::async_trait]
impl<T: Tool> DynTool for T {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(self.name(), self.description(), schema_for::<T::Args>())
    }

    fn annotations(&self) -> ToolAnnotations {
        Tool::annotations(self)
    }

    async fn call_json(&self, arguments: Value) -> Result<ToolOutput, ToolError> {
        let args: T::Args = serde_json::from_value(arguments)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        self.call(args).await
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

struct Registered {
    /// `None` for a client-side tool: the caller runs its calls.
    tool: Option<Arc<dyn DynTool>>,
    /// The spec as registered (what a [`Toolbox`](crate::Toolbox) outside an
    /// agent lists; an agent's prefix holds its own copy).
    spec: ToolSpec,
    annotations: ToolAnnotations,
    validator: jsonschema::Validator,
    /// The parameter schema as compact JSON, quoted to a model whose arguments are not a
    /// JSON object.
    schema: String,
    /// `oneOf` / `anyOf` lists made only of `const`s (what schemars derives for an enum
    /// whose variants have doc comments), by their schema path: so an error can name the
    /// allowed values instead of "not valid under any of the schemas listed in 'oneOf'".
    choices: BTreeMap<String, Vec<Value>>,
}

/// Every `oneOf` / `anyOf` of `schema` whose entries all carry a `const`, by JSON pointer.
fn const_choices(schema: &Value, at: &str, out: &mut BTreeMap<String, Vec<Value>>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                let here = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                if let ("oneOf" | "anyOf", Value::Array(items)) = (key.as_str(), value) {
                    let consts: Option<Vec<Value>> =
                        items.iter().map(|i| i.get("const").cloned()).collect();
                    if let Some(consts) = consts.filter(|c| !c.is_empty()) {
                        out.insert(here.clone(), consts);
                    }
                }
                const_choices(value, &here, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                const_choices(item, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Tools by name, with their compiled parameter schemas and their executors (none for a
/// client-side tool). The specs themselves live in the [`StablePrefix`](crate::StablePrefix):
/// [`insert`](Self::insert) hands the spec back for it.
/// Cheap to clone: clones share the tools and their compiled schemas.
#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<Registered>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool.
    ///
    /// # Errors
    /// [`PrefixError::DuplicateTool`] when the name is taken, [`PrefixError::InvalidSchema`]
    /// when the parameter schema does not compile.
    pub fn insert(&mut self, tool: Arc<dyn DynTool>) -> Result<ToolSpec, PrefixError> {
        let spec = tool.spec();
        let annotations = tool.annotations();
        self.register(&spec, Some(tool), annotations)?;
        Ok(spec)
    }

    /// Registers a client-side tool: its calls are validated against `spec`'s schema and
    /// handed to the caller to run, in every mode (as the AI SDK does for a tool without
    /// `execute`).
    ///
    /// # Errors
    /// As [`insert`](Self::insert).
    pub fn insert_client(&mut self, spec: &ToolSpec) -> Result<(), PrefixError> {
        self.register(spec, None, ToolAnnotations::default())
    }

    fn register(
        &mut self,
        spec: &ToolSpec,
        tool: Option<Arc<dyn DynTool>>,
        annotations: ToolAnnotations,
    ) -> Result<(), PrefixError> {
        if self.tools.contains_key(&spec.name) {
            return Err(PrefixError::DuplicateTool(spec.name.clone()));
        }
        let validator = jsonschema::validator_for(&spec.parameters)
            .map_err(|_| PrefixError::InvalidSchema(spec.name.clone()))?;
        let mut choices = BTreeMap::new();
        const_choices(&spec.parameters, "", &mut choices);
        self.tools.insert(
            spec.name.clone(),
            Arc::new(Registered {
                tool,
                spec: spec.clone(),
                annotations,
                validator,
                schema: spec.parameters.to_string(),
                choices,
            }),
        );
        Ok(())
    }

    /// The annotations of the tool `name` (`None` for an unknown tool).
    pub fn annotations(&self, name: &str) -> Option<ToolAnnotations> {
        self.tools.get(name).map(|r| r.annotations)
    }

    /// The spec of the tool `name` as it was registered (`None` for an unknown tool).
    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name).map(|r| &r.spec)
    }

    /// The specs of every registered tool (client-side ones included), sorted by name.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.values().map(|r| &r.spec)
    }

    /// Whether `name` is a client-side tool (registered without an executor).
    pub fn is_client_side(&self, name: &str) -> bool {
        self.tools.get(name).is_some_and(|r| r.tool.is_none())
    }

    /// Removes a tool; returns whether it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.tools.remove(name).is_some()
    }

    /// The registered tool names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Checks a call's arguments: parsed (`""` and `null` mean `{}`) and validated against the
    /// tool's schema.
    ///
    /// # Errors
    /// The error text the model should read. Arguments that are not JSON, or JSON that is
    /// not an object, get a text that quotes the tool's parameter schema (compact JSON), so
    /// the model can write them anew; they are never read as `{}`.
    pub fn check(&self, call: &ToolCall) -> Result<Value, String> {
        let Some(reg) = self.tools.get(&call.name) else {
            return Err(self.unknown(&call.name));
        };
        let args = call.arguments().map_err(|e| {
            format!(
                "the arguments of `{}` are not valid JSON ({e}); call it again with a JSON object that fits its schema: {}",
                call.name, reg.schema
            )
        })?;
        if !args.is_object() {
            return Err(format!(
                "the arguments of `{}` are not a JSON object; call it again with a JSON object that fits its schema: {}",
                call.name, reg.schema
            ));
        }
        self.validate(&call.name, &args)?;
        Ok(args)
    }

    fn unknown(&self, name: &str) -> String {
        let names: Vec<&str> = self.names().collect();
        format!(
            "unknown tool `{name}`; the available tools are: {}",
            if names.is_empty() {
                "(none)".to_string()
            } else {
                names.join(", ")
            }
        )
    }

    /// Validates parsed arguments against the schema of the tool `name`.
    ///
    /// # Errors
    /// The error text the model should read: an unknown tool, or the first five schema errors.
    pub fn validate(&self, name: &str, args: &Value) -> Result<(), String> {
        let errors = self.schema_errors(name, args)?;
        if !errors.is_empty() {
            return Err(format!(
                "the arguments of `{name}` do not match its schema: {}; call it again with arguments that do",
                errors.join("; ")
            ));
        }
        Ok(())
    }

    /// The first five schema errors of `args` for the tool `name` (empty when they fit).
    ///
    /// # Errors
    /// The unknown-tool message.
    pub(crate) fn schema_errors(&self, name: &str, args: &Value) -> Result<Vec<String>, String> {
        let Some(reg) = self.tools.get(name) else {
            return Err(self.unknown(name));
        };
        Ok(reg
            .validator
            .iter_errors(args)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                let message = match reg.choices.get(e.schema_path().as_str()) {
                    Some(allowed) => format!(
                        "{} is not one of the allowed values: {}",
                        e.instance(),
                        allowed
                            .iter()
                            .map(Value::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    None => e.to_string(),
                };
                if at.is_empty() {
                    message
                } else {
                    format!("at {at}: {message}")
                }
            })
            .collect())
    }

    /// Runs a call: checks it, runs the tool, and returns the result the model reads.
    ///
    /// # Errors
    /// Only [`ToolError::Fatal`], as its message; every other failure is an error result.
    pub async fn execute(&self, call: &ToolCall) -> Result<ToolResult, String> {
        match self.check(call) {
            Ok(args) => self.execute_checked(call, args).await,
            Err(msg) => Ok(ToolResult::error(call, msg)),
        }
    }

    /// Runs a call with arguments already checked (by [`check`](Self::check) or
    /// [`validate`](Self::validate)); the tool hooks run between the two.
    ///
    /// # Errors
    /// Only [`ToolError::Fatal`], as its message; every other failure is an error result.
    pub async fn execute_checked(
        &self,
        call: &ToolCall,
        args: Value,
    ) -> Result<ToolResult, String> {
        Ok(self.execute_counted(call, args).await?.0)
    }

    /// [`execute_checked`](Self::execute_checked), with the counters the tool reported
    /// ([`ToolOutput::stats`]).
    pub(crate) async fn execute_counted(
        &self,
        call: &ToolCall,
        args: Value,
    ) -> Result<(ToolResult, Option<AgentStats>), String> {
        let Some(tool) = self.tools.get(&call.name).and_then(|r| r.tool.as_ref()) else {
            return Ok((
                ToolResult::error(
                    call,
                    if self.tools.contains_key(&call.name) {
                        format!(
                            "`{}` is run by the application, not by the agent, and no result was given",
                            call.name
                        )
                    } else {
                        self.unknown(&call.name)
                    },
                ),
                None,
            ));
        };
        output_result(call, tool.call_json(args).await)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    struct Echo;
    #[derive(Deserialize, JsonSchema)]
    struct EchoArgs {
        /// Text to echo.
        text: String,
        #[serde(default)]
        times: Option<u32>,
    }
    impl Tool for Echo {
        type Args = EchoArgs;
        fn name(&self) -> &str {
            "echo"
        }
        fn description(&self) -> &str {
            "Echoes text."
        }
        async fn call(&self, args: EchoArgs) -> Result<ToolOutput, ToolError> {
            if args.text == "boom" {
                return Err(ToolError::Failed("it exploded".into()));
            }
            if args.text == "abort" {
                return Err(ToolError::Fatal("user aborted".into()));
            }
            Ok(args.text.repeat(args.times.unwrap_or(1) as usize).into())
        }
    }

    fn registry() -> ToolRegistry {
        let mut r = ToolRegistry::new();
        r.insert(Arc::new(Echo)).unwrap();
        r
    }

    fn run(r: &ToolRegistry, name: &str, raw: &str) -> Result<ToolResult, String> {
        futures::executor::block_on(r.execute(&ToolCall::new("c1", name, raw)))
    }

    // schemars derives an enum with documented variants as a `oneOf` of consts; the
    // validator's own message ("not valid under any of the schemas listed in the 'oneOf'
    // keyword") did not say what the model may send.
    #[test]
    fn an_enum_error_names_the_allowed_values() {
        #[derive(Deserialize, JsonSchema)]
        #[serde(rename_all = "lowercase")]
        enum Unit {
            /// metres
            M,
            /// kilometres
            Km,
        }
        #[derive(Deserialize, JsonSchema)]
        struct ConvertArgs {
            #[allow(dead_code)]
            from: Unit,
        }
        struct Convert;
        impl Tool for Convert {
            type Args = ConvertArgs;
            fn name(&self) -> &str {
                "convert"
            }
            fn description(&self) -> &str {
                "Converts."
            }
            async fn call(&self, _: ConvertArgs) -> Result<ToolOutput, ToolError> {
                Ok("ok".into())
            }
        }
        let mut r = ToolRegistry::new();
        r.insert(Arc::new(Convert)).unwrap();
        let result = run(&r, "convert", r#"{"from":"parsec"}"#).unwrap();
        assert_eq!(
            result.content,
            "the arguments of `convert` do not match its schema: at /from: \"parsec\" is not one of the allowed values: \"m\", \"km\"; call it again with arguments that do"
        );
    }

    #[test]
    fn schema_is_derived_without_meta_keys() {
        let spec = Echo.spec();
        assert_eq!(spec.parameters["type"], "object");
        assert_eq!(spec.parameters["required"], serde_json::json!(["text"]));
        assert_eq!(
            spec.parameters["properties"]["text"]["description"],
            "Text to echo."
        );
        assert!(spec.parameters.get("$schema").is_none());
    }

    #[test]
    fn calls_run_and_failures_become_error_results() {
        let r = registry();
        let ok = run(&r, "echo", r#"{"text":"ab","times":2}"#).unwrap();
        assert_eq!((ok.content.as_str(), ok.is_error), ("abab", false));

        let unknown = run(&r, "nope", "{}").unwrap();
        assert!(unknown.is_error);
        assert!(
            unknown.content.contains("unknown tool `nope`"),
            "{}",
            unknown.content
        );
        assert!(unknown.content.contains("echo"));

        let bad_json = run(&r, "echo", "{text:").unwrap();
        assert!(
            bad_json.is_error && bad_json.content.contains("not valid JSON"),
            "{}",
            bad_json.content
        );
        // Unreadable arguments are never read as `{}`: the model gets the schema to write them anew.
        let schema = r.tools["echo"].schema.clone();
        assert!(schema.contains("\"text\""), "{schema}");
        assert!(
            bad_json.content.ends_with(&format!(
                "call it again with a JSON object that fits its schema: {schema}"
            )),
            "{}",
            bad_json.content
        );
        let array = run(&r, "echo", "[1]").unwrap();
        assert_eq!(
            array.content,
            format!(
                "the arguments of `echo` are not a JSON object; call it again with a JSON object that fits its schema: {schema}"
            )
        );

        let bad_schema = run(&r, "echo", r#"{"text": 3}"#).unwrap();
        assert!(bad_schema.is_error && bad_schema.content.contains("do not match its schema"));
        assert!(
            bad_schema.content.contains("/text"),
            "{}",
            bad_schema.content
        );

        let missing = run(&r, "echo", "").unwrap();
        assert!(
            missing.is_error && missing.content.contains("text"),
            "{}",
            missing.content
        );

        let failed = run(&r, "echo", r#"{"text":"boom"}"#).unwrap();
        assert_eq!(
            (failed.content.as_str(), failed.is_error),
            ("error: it exploded", true)
        );

        assert_eq!(
            run(&r, "echo", r#"{"text":"abort"}"#).unwrap_err(),
            "user aborted"
        );
    }
}
