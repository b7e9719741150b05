//! The agent as a tool: a prompt in, the final text out, one progress notification per
//! step (the scripted model calls a tool, then answers).

use std::sync::Arc;

use halo_core::HaloAgent;
use halo_core::testing::ScriptedModel;
use halo_mcp::server::{AgentTool, McpServer};
use serde_json::json;

use super::{Echo, Era, Seen, call, connect, text};

#[tokio::test]
async fn the_agent_answers_as_a_tool_with_a_progress_notification_per_step() {
    let model = ScriptedModel::new()
        .tool_call("echo", json!({"text": "ping"}))
        .text("The echo said ping.");
    let factory_model = model.clone();
    let tool = AgentTool::per_call("ask_agent", "Asks the agent.", move || {
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
    assert!(message.starts_with("the agent's run failed: "), "{message}");
}
