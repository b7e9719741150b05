//! `ResponsesAdapter` against a wiremock fake fed the Responses API's real shapes: the
//! request body (snapshot in `tests/data/responses`), the typed stream events (`.done` over
//! `.added`, `response.failed`, `error`, a cut stream, `response.incomplete`), and the
//! error mapping of HTTP answers.

use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt as _;
use halo_adapters::responses::ResponsesAdapter;
use halo_core::{
    AssistantMessage, ContentPart, FinishReason, GenerationOptions, InvalidRequestKind, Message,
    ModelAdapter, ModelError, ModelRequest, ModelResponse, ModelStreamEvent, Reasoning,
    StablePrefix, ToolCall, ToolResult, ToolSpec,
};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::KEY;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/responses")
}

/// Compares `body` (pretty-printed) with `tests/data/responses/<name>.json`, or rewrites the
/// file under `UPDATE_EXPECT=1`.
fn assert_snapshot(name: &str, body: &[u8]) {
    let value: Value = serde_json::from_slice(body).expect("the body is JSON");
    let actual = serde_json::to_string_pretty(&value).expect("pretty JSON") + "\n";
    let path = data_dir().join(format!("{name}.json"));
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::create_dir_all(data_dir()).expect("create the data dir");
        std::fs::write(&path, &actual).expect("write the snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with UPDATE_EXPECT=1", path.display()));
    assert!(
        expected == actual,
        "{name}: the body differs\n--- expected\n{expected}\n--- actual\n{actual}"
    );
}

fn model(base: &str) -> ResponsesAdapter {
    ResponsesAdapter::builder("gpt-5")
        .api_key(KEY)
        .base_url(format!("{base}/v1"))
        .max_retries(0)
        .build()
        .unwrap()
}

fn prefix() -> StablePrefix {
    StablePrefix::new("You are terse.")
        .with_tool(ToolSpec::new(
            "read",
            "Reads a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        ))
        .unwrap()
}

/// A turn as the adapter read it: a reasoning item, a message item and a call, in order.
fn replayed_turn() -> ModelResponse {
    // As the API writes it (its key order, which the adapter keeps).
    let body = r#"{"id":"resp_1","object":"response","status":"completed","output":[
        {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Look first."}],"encrypted_content":"gAAAA-enc"},
        {"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Reading.","annotations":[]}]},
        {"type":"function_call","id":"fc_1","call_id":"call_1","name":"read","arguments":"{\"path\":\"a.rs\"}","status":"completed"}
    ]}"#;
    model("http://127.0.0.1:9")
        .dialect_parse(body.as_bytes())
        .unwrap()
}

trait Parse {
    fn dialect_parse(&self, body: &[u8]) -> Result<ModelResponse, ModelError>;
}

impl Parse for ResponsesAdapter {
    fn dialect_parse(&self, body: &[u8]) -> Result<ModelResponse, ModelError> {
        use halo_adapters::transport::Dialect as _;
        self.dialect().parse(self.transport(), body)
    }
}

