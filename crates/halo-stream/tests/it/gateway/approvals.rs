//! Approvals in the browser, client-side tools and channels with no one to ask.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use halo_core::testing::ScriptedModel;
use halo_core::{Tool, ToolAnnotations, ToolError, ToolOutput, ToolSpec};
use serde_json::{Value, json};

use super::harness::*;

/// A command that needs approval, counting its runs.
#[derive(Clone, Default)]
pub struct Deploy(pub Arc<AtomicUsize>);

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct DeployArgs {
    /// Where to.
    pub target: String,
}

impl Tool for Deploy {
    type Args = DeployArgs;
    fn name(&self) -> &str {
        "deploy"
    }
    fn description(&self) -> &str {
        "Deploys."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default().with_needs_approval(true)
    }
    async fn call(&self, args: DeployArgs) -> Result<ToolOutput, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(format!("deployed to {}", args.target).into())
    }
}

fn model(scripted: &ScriptedModel) -> Paced {
    Paced::new(scripted.clone(), Duration::from_millis(2))
}

fn part<'a>(frames: &'a [Frame], kind: &str) -> Option<&'a Value> {
    frames
        .iter()
        .filter_map(|f| f.data.as_ref())
        .find(|d| d["type"] == kind)
}

#[tokio::test]
async fn an_approval_is_pushed_again_on_reconnect_and_approving_it_runs_the_call() {
    let dir = temp();
    let scripted = ScriptedModel::new()
        .tool_call("deploy", json!({"target": "prod"}))
        .text("Deployed.");
    let runs = Deploy::default();
    let tool = runs.clone();
    let build = move |b: halo_core::HaloAgentBuilder| b.tool(tool.clone()).unwrap();
    let server = Server::start(
        builder(jsonl(&dir), model(&scripted), &dir, build),
        dir.clone(),
    )
    .await;
    let ann = server.login("ann").await;

    let frames = Sse::new(ann.send("c1", "Deploy to prod.").await)
        .all()
        .await;
    let request = part(&frames, "tool-approval-request").expect("an approval request");
    let call = request["toolCallId"].as_str().unwrap().to_owned();
    assert_eq!(request["approvalId"], call);
    let finish = part(&frames, "finish").unwrap();
    assert_eq!(finish["finishReason"], "tool-calls");
    assert_eq!(
        runs.0.load(Ordering::SeqCst),
        0,
        "nothing ran before the approval"
    );

    // A refreshed page is shown the request again.
    let page = ann
        .get("/api/chats/c1")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(page["resume"], true);
    let replay = Sse::new(ann.get("/api/chat/c1/stream").await).all().await;
    assert_eq!(part(&replay, "tool-approval-request"), Some(request));

    let r = ann
        .post(
            &format!("/api/chats/c1/approvals/{call}"),
            json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status(), 202);
    let after = r.json::<Value>().await.unwrap()["after"].as_u64();
    let path = match after {
        Some(after) => format!("/api/chat/c1/stream?after={after}"),
        None => "/api/chat/c1/stream".into(),
    };
    let rest = Sse::new(ann.get(&path).await).all().await;
    assert_eq!(
        part(&rest, "tool-approval-response").unwrap(),
        &json!({"type": "tool-approval-response", "approvalId": call, "approved": true})
    );
    assert_eq!(
        part(&rest, "tool-output-available").unwrap()["output"],
        "deployed to prod"
    );
    assert_eq!(text(&rest), "Deployed.");
    assert_eq!(runs.0.load(Ordering::SeqCst), 1);

    // The whole turn now shows in the history, the call approved and done.
    let page = ann
        .get("/api/chats/c1")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(page["resume"], false);
    let parts = &page["messages"][1]["parts"];
    let tool = parts
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "tool-deploy")
        .unwrap();
    assert_eq!(tool["state"], "output-available");
    // Answering again is refused: nothing waits.
    let r = ann
        .post(
            &format!("/api/chats/c1/approvals/{call}"),
            json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn a_denial_through_use_chat_is_tool_output_denied_and_the_model_reads_it() {
    let dir = temp();
    let scripted = ScriptedModel::new()
        .tool_call("deploy", json!({"target": "prod"}))
        .text("I did not deploy.");
    let runs = Deploy::default();
    let tool = runs.clone();
    let build = move |b: halo_core::HaloAgentBuilder| b.tool(tool.clone()).unwrap();
    let server = Server::start(
        builder(jsonl(&dir), model(&scripted), &dir, build),
        dir.clone(),
    )
    .await;
    let ann = server.login("ann").await;
    let frames = Sse::new(ann.send("c1", "Deploy to prod.").await)
        .all()
        .await;
    let call = part(&frames, "tool-approval-request").unwrap()["toolCallId"].clone();

    // What `addToolApprovalResponse` + `sendAutomaticallyWhen` post.
    let body = json!({
        "id": "c1",
        "trigger": "submit-message",
        "messageId": "a1",
        "messages": [
            {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Deploy to prod."}]},
            {"id": "a1", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-deploy", "toolCallId": call, "state": "approval-responded",
                 "input": {"target": "prod"},
                 "approval": {"id": call, "approved": false, "reason": "not on a Friday"}}]},
        ],
    });
    let rest = Sse::new(ann.post("/api/chat", body).await).all().await;
    assert_eq!(
        rest[0].data.as_ref().unwrap(),
        &json!({"type": "start", "messageId": "a1"})
    );
    assert_eq!(
        part(&rest, "tool-output-denied").unwrap(),
        &json!({"type": "tool-output-denied", "toolCallId": call})
    );
    assert!(part(&rest, "tool-output-error").is_none());
    assert_eq!(text(&rest), "I did not deploy.");
    assert_eq!(runs.0.load(Ordering::SeqCst), 0);
    let requests = scripted.requests();
    let denial = requests[1].history.last().unwrap().text();
    assert!(
        denial.contains("the user rejected this call") && denial.contains("not on a Friday"),
        "{denial}"
    );
}

