//! [`ToolRegistry`]: tools by name with their compiled parameter schemas; every way a call's
//! arguments can be wrong becomes a text the model reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{DynTool, ToolAnnotations, ToolContext, output_result};
use crate::message::{ToolCall, ToolResult};
use crate::prefix::{PrefixError, ToolSpec};
use crate::stats::AgentStats;

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
        let Some(reg) = self.tools.get(call.name.as_str()) else {
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
        // The common case, without collecting errors.
        if reg.validator.is_valid(args) {
            return Ok(Vec::new());
        }
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

    /// Runs a call: checks it, runs the tool, and returns the result the model reads. No
    /// hook runs; the context is [`ToolContext::detached`].
    ///
    /// # Errors
    /// Only [`ToolError::Fatal`](super::ToolError::Fatal), as its message; every other
    /// failure is an error result.
    pub async fn execute(&self, call: &ToolCall) -> Result<ToolResult, String> {
        match self.check(call) {
            Ok(args) => {
                let context = ToolContext::detached(call.clone());
                Ok(self.execute_checked(call, args, &context).await?.0)
            }
            Err(msg) => Ok(ToolResult::error(call, msg)),
        }
    }

    /// Runs a call with arguments already checked (by [`check`](Self::check) or
    /// [`validate`](Self::validate)), with its context; the tool hooks run between the
    /// two. Returns the result and the counters the tool reported
    /// ([`ToolOutput::stats`](super::ToolOutput::stats)).
    ///
    /// # Errors
    /// Only [`ToolError::Fatal`](super::ToolError::Fatal), as its message; every other
    /// failure is an error result.
    pub async fn execute_checked(
        &self,
        call: &ToolCall,
        args: Value,
        context: &ToolContext,
    ) -> Result<(ToolResult, Option<AgentStats>), String> {
        let Some(tool) = self
            .tools
            .get(call.name.as_str())
            .and_then(|r| r.tool.as_ref())
        else {
            return Ok((
                ToolResult::error(
                    call,
                    if self.tools.contains_key(call.name.as_str()) {
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
        output_result(call, tool.call_json(args, context).await)
    }

    /// The executor of the tool `name` (`None` for an unknown or client-side tool).
    pub(crate) fn executor(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.tools.get(name).and_then(|r| r.tool.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{Tool, ToolError, ToolOutput};
    use schemars::JsonSchema;
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
