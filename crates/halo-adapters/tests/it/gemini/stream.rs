//! Streaming over a wiremock fake that answers with Gemini's real SSE shape: CRLF-framed
//! `data:` chunks, no `[DONE]`, text and thoughts in pieces, function calls whole, usage on
//! the last chunk; and what a cut stream or an error chunk becomes.

use futures::StreamExt as _;
use halo_core::{
    FinishReason, GenerationOptions, InvalidRequestKind, Message, ModelAdapter, ModelError,
    ModelStreamEvent, Reasoning, StablePrefix, Usage,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{KEY, builder, list_dir_spec, read_file_spec, request};

/// An SSE body of these chunks, framed like Gemini's (`\r\n\r\n`, no `[DONE]`).
fn sse(chunks: &[Value]) -> String {
    chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect()
}

fn chunk(parts: Value, finish: Option<&str>, usage: Option<Value>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    let mut c =
        json!({"candidates": [candidate], "modelVersion": "gemini-2.5-flash", "responseId": "r1"});
    if let Some(u) = usage {
        c["usageMetadata"] = u;
    }
    c
}

async fn fake(body: String) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        ))
        .and(query_param("alt", "sse"))
        .and(header("x-goog-api-key", KEY))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
        )
        .mount(&server)
        .await;
    server
}

async fn run(server: &MockServer) -> Vec<Result<ModelStreamEvent, ModelError>> {
    let model = builder(&server.uri()).build().unwrap();
    let prefix = StablePrefix::new("You read files.")
        .with_tool(read_file_spec())
        .unwrap()
        .with_tool(list_dir_spec())
        .unwrap();
    let history = [Message::user("Read main.rs")];
    let options = GenerationOptions::default();
    model
        .stream(request(&prefix, &history, &options))
        .collect()
        .await
}

#[tokio::test]
async fn thoughts_text_and_a_function_call_stream_then_stop_with_usage() {
    let body = sse(&[
        chunk(
            json!([{"text": "Looking at", "thought": true}]),
            None,
            Some(json!({"promptTokenCount": 900})),
        ),
        chunk(
            json!([{"text": " the file.", "thought": true, "thoughtSignature": "sig-t"}]),
            None,
            None,
        ),
        chunk(json!([{"text": "Let me "}]), None, None),
        chunk(json!([{"text": "read it."}]), None, None),
        chunk(
            json!([{"functionCall": {"name": "read_file", "args": {"path": "src/main.rs", "mode": "plain"}}, "thoughtSignature": "sig-c"},
                   {"functionCall": {"name": "list_dir", "args": {}}}]),
            None,
            None,
        ),
        // Newer models: the STOP comes alone after the calls, with an empty text part.
        chunk(
            json!([{"text": ""}]),
            Some("STOP"),
            Some(
                json!({"promptTokenCount": 900, "cachedContentTokenCount": 512, "candidatesTokenCount": 30, "thoughtsTokenCount": 12, "totalTokenCount": 942}),
            ),
        ),
    ]);
    let server = fake(body).await;
    let events = run(&server).await;
    let events: Vec<ModelStreamEvent> = events.into_iter().map(Result::unwrap).collect();
    let (finish, deltas) = events.split_last().unwrap();
    assert_eq!(
        deltas,
        [
            ModelStreamEvent::ReasoningDelta("Looking at".into()),
            ModelStreamEvent::ReasoningDelta(" the file.".into()),
            ModelStreamEvent::TextDelta("Let me ".into()),
            ModelStreamEvent::TextDelta("read it.".into()),
            ModelStreamEvent::ToolCallStart {
                index: 0,
                id: "gemini-call-0".into(),
                name: "read_file".into()
            },
            ModelStreamEvent::ToolCallDelta {
                index: 0,
                arguments: "{\"mode\":\"plain\",\"path\":\"src/main.rs\"}".into()
            },
            ModelStreamEvent::ToolCallStart {
                index: 1,
                id: "gemini-call-1".into(),
                name: "list_dir".into()
            },
            ModelStreamEvent::ToolCallDelta {
                index: 1,
                arguments: "{}".into()
            },
        ]
    );
    let ModelStreamEvent::Finish(turn) = finish else {
        panic!("the last event is {finish:?}")
    };
    assert_eq!(
        turn.finish_reason,
        FinishReason::ToolCalls,
        "STOP after calls"
    );
    assert_eq!(turn.message.text, "Let me read it.");
    assert_eq!(
        turn.message.reasoning,
        [Reasoning {
            text: "Looking at the file.".into(),
            signature: Some("sig-t".into())
        }]
    );
    assert_eq!(turn.message.tool_calls.len(), 2);
    assert_eq!(
        turn.message.tool_calls[0].provider_data,
        Some(json!({"thoughtSignature": "sig-c"}))
    );
    assert_eq!(
        turn.usage,
        Usage {
            input_tokens: Some(900),
            output_tokens: Some(42),
            cache_read_tokens: Some(512),
            cache_write_tokens: None,
            reasoning_tokens: Some(12),
        }
    );
    assert_eq!(turn.model.as_deref(), Some("gemini-2.5-flash"));
    assert_eq!(turn.id.as_deref(), Some("r1"), "responseId");
}

