//! Serving an [`McpServer`]: stdio (MCP `basic/transports/stdio`: newline-delimited
//! JSON-RPC on stdin/stdout, nothing else on stdout) and streamable HTTP
//! (`basic/transports/streamable-http`) mounted at `/mcp` in an axum 0.8 router.

use std::future::Future;
use std::sync::Arc;

use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::{McpServer, ServeError};

/// The path the HTTP transport is mounted at.
pub const MCP_PATH: &str = "/mcp";

impl McpServer {
    /// Serves one session on this process's stdin and stdout until the client closes
    /// stdin. Log to stderr only: anything else on stdout breaks the protocol.
    ///
    /// # Errors
    /// [`ServeError::Initialize`] when the client's handshake fails,
    /// [`ServeError::Session`] when the session's task fails.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| ServeError::Initialize(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| ServeError::Session(e.to_string()))?;
        Ok(())
    }

    /// The streamable HTTP service (a tower service; mount it where you like) with `config`.
    /// rmcp's defaults: the `Host` header must be a loopback name (`localhost`,
    /// `127.0.0.1`, `::1`: the DNS-rebinding guard), legacy sessions (2025-11-25 clients)
    /// kept with their `Mcp-Session-Id`, 2026-07-28 requests served statelessly.
    pub fn http_service(
        &self,
        config: StreamableHttpServerConfig,
    ) -> StreamableHttpService<McpServer, LocalSessionManager> {
        let server = self.clone();
        StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        )
    }

    /// An axum router with the HTTP service at [`MCP_PATH`] and rmcp's default config;
    /// `ct` ends its open streams when cancelled.
    pub fn http_router(&self, ct: CancellationToken) -> axum::Router {
        let config = StreamableHttpServerConfig::default().with_cancellation_token(ct);
        axum::Router::new().nest_service(MCP_PATH, self.http_service(config))
    }

    /// Serves streamable HTTP at `http://ADDR/mcp` on `listener` until `shutdown`
    /// completes; then open streams are closed and the function returns. Bind the listener
    /// to a loopback address (`127.0.0.1:PORT`): the service accepts only loopback `Host`
    /// headers, and nothing here authenticates clients.
    ///
    /// # Errors
    /// [`ServeError::Io`] when accepting fails.
    pub async fn serve_http(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let ct = CancellationToken::new();
        let router = self.http_router(ct.child_token());
        let stop = ct.clone();
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                shutdown.await;
                stop.cancel();
            })
            .await?;
        Ok(())
    }
}
