//! Tool-name repair: a called name that is not a tool, matched to the one tool it must mean.
//!
//! Tried in order, each accepted only when exactly one tool matches (an ambiguous name is
//! left alone, and dispatch answers it with the list of valid names):
//! 1. case and `-` versus `_` (`Read` → `read`, `list-dir` → `list_dir`);
//! 2. a namespace the model put in front: `functions.read` (OpenAI's harmony format),
//!    `default_api.read` (Gemini), `tools.read`;
//! 3. a missing MCP server prefix: `search_issues` → `mcp__github__search_issues` when exactly
//!    one tool ends in `__search_issues`;
//! 4. a wrong server prefix: `mcp__gh__search_issues` → by its last segment, as in 3.
//!
//! Cases from several model families: `tests/data/names.json` (the test
//! `names::every_case_of_the_table`).

use halo_core::ToolSpec;

/// Namespaces models put before a tool name.
const NAMESPACES: [&str; 4] = ["functions.", "default_api.", "tools.", "tool."];

/// The tool `name` must mean, or `None` when it is a tool already, or matches no tool or
/// several.
///
/// ```
/// use halo_core::ToolSpec;
/// use halo_strategies::names::repair_name;
/// use serde_json::json;
///
/// let tools = ["read", "mcp__github__search_issues"]
///     .map(|n| ToolSpec::new(n, "", json!({"type": "object"})));
/// assert_eq!(repair_name("Read", &tools).as_deref(), Some("read"));
/// assert_eq!(repair_name("search-issues", &tools).as_deref(), Some("mcp__github__search_issues"));
/// assert_eq!(repair_name("read", &tools), None);
/// assert_eq!(repair_name("delete", &tools), None);
/// ```
pub fn repair_name(name: &str, tools: &[ToolSpec]) -> Option<String> {
    if tools.iter().any(|t| t.name == name) {
        return None;
    }
    let called = normalize(name.trim());
    let called = NAMESPACES
        .iter()
        .find_map(|ns| called.strip_prefix(ns))
        .unwrap_or(&called);
    if called.is_empty() {
        return None;
    }
    let unique = |matches: &dyn Fn(&str) -> bool| {
        let mut found = tools.iter().filter(|t| matches(&normalize(&t.name)));
        match (found.next(), found.next()) {
            (Some(t), None) => Some(t.name.clone()),
            _ => None,
        }
    };
    if let Some(tool) = unique(&|t| t == called) {
        return Some(tool);
    }
    let suffix = format!("__{called}");
    if let Some(tool) = unique(&|t| t.ends_with(&suffix)) {
        return Some(tool);
    }
    // A server prefix of the wrong server: match by the last segment.
    let last = called.rsplit("__").next().filter(|l| *l != called)?;
    let suffix = format!("__{last}");
    unique(&|t| t == last || t.ends_with(&suffix))
}

/// Lowercase, `-` as `_`.
fn normalize(name: &str) -> String {
    name.to_lowercase().replace('-', "_")
}
