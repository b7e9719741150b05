//! kill -9 at pseudo-random moments: the coder runs a session of slow `bash` steps against
//! the fake and is killed (SIGKILL) 20 times; each time the session goes on with
//! `--session FILE --resume` (or the task again, when not even the task was journaled).
//! Every journal must load, every session must end with the model's final answer, no
//! committed step may be lost, duplicated or out of order, and no command may start a
//! second time: each command appends its step number to a file of its session when it
//! starts and to another when it finishes, and no number may be in either twice. A command
//! killed after it was journaled as started is closed with an error result saying it may
//! have run (the fake model then moves on). Kill moments are drawn over the time one
//! uninterrupted session takes on this machine.
//!
//! Kills land anywhere: during startup, a model call, a tool run, a journal write. A torn
//! line cannot come from SIGKILL alone (a `write` to a file completes or never starts), so
//! some kills also cut a copy of the journal's last line onto its end, as a crash in the
//! middle of a write would leave it; the next process must skip it and go on.

use std::io::Write as _;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use halo_core::request::MAY_HAVE_RUN;
use halo_core::session::{CallStatus, JournalEvent, JournalOutcome};
use serde_json::json;

use super::{coder, describe, journal, json_lines};

/// Kills in all.
const KILLS: usize = 20;
/// Kills per session before it is let run to its end.
const KILLS_PER_SESSION: usize = 4;
/// Tool steps per session; each runs `sleep` for `STEP_SLEEP`.
const STEPS: usize = 5;
const STEP_SLEEP: &str = "0.15";
/// Kill moments are drawn over the time one uninterrupted session works on this machine,
/// from its journal's first line to its end (measured first, so that kills land all
/// through a session however loaded the machine is, and shortened to any later whole
/// session that ended before its kill); the window is at least this.
const MIN_KILL_WINDOW_MS: u64 = 1_300;
/// How long an uninterrupted session may take before the test calls it hung.
const UNINTERRUPTED_LIMIT: Duration = Duration::from_secs(180);
const ANSWER: &str = "All five steps ran.";
const TASK: &str = "Run the five steps.";

/// The command of step `i` (from 0) of session `session`: it says which step it is and,
/// when it finishes, appends `i` to the session's file of finished steps.
fn command(session: usize, i: usize) -> String {
    format!(
        "sleep {STEP_SLEEP} && echo step {i} && echo {i} >> {}",
        finished(session)
    )
}

/// The file the commands of session `session` append their step numbers to.
fn finished(session: usize) -> String {
    format!("finished-{session}.txt")
}

fn script(session: usize) -> Vec<SimReply> {
    (0..STEPS)
        .map(|i| SimReply::tool_call("bash", json!({"command": command(session, i)})))
        .chain([SimReply::text(ANSWER)])
        .collect()
}

/// SplitMix64: a seeded sequence, so the kill moments are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Where a session's journal stands.
#[derive(Debug, PartialEq, Eq)]
enum Progress {
    /// Not even the task was journaled.
    Empty,
    /// This many steps committed, no answer yet (the last one still open when `open`: its
    /// command was journaled as started, and the next process closes it).
    Steps(usize, bool),
    /// The run answered.
    Answered,
}

/// Checks the journal's order and pairing and says where it stands.
fn check(session: usize, events: &[JournalEvent]) -> Progress {
    let Some(first) = events.first() else {
        return Progress::Empty;
    };
    assert!(
        matches!(first, JournalEvent::User { message, injected: false, .. } if message.text() == TASK),
        "the journal starts with the task: {events:#?}"
    );
    let mut steps = 0;
    let mut answered = false;
    let mut open = false;
    let mut ids = std::collections::HashSet::new();
    let mut last_ms = 0;
    for (i, event) in events.iter().enumerate() {
        let at_ms = match event {
            JournalEvent::Prefix { at_ms, .. }
            | JournalEvent::User { at_ms, .. }
            | JournalEvent::Step { at_ms, .. }
            | JournalEvent::StepOpened { at_ms, .. }
            | JournalEvent::Call { at_ms, .. }
            | JournalEvent::Outcome { at_ms, .. }
            | JournalEvent::CompactBoundary { at_ms, .. } => *at_ms,
            other => panic!("unexpected event {other:?}"),
        };
        assert!(at_ms >= last_ms, "event {i} is older than the one before");
        last_ms = at_ms;
        assert!(
            !answered,
            "nothing follows the answer's outcome: {events:#?}"
        );
        match event {
            JournalEvent::User { .. } => assert_eq!(i, 0, "one user message, first"),
            JournalEvent::Prefix { .. } => {}
            JournalEvent::StepOpened { assistant, .. } => {
                assert!(!open, "one step open at a time");
                assert_eq!(assistant.tool_calls.len(), 1, "{assistant:?}");
                open = true;
            }
            JournalEvent::Call { status, .. } => {
                assert!(open, "a started call belongs to the open step");
                assert_eq!(*status, CallStatus::Started);
            }
            JournalEvent::Step {
                assistant, results, ..
            } => {
                open = false;
                if steps < STEPS {
                    // Step `steps` of the script, whole: its one call and that call's result
                    // (or, for a command a kill cut off, the result that says it may have run).
                    assert_eq!(assistant.tool_calls.len(), 1, "{assistant:?}");
                    let call = &assistant.tool_calls[0];
                    assert_eq!(call.name, "bash");
                    assert_eq!(
                        call.arguments().unwrap(),
                        json!({"command": command(session, steps)}),
                        "step {steps} is the script's step {steps}: none lost or repeated"
                    );
                    assert!(ids.insert(call.id.clone()), "call id {} twice", call.id);
                    assert_eq!(results.len(), 1);
                    assert_eq!(results[0].tool_call_id, call.id);
                    if results[0].is_error {
                        assert_eq!(results[0].content, MAY_HAVE_RUN, "{:?}", results[0]);
                    } else {
                        assert!(
                            results[0].content.contains(&format!("step {steps}")),
                            "{:?}",
                            results[0]
                        );
                    }
                } else {
                    assert_eq!(steps, STEPS, "the answer comes after every step");
                    assert_eq!(assistant.text, ANSWER);
                    assert!(assistant.tool_calls.is_empty() && results.is_empty());
                }
                steps += 1;
            }
            JournalEvent::Outcome { outcome, .. } => {
                assert_eq!(outcome, &JournalOutcome::Answered, "{events:#?}");
                assert_eq!(steps, STEPS + 1, "answered after the last step");
                answered = true;
            }
            _ => {}
        }
    }
    if answered {
        Progress::Answered
    } else {
        assert!(
            steps <= STEPS,
            "an answer step without its outcome: {events:#?}"
        );
        Progress::Steps(steps, open)
    }
}

