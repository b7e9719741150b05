//! Two gateways on one PostgreSQL store (a real server started for the test), as two
//! processes would be: a browser session of one is valid on the other; a run started
//! through one is followed, steered and approved through the other, and finishes.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use halo_core::session::SessionStore;
use halo_core::testing::ScriptedModel;
use halo_stream::postgres::PostgresStore;
use halo_stream::testing::PostgresServer;
use serde_json::{Value, json};

use super::approvals::Deploy;
use super::harness::*;

async fn gateway(url: &str, model: Paced, runs: &Deploy) -> Server {
    let store: Arc<dyn SessionStore> = Arc::new(PostgresStore::connect(url).await.unwrap());
    let dir = temp();
    let tool = runs.clone();
    let build = move |b: halo_core::HaloAgentBuilder| b.tool(tool.clone()).unwrap();
    let builder = builder(store, model, &dir, build)
        .shared(true)
        .poll_interval(Duration::from_millis(50));
    Server::start(builder, dir.clone()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_on_one_gateway_is_steered_and_approved_through_another_and_finishes() {
    let Some(server) = PostgresServer::for_test(
        "a_run_started_on_one_gateway_is_steered_and_approved_through_another_and_finishes",
    ) else {
        return;
    };
    let url = server.url();
    // Both gateways' agents read one script, as one model service would answer them.
    let scripted = ScriptedModel::new()
        .text(words(20))
        .tool_call("deploy", json!({"target": "prod"}))
        .text("Deployed.");
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut model = Paced::new(scripted.clone(), Duration::from_millis(5));
    model.gate = Some(gate.clone());
    let runs = Deploy::default();
    let a = gateway(&url, model.clone(), &runs).await;
    let b = gateway(&url, model, &runs).await;

    // Logged in on A; the cookie works on B (the session is in the store).
    let on_a = a.login("ann").await;
    let mut on_b = Client::new(&b.url);
    on_b.cookie = on_a.cookie.clone();
    assert_eq!(
        on_b.get("/api/me").await.json::<Value>().await.unwrap()["user"],
        "ann"
    );

    // A first turn runs on A, while B follows it from the store and steers it.
    let mut sse = Sse::new(on_a.send("c1", "Count, then deploy.").await);
    sse.next().await.unwrap();
    let follow = tokio::spawn({
        let on_b = on_b.clone();
        async move { Sse::new(on_b.get("/api/chat/c1/stream").await).all().await }
    });
    let r = on_b
        .post("/api/chats/c1/steer", json!({"text": "and deploy to prod"}))
        .await;
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap());
    // The message waits in the chat's inbox, which A's run reads every 50 ms while its
    // model call waits at the gate; then the answer with a message waiting takes another
    // step: the deploy call, which pauses for approval.
    tokio::time::sleep(Duration::from_secs(1)).await;
    gate.add_permits(8);
    let frames = sse.all().await;
    let followed = follow.await.unwrap();
    assert_eq!(
        text(&followed),
        text(&frames),
        "B followed A's run word for word"
    );
    let steering = frames
        .iter()
        .filter_map(|f| f.data.as_ref())
        .find(|d| d["type"] == "steering-message")
        .expect("the steering message entered the run");
    assert_eq!(steering["parts"][0]["text"], "and deploy to prod");
    let request = frames
        .iter()
        .filter_map(|f| f.data.as_ref())
        .find(|d| d["type"] == "tool-approval-request")
        .expect("an approval request");
    let call = request["toolCallId"].as_str().unwrap().to_owned();

    // Approved through B: B takes the paused run over and finishes it.
    let r = on_b
        .post(
            &format!("/api/chats/c1/approvals/{call}"),
            json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap());
    let after = r.json::<Value>().await.unwrap()["after"].as_u64().unwrap();
    // A follows B's part of the run from the store.
    let rest = Sse::new(
        on_a.get(&format!("/api/chat/c1/stream?after={after}"))
            .await,
    )
    .all()
    .await;
    assert_eq!(text(&rest), "Deployed.");
    assert!(types(&rest).contains(&"tool-output-available".to_string()));
    assert_eq!(runs.0.load(Ordering::SeqCst), 1, "the call ran once");
    scripted.assert_consumed();
    let page = on_a
        .get("/api/chats/c1")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(page["resume"], false);
}
