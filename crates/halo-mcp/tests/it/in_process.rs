//! The client against an rmcp server in this process: pagination, names, annotations,
//! results, JSON-RPC errors, timeouts, a connection lost mid-call and the restart, and
//! `list_changed` through an agent (one expected miss).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use halo_core::testing::ScriptedModel;
use halo_core::{DynTool, HaloAgent, Message, ToolSource};
use halo_mcp::{ClientOptions, McpClients};
use serde_json::json;

use crate::fake::Fake;

async fn start(fake: &Fake, options: ClientOptions) -> McpClients {
    let clients =
        McpClients::start_in_process([("fake".to_string(), fake.connector())], options).await;
    assert!(clients.failures().is_empty(), "{:?}", clients.failures());
    clients
}

pub fn find(tools: &[std::sync::Arc<dyn DynTool>], name: &str) -> std::sync::Arc<dyn DynTool> {
    tools
        .iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
        .clone()
}

#[tokio::test]
async fn every_page_of_tools_list_is_read_and_tools_are_named_and_annotated() {
    let fake = Fake::new();
    let clients = start(&fake, ClientOptions::default()).await;
    // Five tools at two per page: three tools/list requests.
    assert_eq!(fake.list_calls.load(Ordering::SeqCst), 3);
    let tools = clients.tools();
    let names: Vec<String> = tools.iter().map(|t| t.spec().name).collect();
    assert_eq!(
        names,
        [
            "mcp__fake__echo",
            "mcp__fake__slow",
            "mcp__fake__fail",
            "mcp__fake__die",
            "mcp__fake__grow"
        ]
    );
    let echo = find(&tools, "mcp__fake__echo");
    assert_eq!(echo.spec().description, "The fake's echo.");
    assert_eq!(
        echo.spec().parameters,
        json!({"type": "object", "properties": {"message": {"type": "string"}}})
    );
    assert!(echo.annotations().read_only && echo.annotations().idempotent);
    assert!(!find(&tools, "mcp__fake__fail").annotations().read_only);
    let status = clients.servers();
    assert_eq!((status[0].name.as_str(), status[0].tools), ("fake", 5));
    // rmcp's server speaks 2026-07-28: the Auto handshake's `server/discover` succeeded.
    assert_eq!(status[0].protocol, "2026-07-28");
}

