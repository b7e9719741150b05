//! One configured MCP server: its connection (started, dead, restarted on next use), its
//! listed tools, and `notifications/tools/list_changed`.
//!
//! The handshake is rmcp's `ClientLifecycleMode::Auto`: it probes `server/discover`
//! (MCP 2026-07-28) and falls back to the legacy `initialize` / `initialized` exchange
//! offering 2025-11-25 when the server answers with an error (the npm reference servers
//! answer -32601) or stays silent for 10 s. In a legacy session `list_changed` arrives on the
//! session itself ([`Handler::on_tool_list_changed`]); in a 2026-07-28 session the server
//! sends it only on a `subscriptions/listen` stream, which [`listen_for_changes`] opens when
//! the server advertises `tools.listChanged`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use process_wrap::tokio::ChildWrapper;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, ProtocolVersion, ServerNotification, SubscriptionFilter,
    Tool as McpTool,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt as _, NotificationContext, Peer, RunningService,
    ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};

use super::spawn;
use super::{ClientOptions, ServerError};
use crate::config::{ServerConfig, ServerTransport};

/// Pages of `tools/list` read at most (a server whose cursors never end).
const MAX_PAGES: usize = 1000;

/// The rmcp handler of one connection: answers nothing, re-lists on `list_changed`.
struct Handler {
    server: Weak<Server>,
    generation: u64,
    info: ClientConfig,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // Re-list outside the service loop, which must keep reading the answers.
        if let Some(server) = self.server.upgrade() {
            let generation = self.generation;
            tokio::spawn(async move { server.relist(generation).await });
        }
    }
}

/// A live connection.
struct Live {
    service: RunningService<RoleClient, Handler>,
    /// The stdio server's process (killed with its group when dropped); `None` for HTTP.
    process: Option<Box<dyn ChildWrapper>>,
    stderr_tail: Option<Arc<Mutex<std::collections::VecDeque<String>>>>,
    generation: u64,
}

/// Where a server is.
pub(crate) enum Endpoint {
    /// From an `mcpServers` entry.
    Config(ServerConfig),
    /// An rmcp server in this process: each call gives the client's end of a new
    /// connection.
    InProcess(super::InProcess),
}

/// One server: its configuration, connection and tools.
pub(crate) struct Server {
    pub(crate) name: String,
    endpoint: Endpoint,
    timeout_ms: Option<u64>,
    options: Arc<ClientOptions>,
    live: tokio::sync::Mutex<Option<Live>>,
    tools: RwLock<Vec<McpTool>>,
    /// Bumped (shared by every server of an [`McpClients`](super::McpClients)) whenever a
    /// server's tool list changes.
    changes: Arc<AtomicU64>,
    generation: AtomicU64,
    /// Completed `tools/list` walks (each over every page).
    pub(crate) listings: AtomicU64,
    /// The protocol version of the last connection (`2025-11-25`, `2026-07-28`).
    protocol: RwLock<String>,
}

/// Why a call could not be made or answered, for the model.
pub(crate) enum CallError {
    /// The connection is gone (the server exited): restarted on the next call.
    Closed,
    /// The server could not be (re)started.
    Start(ServerError),
    /// No answer within the timeout.
    Timeout(Duration),
    /// A JSON-RPC error from the server (code, message).
    Rpc(i32, String),
    /// Anything else rmcp reported.
    Other(String),
}

impl Server {
    pub(crate) fn new(
        name: String,
        endpoint: Endpoint,
        options: Arc<ClientOptions>,
        changes: Arc<AtomicU64>,
    ) -> Arc<Self> {
        let timeout_ms = match &endpoint {
            Endpoint::Config(c) => c.timeout_ms,
            Endpoint::InProcess(_) => None,
        };
        Arc::new(Server {
            name,
            endpoint,
            timeout_ms,
            options,
            live: tokio::sync::Mutex::new(None),
            tools: RwLock::new(Vec::new()),
            changes,
            generation: AtomicU64::new(0),
            listings: AtomicU64::new(0),
            protocol: RwLock::new(String::new()),
        })
    }

    /// The per-call timeout: the server's `timeout`, else the client's.
    pub(crate) fn call_timeout(&self) -> Duration {
        self.timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(self.options.call_timeout)
    }

