//! Listing and calling, in both protocol eras: sorted tools with their annotations, results,
//! `isError` results, an unknown tool as a JSON-RPC error, hooks that deny or abort, and an
//! approval that cannot be asked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use halo_core::{ToolCallDecision, ToolContext, ToolHook, async_trait};
use halo_mcp::server::McpServer;
use rmcp::ServiceError;
use rmcp::model::ErrorCode;
use serde_json::{Value, json};

use super::{Echo, Era, Note, args, call, connect, params, server, text};

async fn listing_and_calls(era: Era) {
    let note = Note::default();
    let (client, _seen) = connect(server(&note), era).await;

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["echo", "note"], "sorted by name");
    let echo = serde_json::to_value(&tools[0]).unwrap();
    assert_eq!(echo["description"], "Sends the text back.");
    assert_eq!(echo["annotations"]["readOnlyHint"], true);
    assert_eq!(echo["inputSchema"]["required"], json!(["text"]));
    assert_eq!(echo["inputSchema"]["type"], "object");
    let note_tool = serde_json::to_value(&tools[1]).unwrap();
    assert!(note_tool.get("annotations").is_none(), "{note_tool}");

    assert_eq!(
        text(&call(&client, "echo", args("hi")).await),
        ("echo: hi".to_string(), false)
    );
    assert_eq!(
        text(&call(&client, "note", args("buy milk")).await),
        ("noted buy milk".to_string(), false)
    );
    assert_eq!(*note.0.lock().unwrap(), ["buy milk"]);

    // A tool's failure, a schema mismatch, a hook's deny and abort, a fatal error: all
    // `isError` results the model can read, and the server keeps serving.
    assert_eq!(
        text(&call(&client, "echo", args("fail")).await),
        ("error: echo refuses to say fail".to_string(), true)
    );
    let (bad, is_error) = text(&call(&client, "echo", json!({"text": 7})).await);
    assert!(is_error);
    assert!(
        bad.starts_with("the arguments of `echo` do not match its schema: at /text:"),
        "{bad}"
    );
    assert_eq!(
        text(&call(&client, "note", args("forbidden")).await),
        ("this server does not say forbidden".to_string(), true)
    );
    assert_eq!(
        text(&call(&client, "echo", args("abort")).await),
        (
            "`echo` was not run: a hook of this server stopped it (the policy stopped the session)"
                .to_string(),
            true
        )
    );
    assert_eq!(
        text(&call(&client, "echo", args("fatal")).await),
        (
            "`echo` failed and cannot run in this server now: the echo chamber collapsed"
                .to_string(),
            true
        )
    );
    assert_eq!(
        *note.0.lock().unwrap(),
        ["buy milk"],
        "denied calls did not run"
    );

    // An unknown tool is a protocol error: JSON-RPC invalid params (-32602).
    match client.call_tool(params("nope", json!({}))).await {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert_eq!(
                e.message,
                "unknown tool `nope`; the available tools are: echo, note"
            );
        }
        other => panic!("expected invalid params, got {other:?}"),
    }
    assert_eq!(
        text(&call(&client, "echo", args("still here")).await),
        ("echo: still here".to_string(), false)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_legacy_session_lists_sorted_tools_and_every_failure_is_an_error_result() {
    listing_and_calls(Era::Legacy).await;
}

#[tokio::test]
async fn a_2026_07_28_session_lists_sorted_tools_and_every_failure_is_an_error_result() {
    listing_and_calls(Era::Modern).await;
}

/// An approval hook as a server must configure it: there is no one to ask, so what would
/// be asked about is denied at once.
struct Unattended;

#[async_trait]
impl ToolHook for Unattended {
    async fn before_tool_call(&self, cx: &ToolContext, _args: &Value) -> ToolCallDecision {
        let call = cx.call();
        if call.name == "note" {
            ToolCallDecision::Deny(format!(
                "no one can approve `{}` in this server; restart it with --yes to allow it",
                call.name
            ))
        } else {
            ToolCallDecision::Allow
        }
    }
}

/// An approval hook waiting for a person who never answers.
struct WaitsForever;

#[async_trait]
impl ToolHook for WaitsForever {
    async fn before_tool_call(&self, cx: &ToolContext, _args: &Value) -> ToolCallDecision {
        let call = cx.call();
        if call.name == "note" {
            futures::future::pending::<()>().await;
        }
        ToolCallDecision::Allow
    }
}

#[tokio::test]
async fn an_approval_no_one_can_give_is_denied_and_a_hook_that_waits_is_cut_by_the_timeout() {
    let note = Note::default();
    let unattended = McpServer::builder()
        .tool(Arc::new(note.clone()))
        .tool(Arc::new(Echo))
        .hook(Arc::new(Unattended))
        .build()
        .unwrap();
    let (client, _seen) = connect(unattended, Era::Legacy).await;
    assert_eq!(
        text(&call(&client, "note", args("x")).await),
        (
            "no one can approve `note` in this server; restart it with --yes to allow it"
                .to_string(),
            true
        )
    );
    assert_eq!(
        text(&call(&client, "echo", args("y")).await),
        ("echo: y".to_string(), false)
    );

    let waits = McpServer::builder()
        .tool(Arc::new(note.clone()))
        .hook(Arc::new(WaitsForever))
        .call_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let (client, _seen) = connect(waits, Era::Modern).await;
    let started = Instant::now();
    let (message, is_error) = text(&call(&client, "note", args("x")).await);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(is_error);
    assert_eq!(
        message,
        "`note` did not finish within 300ms and was stopped; what it did until then is not undone"
    );
    assert!(note.0.lock().unwrap().is_empty());
}

/// A tool that never finishes and records when its call is dropped.
struct Stuck(Arc<std::sync::atomic::AtomicBool>);

struct SetOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[async_trait]
impl halo_core::DynTool for Stuck {
    fn spec(&self) -> halo_core::ToolSpec {
        halo_core::ToolSpec::new("stuck", "Never finishes.", json!({"type": "object"}))
    }
    async fn call_json(
        &self,
        _args: Value,
        _cx: &ToolContext,
    ) -> Result<halo_core::ToolOutput, halo_core::ToolError> {
        let _guard = SetOnDrop(self.0.clone());
        futures::future::pending::<()>().await;
        unreachable!()
    }
}

// rmcp's client sends `notifications/cancelled` when a call's future is dropped; the
// server must drop the running call, not leave it behind.
#[tokio::test]
async fn a_call_the_client_cancels_is_dropped_in_the_server() {
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = McpServer::builder()
        .tool(Arc::new(Stuck(dropped.clone())))
        .build()
        .unwrap();
    let (client, _seen) = connect(server, Era::Legacy).await;
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        client.call_tool(params("stuck", json!({}))),
    )
    .await;
    assert!(gave_up.is_err(), "the call never finishes by itself");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !dropped.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the server still runs the cancelled call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
