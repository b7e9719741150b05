//! Runs apart from connections: a run goes on when its client leaves; a resume after part
//! `N` gets the rest once; the AI SDK's resume GET replays the turn; steering enters at the
//! next step; a stateless client's messages become the history.

use std::sync::Arc;
use std::time::Duration;

use halo_core::testing::ScriptedModel;
use halo_core::{Message, NoArgs, Tool, ToolError, ToolOutput};
use serde_json::json;

use super::harness::*;

/// A tool that answers at once.
struct Clock;

impl Tool for Clock {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "clock"
    }
    fn description(&self) -> &str {
        "The time."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("noon".into())
    }
}

fn paced(inner: ScriptedModel) -> Paced {
    Paced::new(inner, Duration::from_millis(15))
}

#[tokio::test]
async fn a_run_goes_on_when_its_client_leaves_and_a_resume_after_n_gets_the_rest_once() {
    let dir = temp();
    let full = words(40);
    let model = paced(ScriptedModel::new().text(full.clone()));
    let server = Server::start(builder(jsonl(&dir), model, &dir, |b| b), dir.clone()).await;
    let ann = server.login("ann").await;

    let mut sse = Sse::new(ann.send("c1", "Count.").await);
    let mut seen = Vec::new();
    while text(&seen).split_whitespace().count() < 5 {
        seen.push(sse.next().await.unwrap());
    }
    // The client goes away in the middle of the answer.
    drop(sse);
    let last = seen.last().unwrap().id.unwrap();

    let rest = Sse::new(ann.get(&format!("/api/chat/c1/stream?after={last}")).await)
        .all()
        .await;
    assert_eq!(rest.last().unwrap().data, None, "ends with [DONE]");
    let ids: Vec<u64> = seen.iter().chain(&rest).filter_map(|f| f.id).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "numbers only grow: {ids:?}"
    );
    let mut together = seen.clone();
    together.extend(rest.clone());
    assert_eq!(text(&together), full, "no word lost or sent twice");
    assert_eq!(types(&rest).last().unwrap(), "finish");

    // `Last-Event-ID` is the same as `after`.
    let r = reqwest::Client::new()
        .get(format!("{}/api/chat/c1/stream", server.url))
        .header("cookie", ann.cookie.clone().unwrap())
        .header("last-event-id", last.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(text(&Sse::new(r).all().await), text(&rest));
}

#[tokio::test]
async fn the_resume_get_replays_the_turn_from_its_start_and_is_204_once_it_is_over() {
    let dir = temp();
    let full = words(30);
    let model = paced(ScriptedModel::new().text(full.clone()));
    let server = Server::start(builder(jsonl(&dir), model, &dir, |b| b), dir.clone()).await;
    let ann = server.login("ann").await;

    let mut first = Sse::new(ann.send("c1", "Count.").await);
    // Once words come, the question is in the journal.
    while !types(&[first.next().await.unwrap()]).contains(&"text-delta".to_string()) {}
    drop(first);
    // A refreshed page: the AI SDK's `resume: true` asks for the chat's stream.
    let page = ann
        .get("/api/chats/c1")
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(page["resume"], true);
    assert_eq!(
        page["messages"].as_array().unwrap().len(),
        1,
        "the user message; the answer comes from the replay"
    );
    let replay = Sse::new(ann.get("/api/chat/c1/stream").await).all().await;
    let kinds = types(&replay);
    assert_eq!(kinds.first().unwrap(), "start");
    assert_eq!(replay[0].data.as_ref().unwrap()["messageId"], "a1");
    assert_eq!(kinds.last().unwrap(), "finish");
    assert_eq!(text(&replay), full);

    let r = ann.get("/api/chat/c1/stream").await;
    assert_eq!(r.status(), 204, "nothing goes on");
    let page = ann
        .get("/api/chats/c1")
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(page["resume"], false);
    let texts: Vec<&str> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["parts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["type"] == "text")
                .unwrap()["text"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(texts, ["Count.", full.as_str()]);
}

#[tokio::test]
async fn a_steering_message_enters_at_the_next_step_boundary() {
    let dir = temp();
    let scripted = ScriptedModel::new()
        .tool_call("clock", json!({}))
        .text("It is noon.");
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let mut model = Paced::new(scripted.clone(), Duration::from_millis(5));
    model.gate = Some(gate.clone());
    let build = |b: halo_core::HaloAgentBuilder| b.tool(Clock).unwrap();
    let server = Server::start(builder(jsonl(&dir), model, &dir, build), dir.clone()).await;
    let ann = server.login("ann").await;

    let mut sse = Sse::new(ann.send("c1", "What time is it?").await);
    sse.next().await.unwrap();
    // The first model call is made and waits at the gate.
    let r = ann
        .post("/api/chats/c1/steer", json!({"text": "Answer in French."}))
        .await;
    assert_eq!(r.status(), 202);
    gate.add_permits(2);
    let frames = sse.all().await;
    let steering: Vec<_> = frames
        .iter()
        .filter_map(|f| f.data.as_ref())
        .filter(|d| d["type"] == "steering-message")
        .collect();
    assert_eq!(steering.len(), 1, "{:?}", types(&frames));
    assert_eq!(steering[0]["parts"][0]["text"], "Answer in French.");
    // The second model call's request carries it, after the first step.
    let requests = scripted.requests();
    assert_eq!(requests.len(), 2);
    let last = requests[1].history.last().unwrap();
    assert_eq!(last, &Message::user("Answer in French."));
    assert!(
        !requests[0]
            .history
            .iter()
            .any(|m| m.text() == "Answer in French.")
    );

    let r = ann
        .post("/api/chats/c1/steer", json!({"text": "late"}))
        .await;
    assert_eq!(r.status(), 409, "no run goes on");
}

#[tokio::test]
async fn a_stateless_clients_messages_become_the_history_of_a_new_chat() {
    let dir = temp();
    let scripted = ScriptedModel::new().text("Still snowing.");
    let model = paced(scripted.clone());
    let server = Server::start(builder(jsonl(&dir), model, &dir, |b| b), dir.clone()).await;
    let ann = server.login("ann").await;
    let body = json!({
        "id": "c1",
        "messages": [
            {"id": "1", "role": "user", "parts": [{"type": "text", "text": "Weather in Oslo?"}]},
            {"id": "2", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-get_weather", "toolCallId": "w1", "state": "output-available",
                 "input": {"city": "Oslo"}, "output": "snow"},
                {"type": "text", "text": "Snow."}]},
            {"id": "3", "role": "user", "parts": [{"type": "text", "text": "And now?"}]},
        ],
    });
    let frames = Sse::new(ann.post("/api/chat", body).await).all().await;
    assert_eq!(text(&frames), "Still snowing.");
    let history = &scripted.requests()[0].history;
    let seen: Vec<(&str, String)> = history.iter().map(|m| (m.role(), m.text())).collect();
    assert_eq!(
        seen,
        [
            ("user", "Weather in Oslo?".to_string()),
            ("assistant", "Snow.".into()),
            ("tool", "snow".into()),
            ("user", "And now?".into()),
        ]
    );
    // The chat now lives on the server: the page shows all of it.
    let page = ann
        .get("/api/chats/c1")
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(page["messages"].as_array().unwrap().len(), 4);
}
