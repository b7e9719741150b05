//! The `workflow` binary killed (SIGKILL) between two steps: run again on the same session
//! file, it goes on at the next step and runs no finished one again; on the scripted model.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use halo_core::session::{JournalEvent, SessionStore};
use halo_core::workflow::WorkflowRecord;
use halo_stream::journal::JsonlStore;

fn workflow(session: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_workflow"));
    command.arg("--session").arg(session);
    command
}

#[test]
fn a_workflow_killed_between_two_steps_goes_on_at_the_next_and_redoes_no_finished_one() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("article.jsonl");

    // The first process: killed once the draft is saved, before the review starts.
    let mut first = workflow(&session)
        .args(["--wait-after", "write", "otters"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let waiting = line == "waiting after write";
        seen.push(line);
        if waiting {
            break;
        }
    }
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    assert!(seen.contains(&"saved write".to_string()), "{seen:?}");
    assert!(!seen.iter().any(|l| l.contains("review")), "{seen:?}");

    // The second process, on the same file.
    let second = workflow(&session).arg("otters").output().unwrap();
    let out = String::from_utf8(second.stdout).unwrap();
    assert!(
        second.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "resumed: biology, history, write", "{out}");
    assert!(lines.contains(&"ran: review, revise"), "{out}");
    for done in ["history", "biology", "write"] {
        assert!(!lines.contains(&format!("saved {done}").as_str()), "{out}");
    }
    // No agent of a finished step was asked again: only the reviewer's and the writer's
    // revision show.
    assert!(
        !out.contains("[historian]") && !out.contains("[biologist]"),
        "{out}"
    );
    assert!(
        out.contains("[reviewer]") && out.contains("[writer]"),
        "{out}"
    );
    assert!(out.contains("hunted for their fur until 1911"), "{out}");

    // The session file: each step's output once.
    let store = JsonlStore::open(&session).unwrap();
    let journal = futures::executor::block_on(store.load("article")).unwrap();
    let mut done: Vec<String> = journal
        .iter()
        .filter_map(|e| match e {
            JournalEvent::Workflow {
                record: WorkflowRecord::StepDone { step, .. },
                ..
            } => Some(step.clone()),
            _ => None,
        })
        .collect();
    done.sort();
    assert_eq!(done, ["biology", "history", "review", "revise", "write"]);
    drop(store); // one owner per file

    // A third run: all done, nothing runs.
    let third = workflow(&session).arg("otters").output().unwrap();
    let out = String::from_utf8(third.stdout).unwrap();
    assert!(
        third.status.success(),
        "{}",
        String::from_utf8_lossy(&third.stderr)
    );
    assert!(out.lines().any(|l| l == "ran: "), "{out}");
    assert!(!out.contains("saved "), "{out}");
}
