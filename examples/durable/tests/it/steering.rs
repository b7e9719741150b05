//! Steering through the `steer` handler: a message enters the run in flight at its next
//! step boundary.

use serde_json::json;

use crate::harness::{Balancer, Restate, Worker, isolated, started};
use crate::model::FakeModel;

#[test]
fn steering_enters_at_the_next_step_boundary() {
    isolated(
        "steering::steering_enters_at_the_next_step_boundary",
        |server| async move {
            let restate = Restate::start(&server).await;
            let model = FakeModel::start().await;
            let dir = restate.dir.path().to_path_buf();
            let calls = dir.join("calls.tsv");
            let log = dir.join("workers.log");
            let worker = Worker::start(9081, &model.url, &calls, &log).await;
            let balancer = Balancer::start(vec![worker.port]).await;
            restate.register(&balancer.uri()).await;

            let id = restate
                .send_run("steer", "steps=3 tool=step hold_ms=1500")
                .await;
            started(&calls, "steer", "call_1").await;
            let (status, body) = restate
                .call(
                    &restate.http,
                    "steer",
                    "steer",
                    Some(json!({"text": "Also say hello."})),
                )
                .await;
            assert_eq!(status, 200, "{body}");
            let (status, body) = restate
                .call(&restate.http, "steer", "steer", Some(json!({"text": " "})))
                .await;
            assert_eq!(status, 400, "an empty steering message: {body}");
            let output = restate
                .attach(&restate.http, &id)
                .await
                .expect("it finishes");
            assert_eq!(output["text"], "done: 3 tool results");

            // The message entered after the first call's result, before the second model
            // call, once.
            let requests = model.messages("steer");
            assert_eq!(requests.len(), 4);
            let steering = json!({"role": "user", "content": "Also say hello."});
            assert!(!requests[0].contains(&steering));
            let second = &requests[1];
            assert_eq!(second.last(), Some(&steering), "{second:?}");
            assert_eq!(second[second.len() - 2]["role"], "tool");
            for later in &requests[1..] {
                assert_eq!(later.iter().filter(|m| **m == steering).count(), 1);
            }
            drop(worker);
        },
    );
}