    /// The protocol version the last connection negotiated.
    pub(crate) fn protocol(&self) -> String {
        self.protocol.read().map(|p| p.clone()).unwrap_or_default()
    }

    /// The tools of the last listing.
    pub(crate) fn tools(&self) -> Vec<McpTool> {
        self.tools.read().map(|t| t.clone()).unwrap_or_default()
    }

    /// The process id of the stdio server, while it runs (tests kill it).
    pub async fn pid(&self) -> Option<u32> {
        let live = self.live.lock().await;
        live.as_ref()?.process.as_ref()?.id()
    }

    /// Connects (the handshake) and lists the tools.
    ///
    /// # Errors
    /// A [`ServerError`] naming the server.
    pub(crate) async fn start(self: &Arc<Self>) -> Result<(), ServerError> {
        let mut live = self.live.lock().await;
        self.connect_locked(&mut live).await.map(|_| ())
    }

    /// A peer for a call: the live one, or a new connection when the last one closed.
    async fn peer(self: &Arc<Self>) -> Result<Peer<RoleClient>, ServerError> {
        let mut live = self.live.lock().await;
        if let Some(l) = live.as_ref()
            && !l.service.peer().is_transport_closed()
        {
            return Ok(l.service.peer().clone());
        }
        if live.is_some() {
            tracing::info!(server = %self.name, "the mcp server's connection closed; restarting it");
        }
        self.connect_locked(&mut live).await
    }

    /// Replaces the connection in `slot` with a new one and re-lists the tools.
    async fn connect_locked(
        self: &Arc<Self>,
        slot: &mut Option<Live>,
    ) -> Result<Peer<RoleClient>, ServerError> {
        *slot = None;
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let new = self.connect(generation).await?;
        let peer = new.service.peer().clone();
        listen_for_changes(self, &peer, generation);
        if let (Some(info), Ok(mut protocol)) = (peer.peer_info(), self.protocol.write()) {
            *protocol = info.protocol_version.to_string();
        }
        let tools = tokio::time::timeout(self.options.start_timeout, list_all(&peer))
            .await
            .map_err(|_| ServerError::ListTools {
                server: self.name.clone(),
                message: format!(
                    "no answer within {} ms",
                    self.options.start_timeout.as_millis()
                ),
            })?
            .map_err(|e| ServerError::ListTools {
                server: self.name.clone(),
                message: e.to_string(),
            })?;
        self.set_tools(tools);
        *slot = Some(new);
        Ok(peer)
    }

