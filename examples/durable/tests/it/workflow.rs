//! A workflow whose worker dies (SIGKILL) in the middle of a step goes on at that step on
//! the peer: the finished step is not run again, the step in flight runs again from its
//! start, and each workflow step is one journaled step.

use durable::CallLine;
use serde_json::json;

use crate::harness::{Restate, cluster, isolated, started};
use crate::model::FakeModel;

#[test]
fn a_workflow_whose_worker_dies_goes_on_at_the_step_it_was_in() {
    isolated(
        "workflow::a_workflow_whose_worker_dies_goes_on_at_the_step_it_was_in",
        |server| async move {
            let restate = Restate::start(&server).await;
            let model = FakeModel::start().await;
            let calls = restate.dir.path().join("calls.tsv");
            let (mut workers, _balancer) = cluster(&restate, &model).await;

            // `write`'s tool call holds for 3 s: the worker dies while it runs, after
            // `research` has finished.
            let input = json!({"topic": "otters", "hold_ms": 3000});
            let id = restate.send_workflow("article", &input).await;
            let line = started(&calls, "article.write", "call_1").await;
            let victim = workers
                .iter()
                .position(|w| w.proc.pid() == line.pid)
                .expect("the step ran in a worker");
            let killed = workers[victim].proc.pid();
            workers[victim].proc.kill();
            let peer = workers[1 - victim].proc.pid();

            let state = restate
                .attach(&restate.http, &id)
                .await
                .expect("the workflow finishes");
            assert_eq!(state["workflow"], "article");
            assert_eq!(state["input"], input);
            for step in ["research", "write", "review"] {
                assert_eq!(state["outputs"][step], "done: 1 tool results", "{state}");
            }

            // Where each step's tool call ran: `research` once, on the worker that died;
            // `write` there and again on the peer; `review` on the peer.
            let pids = |session: &str| -> Vec<u32> {
                CallLine::read_all(&calls)
                    .expect("the calls file")
                    .into_iter()
                    .filter(|l| l.session == session)
                    .map(|l| l.pid)
                    .collect()
            };
            assert_eq!(pids("article.research"), [killed]);
            assert_eq!(pids("article.write"), [killed, peer]);
            assert_eq!(pids("article.review"), [peer]);

            // The model: two requests for `research` (the call, the answer), none repeated;
            // `write`'s first request twice (the step ran again from its start), then its
            // answer; `review`'s two, built on `write`'s output.
            assert_eq!(model.bodies("article.research").len(), 2);
            let write = model.bodies("article.write");
            assert_eq!(write.len(), 3);
            assert_eq!(write[0], write[1]);
            let review = model.messages("article.review");
            assert_eq!(review.len(), 2);
            assert_eq!(
                review[0][1]["content"],
                "steps=1 tool=step hold_ms=0 review: done: 1 tool results"
            );
            assert!(model.violations().is_empty(), "{:?}", model.violations());

            // One journaled step per workflow step, each completed once.
            let journals = restate.run_journals().await;
            let journal = &journals[&id];
            assert_eq!(
                journal.names(),
                ["step:research", "step:write", "step:review"]
            );
            assert!(journal.each_step_once(), "{journal:?}");

            // Run again on the same key and input: the saved state, and nothing runs.
            let again = restate.send_workflow("article", &input).await;
            let state_again = restate
                .attach(&restate.http, &again)
                .await
                .expect("the second run finishes");
            assert_eq!(state_again, state);
            assert_eq!(CallLine::read_all(&calls).expect("the calls file").len(), 4);

            // Another input on the same key is refused with what the key holds.
            let other = restate
                .send_workflow("article", &json!({"topic": "stoats"}))
                .await;
            let (status, text) = restate
                .attach(&restate.http, &other)
                .await
                .expect_err("another input is refused");
            assert!(status >= 400, "{status} {text}");
            assert!(text.contains("holds the workflow `article`"), "{text}");
        },
    );
}
