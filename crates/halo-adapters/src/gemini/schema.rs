//! JSON Schema → the OpenAPI 3.0 subset Gemini's `functionDeclarations[].parameters` and
//! `responseSchema` accept.
//!
//! Gemini answers any key outside its `Schema` object with `400 Invalid JSON payload
//! received. Unknown name "<key>" … Cannot find field.`, a type array with "Proto field is
//! not repeating, cannot start list.", and does not resolve `$ref`
//! (<https://ai.google.dev/api/caching#Schema>,
//! <https://ai.google.dev/gemini-api/docs/function-calling>). [`sanitize_schema`] keeps only the
//! accepted keys, after rewriting what has an equivalent.

use serde_json::{Map, Value};

/// The keys of Gemini's `Schema` object (an OpenAPI 3.0 subset), per the API reference
/// (<https://ai.google.dev/api/caching#Schema>) and the list found to be accepted in
/// practice (<https://github.com/NousResearch/hermes-agent/blob/main/agent/gemini_schema.py>).
const ALLOWED: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// How deep `$ref`s are followed before a (recursive) reference is cut to
/// `{"type": "object"}`.
const MAX_REF_DEPTH: usize = 16;

/// Rewrites a JSON Schema (draft 2020-12 or 7, as `schemars` writes it) into the subset
/// Gemini accepts. Pure and deterministic: the same input gives the same bytes.
///
/// - `$ref` to `#/$defs/…` or `#/definitions/…` is inlined (a recursive reference deeper
///   than 16 levels becomes `{"type": "object"}`); `$defs`, `definitions`, `$schema`, `$id`
///   and `$comment` go.
/// - `"type": ["string", "null"]` becomes `"type": "string", "nullable": true`; several
///   non-null types become an `anyOf`.
/// - `const` becomes a one-value `enum` (strings) or goes (other values); `oneOf` becomes
///   `anyOf`; `allOf` is merged (properties and `required` united, other keys first wins);
///   `examples` gives its first value to `example`.
/// - `enum` keeps strings only: `null` in it becomes `nullable`, and an enum with other
///   values is dropped with its values listed in the description instead (Gemini's enums
///   are strings, so a number enum would make the model send strings).
/// - `format` stays only where Gemini knows it (`date-time` and `enum` for strings,
///   `int32`/`int64` for integers, `float`/`double` for numbers).
/// - `required` keeps only names that are in `properties`.
/// - Every other key (`additionalProperties`, `patternProperties`, `propertyNames`,
///   `exclusiveMinimum`, `prefixItems`, …) is removed.
///
/// Property *names* are never filtered: a property called `default` stays.
///
/// ```
/// use halo_adapters::gemini::sanitize_schema;
/// use serde_json::json;
///
/// let schema = json!({
///     "$schema": "https://json-schema.org/draft/2020-12/schema",
///     "type": "object",
///     "additionalProperties": false,
///     "properties": {"path": {"type": ["string", "null"]}, "mode": {"const": "fast"}},
///     "required": ["path"]
/// });
/// assert_eq!(sanitize_schema(&schema), json!({
///     "type": "object",
///     "properties": {
///         "path": {"type": "string", "nullable": true},
///         "mode": {"enum": ["fast"]}
///     },
///     "required": ["path"]
/// }));
/// ```
pub fn sanitize_schema(schema: &Value) -> Value {
    let defs = Defs::of(schema);
    sanitize(schema, &defs, 0)
}

/// The definitions `$ref`s may point at.
struct Defs<'a> {
    root: &'a Value,
}

impl<'a> Defs<'a> {
    fn of(root: &'a Value) -> Self {
        Defs { root }
    }

    /// The schema a local `$ref` (`#/$defs/Name`, `#/definitions/Name`, any JSON pointer
    /// into the root) points at.
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }
}

