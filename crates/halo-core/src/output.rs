//! Typed JSON answers: [`HaloAgent::generate_object`](crate::HaloAgent::generate_object) and the typed final output of a
//! tool-using run, [`HaloAgent::generate_text_with_output`](crate::HaloAgent::generate_text_with_output).
//!
//! Both are runs of the one engine with an output spec ([`ObjectSpec`], a
//! [`RunKind::Object`](crate::driver::RunKind::Object) that serializes with the run state)
//! that changes three things and never the agent's [`StablePrefix`]:
//! - the **request options** of each call, by [`OutputMode`]:
//!
//!   | mode | `generate_object` | `generate_text_with_output` |
//!   |---|---|---|
//!   | [`Native`](OutputMode::Native) | `response_format: Json { schema }`, `tool_choice: None`, no active tools | `response_format: Json { schema }` |
//!   | [`Tool`](OutputMode::Tool) | an output tool (default `final_result`) with the schema, `tool_choice: Tool(final_result)` | the output tool, `tool_choice: Required` |
//!   | [`Prompted`](OutputMode::Prompted) | the schema in the user message, `tool_choice: None`, no active tools | the schema in the user message |
//!
//!   ([`Auto`](OutputMode::Auto) picks one from [`ModelCapabilities`]: native where the
//!   adapter has it for a request like this one, else tool, else prompted);
//! - the **review** of each answer: the JSON is taken from the answer (the whole text, a
//!   Markdown code fence, or the first JSON value in prose; the output tool's arguments in
//!   tool mode), validated against the JSON Schema with `jsonschema` and deserialized into
//!   `T`. These verdicts are pure checks the run engine makes itself. A failure goes back to
//!   the model — the error and the schema, as a user message the engine injects, or as the
//!   output tool's error result — within a retry budget ([`Output::retries`]); then the run
//!   ends with [`HaloError::InvalidObject`] holding the last raw text;
//! - in tool mode, the **prefix of the object run's requests**: the agent's prefix plus
//!   the output tool. That is a prefix of its own (its own fingerprint, counted as a prefix
//!   change by the stats and the ledger), never written into the agent's prefix.
//!
//! # What each mode costs in prompt-cache terms
//! Normal runs keep their prefix bytes whatever object runs do in between. An object run's
//! own requests read the cache as far as they match earlier requests:
//! - **prompted** adds only the instruction to the new user message: nothing before it
//!   changes, so the call reads the cache as a normal turn would, except where the
//!   provider keys its cache on `tool_choice` (Anthropic: a changed `tool_choice`
//!   invalidates the cached messages, not the tools and system; Gemini's explicit cache
//!   holds the tool config, so `NONE` is a `cachedContents` object of its own);
//! - **native** sends the schema as the provider's response format, which providers cache
//!   ahead of the messages (OpenAI: "the structured output schema serves as a prefix to
//!   the system message"; Anthropic's `output_config` is observed to be part of the cache
//!   key): the first object call with a schema is one expected miss after the tools, later
//!   calls with the same schema hit;
//! - **tool** adds a tool to the tools, which every provider renders first: the first
//!   object call is one expected miss of the whole prompt after the tools before the output
//!   tool, later object calls with the same output tool hit, and the next normal run reads
//!   the normal prefix's entry again (if it is still cached).

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::HaloError;
use crate::guardrail::StepSettings;
use crate::message::{ContentPart, Message, ToolCall};
use crate::model::{GenerationOptions, ModelCapabilities, ResponseFormat, ToolChoice};
use crate::prefix::{Fingerprint, StablePrefix, ToolSpec};
use crate::run::GenerateTextResult;
use crate::tool::schema_for;

/// The output tool's name by default, as pydantic-ai names its output tool.
pub const DEFAULT_OUTPUT_TOOL: &str = "final_result";

/// Answers checked again after a failure, by default: 2 (so at most 3 answers).
pub const DEFAULT_OUTPUT_RETRIES: usize = 2;

/// The key a non-object `T` is wrapped under where the provider wants an object (the
/// native response format and the output tool's arguments): `{"result": <the value>}`.
pub const WRAPPED_KEY: &str = "result";