    /// Stores a listing; bumps the shared version when it differs.
    fn set_tools(&self, tools: Vec<McpTool>) {
        self.listings.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut current) = self.tools.write()
            && *current != tools
        {
            tracing::info!(server = %self.name, tools = tools.len(), "mcp server tools listed");
            *current = tools;
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// On `list_changed` from connection `generation`: lists again.
    async fn relist(self: Arc<Self>, generation: u64) {
        let peer = {
            let live = self.live.lock().await;
            match live.as_ref() {
                Some(l) if l.generation == generation => l.service.peer().clone(),
                _ => return,
            }
        };
        match tokio::time::timeout(self.options.start_timeout, list_all(&peer)).await {
            Ok(Ok(tools)) => self.set_tools(tools),
            Ok(Err(e)) => {
                tracing::warn!(server = %self.name, error = %e, "re-listing the mcp server's tools failed");
            }
            Err(_) => {
                tracing::warn!(server = %self.name, "re-listing the mcp server's tools timed out")
            }
        }
    }

    fn client_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(
                self.options.client_name.clone(),
                self.options.client_version.clone(),
            ),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn connect(self: &Arc<Self>, generation: u64) -> Result<Live, ServerError> {
        let handler = Handler {
            server: Arc::downgrade(self),
            generation,
            info: self.client_info(),
        };
        let timeout = self.options.start_timeout;
        let name = self.name.clone();
        let transport = match &self.endpoint {
            Endpoint::Config(config) => &config.transport,
            Endpoint::InProcess(connect) => {
                let stream = connect();
                return match tokio::time::timeout(
                    timeout,
                    handler.serve_with_lifecycle(stream, lifecycle()),
                )
                .await
                {
                    Ok(Ok(service)) => Ok(Live {
                        service,
                        process: None,
                        stderr_tail: None,
                        generation,
                    }),
                    Ok(Err(e)) => Err(ServerError::Handshake {
                        server: name,
                        message: e.to_string(),
                        stderr: String::new(),
                    }),
                    Err(_) => Err(ServerError::Handshake {
                        server: name,
                        message: format!("no answer within {} ms", timeout.as_millis()),
                        stderr: String::new(),
                    }),
                };
            }
        };
        match transport {
            ServerTransport::Stdio(stdio) => {
                let child = spawn::spawn(&self.name, stdio, self.options.log_dir.as_ref())
                    .map_err(|source| ServerError::Spawn {
                        server: name.clone(),
                        command: stdio.command.clone(),
                        source,
                    })?;
                let spawn::Child {
                    mut process,
                    stdout,
                    stdin,
                    stderr_tail,
                    stray,
                    readers,
                } = child;
                let served = tokio::time::timeout(
                    timeout,
                    handler.serve_with_lifecycle((stdout, stdin), lifecycle()),
                )
                .await;
                let failure = match served {
                    Ok(Ok(service)) => {
                        let stray = stray.lock().map(|s| s.clone()).unwrap_or_default();
                        if !stray.is_empty() {
                            tracing::warn!(server = %name, lines = ?stray, "the mcp server wrote non-JSON lines to stdout before the handshake (ignored)");
                        }
                        return Ok(Live {
                            service,
                            process: Some(process),
                            stderr_tail: Some(stderr_tail),
                            generation,
                        });
                    }
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => format!("no answer within {} ms", timeout.as_millis()),
                };
                // Give a dying process a moment, so its exit status and last stderr lines
                // can go into the message.
                let status =
                    match tokio::time::timeout(Duration::from_millis(500), process.wait()).await {
                        Ok(Ok(status)) => Some(status.to_string()),
                        _ => None,
                    };
                if status.is_some() {
                    // It exited: its output ends soon; read it all before judging.
                    for reader in readers {
                        let _ = tokio::time::timeout(Duration::from_millis(500), reader).await;
                    }
                }
                let stray = stray.lock().map(|s| s.clone()).unwrap_or_default();
                let tail = tail_text(&stderr_tail);
                // A process that exited makes rmcp's own error (a broken pipe, a closed
                // connection) noise: say what happened instead.
                let message = match status {
                    Some(s) => format!("the process exited ({s}) before completing it"),
                    None => failure,
                };
                if !stray.is_empty() {
                    return Err(ServerError::StrayStdout {
                        server: name,
                        lines: stray,
                        detail: message,
                    });
                }
                Err(ServerError::Handshake {
                    server: name,
                    message,
                    stderr: tail,
                })
            }
            ServerTransport::Http(http) => {
                let client = match super::tls::http_client(&http.url, &self.options.ca_certificates)
                {
                    Ok(client) => client,
                    Err(e) => {
                        return Err(ServerError::Handshake {
                            server: name,
                            message: format!("{}: {e}", http.url),
                            stderr: String::new(),
                        });
                    }
                };
                let mut headers = HashMap::new();
                for (k, v) in &http.headers {
                    let (Ok(k), Ok(v)) = (
                        http::HeaderName::try_from(k.as_str()),
                        http::HeaderValue::try_from(v.as_str()),
                    ) else {
                        return Err(ServerError::Handshake {
                            server: name,
                            message: format!("the header `{k}` is not a valid HTTP header"),
                            stderr: String::new(),
                        });
                    };
                    headers.insert(k, v);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(http.url.as_str())
                    .custom_headers(headers);
                let transport = StreamableHttpClientTransport::with_client(client, config);
                match tokio::time::timeout(
                    timeout,
                    handler.serve_with_lifecycle(transport, lifecycle()),
                )
                .await
                {
                    Ok(Ok(service)) => Ok(Live {
                        service,
                        process: None,
                        stderr_tail: None,
                        generation,
                    }),
                    Ok(Err(e)) => Err(ServerError::Handshake {
                        server: name,
                        message: format!(
                            "{}: {}; is a server listening at that URL?",
                            http.url,
                            readable(&e)
                        ),
                        stderr: String::new(),
                    }),
                    Err(_) => Err(ServerError::Handshake {
                        server: name,
                        message: format!(
                            "{}: no answer within {} ms",
                            http.url,
                            timeout.as_millis()
                        ),
                        stderr: String::new(),
                    }),
                }
            }
        }
    }

    /// Calls `tool` with `arguments`, within the call timeout; restarts a dead server first.
    pub(crate) async fn call(
        self: &Arc<Self>,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<rmcp::model::CallToolResult, CallError> {
        let timeout = self.call_timeout();
        let peer = self.peer().await.map_err(CallError::Start)?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        // Dropping the call on timeout sends `notifications/cancelled` (rmcp 3.6+).
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => Err(CallError::Timeout(timeout)),
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(e))) => {
                Err(CallError::Rpc(e.code.0, e.message.to_string()))
            }
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                self.forget_if_closed().await;
                Err(CallError::Closed)
            }
            Ok(Err(e)) => {
                if peer.is_transport_closed() {
                    self.forget_if_closed().await;
                    Err(CallError::Closed)
                } else {
                    Err(CallError::Other(e.to_string()))
                }
            }
        }
    }

    /// Drops a closed connection, so the next call starts the server again; logs the
    /// stderr it left.
    async fn forget_if_closed(&self) {
        let mut live = self.live.lock().await;
        if let Some(l) = live.as_ref()
            && l.service.peer().is_transport_closed()
        {
            let tail = l.stderr_tail.as_ref().map(tail_text).unwrap_or_default();
            tracing::warn!(server = %self.name, stderr = %tail, "the mcp server closed the connection");
            *live = None;
        }
    }

    /// Closes the connection (and stops the process).
    pub(crate) async fn shutdown(&self) {
        let live = self.live.lock().await.take();
        if let Some(mut live) = live {
            let _ = live.service.close().await;
            if let Some(mut p) = live.process.take() {
                let _ = Box::into_pin(p.kill()).await;
            }
        }
    }
}