fn sanitize(schema: &Value, defs: &Defs<'_>, depth: usize) -> Value {
    let Value::Object(map) = schema else {
        // `true` / `false` schemas and anything odd: an unconstrained value is the closest
        // thing Gemini has; an empty object lets the model send anything.
        return Value::Object(Map::new());
    };
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        let target = (depth < MAX_REF_DEPTH)
            .then(|| defs.resolve(reference))
            .flatten();
        let Some(target) = target else {
            let mut cut = Map::new();
            cut.insert("type".into(), "object".into());
            return Value::Object(cut);
        };
        // Keys next to `$ref` (a description, say) win over the target's.
        let mut merged = match target {
            Value::Object(t) => t.clone(),
            _ => Map::new(),
        };
        for (k, v) in map {
            if k != "$ref" {
                merged.insert(k.clone(), v.clone());
            }
        }
        return sanitize(&Value::Object(merged), defs, depth + 1);
    }

    let mut map = map.clone();
    if let Some(Value::Array(all)) = map.remove("allOf") {
        for part in all {
            let part = match sanitize(&part, defs, depth) {
                Value::Object(p) => p,
                _ => continue,
            };
            merge_into(&mut map, part);
        }
    }
    if let Some(one_of) = map.remove("oneOf")
        && !map.contains_key("anyOf")
    {
        map.insert("anyOf".into(), one_of);
    }
    if let Some(value) = map.remove("const")
        && value.is_string()
        && !map.contains_key("enum")
    {
        map.insert("enum".into(), Value::Array(vec![value]));
    }
    if let Some(Value::Array(examples)) = map.remove("examples")
        && let Some(first) = examples.into_iter().next()
    {
        map.entry("example").or_insert(first);
    }

    let mut out = Map::new();
    for key in ALLOWED {
        let Some(value) = map.get(*key) else { continue };
        match *key {
            "type" => type_field(value, &mut out),
            "properties" => {
                if let Value::Object(props) = value {
                    let props: Map<String, Value> = props
                        .iter()
                        .map(|(name, s)| (name.clone(), sanitize(s, defs, depth)))
                        .collect();
                    out.insert("properties".into(), Value::Object(props));
                }
            }
            "items" => {
                let items = match value {
                    // Tuples are not supported: the first item schema stands for all.
                    Value::Array(list) => list.first().cloned().unwrap_or(Value::Null),
                    other => other.clone(),
                };
                out.insert("items".into(), sanitize(&items, defs, depth));
            }
            "anyOf" => {
                if let Value::Array(list) = value {
                    let is_null = |s: &Value| s.get("type").and_then(Value::as_str) == Some("null");
                    let nulls = list.iter().filter(|s| is_null(s)).count();
                    let rest: Vec<Value> = list
                        .iter()
                        .filter(|s| !is_null(s))
                        .map(|s| sanitize(s, defs, depth))
                        .collect();
                    if nulls > 0 {
                        out.insert("nullable".into(), Value::Bool(true));
                    }
                    match rest.len() {
                        0 => {}
                        1 => {
                            if let Some(Value::Object(only)) = rest.into_iter().next() {
                                for (k, v) in only {
                                    out.entry(k).or_insert(v);
                                }
                            }
                        }
                        _ => {
                            out.insert("anyOf".into(), Value::Array(rest));
                        }
                    }
                }
            }
            "enum" => enum_field(value, &map, &mut out),
            "format" => {}
            _ => {
                out.entry(key.to_string()).or_insert_with(|| value.clone());
            }
        }
    }
    if let Some(format) = map.get("format").and_then(Value::as_str) {
        let ok = match out.get("type").and_then(Value::as_str) {
            Some("string") => matches!(format, "date-time" | "enum"),
            Some("integer") => matches!(format, "int32" | "int64"),
            Some("number") => matches!(format, "float" | "double"),
            _ => false,
        };
        if ok {
            out.insert("format".into(), Value::String(format.to_string()));
        }
    }
    if let Some(Value::Array(required)) = out.get("required") {
        let props = out.get("properties").and_then(Value::as_object);
        let kept: Vec<Value> = required
            .iter()
            .filter(|r| {
                r.as_str()
                    .is_some_and(|name| props.is_some_and(|p| p.contains_key(name)))
            })
            .cloned()
            .collect();
        if kept.is_empty() {
            out.remove("required");
        } else {
            out.insert("required".into(), Value::Array(kept));
        }
    }
    Value::Object(out)
}

/// `type` as one name (Gemini's `Type` enum), with `null` folded into `nullable`.
fn type_field(value: &Value, out: &mut Map<String, Value>) {
    match value {
        Value::String(t) if t == "null" => {
            out.insert("nullable".into(), Value::Bool(true));
        }
        Value::String(t) => {
            out.insert("type".into(), Value::String(t.clone()));
        }
        Value::Array(types) => {
            let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            if names.contains(&"null") {
                out.insert("nullable".into(), Value::Bool(true));
            }
            let rest: Vec<&str> = names.into_iter().filter(|t| *t != "null").collect();
            match rest.as_slice() {
                [] => {}
                [one] => {
                    out.insert("type".into(), Value::String(one.to_string()));
                }
                many => {
                    let any: Vec<Value> = many
                        .iter()
                        .map(|t| serde_json::json!({ "type": t }))
                        .collect();
                    out.insert("anyOf".into(), Value::Array(any));
                }
            }
        }
        _ => {}
    }
}

