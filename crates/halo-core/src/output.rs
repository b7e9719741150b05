//! Typed JSON answers: [`HaloAgent::generate_object`] and the typed final output of a
//! tool-using run, [`HaloAgent::generate_text_with_output`].
//!
//! Both run the one run loop (`drive.rs`) with an output spec that changes three things and
//! never the agent's [`StablePrefix`]:
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
//!   `T`. A failure goes back to the model — the error and the schema, as a user message
//!   through the engine's [`reject_answer`](crate::RunState::reject_answer), or as the
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

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::agent::HaloAgent;
use crate::error::HaloError;
use crate::guardrail::StepSettings;
use crate::message::{ContentPart, Message, ToolCall};
use crate::model::{GenerationOptions, ModelCapabilities, ResponseFormat, ToolChoice};
use crate::prefix::{StablePrefix, ToolSpec};
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
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
}

/// What [`HaloAgent::generate_object`] returns.
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

/// The output spec of one run, with `T` erased: what the run loop needs.
pub(crate) struct ObjectRun {
    /// Resolved: never `Auto`.
    pub(crate) mode: OutputMode,
    /// `generate_object`: no tool may be called (except the output tool).
    suppress_tools: bool,
    /// `T`'s schema, as validated.
    schema: Value,
    /// The schema the model is given: `schema`, or wrapped under [`WRAPPED_KEY`].
    wire_schema: Value,
    wrapped: bool,
    validator: jsonschema::Validator,
    /// Deserializes a validated value into `T`.
    check: fn(&Value) -> Result<(), String>,
    retries: usize,
    tool_name: String,
    /// Tool mode: the agent's prefix with the output tool.
    prefix: Option<StablePrefix>,
}

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

impl ObjectRun {
    fn new<T: DeserializeOwned>(
        output: Output<T>,
        suppress_tools: bool,
        caps: ModelCapabilities,
        prefix: &StablePrefix,
    ) -> Result<ObjectRun, HaloError> {
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
        let prefix = if mode == OutputMode::Tool {
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
            Some(prefix.clone().with_tool(spec)?)
        } else {
            None
        };
        Ok(ObjectRun {
            mode,
            suppress_tools,
            schema: output.schema,
            wire_schema,
            wrapped,
            validator,
            check: deserializes::<T>,
            retries: output.retries,
            tool_name: output.tool_name,
            prefix,
        })
    }

    /// The prefix the run's requests carry, when it is not the agent's (tool mode).
    pub(crate) fn prefix(&self) -> Option<&StablePrefix> {
        self.prefix.as_ref()
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
    pub(crate) fn options<'a>(
        &self,
        options: Cow<'a, GenerationOptions>,
        step: &StepSettings,
    ) -> Cow<'a, GenerationOptions> {
        let mut o = options.into_owned();
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
        Cow::Owned(o)
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

    fn check_value(&self, value: &Value) -> Result<(), String> {
        let errors: Vec<String> = self
            .validator
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
        (self.check)(value).map_err(|e| format!("it does not fit the expected type: {e}"))
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

    /// Reads the accepted object out of a finished run: the output tool's call of the
    /// last step, or the JSON in its text.
    fn decode<T: DeserializeOwned>(
        &self,
        run: &GenerateTextResult,
    ) -> Result<(T, String), HaloError> {
        let last = run.steps.last();
        let call = self
            .output_tool()
            .and_then(|tool| last?.message.tool_calls.iter().find(|c| c.name == tool));
        let (value, raw) = match call {
            Some(call) => (self.check_call(call), call.raw_arguments.clone()),
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

impl HaloAgent {
    /// Asks for a typed JSON answer to `input`: `T`'s JSON Schema goes to the model in the
    /// mode [`OutputMode::Auto`] picks for the adapter; tools are suppressed (they stay in
    /// the prefix, whose bytes do not change: `tool_choice: None` and no active tools, or
    /// only the output tool in tool mode). See the [module docs](crate::output) for the
    /// modes and their cache cost; [`generate_object_with`](Self::generate_object_with)
    /// chooses the mode and the retry budget.
    ///
    /// ```
    /// use halo_core::{HaloAgent, testing::ScriptedModel};
    /// use serde::Deserialize;
    ///
    /// /// A city's weather.
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct Weather {
    ///     city: String,
    ///     celsius: i32,
    /// }
    ///
    /// # futures::executor::block_on(async {
    /// let model = ScriptedModel::new()
    ///     .text("It is cold.") // not JSON: the error and the schema go back to the model
    ///     .text(r#"Here it is: {"city": "Oslo", "celsius": -3}"#);
    /// let mut agent = HaloAgent::builder(model).build();
    /// let out = agent.generate_object::<Weather>("Weather in Oslo?").await.unwrap();
    /// assert_eq!((out.object.city.as_str(), out.object.celsius, out.attempts), ("Oslo", -3, 2));
    /// # });
    /// ```
    ///
    /// # Errors
    /// - [`HaloError::InvalidObject`] when no answer fit within the retry budget (or the
    ///   model refused, or the schema does not compile): the last answer's raw text, what
    ///   was wrong with it, and the attempts made. The log keeps the rejected answers and
    ///   their feedback, not the last answer.
    /// - [`HaloError::Prefix`] in tool mode when the output tool's name is taken or invalid.
    /// - Those of [`generate_text`](Self::generate_text).
    ///
    /// An object run does not pause for client-side tools (their calls get an error
    /// result), and [`resume`](Self::resume) after a failed object run continues it as a
    /// text run.
    pub async fn generate_object<T: JsonSchema + DeserializeOwned>(
        &mut self,
        input: impl Into<String>,
    ) -> Result<ObjectResult<T>, HaloError> {
        self.generate_object_with(Output::new(), input).await
    }

    /// [`generate_object`](Self::generate_object) with an [`Output`] spec (mode, retries,
    /// output tool name).
    ///
    /// # Errors
    /// As [`generate_object`](Self::generate_object).
    pub async fn generate_object_with<T: DeserializeOwned>(
        &mut self,
        output: Output<T>,
        input: impl Into<String>,
    ) -> Result<ObjectResult<T>, HaloError> {
        self.object_run(output, true, input.into()).await
    }

    /// Runs the tool loop on `input` as [`generate_text`](Self::generate_text) does, with a
    /// typed final answer: the AI SDK's `generateText({ output: Output.object(...) })`,
    /// pydantic-ai's `output_type`. Tools stay available; in tool mode the model ends the
    /// run by calling the output tool (`tool_choice: Required`), in the other modes by
    /// answering with the JSON.
    ///
    /// # Errors
    /// As [`generate_object`](Self::generate_object).
    pub async fn generate_text_with_output<T: DeserializeOwned>(
        &mut self,
        output: Output<T>,
        input: impl Into<String>,
    ) -> Result<ObjectResult<T>, HaloError> {
        self.object_run(output, false, input.into()).await
    }

    async fn object_run<T: DeserializeOwned>(
        &mut self,
        output: Output<T>,
        suppress_tools: bool,
        input: String,
    ) -> Result<ObjectResult<T>, HaloError> {
        let object = ObjectRun::new(
            output,
            suppress_tools,
            self.model.capabilities(),
            &self.prefix,
        )?;
        let mode = object.mode;
        self.manual = false;
        let run =
            crate::drive::drive(self.run(Some(Message::user(input)), false, false, Some(&object)))
                .await?;
        let (value, raw) = object.decode::<T>(&run)?;
        Ok(ObjectResult {
            object: value,
            raw,
            mode,
            attempts: object.attempts(&run),
            run,
        })
    }
}