/// The result the output tool's call gets when its arguments are accepted (the run ends
/// with it in the log).
pub const OUTPUT_ACCEPTED: &str = "the final result was accepted";

/// The result of another call made in the same turn as an accepted output tool call.
pub const NOT_RUN_AFTER_OUTPUT: &str =
    "not run: the final result was given in the same turn, so the run ended";

/// How the model is asked for the object. The modes of the AI SDK's `Output` and
/// pydantic-ai's output modes (<https://ai.pydantic.dev/output/>).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Picks per adapter ([`ModelAdapter::capabilities`](crate::ModelAdapter::capabilities)):
    /// [`Native`](Self::Native) where the adapter constrains answers to a schema in a
    /// request like this one (with or without tools), else [`Tool`](Self::Tool) where it
    /// can force a tool call, else [`Prompted`](Self::Prompted).
    #[default]
    Auto,
    /// The provider's structured output: OpenAI `response_format: json_schema` (strict),
    /// Gemini `responseSchema`, Anthropic `output_config.format`.
    Native,
    /// An output tool whose parameters are the schema, with a `tool_choice` that makes the
    /// model call it; its arguments are the object.
    Tool,
    /// The schema in the user message; the JSON is taken from the answer text (a fence or
    /// prose around it is fine).
    Prompted,
}

/// What to ask for: `T`'s JSON Schema (schemars 1.x, [`schema_for`]), the [`OutputMode`],
/// the retry budget and the output tool's name and description.
///
/// ```
/// use halo_core::{HaloAgent, Output, OutputMode, testing::ScriptedModel};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)]
/// # struct Weather { city: String, celsius: i32 }
/// # futures::executor::block_on(async {
/// let model = ScriptedModel::new().text(r#"```json
/// {"city": "Oslo", "celsius": -3}
/// ```"#);
/// let mut agent = HaloAgent::builder(model).build();
/// let out = agent
///     .generate_object_with(Output::<Weather>::new().mode(OutputMode::Prompted), "Weather in Oslo?")
///     .await
///     .unwrap();
/// assert_eq!((out.object.city.as_str(), out.object.celsius), ("Oslo", -3));
/// # });
/// ```
pub struct Output<T> {
    mode: OutputMode,
    retries: usize,
    tool_name: String,
    description: Option<String>,
    schema: Value,
    _t: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Output<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("mode", &self.mode)
            .field("retries", &self.retries)
            .field("tool_name", &self.tool_name)
            .field("schema", &self.schema)
            .finish()
    }
}

impl<T: JsonSchema + DeserializeOwned> Default for Output<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: JsonSchema + DeserializeOwned> Output<T> {
    /// `T`'s schema, [`OutputMode::Auto`], [`DEFAULT_OUTPUT_RETRIES`], the output tool
    /// [`DEFAULT_OUTPUT_TOOL`].
    pub fn new() -> Self {
        Output {
            mode: OutputMode::Auto,
            retries: DEFAULT_OUTPUT_RETRIES,
            tool_name: DEFAULT_OUTPUT_TOOL.to_string(),
            description: None,
            schema: schema_for::<T>(),
            _t: PhantomData,
        }
    }
}

impl<T> Output<T> {
    /// Sets the mode.
    pub fn mode(mut self, mode: OutputMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets how many answers are checked again after one fails (0: the first answer must
    /// fit).
    pub fn retries(mut self, n: usize) -> Self {
        self.retries = n;
        self
    }

    /// Names the output tool of [`OutputMode::Tool`] (`[a-zA-Z0-9_-]{1,64}`, not the name
    /// of one of the agent's tools).
    pub fn tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool_name = name.into();
        self
    }

    /// Describes the output tool to the model (default: the schema's `description`, from
    /// `T`'s doc comment, or a generic sentence).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The JSON Schema answers are validated against.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The same spec, its answers read as JSON values (still validated against `T`'s
    /// schema): a workflow step's output, stored as a value ([`crate::workflow`]).
    pub(crate) fn erase(self) -> Output<Value> {
        Output {
            mode: self.mode,
            retries: self.retries,
            tool_name: self.tool_name,
            description: self.description,
            schema: self.schema,
            _t: PhantomData,
        }
    }
}

/// What [`HaloAgent::generate_object`](crate::HaloAgent::generate_object) returns.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectResult<T> {
    /// The answer, deserialized.
    pub object: T,
    /// The JSON text it was read from: the answer text (fence and prose included) or, in
    /// tool mode, the output tool's argument string.
    pub raw: String,
    /// The mode the run used ([`OutputMode::Auto`] resolved).
    pub mode: OutputMode,
    /// Answers checked, the accepted one included (1 when the first fit).
    pub attempts: usize,
    /// The run: its steps (rejected answers included), stats and last text.
    pub run: GenerateTextResult,
}

