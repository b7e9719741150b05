//! JSON Schema → the subset a provider's constrained decoding accepts, for native
//! structured output (OpenAI `response_format: json_schema` with `strict: true`, Anthropic
//! `output_config.format`). Gemini has its own rewrite ([`gemini::sanitize_schema`](crate::gemini::sanitize_schema)).
//!
//! The agent validates every answer against the schema it was given, so what this drops
//! (an unsupported `format`, a length bound) still holds: an answer outside it goes back to
//! the model with the error. What it must not do is make the wire schema *accept less*
//! than the original in a way the model cannot avoid; [`Strict::lossless`] says whether it
//! managed that.

use serde_json::{Map, Value};

/// What one provider's constrained decoding accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dialect {
    /// `format` values kept; any other `format` goes (into the description).
    pub formats: &'static [&'static str],
    /// Keywords that go (into the description).
    pub unsupported: &'static [&'static str],
    /// Every property must be listed in `required` (OpenAI strict mode); an optional
    /// property then has to admit `null` to keep the original meaning.
    pub all_required: bool,
}

/// OpenAI's strict mode (<https://platform.openai.com/docs/guides/structured-outputs#supported-schemas>):
/// `additionalProperties: false` and every property `required` on every object (an
/// optional field is expressed as a type that admits `null`), and the listed string
/// formats only.
pub(crate) const OPENAI: Dialect = Dialect {
    formats: &[
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "uuid",
    ],
    unsupported: &[],
    all_required: true,
};

/// Anthropic's JSON outputs (<https://platform.claude.com/docs/en/build-with-claude/structured-outputs#json-schema-limitations>):
/// `additionalProperties: false` on every object, no numeric or string-length bounds, no
/// `maxItems` (and `minItems` only 0 or 1), the listed string formats only. Optional
/// properties are fine.
pub(crate) const ANTHROPIC: Dialect = Dialect {
    formats: &[
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "uri",
        "ipv4",
        "ipv6",
        "uuid",
    ],
    unsupported: &[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "maxItems",
    ],
    all_required: false,
};

/// A schema rewritten for a [`Dialect`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Strict {
    pub schema: Value,
    /// Whether the rewrite accepts every value the original accepts, within what the
    /// dialect can express: false when an object takes extra properties (a map) or, with
    /// [`Dialect::all_required`], an optional property does not admit `null`.
    pub lossless: bool,
}

/// Rewrites `schema` for `dialect`. Pure and deterministic.
pub(crate) fn strict(schema: &Value, dialect: &Dialect) -> Strict {
    let mut lossless = true;
    let schema = rewrite(schema, dialect, &mut lossless);
    Strict { schema, lossless }
}

/// The keys whose values are schemas, and those whose values are arrays or maps of them.
const SUBSCHEMA: &[&str] = &["items", "not", "contains", "if", "then", "else"];
const SUBSCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
const SUBSCHEMA_MAPS: &[&str] = &["properties", "$defs", "definitions"];

