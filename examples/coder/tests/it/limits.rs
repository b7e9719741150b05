//! Resources, through the CLI: a command over `--max-memory` fails with a result naming the
//! flag, and the memory of the coder and of `coder mcp-serve` stays bounded while four greps
//! at once read a file that is one 256 MiB line (each used to hold the whole line).
//! Peak memory is the process's `VmHWM` in `/proc/PID/status`, read while it runs.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use super::{coder_text, describe, run};

/// The most memory the coder or the server may reach in these runs: 256 MiB, the size of
/// the one line (four greps used to take 1.6 GB).
const BOUND: u64 = 256 << 20;

/// `big.txt` in `dir`: 256 MiB of `a` and no line end, written in 1 MiB blocks.
fn one_long_line(dir: &Path) {
    use std::io::Write as _;
    let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("big.txt")).unwrap());
    let block = vec![b'a'; 1 << 20];
    for _ in 0..256 {
        file.write_all(&block).unwrap();
    }
    file.flush().unwrap();
}

/// The peak resident memory (`VmHWM`) of process `pid` so far, in bytes; `None` once it is
/// gone.
fn peak(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    Some(
        kb.trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()?
            * 1024,
    )
}

/// Reads `pid`'s peak every 20 ms until it exits; the last one read.
async fn watch_peak(pid: u32) -> u64 {
    let mut last = 0;
    while let Some(p) = peak(pid) {
        last = p;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    last
}

/// The tool results the model read, in order: the `tool` messages of the last request.
fn tool_results(sim: &OpenAiSim) -> Vec<String> {
    let requests = sim.requests();
    let last = requests.last().expect("a request");
    last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_over_max_memory_fails_naming_the_flag() {
    let project = tempfile::tempdir().unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call(
            "bash",
            json!({"command": "for i in 1 2 3; do cat /dev/zero | tail -c 40M > /dev/null & done; wait"}),
        ),
        SimReply::text("It ran out of memory."),
    ]);
    let out = run(coder_text(
        &sim,
        project.path(),
        &["--yes", "--max-memory", "64M", "Use memory."],
    ))
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "limits per command: memory 64 MiB, processes 1024, file size 4 GiB, CPU time 600 s, /tmp 1 GiB"
        ),
        "{}",
        describe(&out)
    );
    let results = tool_results(&sim);
    assert!(
        results[0].starts_with("killed: memory limit 64 MiB reached (--max-memory)"),
        "{results:?}"
    );
}

// Four greps at once, in one step (read-only calls run concurrently), of a file that is one
// 256 MiB line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coders_memory_stays_bounded_under_four_long_line_greps() {
    let project = tempfile::tempdir().unwrap();
    one_long_line(project.path());
    let sim = OpenAiSim::openai().await.unwrap();
    let grep = |pattern: &str| ("grep".to_string(), json!({"pattern": pattern}));
    sim.set_reply_script([
        SimReply::ToolCalls(vec![grep("zz1"), grep("zz2"), grep("zz3"), grep("zz4")]),
        SimReply::text("Nothing found."),
    ]);
    let mut cmd = coder_text(&sim, project.path(), &["Search."]);
    let child = cmd.spawn().expect("the coder starts");
    let pid = child.id().expect("a pid");
    let watching = tokio::spawn(watch_peak(pid));
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the coder finishes")
        .unwrap();
    let peak = watching.await.unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let results = tool_results(&sim);
    assert_eq!(results.len(), 4, "{results:?}");
    for r in &results {
        assert!(
            r.contains("[not searched to the end: `big.txt` (a line is longer than 8 MiB"),
            "{r}"
        );
    }
    eprintln!(
        "coder peak RSS under four long-line greps: {} MiB",
        peak >> 20
    );
    assert!(peak < BOUND, "the coder reached {} MiB", peak >> 20);
}

// The same through `coder mcp-serve` on stdio: four `tools/call`s at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_servers_memory_stays_bounded_under_four_long_line_greps() {
    let project = tempfile::tempdir().unwrap();
    one_long_line(project.path());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_coder"))
        .arg("mcp-serve")
        .arg("--dir")
        .arg(project.path())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("coder mcp-serve starts");
    let pid = child.id().expect("a pid");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = async |message: Value| {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "limits-test", "version": "1"}}}),
    )
    .await;
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    for id in 2..6 {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "grep", "arguments": {"pattern": format!("zz{id}")}}}))
        .await;
    }
    let mut answered = Vec::new();
    let mut highest = 0;
    while answered.len() < 5 {
        let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
            .await
            .expect("an answer within 120 s")
            .unwrap()
            .expect("the server answers");
        highest = highest.max(peak(pid).unwrap_or(0));
        let message: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = message["id"].as_u64() {
            if id > 1 {
                let text = message["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("");
                assert!(
                    text.contains("[not searched to the end: `big.txt`"),
                    "{message}"
                );
            }
            answered.push(id);
        }
    }
    highest = highest.max(peak(pid).unwrap_or(0));
    let _ = child.kill().await;
    eprintln!(
        "mcp-serve peak RSS under four long-line greps: {} MiB",
        highest >> 20
    );
    assert!(highest < BOUND, "the server reached {} MiB", highest >> 20);
}
