//! GBNF grammars that constrain decoding: tool calls whose arguments fit each tool's JSON
//! Schema, and JSON answers for [`ResponseFormat::Json`](halo_core::ResponseFormat).
//!
//! The tools' schemas go through llama.cpp's own JSON-Schema-to-GBNF converter
//! (`common/json-schema-to-grammar.cpp`, exposed as `llama_cpp_2::json_schema_to_grammar`) in
//! one pass: each schema becomes a property (`t0`, `t1`, ...) of one wrapper object schema, so
//! every tool gets distinct rule names and the primitive rules (`string`, `number`, ...) are
//! shared. The wrapper's own `root` rule is dropped and replaced by the tool-call rule, and
//! the optional whitespace rule `space` is made empty, so calls come out in the compact form
//! `<tool_call>[{"name":"N","arguments":{..}}]</tool_call>` that
//! [`parse_output`](super::prompt::parse_output) reads and
//! [`assistant_content`](super::prompt::assistant_content) writes back byte for byte.

use halo_core::{ModelError, ToolChoice, ToolSpec};
use serde_json::{Map, Value, json};

use super::prompt::{CALL_CLOSE, CALL_OPEN};

/// What decoding must produce for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Constraint {
    /// The GBNF grammar (with a `root` rule) decoding runs under, if any.
    pub grammar: Option<String>,
    /// `Some(trigger)`: the grammar applies only from the first `trigger` in the output (a
    /// lazy grammar; free text before it). `None`: from the first token.
    pub trigger: Option<&'static str>,
    /// Whether a `<tool_call>` block in the output is read as tool calls. `false` when the
    /// request has no tools or `tool_choice` is `None`; generation then stops at `<tool_call>`
    /// if the request has tools.
    pub tools_allowed: bool,
}

