//! The JSONL file itself: its exact bytes, torn and damaged lines, formats 1 and 2, the
//! owner lock.

use halo_core::session::{CallStatus, DEFAULT_SESSION, JournalOutcome};
use halo_core::workflow::WorkflowRecord;
use halo_core::{
    AssistantMessage, Fingerprint, FinishReason, Message, ToolCall, ToolResult, Usage,
};

use super::*;

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

fn every_variant() -> Vec<JournalEvent> {
    let call = ToolCall::new("call_1", "read", r#"{"path":"src/main.rs"}"#);
    vec![
        JournalEvent::Prefix {
            fingerprint: Fingerprint([7; 32]),
            prefix_bytes: 4210,
            at_ms: 1,
        },
        JournalEvent::User {
            message: Message::user("Fix the bug"),
            injected: false,
            at_ms: 2,
        },
        JournalEvent::Step {
            assistant: AssistantMessage {
                text: "Looking.".into(),
                tool_calls: vec![call.clone()],
                ..Default::default()
            },
            results: vec![ToolResult::ok(&call, "fn main() {}\n")],
            finish_reason: FinishReason::ToolCalls,
            usage: Usage {
                input_tokens: Some(1200),
                cache_read_tokens: Some(1024),
                output_tokens: Some(12),
                ..Default::default()
            },
            at_ms: 3,
        },
        JournalEvent::User {
            message: Message::user("also the tests"),
            injected: true,
            at_ms: 4,
        },
        JournalEvent::CompactBoundary {
            history: vec![
                Message::user("fix the bug"),
                Message::user("also the tests"),
            ],
            injected: vec![1],
            discardable: vec![],
            reason: Some("a compaction replaced 2 messages by the model's summary".into()),
            at_ms: 5,
        },
        JournalEvent::Outcome {
            outcome: JournalOutcome::Error {
                message: "rate limited".into(),
            },
            at_ms: 6,
        },
        JournalEvent::Outcome {
            outcome: JournalOutcome::MaxStepsReached,
            at_ms: 7,
        },
        JournalEvent::Outcome {
            outcome: JournalOutcome::Answered,
            at_ms: 8,
        },
        JournalEvent::StepOpened {
            assistant: AssistantMessage {
                tool_calls: vec![call.clone()],
                ..Default::default()
            },
            finish_reason: FinishReason::ToolCalls,
            usage: Usage::default(),
            at_ms: 9,
        },
        JournalEvent::Call {
            call_id: call.id.to_string(),
            status: CallStatus::Started,
            at_ms: 10,
        },
        JournalEvent::Call {
            call_id: call.id.to_string(),
            status: CallStatus::AwaitingApproval {
                reason: "it runs commands".into(),
            },
            at_ms: 11,
        },
        JournalEvent::Call {
            call_id: call.id.to_string(),
            status: CallStatus::Approved,
            at_ms: 12,
        },
        JournalEvent::ToolResult {
            result: ToolResult::ok(&call, "fn main() {}\n"),
            at_ms: 13,
        },
        JournalEvent::Outcome {
            outcome: JournalOutcome::Discarded,
            at_ms: 14,
        },
        JournalEvent::Handoff {
            from: Some("triage".into()),
            to: "billing".into(),
            at_ms: 15,
        },
        JournalEvent::Workflow {
            record: WorkflowRecord::StepDone {
                step: "research".into(),
                output: serde_json::json!({"facts": ["otters hold hands"]}),
            },
            at_ms: 16,
        },
        JournalEvent::Custom {
            kind: "halo.part".into(),
            data: serde_json::json!({"type": "text-delta", "id": "text-1", "delta": "ünï ✓"}),
            at_ms: 17,
        },
    ]
}

fn store() -> (tempfile::TempDir, JsonlStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::open(dir.path().join("s.jsonl")).unwrap();
    (dir, store)
}

/// Closes `store` and opens its file again, as the next process would.
fn reopen(store: JsonlStore) -> JsonlStore {
    let path = store.path().to_owned();
    drop(store);
    JsonlStore::open(path).unwrap()
}

/// Appends `events` to the default session at its end.
fn add(store: &JsonlStore, events: &[JournalEvent]) -> Result<u64, SessionError> {
    let at = block_on(store.load(DEFAULT_SESSION))?.len() as u64;
    block_on(store.append(Append::new(DEFAULT_SESSION, at, events, 100)))
}

fn load(store: &JsonlStore) -> Result<Vec<JournalEvent>, SessionError> {
    block_on(store.load(DEFAULT_SESSION))
}

/// The line of `event` as entry `seq` of the default session, appended at 100 ms.
fn line_of(seq: u64, event: &JournalEvent) -> String {
    format!(
        "{{\"session\":\"default\",\"seq\":{seq},\"at_ms\":100,\"event\":{}}}\n",
        serde_json::to_string(event).unwrap()
    )
}

const HEADER: &str = "{\"type\":\"halo_journal\",\"version\":2}\n";
const HEADER_1: &str = "{\"type\":\"halo_journal\",\"version\":1}\n";

#[test]
fn every_event_round_trips_and_each_append_adds_whole_lines() {
    let (_dir, store) = store();
    let events = every_variant();
    assert_eq!(add(&store, &events[..3]).unwrap(), 3);
    assert_eq!(add(&store, &events[3..]).unwrap(), events.len() as u64);
    add(&store, &[]).unwrap();
    assert_eq!(load(&store).unwrap(), events);
    let text = std::fs::read_to_string(store.path()).unwrap();
    let expected: String = std::iter::once(HEADER.to_string())
        .chain(events.iter().enumerate().map(|(i, e)| line_of(i as u64, e)))
        .collect();
    assert_eq!(text, expected);
}

#[test]
fn a_missing_or_empty_file_is_an_empty_session() {
    let (_dir, store) = store();
    assert_eq!(load(&store).unwrap(), vec![]);
    // Neither an empty append nor a delete makes a file.
    assert_eq!(
        block_on(store.append(Append::new("s", 0, &[], 1))).unwrap(),
        0
    );
    block_on(store.delete("s")).unwrap();
    assert!(!store.path().exists());
    std::fs::write(store.path(), "").unwrap();
    assert_eq!(load(&store).unwrap(), vec![]);
    std::fs::write(store.path(), HEADER).unwrap();
    assert_eq!(load(&store).unwrap(), vec![]);
    assert_eq!(block_on(store.list()).unwrap(), vec![]);
    // An empty file gets its header with the first events.
    std::fs::write(store.path(), "").unwrap();
    let events = every_variant();
    add(&store, &events[..1]).unwrap();
    let text = std::fs::read_to_string(store.path()).unwrap();
    assert_eq!(text, format!("{HEADER}{}", line_of(0, &events[0])));
}

// A process killed in the middle of its write leaves a line without its newline.
#[test]
fn a_torn_last_line_is_skipped_and_removed_before_the_next_append() {
    let events = every_variant();
    for cut in [1, 10, line_of(2, &events[2]).len() - 1] {
        let (_dir, store) = store();
        add(&store, &events[..2]).unwrap();
        let whole = std::fs::read(store.path()).unwrap();
        let mut torn = whole.clone();
        torn.extend_from_slice(&line_of(2, &events[2]).as_bytes()[..cut]);
        std::fs::write(store.path(), &torn).unwrap();

        assert_eq!(load(&store).unwrap(), events[..2], "cut at {cut}");
        // The next process appends after truncating the torn line.
        let again = reopen(store);
        add(&again, &events[3..4]).unwrap();
        let mut expected = whole.clone();
        expected.extend_from_slice(line_of(2, &events[3]).as_bytes());
        assert_eq!(
            std::fs::read(again.path()).unwrap(),
            expected,
            "cut at {cut}"
        );
        assert_eq!(
            load(&again).unwrap(),
            [&events[..2], &events[3..4]].concat()
        );
    }
}

#[test]
fn a_last_line_that_is_not_json_is_torn_too() {
    let (_dir, store) = store();
    let events = every_variant();
    add(&store, &events[..1]).unwrap();
    let mut bytes = std::fs::read(store.path()).unwrap();
    bytes.extend_from_slice(b"\0\0\0\0\n");
    std::fs::write(store.path(), &bytes).unwrap();
    assert_eq!(load(&store).unwrap(), events[..1]);
    let again = reopen(store);
    add(&again, &events[1..2]).unwrap();
    assert_eq!(load(&again).unwrap(), events[..2]);
}

// A cut first write: the header itself is torn, so the journal holds nothing yet.
#[test]
fn a_torn_header_is_an_empty_session_and_is_rewritten() {
    let (_dir, store) = store();
    std::fs::write(store.path(), &HEADER.as_bytes()[..12]).unwrap();
    assert_eq!(load(&store).unwrap(), vec![]);
    let events = every_variant();
    add(&store, &events[..1]).unwrap();
    assert_eq!(
        std::fs::read_to_string(store.path()).unwrap(),
        format!("{HEADER}{}", line_of(0, &events[0]))
    );
}

#[test]
fn a_bad_line_before_the_end_is_corrupt_with_its_line_number() {
    let (_dir, store) = store();
    let events = every_variant();
    let text = format!(
        "{HEADER}{}{{\"session\":\"default\",\"oops\n{}",
        line_of(0, &events[0]),
        line_of(1, &events[1])
    );
    std::fs::write(store.path(), &text).unwrap();
    let err = load(&store).unwrap_err();
    let SessionError::Corrupt {
        entry, ref message, ..
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(entry, 3);
    assert!(message.contains("line 3"), "{message}");
    assert!(err.to_string().contains("s.jsonl"), "{err}");
    // Appending does not touch a damaged journal either.
    assert!(matches!(
        block_on(store.append(Append::new(DEFAULT_SESSION, 2, &events[..1], 1))),
        Err(SessionError::Corrupt { entry: 3, .. })
    ));
    assert_eq!(std::fs::read_to_string(store.path()).unwrap(), text);
}

// A line lost or written twice (by hand, or by a tool that copied lines) is found, not
// passed over: the session's sequence numbers must count up from 0.
#[test]
fn an_entry_out_of_its_sessions_order_is_corrupt() {
    let (_dir, store) = store();
    let events = every_variant();
    let text = format!(
        "{HEADER}{}{}{}",
        line_of(0, &events[0]),
        line_of(1, &events[1]),
        line_of(1, &events[2])
    );
    std::fs::write(store.path(), &text).unwrap();
    let err = load(&store).unwrap_err();
    assert!(
        matches!(&err, SessionError::Corrupt { entry: 4, message, .. } if message.contains("missing or repeated")),
        "{err:?}"
    );
}

// An event type this version does not know is kept for a person to look at.
#[test]
fn an_unknown_event_on_the_last_line_is_corrupt_not_torn() {
    let (_dir, store) = store();
    let text = format!(
        "{HEADER}{{\"session\":\"default\",\"seq\":0,\"at_ms\":1,\"event\":{{\"type\":\"hologram\",\"at_ms\":1}}}}\n"
    );
    std::fs::write(store.path(), &text).unwrap();
    assert!(matches!(
        load(&store),
        Err(SessionError::Corrupt { entry: 2, .. })
    ));
}

#[test]
fn a_newer_format_is_a_typed_error_and_is_not_appended_to() {
    let (_dir, store) = store();
    let text = "{\"type\":\"halo_journal\",\"version\":3}\n{\"type\":\"teleport\"}\n";
    std::fs::write(store.path(), text).unwrap();
    let err = load(&store).unwrap_err();
    assert_eq!(
        err,
        SessionError::NewerFormat {
            location: store.path().display().to_string(),
            found: 3,
            supported: 2,
        }
    );
    assert!(err.to_string().contains("newer Halo"), "{err}");
    assert!(matches!(
        block_on(store.append(Append::new(DEFAULT_SESSION, 0, &every_variant()[..1], 1))),
        Err(SessionError::NewerFormat { found: 3, .. })
    ));
    assert_eq!(std::fs::read_to_string(store.path()).unwrap(), text);
}

// `--session README.md` must not append to (or truncate) a file that is no journal.
#[test]
fn a_file_that_is_no_journal_is_refused_and_left_alone() {
    for text in ["# notes\nsome text\n", "no newline at all", "{\"a\":1}\n"] {
        let (_dir, store) = store();
        std::fs::write(store.path(), text).unwrap();
        let err = load(&store).unwrap_err();
        assert!(
            matches!(&err, SessionError::Corrupt { entry: 1, message, .. } if message.contains("not a Halo session journal")),
            "{text:?}: {err:?}"
        );
        assert!(add(&store, &every_variant()[..1]).is_err());
        assert!(
            block_on(store.append(Append::new(DEFAULT_SESSION, 0, &every_variant()[..1], 1)))
                .is_err()
        );
        assert_eq!(std::fs::read_to_string(store.path()).unwrap(), text);
    }
}

#[test]
fn blank_lines_are_ignored() {
    let (_dir, store) = store();
    let events = every_variant();
    let text = format!(
        "{HEADER}\n{}\n{}",
        line_of(0, &events[0]),
        line_of(1, &events[1])
    );
    std::fs::write(store.path(), text).unwrap();
    assert_eq!(load(&store).unwrap(), events[..2]);
}

// Journals written before sessions were numbered hold bare events of one conversation.
#[test]
fn a_format_1_journal_is_the_default_session_and_is_rewritten_before_the_first_append() {
    let (_dir, store) = store();
    let events = every_variant();
    let v1: String = std::iter::once(HEADER_1.to_string())
        .chain(
            events[..3]
                .iter()
                .map(|e| format!("{}\n", serde_json::to_string(e).unwrap())),
        )
        .collect();
    std::fs::write(store.path(), &v1).unwrap();
    assert_eq!(load(&store).unwrap(), events[..3]);
    let list = block_on(store.list()).unwrap();
    assert_eq!(
        list,
        [SessionInfo {
            id: "default".into(),
            updated_ms: 3,
            steps: 1,
            entries: 3
        }]
    );
    assert_eq!(
        std::fs::read_to_string(store.path()).unwrap(),
        v1,
        "read only"
    );
    add(&store, &events[3..4]).unwrap();
    assert_eq!(load(&store).unwrap(), events[..4]);
    let text = std::fs::read_to_string(store.path()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], HEADER.trim_end());
    assert_eq!(lines.len(), 5);
    assert!(
        lines[1].starts_with("{\"session\":\"default\",\"seq\":0,\"at_ms\":1,\"event\":"),
        "{}",
        lines[1]
    );
    assert_eq!(lines[4], line_of(3, &events[3]).trim_end());
}

#[test]
fn a_missing_folder_is_an_io_error_that_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = JsonlStore::open(dir.path().join("nope/s.jsonl")).unwrap_err();
    assert!(
        matches!(&err, SessionError::Io { location, message } if location.ends_with("nope/s.jsonl") && message.contains("cannot open the lock file")),
        "{err:?}"
    );
}