/// The output spec of one object run, with `T` erased: what the run engine checks answers
/// against ([`RunKind::Object`](crate::driver::RunKind::Object)). It serializes with the
/// run state; the check that a valid value deserializes into `T` is not serialized, so a
/// run restored from saved state checks answers against the schema only, and `T` when they
/// are decoded ([`decode`](Self::decode)).
#[derive(Clone, Serialize, Deserialize)]
pub struct ObjectSpec {
    /// Resolved: never `Auto`.
    mode: OutputMode,
    /// `generate_object`: no tool may be called (except the output tool).
    suppress_tools: bool,
    /// `T`'s schema, as validated.
    schema: Value,
    /// The schema the model is given: `schema`, or wrapped under [`WRAPPED_KEY`].
    wire_schema: Value,
    wrapped: bool,
    retries: usize,
    tool_name: String,
    /// Tool mode: the output tool's spec, added to the agent's prefix for the run's requests.
    tool: Option<ToolSpec>,
    #[serde(skip)]
    validator: OnceLock<Option<Arc<jsonschema::Validator>>>,
    /// Deserializes a validated value into `T`.
    #[serde(skip)]
    check: Option<TypeCheck>,
    /// Tool mode: the agent's prefix (by fingerprint) with the output tool.
    #[serde(skip)]
    prefix: Option<(Fingerprint, StablePrefix)>,
}

impl std::fmt::Debug for ObjectSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectSpec")
            .field("mode", &self.mode)
            .field("suppress_tools", &self.suppress_tools)
            .field("retries", &self.retries)
            .field("tool_name", &self.tool_name)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// Whether a value deserializes into the answer's type (what is wrong, if not).
type TypeCheck = fn(&Value) -> Result<(), String>;

fn deserializes<T: DeserializeOwned>(value: &Value) -> Result<(), String> {
    T::deserialize(value).map(drop).map_err(|e| e.to_string())
}

/// The mode `Auto` resolves to for an adapter with `caps` and a prefix with or without
/// tools.
pub fn resolve_mode(
    mode: OutputMode,
    caps: ModelCapabilities,
    prefix_has_tools: bool,
) -> OutputMode {
    match mode {
        OutputMode::Auto
            if caps.native_output && (!prefix_has_tools || caps.native_output_with_tools) =>
        {
            OutputMode::Native
        }
        OutputMode::Auto if caps.forced_tool => OutputMode::Tool,
        OutputMode::Auto => OutputMode::Prompted,
        m => m,
    }
}

