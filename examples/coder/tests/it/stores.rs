//! Two coders on one `--session` — a JSONL file, a PostgreSQL database, a Redis server (real
//! servers started by the tests): the second is refused with the typed "in use" error while
//! the first runs, and the first's conversation is intact and restores in a third coder.

use std::time::{Duration, Instant};

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use halo_core::session::{JournalEvent, JournalOutcome, SessionStore};
use halo_stream::postgres::PostgresStore;
use halo_stream::redis::RedisStore;
use halo_stream::testing::{PostgresServer, RedisServer};
use serde_json::json;

use super::{coder, describe, journal, json_lines, run};

const TASK: &str = "Run the step that waits.";
const ANSWER: &str = "The step ran.";

/// A `bash` step that waits until the test creates `release` in the project folder, so the
/// first coder holds its session for as long as the test needs.
const WAIT: &str = "while [ ! -e release ]; do sleep 0.05; done; echo released";

/// Runs the first coder on `session` until it waits in its `bash` step, a second coder on the
/// same session (refused), lets the first finish, and returns the first's process id.
async fn second_coder_is_refused(session: &str, in_use: &str) -> u32 {
    let project = tempfile::tempdir().unwrap();
    let dir = project.path();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("bash", json!({"command": WAIT})),
        SimReply::text(ANSWER),
    ]);
    let first = coder(&sim, dir, &["--yes", "--session", session, TASK])
        .spawn()
        .expect("the first coder starts");
    let pid = first.id().unwrap();
    // Its first model call comes after it took the session; its step then waits.
    let since = Instant::now();
    while sim.requests().is_empty() {
        assert!(since.elapsed() < Duration::from_secs(60), "no model call");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let second = run(coder(&sim, dir, &["--session", session, "Another task."])).await;
    assert_eq!(second.status.code(), Some(1), "{}", describe(&second));
    let lines = json_lines(&second);
    assert_eq!(lines.len(), 1, "{}", describe(&second));
    assert_eq!(lines[0]["kind"], "session_in_use", "{}", describe(&second));
    let message = lines[0]["message"].as_str().unwrap();
    let expected = format!("session {in_use} is in use by process {pid}");
    assert!(message.starts_with(&expected), "{message}\nnot: {expected}");
    assert_eq!(
        sim.requests().len(),
        1,
        "the second coder made no model call"
    );

    std::fs::write(dir.join("release"), "").unwrap();
    let first = tokio::time::timeout(Duration::from_secs(60), first.wait_with_output())
        .await
        .expect("the first coder finishes")
        .unwrap();
    assert!(first.status.success(), "{}", describe(&first));
    assert_eq!(json_lines(&first).last().unwrap()["text"], ANSWER);

    // The session is free again at once (the first released its lease), and restores.
    std::fs::remove_file(dir.join(".agent/memory.md")).ok();
    sim.push_reply(SimReply::text("Still here."));
    let third = run(coder(&sim, dir, &["--session", session, "Are you there?"])).await;
    assert!(third.status.success(), "{}", describe(&third));
    let stderr = String::from_utf8_lossy(&third.stderr);
    assert!(
        stderr.contains(&format!("session: {session} (restored 4 messages)")),
        "{stderr}"
    );
    pid
}

/// The first coder's conversation, whole, then the third's turn: nothing of the second's.
fn assert_intact(events: &[JournalEvent]) {
    let users: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            JournalEvent::User { message, .. } => Some(message.text()),
            _ => None,
        })
        .collect();
    assert_eq!(users, [TASK, "Are you there?"], "{events:#?}");
    let steps = events
        .iter()
        .filter(|e| matches!(e, JournalEvent::Step { .. }))
        .count();
    let answered = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                JournalEvent::Outcome {
                    outcome: JournalOutcome::Answered,
                    ..
                }
            )
        })
        .count();
    assert_eq!((steps, answered), (3, 2), "{events:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_coder_on_one_session_file_is_refused_and_the_first_is_intact() {
    let journals = tempfile::tempdir().unwrap();
    let path = journals.path().join("s.jsonl");
    let session = path.to_str().unwrap();
    second_coder_is_refused(session, session).await;
    assert_intact(&journal(&path).await);
    assert!(!journals.path().join("s.jsonl.lock").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_coder_on_one_postgres_session_is_refused_and_the_first_is_intact() {
    let Some(server) = PostgresServer::for_test(
        "a_second_coder_on_one_postgres_session_is_refused_and_the_first_is_intact",
    ) else {
        return;
    };
    let url = server.url();
    second_coder_is_refused(&url, &url).await;
    let store = PostgresStore::connect(&url).await.unwrap();
    assert_intact(&store.load("default").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_coder_on_one_redis_session_is_refused_and_the_first_is_intact() {
    let Some(server) = RedisServer::for_test(
        "a_second_coder_on_one_redis_session_is_refused_and_the_first_is_intact",
    ) else {
        return;
    };
    let session = format!("{}?session=team-a", server.url());
    second_coder_is_refused(&session, &format!("team-a in {}", server.url())).await;
    let store = RedisStore::connect(&server.url()).await.unwrap();
    assert_intact(&store.load("team-a").await.unwrap());
    assert!(store.load("default").await.unwrap().is_empty());
}