// Two processes on one journal used to interleave their conversations in it, silently.
#[test]
fn a_second_opener_is_refused_with_the_owners_process_id() {
    let (_dir, store) = store();
    let path = store.path().to_owned();
    let err = JsonlStore::open(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "session {} is in use by process {}; wait until it finishes, or use another session",
            path.display(),
            std::process::id()
        )
    );
    // A clone shares the ownership; closing the last one frees the file and removes the
    // lock file.
    let clone = store.clone();
    drop(store);
    assert!(JsonlStore::open(&path).is_err());
    let lock = clone.lock_path();
    assert!(lock.exists());
    drop(clone);
    assert!(!lock.exists());
    let again = JsonlStore::open(&path).unwrap();
    assert_eq!(
        std::fs::read_to_string(again.lock_path()).unwrap(),
        format!("{}\n", std::process::id())
    );
}

// A killed owner leaves its lock file, unlocked: the next opener takes it.
#[test]
fn the_lock_file_of_a_killed_owner_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(owner::lock_path(&path), "4194304\n").unwrap();
    let store = JsonlStore::open(&path).unwrap();
    assert_eq!(
        std::fs::read_to_string(store.lock_path()).unwrap(),
        format!("{}\n", std::process::id())
    );
}

#[test]
fn delete_rewrites_the_file_without_the_session() {
    let (_dir, store) = store();
    let events = every_variant();
    block_on(store.append(Append::new("a", 0, &events[..2], 5))).unwrap();
    block_on(store.append(Append::new("b", 0, &events[2..3], 6))).unwrap();
    block_on(store.append(Append::new("a", 2, &events[3..4], 7))).unwrap();
    block_on(store.delete("a")).unwrap();
    let text = std::fs::read_to_string(store.path()).unwrap();
    assert_eq!(
        text,
        format!(
            "{HEADER}{{\"session\":\"b\",\"seq\":0,\"at_ms\":6,\"event\":{}}}\n",
            serde_json::to_string(&events[2]).unwrap()
        )
    );
    block_on(store.append(Append::new("b", 1, &events[3..4], 8))).unwrap();
    assert_eq!(block_on(store.load("b")).unwrap(), events[2..4]);
    assert!(block_on(store.load("a")).unwrap().is_empty());
    assert!(
        !store
            .path()
            .with_file_name(".s.jsonl.halo-rewrite")
            .exists()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_inside_tokio_run_on_the_blocking_pool_and_clones_share_the_file() {
    let (_dir, store) = store();
    let events = every_variant();
    let clone = store.clone();
    let (a, b) = tokio::join!(
        store.append(Append::new("one", 0, &events[..4], 1)),
        clone.append(Append::new("two", 0, &events[4..], 2))
    );
    assert_eq!((a.unwrap(), b.unwrap()), (4, events.len() as u64 - 4));
    assert_eq!(store.load("one").await.unwrap(), events[..4]);
    assert_eq!(clone.load("two").await.unwrap(), events[4..]);
}