#[tokio::test]
async fn parallel_calls_across_chunks_keep_the_order_of_their_parts() {
    // Parts carry no index: the turn lists calls in part order, chunk after chunk.
    let body = sse(&[
        chunk(
            json!([{"functionCall": {"id": "c1", "name": "read_file", "args": {"path": "a"}}, "thoughtSignature": "sig"},
                   {"functionCall": {"id": "c2", "name": "list_dir", "args": {}}}]),
            None,
            None,
        ),
        chunk(
            json!([{"functionCall": {"id": "c3", "name": "read_file", "args": {"path": "b"}}}]),
            Some("STOP"),
            None,
        ),
    ]);
    let server = fake(body).await;
    let events = run(&server).await;
    let Some(Ok(ModelStreamEvent::Finish(turn))) = events.last() else {
        panic!("{events:?}")
    };
    let calls: Vec<_> = turn
        .message
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.raw_arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("c1", "read_file", "{\"path\":\"a\"}"),
            ("c2", "list_dir", "{}"),
            ("c3", "read_file", "{\"path\":\"b\"}"),
        ]
    );
    let starts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Ok(ModelStreamEvent::ToolCallStart { index, id, .. }) => Some((*index, id.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [(0, "c1"), (1, "c2"), (2, "c3")]);
}

#[tokio::test]
async fn a_text_answer_ends_at_the_end_of_the_body_and_keeps_its_signature() {
    let body = sse(&[
        chunk(json!([{"text": "Hel"}]), None, None),
        chunk(json!([{"text": "lo."}]), None, None),
        chunk(
            json!([{"text": "", "thoughtSignature": "sig-last"}]),
            Some("STOP"),
            Some(json!({"promptTokenCount": 10, "candidatesTokenCount": 2})),
        ),
    ]);
    let server = fake(body).await;
    let events = run(&server).await;
    let Some(Ok(ModelStreamEvent::Finish(turn))) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(turn.finish_reason, FinishReason::Stop);
    assert_eq!(turn.message.text, "Hello.");
    assert_eq!(
        turn.message.reasoning,
        [Reasoning {
            text: String::new(),
            signature: Some("sig-last".into())
        }]
    );
    assert_eq!(
        (turn.usage.input_tokens, turn.usage.cache_read_tokens),
        (Some(10), Some(0))
    );
}

#[tokio::test]
async fn a_stream_cut_before_its_finish_reason_is_truncated_and_its_call_is_dropped() {
    let body = sse(&[
        chunk(json!([{"text": "Reading."}]), None, None),
        chunk(
            json!([{"functionCall": {"name": "list_dir", "args": {}}}]),
            None,
            None,
        ),
    ]);
    let server = fake(body).await;
    let events = run(&server).await;
    assert!(
        matches!(events.last(), Some(Err(ModelError::Truncated(_)))),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(ModelStreamEvent::Finish(_)))),
        "no turn from a cut stream"
    );

    // Cut in the middle of an event (no closing blank line).
    let mut body = sse(&[chunk(json!([{"text": "Hi"}]), None, None)]);
    body.push_str("data: {\"candidates\":[{\"content\":{\"parts\":[{\"te");
    let server = fake(body).await;
    let events = run(&server).await;
    assert!(
        matches!(events.last(), Some(Err(ModelError::Truncated(_)))),
        "{events:?}"
    );
}

#[tokio::test]
async fn an_error_chunk_mid_stream_keeps_status_200_and_its_status_and_code() {
    // Trigger: this chunk read as HTTP 503, like an overload answered before the stream.
    let body = sse(&[
        chunk(json!([{"text": "Hi"}]), None, None),
        json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}),
    ]);
    let server = fake(body).await;
    let events = run(&server).await;
    assert_eq!(events[0], Ok(ModelStreamEvent::TextDelta("Hi".into())));
    let Some(Err(err)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(
        err,
        &ModelError::Stream {
            provider_type: Some("UNAVAILABLE".into()),
            code: Some("503".into()),
            invalid_request: None,
            retryable: true,
            message: "The model is overloaded.".into(),
        }
    );
    assert_eq!(err.status(), Some(200));
}

#[tokio::test]
async fn an_invalid_argument_chunk_mid_stream_is_not_retryable_and_keeps_its_kind() {
    let body = sse(&[
        chunk(json!([{"text": "Hi"}]), None, None),
        json!({"error": {"code": 400, "message": "The input token count (132478) exceeds the maximum number of tokens allowed (131072).", "status": "INVALID_ARGUMENT"}}),
    ]);
    let server = fake(body).await;
    let events = run(&server).await;
    let Some(Err(err)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(
        err,
        &ModelError::Stream {
            provider_type: Some("INVALID_ARGUMENT".into()),
            code: Some("400".into()),
            invalid_request: Some(InvalidRequestKind::ContextWindowExceeded),
            retryable: false,
            message: "The input token count (132478) exceeds the maximum number of tokens \
                      allowed (131072)."
                .into(),
        }
    );
    assert!(err.is_context_window_exceeded());
}

#[tokio::test]
async fn a_blocked_prompt_ends_the_stream_with_an_error_naming_the_reason() {
    // Trigger: a streamed promptFeedback.blockReason SAFETY and no candidates.
    let body = sse(&[
        json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 7}}),
    ]);
    let server = fake(body).await;
    let events = run(&server).await;
    let Some(Err(ModelError::Other(message))) = events.last() else {
        panic!("{events:?}")
    };
    assert!(
        message.contains("blocked the prompt (promptFeedback.blockReason SAFETY)"),
        "{message}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(ModelStreamEvent::Finish(_))))
    );
}
