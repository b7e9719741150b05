//! Approvals in the coder: under the default policy (workspace-write) a command needs the
//! user's approval; with `--session` and no terminal no one can give it, so the call is
//! denied at once — the run never waits — and the journal keeps the denial.

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use halo_core::session::{JournalEvent, JournalOutcome};
use serde_json::json;

use super::{coder, describe, journal, json_lines, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bash_call_with_no_one_to_approve_it_is_denied_at_once_and_journaled() {
    let project = tempfile::tempdir().unwrap();
    let journals = tempfile::tempdir().unwrap();
    let path = journals.path().join("session.jsonl");
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("bash", json!({"command": "touch ran.txt"})),
        SimReply::text("I could not run it."),
    ]);
    // stdin is not a terminal (the test's `Stdio::null()`), no `--yes`: the default policy.
    let out = run(coder(
        &sim,
        project.path(),
        &["--session", path.to_str().unwrap(), "Run touch."],
    ))
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    let lines = json_lines(&out);
    let result = lines
        .iter()
        .find(|l| l["type"] == "tool_result")
        .expect("a tool result");
    assert_eq!(result["is_error"], true);
    assert_eq!(
        result["content"],
        "`bash` did not run: it needs the user's approval (it runs commands or reaches beyond \
         the workspace), which no one can give in this session; go on without it, or ask the \
         user to allow it"
    );
    assert_eq!(lines.last().unwrap()["text"], "I could not run it.");
    assert!(!project.path().join("ran.txt").exists(), "the command ran");
    // The journal holds the denied call in its step, and the answer.
    let events = journal(&path).await;
    let denied = events.iter().any(|e| {
        matches!(
            e,
            JournalEvent::Step { results, .. } if results.len() == 1 && results[0].is_error
                && results[0].content.starts_with("`bash` did not run")
        )
    });
    assert!(denied, "{events:#?}");
    assert!(matches!(
        events.last(),
        Some(JournalEvent::Outcome {
            outcome: JournalOutcome::Answered,
            ..
        })
    ));
}
