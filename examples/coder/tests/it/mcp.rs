//! MCP servers through the coder: `.mcp.json` in `--dir`, a server that fails to start
//! (reported, the run goes on), a bad config (an error naming the field), and — gated on
//! `HALO_MCP_PEERS` (set by `cargo xtask interop`) — the loopback fake model calling
//! `mcp__everything__echo` on the real npm server and reading its answer.

use std::path::PathBuf;

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use serde_json::{Value, json};

use super::{approve, coder_text, describe, run};

/// The `tool` messages of the last request the fake received.
fn tool_results(sim: &OpenAiSim) -> Vec<String> {
    let requests = sim.requests();
    let last = requests.last().expect("a request");
    last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// The tool names of the first request.
fn tool_names(sim: &OpenAiSim) -> Vec<String> {
    sim.requests()[0]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_model_calls_the_real_everything_server_and_reads_its_answer() {
    let Some(dir) = std::env::var_os("HALO_MCP_PEERS") else {
        eprintln!("skip: HALO_MCP_PEERS is not set (cargo xtask interop sets it)");
        return;
    };
    let bin = PathBuf::from(dir).join("node_modules/.bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "HALO_MCP_PEERS is set but {} is missing",
        bin.display()
    );
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join(".mcp.json"),
        json!({"mcpServers": {"everything": {"command": bin, "args": ["stdio"]}}}).to_string(),
    )
    .unwrap();
    approve(project.path());
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call(
            "mcp__everything__echo",
            json!({"message": "hello from the fake"}),
        ),
        SimReply::text("The server echoed."),
    ]);
    let out = run(coder_text(
        &sim,
        project.path(),
        &["--yes", "Echo something."],
    ))
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("mcp: everything ("), "{}", describe(&out));
    assert!(
        tool_names(&sim)
            .iter()
            .any(|n| n == "mcp__everything__echo")
    );
    assert!(
        tool_names(&sim).iter().any(|n| n == "read"),
        "the sandbox tools stay"
    );
    assert_eq!(tool_results(&sim), ["Echo: hello from the fake"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_to_start_is_reported_and_the_run_goes_on() {
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join(".agent")).unwrap();
    std::fs::write(
        project.path().join(".agent/mcp.json"),
        r#"{"mcpServers": {"broken": {"command": "/nonexistent/mcp-server"}}}"#,
    )
    .unwrap();
    approve(project.path());
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([SimReply::text("Done without it.")]);
    let out = run(coder_text(&sim, project.path(), &["--yes", "Do it."])).await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("mcp: no server started, 1 failed"),
        "{}",
        describe(&out)
    );
    assert!(
        stdout.contains("mcp: failed: mcp server `broken`: cannot run `/nonexistent/mcp-server`"),
        "{}",
        describe(&out)
    );
    assert!(!tool_names(&sim).iter().any(|n| n.starts_with("mcp__")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_runs_in_the_project_folder() {
    let project = tempfile::tempdir().unwrap();
    let project_path = project.path().canonicalize().unwrap();
    // Not an MCP server: it writes its working directory where the test can read it.
    std::fs::write(
        project.path().join(".mcp.json"),
        json!({"mcpServers": {"where": {"command": "sh", "args": ["-c", "pwd > cwd.txt"]}}})
            .to_string(),
    )
    .unwrap();
    approve(project.path());
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([SimReply::text("ok")]);
    let out = run(coder_text(&sim, project.path(), &["--yes", "Do it."])).await;
    assert!(out.status.success(), "{}", describe(&out));
    let cwd = std::fs::read_to_string(project_path.join("cwd.txt")).unwrap();
    assert_eq!(cwd.trim(), project_path.to_str().unwrap());
}

// A project's own .mcp.json names commands that would run outside the sandbox: with no
// terminal to ask they start only from a configuration the user approved before, --yes or
// not, and the startup line says what changed and how to approve; --read-only starts no
// server at all, not even one named with --mcp-config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projects_own_servers_start_only_when_the_user_agrees() {
    let project = tempfile::tempdir().unwrap();
    let sentinel = project.path().join("ran.txt");
    let config =
        json!({"mcpServers": {"helper": {"command": "sh", "args": ["-c", "echo ran > ran.txt"]}}})
            .to_string();
    std::fs::write(project.path().join(".mcp.json"), &config).unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::text("ok"),
        SimReply::text("ok"),
        SimReply::text("ok"),
        SimReply::text("ok"),
        SimReply::text("ok"),
    ]);
    for flags in [&["Do it."][..], &["--yes", "Do it."]] {
        let out = run(coder_text(&sim, project.path(), flags)).await;
        assert!(out.status.success(), "{}", describe(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("mcp: not started: helper from the project's .mcp.json / .agent/mcp.json: you have not approved this configuration; they run outside the sandbox, so they start only from a configuration you approved: run the coder in this folder at a terminal and answer yes"),
            "{flags:?}: {}",
            describe(&out)
        );
        assert!(
            !sentinel.exists(),
            "the project's server ran without consent ({flags:?})"
        );
    }

    // Approved, it starts; changed since, it does not, and the line says what changed.
    approve(project.path());
    let out = run(coder_text(&sim, project.path(), &["Do it."])).await;
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        sentinel.exists(),
        "the approved server did not start: {}",
        describe(&out)
    );
    std::fs::remove_file(&sentinel).unwrap();
    let changed = json!({"mcpServers": {
        "helper": {"command": "sh", "args": ["-c", "echo changed > ran.txt"]},
        "extra": {"command": "sh", "args": ["-c", "echo extra > ran.txt"]}
    }})
    .to_string();
    std::fs::write(project.path().join(".mcp.json"), &changed).unwrap();
    let out = run(coder_text(&sim, project.path(), &["--yes", "Do it."])).await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("mcp: not started: extra, helper from the project's .mcp.json / .agent/mcp.json: the configuration changed since you approved it (added `extra`, changed `helper`); they run outside the sandbox"),
        "{}",
        describe(&out)
    );
    assert!(!sentinel.exists(), "a changed configuration started");

    let given = project.path().join("named.json");
    std::fs::write(&given, &config).unwrap();
    let out = run(coder_text(
        &sim,
        project.path(),
        &[
            "--read-only",
            "--mcp-config",
            given.to_str().unwrap(),
            "Do it.",
        ],
    ))
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("mcp: 2 server(s) configured, not started: --read-only runs no commands"),
        "{}",
        describe(&out)
    );
    assert!(!sentinel.exists(), "a server ran in read-only mode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_mcp_config_stops_the_coder_naming_the_field() {
    let project = tempfile::tempdir().unwrap();
    let config = project.path().join("servers.json");
    std::fs::write(
        &config,
        r#"{"mcpServers": {"fs": {"command": "x", "args": "-y"}}}"#,
    )
    .unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    let out = run(coder_text(
        &sim,
        project.path(),
        &["--mcp-config", config.to_str().unwrap(), "Do it."],
    ))
    .await;
    assert!(!out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mcpServers.fs.args: expected an array of strings"),
        "{}",
        describe(&out)
    );
    assert!(sim.requests().is_empty());
}
