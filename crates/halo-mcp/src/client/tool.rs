//! An MCP server's tool as a Halo [`DynTool`]: the spec (Halo's name, the server's
//! description and input schema), the annotations (`readOnlyHint`, `idempotentHint`,
//! `openWorldHint`), and
//! the call, whose every failure is an error result the model can read.

use std::sync::Arc;

use halo_core::{
    DynTool, ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolSpec, async_trait,
};
use serde_json::Value;

use super::content::to_output;
use super::server::{CallError, Server};

/// One tool of one server.
pub(crate) struct RemoteTool {
    pub(crate) server: Arc<Server>,
    /// The server's name for the tool (sent in `tools/call`).
    pub(crate) remote: String,
    pub(crate) spec: ToolSpec,
    pub(crate) annotations: ToolAnnotations,
}

impl RemoteTool {
    pub(crate) fn new(server: Arc<Server>, name: String, tool: &rmcp::model::Tool) -> Self {
        let description = tool
            .description
            .as_deref()
            .filter(|d| !d.is_empty())
            .or(tool.title.as_deref())
            .unwrap_or("")
            .to_string();
        let parameters = Value::Object((*tool.input_schema).clone());
        let hints = tool.annotations.as_ref();
        // MCP's defaults: not read-only, not idempotent, open world.
        let annotations = ToolAnnotations::default()
            .with_read_only(hints.and_then(|a| a.read_only_hint).unwrap_or(false))
            .with_idempotent(hints.and_then(|a| a.idempotent_hint).unwrap_or(false))
            .with_open_world(hints.and_then(|a| a.open_world_hint).unwrap_or(true));
        RemoteTool {
            server,
            remote: tool.name.to_string(),
            spec: ToolSpec::new(name, description, parameters),
            annotations,
        }
    }
}

#[async_trait]
impl DynTool for RemoteTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn annotations(&self) -> ToolAnnotations {
        self.annotations
    }

    async fn call_json(
        &self,
        arguments: Value,
        _cx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Ok(ToolOutput::error(format!(
                    "`{}` takes a JSON object of arguments, not {other}",
                    self.spec.name
                )));
            }
        };
        let server = &self.server.name;
        Ok(match self.server.call(&self.remote, arguments).await {
            Ok(result) => to_output(&result),
            // -32602 (invalid params) is both a call whose arguments the server refused and a
            // tool the server no longer has: say which one the server's message points to.
            Err(CallError::Rpc(code, message)) => ToolOutput::error(
                if code == -32602 && message.to_ascii_lowercase().contains("unknown tool") {
                    format!(
                        "the mcp server `{server}` no longer has `{}`: {message}; use one of the tools offered now",
                        self.remote
                    )
                } else if code == -32602 {
                    format!(
                        "the mcp server `{server}` rejected the call's arguments: {message}; fix them to fit the tool's schema and call again"
                    )
                } else {
                    format!("the mcp server `{server}` answered with an error ({code}): {message}")
                },
            ),
            Err(CallError::Timeout(d)) => ToolOutput::error(format!(
                "the mcp server `{server}` did not answer `{}` within {} ms; the call was cancelled. Try a smaller request, or do without this tool",
                self.remote,
                d.as_millis()
            )),
            Err(CallError::Closed) => ToolOutput::error(format!(
                "the mcp server `{server}` closed the connection during the call (it exited); it will be restarted on the next call, so retry if repeating `{}` is safe",
                self.remote
            )),
            Err(CallError::Start(e)) => ToolOutput::error(format!(
                "{e}; the tool is unavailable for now, do without it"
            )),
            Err(CallError::Other(m)) => {
                ToolOutput::error(format!("the call to the mcp server `{server}` failed: {m}"))
            }
        })
    }
}
