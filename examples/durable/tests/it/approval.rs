//! An approval pause waits inside its invocation across a restart of every worker, and is
//! answered from a client that did not start the run.

use std::time::Duration;

use durable::CallLine;
use serde_json::{Value, json};

use crate::harness::{Balancer, Restate, Worker, isolated, wait_for};
use crate::model::FakeModel;

const SCRIPT: &str = "steps=1 tool=transfer";

/// The paused run's calls waiting for approval, once `view` shows them.
async fn waiting(restate: &Restate, session: &str) -> Vec<String> {
    wait_for(
        &format!("{session} to pause for approval"),
        Duration::from_secs(60),
        || async {
            let view = restate.view(session).await;
            let approvals = view["paused"]["approvals"].as_array()?.clone();
            Some(
                approvals
                    .iter()
                    .filter_map(|a| a["call"]["id"].as_str().map(str::to_string))
                    .collect::<Vec<_>>(),
            )
        },
    )
    .await
}

#[test]
fn an_approval_pause_survives_a_restart_of_every_worker() {
    isolated(
        "approval::an_approval_pause_survives_a_restart_of_every_worker",
        |server| async move {
            let restate = Restate::start(&server).await;
            let model = FakeModel::start().await;
            let dir = restate.dir.path().to_path_buf();
            let calls = dir.join("calls.tsv");
            let log = dir.join("workers.log");
            let workers = [
                Worker::start(9081, &model.url, &calls, &log).await,
                Worker::start(9082, &model.url, &calls, &log).await,
            ];
            let balancer = Balancer::start(workers.iter().map(|w| w.port).collect()).await;
            restate.register(&balancer.uri()).await;

            let approved = restate.send_run("pay", SCRIPT).await;
            let rejected = restate.send_run("refuse", SCRIPT).await;
            assert_eq!(waiting(&restate, "pay").await, ["call_1"]);
            assert_eq!(waiting(&restate, "refuse").await, ["call_1"]);
            assert_eq!(
                CallLine::read_all(&calls).unwrap(),
                [],
                "a call ran unapproved"
            );

            // Every worker goes; new ones come up at the same address.
            let old: Vec<u32> = workers.iter().map(|w| w.proc.pid()).collect();
            drop(workers);
            let workers = [
                Worker::start(9081, &model.url, &calls, &log).await,
                Worker::start(9082, &model.url, &calls, &log).await,
            ];

            // Another client answers, and another attaches.
            let client = reqwest::Client::new();
            let (status, body) = restate
                .call(
                    &client,
                    "pay",
                    "approve",
                    Some(json!({"call_id": "call_9"})),
                )
                .await;
            assert_eq!(status, 404, "approving a call no run waits on: {body}");
            assert!(
                body.contains("no run of session pay waits on call call_9"),
                "{body}"
            );
            let (status, body) = restate
                .call(
                    &client,
                    "pay",
                    "approve",
                    Some(json!({"call_id": "call_1"})),
                )
                .await;
            assert_eq!(status, 200, "{body}");
            let (status, body) = restate
                .call(
                    &client,
                    "refuse",
                    "reject",
                    Some(json!({"call_id": "call_1", "reason": "not today"})),
                )
                .await;
            assert_eq!(status, 200, "{body}");

            let other = reqwest::Client::new();
            let paid = restate
                .attach(&other, &approved)
                .await
                .expect("pay finishes");
            assert_eq!(paid["text"], "done: 1 tool results");
            let refused = restate
                .attach(&other, &rejected)
                .await
                .expect("refuse finishes");
            assert_eq!(refused["text"], "done: 1 tool results");

            // The approved call ran once, on a new worker; the rejected one never ran, and
            // the model read the reason.
            let lines = CallLine::read_all(&calls).unwrap();
            assert_eq!(lines.len(), 1, "{lines:?}");
            assert_eq!(
                (lines[0].session.as_str(), lines[0].tool.as_str()),
                ("pay", "transfer")
            );
            let new: Vec<u32> = workers.iter().map(|w| w.proc.pid()).collect();
            assert!(new.contains(&lines[0].pid) && !old.contains(&lines[0].pid));
            let last: Value =
                serde_json::from_slice(model.bodies("refuse").last().unwrap()).unwrap();
            let result = &last["messages"].as_array().unwrap()[3];
            assert_eq!(result["role"], "tool");
            assert!(
                result["content"].as_str().unwrap().contains("not today"),
                "{result}"
            );
            let paid_result: Value =
                serde_json::from_slice(model.bodies("pay").last().unwrap()).unwrap();
            assert_eq!(
                paid_result["messages"][3]["content"],
                "transferred 100 cents"
            );
            assert!(restate.view("pay").await.get("paused").is_none());
            drop(balancer);
        },
    );
}

#[test]
fn a_paused_run_cancelled_while_it_waits_leaves_the_session_usable() {
    isolated(
        "approval::a_paused_run_cancelled_while_it_waits_leaves_the_session_usable",
        |server| async move {
            let restate = Restate::start(&server).await;
            let model = FakeModel::start().await;
            let dir = restate.dir.path().to_path_buf();
            let calls = dir.join("calls.tsv");
            let worker = Worker::start(9081, &model.url, &calls, &dir.join("workers.log")).await;
            let balancer = Balancer::start(vec![worker.port]).await;
            restate.register(&balancer.uri()).await;

            let paused = restate.send_run("undo", SCRIPT).await;
            assert_eq!(waiting(&restate, "undo").await, ["call_1"]);
            restate.cancel(&paused).await;
            let ended = restate.attach(&restate.http, &paused).await;
            assert!(ended.is_err(), "a cancelled run gives no result: {ended:?}");

            // The session shows no paused run and keeps its history as of its last finished
            // run (none): the next run starts from there, and nothing ran.
            let view = restate.view("undo").await;
            assert!(view.get("paused").is_none(), "{view}");
            assert_eq!(view["messages"], json!([]));
            let next = restate.send_run("undo", "steps=1 tool=step").await;
            let output = restate
                .attach(&restate.http, &next)
                .await
                .expect("it finishes");
            assert_eq!(output["text"], "done: 1 tool results");
            let lines = CallLine::read_all(&calls).unwrap();
            assert_eq!(
                lines.iter().map(|l| l.tool.as_str()).collect::<Vec<_>>(),
                ["step"]
            );
            let (status, body) = restate
                .call(
                    &restate.http,
                    "undo",
                    "approve",
                    Some(json!({"call_id": "call_1"})),
                )
                .await;
            assert_eq!(status, 404, "{body}");
        },
    );
}
