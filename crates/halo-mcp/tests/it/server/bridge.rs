//! Bridge mode: one server re-exports an external MCP server's tools next to its own. The
//! external server here is a second in-process rmcp server; its tools reach the bridge as
//! `DynTool`s that call it through rmcp's client, as `halo_mcp::client` gives them.

use std::sync::Arc;

use halo_core::{DynTool, ToolError, ToolOutput, ToolSpec, async_trait};
use halo_mcp::server::McpServer;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RunningService};
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::Value;

use super::{Echo, Era, Note, args, call, connect, text};

/// An external server's tool, called through an rmcp client: `mcp__<server>__<tool>`.
struct Remote {
    server: &'static str,
    tool: rmcp::model::Tool,
    peer: Peer<RoleClient>,
}

#[async_trait]
impl DynTool for Remote {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            format!("mcp__{}__{}", self.server, self.tool.name),
            self.tool.description.clone().unwrap_or_default(),
            Value::Object((*self.tool.input_schema).clone()),
        )
    }
    async fn call_json(&self, arguments: Value) -> Result<ToolOutput, ToolError> {
        let Value::Object(arguments) = arguments else {
            return Err(ToolError::InvalidArguments("not an object".into()));
        };
        let result = self
            .peer
            .call_tool(
                CallToolRequestParams::new(self.tool.name.to_string()).with_arguments(arguments),
            )
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let (content, is_error) = text(&result);
        Ok(ToolOutput {
            content,
            is_error,
            ..Default::default()
        })
    }
}

#[tokio::test]
async fn a_bridge_serves_an_external_servers_tools_next_to_its_own() {
    // The external server: `note`, over its own duplex pipe, with rmcp's client in front.
    let note = Note::default();
    let external = McpServer::builder()
        .tool(Arc::new(note.clone()))
        .build()
        .unwrap();
    let (external_io, bridge_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = external.serve(external_io).await {
            let _ = running.waiting().await;
        }
    });
    let upstream: RunningService<RoleClient, ()> = ().serve(bridge_io).await.unwrap();
    let remote: Vec<Arc<dyn DynTool>> = upstream
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| {
            Arc::new(Remote {
                server: "notes",
                tool,
                peer: upstream.peer().clone(),
            }) as Arc<dyn DynTool>
        })
        .collect();

    let bridge = McpServer::builder()
        .tool(Arc::new(Echo))
        .bridge(remote)
        .hook(Arc::new(super::Policy))
        .build()
        .unwrap();
    let (client, _seen) = connect(bridge, Era::Legacy).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["echo", "mcp__notes__note"]);
    assert_eq!(
        tools[1].input_schema["required"],
        serde_json::json!(["text"]),
        "the external schema passes through"
    );

    assert_eq!(
        text(&call(&client, "mcp__notes__note", args("from the bridge")).await),
        ("noted from the bridge".to_string(), false)
    );
    assert_eq!(*note.0.lock().unwrap(), ["from the bridge"]);
    // The bridge's own hooks apply to bridged calls before they leave.
    assert_eq!(
        text(&call(&client, "mcp__notes__note", args("forbidden")).await),
        ("this server does not say forbidden".to_string(), true)
    );
    assert_eq!(*note.0.lock().unwrap(), ["from the bridge"]);
    assert_eq!(
        text(&call(&client, "echo", args("local")).await),
        ("echo: local".to_string(), false)
    );
}
