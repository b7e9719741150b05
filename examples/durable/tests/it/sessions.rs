//! A hundred sessions of ten tool steps each on two workers behind one deployment address;
//! one worker is killed (SIGKILL) in the middle and nothing is restarted. Three sessions in
//! four call the idempotent `step`, the fourth `send`, which is not safe to run twice.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use durable::{CallLine, Setup};
use futures::future::join_all;
use halo_core::request::MAY_HAVE_RUN;
use halo_core::{Message, request};

use crate::harness::{Balancer, Restate, Worker, isolated, wait_for};
use crate::model::FakeModel;

const SESSIONS: usize = 100;
const STEPS: usize = 10;
/// How long each tool call takes: calls are in flight when the worker dies.
const HOLD_MS: u64 = 50;
/// The worker is killed once this share of all tool calls has started.
const KILL_AT: usize = SESSIONS * STEPS * 2 / 5;

fn session(i: usize) -> String {
    format!("s{i:03}")
}

/// The tool session `i` calls.
fn tool(i: usize) -> &'static str {
    if i % 4 == 3 { "send" } else { "step" }
}

fn script(i: usize) -> String {
    format!("steps={STEPS} tool={} hold_ms={HOLD_MS}", tool(i))
}

/// The requests an uninterrupted run of each session sends, from the in-process driver
/// (`generate_text`) on the same agent: the reference the durable runs must match.
async fn uninterrupted(dir: &std::path::Path) -> Vec<Vec<Bytes>> {
    let model = FakeModel::start().await;
    let setup = Setup::new(&model.url, dir.join("reference-calls.tsv")).expect("a setup");
    let runs = (0..SESSIONS).map(|i| {
        let setup = setup.clone();
        async move {
            let mut agent = durable::agent(&session(i), &setup)
                .expect("the agent")
                .build();
            let result = agent.generate_text(script(i)).await.expect("the run");
            assert_eq!(result.text, format!("done: {STEPS} tool results"));
        }
    });
    join_all(runs).await;
    (0..SESSIONS).map(|i| model.bodies(&session(i))).collect()
}

/// What one session's calls show after the kill.
#[derive(Debug, Default)]
struct Calls {
    /// The call that ran twice (first on the killed worker): only an idempotent one may.
    repeated: Option<String>,
    /// The call closed as "may have run" (in flight on the killed worker, not safe to
    /// repeat): its number.
    closed: Option<usize>,
    /// Whether the session ran calls on both workers.
    carried_over: bool,
}

/// Checks the calls file's lines of session `i` (`killed`: the dead worker's pid) and the
/// results its last request carries.
fn check_calls(i: usize, lines: &[&CallLine], killed: u32, last: &[serde_json::Value]) -> Calls {
    let id = session(i);
    let mut pids: HashMap<String, Vec<u32>> = HashMap::new();
    for line in lines {
        assert_eq!(line.tool, tool(i), "{id}");
        pids.entry(line.call_id.clone()).or_default().push(line.pid);
    }
    let mut calls = Calls {
        carried_over: lines.iter().any(|l| l.pid == killed)
            && lines.iter().any(|l| l.pid != killed),
        ..Calls::default()
    };
    // The results the model read: each call's own, or "may have run" for at most one
    // `send` call, which started on the dead worker (or was only journaled as started
    // there: it never ran at all).
    let results: Vec<&serde_json::Value> = last.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(results.len(), STEPS, "{id}");
    for (k, result) in results.iter().enumerate() {
        let n = k + 1;
        let call = format!("call_{n}");
        let ran = pids.get(&call).cloned().unwrap_or_default();
        if result["content"] == MAY_HAVE_RUN {
            assert_eq!(tool(i), "send", "{id}: step {n} closed as may-have-run");
            assert!(calls.closed.is_none(), "{id}: two calls closed");
            assert!(
                ran.is_empty() || ran == [killed],
                "{id}: {call} ran in {ran:?}"
            );
            calls.closed = Some(n);
            continue;
        }
        let own = if tool(i) == "send" {
            format!("message {n} sent")
        } else {
            format!("step {n} done")
        };
        assert_eq!(result["content"], own, "{id}");
        match ran[..] {
            [_] => {}
            [first, second] => {
                // Only an idempotent call in flight at the kill runs again.
                assert_eq!(tool(i), "step", "{id}: {call} of `send` ran twice");
                assert!(calls.repeated.is_none(), "{id}: two calls ran twice");
                assert_eq!(
                    first, killed,
                    "{id}: {call} repeated, but not after the kill"
                );
                assert_ne!(second, killed);
                calls.repeated = Some(call);
            }
            _ => panic!("{id}: {call} ran in {ran:?}"),
        }
    }
    assert!(
        pids.keys().all(|c| c
            .strip_prefix("call_")
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| (1..=STEPS).contains(&n))),
        "{id}: calls the model never asked for: {pids:?}"
    );
    calls
}