/// Commands of `session` that `what` (started, finished) more than once: each number in
/// its file past its first.
fn twice(project: &Path, what: &str, session: usize) -> usize {
    let text =
        std::fs::read_to_string(project.join(format!("{what}-{session}.txt"))).unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    text.lines().filter(|l| !seen.insert(l.to_string())).count()
}

/// Appends the first half of the journal's last line, without its newline: a torn write.
fn tear(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let last = text.lines().last().unwrap_or("{\"type\":\"halo_journal\"");
    let half = &last[..last.len() / 2];
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(half.as_bytes()).unwrap();
}

/// How one process ended.
enum End {
    /// Killed; what it wrote to stderr until then.
    Killed(Vec<u8>),
    Exited(Output),
}

/// Starts the coder and kills it after `kill_after`, unless it ends first.
async fn start(sim: &OpenAiSim, dir: &Path, args: &[&str], kill_after: Option<Duration>) -> End {
    let mut child = coder(sim, dir, args).spawn().expect("the coder starts");
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let read = tokio::spawn(async move {
        use tokio::io::AsyncReadExt as _;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let _ = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
        (out, err)
    });
    // A whole session takes seconds, but its first `bash` call has taken 36 s while other
    // tests were making and dropping sandboxes by the hundred; the limit only catches a
    // coder that hangs.
    let limit = kill_after.unwrap_or(UNINTERRUPTED_LIMIT);
    let status = tokio::select! {
        status = child.wait() => Some(status.unwrap()),
        _ = tokio::time::sleep(limit) => None,
    };
    let Some(status) = status else {
        child.kill().await.unwrap(); // SIGKILL, then reaped
        let (stdout, stderr) = read.await.unwrap();
        assert!(
            kill_after.is_some(),
            "the coder did not finish within {UNINTERRUPTED_LIMIT:?}; {} requests reached the fake; its stdout:\n{}\nits stderr:\n{}",
            sim.requests().len(),
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr),
        );
        return End::Killed(stderr);
    };
    let (stdout, stderr) = read.await.unwrap();
    End::Exited(Output {
        status,
        stdout,
        stderr,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_twenty_random_moments_loses_no_committed_step_and_runs_no_finished_command_twice()
 {
    let started = Instant::now();
    let project = tempfile::tempdir().unwrap();
    let journals = tempfile::tempdir().unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    let mut rng = Rng(0x4841_4C4F); // "HALO"
    let (mut kills, mut sessions, mut resumes, mut restarts) = (0, 0, 0, 0);
    let (mut tears, mut torn_reports, mut reruns, mut closed) = (0, 0, 0, 0);
    let mut restarted = 0;
    let mut killed_at = Vec::new();
    // One uninterrupted session first: when its journal gets its first line (the process
    // started and the run began) and when it ends, here and now. Kills land in between.
    let (first_line, mut kill_window) = {
        let path = journals.path().join("session-0.jsonl");
        let session = path.to_str().unwrap().to_string();
        sim.set_reply_script(script(0));
        let began = Instant::now();
        let args = ["--yes", "--session", session.as_str(), TASK];
        let watch = async {
            loop {
                if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
                    return began.elapsed().as_millis() as u64;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let (first_line, end) = tokio::join!(watch, start(&sim, project.path(), &args, None));
        match end {
            End::Exited(out) => assert!(out.status.success(), "{}", describe(&out)),
            End::Killed(_) => unreachable!("not killed"),
        }
        let all = began.elapsed().as_millis() as u64;
        (
            first_line,
            all.saturating_sub(first_line).max(MIN_KILL_WINDOW_MS),
        )
    };

    while kills < KILLS {
        sessions += 1;
        let script = script(sessions);
        let path = journals.path().join(format!("session-{sessions}.jsonl"));
        let session = path.to_str().unwrap().to_string();
        let mut kills_here = 0;
        loop {
            let events = journal(&path).await;
            let progress = check(sessions, &events);
            let steps = match progress {
                Progress::Answered => break,
                Progress::Empty => 0,
                // The open step is closed by the next process without a model call: the
                // model's next reply is the step after it.
                Progress::Steps(n, open) => n + usize::from(open),
            };
            if matches!(progress, Progress::Steps(_, true)) {
                closed += 1;
            }
            // The fake answers by the conversation's state: the script from the first step
            // not yet committed (a killed process may have used replies it never committed).
            // A killed process's last request may still be on its way to the fake: wait until
            // the fake has seen no new request for 30 ms.
            loop {
                let seen = sim.requests().len();
                tokio::time::sleep(Duration::from_millis(30)).await;
                if sim.requests().len() == seen {
                    break;
                }
            }
            sim.set_reply_script(script[steps..].iter().cloned());
            let args: Vec<&str> = if progress == Progress::Empty {
                if kills_here > 0 {
                    restarts += 1;
                }
                vec!["--yes", "--session", &session, TASK]
            } else {
                resumes += 1;
                vec!["--yes", "--session", &session, "--resume"]
            };
            let kill_after = (kills < KILLS && kills_here < KILLS_PER_SESSION)
                .then(|| Duration::from_millis(first_line + rng.below(kill_window)));
            let whole = progress == Progress::Empty;
            let began = Instant::now();
            let stderr = match start(&sim, project.path(), &args, kill_after).await {
                End::Killed(stderr) => {
                    kills += 1;
                    kills_here += 1;
                    // Every journal a kill leaves loads (and is in order).
                    let after = match check(sessions, &journal(&path).await) {
                        Progress::Empty => 0,
                        Progress::Steps(n, _) => n,
                        Progress::Answered => STEPS + 1,
                    };
                    killed_at.push((kill_after.unwrap().as_millis(), steps, after));
                    // A torn line is repaired by the next process; an answered session
                    // (killed after its answer was committed) has none.
                    if rng.below(4) == 0 && after <= STEPS && path.exists() {
                        tear(&path);
                        tears += 1;
                    }
                    stderr
                }
                End::Exited(out) => {
                    assert!(out.status.success(), "{}", describe(&out));
                    // A whole session that ended before its kill moment: the first one was
                    // slow (a cold start, a loaded machine), and kills drawn over its time
                    // would mostly land after the end. Draw them over this one's time.
                    if kill_after.is_some() && whole {
                        let took = began.elapsed().as_millis() as u64;
                        kill_window = kill_window
                            .min(took.saturating_sub(first_line).max(MIN_KILL_WINDOW_MS));
                    }
                    let lines = json_lines(&out);
                    let last = lines.last().expect("a finish line");
                    assert_eq!(last["type"], "finish", "{}", describe(&out));
                    assert_eq!(last["text"], ANSWER, "{}", describe(&out));
                    out.stderr
                }
            };
            if String::from_utf8_lossy(&stderr).contains("torn last line") {
                torn_reports += 1;
            }
        }
        // The finished session: every step once, in order, the answer last; and the file
        // ends with a whole line.
        let events = journal(&path).await;
        assert_eq!(check(sessions, &events), Progress::Answered);
        assert!(std::fs::read_to_string(&path).unwrap().ends_with('\n'));
        reruns += twice(project.path(), "finished", sessions);
        restarted += twice(project.path(), "started", sessions);
    }
    let elapsed = started.elapsed();
    eprintln!(
        "kill -9 (kills {first_line} ms + 0 to {kill_window} ms): {kills} kills over {sessions} sessions, {resumes} resumes, {restarts} restarts \
         with the task, {tears} torn lines added ({torn_reports} warnings), {closed} commands \
         closed as may-have-run, {reruns} finished commands run again, {restarted} started \
         commands started again, in {:.1} s; (killed \
         after ms, steps committed before, after): {killed_at:?}",
        elapsed.as_secs_f64()
    );
    assert_eq!(reruns, 0, "a finished command ran a second time");
    assert_eq!(restarted, 0, "a started command started a second time");
    assert_eq!(kills, KILLS);
    assert!(tears > 0, "the seed tears at least one line");
    assert!(torn_reports > 0, "a process warned of the torn line");
    assert!(resumes >= KILLS / 2, "most kills were resumed ({resumes})");
}
