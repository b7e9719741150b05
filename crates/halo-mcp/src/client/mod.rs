//! The MCP client: every configured server started concurrently, their tools as Halo
//! tools (a [`ToolSource`]), calls with a timeout, restarts after a server died.
//!
//! - `server.rs` — one server: connection (stdio or streamable HTTP), `tools/list` over
//!   every page, `list_changed`, calls, restart on next use.
//! - `spawn.rs` — the stdio child process: environment, stderr log, stray stdout.
//! - `tool.rs` — an MCP tool as a `DynTool`; `content.rs` — results as the model's text.
//! - `tls.rs` — the HTTP client of streamable HTTP servers (`https://` on rustls).

mod content;
mod server;
mod spawn;
mod tls;
mod tool;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use halo_core::{DynTool, ToolSource};

use crate::config::McpConfig;
use crate::name::assign_names;
use server::{Endpoint, Server};

/// The client's end of a new connection to an rmcp server in this process (tests; a
/// server embedded in the same binary): called once per (re)connection.
pub type InProcess = Arc<dyn Fn() -> tokio::io::DuplexStream + Send + Sync>;
use tool::RemoteTool;

/// How the client starts servers and calls tools.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientOptions {
    /// The timeout of one `tools/call` unless the server's config sets `timeout`
    /// (default 60 s). On expiry the call is cancelled and the model reads an error result.
    pub call_timeout: Duration,
    /// The timeout of a server's start: the handshake, and then `tools/list` (default 30 s).
    pub start_timeout: Duration,
    /// Where each stdio server's stderr is appended, as `<dir>/<server>.log`; `None`: to
    /// `tracing` only (debug, target `halo_mcp::stderr`). Never the terminal.
    pub log_dir: Option<PathBuf>,
    /// The `clientInfo` name sent in `initialize` (default `halo`).
    pub client_name: String,
    /// The `clientInfo` version (default this crate's).
    pub client_version: String,
    /// PEM files of CA certificates trusted for `https://` servers besides the system's
    /// roots (a private CA, a self-signed server); default none. The system's roots are the
    /// OS store (on Linux as `rustls-native-certs` finds it: `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` replace it when set). A file that is unreadable or holds no
    /// certificate makes each `https://` server's start fail, saying which file.
    pub ca_certificates: Vec<PathBuf>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            call_timeout: Duration::from_secs(60),
            start_timeout: Duration::from_secs(30),
            log_dir: None,
            client_name: "halo".into(),
            client_version: env!("CARGO_PKG_VERSION").into(),
            ca_certificates: Vec::new(),
        }
    }
}

impl ClientOptions {
    /// Sets [`call_timeout`](Self::call_timeout).
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }
    /// Sets [`start_timeout`](Self::start_timeout).
    pub fn with_start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }
    /// Sets [`log_dir`](Self::log_dir).
    pub fn with_log_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.log_dir = Some(dir.into());
        self
    }
    /// Adds a PEM file to [`ca_certificates`](Self::ca_certificates).
    pub fn with_ca_certificate(mut self, pem_file: impl Into<PathBuf>) -> Self {
        self.ca_certificates.push(pem_file.into());
        self
    }
}

/// Why a server did not start; each names the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The command could not be run (not found, not executable, bad `cwd`).
    #[error("mcp server `{server}`: cannot run `{command}`: {source}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The configured command.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server wrote lines that are not JSON-RPC to stdout and the handshake failed.
    #[error(
        "mcp server `{server}` wrote non-JSON output to stdout before the MCP handshake ({}), and the handshake failed: {detail}; a stdio server's stdout carries JSON-RPC only (logs go to stderr): check the command and its arguments",
        lines.iter().map(|l| format!("{l:?}")).collect::<Vec<_>>().join(", ")
    )]
    StrayStdout {
        /// The server's name.
        server: String,
        /// The first stray lines (at most 5, each cut to 200 characters).
        lines: Vec<String>,
        /// How the handshake failed.
        detail: String,
    },
    /// The `initialize` handshake failed or timed out.
    #[error("mcp server `{server}`: the MCP handshake failed: {message}{}", if stderr.is_empty() { String::new() } else { format!("; its stderr ends with: {stderr}") })]
    Handshake {
        /// The server's name.
        server: String,
        /// What happened.
        message: String,
        /// The last lines of its stderr (stdio), empty if none.
        stderr: String,
    },
    /// `tools/list` failed after the handshake.
    #[error("mcp server `{server}`: tools/list failed: {message}")]
    ListTools {
        /// The server's name.
        server: String,
        /// What happened.
        message: String,
    },
}

impl ServerError {
    /// The name of the server that failed.
    pub fn server(&self) -> &str {
        match self {
            ServerError::Spawn { server, .. }
            | ServerError::StrayStdout { server, .. }
            | ServerError::Handshake { server, .. }
            | ServerError::ListTools { server, .. } => server,
        }
    }
}

/// A started server, for a startup line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStatus {
    /// The server's name.
    pub name: String,
    /// How many tools it lists now.
    pub tools: usize,
    /// How many times its tools were listed (all pages): 1 after the start, one more per
    /// `notifications/tools/list_changed` and per restart (some servers, npm
    /// server-everything among them, send a `list_changed` right after the handshake, so 2
    /// is usual for them).
    pub listings: u64,
    /// The MCP protocol version negotiated: `2025-11-25` (the `initialize` handshake) or
    /// `2026-07-28` (`server/discover`).
    pub protocol: String,
}

/// The started MCP servers of a configuration, and the ones that failed.
pub struct McpClients {
    servers: Vec<Arc<Server>>,
    failures: Vec<ServerError>,
    source: Arc<McpToolSet>,
}

