//! Streamable HTTP over loopback: rmcp's HTTP client lists, calls (an `isError` result too)
//! and hears a `list_changed`; the server stops on its shutdown signal.

use std::time::Duration;

use halo_mcp::server::{BearerToken, HttpOptions};
use rmcp::ServiceExt as _;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::time::timeout;

use super::{Note, Recorder, Seen, args, call, server, text};

fn token() -> BearerToken {
    BearerToken::new("the-http-tests-token").unwrap()
}

#[tokio::test]
async fn loopback_http_serves_listing_calls_and_change_notifications() {
    let note = Note::default();
    let server = server(&note);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.clone().serve_http(
        listener,
        HttpOptions::new(token()),
        async move {
            let _ = stopped.await;
        },
    ));

    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
            .auth_header(token().secret()),
    );
    let client = Recorder(tx)
        .serve(transport)
        .await
        .expect("handshake over HTTP");
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["echo", "note"]);
    assert_eq!(
        text(&call(&client, "note", args("over http")).await),
        ("noted over http".to_string(), false)
    );
    assert_eq!(
        text(&call(&client, "note", args("forbidden")).await),
        ("this server does not say forbidden".to_string(), true)
    );
    assert_eq!(*note.0.lock().unwrap(), ["over http"]);

    assert!(server.remove_tool("note").await);
    assert_eq!(
        timeout(Duration::from_secs(5), seen.recv()).await.unwrap(),
        Some(Seen::ListChanged)
    );
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);

    client.cancel().await.unwrap();
    stop.send(()).unwrap();
    timeout(Duration::from_secs(10), serving)
        .await
        .expect("the server stops on its signal")
        .unwrap()
        .unwrap();
}

// 2026-07-28 over HTTP is stateless: each request stands alone, and `list_changed`
// arrives on the `subscriptions/listen` stream.
#[tokio::test]
async fn a_2026_07_28_client_over_http_calls_and_hears_changes_on_its_listen_stream() {
    use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};

    let note = Note::default();
    let server = server(&note);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.clone().serve_http(
        listener,
        HttpOptions::new(token()),
        async move {
            let _ = stopped.await;
        },
    ));
    let (tx, _seen) = tokio::sync::mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
            .auth_header(token().secret()),
    );
    let client = Recorder(tx)
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover over HTTP");
    assert_eq!(
        text(&call(&client, "echo", args("modern")).await),
        ("echo: modern".to_string(), false)
    );
    let mut subscription = client
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .unwrap();
    assert!(server.remove_tool("echo").await);
    let notification = timeout(Duration::from_secs(5), subscription.next())
        .await
        .expect("a notification within 5 s")
        .unwrap();
    assert!(
        matches!(
            notification,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{notification:?}"
    );
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["note"]);
    drop(subscription);
    client.cancel().await.unwrap();
    stop.send(()).unwrap();
    timeout(Duration::from_secs(10), serving)
        .await
        .expect("the server stops on its signal, listen streams included")
        .unwrap()
        .unwrap();
}

/// A tool that never finishes: says when its call starts and when its future is dropped.
struct Hang(tokio::sync::mpsc::UnboundedSender<&'static str>);

struct Dropped(tokio::sync::mpsc::UnboundedSender<&'static str>);

impl Drop for Dropped {
    fn drop(&mut self) {
        let _ = self.0.send("dropped");
    }
}

impl halo_core::Tool for Hang {
    type Args = super::TextArgs;
    fn name(&self) -> &str {
        "hang"
    }
    fn description(&self) -> &str {
        "Never answers."
    }
    async fn call(
        &self,
        _: super::TextArgs,
    ) -> Result<halo_core::ToolOutput, halo_core::ToolError> {
        let _guard = Dropped(self.0.clone());
        let _ = self.0.send("started");
        std::future::pending().await
    }
}

/// A POST to `url` with the token, the MCP headers and `session`.
async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: serde_json::Value,
) -> reqwest::Response {
    let mut request = http
        .post(url)
        .bearer_auth(token().secret())
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(body.to_string());
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    request.send().await.unwrap()
}

// A legacy session's call ran on after its session was deleted or its client went away,
// until the call timeout.
#[tokio::test]
async fn a_deleted_session_and_a_dropped_response_stream_cancel_their_calls() {
    use serde_json::json;
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let server = halo_mcp::server::McpServer::builder()
        .tool(std::sync::Arc::new(Hang(tx)))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(server.serve_http(listener, HttpOptions::new(token()), std::future::pending()));
    let http = reqwest::Client::new();
    let session = || async {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}});
        let response = post(&http, &url, None, init).await;
        assert_eq!(response.status(), 200);
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let _ = response.text().await;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(
            post(&http, &url, Some(&id), initialized).await.status(),
            202
        );
        id
    };
    let hang = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "hang", "arguments": {"text": "x"}}});
    let mut next = async || {
        timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("an event within 10 s")
    };

    let first = session().await;
    let call = post(&http, &url, Some(&first), hang.clone()).await;
    assert_eq!(call.status(), 200);
    assert_eq!(next().await, Some("started"));
    let deleted = http
        .delete(&url)
        .bearer_auth(token().secret())
        .header("Mcp-Session-Id", &first)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 202);
    assert_eq!(next().await, Some("dropped"), "DELETE cancels the call");
    drop(call);

    let second = session().await;
    let call = post(&http, &url, Some(&second), hang).await;
    assert_eq!(next().await, Some("started"));
    drop(call);
    assert_eq!(
        next().await,
        Some("dropped"),
        "a gone client's call is cancelled"
    );
}
