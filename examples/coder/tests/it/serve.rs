//! `coder mcp-serve` end to end over stdio with rmcp's own client: listing, a read, a
//! write, a path outside the root and a command without --yes as `isError` results,
//! --read-only, bridge mode, and garbage answered with JSON-RPC errors. Over HTTP:
//! `serve_http.rs`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceError, ServiceExt as _};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use crate::serve_http::initialize;

pub fn serve_command(dir: &Path, flags: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_coder"));
    cmd.arg("mcp-serve")
        .arg("--dir")
        .arg(dir)
        .args(flags)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true);
    cmd
}

async fn stdio_client(dir: &Path, flags: &[&str]) -> RunningService<RoleClient, ()> {
    let (transport, _stderr) = TokioChildProcess::builder(serve_command(dir, flags))
        .stderr(Stdio::null())
        .spawn()
        .expect("coder mcp-serve starts");
    tokio::time::timeout(Duration::from_secs(30), ().serve(transport))
        .await
        .expect("the handshake within 30 s")
        .expect("the handshake")
}

pub async fn call(
    client: &RunningService<RoleClient, ()>,
    name: &str,
    args: Value,
) -> (String, bool) {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let result: CallToolResult = client
        .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("calling {name}: {e}"));
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    (text.join("\n"), result.is_error == Some(true))
}

pub async fn names(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    let tools = client.list_all_tools().await.unwrap();
    tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test]
async fn stdio_serves_the_confined_tools_with_the_coders_hooks() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("project");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("hello.txt"), "hello from the project\n").unwrap();
    std::fs::write(root.path().join("secret.txt"), "outside\n").unwrap();

    let client = stdio_client(&dir, &[]).await;
    assert_eq!(
        names(&client).await,
        ["bash", "edit", "glob", "grep", "ls", "read", "write"]
    );
    let tools = client.list_all_tools().await.unwrap();
    let read = tools.iter().find(|t| t.name == "read").unwrap();
    assert_eq!(
        read.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );

    let (text, is_error) = call(&client, "read", json!({"path": "hello.txt"})).await;
    assert!(!is_error, "{text}");
    assert!(text.contains("hello from the project"), "{text}");

    let (text, is_error) = call(
        &client,
        "write",
        json!({"path": "notes/new.txt", "content": "written over MCP\n"}),
    )
    .await;
    assert!(!is_error, "{text}");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes/new.txt")).unwrap(),
        "written over MCP\n"
    );

    let (text, is_error) = call(&client, "read", json!({"path": "../secret.txt"})).await;
    assert!(is_error);
    assert_eq!(
        text,
        "error: path `../secret.txt` is outside the sandbox root; use a path relative to the root"
    );

    let (text, is_error) = call(&client, "bash", json!({"command": "touch made-by-bash"})).await;
    assert!(is_error);
    assert!(
        text.starts_with("no one can approve `bash` here:") && text.contains("--yes"),
        "{text}"
    );
    assert!(!dir.join("made-by-bash").exists());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn read_only_serves_only_the_reading_tools() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let client = stdio_client(dir.path(), &["--read-only"]).await;
    assert_eq!(names(&client).await, ["glob", "grep", "ls", "read"]);
    let (text, is_error) = call(&client, "ls", json!({})).await;
    assert!(!is_error && text.contains("a.txt"), "{text}");
    let Value::Object(args) = json!({"path": "b.txt", "content": "x"}) else {
        unreachable!()
    };
    match client
        .call_tool(CallToolRequestParams::new("write").with_arguments(args))
        .await
    {
        Err(ServiceError::McpError(e)) => assert!(
            e.message
                .starts_with("unknown tool `write`; the available tools are: glob, grep, ls, read"),
            "{}",
            e.message
        ),
        other => panic!("expected an unknown-tool error, got {other:?}"),
    }
    assert!(!dir.path().join("b.txt").exists());
}

