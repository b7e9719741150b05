//! Bridge mode: one server re-exports an external MCP server's tools next to its own. The
//! external server here is a second in-process rmcp server; its tools reach the bridge as
//! `DynTool`s that call it through rmcp's client, as `halo_mcp::client` gives them.

use std::sync::Arc;

use halo_core::{DynTool, ToolContext, ToolError, ToolOutput, ToolSpec, async_trait};
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
    async fn call_json(
        &self,
        arguments: Value,
        _cx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
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

/// A tool source whose tool list a test changes.
struct Switch {
    version: std::sync::atomic::AtomicU64,
    with_note: std::sync::atomic::AtomicBool,
}

impl halo_core::ToolSource for Switch {
    fn version(&self) -> u64 {
        self.version.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        if self.with_note.load(std::sync::atomic::Ordering::SeqCst) {
            vec![Arc::new(Note(Arc::default()))]
        } else {
            vec![]
        }
    }
}

// `follow_source` keeps the served set equal to the local tools plus the source's current
// ones: a change of the source's version reaches `tools/list` (and its clients).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_source_serves_the_bridged_tools_as_they_change() {
    let source = Arc::new(Switch {
        version: 0.into(),
        with_note: false.into(),
    });
    let local: Vec<Arc<dyn DynTool>> = vec![Arc::new(Echo)];
    let server = McpServer::builder().tools(local.clone()).build().unwrap();
    let follower = tokio::spawn(server.clone().follow_source(
        local,
        source.clone(),
        std::time::Duration::from_millis(5),
    ));
    assert_eq!(server.tool_names(), ["echo"]);
    source
        .with_note
        .store(true, std::sync::atomic::Ordering::SeqCst);
    source.version.store(1, std::sync::atomic::Ordering::SeqCst);
    let started = std::time::Instant::now();
    while server.tool_names().len() < 2 && started.elapsed().as_secs() < 5 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(server.tool_names(), ["echo", "note"]);
    source
        .with_note
        .store(false, std::sync::atomic::Ordering::SeqCst);
    source.version.store(2, std::sync::atomic::Ordering::SeqCst);
    let started = std::time::Instant::now();
    while server.tool_names().len() > 1 && started.elapsed().as_secs() < 5 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(server.tool_names(), ["echo"]);
    follower.abort();
}
