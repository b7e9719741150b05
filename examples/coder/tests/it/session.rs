//! `--session` and `--resume` across processes: a run stopped by `--max-steps 1` and resumed
//! in a new process sends byte-identical requests to an uninterrupted run; a task on a saved
//! conversation is its next user turn; `--resume` says clearly when there is nothing to do.

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use halo_core::session::{JournalEvent, JournalOutcome};
use serde_json::{Value, json};

use super::{coder, coder_text, describe, journal, json_lines, run};

const TASK: &str = "What do the notes say?";

fn script() -> Vec<SimReply> {
    vec![
        SimReply::tool_call("read", json!({"path": "notes.txt"})),
        SimReply::tool_call("grep", json!({"pattern": "Friday"})),
        SimReply::text("The release is on Friday."),
    ]
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("notes.txt"),
        "Meeting notes\n- The release is planned for Friday.\n",
    )
    .unwrap();
    dir
}

/// Each request body as the bytes of its JSON text.
fn bodies(sim: &OpenAiSim) -> Vec<String> {
    sim.requests().iter().map(Value::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_resumed_in_a_new_process_sends_byte_identical_requests() {
    let project = project();
    let dir = project.path();
    let journals = tempfile::tempdir().unwrap();

    // One uninterrupted run.
    let whole = OpenAiSim::openai().await.unwrap();
    whole.set_reply_script(script());
    let path = journals.path().join("whole.jsonl");
    let out = run(coder(
        &whole,
        dir,
        &["--session", path.to_str().unwrap(), TASK],
    ))
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    let lines = json_lines(&out);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "finish", "{}", describe(&out));
    assert_eq!(last["text"], "The release is on Friday.");
    assert_eq!(whole.remaining_replies(), 0);
    // The finished task is in the project's memory file, which the next session's prefix
    // would show; start the split run from the same project as the whole one did.
    std::fs::remove_file(dir.join(".agent/memory.md")).unwrap();

    // The same task stopped after one step, then resumed by a second process.
    let split = OpenAiSim::openai().await.unwrap();
    split.set_reply_script(script());
    let path = journals.path().join("split.jsonl");
    let session = path.to_str().unwrap();
    let first = run(coder(
        &split,
        dir,
        &["--session", session, "--max-steps", "1", TASK],
    ))
    .await;
    assert_eq!(first.status.code(), Some(1), "{}", describe(&first));
    let stopped = json_lines(&first);
    assert_eq!(
        stopped.last().unwrap()["kind"],
        "max_steps_reached",
        "{}",
        describe(&first)
    );
    assert!(matches!(
        journal(&path).await.last(),
        Some(JournalEvent::Outcome {
            outcome: JournalOutcome::MaxStepsReached,
            ..
        })
    ));
    let second = run(coder(&split, dir, &["--session", session, "--resume"])).await;
    assert!(second.status.success(), "{}", describe(&second));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!("session: {session} (restored 3 messages)")),
        "{stderr}"
    );
    assert_eq!(
        json_lines(&second).last().unwrap()["text"],
        "The release is on Friday."
    );

    assert_eq!(bodies(&split).len(), 3);
    assert_eq!(bodies(&split), bodies(&whole), "byte-identical requests");
    // The interrupted run wrote no memory entry; the resumed one wrote the task's.
    let memory = std::fs::read_to_string(dir.join(".agent/memory.md")).unwrap();
    assert_eq!(memory.lines().count(), 1, "{memory}");
    assert!(
        memory.contains(&format!("task: {TASK} | result: The release is on Friday.")),
        "{memory}"
    );
    // And the journals hold the same conversation.
    let messages = |events: Vec<JournalEvent>| -> Vec<Value> {
        events
            .into_iter()
            .filter_map(|e| match e {
                JournalEvent::User { message, .. } => Some(serde_json::to_value(message).unwrap()),
                JournalEvent::Step {
                    assistant, results, ..
                } => Some(json!([assistant, results])),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        messages(journal(&path).await),
        messages(journal(&journals.path().join("whole.jsonl")).await)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_on_a_saved_conversation_is_its_next_user_turn() {
    let project = project();
    let dir = project.path();
    let journals = tempfile::tempdir().unwrap();
    let path = journals.path().join("s.jsonl");
    let session = path.to_str().unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script(script());
    let out = run(coder(&sim, dir, &["--session", session, TASK])).await;
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("session: {session} (new)")),
        "{stderr}"
    );

    // Nothing to resume once the model answered.
    let out = run(coder(&sim, dir, &["--session", session, "--resume"])).await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{}", describe(&out));
    assert_eq!(lines[0]["type"], "error");
    assert_eq!(lines[0]["kind"], "nothing_to_resume");
    let message = lines[0]["message"].as_str().unwrap();
    assert!(message.contains("give a TASK"), "{message}");
    assert_eq!(sim.requests().len(), 3, "no model call was made");

    // A new task continues the conversation. (The first task is in the project's memory
    // file, which would change the new session's system prompt: start without it.)
    std::fs::remove_file(dir.join(".agent/memory.md")).unwrap();
    sim.push_reply(SimReply::text("Alice owns the changelog."));
    let out = run(coder(
        &sim,
        dir,
        &["--session", session, "Who owns the changelog?"],
    ))
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("session: {session} (restored 6 messages)")),
        "{stderr}"
    );
    let requests = sim.requests();
    let before = requests[2]["messages"].as_array().unwrap();
    let after = requests[3]["messages"].as_array().unwrap();
    assert_eq!(after.len(), before.len() + 2);
    assert_eq!(
        after[..before.len()],
        before[..],
        "the history is kept as it was"
    );
    assert_eq!(
        after[before.len()],
        json!({"role": "assistant", "content": "The release is on Friday."})
    );
    assert_eq!(
        after[before.len() + 1],
        json!({"role": "user", "content": "Who owns the changelog?"})
    );
    assert_eq!(
        json_lines(&out).last().unwrap()["text"],
        "Alice owns the changelog."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_on_a_new_or_damaged_journal_says_what_to_do() {
    let project = project();
    let dir = project.path();
    let sim = OpenAiSim::openai().await.unwrap();
    let journals = tempfile::tempdir().unwrap();

    let path = journals.path().join("none.jsonl");
    let out = run(coder(
        &sim,
        dir,
        &["--session", path.to_str().unwrap(), "--resume"],
    ))
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let line = &json_lines(&out)[0];
    assert_eq!(line["kind"], "nothing_to_resume");
    assert!(
        line["message"]
            .as_str()
            .unwrap()
            .contains("holds no conversation; start one with `coder --session"),
        "{line}"
    );
    assert!(!path.exists(), "--resume creates no journal");

    // A file that is no journal is refused, and left as it was.
    let notes = dir.join("notes.txt");
    let before = std::fs::read(&notes).unwrap();
    let out = run(coder(
        &sim,
        dir,
        &["--session", notes.to_str().unwrap(), "hi"],
    ))
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let line = &json_lines(&out)[0];
    assert_eq!(line["kind"], "session");
    assert!(
        line["message"]
            .as_str()
            .unwrap()
            .contains("not a Halo session journal"),
        "{line}"
    );
    assert_eq!(std::fs::read(&notes).unwrap(), before);
    assert!(sim.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_text_output_names_the_session_and_how_to_resume() {
    let project = project();
    let dir = project.path();
    let journals = tempfile::tempdir().unwrap();
    let path = journals.path().join("s.jsonl");
    let session = path.to_str().unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script(script());

    let out = run(coder_text(
        &sim,
        dir,
        &["--session", session, "--max-steps", "1", TASK],
    ))
    .await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("session: {session} (new)\n")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("task: {TASK}\n")), "{stdout}");
    assert!(
        stdout.contains("→ read {\"path\":\"notes.txt\"}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("stopped: the model still wanted tools after 1 steps"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "the session {session} keeps every completed step: `--session {session} --resume` continues"
        )),
        "{stdout}"
    );

    let out = run(coder_text(&sim, dir, &["--session", session, "--resume"])).await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("session: {session} (restored 3 messages)\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains("task: (resuming the interrupted run)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\nThe release is on Friday.\n"), "{stdout}");
    assert!(stdout.contains("stats: 2 steps, 1 tool call,"), "{stdout}");
}