impl ObjectSpec {
    /// The spec of an object run for `output` on an agent with `prefix` whose model has
    /// `caps`: [`generate_object`](crate::HaloAgent::generate_object)'s when
    /// `suppress_tools` (no tool but the output tool may be called), else
    /// [`generate_text_with_output`](crate::HaloAgent::generate_text_with_output)'s.
    ///
    /// # Errors
    /// [`HaloError::InvalidObject`] when the schema does not compile; [`HaloError::Prefix`]
    /// in tool mode when the output tool's name is taken or invalid.
    pub fn new<T: DeserializeOwned>(
        output: Output<T>,
        suppress_tools: bool,
        caps: ModelCapabilities,
        prefix: &StablePrefix,
    ) -> Result<ObjectSpec, HaloError> {
        let mode = resolve_mode(output.mode, caps, !prefix.tools().is_empty());
        let validator = jsonschema::validator_for(&output.schema).map_err(|e| {
            HaloError::InvalidObject {
                attempts: 0,
                message: format!(
                    "the output schema is not a valid JSON Schema ({e}); derive it with schemars or fix it"
                ),
                raw: String::new(),
            }
        })?;
        let is_object = output.schema.get("type").and_then(Value::as_str) == Some("object");
        let wrapped = !is_object && mode != OutputMode::Prompted;
        let wire_schema = if wrapped {
            json!({
                "type": "object",
                "properties": { WRAPPED_KEY: output.schema },
                "required": [WRAPPED_KEY],
                "additionalProperties": false,
            })
        } else {
            output.schema.clone()
        };
        let tool = if mode == OutputMode::Tool {
            let description = output
                .description
                .clone()
                .or_else(|| {
                    output
                        .schema
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_else(|| {
                    "Gives the final answer: call it once, with the answer as its arguments."
                        .to_string()
                });
            let spec = ToolSpec::new(&output.tool_name, description, wire_schema.clone());
            // Refused here rather than at the first request.
            prefix.clone().with_tool(spec.clone())?;
            Some(spec)
        } else {
            None
        };
        Ok(ObjectSpec {
            mode,
            suppress_tools,
            schema: output.schema,
            wire_schema,
            wrapped,
            retries: output.retries,
            tool_name: output.tool_name,
            tool,
            validator: OnceLock::from(Some(Arc::new(validator))),
            check: Some(deserializes::<T>),
            prefix: None,
        })
    }

    /// The mode the run uses (never `Auto`).
    pub fn mode(&self) -> OutputMode {
        self.mode
    }

    /// Keeps the prefix of the run's requests up to date with the agent's `prefix` (tool
    /// mode: the agent's with the output tool).
    pub(crate) fn refresh_prefix(&mut self, prefix: &StablePrefix) {
        let Some(tool) = &self.tool else {
            return;
        };
        let fingerprint = prefix.fingerprint();
        if self.prefix.as_ref().is_some_and(|(f, _)| *f == fingerprint) {
            return;
        }
        match prefix.clone().with_tool(tool.clone()) {
            Ok(own) => self.prefix = Some((fingerprint, own)),
            Err(e) => {
                tracing::warn!(error = %e, "the output tool no longer fits the agent's prefix");
                self.prefix = None;
            }
        }
    }

    /// The prefix the run's requests carry, when it is not the agent's (tool mode; kept
    /// by [`refresh_prefix`](Self::refresh_prefix)).
    pub(crate) fn prefix(&self) -> Option<&StablePrefix> {
        self.prefix.as_ref().map(|(_, p)| p)
    }

    /// The output tool's name, in tool mode.
    pub(crate) fn output_tool(&self) -> Option<&str> {
        (self.mode == OutputMode::Tool).then_some(self.tool_name.as_str())
    }

    /// How many answers may fail before the run ends with `InvalidObject`.
    pub(crate) fn retries(&self) -> usize {
        self.retries
    }

    /// The options of one call: `options` (the agent's with the step's settings) changed
    /// for the mode.
    pub(crate) fn options(
        &self,
        mut o: GenerationOptions,
        step: &StepSettings,
    ) -> GenerationOptions {
        let schema = || ResponseFormat::Json {
            schema: Some(self.wire_schema.clone()),
        };
        match (self.mode, self.suppress_tools) {
            (OutputMode::Native, suppress) => {
                o.response_format = schema();
                if suppress {
                    o.tool_choice = ToolChoice::None;
                    o.active_tools = Some(Vec::new());
                }
            }
            (OutputMode::Tool, true) => {
                o.tool_choice = ToolChoice::Tool(self.tool_name.clone());
                o.active_tools = Some(vec![self.tool_name.clone()]);
            }
            (OutputMode::Tool, false) => {
                if step.tool_choice.is_none() {
                    o.tool_choice = ToolChoice::Required;
                }
                if let Some(active) = &mut o.active_tools
                    && !active.contains(&self.tool_name)
                {
                    active.push(self.tool_name.clone());
                }
            }
            (_, true) => {
                o.tool_choice = ToolChoice::None;
                o.active_tools = Some(Vec::new());
            }
            (_, false) => {}
        }
        o
    }

    /// The instruction the prompted mode appends to the user message.
    fn instruction(&self) -> Option<String> {
        if self.mode != OutputMode::Prompted {
            return None;
        }
        let schema = serde_json::to_string(&self.schema).unwrap_or_default();
        Some(if self.suppress_tools {
            format!(
                "Answer with one JSON value that fits this JSON Schema, and nothing else (no prose, no Markdown code fence):\n{schema}"
            )
        } else {
            format!(
                "Give your final answer as one JSON value that fits this JSON Schema, and nothing else (no prose, no Markdown code fence):\n{schema}"
            )
        })
    }

    /// `message` with the prompted mode's instruction appended to its last text part.
    pub(crate) fn instruct(&self, message: Message) -> Message {
        let Some(instruction) = self.instruction() else {
            return message;
        };
        let Message::User { mut content } = message else {
            return message;
        };
        match content.last_mut() {
            Some(ContentPart::Text { text }) if !text.is_empty() => {
                text.push_str("\n\n");
                text.push_str(&instruction);
            }
            _ => content.push(ContentPart::Text { text: instruction }),
        }
        Message::User { content }
    }

    /// Checks an answer text: the value (unwrapped) or what is wrong with it, for the
    /// model.
    pub(crate) fn check_text(&self, text: &str) -> Result<Value, String> {
        let candidates = json_candidates(text);
        if candidates.is_empty() {
            return Err(if text.trim().is_empty() {
                "the answer is empty".to_string()
            } else {
                "the answer holds no JSON value".to_string()
            });
        }
        let mut first_problem = None;
        for candidate in candidates {
            // A native or tool-mode answer given as text is still wrapped.
            let value = match candidate {
                Value::Object(mut map) if self.wrapped && map.len() == 1 => {
                    map.remove(WRAPPED_KEY).unwrap_or(Value::Object(map))
                }
                v => v,
            };
            match self.check_value(&value) {
                Ok(()) => return Ok(value),
                Err(p) => {
                    first_problem.get_or_insert(p);
                }
            }
        }
        Err(first_problem.unwrap_or_default())
    }

    /// Checks the output tool's call: its arguments (unwrapped) or what is wrong with them.
    pub(crate) fn check_call(&self, call: &ToolCall) -> Result<Value, String> {
        let args = call
            .arguments()
            .map_err(|e| format!("the arguments are not valid JSON ({e})"))?;
        let value = if self.wrapped {
            match args {
                Value::Object(mut map) => map.remove(WRAPPED_KEY).ok_or_else(|| {
                    format!("the arguments have no `{WRAPPED_KEY}` key holding the answer")
                })?,
                other => other,
            }
        } else {
            args
        };
        self.check_value(&value)?;
        Ok(value)
    }

    fn validator(&self) -> Option<&jsonschema::Validator> {
        self.validator
            .get_or_init(|| jsonschema::validator_for(&self.schema).ok().map(Arc::new))
            .as_deref()
    }

    fn check_value(&self, value: &Value) -> Result<(), String> {
        let Some(validator) = self.validator() else {
            return Err("the output schema does not compile".to_string());
        };
        let errors: Vec<String> = validator
            .iter_errors(value)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect();
        if !errors.is_empty() {
            return Err(format!(
                "it does not fit the JSON Schema: {}",
                errors.join("; ")
            ));
        }
        match self.check {
            Some(check) => {
                check(value).map_err(|e| format!("it does not fit the expected type: {e}"))
            }
            None => Ok(()),
        }
    }

    /// The user message that sends a failed text answer back.
    pub(crate) fn feedback(&self, problem: &str) -> String {
        let schema = serde_json::to_string(&self.wire_schema).unwrap_or_default();
        match self.output_tool() {
            Some(tool) => format!(
                "Your answer cannot be used: {problem}. Call `{tool}` with the answer as arguments that fit this JSON Schema:\n{schema}"
            ),
            None => format!(
                "Your answer cannot be used: {problem}. Answer again with only one JSON value that fits this JSON Schema (no prose, no Markdown code fence):\n{schema}"
            ),
        }
    }

    /// The error result that sends a failed output tool call back.
    pub(crate) fn call_feedback(&self, problem: &str) -> String {
        let schema = serde_json::to_string(&self.wire_schema).unwrap_or_default();
        format!(
            "The final result was not accepted: {problem}. Call `{}` again with arguments that fit this JSON Schema:\n{schema}",
            self.tool_name
        )
    }

    /// The typed answer of a finished object run: the output tool's call of its last step,
    /// or the JSON in its text, deserialized into `T`.
    ///
    /// # Errors
    /// [`HaloError::InvalidObject`] when it does not fit the schema or `T`.
    pub fn decode<T: DeserializeOwned>(
        &self,
        run: GenerateTextResult,
    ) -> Result<ObjectResult<T>, HaloError> {
        let (object, raw) = self.decode_raw::<T>(&run)?;
        Ok(ObjectResult {
            object,
            raw,
            mode: self.mode,
            attempts: self.attempts(&run),
            run,
        })
    }

    fn decode_raw<T: DeserializeOwned>(
        &self,
        run: &GenerateTextResult,
    ) -> Result<(T, String), HaloError> {
        let last = run.steps.last();
        let call = self
            .output_tool()
            .and_then(|tool| last?.message.tool_calls.iter().find(|c| c.name == tool));
        let (value, raw) = match call {
            Some(call) => (self.check_call(call), call.raw_arguments.to_string()),
            None => (self.check_text(&run.text), run.text.clone()),
        };
        let invalid = |message: String, raw: &str| HaloError::InvalidObject {
            attempts: self.attempts(run),
            message,
            raw: raw.to_string(),
        };
        let value = value.map_err(|m| invalid(m, &raw))?;
        let object = T::deserialize(value).map_err(|e| invalid(e.to_string(), &raw))?;
        Ok((object, raw))
    }

    /// Answers checked in `run`: its steps without tool calls (text answers, rejected ones
    /// included) and those calling the output tool.
    fn attempts(&self, run: &GenerateTextResult) -> usize {
        run.steps
            .iter()
            .filter(|s| {
                s.message.tool_calls.is_empty()
                    || self
                        .output_tool()
                        .is_some_and(|t| s.message.tool_calls.iter().any(|c| c.name == t))
            })
            .count()
    }
}

/// The JSON values an answer may hold, most likely first: the whole text, the content of
/// each Markdown code fence, then each value that starts at a `{` or `[` of the prose
/// (parsed by `serde_json`, which stops at the value's end; braces inside strings are
/// strings). At most 16.
///
/// No repair is attempted: a model that wrote broken JSON reads the parse problem in the
/// feedback and answers again. (Checked and not taken for this: `llm_json` depends on clap
/// and reads files; `jsonrepair` 0.1 cut a value at a brace inside a string; `json_partial`
/// 0.2 read `-3,}` as the string `"-3,"`; `json-repair` 0.4 depends on a tracing
/// subscriber.)
pub fn json_candidates(text: &str) -> Vec<Value> {
    const MAX: usize = 16;
    let mut out: Vec<Value> = Vec::new();
    let push = |v: Value, out: &mut Vec<Value>| {
        if out.len() < MAX && !out.contains(&v) {
            out.push(v);
        }
    };
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return vec![v];
    }
    // Code fences: ``` or ~~~, an optional info string (`json`) on the opening line.
    for fence in ["```", "~~~"] {
        let mut rest = text;
        while let Some(open) = rest.find(fence) {
            let after = &rest[open + fence.len()..];
            let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
            let body = &after[body_start..];
            let Some(close) = body.find(fence) else { break };
            if let Ok(v) = serde_json::from_str::<Value>(body[..close].trim()) {
                push(v, &mut out);
            }
            rest = &body[close + fence.len()..];
        }
    }
    // Values in prose.
    let mut at = 0;
    while let Some(i) = text[at..].find(['{', '[']).map(|i| i + at) {
        let mut values = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(v)) => {
                at = i + values.byte_offset();
                push(v, &mut out);
            }
            _ => at = i + 1,
        }
        if out.len() >= MAX {
            break;
        }
    }
    out
}
