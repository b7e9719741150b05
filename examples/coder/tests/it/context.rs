//! `--context-window N` through the CLI: the coder pages through a 2,000-line file with 40
//! `read` calls against a server whose window is 16,000 tokens, finishes, keeps every request
//! inside the window and rewrites its history only a few times, in chunks; without the flag
//! it assumes the default window for a model it does not know, and the same server refuses
//! the run.

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use halo_core::session::JournalEvent;
use serde_json::json;

use super::{coder, describe, journal, json_lines, run};

const TASK: &str = "Read src/big.rs in pages of 50 lines and tell me what it computes.";
const ANSWER: &str = "It computes 2,000 checksums, one per line.";
const WINDOW: u64 = 16_000;
const LINES: usize = 2_000;
const PAGE: usize = 50;
const READS: usize = LINES / PAGE;

/// A project with `src/big.rs`: 2,000 lines of about 60 bytes (under the read tool's 256 KiB
/// file limit), so each 50-line page is a tool result of about 1,460 `o200k_base` tokens.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let text: String = (1..=LINES)
        .map(|i| format!("    let checksum_{i:04} = fold(seed ^ 0x{i:04x}, \"row {i}\"); // {i}\n"))
        .collect();
    std::fs::write(dir.path().join("src/big.rs"), text).unwrap();
    dir
}

/// The model pages through the file (each call reads other lines, so no call repeats and
/// the loop guard has nothing to say), then answers.
fn script() -> Vec<SimReply> {
    (0..READS)
        .map(|k| {
            SimReply::tool_call(
                "read",
                json!({"path": "src/big.rs", "offset": 1 + k * PAGE, "limit": PAGE}),
            )
        })
        .chain([SimReply::text(ANSWER)])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_reads_on_a_16k_window_stay_inside_it_and_rewrite_the_history_a_few_times() {
    let project = project();
    let journals = tempfile::tempdir().unwrap();
    let path = journals.path().join("s.jsonl");
    let sim = OpenAiSim::openai().await.unwrap();
    // A request over the window gets OpenAI's 400 `context_length_exceeded`, which ends the run.
    sim.set_context_window(Some(WINDOW));
    sim.set_reply_script(script());
    let out = run(coder(
        &sim,
        project.path(),
        &[
            "--context-window",
            &WINDOW.to_string(),
            "--max-steps",
            "45",
            "--session",
            path.to_str().unwrap(),
            TASK,
        ],
    ))
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("context: 16000 tokens (--context-window), tool output evicted from 85 %, older rounds summarized from 95 %, down to 55 %"),
        "{stderr}"
    );
    let lines = json_lines(&out);
    let finish = lines.last().unwrap();
    assert_eq!(finish["type"], "finish", "{}", describe(&out));
    assert_eq!(finish["text"], ANSWER);
    assert_eq!(sim.remaining_replies(), 0);

    // Every request went through, inside the window, counted as the server counts them.
    let records = sim.records();
    assert_eq!(records.len(), READS + 1);
    assert!(records.iter().all(|r| r.status == 200), "{records:?}");
    let prompts: Vec<u64> = records.iter().map(|r| r.prompt_tokens).collect();
    let peak = *prompts.iter().max().unwrap();
    // The figures, for the commit message and the docs (`--nocapture`).
    eprintln!("prompt tokens per request: {prompts:?}");
    // Each page is a real load: the history grows by about 1,460 tokens a read.
    let growth = prompts[2] - prompts[1];
    assert!(
        (1_200..1_800).contains(&growth),
        "a page adds {growth} tokens"
    );
    assert!(peak < WINDOW, "peak {peak} >= {WINDOW}");
    // Eviction starts at 85 % of the window (13,600) by the coder's estimate (o200k_base over
    // each message's JSON, which counts a little more than the server does for the same
    // history, and a calibration that only moves up), so the peak stays somewhat below it.
    assert!(
        peak > WINDOW * 7 / 10,
        "the window was really used: peak {peak}"
    );

    // The history was rewritten a few times, in chunks — not on every step once full, as the
    // ring buffer or a per-step sliding window would (about 30 of the 41 requests here).
    // Measured with the coder's Tiered strategy counting with o200k_base: one rewrite every
    // 3 or 4 reads once full, each evicting old pages in place down to near 55 % of the
    // window: 9 rewrites (7 counting bytes / 4, 8 with truncation from 90 %).
    let rewrites = journal(&path)
        .await
        .iter()
        .filter(|e| matches!(e, JournalEvent::CompactBoundary { .. }))
        .count() as u64;
    eprintln!("peak {peak} of {WINDOW} tokens, {rewrites} history rewrites");
    assert!((4..=12).contains(&rewrites), "{rewrites} rewrites");
    assert_eq!(finish["stats"]["history_rewrites"], rewrites);
    // Each rewrite was the expected miss, never a bust.
    assert_eq!(finish["stats"]["cache_busts"], 0, "{}", finish["stats"]);
    let truncations = prompts.windows(2).filter(|w| w[1] < w[0]).count() as u64;
    assert_eq!(
        truncations, rewrites,
        "each rewrite shrank the next request"
    );

    // The task survives every rewrite: each request opens its history with it.
    for body in sim.requests() {
        let messages = body["messages"].as_array().unwrap();
        let first_user = messages.iter().find(|m| m["role"] == "user").unwrap();
        assert_eq!(first_user["content"], TASK);
    }
}

// Without `--context-window` the coder does not know the window of `sim-model` and assumes
// 32,000 tokens, so it would rewrite only near 27,200; the server's real window is 16,000.
// The request that passes it gets the provider's context-window error, and the engine's
// reactive path raises its estimate, rewrites the history and makes the same step again: the
// run still finishes, with each refusal followed by an accepted request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_flag_a_refused_request_is_rewritten_and_made_again() {
    let project = project();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_context_window(Some(WINDOW));
    sim.set_reply_script(script());
    let out = run(coder(&sim, project.path(), &["--max-steps", "45", TASK])).await;
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "context: 32000 tokens (default: the model's window is unknown; set --context-window)"
        ),
        "{stderr}"
    );
    let last = json_lines(&out).pop().unwrap();
    assert_eq!(last["type"], "finish", "{last}");
    assert_eq!(last["text"], ANSWER);
    let records = sim.records();
    let refused: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.status == 400)
        .map(|(i, _)| i)
        .collect();
    assert!(!refused.is_empty(), "no request passed the window");
    for &i in &refused {
        assert_eq!(
            records[i + 1].status,
            200,
            "request {i} was refused and not made again"
        );
    }
    assert_eq!(records.len() - refused.len(), READS + 1);
    assert!(last["stats"]["history_rewrites"].as_u64().unwrap() >= refused.len() as u64);
}