/// Checks that the requests `got` of session `i` are the uninterrupted run's `want`, byte
/// for byte, but that one model call (the one in flight at the kill) may have been sent
/// twice, and that the result of the call `closed` reads "may have run" instead of the
/// call's own. Returns how many model calls were sent twice.
fn check_requests(i: usize, got: &[Bytes], want: &[Bytes], closed: Option<usize>) -> usize {
    let id = session(i);
    assert_eq!(want.len(), STEPS + 1);
    // The uninterrupted run with the closed call's result as the durable run has it.
    let want: Vec<Vec<u8>> = want
        .iter()
        .map(|body| match closed {
            Some(n) => {
                let own = serde_json::to_string(&format!("message {n} sent")).unwrap();
                let lost = serde_json::to_string(MAY_HAVE_RUN).unwrap();
                String::from_utf8_lossy(body)
                    .replace(&own, &lost)
                    .into_bytes()
            }
            None => body.to_vec(),
        })
        .collect();
    let mut next = 0;
    let mut repeats = 0;
    for (k, body) in got.iter().enumerate() {
        if next < want.len() && body[..] == want[next][..] {
            next += 1;
        } else if next > 0 && body[..] == want[next - 1][..] {
            repeats += 1;
        } else {
            panic!(
                "{id}: request {k} is not the uninterrupted run's request {next}:\n\
                 got  {}\nwant {}",
                String::from_utf8_lossy(body),
                want.get(next)
                    .map(|w| String::from_utf8_lossy(w))
                    .unwrap_or_default()
            );
        }
    }
    assert_eq!(next, want.len(), "{id}: requests missing");
    assert!(repeats <= 1, "{id}: {repeats} model calls sent twice");
    repeats
}