#[tokio::test]
async fn results_errors_and_json_rpc_errors_reach_the_model() {
    let fake = Fake::new();
    let clients = start(&fake, ClientOptions::default()).await;
    let tools = clients.tools();
    let out = find(&tools, "mcp__fake__echo")
        .call_json(
            json!({"message": "hi"}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert_eq!((out.content.as_str(), out.is_error), ("echo: hi", false));
    let out = find(&tools, "mcp__fake__fail")
        .call_json(
            json!({}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert_eq!(
        (out.content.as_str(), out.is_error),
        ("it failed on purpose", true)
    );
    // A JSON-RPC -32602 (argument validation) is an error result, not a failed run.
    let out = find(&tools, "mcp__fake__echo")
        .call_json(
            json!({"message": 5}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "the mcp server `fake` rejected the call's arguments: message: expected a string; fix them to fit the tool's schema and call again"
    );
    let out = find(&tools, "mcp__fake__echo")
        .call_json(
            json!([1]),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert!(
        out.is_error && out.content.contains("takes a JSON object"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_call_over_its_timeout_is_an_error_result() {
    let fake = Fake::new();
    let options = ClientOptions::default().with_call_timeout(Duration::from_millis(300));
    let clients = start(&fake, options).await;
    let started = Instant::now();
    let out = find(&clients.tools(), "mcp__fake__slow")
        .call_json(
            json!({}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.is_error);
    assert!(
        out.content.contains("did not answer `slow` within 300 ms"),
        "{}",
        out.content
    );
    // The server is still usable.
    let out = find(&clients.tools(), "mcp__fake__echo")
        .call_json(
            json!({"message": "still here"}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert_eq!(out.content, "echo: still here");
}

#[tokio::test]
async fn a_connection_lost_mid_call_is_an_error_at_once_and_restarts_on_next_use() {
    let fake = Fake::new();
    // A long call timeout: the error must come from the closed connection, not the timer.
    let options = ClientOptions::default().with_call_timeout(Duration::from_secs(120));
    let clients = start(&fake, options).await;
    let tools = clients.tools();
    let started = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        find(&tools, "mcp__fake__die").call_json(
            json!({}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        ),
    )
    .await
    .expect("no hang")
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.is_error);
    assert!(
        out.content
            .contains("closed the connection during the call"),
        "{}",
        out.content
    );
    assert_eq!(fake.connections.load(Ordering::SeqCst), 1);
    let out = find(&tools, "mcp__fake__echo")
        .call_json(
            json!({"message": "again"}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert_eq!(out.content, "echo: again");
    assert_eq!(fake.connections.load(Ordering::SeqCst), 2, "restarted once");
}

#[tokio::test]
async fn list_changed_swaps_the_tools_at_the_next_step_as_one_expected_miss() {
    let fake = Fake::new();
    let clients = start(&fake, ClientOptions::default()).await;
    let source = clients.tool_source();
    let before = source.version();
    let model = ScriptedModel::new()
        .tool_call("mcp__fake__grow", json!({}))
        .tool_call("mcp__fake__extra", json!({}))
        .text("done");
    let mut agent = HaloAgent::builder(model.clone())
        .tool_source(source.clone())
        .build();
    let result = agent.generate_text("grow the tools").await.unwrap();
    assert_eq!(result.text, "done");
    assert!(source.version() > before);
    let requests = model.requests();
    assert!(
        !requests[0]
            .tool_names
            .contains(&"mcp__fake__extra".to_string())
    );
    assert!(
        requests[1]
            .tool_names
            .contains(&"mcp__fake__extra".to_string())
    );
    assert_eq!(requests[1].fingerprint, requests[2].fingerprint);
    let results: Vec<(String, bool)> = agent
        .log()
        .to_vec()
        .into_iter()
        .filter_map(|m| match m {
            Message::Tool(r) => Some((r.content.into(), r.is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [("grown".to_string(), false), ("extra!".to_string(), false)]
    );
    assert_eq!(agent.cache_ledger().expected_misses(), 1);
    assert_eq!(agent.stats().prefix_fingerprint_changes, 1);
    assert_eq!(agent.stats().cache_busts, 0);
    // The change came on the 2026-07-28 `subscriptions/listen` stream.
    assert_eq!(clients.servers()[0].protocol, "2026-07-28");
    assert_eq!(clients.servers()[0].listings, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_server_is_listed_and_called_with_the_configured_headers() {
    let fake = Fake::new();
    let url = fake.serve_http().await;
    let mut server = halo_mcp::ServerConfig::http(&url);
    if let halo_mcp::ServerTransport::Http(http) = &mut server.transport {
        http.headers
            .insert("X-Halo-Test".into(), "from the config".into());
    }
    let mut config = halo_mcp::McpConfig::default();
    config.servers.insert("web".into(), server);
    let clients = McpClients::start(&config, ClientOptions::default()).await;
    assert!(clients.failures().is_empty(), "{:?}", clients.failures());
    assert_eq!(clients.servers()[0].tools, 5);
    let out = find(&clients.tools(), "mcp__web__echo")
        .call_json(
            json!({"message": "over http"}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert_eq!(
        out.content,
        "echo: over http (x-halo-test: from the config)"
    );
    let out = find(&clients.tools(), "mcp__web__fail")
        .call_json(
            json!({}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert!(out.is_error);
    clients.shutdown().await;
}

#[tokio::test]
async fn an_http_server_that_is_not_there_is_a_handshake_error_naming_it() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = halo_mcp::McpConfig::default();
    config.servers.insert(
        "gone".into(),
        halo_mcp::ServerConfig::http(format!("http://127.0.0.1:{port}/mcp")),
    );
    let clients = McpClients::start(
        &config,
        ClientOptions::default().with_start_timeout(Duration::from_secs(5)),
    )
    .await;
    assert_eq!(clients.failures().len(), 1);
    let message = clients.failures()[0].to_string();
    // The innermost cause, not rmcp's transport type names.
    assert!(
        !message.contains("WorkerTransport") && message.len() < 400,
        "{message}"
    );
    assert!(
        message.starts_with(&format!(
            "mcp server `gone`: the MCP handshake failed: http://127.0.0.1:{port}/mcp: "
        )),
        "{message}"
    );
}
