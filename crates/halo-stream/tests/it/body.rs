//! `create_halo_stream`: headers, a `'static + Send` body, a shared agent's log, and
//! cancellation by dropping the body.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use futures::lock::Mutex;
use halo_core::testing::ScriptedModel;
use halo_core::{HaloAgent, Tool, ToolError, ToolOutput};
use halo_stream::{HaloStream, UI_MESSAGE_STREAM_HEADERS, create_halo_stream};

#[test]
fn headers_are_the_ui_message_stream_ones() {
    assert_eq!(
        UI_MESSAGE_STREAM_HEADERS,
        [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
            ("x-vercel-ai-ui-message-stream", "v1"),
            ("x-accel-buffering", "no"),
        ]
    );
}

#[test]
fn the_body_is_static_and_send() {
    fn assert_body<
        T: futures::Stream<Item = Result<bytes::Bytes, std::convert::Infallible>> + Send + 'static,
    >(
        _: &T,
    ) {
    }
    let agent = HaloAgent::builder(ScriptedModel::new().text("x")).build();
    let body: HaloStream = create_halo_stream(Box::new(agent), "q");
    assert_body(&body);
}

#[test]
fn a_shared_agent_keeps_both_turns_in_its_log() {
    let model = ScriptedModel::new().text("first").text("second");
    let agent = Arc::new(Mutex::new(HaloAgent::builder(model.clone()).build()));
    futures::executor::block_on(async {
        for (input, answer) in [("one", "first"), ("two", "second")] {
            let body = create_halo_stream(agent.clone().lock_owned().await, input);
            let bytes: Vec<u8> = body.map(|f| f.unwrap().to_vec()).concat().await;
            let text = String::from_utf8(bytes).unwrap();
            assert!(text.contains(&format!("\"delta\":\"{answer}\"")), "{text}");
        }
        assert_eq!(agent.lock().await.log().len(), 4);
    });
    // The second request carried the first turn.
    assert_eq!(model.requests()[1].history.len(), 3);
    model.assert_consumed();
}

struct Counted(Arc<AtomicUsize>);
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}
impl Tool for Counted {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "counted"
    }
    fn description(&self) -> &str {
        "Counts its calls."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text("ok"))
    }
}

#[test]
fn dropping_the_body_after_the_tool_call_runs_no_tool_and_logs_no_half_step() {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new()
        .tool_call("counted", serde_json::json!({}))
        .text("done");
    let agent = HaloAgent::builder(model)
        .tool(Counted(calls.clone()))
        .unwrap()
        .build();
    let agent = Arc::new(Mutex::new(agent));
    futures::executor::block_on(async {
        let mut body = create_halo_stream(agent.clone().lock_owned().await, "go");
        while let Some(frame) = body.next().await {
            if frame
                .unwrap()
                .starts_with(b"data: {\"type\":\"tool-input-available\"")
            {
                break;
            }
        }
        drop(body);
        let agent = agent.lock().await;
        assert_eq!(
            agent.log().len(),
            1,
            "only the user message: {:?}",
            agent.log()
        );
    });
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}