#[tokio::test]
async fn a_plain_json_request_has_its_approvals_denied_at_once() {
    let dir = temp();
    let scripted = ScriptedModel::new()
        .tool_call("deploy", json!({"target": "prod"}))
        .text("Could not deploy.");
    let runs = Deploy::default();
    let tool = runs.clone();
    let build = move |b: halo_core::HaloAgentBuilder| b.tool(tool.clone()).unwrap();
    let server = Server::start(
        builder(jsonl(&dir), model(&scripted), &dir, build),
        dir.clone(),
    )
    .await;
    let ann = server.login("ann").await;
    let r = ann
        .post_json_only("/api/chat", user_message("c1", "Deploy."))
        .await;
    assert_eq!(r.status(), 200);
    let answer = r.json::<Value>().await.unwrap();
    assert_eq!(answer["text"], "Could not deploy.");
    assert_eq!(runs.0.load(Ordering::SeqCst), 0);
    let result = scripted.requests()[1].history.last().unwrap().text();
    assert!(result.contains("needs the user's approval"), "{result}");
}

#[tokio::test]
async fn a_client_side_tools_result_goes_to_the_paused_run() {
    let dir = temp();
    let scripted = ScriptedModel::new()
        .tool_call("location", json!({}))
        .text("You are in Oslo.");
    let build = |b: halo_core::HaloAgentBuilder| {
        b.client_tool(ToolSpec::new(
            "location",
            "Where the user is.",
            json!({"type": "object"}),
        ))
        .unwrap()
    };
    let server = Server::start(
        builder(jsonl(&dir), model(&scripted), &dir, build),
        dir.clone(),
    )
    .await;
    let ann = server.login("ann").await;
    let frames = Sse::new(ann.send("c1", "Where am I?").await).all().await;
    let call = part(&frames, "tool-input-available").unwrap()["toolCallId"].clone();
    assert_eq!(
        part(&frames, "finish").unwrap()["finishReason"],
        "tool-calls"
    );

    // What `addToolOutput` + `sendAutomaticallyWhen` post.
    let body = json!({
        "id": "c1",
        "messages": [
            {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Where am I?"}]},
            {"id": "a1", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-location", "toolCallId": call, "state": "output-available",
                 "input": {}, "output": {"city": "Oslo"}}]},
        ],
    });
    let rest = Sse::new(ann.post("/api/chat", body).await).all().await;
    assert_eq!(text(&rest), "You are in Oslo.");
    let result = scripted.requests()[1].history.last().unwrap().text();
    assert_eq!(result, r#"{"city":"Oslo"}"#);
}
