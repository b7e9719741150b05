//! The npm reference servers `@modelcontextprotocol/server-everything`, `server-filesystem`
//! and `server-memory` (versions in `tests/peers/npm/package.json`), over stdio.
//!
//! Gated on `HALO_MCP_PEERS`, the folder where `npm ci` installed them (set by `cargo xtask
//! interop`): without it each test prints a skip line and passes; with it and a server
//! missing, the test fails.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use halo_core::DynTool;
use halo_mcp::{ClientOptions, McpClients, McpConfig, ServerConfig, ServerTransport};
use serde_json::json;

/// The installed server `bin` (`mcp-server-everything`, …), or `None` (skip) without
/// `HALO_MCP_PEERS`.
pub fn peer(bin: &str) -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("HALO_MCP_PEERS") else {
        eprintln!("skip: HALO_MCP_PEERS is not set (cargo xtask interop sets it)");
        return None;
    };
    let path = PathBuf::from(dir).join("node_modules/.bin").join(bin);
    assert!(
        path.exists(),
        "HALO_MCP_PEERS is set but {} is missing: run `npm ci` in crates/halo-mcp/tests/peers/npm",
        path.display()
    );
    Some(path)
}

async fn start(servers: Vec<(&str, ServerConfig)>, options: ClientOptions) -> McpClients {
    let mut config = McpConfig::default();
    for (name, server) in servers {
        config.servers.insert(name.to_string(), server);
    }
    let clients = McpClients::start(&config, options).await;
    assert!(clients.failures().is_empty(), "{:?}", clients.failures());
    clients
}

