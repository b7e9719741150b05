//! A tool call in flight when its worker dies (SIGKILL): the peer runs it again when its
//! tool is idempotent, and closes it as "may have run" otherwise — never a second run.

use std::time::Duration;

use durable::CallLine;
use halo_core::request::MAY_HAVE_RUN;

use crate::harness::{Restate, cluster, isolated, started, wait_for};
use crate::model::FakeModel;

/// The lines of `session`'s `call_id` in the calls file.
fn runs_of(calls: &std::path::Path, session: &str, call_id: &str) -> Vec<CallLine> {
    CallLine::read_all(calls)
        .expect("the calls file")
        .into_iter()
        .filter(|l| l.session == session && l.call_id == call_id)
        .collect()
}

#[test]
fn a_call_not_safe_to_repeat_is_not_run_again_after_its_worker_dies() {
    isolated(
        "inflight::a_call_not_safe_to_repeat_is_not_run_again_after_its_worker_dies",
        |server| async move {
            let restate = Restate::start(&server).await;
            let model = FakeModel::start().await;
            let calls = restate.dir.path().join("calls.tsv");
            let (mut workers, _balancer) = cluster(&restate, &model).await;

            // `send` holds for ten minutes: it is in flight when its worker dies.
            let id = restate
                .send_run("once", "steps=1 tool=send hold_ms=600000")
                .await;
            let line = started(&calls, "once", "call_1").await;
            let victim = workers
                .iter()
                .position(|w| w.proc.pid() == line.pid)
                .expect("the call ran in a worker");
            workers[victim].proc.kill();

            // The run finishes on the peer without running `send` again (a second run would
            // hold for ten minutes: it is caught as it starts).
            let output = tokio::select! {
                output = restate.attach(&restate.http, &id) => output.expect("it finishes"),
                () = wait_for("send to run again", Duration::from_secs(300), || async {
                    (runs_of(&calls, "once", "call_1").len() > 1).then_some(())
                }) => panic!("send ran again: {:?}", runs_of(&calls, "once", "call_1")),
            };
            assert_eq!(output["text"], "done: 1 tool results");
            assert_eq!(CallLine::read_all(&calls).unwrap().len(), 1);
            let last = model.messages("once").pop().expect("requests");
            assert_eq!(last[3]["role"], "tool");
            assert_eq!(last[3]["content"], MAY_HAVE_RUN);

            // Its start and its closing are one journaled step each.
            let journals = restate.run_journals().await;
            let journal = &journals[&id];
            assert_eq!(
                journal.names(),
                [
                    "start",
                    "model:1",
                    "started:call_1",
                    "tool:send:call_1",
                    "model:2"
                ]
            );
            assert!(journal.each_step_once(), "{journal:?}");
        },
    );
}

#[test]
fn an_idempotent_call_in_flight_runs_again_on_the_peer() {
    isolated(
        "inflight::an_idempotent_call_in_flight_runs_again_on_the_peer",
        |server| async move {
            let restate = Restate::start(&server).await;
            let model = FakeModel::start().await;
            let calls = restate.dir.path().join("calls.tsv");
            let (mut workers, _balancer) = cluster(&restate, &model).await;

            // Each `step` holds for 3 s: the first is in flight when its worker dies.
            let id = restate
                .send_run("again", "steps=2 tool=step hold_ms=3000")
                .await;
            let line = started(&calls, "again", "call_1").await;
            let victim = workers
                .iter()
                .position(|w| w.proc.pid() == line.pid)
                .expect("the call ran in a worker");
            let killed = workers[victim].proc.pid();
            workers[victim].proc.kill();
            let peer = workers[1 - victim].proc.pid();

            let output = restate
                .attach(&restate.http, &id)
                .await
                .expect("it finishes");
            assert_eq!(output["text"], "done: 2 tool results");

            // The call in flight ran twice, first on the dead worker; the next once.
            let pids = |call: &str| -> Vec<u32> {
                runs_of(&calls, "again", call)
                    .iter()
                    .map(|l| l.pid)
                    .collect()
            };
            assert_eq!(pids("call_1"), [killed, peer]);
            assert_eq!(pids("call_2"), [peer]);

            // The model was asked three times, never twice the same: the replay took the
            // first answer from the journal.
            let bodies = model.bodies("again");
            assert_eq!(bodies.len(), 3);
            assert!(bodies[0] != bodies[1] && bodies[1] != bodies[2]);
            let last = model.messages("again").pop().expect("requests");
            assert_eq!(last[3]["content"], "step 1 done");
            assert_eq!(last[5]["content"], "step 2 done");

            let journals = restate.run_journals().await;
            let journal = &journals[&id];
            assert_eq!(
                journal.names(),
                [
                    "start",
                    "model:1",
                    "tool:step:call_1",
                    "model:2",
                    "tool:step:call_2",
                    "model:3"
                ]
            );
            assert!(journal.each_step_once(), "{journal:?}");
        },
    );
}
