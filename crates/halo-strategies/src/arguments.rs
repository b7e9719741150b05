//! Argument repair: a tool call's argument string that is almost JSON made into a JSON object,
//! before schema validation.
//!
//! Covered, each with cases from GPT, Claude, Llama, Qwen and Gemini output in
//! `tests/data/arguments.json` (the test `arguments::every_case_of_the_table`):
//! - a ```` ```json ```` fence (or a bare one), and prose before or after the object
//!   (`<|python_tag|>`, `<parameters>` wrappers too);
//! - single quotes, trailing commas, unquoted keys, comments, raw newlines in strings;
//! - Python literals (`True`, `False`, `None`), never inside a string;
//! - missing closing brackets and quotes at the end (output cut at `max_tokens`);
//! - a double-encoded JSON string (`"{\"path\": \"a\"}"`).
//!
//! ## Why jsonrepair-rs, and what is ours
//!
//! The repair itself is [`jsonrepair_rs`] 0.2.6, a dependency-free port of josdejong's
//! jsonrepair. It was picked by running the crates.io candidates on the case table (32 cases;
//! `xtask/bench/json-repair` is the harness,
//! `cargo run --release --manifest-path xtask/bench/json-repair/Cargo.toml`):
//!
//! | crate | alone | behind our steps |
//! |---|---|---|
//! | `jsonrepair-rs` 0.2.6 | 26 / 32 | **32 / 32** |
//! | `jsonrepair` 0.1.0 | 29 / 32 | 31 / 32 (turns `True` inside a string into `true`) |
//! | `llm_json` 1.0.3 | 30 / 32 | 30 / 32 (rejects raw newlines in strings and `\'`; pulls in clap) |
//! | `json5` 1.3.7 | 17 / 32 | 25 / 32 (no Python literals, no truncation) |
//! | `json-repair` 0.4.0 | — | does not build on stable Rust (needs `#![feature]`) |
//!
//! Our thin steps around it, all that is home-made here: a valid object passes through
//! byte-identical (so a repair strategy never changes a well-formed call's bytes, and repair is
//! idempotent); a JSON string is decoded once (double encoding); the text from the first `{`
//! to its balanced `}` (strings skipped) is cut out of fences and prose, which
//! jsonrepair-rs alone fails on; the result must be a JSON object, else the call is
//! [`Unrepairable`](ArgumentRepair::Unrepairable). Inputs over [`MAX_REPAIR_BYTES`] are not
//! repaired; jsonrepair-rs's recursive parser stops at 128 levels of nesting (an error, not a
//! stack overflow), as `serde_json` does.

use serde_json::Value;

/// The longest argument string repaired, in bytes (1 MiB); longer ones are unrepairable.
pub const MAX_REPAIR_BYTES: usize = 1 << 20;

/// What [`repair_arguments`] made of an argument string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentRepair {
    /// Already a JSON object (or `""` / `null`, which Halo reads as `{}`): keep the bytes.
    Valid,
    /// The repaired arguments: a JSON object as compact JSON.
    Repaired(String),
    /// No JSON object could be read out of it. Leave it as it is: dispatch answers the call
    /// with an error result that quotes the tool's schema.
    Unrepairable,
}

/// Repairs a tool call's argument string. Never panics; deterministic; idempotent
/// (repairing a [`Repaired`](ArgumentRepair::Repaired) string gives
/// [`Valid`](ArgumentRepair::Valid)).
///
/// ```
/// use halo_strategies::arguments::{ArgumentRepair, repair_arguments};
///
/// assert_eq!(repair_arguments(r#"{"path": "a.txt"}"#), ArgumentRepair::Valid);
/// assert_eq!(
///     repair_arguments("```json\n{'path': 'a.txt', 'all': True,}\n```"),
///     ArgumentRepair::Repaired(r#"{"all":true,"path":"a.txt"}"#.into())
/// );
/// assert_eq!(repair_arguments("I need more information."), ArgumentRepair::Unrepairable);
/// ```
pub fn repair_arguments(raw: &str) -> ArgumentRepair {
    if raw.trim().is_empty() {
        return ArgumentRepair::Valid;
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(_) | Value::Null) => ArgumentRepair::Valid,
        // Double-encoded: the object is inside a JSON string.
        Ok(Value::String(inner)) => match repair_text(&inner) {
            Some(object) => ArgumentRepair::Repaired(object),
            None => ArgumentRepair::Unrepairable,
        },
        Ok(_) => ArgumentRepair::Unrepairable,
        Err(_) => match repair_text(raw) {
            Some(object) => ArgumentRepair::Repaired(object),
            None => ArgumentRepair::Unrepairable,
        },
    }
}

/// The object read out of `text` as compact JSON, if there is one.
fn repair_text(text: &str) -> Option<String> {
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
        return serde_json::to_string(&canonical(v)).ok();
    }
    if text.len() > MAX_REPAIR_BYTES {
        return None;
    }
    let body = outermost_object(text)?;
    let repaired = jsonrepair_rs::jsonrepair(body).ok()?;
    match serde_json::from_str::<Value>(&repaired).ok()? {
        v @ Value::Object(_) => serde_json::to_string(&canonical(v)).ok(),
        _ => None,
    }
}

/// Keys in sorted order whatever `serde_json`'s map type (a repaired call is the same bytes
/// in every build).
fn canonical(v: Value) -> Value {
    halo_core::prefix::canonicalize(v)
}

/// The first `{` and everything up to its balanced `}` (strings in either quote skipped), or
/// to the end when the object is cut off. `None` without a `{`.
fn outermost_object(raw: &str) -> Option<&str> {
    let start = raw.find('{')?;
    let (mut depth, mut quote, mut escaped) = (0usize, None::<char>, false);
    for (i, c) in raw[start..].char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '{' | '[' => depth += 1,
                '}' | ']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Some(&raw[start..start + i + c.len_utf8()]);
                    }
                }
                _ => {}
            },
        }
    }
    Some(&raw[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_is_cut_at_its_balanced_brace_whatever_the_strings_hold() {
        assert_eq!(
            outermost_object(r#"x {"a": "}{", 'b': '}'} y {z}"#),
            Some(r#"{"a": "}{", 'b': '}'}"#)
        );
        assert_eq!(outermost_object(r#"{"a": [1"#), Some(r#"{"a": [1"#));
        assert_eq!(outermost_object("no object"), None);
    }

    // Trigger: a string of 10,000 `[` would overflow the recursive parser's stack.
    #[test]
    fn deep_nesting_is_unrepairable_not_a_stack_overflow() {
        let deep = format!("{{\"a\": {}", "[".repeat(10_000));
        assert_eq!(repair_arguments(&deep), ArgumentRepair::Unrepairable);
        let ok = format!("{{\"a\": {}", "[".repeat(100));
        assert!(matches!(repair_arguments(&ok), ArgumentRepair::Repaired(_)));
    }

    #[test]
    fn empty_and_null_are_left_to_core_which_reads_them_as_empty_objects() {
        assert_eq!(repair_arguments(""), ArgumentRepair::Valid);
        assert_eq!(repair_arguments(" \n"), ArgumentRepair::Valid);
        assert_eq!(repair_arguments("null"), ArgumentRepair::Valid);
    }
}
