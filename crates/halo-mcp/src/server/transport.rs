//! Serving an [`McpServer`]: stdio (MCP `basic/transports/stdio`: newline-delimited
//! JSON-RPC on stdin/stdout, nothing else on stdout; bad input answered, `stdio.rs`) and
//! streamable HTTP (`basic/transports/streamable-http`) mounted at `/mcp` in an axum 0.8
//! router, behind a bearer token (`auth.rs`) and a session guard (`sessions.rs`: a cap, idle
//! expiry, calls cancelled with their session).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse as _, Response};
use rmcp::ServiceExt as _;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::auth::{BearerToken, require_token};
use super::sessions::Sessions;
use super::stdio::CheckedLines;
use super::{McpServer, ServeError};

/// The path the HTTP transport is mounted at.
pub const MCP_PATH: &str = "/mcp";

/// The default cap on live HTTP sessions: 32.
pub const DEFAULT_MAX_SESSIONS: usize = 32;

/// The default idle timeout of an HTTP session: 30 minutes.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How the streamable HTTP transport guards itself.
///
/// - `token`: every request must carry `Authorization: Bearer <token>`; without it, or with
///   another, the answer is `401` with `WWW-Authenticate: Bearer`. `None` lets any process
///   that can reach the port call the tools: only [`HttpOptions::unauthenticated`] gives it.
/// - `max_sessions`: live sessions (MCP 2025-11-25 clients, `Mcp-Session-Id`) at most; an
///   `initialize` beyond is answered `503` with a JSON-RPC error (code `-32000`). 2026-07-28
///   requests are stateless and hold no session.
/// - `idle_timeout`: a session with no call in flight and no message for this long is
///   closed; its id then gets `404`, and the client starts a new session.
///
/// A session's calls are cancelled when it is closed (`DELETE`, idle expiry) and a call is
/// cancelled when its client drops the call's response stream before the response; a
/// sandboxed command is killed with its call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// The bearer token requests must carry; `None`: no authentication.
    pub token: Option<BearerToken>,
    /// The most live sessions (default [`DEFAULT_MAX_SESSIONS`]).
    pub max_sessions: usize,
    /// How long a session may stay idle (default [`DEFAULT_IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
}