// Bridge mode: the outer server serves its own tools and, through `--mcp-config`, those of an
// inner MCP server (here another `coder mcp-serve`, read-only on another folder), named
// `mcp__inner__…` and run through the outer server's hooks.
#[tokio::test]
async fn mcp_config_bridges_another_servers_tools_through_the_same_hooks() {
    let outer = tempfile::tempdir().unwrap();
    let inner = tempfile::tempdir().unwrap();
    std::fs::write(inner.path().join("inner.txt"), "from the inner folder\n").unwrap();
    let config = outer.path().join("bridge.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"inner": {
            "command": env!("CARGO_BIN_EXE_coder"),
            "args": ["mcp-serve", "--dir", inner.path(), "--read-only"]
        }}})
        .to_string(),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_string();
    let client = stdio_client(outer.path(), &["--yes", "--mcp-config", &config]).await;
    let listed = names(&client).await;
    for name in ["read", "bash", "mcp__inner__read", "mcp__inner__ls"] {
        assert!(listed.iter().any(|n| n == name), "{name} in {listed:?}");
    }
    assert!(
        !listed.iter().any(|n| n == "mcp__inner__write"),
        "{listed:?}"
    );
    let (text, is_error) = call(&client, "mcp__inner__read", json!({"path": "inner.txt"})).await;
    assert!(
        !is_error && text.contains("from the inner folder"),
        "{text}"
    );
    // The outer server's own tools still see only the outer folder.
    let (text, is_error) = call(&client, "read", json!({"path": "inner.txt"})).await;
    assert!(is_error, "{text}");

    // Without --yes a bridged tool is judged by the annotations its server sent: the inner
    // server's `read` says it only reads, so it runs; a command would be denied.
    let client = stdio_client(outer.path(), &["--mcp-config", &config]).await;
    let (text, is_error) = call(&client, "mcp__inner__read", json!({"path": "inner.txt"})).await;
    assert!(
        !is_error && text.contains("from the inner folder"),
        "{text}"
    );
    let (text, is_error) = call(&client, "bash", json!({"command": "true"})).await;
    assert!(is_error && text.contains("--yes"), "{text}");
}

/// Writes a line to a stdio server and reads its answer.
struct Exchange<'a> {
    stdin: &'a mut tokio::process::ChildStdin,
    lines: &'a mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Exchange<'_> {
    async fn line(&mut self, line: &str) -> Value {
        use tokio::io::AsyncWriteExt as _;
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no answer to {line:?} within 30 s"))
            .unwrap()
            .expect("an answer line");
        serde_json::from_str(&answer).unwrap()
    }
}

// rmcp's stdio transport drops lines that are not JSON and answers other bad messages
// with an id-less -32600; a client then waits for an answer forever.
#[tokio::test]
async fn stdio_answers_garbage_with_json_rpc_errors() {
    use tokio::io::AsyncWriteExt as _;
    let dir = tempfile::tempdir().unwrap();
    let mut child = serve_command(dir.path(), &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut exchange = Exchange {
        stdin: &mut stdin,
        lines: &mut lines,
    };
    let answer = exchange.line(&initialize(1).to_string()).await;
    assert_eq!(answer["id"], 1, "{answer}");
    exchange
        .stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    let code = |v: &Value| (v["error"]["code"].as_i64(), v["id"].clone());

    let answer = exchange.line("this is not json").await;
    assert_eq!(code(&answer), (Some(-32700), Value::Null), "{answer}");
    let answer = exchange
        .line(r#"[{"jsonrpc":"2.0","id":5,"method":"tools/list"}]"#)
        .await;
    assert_eq!(code(&answer), (Some(-32600), Value::Null), "{answer}");
    let answer = exchange.line(r#"{"hello": "world"}"#).await;
    assert_eq!(code(&answer), (Some(-32600), Value::Null), "{answer}");
    let answer = exchange
        .line(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":5}}"#)
        .await;
    assert_eq!(code(&answer), (Some(-32602), json!(9)), "{answer}");
    let answer = exchange.line(
        r#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"ls","arguments":"."}}"#,
    )
    .await;
    assert_eq!(code(&answer), (Some(-32602), json!("s")), "{answer}");

    // The session goes on.
    let answer = exchange
        .line(r#"{"jsonrpc":"2.0","id":10,"method":"tools/list"}"#)
        .await;
    assert_eq!(answer["id"], 10);
    assert_eq!(answer["result"]["tools"].as_array().unwrap().len(), 7);
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
}

// An MCP client reads stdout as JSON-RPC only: a startup line there would break it.
#[tokio::test]
async fn stdout_carries_nothing_but_json_rpc() {
    use tokio::io::AsyncWriteExt as _;
    let dir = tempfile::tempdir().unwrap();
    let mut child = serve_command(dir.path(), &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ls","arguments":{}}}"#,
    ];
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ids = Vec::new();
    for request in requests {
        stdin.write_all(request.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        if request.contains("\"id\"") {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("an answer within 30 s")
                .unwrap()
                .expect("an answer line");
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not JSON-RPC on stdout ({e}): {line:?}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            ids.push(message["id"].clone());
        }
    }
    drop(stdin);
    let rest = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("stdout ends when stdin closes")
        .unwrap();
    assert_eq!(rest, None, "nothing more on stdout");
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the server ends when stdin closes")
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(ids, [json!(1), json!(2), json!(3)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("serving MCP on stdio"), "{stderr}");
}
