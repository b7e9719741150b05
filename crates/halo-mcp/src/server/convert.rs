//! Halo's tool shapes to MCP's: a [`ToolSpec`] and its [`ToolAnnotations`] to an rmcp
//! [`Tool`], a [`ToolResult`] to a [`CallToolResult`] (MCP 2025-11-25 / 2026-07-28,
//! `server/tools`).

use std::sync::Arc;

use halo_core::{ToolAnnotations, ToolResult, ToolSpec};
use rmcp::model::{CallToolResult, ContentBlock, Tool};
use serde_json::Value;

/// The MCP tool for a spec: name, description, `inputSchema` (the spec's parameter schema,
/// always a JSON object for a served tool) and annotations: `readOnlyHint` from
/// `read_only`, `idempotentHint` from `idempotent` (each only when true; MCP's defaults
/// are the cautious ones: not read-only, destructive, not idempotent).
pub(crate) fn mcp_tool(spec: &ToolSpec, annotations: ToolAnnotations) -> Tool {
    let schema = match &spec.parameters {
        Value::Object(map) => map.clone(),
        // The toolbox refuses non-object schemas; keep the listing valid regardless.
        _ => serde_json::Map::from_iter([("type".to_string(), Value::from("object"))]),
    };
    let tool = Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(schema),
    );
    let mut hints = rmcp::model::ToolAnnotations::new();
    let mut any = false;
    if annotations.read_only {
        hints = hints.read_only(true);
        any = true;
    }
    if annotations.idempotent {
        hints = hints.idempotent(true);
        any = true;
    }
    if any {
        tool.with_annotations(hints)
    } else {
        tool
    }
}

/// The MCP result for a Halo result: its text as one text block, `isError` when it is an
/// error result.
pub(crate) fn call_result(result: ToolResult) -> CallToolResult {
    let content = vec![ContentBlock::text(result.content)];
    if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// An error result with `text`.
pub(crate) fn error_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotations_map_to_hints_and_the_schema_passes_through() {
        let spec = ToolSpec::new(
            "read",
            "Reads a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        );
        let ro = serde_json::to_value(mcp_tool(&spec, ToolAnnotations::READ_ONLY)).unwrap();
        assert_eq!(
            ro,
            json!({
                "name": "read",
                "description": "Reads a file.",
                "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
                "annotations": {"readOnlyHint": true, "idempotentHint": true},
            })
        );
        let plain = serde_json::to_value(mcp_tool(&spec, ToolAnnotations::default())).unwrap();
        assert!(plain.get("annotations").is_none(), "{plain}");
    }

    #[test]
    fn error_results_carry_is_error() {
        let call = halo_core::ToolCall::new("1", "read", "{}");
        let err =
            serde_json::to_value(call_result(ToolResult::error(&call, "no such file"))).unwrap();
        assert_eq!(err["isError"], true);
        assert_eq!(
            err["content"],
            json!([{"type": "text", "text": "no such file"}])
        );
        let ok = serde_json::to_value(call_result(ToolResult::ok(&call, "hi"))).unwrap();
        assert_eq!(ok["isError"], false);
    }
}