#[test]
fn the_body_replays_provider_items_verbatim_in_their_order() {
    let turn = replayed_turn();
    let call = turn.message.tool_calls[0].clone();
    let history = vec![
        Message::User {
            content: vec![
                ContentPart::Text {
                    text: "Read a.rs.".into(),
                },
                ContentPart::Image {
                    media_type: "image/png".into(),
                    data: "iVBOR".into(),
                },
            ],
        },
        Message::Assistant(turn.message),
        Message::Tool(ToolResult::ok(&call, "fn main() {}")),
        // Another provider's turn: its text as a message, its reasoning left out.
        Message::Assistant(AssistantMessage {
            text: "Done.".into(),
            reasoning: vec![Reasoning {
                text: "hmm".into(),
                signature: Some("sig".into()),
            }],
            tool_calls: vec![ToolCall::new("toolu_1", "read", "")],
        }),
        Message::Tool(ToolResult::error(
            &ToolCall::new("toolu_1", "read", ""),
            "no path",
        )),
    ];
    let prefix = prefix();
    let options = GenerationOptions::default().with_max_tokens(500);
    let body = model("http://127.0.0.1:9")
        .request_body(&ModelRequest::new(&prefix, &history, &options).with_session_id("s-1"))
        .unwrap();
    assert_snapshot("reasoning_replayed", &body);
    // The stored items go out byte for byte as the API sent them.
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(text.contains(r#"{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Look first."}],"encrypted_content":"gAAAA-enc"}"#), "{text}");
}

async fn serving(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(template)
        .mount(&server)
        .await;
    server
}

fn sse(events: &[Value]) -> ResponseTemplate {
    let mut body = String::new();
    for e in events {
        body.push_str(&format!(
            "event: {}\ndata: {e}\n\n",
            e["type"].as_str().unwrap()
        ));
    }
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

async fn stream(base: &str) -> (Vec<ModelStreamEvent>, Result<ModelResponse, ModelError>) {
    let prefix = prefix();
    let history = [Message::user("hi")];
    let options = GenerationOptions::default();
    let m = model(base);
    let items: Vec<_> = m
        .stream(ModelRequest::new(&prefix, &history, &options))
        .collect()
        .await;
    let mut deltas = Vec::new();
    let mut end = Err(ModelError::Other("no finish".into()));
    for item in items {
        match item {
            Ok(ModelStreamEvent::Finish(turn)) => end = Ok(turn),
            Ok(delta) => deltas.push(delta),
            Err(e) => end = Err(e),
        }
    }
    (deltas, end)
}

fn completed(output: Value, usage: Value) -> Value {
    json!({"type": "response.completed", "sequence_number": 9, "response": {"id": "resp_1", "object": "response", "status": "completed", "output": output, "usage": usage}})
}

#[tokio::test]
async fn a_stream_takes_the_reasoning_item_from_done_not_added() {
    let done_rs = json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "A"}, {"type": "summary_text", "text": "B"}], "encrypted_content": "gAAAA-full"});
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read", "arguments": "{\"path\":\"a\"}", "status": "completed"});
    let server = serving(sse(&[
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-pa"}}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": 0, "delta": "A"}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": 1, "delta": "B"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": done_rs}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{\"path\""}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": ":\"a\"}"}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": call}),
        completed(json!([]), json!({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 4}})),
    ]))
    .await;
    let (deltas, end) = stream(&server.uri()).await;
    let turn = end.unwrap();
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(turn.message.tool_calls[0].raw_arguments, r#"{"path":"a"}"#);
    assert_eq!(turn.message.reasoning_text().unwrap(), "A\n\nB");
    let signature = turn.message.reasoning[0].signature.as_deref().unwrap();
    assert!(
        signature.contains("gAAAA-full") && !signature.contains("gAAAA-pa\""),
        "{signature}"
    );
    let reasoning: String = deltas
        .iter()
        .filter_map(|d| match d {
            ModelStreamEvent::ReasoningDelta(r) => Some(r.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning, "A\n\nB",
        "the deltas add up to the turn's reasoning"
    );
    assert!(deltas.contains(&ModelStreamEvent::ToolCallStart {
        index: 0,
        id: "call_1".into(),
        name: "read".into()
    }));
    assert_eq!(turn.usage.reasoning_tokens, Some(4));
}

#[tokio::test]
async fn failed_error_cut_and_incomplete_streams_end_as_typed_outcomes() {
    let failed = serving(sse(&[json!({"type": "response.failed", "response": {"id": "r", "status": "failed", "output": [], "error": {"code": "server_error", "message": "The model failed."}}})])).await;
    let (_, end) = stream(&failed.uri()).await;
    let err = end.unwrap_err();
    assert!(
        matches!(&err, ModelError::Stream { code: Some(c), retryable: true, .. } if c == "server_error"),
        "{err:?}"
    );

    let error = serving(sse(&[json!({"type": "error", "code": "context_length_exceeded", "message": "Your input exceeds the context window of this model.", "param": "input", "sequence_number": 1})])).await;
    let (_, end) = stream(&error.uri()).await;
    let err = end.unwrap_err();
    assert!(
        err.is_context_window_exceeded() && !err.is_retryable(),
        "{err:?}"
    );

    let cut = serving(sse(&[
        json!({"type": "response.output_text.delta", "item_id": "m", "delta": "Hel"}),
    ]))
    .await;
    let (deltas, end) = stream(&cut.uri()).await;
    assert_eq!(deltas, [ModelStreamEvent::TextDelta("Hel".into())]);
    assert!(matches!(end, Err(ModelError::Truncated(_))), "{end:?}");

    let incomplete = serving(sse(&[json!({"type": "response.incomplete", "response": {"id": "r", "object": "response", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [{"type": "message", "id": "m", "role": "assistant", "content": [{"type": "output_text", "text": "Hel"}]}]}})])).await;
    let (_, end) = stream(&incomplete.uri()).await;
    let turn = end.unwrap();
    assert_eq!(
        (turn.finish_reason, turn.message.text.as_str()),
        (FinishReason::Length, "Hel")
    );
}

fn openai_error(status: u16, kind: &str, code: Option<&str>, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
}

#[tokio::test]
async fn http_errors_map_to_the_typed_kinds() {
    let cases = [
        (
            openai_error(
                400,
                "invalid_request_error",
                Some("context_length_exceeded"),
                "Your input exceeds the context window of this model.",
            ),
            "context",
        ),
        (
            openai_error(
                401,
                "invalid_request_error",
                Some("invalid_api_key"),
                &format!("Incorrect API key provided: {KEY}."),
            ),
            "auth",
        ),
        (
            openai_error(
                429,
                "insufficient_quota",
                Some("insufficient_quota"),
                "You exceeded your current quota.",
            ),
            "quota",
        ),
        (
            openai_error(
                429,
                "requests",
                Some("rate_limit_exceeded"),
                "Rate limit reached.",
            )
            .insert_header("retry-after-ms", "1500"),
            "rate",
        ),
        (
            openai_error(503, "server_error", None, "Overloaded."),
            "server",
        ),
    ];
    let prefix = prefix();
    let history = [Message::user("hi")];
    let options = GenerationOptions::default();
    for (template, case) in cases {
        let server = serving(template).await;
        let err = model(&server.uri())
            .generate(ModelRequest::new(&prefix, &history, &options))
            .await
            .unwrap_err();
        assert!(!err.to_string().contains(KEY), "{case}: {err}");
        match case {
            "context" => assert_eq!(
                err.invalid_request_kind(),
                Some(InvalidRequestKind::ContextWindowExceeded)
            ),
            "auth" => assert!(matches!(
                err,
                ModelError::Authentication { status: 401, .. }
            )),
            "quota" => assert!(matches!(err, ModelError::InsufficientBalance { .. })),
            "rate" => assert_eq!(err.retry_after(), Some(Duration::from_millis(1500))),
            _ => {
                assert!(matches!(err, ModelError::Server { status: 503, .. }) && err.is_retryable())
            }
        }
    }
}