fn rewrite(schema: &Value, dialect: &Dialect, lossless: &mut bool) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    let mut dropped: Vec<String> = Vec::new();
    for (key, value) in map {
        let value = match key.as_str() {
            "format"
                if value
                    .as_str()
                    .is_some_and(|f| !dialect.formats.contains(&f)) =>
            {
                dropped.push(format!("format: {}", value.as_str().unwrap_or_default()));
                continue;
            }
            "minItems"
                if !dialect.unsupported.is_empty() && value.as_u64().is_some_and(|n| n > 1) =>
            {
                dropped.push(format!("minItems: {value}"));
                continue;
            }
            k if dialect.unsupported.contains(&k) => {
                dropped.push(format!("{k}: {value}"));
                continue;
            }
            k if SUBSCHEMA.contains(&k) => rewrite(value, dialect, lossless),
            k if SUBSCHEMA_LISTS.contains(&k) => match value {
                Value::Array(items) => Value::Array(
                    items
                        .iter()
                        .map(|s| rewrite(s, dialect, lossless))
                        .collect(),
                ),
                other => other.clone(),
            },
            k if SUBSCHEMA_MAPS.contains(&k) => match value {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), rewrite(s, dialect, lossless)))
                        .collect(),
                ),
                other => other.clone(),
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    if !dropped.is_empty() {
        let note = format!("({})", dropped.join(", "));
        let description = match out.get("description").and_then(Value::as_str) {
            Some(d) if !d.is_empty() => format!("{d} {note}"),
            _ => note,
        };
        out.insert("description".into(), Value::String(description));
    }
    let is_object =
        out.get("type").and_then(Value::as_str) == Some("object") || out.contains_key("properties");
    if is_object {
        match out.get("additionalProperties") {
            None => {
                out.insert("additionalProperties".into(), Value::Bool(false));
            }
            Some(Value::Bool(false)) => {}
            Some(_) => *lossless = false,
        }
        if dialect.all_required {
            let names: Vec<String> = out
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            let required: Vec<&str> = out
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let properties = out.get("properties").and_then(Value::as_object);
            for name in &names {
                let optional = !required.contains(&name.as_str());
                if optional
                    && !properties
                        .and_then(|p| p.get(name))
                        .is_some_and(admits_null)
                {
                    *lossless = false;
                }
            }
            out.insert(
                "required".into(),
                Value::Array(names.into_iter().map(Value::String).collect()),
            );
        }
    }
    Value::Object(out)
}

/// Whether a schema accepts `null`: a `null` type (alone or in a type list), a `null`
/// branch of `anyOf` / `oneOf`, `nullable: true`, or no constraint at all.
fn admits_null(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return schema == &Value::Bool(true);
    };
    if map.get("nullable") == Some(&Value::Bool(true)) {
        return true;
    }
    match map.get("type") {
        Some(Value::String(t)) => return t == "null",
        Some(Value::Array(types)) => return types.iter().any(|t| t == "null"),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = map.get(key) {
            return branches.iter().any(admits_null);
        }
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return values.contains(&Value::Null);
    }
    map.get("const") == Some(&Value::Null)
        || !map.keys().any(|k| k != "description" && k != "title")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_strict_lists_every_property_and_closes_every_object() {
        // What schemars 1 writes for `struct { city: String, days: Option<u32>, tags: Vec<Tag> }`.
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}
            },
            "required": ["city", "tags"]
        });
        let out = strict(&schema, &OPENAI);
        assert!(out.lossless);
        assert_eq!(
            out.schema,
            json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": ["integer", "null"], "minimum": 0, "description": "(format: uint32)"},
                    "tags": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}}
                },
                "required": ["city", "days", "tags"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn a_map_or_an_optional_field_without_null_cannot_be_strict() {
        let map = json!({"type": "object", "additionalProperties": {"type": "integer"}});
        assert!(!strict(&map, &OPENAI).lossless);
        let defaulted = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        assert!(!strict(&defaulted, &OPENAI).lossless);
        // Anthropic allows optional properties.
        assert!(strict(&defaulted, &ANTHROPIC).lossless);
    }

    #[test]
    fn anthropic_drops_bounds_into_the_description() {
        let schema = json!({
            "type": "object",
            "description": "A reading.",
            "properties": {"celsius": {"type": "integer", "format": "int32", "minimum": -90, "maximum": 60}, "tags": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 2}},
            "required": ["celsius"]
        });
        let out = strict(&schema, &ANTHROPIC);
        assert_eq!(
            out.schema,
            json!({
                "type": "object",
                "description": "A reading.",
                "properties": {
                    "celsius": {"type": "integer", "description": "(format: int32, maximum: 60, minimum: -90)"},
                    "tags": {"type": "array", "items": {"type": "string", "format": "email"}, "description": "(minItems: 2)"}
                },
                "required": ["celsius"],
                "additionalProperties": false
            })
        );
    }
}