impl std::fmt::Debug for McpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClients")
            .field(
                "servers",
                &self.servers.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .field("failures", &self.failures)
            .finish()
    }
}

impl McpClients {
    /// Starts every enabled server of `config` concurrently: stdio servers as child
    /// processes, HTTP servers by URL; each one's handshake and `tools/list` within
    /// `options.start_timeout`. A server that fails is left out and reported in
    /// [`failures`](Self::failures); this never fails as a whole.
    ///
    /// Must be called inside a Tokio runtime (it spawns tasks).
    pub async fn start(config: &McpConfig, options: ClientOptions) -> McpClients {
        let endpoints = config
            .enabled()
            .map(|(name, server)| (name.to_string(), Endpoint::Config(server.clone())));
        Self::start_endpoints(endpoints.collect(), options).await
    }

    /// Starts servers that live in this process, by name, as [`start`](Self::start) does
    /// for configured ones: `connect` gives the client's end of a fresh
    /// `tokio::io::duplex` pair whose other end an rmcp server serves.
    pub async fn start_in_process(
        servers: impl IntoIterator<Item = (String, InProcess)>,
        options: ClientOptions,
    ) -> McpClients {
        let mut endpoints: Vec<(String, Endpoint)> = servers
            .into_iter()
            .map(|(name, connect)| (name, Endpoint::InProcess(connect)))
            .collect();
        endpoints.sort_by(|a, b| a.0.cmp(&b.0));
        Self::start_endpoints(endpoints, options).await
    }

    async fn start_endpoints(
        endpoints: Vec<(String, Endpoint)>,
        options: ClientOptions,
    ) -> McpClients {
        let options = Arc::new(options);
        let changes = Arc::new(AtomicU64::new(0));
        let mut pending = Vec::new();
        for (name, endpoint) in endpoints {
            let server = Server::new(name, endpoint, options.clone(), changes.clone());
            let started = server.clone();
            pending.push((server, tokio::spawn(async move { started.start().await })));
        }
        let mut servers = Vec::new();
        let mut failures = Vec::new();
        for (server, handle) in pending {
            match handle.await {
                Ok(Ok(())) => servers.push(server),
                Ok(Err(e)) => {
                    // Reported to the caller in `failures()`; a log line at `info` only, so a front end
                    // that prints the failures does not print each twice.
                    tracing::info!(server = %server.name, error = %e, "an mcp server did not start");
                    failures.push(e);
                }
                Err(join) => failures.push(ServerError::Handshake {
                    server: server.name.clone(),
                    message: format!("the start task failed: {join}"),
                    stderr: String::new(),
                }),
            }
        }
        let source = Arc::new(McpToolSet {
            servers: servers.clone(),
            changes,
            cache: Mutex::new(None),
        });
        McpClients {
            servers,
            failures,
            source,
        }
    }

    /// The servers that started, in name order, with their tool counts.
    pub fn servers(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .map(|s| ServerStatus {
                name: s.name.clone(),
                tools: s.tools().len(),
                listings: s.listings.load(Ordering::SeqCst),
                protocol: s.protocol(),
            })
            .collect()
    }

    /// The servers that did not start, in name order.
    pub fn failures(&self) -> &[ServerError] {
        &self.failures
    }

    /// Every started server's tools, for
    /// [`HaloAgentBuilder::tool_source`](halo_core::HaloAgentBuilder::tool_source): its
    /// version changes when a server's tool list does (`notifications/tools/list_changed`,
    /// a restart that lists other tools).
    pub fn tool_source(&self) -> Arc<McpToolSet> {
        self.source.clone()
    }

    /// The current tools (as [`McpToolSet::tools`]).
    pub fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.source.tools()
    }

    /// The process id of the stdio server `name` while it runs (diagnostics, tests).
    pub async fn server_pid(&self, name: &str) -> Option<u32> {
        let server = self.servers.iter().find(|s| s.name == name)?;
        server.pid().await
    }

    /// Closes every connection and stops the stdio servers (also done when the last
    /// handle is dropped, by killing their process groups).
    pub async fn shutdown(&self) {
        for server in &self.servers {
            server.shutdown().await;
        }
    }
}

/// The tools built for a version.
type Built = (u64, Vec<Arc<dyn DynTool>>);

/// The started servers' tools as one [`ToolSource`], named `mcp__<server>__<tool>`
/// ([`crate::name::assign_names`]).
pub struct McpToolSet {
    servers: Vec<Arc<Server>>,
    changes: Arc<AtomicU64>,
    /// The tools built for a version, so repeated reads hand out the same objects.
    cache: Mutex<Option<Built>>,
}

impl std::fmt::Debug for McpToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolSet")
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

impl ToolSource for McpToolSet {
    fn version(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        let version = self.version();
        if let Ok(cache) = self.cache.lock()
            && let Some((v, tools)) = cache.as_ref()
            && *v == version
        {
            return tools.clone();
        }
        let listed: Vec<(Arc<Server>, rmcp::model::Tool)> = self
            .servers
            .iter()
            .flat_map(|s| s.tools().into_iter().map(move |t| (s.clone(), t)))
            .collect();
        let pairs: Vec<(&str, &str)> = listed
            .iter()
            .map(|(s, t)| (s.name.as_str(), t.name.as_ref()))
            .collect();
        let names = assign_names(&pairs);
        let tools: Vec<Arc<dyn DynTool>> = listed
            .iter()
            .zip(names)
            .map(|((server, tool), name)| {
                Arc::new(RemoteTool::new(server.clone(), name, tool)) as Arc<dyn DynTool>
            })
            .collect();
        if let Ok(mut cache) = self.cache.lock() {
            *cache = Some((version, tools.clone()));
        }
        tools
    }
}