/// `enum` as strings only; see [`sanitize_schema`].
fn enum_field(value: &Value, map: &Map<String, Value>, out: &mut Map<String, Value>) {
    let Value::Array(values) = value else { return };
    if values.iter().any(Value::is_null) {
        out.insert("nullable".into(), Value::Bool(true));
    }
    let values: Vec<&Value> = values.iter().filter(|v| !v.is_null()).collect();
    if values.is_empty() {
        return;
    }
    if values.iter().all(|v| v.is_string()) {
        out.insert(
            "enum".into(),
            Value::Array(values.into_iter().cloned().collect()),
        );
        return;
    }
    let listed: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    let note = format!("One of: {}.", listed.join(", "));
    let description = match map.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => format!("{d} {note}"),
        _ => note,
    };
    out.insert("description".into(), Value::String(description));
}

/// `allOf` merging: properties united, `required` united (in order, no repeats), other
/// keys kept from whichever came first.
fn merge_into(into: &mut Map<String, Value>, part: Map<String, Value>) {
    for (k, v) in part {
        match (k.as_str(), into.get_mut(&k), v) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (name, s) in theirs {
                    mine.entry(name).or_insert(s);
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for name in theirs {
                    if !mine.contains(&name) {
                        mine.push(name);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, v) => {
                into.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refs_are_inlined_and_defs_dropped() {
        // The shape schemars 1.x writes for a struct holding another struct.
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args",
            "type": "object",
            "properties": {
                "range": {"$ref": "#/$defs/Range", "description": "Lines to read."},
                "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1}
            },
            "required": ["range", "paths", "ghost"],
            "$defs": {
                "Range": {
                    "type": "object",
                    "properties": {
                        "start": {"type": "integer", "format": "uint32", "minimum": 0},
                        "end": {"type": ["integer", "null"], "format": "int64"}
                    },
                    "required": ["start"],
                    "additionalProperties": false
                }
            }
        });
        assert_eq!(
            sanitize_schema(&schema),
            json!({
                "title": "Args",
                "type": "object",
                "properties": {
                    "range": {
                        "type": "object",
                        "description": "Lines to read.",
                        "properties": {
                            "start": {"type": "integer", "minimum": 0},
                            "end": {"type": "integer", "nullable": true, "format": "int64"}
                        },
                        "required": ["start"]
                    },
                    "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1}
                },
                "required": ["range", "paths"]
            })
        );
    }

    #[test]
    fn recursive_refs_are_cut() {
        let schema = json!({
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}
        });
        let out = sanitize_schema(&schema);
        let mut at = &out["properties"]["tree"];
        let mut levels = 0;
        while let Some(next) = at.get("properties") {
            at = &next["children"]["items"];
            levels += 1;
        }
        assert_eq!(levels, MAX_REF_DEPTH);
        assert_eq!(at, &json!({"type": "object"}));
        assert_eq!(
            sanitize_schema(&json!({"$ref": "#/$defs/Missing"})),
            json!({"type": "object"})
        );
    }

    #[test]
    fn unions_consts_enums_and_examples_are_rewritten() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "b": {"anyOf": [{"type": "string", "format": "email"}, {"type": "null"}]},
                "c": {"type": ["string", "integer", "null"]},
                "d": {"const": 3, "description": "Three."},
                "e": {"enum": [1, 2, 3], "description": "Level."},
                "f": {"enum": ["x", null]},
                "g": {"type": "string", "examples": ["a", "b"], "default": "a", "$comment": "c"},
                "h": {"allOf": [{"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
                                {"properties": {"y": {"type": "number", "exclusiveMinimum": 0}}, "required": ["y"]}]},
                "default": {"type": "boolean", "propertyNames": {"pattern": "^a"}}
            },
            "patternProperties": {"^x": {"type": "string"}},
            "unevaluatedProperties": false
        });
        assert_eq!(
            sanitize_schema(&schema),
            json!({
                "type": "object",
                "properties": {
                    "a": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "b": {"nullable": true, "type": "string"},
                    "c": {"nullable": true, "anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "d": {"description": "Three."},
                    "e": {"description": "Level. One of: 1, 2, 3."},
                    "f": {"nullable": true, "enum": ["x"]},
                    "g": {"type": "string", "example": "a", "default": "a"},
                    "h": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "number"}}, "required": ["x", "y"]},
                    "default": {"type": "boolean"}
                }
            })
        );
    }

    #[test]
    fn odd_input_never_panics() {
        for v in [
            json!(true),
            json!(null),
            json!([1, 2]),
            json!({"type": 5, "items": [], "anyOf": "x"}),
        ] {
            let out = sanitize_schema(&v);
            assert!(out.is_object(), "{v} → {out}");
        }
    }
}