impl HttpOptions {
    /// Requests must carry `token`; the default cap and idle timeout.
    pub fn new(token: BearerToken) -> HttpOptions {
        HttpOptions {
            token: Some(token),
            max_sessions: DEFAULT_MAX_SESSIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// No token: any process that can connect may call the tools. For a server behind a
    /// proxy that authenticates, or a test.
    pub fn unauthenticated() -> HttpOptions {
        HttpOptions {
            token: None,
            max_sessions: DEFAULT_MAX_SESSIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// Sets [`max_sessions`](Self::max_sessions) (at least 1).
    pub fn with_max_sessions(mut self, max: usize) -> HttpOptions {
        self.max_sessions = max.max(1);
        self
    }

    /// Sets [`idle_timeout`](Self::idle_timeout).
    pub fn with_idle_timeout(mut self, idle: Duration) -> HttpOptions {
        self.idle_timeout = idle;
        self
    }
}

impl McpServer {
    /// Serves one session on this process's stdin and stdout until the client closes
    /// stdin. Log to stderr only: anything else on stdout breaks the protocol. A line that
    /// is not a JSON-RPC message is answered with a JSON-RPC error (`-32700` for non-JSON,
    /// `-32600` for a batch or a non-message, `-32602` for a request's bad params).
    ///
    /// # Errors
    /// [`ServeError::Initialize`] when the client's handshake fails,
    /// [`ServeError::Session`] when the session's task fails.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let (stdin, stdout) = rmcp::transport::stdio();
        self.serve_lines(stdin, stdout).await
    }

    /// [`serve_stdio`](Self::serve_stdio) over any byte stream pair: one session of
    /// newline-delimited JSON-RPC read from `read` and written to `write`.
    ///
    /// # Errors
    /// As [`serve_stdio`](Self::serve_stdio).
    pub async fn serve_lines<R, W>(self, read: R, write: W) -> Result<(), ServeError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let running = self
            .serve(CheckedLines::new(read, write))
            .await
            .map_err(|e| ServeError::Initialize(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| ServeError::Session(e.to_string()))?;
        Ok(())
    }

    /// An axum router with streamable HTTP at [`MCP_PATH`], guarded by `options`; `ct` ends
    /// its open streams and sessions when cancelled. Mount it where you like (`nest`,
    /// `merge`). rmcp's defaults otherwise: the `Host` header must be a loopback name
    /// (`localhost`, `127.0.0.1`, `::1`: the DNS-rebinding guard), 2025-11-25 clients get
    /// sessions (`Mcp-Session-Id`), 2026-07-28 requests are served statelessly.
    ///
    /// Call it inside a tokio runtime: the idle reaper is spawned on it (outside one,
    /// sessions never expire).
    pub fn http_router(&self, ct: CancellationToken, options: HttpOptions) -> axum::Router {
        let config = StreamableHttpServerConfig::default().with_cancellation_token(ct);
        let max_body = config.max_request_body_bytes;
        let sessions = Sessions::new(options.max_sessions, options.idle_timeout);
        let server = self.clone();
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(sessions.clone()),
            config,
        );
        let guard = SessionGuard { sessions, max_body };
        let router = axum::Router::new()
            .nest_service(MCP_PATH, service)
            .layer(from_fn_with_state(guard, guard_sessions));
        match options.token {
            // The outermost layer: nothing is read before the token is checked.
            Some(token) => router.layer(from_fn_with_state(token, require_token)),
            None => router,
        }
    }

    /// Serves streamable HTTP at `http://ADDR/mcp` on `listener`, guarded by `options`,
    /// until `shutdown` completes; then open streams and sessions are closed and the
    /// function returns. Bind the listener to a loopback address (`127.0.0.1:PORT`): the
    /// service accepts only loopback `Host` headers.
    ///
    /// # Errors
    /// [`ServeError::Io`] when accepting fails.
    pub async fn serve_http(
        self,
        listener: tokio::net::TcpListener,
        options: HttpOptions,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let ct = CancellationToken::new();
        let router = self.http_router(ct.child_token(), options);
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

#[derive(Clone)]
struct SessionGuard {
    sessions: Sessions,
    /// rmcp's limit on a request body, in bytes.
    max_body: usize,
}

/// Admits an `initialize` (a POST without `Mcp-Session-Id`: the request that creates a
/// session) only with a free session slot, held until rmcp has created the session.
async fn guard_sessions(
    State(guard): State<SessionGuard>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != http::Method::POST || request.headers().contains_key("mcp-session-id") {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, guard.max_body).await else {
        return (
            http::StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "Payload Too Large: a message may have {} bytes at most",
                guard.max_body
            ),
        )
            .into_response();
    };
    #[derive(serde::Deserialize)]
    struct Probe {
        method: Option<String>,
        id: Option<serde_json::Value>,
    }
    let probe: Option<Probe> = serde_json::from_slice(&bytes).ok();
    let request = Request::from_parts(parts, axum::body::Body::from(bytes));
    let Some(probe) = probe.filter(|p| p.method.as_deref() == Some("initialize")) else {
        return next.run(request).await;
    };
    let Some(_slot) = guard.sessions.reserve() else {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": probe.id.filter(|id| id.is_number() || id.is_string()),
            "error": {
                "code": -32000,
                "message": format!(
                    "this server already has {} sessions, its limit: close one (HTTP DELETE with its Mcp-Session-Id) or wait until an idle one expires (after {} s without a message), then connect again",
                    guard.sessions.max(),
                    guard.sessions.idle().as_secs()
                ),
            },
        });
        return (http::StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    };
    next.run(request).await
}