/// The handshake: `server/discover` first, the legacy `initialize` as the fallback.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// In a 2026-07-28 session whose server advertises `tools.listChanged`: opens a
/// `subscriptions/listen` stream for `notifications/tools/list_changed` (MCP 2026-07-28
/// basic/patterns/subscriptions) and re-lists on each, until the connection ends.
fn listen_for_changes(server: &Arc<Server>, peer: &Peer<RoleClient>, generation: u64) {
    let Some(info) = peer.peer_info() else {
        return;
    };
    let modern = info.protocol_version == ProtocolVersion::V_2026_07_28;
    let advertised = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|t| t.list_changed)
        .unwrap_or(false);
    if !modern || !advertised {
        return;
    }
    let peer = peer.clone();
    let server = Arc::downgrade(server);
    tokio::spawn(async move {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut subscription = match peer.listen(filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "subscriptions/listen for tool changes failed");
                return;
            }
        };
        while let Ok(Some(notification)) = subscription.next().await {
            if matches!(
                notification,
                ServerNotification::ToolListChangedNotification(_)
            ) {
                let Some(server) = server.upgrade() else {
                    return;
                };
                server.relist(generation).await;
            }
        }
    });
}

/// Every page of `tools/list`, following `nextCursor` (MCP server/utilities/pagination).
async fn list_all(peer: &Peer<RoleClient>) -> Result<Vec<McpTool>, ServiceError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = peer.list_tools(params).await?;
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(tools)
}

fn tail_text(tail: &Arc<Mutex<std::collections::VecDeque<String>>>) -> String {
    tail.lock()
        .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

/// rmcp's error text without the generic type names it puts in brackets
/// (`Transport [rmcp::transport::worker::WorkerTransport<…>] error: …`), which say nothing a
/// person can act on.
fn readable(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(open) = rest.find(" [") {
        let Some(len) = rest[open..].find(']') else {
            break;
        };
        let inside = &rest[open + 2..open + len];
        out.push_str(&rest[..open]);
        if !inside.contains("::") {
            out.push_str(&rest[open..=open + len]);
        }
        rest = &rest[open + len + 1..];
    }
    out.push_str(rest);
    out
}
