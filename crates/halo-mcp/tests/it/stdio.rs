//! Stdio servers as real child processes (POSIX `sh`): stray stdout before the handshake, a
//! command that cannot run, the environment a server gets and where its stderr goes.

use std::collections::BTreeMap;
use std::time::Duration;

use halo_mcp::{ClientOptions, McpClients, McpConfig, ServerConfig, ServerError, ServerTransport};

fn sh(script: &str) -> ServerConfig {
    ServerConfig::stdio("sh", ["-c", script])
}

async fn start(servers: &[(&str, ServerConfig)], options: ClientOptions) -> McpClients {
    let mut config = McpConfig::default();
    for (name, server) in servers {
        config.servers.insert(name.to_string(), server.clone());
    }
    McpClients::start(&config, options).await
}

fn quick() -> ClientOptions {
    ClientOptions::default().with_start_timeout(Duration::from_secs(2))
}

#[tokio::test]
async fn stray_stdout_before_the_handshake_is_an_error_naming_the_server() {
    let clients = start(
        &[
            // Not an MCP server: prints a banner and exits.
            (
                "chatty",
                sh("echo 'Starting chatty v1'; echo ready; exit 3"),
            ),
            // Prints a banner and then says nothing more.
            ("silent", sh("echo 'Listening...'; sleep 30")),
        ],
        quick(),
    )
    .await;
    assert!(clients.servers().is_empty());
    let failures = clients.failures();
    assert_eq!(failures.len(), 2);
    let ServerError::StrayStdout { server, lines, .. } = &failures[0] else {
        panic!("{:?}", failures[0]);
    };
    assert_eq!(server, "chatty");
    assert_eq!(lines, &["Starting chatty v1", "ready"]);
    let message = failures[0].to_string();
    assert!(
        message.starts_with(
            "mcp server `chatty` wrote non-JSON output to stdout before the MCP handshake (\"Starting chatty v1\", \"ready\")"
        ),
        "{message}"
    );
    assert_eq!(failures[1].server(), "silent");
    assert!(
        failures[1].to_string().contains("no answer within 2000 ms"),
        "{}",
        failures[1]
    );
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_and_left_out() {
    let clients = start(
        &[
            (
                "missing",
                ServerConfig::stdio("/nonexistent/halo-mcp-server", ["x"]),
            ),
            ("quits", sh("echo 'cannot open the database' >&2; exit 2")),
        ],
        quick(),
    )
    .await;
    let failures = clients.failures();
    assert_eq!(failures.len(), 2);
    assert!(matches!(&failures[0], ServerError::Spawn { server, .. } if server == "missing"));
    assert!(
        failures[0]
            .to_string()
            .starts_with("mcp server `missing`: cannot run `/nonexistent/halo-mcp-server`: "),
        "{}",
        failures[0]
    );
    let ServerError::Handshake { server, stderr, .. } = &failures[1] else {
        panic!("{:?}", failures[1]);
    };
    assert_eq!(server, "quits");
    assert_eq!(stderr, "cannot open the database");
    assert_eq!(
        failures[1].to_string(),
        "mcp server `quits`: the MCP handshake failed: the process exited (exit status: 2) before completing it; its stderr ends with: cannot open the database"
    );
    assert!(clients.tools().is_empty());
}

#[tokio::test]
async fn a_server_gets_only_path_and_its_configured_env_and_its_stderr_goes_to_the_log() {
    let logs = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut server = sh("env >&2; pwd >&2; exit 1");
    if let ServerTransport::Stdio(stdio) = &mut server.transport {
        stdio.env = BTreeMap::from([("HALO_GIVEN".to_string(), "yes".to_string())]);
        stdio.cwd = Some(work.path().to_path_buf());
    }
    // SAFETY-free check: this process has variables the child must not see.
    assert!(std::env::vars().count() > 2);
    let clients = start(&[("envy", server)], quick().with_log_dir(logs.path())).await;
    assert_eq!(clients.failures().len(), 1);
    // The log is written by a task draining stderr: give it a moment to flush.
    let log = logs.path().join("envy.log");
    let mut text = String::new();
    for _ in 0..50 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    names.sort();
    // `sh` itself adds PWD.
    assert_eq!(names, ["HALO_GIVEN", "PATH", "PWD"], "{text}");
    assert!(text.contains("HALO_GIVEN=yes"));
    let cwd = work.path().canonicalize().unwrap();
    assert!(text.lines().any(|l| l == cwd.to_str().unwrap()), "{text}");
}
