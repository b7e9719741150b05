//! The MCP server against rmcp's own client: in-process over `tokio::io::duplex` (legacy
//! and 2026-07-28 sessions) and over loopback HTTP.

mod agent;
mod bridge;
mod calls;
mod changes;
mod http;

use std::sync::{Arc, Mutex};

use halo_core::{
    DynTool, Tool, ToolAnnotations, ToolCallDecision, ToolContext, ToolError, ToolHook, ToolOutput,
    async_trait,
};
use halo_mcp::server::McpServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt as _, NotificationContext, RunningService,
};
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[derive(Deserialize, halo_core::JsonSchema)]
#[schemars(crate = "halo_core::schemars")]
pub struct TextArgs {
    /// Some text.
    pub text: String,
}

/// `echo {text}` → `echo: TEXT`; read-only.
pub struct Echo;

impl Tool for Echo {
    type Args = TextArgs;
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Sends the text back."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }
    async fn call(&self, a: TextArgs) -> Result<ToolOutput, ToolError> {
        match a.text.as_str() {
            "fail" => Err(ToolError::Failed("echo refuses to say fail".into())),
            "fatal" => Err(ToolError::Fatal("the echo chamber collapsed".into())),
            _ => Ok(format!("echo: {}", a.text).into()),
        }
    }
}

/// `note {text}` appends to a shared list; changes things (not read-only).
#[derive(Clone, Default)]
pub struct Note(pub Arc<Mutex<Vec<String>>>);

impl Tool for Note {
    type Args = TextArgs;
    fn name(&self) -> &str {
        "note"
    }
    fn description(&self) -> &str {
        "Writes a note down."
    }
    async fn call(&self, a: TextArgs) -> Result<ToolOutput, ToolError> {
        self.0.lock().unwrap().push(a.text.clone());
        Ok(format!("noted {}", a.text).into())
    }
}

/// Denies any call whose `text` is `forbidden`; aborts on `abort`.
pub struct Policy;

#[async_trait]
impl ToolHook for Policy {
    async fn before_tool_call(&self, _cx: &ToolContext, args: &Value) -> ToolCallDecision {
        match args["text"].as_str() {
            Some("forbidden") => {
                ToolCallDecision::Deny("this server does not say forbidden".into())
            }
            Some("abort") => ToolCallDecision::Abort("the policy stopped the session".into()),
            _ => ToolCallDecision::Allow,
        }
    }
}

/// What the client saw besides responses.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    ListChanged,
    Progress(f64, Option<String>),
}

/// A client handler that reports notifications on a channel.
#[derive(Clone)]
pub struct Recorder(pub mpsc::UnboundedSender<Seen>);

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send(Seen::ListChanged);
    }
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(Seen::Progress(params.progress, params.message));
    }
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

/// Which handshake the client makes.
#[derive(Debug, Clone, Copy)]
pub enum Era {
    /// `initialize` (2025-11-25).
    Legacy,
    /// `server/discover` and per-request `_meta` (2026-07-28).
    Modern,
}

/// `server` serving one session over an in-process duplex pipe, and rmcp's client on the
/// other end; the receiver gets the client's notifications.
pub async fn connect(server: McpServer, era: Era) -> (Client, mpsc::UnboundedReceiver<Seen>) {
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let (tx, rx) = mpsc::unbounded_channel();
    let recorder = Recorder(tx);
    let client = match era {
        Era::Legacy => recorder.serve(client_io).await.expect("legacy handshake"),
        Era::Modern => recorder
            .serve_with_lifecycle(
                client_io,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .expect("discover handshake"),
    };
    (client, rx)
}

/// Calls `name` with `args` (a JSON object).
pub async fn call(client: &Client, name: &str, args: Value) -> CallToolResult {
    client
        .call_tool(params(name, args))
        .await
        .unwrap_or_else(|e| panic!("calling {name}: {e}"))
}

pub fn params(name: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(name.to_string()).with_arguments(args)
}

/// The result's text blocks joined, and its `isError`.
pub fn text(result: &CallToolResult) -> (String, bool) {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    (texts.join("\n"), result.is_error == Some(true))
}

/// The usual test server: `echo` and `note`, with [`Policy`].
pub fn server(note: &Note) -> McpServer {
    let tools: Vec<Arc<dyn DynTool>> = vec![Arc::new(note.clone()), Arc::new(Echo)];
    McpServer::builder()
        .tools(tools)
        .hook(Arc::new(Policy))
        .build()
        .unwrap()
}

pub fn args(text: &str) -> Value {
    json!({ "text": text })
}
