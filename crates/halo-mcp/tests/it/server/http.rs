//! Streamable HTTP over loopback: rmcp's HTTP client lists, calls (an `isError` result too)
//! and hears a `list_changed`; the server stops on its shutdown signal.

use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::transport::StreamableHttpClientTransport;
use tokio::time::timeout;

use super::{Note, Recorder, Seen, args, call, server, text};

#[tokio::test]
async fn loopback_http_serves_listing_calls_and_change_notifications() {
    let note = Note::default();
    let server = server(&note);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.clone().serve_http(listener, async move {
        let _ = stopped.await;
    }));

    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
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
    let serving = tokio::spawn(server.clone().serve_http(listener, async move {
        let _ = stopped.await;
    }));
    let (tx, _seen) = tokio::sync::mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
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
