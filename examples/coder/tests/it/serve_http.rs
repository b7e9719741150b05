//! `coder mcp-serve --http` end to end on loopback: rmcp's own client with the bearer
//! token, and plain HTTP requests where a client library would hide the status: the token
//! and its 0600 file, `401` without it, the session cap, idle expiry, and a running command
//! killed when its session is deleted or its client disconnects.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use crate::serve::{call, names, serve_command};

/// A running `coder mcp-serve --http 127.0.0.1:0`.
struct HttpServer {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/mcp`.
    url: String,
    /// The startup line's text after `token: `.
    token_line: String,
    /// The line after `token value: ` (with --print-token).
    printed_token: Option<String>,
}

/// Starts `coder mcp-serve --http 127.0.0.1:0 FLAGS` with `env`, `XDG_RUNTIME_DIR` set to
/// `runtime` (unset when empty) and no inherited `HALO_MCP_TOKEN`; returns once it listens.
async fn start_http(
    dir: &Path,
    runtime: &Path,
    flags: &[&str],
    env: &[(&str, &str)],
) -> HttpServer {
    let mut command = serve_command(dir, &[&["--http", "127.0.0.1:0"], flags].concat());
    command.env_remove("HALO_MCP_TOKEN");
    if runtime.as_os_str().is_empty() {
        command.env_remove("XDG_RUNTIME_DIR");
    } else {
        command.env("XDG_RUNTIME_DIR", runtime);
    }
    command
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut token_line, mut printed_token) = (None, None);
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(value) = line.strip_prefix("token value: ") {
                printed_token = Some(value.to_string());
            } else if let Some(text) = line.strip_prefix("token: ") {
                token_line = Some(text.to_string());
            } else if let Some(url) = line.strip_prefix("serving MCP at ") {
                return url.to_string();
            }
        }
        panic!("the server ended without serving")
    })
    .await
    .expect("the server listens within 30 s");
    // Keep reading stderr, so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    HttpServer {
        child,
        url,
        token_line: token_line.expect("a token line"),
        printed_token,
    }
}

/// rmcp's own client of `url`, sending `token`.
async fn http_client(url: &str, token: &str) -> RunningService<RoleClient, ()> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("the handshake over HTTP")
}

/// Plain HTTP requests to the MCP endpoint, for what an MCP client library hides.
struct Raw {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
}

impl Raw {
    fn new(url: &str, token: Option<&str>) -> Raw {
        Raw {
            http: reqwest::Client::new(),
            url: url.to_string(),
            token: token.map(str::to_string),
        }
    }

    fn request(&self, method: reqwest::Method, session: Option<&str>) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .request(method, &self.url)
            .header("Accept", "application/json, text/event-stream");
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(session) = session {
            request = request.header("Mcp-Session-Id", session);
        }
        request
    }

    async fn post(&self, session: Option<&str>, body: Value) -> reqwest::Response {
        self.request(reqwest::Method::POST, session)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// `initialize` and `notifications/initialized`: the new session's id.
    async fn session(&self) -> String {
        let response = self.post(None, initialize(1)).await;
        assert_eq!(response.status(), 200);
        let session = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let _ = response.text().await.unwrap();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(self.post(Some(&session), initialized).await.status(), 202);
        session
    }

    async fn delete(&self, session: &str) -> reqwest::StatusCode {
        self.request(reqwest::Method::DELETE, Some(session))
            .send()
            .await
            .unwrap()
            .status()
    }
}

pub fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
}

/// The JSON-RPC messages of an SSE body (`data:` lines), or the body itself when JSON.
fn messages(body: &str) -> Vec<Value> {
    if let Ok(value) = serde_json::from_str(body) {
        return vec![value];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// The pid of every process whose command line contains `tag`.
fn processes_with(tag: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
            && String::from_utf8_lossy(&cmdline).contains(tag)
        {
            found.push(name);
        }
    }
    found
}

/// Waits until `done` holds, for at most `limit`; whether it did.
async fn eventually(limit: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done()
}

#[tokio::test]
async fn http_serves_the_tools_at_slash_mcp_with_a_generated_token_in_a_private_file() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "over http\n").unwrap();
    let mut server = start_http(dir.path(), runtime.path(), &[], &[]).await;
    assert_eq!(
        server.printed_token, None,
        "the token itself is not printed"
    );

    let (path, rest) = server.token_line.split_once(' ').unwrap();
    let path = std::path::PathBuf::from(path);
    assert!(
        path.starts_with(runtime.path().join("halo-coder-mcp")),
        "{}",
        server.token_line
    );
    assert!(rest.contains("Authorization: Bearer"), "{rest}");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the token file is private");
    let token = std::fs::read_to_string(&path).unwrap().trim().to_string();
    assert_eq!(token.len(), 64);

    let client = http_client(&server.url, &token).await;
    assert_eq!(names(&client).await.len(), 7);
    let (text, is_error) = call(&client, "read", json!({"path": "a.txt"})).await;
    assert!(!is_error && text.contains("over http"), "{text}");
    let (_, is_error) = call(&client, "read", json!({"path": "/etc/passwd"})).await;
    assert!(is_error);
    client.cancel().await.unwrap();

    // SIGTERM stops the server, which removes its token file.
    terminate(&mut server).await;
    assert!(!path.exists(), "the token file is removed at exit");
}

/// Sends SIGTERM to `server` and waits for a clean exit.
async fn terminate(server: &mut HttpServer) {
    let pid = server.child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), server.child.wait())
        .await
        .expect("the server stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn without_a_runtime_dir_the_token_goes_to_a_private_temp_folder_removed_at_exit() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_http(dir.path(), Path::new(""), &[], &[]).await;
    let path = std::path::PathBuf::from(server.token_line.split_once(' ').unwrap().0);
    let folder = path.parent().unwrap().to_path_buf();
    assert!(
        folder
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("halo-coder-mcp-"),
        "{}",
        server.token_line
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&folder), mode(&path)), (0o700, 0o600));
    let token = std::fs::read_to_string(&path).unwrap();
    let client = http_client(&server.url, token.trim()).await;
    assert_eq!(names(&client).await.len(), 7);
    client.cancel().await.unwrap();
    terminate(&mut server).await;
    assert!(
        !folder.exists(),
        "the folder made for the token is removed at exit"
    );
}

#[tokio::test]
async fn http_without_the_token_is_401_with_a_bearer_challenge() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let token_file = runtime.path().join("my-token");
    std::fs::write(&token_file, "a-token-of-my-own-42\n").unwrap();
    let token_arg = token_file.to_str().unwrap();
    let mut server = start_http(
        dir.path(),
        runtime.path(),
        &["--token-file", token_arg, "--print-token"],
        &[],
    )
    .await;
    assert_eq!(
        server.token_line,
        format!("the first line of {}", token_file.display())
    );
    assert_eq!(
        server.printed_token.as_deref(),
        Some("a-token-of-my-own-42")
    );

    let response = Raw::new(&server.url, None).post(None, initialize(1)).await;
    assert_eq!(response.status(), 401);
    assert_eq!(
        response.headers()["www-authenticate"],
        r#"Bearer realm="mcp""#
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32001, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer"),
        "{body}"
    );

    let response = Raw::new(&server.url, Some("a-token-of-my-own-43"))
        .post(None, initialize(1))
        .await;
    assert_eq!(response.status(), 401);
    assert_eq!(
        response.headers()["www-authenticate"],
        r#"Bearer realm="mcp", error="invalid_token""#
    );
    // DELETE and GET need it too.
    let raw = Raw::new(&server.url, None);
    assert_eq!(raw.delete("some-session").await, 401);
    let get = raw
        .request(reqwest::Method::GET, None)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 401);

    let session = Raw::new(&server.url, Some("a-token-of-my-own-42"))
        .session()
        .await;
    assert!(!session.is_empty());
    server.child.kill().await.unwrap();

    // The token may come from HALO_MCP_TOKEN too.
    let mut server = start_http(
        dir.path(),
        runtime.path(),
        &[],
        &[("HALO_MCP_TOKEN", "token-from-the-environment")],
    )
    .await;
    assert_eq!(server.token_line, "from HALO_MCP_TOKEN");
    let client = http_client(&server.url, "token-from-the-environment").await;
    assert_eq!(names(&client).await.len(), 7);
    client.cancel().await.unwrap();
    server.child.kill().await.unwrap();
}

#[tokio::test]
async fn http_sessions_beyond_the_cap_are_refused_until_one_closes() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let token = "the-cap-test-token";
    let mut server = start_http(
        dir.path(),
        runtime.path(),
        &["--max-sessions", "2"],
        &[("HALO_MCP_TOKEN", token)],
    )
    .await;
    let raw = Raw::new(&server.url, Some(token));
    let first = raw.session().await;
    let _second = raw.session().await;

    let refused = raw.post(None, initialize(77)).await;
    assert_eq!(refused.status(), 503);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["id"], 77, "{body}");
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("this server already has 2 sessions, its limit"),
        "{body}"
    );
    // Requests of the open sessions still go through.
    let listed = raw
        .post(
            Some(&first),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .await;
    assert_eq!(listed.status(), 200);
    let listed = messages(&listed.text().await.unwrap());
    assert_eq!(listed[0]["result"]["tools"].as_array().unwrap().len(), 7);

    assert_eq!(raw.delete(&first).await, 202);
    let _third = raw.session().await;
    server.child.kill().await.unwrap();
}

#[tokio::test]
async fn an_idle_http_session_expires() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let token = "the-idle-test-token";
    let mut server = start_http(
        dir.path(),
        runtime.path(),
        &["--idle-timeout", "1", "--max-sessions", "1"],
        &[("HALO_MCP_TOKEN", token)],
    )
    .await;
    let raw = Raw::new(&server.url, Some(token));
    let session = raw.session().await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    assert_eq!(raw.post(Some(&session), list.clone()).await.status(), 200);
    // Four idle timeouts without a message.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        raw.post(Some(&session), list).await.status(),
        404,
        "an expired session is unknown"
    );
    // Its slot is free again (the cap is 1).
    let _next = raw.session().await;
    server.child.kill().await.unwrap();
}

/// Starts `sleep 30` through `bash` in a session and returns the session, the call's open
/// response, and the tag in the command line.
async fn a_running_command(raw: &Raw, dir: &Path) -> (String, reqwest::Response, String) {
    let session = raw.session().await;
    let tag = format!("halo-kill-test-{}", std::process::id());
    let command = format!("touch started; sleep 30; touch marker # {tag}");
    let call = raw
        .post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "bash", "arguments": {"command": command}}}),
        )
        .await;
    assert_eq!(call.status(), 200);
    assert!(
        eventually(Duration::from_secs(30), || dir.join("started").exists()).await,
        "the command started"
    );
    assert!(!processes_with(&tag).is_empty(), "the command runs");
    (session, call, tag)
}

#[tokio::test]
async fn deleting_a_session_kills_its_running_command() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let token = "the-delete-test-token";
    let mut server = start_http(
        dir.path(),
        runtime.path(),
        &["--yes"],
        &[("HALO_MCP_TOKEN", token)],
    )
    .await;
    let raw = Raw::new(&server.url, Some(token));
    let (session, call, tag) = a_running_command(&raw, dir.path()).await;
    assert_eq!(raw.delete(&session).await, 202);
    assert!(
        eventually(Duration::from_secs(20), || processes_with(&tag).is_empty()).await,
        "the command still runs: {:?}",
        processes_with(&tag)
    );
    assert!(!dir.path().join("marker").exists());
    drop(call);
    server.child.kill().await.unwrap();
}

#[tokio::test]
async fn a_client_disconnecting_mid_call_kills_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let token = "the-disconnect-test-token";
    let mut server = start_http(
        dir.path(),
        runtime.path(),
        &["--yes"],
        &[("HALO_MCP_TOKEN", token)],
    )
    .await;
    let raw = Raw::new(&server.url, Some(token));
    let (session, call, tag) = a_running_command(&raw, dir.path()).await;
    drop(call);
    assert!(
        eventually(Duration::from_secs(25), || processes_with(&tag).is_empty()).await,
        "the command still runs: {:?}",
        processes_with(&tag)
    );
    assert!(!dir.path().join("marker").exists());
    // The session itself stays open.
    let list = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"});
    assert_eq!(raw.post(Some(&session), list).await.status(), 200);
    server.child.kill().await.unwrap();
}