#[test]
fn hundred_sessions_survive_a_worker_kill() {
    isolated(
        "sessions::hundred_sessions_survive_a_worker_kill",
        |server| async move {
            let t0 = Instant::now();
            let restate = Restate::start(&server).await;
            let model = FakeModel::start().await;
            let dir = restate.dir.path().to_path_buf();
            let calls = dir.join("calls.tsv");
            let log = dir.join("workers.log");
            let mut workers = [
                Worker::start(9081, &model.url, &calls, &log).await,
                Worker::start(9082, &model.url, &calls, &log).await,
            ];
            let balancer = Balancer::start(workers.iter().map(|w| w.port).collect()).await;
            restate.register(&balancer.uri()).await;
            let ready = t0.elapsed();

            let started = Instant::now();
            let mut ids = Vec::new();
            for i in 0..SESSIONS {
                ids.push(restate.send_run(&session(i), &script(i)).await);
            }
            let sent = started.elapsed();

            // Kill the worker that carries the most connections once enough calls started.
            wait_for("tool calls to start", Duration::from_secs(240), || {
                let calls = calls.clone();
                async move { (CallLine::read_all(&calls).ok()?.len() >= KILL_AT).then_some(()) }
            })
            .await;
            let open: Vec<usize> = balancer
                .open
                .iter()
                .map(|n| n.load(std::sync::atomic::Ordering::SeqCst))
                .collect();
            let victim = usize::from(open[1] > open[0]);
            let killed = workers[victim].proc.pid();
            workers[victim].proc.kill();
            let killed_at = started.elapsed();
            let lines_at_kill = CallLine::read_all(&calls).expect("the calls file").len();
            eprintln!(
                "killed worker {victim} (pid {killed}, {open:?} connections open) after \
                 {lines_at_kill} tool calls, {:.1} s into the runs",
                killed_at.as_secs_f64()
            );

            // Every session finishes, seen from a client that did not start it.
            let client = reqwest::Client::new();
            let outputs = join_all(ids.iter().map(|id| restate.attach(&client, id))).await;
            let finished = started.elapsed();
            for (i, output) in outputs.iter().enumerate() {
                let output = output
                    .as_ref()
                    .unwrap_or_else(|e| panic!("{} did not finish: {e:?}", session(i)));
                assert_eq!(
                    output["text"],
                    format!("done: {STEPS} tool results"),
                    "{}",
                    session(i)
                );
                assert_eq!(output["steps"].as_array().map(Vec::len), Some(STEPS + 1));
            }
            assert_eq!(model.violations(), Vec::<String>::new());

            // No call that finished ran twice, and `send` never did; the requests after
            // recovery are the uninterrupted run's, byte for byte.
            let lines = CallLine::read_all(&calls).expect("the calls file");
            let reference = uninterrupted(&dir).await;
            let (mut carried_over, mut repeated_tools, mut closed, mut repeated_model) =
                (0, 0, 0, 0);
            for (i, want) in reference.iter().enumerate() {
                let id = session(i);
                let mine: Vec<&CallLine> = lines.iter().filter(|l| l.session == id).collect();
                let last = model.messages(&id).pop().expect("requests");
                let calls = check_calls(i, &mine, killed, &last);
                let repeats = check_requests(i, &model.bodies(&id), want, calls.closed);
                assert!(
                    repeats == 0 || (calls.repeated.is_none() && calls.closed.is_none()),
                    "{id}: a model call and a tool call both in flight at the kill: {calls:?}"
                );
                carried_over += usize::from(calls.carried_over);
                repeated_tools += usize::from(calls.repeated.is_some());
                closed += usize::from(calls.closed.is_some());
                repeated_model += repeats;
            }
            assert!(
                carried_over > 0,
                "no session was carried over from the killed worker"
            );

            // Every journal is valid: the history each session keeps is the task, ten
            // paired rounds and the answer; Restate's journal of each run has each step
            // once.
            for i in 0..SESSIONS {
                let id = session(i);
                let view = restate.view(&id).await;
                let messages: Vec<Message> =
                    serde_json::from_value(view["messages"].clone()).expect("messages");
                assert_eq!(messages.len(), 2 + 2 * STEPS, "{id}");
                assert!(request::is_valid(&messages), "{id}: an invalid history");
                assert!(view.get("paused").is_none());
            }
            let runs = restate
                .query("SELECT id, status FROM sys_invocation WHERE target_handler_name = 'run'")
                .await;
            assert_eq!(runs.len(), SESSIONS);
            assert!(runs.iter().all(|r| r["status"] == "completed"), "{runs:?}");
            let journaled = journal_steps(&restate, &ids).await;

            eprintln!(
                "durable: {SESSIONS} sessions x {STEPS} steps; server healthy in {:.2} s, ready \
                 (workers, balancer, registration) in {:.2} s; runs sent in {:.1} s, kill at \
                 {:.1} s, all finished at {:.1} s; {carried_over} sessions carried over; \
                 in flight at the kill: {repeated_tools} idempotent calls run again, {closed} \
                 `send` calls closed as may-have-run, {repeated_model} model calls sent \
                 again; connections made per worker {:?}; {journaled} journaled steps checked",
                restate.started_in.as_secs_f64(),
                ready.as_secs_f64(),
                sent.as_secs_f64(),
                killed_at.as_secs_f64(),
                finished.as_secs_f64(),
                balancer
                    .made
                    .iter()
                    .map(|n| n.load(std::sync::atomic::Ordering::SeqCst))
                    .collect::<Vec<_>>(),
            );
        },
    );
}

/// Restate's own journal of every run (`ids[i]` is session `i`'s): the journaled steps, in
/// order, are the run's start, then `model:1`, (`started:call_1` for `send`,)
/// `tool:TOOL:call_1`, ... `model:11`, each completed exactly once, and the invocation's
/// output. Returns how many steps were checked.
async fn journal_steps(restate: &Restate, ids: &[String]) -> usize {
    let journals = restate.run_journals().await;
    assert_eq!(journals.len(), SESSIONS, "a journal per run");
    let mut checked = 0;
    for (i, id) in ids.iter().enumerate() {
        let mut want = vec!["start".to_string()];
        for n in 1..=STEPS {
            want.push(format!("model:{n}"));
            if tool(i) == "send" {
                want.push(format!("started:call_{n}"));
            }
            want.push(format!("tool:{}:call_{n}", tool(i)));
        }
        want.push(format!("model:{}", STEPS + 1));
        let journal = &journals[id];
        assert_eq!(journal.names(), want, "{}: the journaled steps", session(i));
        assert!(journal.each_step_once(), "{}: {journal:?}", session(i));
        assert!(journal.has_output, "{}: no output", session(i));
        checked += journal.steps.len();
    }
    checked
}
