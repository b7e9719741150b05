//! Sessions through the JSONL file store: a journaled run restores in a new agent, a changed
//! prefix on resume is the one expected miss, and a run interrupted by a torn write resumes
//! from its last committed step.

use std::sync::Arc;

use halo_core::session::{DEFAULT_SESSION, JournalEvent, JournalOutcome, SessionStore};
use halo_core::testing::ScriptedModel;
use halo_core::{
    AssistantMessage, CacheVerdict, FinishReason, HaloAgent, HaloError, Message, ModelResponse,
    NoArgs, Tool, ToolError, ToolOutput, Usage,
};
use halo_stream::journal::JsonlStore;
use serde_json::json;

struct Count;

impl Tool for Count {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "count"
    }
    fn description(&self) -> &str {
        "Counts."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("1".into())
    }
}

fn answer(text: &str, input: u64, read: u64) -> ModelResponse {
    ModelResponse {
        id: None,
        message: AssistantMessage {
            text: text.into(),
            ..Default::default()
        },
        finish_reason: FinishReason::Stop,
        usage: Usage {
            input_tokens: Some(input),
            cache_read_tokens: Some(read),
            ..Default::default()
        },
        model: None,
        provider: None,
    }
}

/// The journal at `path`, opened as a new process would.
fn open(path: &std::path::Path) -> JsonlStore {
    JsonlStore::open(path).unwrap()
}

fn agent(model: &ScriptedModel, system: &str, store: &JsonlStore) -> HaloAgent {
    HaloAgent::builder(model.clone())
        .system(system)
        .tool(Count)
        .unwrap()
        .session(Arc::new(store.clone()))
        .build()
}

#[tokio::test]
async fn a_file_journal_restores_the_log_and_a_changed_prefix_is_one_expected_miss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let system = "x".repeat(12_000);

    let model = ScriptedModel::new()
        .tool_call("count", json!({}))
        .respond(answer("one", 3000, 0));
    let mut first = agent(&model, &system, &open(&path));
    first.generate_text("count once").await.unwrap();
    let before = first.log().to_vec();
    drop(first);
    let events = open(&path).load(DEFAULT_SESSION).await.unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            JournalEvent::User { .. } => "user",
            JournalEvent::Prefix { .. } => "prefix",
            JournalEvent::Step { .. } => "step",
            JournalEvent::StepOpened { .. } => "step_opened",
            JournalEvent::Call { .. } => "call",
            JournalEvent::Outcome { .. } => "outcome",
            _ => "other",
        })
        .collect();
    // The step with the call opens (and the call, not safe to run twice, is journaled as
    // started) before it runs; it is committed whole once its result is in.
    assert_eq!(
        kinds,
        [
            "user",
            "prefix",
            "step_opened",
            "call",
            "step",
            "step",
            "outcome"
        ]
    );

    // Same prefix, a new store on the same file (a new process): the log is back, and the
    // next call is judged against the journal's last one.
    let model = ScriptedModel::new().respond(answer("two", 3100, 2900));
    let mut again = agent(&model, &system, &open(&path));
    again.restore_session().await.unwrap();
    assert_eq!(again.log().to_vec(), before);
    again.generate_text("and again").await.unwrap();
    assert_eq!(
        again.cache_ledger().last().unwrap().verdict,
        CacheVerdict::Hit
    );
    assert_eq!(model.requests()[0].history.len(), before.len() + 1);
    drop(again);

    // A different prefix: exactly one expected miss, no bust.
    let model = ScriptedModel::new()
        .respond(answer("three", 3200, 0))
        .respond(answer("four", 3300, 3100));
    let mut changed = agent(&model, &"y".repeat(12_000), &open(&path));
    changed.generate_text("once more").await.unwrap();
    assert_eq!(
        changed.cache_ledger().last().unwrap().verdict,
        CacheVerdict::ExpectedMiss
    );
    changed.generate_text("and the last").await.unwrap();
    assert_eq!(
        changed.cache_ledger().last().unwrap().verdict,
        CacheVerdict::Hit
    );
    assert_eq!(changed.stats().prefix_fingerprint_changes, 1);
    assert_eq!(changed.stats().cache_busts, 0);
    let texts: Vec<String> = changed.log().to_vec().iter().map(Message::text).collect();
    drop(changed);
    assert_eq!(
        texts,
        [
            "count once",
            "",
            "1",
            "one",
            "and again",
            "two",
            "once more",
            "three",
            "and the last",
            "four"
        ]
    );
    // One journal: four runs, each with its outcome, and a prefix line per fingerprint.
    let events = open(&path).load(DEFAULT_SESSION).await.unwrap();
    let outcomes = events
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
    let prefixes = events
        .iter()
        .filter(|e| matches!(e, JournalEvent::Prefix { .. }))
        .count();
    assert_eq!((outcomes, prefixes), (4, 2));
}

// A process killed while writing a step leaves a torn line: the step is lost, the ones
// before are not, and `resume` makes the lost step's model call again.
#[tokio::test]
async fn a_torn_step_is_skipped_and_its_started_call_is_closed_as_may_have_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let model = ScriptedModel::new()
        .tool_call("count", json!({}))
        .tool_call("count", json!({}))
        .text("counted twice");
    let mut first = agent(&model, "You count.", &open(&path));
    first.generate_text("count twice").await.unwrap();
    let whole = first.log().to_vec();
    drop(first);

    // Cut the file in the middle of the second step's line (the outcome and answer go too).
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let second_step = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains(",\"event\":{\"type\":\"step\""))
        .nth(1)
        .unwrap()
        .0;
    let mut cut: String = lines[..second_step]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    cut.push_str(&lines[second_step][..40]);
    std::fs::write(&path, &cut).unwrap();

    let model = ScriptedModel::new()
        .tool_call("count", json!({}))
        .text("counted twice");
    let mut resumed = agent(&model, "You count.", &open(&path));
    resumed.restore_session().await.unwrap();
    assert_eq!(
        resumed.log().len(),
        3,
        "the user message and the first step"
    );
    let out = resumed.resume().await.unwrap();
    assert_eq!(out.text, "counted twice");
    // The second step was open in the journal, its call journaled as started: resumed, it is
    // closed as may-have-run (never run twice), and the model calls `count` again.
    let shape = |log: &[Message]| -> Vec<(&'static str, String)> {
        log.iter().map(|m| (m.role(), m.text())).collect()
    };
    let mut expected = shape(&whole);
    expected.insert(3, ("assistant", String::new()));
    expected.insert(4, ("tool", halo_core::request::MAY_HAVE_RUN.to_string()));
    assert_eq!(shape(&resumed.log().to_vec()), expected);
    model.assert_consumed();
    drop(resumed);
    // And the file holds every line whole again.
    let events = open(&path).load(DEFAULT_SESSION).await.unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().ends_with('\n'));
    assert!(matches!(
        events.last(),
        Some(JournalEvent::Outcome {
            outcome: JournalOutcome::Answered,
            ..
        })
    ));
    // Nothing to resume once answered.
    let mut done = agent(&ScriptedModel::new(), "You count.", &open(&path));
    assert!(matches!(
        done.resume().await,
        Err(HaloError::NothingToResume)
    ));
}