/// The constraint for `tools`, `choice` and an optional JSON answer schema (`Some(None)`:
/// any JSON object):
///
/// - `Required`: a `<tool_call>` block of one or more calls, from the first token;
/// - `Tool(name)`: the same with only `name`;
/// - `Auto`: free text, with the block's grammar applying from `<tool_call>` on (a lazy
///   grammar); with a JSON answer format, the block or the JSON answer, from the first token;
/// - `None`: free text (or the JSON answer).
///
/// # Errors
/// [`ModelError::Unsupported`] when `choice` asks for a tool call and there are no tools or
/// no tool of that name; [`ModelError::Local`] when a schema cannot be converted.
pub(crate) fn constraint(
    tools: &[ToolSpec],
    choice: &ToolChoice,
    json_answer: Option<Option<&Value>>,
) -> Result<Constraint, ModelError> {
    let callable: Vec<&ToolSpec> = match choice {
        ToolChoice::Auto | ToolChoice::Required => tools.iter().collect(),
        ToolChoice::None => Vec::new(),
        ToolChoice::Tool(name) => match tools.iter().find(|t| &t.name == name) {
            Some(t) => vec![t],
            None => {
                let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                return Err(ModelError::Unsupported(format!(
                    "tool_choice names `{name}`, which is not among the request's tools ({})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            }
        },
    };
    let must_call = matches!(choice, ToolChoice::Required | ToolChoice::Tool(_));
    if must_call && callable.is_empty() {
        return Err(ModelError::Unsupported(
            "tool_choice `required` needs at least one tool in the request".into(),
        ));
    }
    let answer = json_answer.map(|s| s.cloned().unwrap_or_else(|| json!({"type": "object"})));
    let tools_allowed = !callable.is_empty();
    let (grammar, trigger) = match (must_call, tools_allowed, answer) {
        (true, _, _) => (Some(build(&callable, None)?), None),
        (false, true, None) => (Some(build(&callable, None)?), Some(CALL_OPEN)),
        (false, true, Some(answer)) => (Some(build(&callable, Some(answer))?), None),
        (false, false, Some(answer)) => (Some(build(&[], Some(answer))?), None),
        (false, false, None) => (None, None),
    };
    Ok(Constraint {
        grammar,
        trigger,
        tools_allowed,
    })
}

/// The GBNF whose `root` is a tool-call block over `tools` (if any) or, when `answer` is
/// given, a JSON value fitting it.
fn build(tools: &[&ToolSpec], answer: Option<Value>) -> Result<String, ModelError> {
    let mut properties = Map::new();
    for (i, tool) in tools.iter().enumerate() {
        properties.insert(format!("t{i}"), tool.parameters.clone());
    }
    if let Some(schema) = &answer {
        properties.insert("answer".into(), schema.clone());
    }
    let wrapper = json!({"type": "object", "properties": properties});
    let generated = llama_cpp_2::json_schema_to_grammar(&wrapper.to_string()).map_err(|e| {
        ModelError::Local(format!(
            "cannot turn the tool schemas into a grammar ({e}); \
             simplify the parameter schemas (objects, strings, numbers, booleans, arrays, enums)"
        ))
    })?;
    let mut alternatives = Vec::new();
    let mut rules = String::new();
    if !tools.is_empty() {
        let calls: Vec<String> = tools
            .iter()
            .enumerate()
            .map(|(i, tool)| {
                let value = value_rule(&generated, &format!("t{i}"))?;
                let head = format!("{{\"name\":{},\"arguments\":", json!(tool.name));
                Ok(format!("{} {value} \"}}\"", literal(&head)))
            })
            .collect::<Result<_, ModelError>>()?;
        rules.push_str(&format!("halo-call ::= {}\n", calls.join(" | ")));
        alternatives.push(format!(
            "{} halo-call ( \",\" halo-call )* {}",
            literal(&format!("{CALL_OPEN}[")),
            literal(&format!("]{CALL_CLOSE}"))
        ));
    }
    if answer.is_some() {
        alternatives.push(value_rule(&generated, "answer")?);
    }
    let mut out = format!("root ::= {}\n{rules}", alternatives.join(" | "));
    for line in generated.lines() {
        let name = line.split(" ::= ").next().unwrap_or_default();
        match name {
            "root" => {}
            "space" => out.push_str("space ::= \"\"\n"),
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    Ok(out)
}

/// The rule a wrapper property's value refers to, read from its `<prop>-kv` rule:
/// `t0-kv ::= "\"t0\"" space ":" space t0`.
fn value_rule(grammar: &str, property: &str) -> Result<String, ModelError> {
    let head = format!("{property}-kv ::= ");
    grammar
        .lines()
        .find_map(|l| l.strip_prefix(&head))
        .and_then(|body| body.split_whitespace().last())
        .map(str::to_string)
        .ok_or_else(|| {
            ModelError::Local(format!(
                "llama.cpp's schema converter gave no rule for `{property}`; this is a bug in halo-adapters"
            ))
        })
}

/// A GBNF string literal.
fn literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, params: Value) -> ToolSpec {
        ToolSpec::new(name, "d", params)
    }

    fn tools() -> Vec<ToolSpec> {
        vec![
            tool(
                "read",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": ["integer", "null"], "minimum": 0}}, "required": ["path"]}),
            ),
            tool(
                "mode",
                json!({"type": "object", "properties": {"m": {"enum": ["a", "b"]}, "flags": {"type": "array", "items": {"type": "boolean"}}}, "required": ["m"]}),
            ),
        ]
    }

    #[test]
    fn auto_is_lazy_on_the_call_tag_and_required_is_not() {
        let c = constraint(&tools(), &ToolChoice::Auto, None).unwrap();
        assert_eq!(c.trigger, Some("<tool_call>"));
        assert!(c.tools_allowed);
        let g = c.grammar.unwrap();
        assert!(
            g.starts_with(
                "root ::= \"<tool_call>[\" halo-call ( \",\" halo-call )* \"]</tool_call>\"\n"
            ),
            "{g}"
        );
        assert!(
            g.contains("\"{\\\"name\\\":\\\"read\\\",\\\"arguments\\\":\" t0 \"}\""),
            "{g}"
        );
        assert!(g.contains("\nspace ::= \"\"\n"), "{g}");

        let c = constraint(&tools(), &ToolChoice::Required, None).unwrap();
        assert_eq!((c.trigger, c.tools_allowed), (None, true));
        assert!(c.grammar.unwrap().contains("halo-call ::="));

        let c = constraint(&tools(), &ToolChoice::None, None).unwrap();
        assert_eq!((c.grammar, c.trigger, c.tools_allowed), (None, None, false));
    }

    #[test]
    fn a_named_tool_is_the_only_alternative() {
        let c = constraint(&tools(), &ToolChoice::Tool("mode".into()), None).unwrap();
        let g = c.grammar.unwrap();
        assert!(g.contains("\\\"mode\\\""), "{g}");
        assert!(!g.contains("\\\"read\\\""), "{g}");
        let err = constraint(&tools(), &ToolChoice::Tool("nope".into()), None).unwrap_err();
        assert!(
            matches!(&err, ModelError::Unsupported(m) if m.contains("read, mode")),
            "{err:?}"
        );
        assert!(matches!(
            constraint(&[], &ToolChoice::Required, None),
            Err(ModelError::Unsupported(_))
        ));
    }

    #[test]
    fn json_answers_are_an_alternative_to_calls() {
        let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
        let c = constraint(&[], &ToolChoice::Auto, Some(Some(&schema))).unwrap();
        assert_eq!(c.trigger, None);
        let g = c.grammar.unwrap();
        assert!(g.starts_with("root ::= answer\n"), "{g}");
        let c = constraint(&tools(), &ToolChoice::Auto, Some(None)).unwrap();
        let g = c.grammar.unwrap();
        assert!(g.starts_with("root ::= \"<tool_call>[\" halo-call"), "{g}");
        assert!(g.lines().next().unwrap().ends_with("| answer"), "{g}");
    }
}