fn find(clients: &McpClients, name: &str) -> Arc<dyn DynTool> {
    clients
        .tools()
        .into_iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

async fn call(clients: &McpClients, name: &str, args: serde_json::Value) -> halo_core::ToolOutput {
    find(clients, name)
        .call_json(
            args,
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn everything_lists_calls_and_maps_every_kind_of_result() {
    let Some(bin) = peer("mcp-server-everything") else {
        return;
    };
    let logs = tempfile::tempdir().unwrap();
    let clients = start(
        vec![(
            "everything",
            ServerConfig::stdio(bin.to_str().unwrap(), ["stdio"]),
        )],
        ClientOptions::default().with_log_dir(logs.path()),
    )
    .await;
    let names: Vec<String> = clients.tools().iter().map(|t| t.spec().name).collect();
    for expected in [
        "mcp__everything__echo",
        "mcp__everything__get-sum",
        "mcp__everything__get-tiny-image",
        "mcp__everything__get-resource-links",
        "mcp__everything__get-structured-content",
        "mcp__everything__get-env",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not in {names:?}"
        );
    }
    let echo = find(&clients, "mcp__everything__echo");
    assert!(echo.annotations().read_only && echo.annotations().idempotent);
    assert_eq!(echo.spec().description, "Echoes back the input string");
    assert_eq!(
        echo.spec().parameters["properties"]["message"]["type"],
        json!("string")
    );

    let out = call(
        &clients,
        "mcp__everything__echo",
        json!({"message": "hi there"}),
    )
    .await;
    assert_eq!(
        (out.content.as_str(), out.is_error),
        ("Echo: hi there", false)
    );
    let out = call(
        &clients,
        "mcp__everything__get-sum",
        json!({"a": 2, "b": 40}),
    )
    .await;
    assert!(out.content.contains("42"), "{}", out.content);
    let out = call(
        &clients,
        "mcp__everything__get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await;
    // The structured content has a text copy: it is not repeated.
    let value: serde_json::Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(value["temperature"], json!(36));
    let out = call(&clients, "mcp__everything__get-tiny-image", json!({})).await;
    assert!(
        out.content.contains("[image: image/png, "),
        "{}",
        out.content
    );
    let out = call(
        &clients,
        "mcp__everything__get-resource-links",
        json!({"count": 2}),
    )
    .await;
    assert_eq!(
        out.content.matches("[resource: ").count(),
        2,
        "{}",
        out.content
    );
    assert!(out.content.contains("demo://resource/"), "{}", out.content);

    // The environment: only PATH (and what node adds), nothing of this process's.
    let out = call(&clients, "mcp__everything__get-env", json!({})).await;
    let env: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&out.content).unwrap();
    assert!(env.contains_key("PATH"));
    for (key, _) in std::env::vars() {
        if key != "PATH" {
            assert!(
                !env.contains_key(&key),
                "{key} leaked into the server's env"
            );
        }
    }

    // A failing validation (the schema says string): an error result the model can read.
    let out = call(&clients, "mcp__everything__echo", json!({"message": 5})).await;
    assert!(out.is_error, "{}", out.content);
    assert!(
        out.content.to_lowercase().contains("message"),
        "{}",
        out.content
    );

    // A legacy-only server: the Auto handshake fell back to `initialize`.
    assert_eq!(clients.servers()[0].protocol, "2025-11-25");
    // everything sends tools/list_changed right after `initialized`: re-listed.
    let deadline = Instant::now() + Duration::from_secs(5);
    while clients.servers()[0].listings < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        clients.servers()[0].listings >= 2,
        "{:?}",
        clients.servers()
    );
    clients.shutdown().await;
}

#[tokio::test]
async fn a_server_killed_mid_call_is_an_error_at_once_and_restarted_on_next_use() {
    let Some(bin) = peer("mcp-server-everything") else {
        return;
    };
    let clients = start(
        vec![(
            "everything",
            ServerConfig::stdio(bin.to_str().unwrap(), ["stdio"]),
        )],
        ClientOptions::default().with_call_timeout(Duration::from_secs(120)),
    )
    .await;
    let pid = clients.server_pid("everything").await.unwrap();
    let long = find(&clients, "mcp__everything__trigger-long-running-operation");
    let call = tokio::spawn(async move {
        long.call_json(
            json!({"duration": 60, "steps": 60}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let killed = Instant::now();
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("no hang")
        .unwrap()
        .unwrap();
    assert!(killed.elapsed() < Duration::from_secs(5));
    assert!(out.is_error);
    assert!(
        out.content
            .contains("closed the connection during the call"),
        "{}",
        out.content
    );
    // The next call starts it again.
    let out = call_echo(&clients).await;
    assert_eq!(out.content, "Echo: back");
    assert_ne!(clients.server_pid("everything").await, Some(pid));
    clients.shutdown().await;
}

async fn call_echo(clients: &McpClients) -> halo_core::ToolOutput {
    call(clients, "mcp__everything__echo", json!({"message": "back"})).await
}

#[tokio::test]
async fn filesystem_reads_writes_and_refuses_a_path_outside_its_root() {
    let Some(bin) = peer("mcp-server-filesystem") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("notes.txt"), "first line\n").unwrap();
    let clients = start(
        vec![(
            "fs",
            ServerConfig::stdio(bin.to_str().unwrap(), [root_path.to_str().unwrap()]),
        )],
        ClientOptions::default(),
    )
    .await;
    let out = call(
        &clients,
        "mcp__fs__read_text_file",
        json!({"path": root_path.join("notes.txt")}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    // The server repeats the text as `structuredContent.content`: the model reads it once.
    assert_eq!(out.content, "first line\n");
    let out = call(
        &clients,
        "mcp__fs__write_file",
        json!({"path": root_path.join("new.txt"), "content": "written by halo"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(root_path.join("new.txt")).unwrap(),
        "written by halo"
    );
    let out = call(
        &clients,
        "mcp__fs__read_text_file",
        json!({"path": "/etc/hostname"}),
    )
    .await;
    assert!(out.is_error, "{}", out.content);
    assert!(out.content.contains("Access denied"), "{}", out.content);
    clients.shutdown().await;
}

#[tokio::test]
async fn memory_keeps_a_graph_with_only_the_configured_env() {
    let Some(bin) = peer("mcp-server-memory") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.jsonl");
    let mut server = ServerConfig::stdio(bin.to_str().unwrap(), Vec::<String>::new());
    if let ServerTransport::Stdio(stdio) = &mut server.transport {
        stdio
            .env
            .insert("MEMORY_FILE_PATH".into(), file.to_str().unwrap().into());
    }
    let clients = start(vec![("memory", server)], ClientOptions::default()).await;
    let out = call(
        &clients,
        "mcp__memory__create_entities",
        json!({"entities": [{"name": "halo", "entityType": "project", "observations": ["speaks MCP"]}]}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let out = call(&clients, "mcp__memory__read_graph", json!({})).await;
    assert!(out.content.contains("speaks MCP"), "{}", out.content);
    assert!(std::fs::read_to_string(&file).unwrap().contains("halo"));
    clients.shutdown().await;
}

#[tokio::test]
async fn a_servers_timeout_key_bounds_its_calls() {
    let Some(bin) = peer("mcp-server-everything") else {
        return;
    };
    let mut server = ServerConfig::stdio(bin.to_str().unwrap(), ["stdio"]);
    server.timeout_ms = Some(500);
    // The client default is long: the server's own key must win.
    let clients = start(
        vec![("everything", server)],
        ClientOptions::default().with_call_timeout(Duration::from_secs(120)),
    )
    .await;
    let started = Instant::now();
    let out = call(
        &clients,
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 30, "steps": 3}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.is_error);
    assert!(
        out.content
            .contains("did not answer `trigger-long-running-operation` within 500 ms"),
        "{}",
        out.content
    );
    // The cancelled call leaves the server usable.
    assert_eq!(call_echo(&clients).await.content, "Echo: back");
    clients.shutdown().await;
}
