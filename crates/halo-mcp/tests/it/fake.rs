//! An rmcp server in the test process: pages `tools/list` two tools at a time, and has
//! tools that echo, sleep, fail, kill their own connection and change the tool list.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use halo_mcp::InProcess;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    SubscriptionFilter, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler, ServiceExt as _};
use serde_json::json;
use tokio::sync::Notify;

/// The fake's state, shared by every connection.
#[derive(Clone)]
pub struct Fake {
    /// Names of the tools listed, in order.
    pub names: Arc<Mutex<Vec<String>>>,
    /// `tools/list` requests answered.
    pub list_calls: Arc<AtomicUsize>,
    /// Connections served.
    pub connections: Arc<AtomicUsize>,
    die: Arc<Notify>,
    /// Tool-list changes, for 2026-07-28 sessions' `subscriptions/listen` streams.
    changes: tokio::sync::broadcast::Sender<()>,
}

fn tool(name: &str) -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {"message": {"type": "string"}},
    });
    let serde_json::Value::Object(schema) = schema else {
        unreachable!()
    };
    let tool = Tool::new(
        name.to_string(),
        format!("The fake's {name}."),
        Arc::new(schema),
    );
    if name == "echo" {
        tool.with_annotations(ToolAnnotations::new().read_only(true).idempotent(true))
    } else {
        tool
    }
}

impl Fake {
    /// A fake listing `echo`, `slow`, `fail`, `die`, `grow` (five tools: three pages).
    pub fn new() -> Self {
        Fake {
            names: Arc::new(Mutex::new(
                ["echo", "slow", "fail", "die", "grow"]
                    .map(String::from)
                    .to_vec(),
            )),
            list_calls: Arc::default(),
            connections: Arc::default(),
            die: Arc::default(),
            changes: tokio::sync::broadcast::channel(16).0,
        }
    }

    /// The client's end of a new connection; the fake serves the other end on a task.
    pub fn connector(&self) -> InProcess {
        let fake = self.clone();
        Arc::new(move || {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let fake = fake.clone();
            fake.connections.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let die = fake.die.clone();
                if let Ok(running) = fake.serve(server).await {
                    tokio::select! {
                        _ = running.waiting() => {}
                        // Dropping the running service closes the connection mid-call.
                        _ = die.notified() => {}
                    }
                }
            });
            client
        })
    }
}

impl Fake {
    /// Serves the fake over streamable HTTP on 127.0.0.1 (an ephemeral port); returns the
    /// MCP endpoint's URL.
    pub async fn serve_http(&self) -> String {
        use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
        use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
        let fake = self.clone();
        let service = StreamableHttpService::new(
            move || Ok(fake.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        format!("http://{addr}/mcp")
    }

    /// Serves the fake over streamable HTTP behind TLS (`tls`: its certificate and key) on
    /// 127.0.0.1; returns `https://localhost:PORT/mcp`.
    pub async fn serve_https(&self, tls: rustls::ServerConfig) -> String {
        use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
        use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
        let fake = self.clone();
        let service = StreamableHttpService::new(
            move || Ok(fake.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let config = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(tls));
        let server = axum_server::from_tcp_rustls(listener, config).unwrap();
        tokio::spawn(async move { server.serve(router.into_make_service()).await });
        format!("https://localhost:{port}/mcp")
    }
}

impl ServerHandler for Fake {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.changes.subscribe();
        loop {
            tokio::select! {
                change = changes.recv() => {
                    if change.is_err() {
                        return Ok(());
                    }
                    let _ = context.sink().notify_tool_list_changed().await;
                }
                _ = context.cancelled() => return Ok(()),
            }
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.list_calls.fetch_add(1, Ordering::SeqCst);
        let names = self.names.lock().unwrap().clone();
        let start: usize = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .strip_prefix("page-")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| ErrorData::invalid_params("bad cursor", None))?,
        };
        let end = (start + 2).min(names.len());
        let mut page =
            ListToolsResult::with_all_items(names[start..end].iter().map(|n| tool(n)).collect());
        if end < names.len() {
            page.next_cursor = Some(format!("page-{end}"));
        }
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let message = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("message"))
            .cloned();
        match request.name.as_ref() {
            "echo" => match message {
                Some(serde_json::Value::String(m)) => {
                    // Over HTTP: the header the client was configured with.
                    let header = context
                        .extensions
                        .get::<http::request::Parts>()
                        .and_then(|p| p.headers.get("x-halo-test"))
                        .and_then(|v| v.to_str().ok())
                        .map(|v| format!(" (x-halo-test: {v})"))
                        .unwrap_or_default();
                    let text = format!("echo: {m}{header}");
                    Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
                }
                _ => Err(ErrorData::invalid_params(
                    "message: expected a string",
                    None,
                )),
            },
            "slow" => {
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                Ok(CallToolResult::success(vec![]).into())
            }
            "fail" => {
                Ok(CallToolResult::error(vec![ContentBlock::text("it failed on purpose")]).into())
            }
            "die" => {
                self.die.notify_one();
                std::future::pending::<()>().await;
                unreachable!()
            }
            "grow" => {
                let listed = self.list_calls.load(Ordering::SeqCst);
                let pages = self.names.lock().unwrap().len() / 2 + 1;
                self.names.lock().unwrap().push("extra".into());
                if context.protocol_version() == Some(ProtocolVersion::V_2026_07_28) {
                    // 2026-07-28: only on the client's listen streams.
                    let _ = self.changes.send(());
                } else {
                    let _ = context.peer.notify_tool_list_changed().await;
                }
                // Answer once the client has asked for every page again (and a moment to
                // store them), so the test's next step sees the new list: the re-listing runs
                // beside the call.
                for _ in 0..100 {
                    if self.list_calls.load(Ordering::SeqCst) >= listed + pages {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                Ok(CallToolResult::success(vec![ContentBlock::text("grown")]).into())
            }
            "extra" => Ok(CallToolResult::success(vec![ContentBlock::text("extra!")]).into()),
            other => Err(ErrorData::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }
}
