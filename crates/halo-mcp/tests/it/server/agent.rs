//! The agent as a tool: a prompt in, the final text out, one progress notification per
//! step (the scripted model calls a tool, then answers).

use std::sync::Arc;

use halo_core::HaloAgent;
use halo_core::testing::ScriptedModel;
use halo_mcp::server::{McpServer, ServedAgent};
use serde_json::json;

use super::{Echo, Era, Seen, call, connect, text};

#[tokio::test]
async fn the_agent_answers_as_a_tool_with_a_progress_notification_per_step() {
    let model = ScriptedModel::new()
        .tool_call("echo", json!({"text": "ping"}))
        .text("The echo said ping.");
    let factory_model = model.clone();
    let tool = ServedAgent::per_call("ask_agent", "Asks the agent.", move || {
        Ok(HaloAgent::builder(factory_model.clone())
            .system("You answer with the echo tool.")
            .tool(Echo)?
            .build())
    });
    let server = McpServer::builder().tool(Arc::new(tool)).build().unwrap();
    let (client, mut seen) = connect(server, Era::Legacy).await;

    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools[0].name, "ask_agent");
    assert_eq!(tools[0].input_schema["required"], json!(["prompt"]));

    let result = call(
        &client,
        "ask_agent",
        json!({"prompt": "What does the echo say?"}),
    )
    .await;
    assert_eq!(text(&result), ("The echo said ping.".to_string(), false));
    model.assert_consumed();
    // The tool ran inside the agent: its result is in the model's second request.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);

    let mut progress = Vec::new();
    for _ in 0..2 {
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), seen.recv());
        progress.push(next.await.expect("a progress notification within 5 s"));
    }
    assert_eq!(
        progress,
        [
            Some(Seen::Progress(1.0, Some("step 1: called echo".into()))),
            Some(Seen::Progress(2.0, Some("step 2: answered".into()))),
        ]
    );

    // A run that fails is an error result, not a crash.
    let result = call(&client, "ask_agent", json!({"prompt": "again"})).await;
    let (message, is_error) = text(&result);
    assert!(is_error);
    assert!(
        message.starts_with("the agent `ask_agent` failed: "),
        "{message}"
    );

    // An empty prompt is refused before any model call: the schema's minLength, or the
    // tool's own check for one of blanks.
    let before = model.requests().len();
    for prompt in ["", "   "] {
        let (message, is_error) =
            text(&call(&client, "ask_agent", json!({"prompt": prompt})).await);
        assert!(is_error, "{prompt:?}: {message}");
    }
    assert_eq!(model.requests().len(), before);
}

#[tokio::test]
async fn a_shared_agent_keeps_one_conversation_across_calls() {
    let model = ScriptedModel::new()
        .text("first answer")
        .text("second answer");
    let agent = HaloAgent::builder(model.clone()).build();
    let tool = ServedAgent::shared("ask_agent", "Asks the agent.", agent);
    let server = McpServer::builder().tool(Arc::new(tool)).build().unwrap();
    let (client, _seen) = connect(server, Era::Modern).await;
    let first = call(&client, "ask_agent", json!({"prompt": "one"})).await;
    assert_eq!(text(&first), ("first answer".to_string(), false));
    let second = call(&client, "ask_agent", json!({"prompt": "two"})).await;
    assert_eq!(text(&second), ("second answer".to_string(), false));
    let requests = model.requests();
    assert_eq!(
        requests[1].history,
        [
            halo_core::Message::user("one"),
            halo_core::Message::assistant("first answer"),
            halo_core::Message::user("two"),
        ],
        "the second call continues the first's conversation"
    );
    // A prompt that is not a string never reaches the agent.
    let bad = call(&client, "ask_agent", json!({"prompt": 3})).await;
    assert!(text(&bad).1);
    model.assert_consumed();
}
