//! Streaming: each event shape of the Messages stream through `decode_stream` (fed in odd
//! byte splits), and through the adapter over the loopback fake (retries before the stream,
//! none after it starts).

use std::time::Duration;

use futures::StreamExt as _;
use halo_adapters::anthropic::decode_stream;
use halo_core::{
    FinishReason, GenerationOptions, InvalidRequestKind, Message, ModelAdapter, ModelError,
    ModelResponse, ModelStreamEvent, Reasoning, Usage,
};
use serde_json::{Value, json};

use super::fake::{self, FakeMessages, event};
use super::{builder, prefix, request};

fn start(usage: Value) -> String {
    event(json!({"type": "message_start", "message": {
        "id": "msg_01S", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage,
    }}))
}

fn block_start(index: u64, block: Value) -> String {
    event(json!({"type": "content_block_start", "index": index, "content_block": block}))
}

fn delta(index: u64, delta: Value) -> String {
    event(json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

fn text(index: u64, t: &str) -> String {
    delta(index, json!({"type": "text_delta", "text": t}))
}

fn json_part(index: u64, part: &str) -> String {
    delta(
        index,
        json!({"type": "input_json_delta", "partial_json": part}),
    )
}

fn stop(index: u64) -> String {
    event(json!({"type": "content_block_stop", "index": index}))
}

fn end(stop_reason: &str, usage: Value) -> String {
    event(
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": usage}),
    ) + &event(json!({"type": "message_stop"}))
}

fn basic_usage() -> Value {
    json!({"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1})
}

/// Decodes `body` fed in reads of `split` bytes.
fn decode(body: &str, split: usize) -> Vec<Result<ModelStreamEvent, ModelError>> {
    let reads: Vec<Result<Vec<u8>, ModelError>> = body
        .as_bytes()
        .chunks(split)
        .map(|c| Ok(c.to_vec()))
        .collect();
    futures::executor::block_on(decode_stream(futures::stream::iter(reads)).collect())
}

/// The events for every split in 1, 2, 3, 7, 64 and the whole body, checked to agree.
fn decode_all_splits(body: &str) -> Vec<Result<ModelStreamEvent, ModelError>> {
    let whole = decode(body, body.len().max(1));
    for split in [1, 2, 3, 7, 64] {
        assert_eq!(decode(body, split), whole, "split {split}");
    }
    whole
}

fn finish(events: &[Result<ModelStreamEvent, ModelError>]) -> &ModelResponse {
    match events.last() {
        Some(Ok(ModelStreamEvent::Finish(turn))) => turn,
        other => panic!("no finish: {other:?}"),
    }
}

#[test]
fn text_deltas_with_ping_and_unknown_events() {
    let body = start(basic_usage())
        + &event(json!({"type": "ping"}))
        + &block_start(0, json!({"type": "text", "text": ""}))
        + &text(0, "Hel")
        + &event(json!({"type": "ping"}))
        + &text(0, "lo, wörld")
        + &event(json!({"type": "future_event", "x": 1}))
        + &stop(0)
        + &end("end_turn", json!({"output_tokens": 4}));
    let events = decode_all_splits(&body);
    assert_eq!(
        events[..2],
        [
            Ok(ModelStreamEvent::TextDelta("Hel".into())),
            Ok(ModelStreamEvent::TextDelta("lo, wörld".into())),
        ]
    );
    let turn = finish(&events);
    assert_eq!(turn.message.text, "Hello, wörld");
    assert_eq!(turn.finish_reason, FinishReason::Stop);
    assert_eq!(turn.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    assert_eq!(turn.id.as_deref(), Some("msg_01S"));
    assert_eq!(events.len(), 3);
}

#[test]
fn thinking_with_a_signature_delta_and_redacted_thinking() {
    let body = start(basic_usage())
        + &block_start(0, json!({"type": "thinking", "thinking": ""}))
        + &delta(0, json!({"type": "thinking_delta", "thinking": "Let me "}))
        + &delta(0, json!({"type": "thinking_delta", "thinking": "add."}))
        + &delta(0, json!({"type": "signature_delta", "signature": "partial"}))
        // A second signature replaces the first.
        + &delta(0, json!({"type": "signature_delta", "signature": "EqQBCkgIARAB-final"}))
        + &stop(0)
        + &block_start(1, json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"}))
        + &stop(1)
        + &block_start(2, json!({"type": "text", "text": ""}))
        + &text(2, "42")
        + &stop(2)
        + &end("end_turn", json!({"output_tokens": 30}));
    let events = decode_all_splits(&body);
    assert_eq!(
        events[..3],
        [
            Ok(ModelStreamEvent::ReasoningDelta("Let me ".into())),
            Ok(ModelStreamEvent::ReasoningDelta("add.".into())),
            Ok(ModelStreamEvent::TextDelta("42".into())),
        ]
    );
    let turn = finish(&events);
    assert_eq!(
        turn.message.reasoning,
        [
            Reasoning {
                text: "Let me add.".into(),
                signature: Some("EqQBCkgIARAB-final".into())
            },
            Reasoning {
                text: String::new(),
                signature: Some("redacted_thinking:EmwKAhgBEgy3va3p".into())
            },
        ]
    );
}

#[test]
fn two_tool_calls_with_interleaved_input_json_deltas() {
    // Text at index 0, then two tool_use blocks whose fragments interleave, split mid-token
    // and mid-escape.
    let body = start(basic_usage())
        + &block_start(0, json!({"type": "text", "text": ""}))
        + &text(0, "Both at once.")
        + &stop(0)
        + &block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_01A", "name": "add", "input": {}}),
        )
        + &block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_01B", "name": "echo", "input": {}}),
        )
        + &json_part(1, "{\"a\": 4")
        + &json_part(2, "")
        + &json_part(2, "{\"s\": \"caf\\u00")
        + &json_part(1, "0, \"b\"")
        + &json_part(2, "e9 \\\"x\\\"\"}")
        + &json_part(1, ": 2}")
        + &stop(2)
        + &stop(1)
        + &block_start(
            3,
            json!({"type": "tool_use", "id": "toolu_01C", "name": "clock", "input": {}}),
        )
        + &stop(3)
        + &end("tool_use", json!({"output_tokens": 80}));
    let events = decode_all_splits(&body);
    let deltas: Vec<_> = events[..events.len() - 1]
        .iter()
        .map(|e| e.clone().unwrap())
        .collect();
    assert_eq!(
        deltas,
        [
            ModelStreamEvent::TextDelta("Both at once.".into()),
            ModelStreamEvent::ToolCallStart {
                index: 0,
                id: "toolu_01A".into(),
                name: "add".into()
            },
            ModelStreamEvent::ToolCallStart {
                index: 1,
                id: "toolu_01B".into(),
                name: "echo".into()
            },
            ModelStreamEvent::ToolCallDelta {
                index: 0,
                arguments: "{\"a\": 4".into()
            },
            ModelStreamEvent::ToolCallDelta {
                index: 1,
                arguments: "{\"s\": \"caf\\u00".into()
            },
            ModelStreamEvent::ToolCallDelta {
                index: 0,
                arguments: "0, \"b\"".into()
            },
            ModelStreamEvent::ToolCallDelta {
                index: 1,
                arguments: "e9 \\\"x\\\"\"}".into()
            },
            ModelStreamEvent::ToolCallDelta {
                index: 0,
                arguments: ": 2}".into()
            },
            ModelStreamEvent::ToolCallStart {
                index: 2,
                id: "toolu_01C".into(),
                name: "clock".into()
            },
        ]
    );
    let turn = finish(&events);
    let calls = &turn.message.tool_calls;
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].raw_arguments, "{\"a\": 40, \"b\": 2}");
    assert_eq!(calls[0].arguments().unwrap(), json!({"a": 40, "b": 2}));
    assert_eq!(calls[1].arguments().unwrap(), json!({"s": "café \"x\""}));
    // No fragment: the input stays `{}`.
    assert_eq!(calls[2].raw_arguments, "");
    assert_eq!(calls[2].arguments().unwrap(), json!({}));
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(turn.message.text, "Both at once.");
}

#[test]
fn tool_use_blocks_started_out_of_index_order_keep_the_content_order() {
    // The API starts blocks in content order; a gateway that starts block 2 before block 1
    // still gets its calls back in the order of the message's content.
    let body = start(basic_usage())
        + &block_start(0, json!({"type": "text", "text": ""}))
        + &text(0, "Two calls.")
        + &stop(0)
        + &block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_01B", "name": "clock", "input": {}}),
        )
        + &block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_01A", "name": "add", "input": {}}),
        )
        + &json_part(1, "{\"a\": 1, \"b\": 2}")
        + &stop(1)
        + &stop(2)
        + &end("tool_use", json!({"output_tokens": 40}));
    let events = decode_all_splits(&body);
    let starts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Ok(ModelStreamEvent::ToolCallStart { index, id, .. }) => Some((*index, id.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [(0, "toolu_01B".to_string()), (1, "toolu_01A".to_string())],
        "events number calls as they start"
    );
    assert_eq!(
        events.iter().find_map(|e| match e {
            Ok(ModelStreamEvent::ToolCallDelta { index, arguments }) =>
                Some((*index, arguments.clone())),
            _ => None,
        }),
        Some((1, "{\"a\": 1, \"b\": 2}".to_string())),
        "a delta names its call by the start's index"
    );
    let turn = finish(&events);
    let ids: Vec<_> = turn
        .message
        .tool_calls
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["toolu_01A", "toolu_01B"], "block index order");
    assert_eq!(
        turn.message.tool_calls[0].arguments().unwrap(),
        json!({"a": 1, "b": 2})
    );
}

#[test]
fn usage_is_merged_from_message_start_and_message_delta_without_double_counting() {
    let start_usage = json!({"input_tokens": 5, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000, "output_tokens": 1});
    let expected = Usage {
        input_tokens: Some(3205),
        output_tokens: Some(57),
        cache_read_tokens: Some(3000),
        cache_write_tokens: Some(200),
        reasoning_tokens: None,
    };
    let body = |end_usage: Value| {
        start(start_usage.clone())
            + &block_start(0, json!({"type": "text", "text": ""}))
            + &text(0, "ok")
            + &stop(0)
            + &end("end_turn", end_usage)
    };
    // The classic shape: only output_tokens in message_delta.
    let events = decode_all_splits(&body(json!({"output_tokens": 57})));
    assert_eq!(finish(&events).usage, expected);
    // Newer API versions repeat the (cumulative) input figures: still counted once.
    let events = decode_all_splits(&body(json!({
        "input_tokens": 5, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000, "output_tokens": 57
    })));
    assert_eq!(finish(&events).usage, expected);
}

#[test]
fn an_overloaded_error_mid_stream_is_retryable_and_ends_the_stream() {
    let body = start(basic_usage())
        + &block_start(0, json!({"type": "text", "text": ""}))
        + &text(0, "Partial")
        + &event(
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
        + &text(0, " never read");
    let events = decode_all_splits(&body);
    assert_eq!(events[0], Ok(ModelStreamEvent::TextDelta("Partial".into())));
    let err = events[1].clone().unwrap_err();
    // Trigger: this error read as HTTP 529, like an overload answered before the stream.
    assert_eq!(
        err,
        ModelError::Stream {
            provider_type: Some("overloaded_error".into()),
            code: None,
            invalid_request: None,
            retryable: true,
            message: "Overloaded".into(),
        }
    );
    assert_eq!(err.status(), Some(200));
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the provider reported an error mid-stream (HTTP 200, type overloaded_error): \
         Overloaded; try again"
    );
    assert_eq!(events.len(), 2, "nothing after the error");
}

#[test]
fn an_invalid_request_error_mid_stream_is_not_retryable_and_keeps_its_kind() {
    let body = start(basic_usage())
        + &block_start(0, json!({"type": "text", "text": ""}))
        + &text(0, "Partial")
        + &event(json!({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum"
        }}));
    let events = decode_all_splits(&body);
    let err = events[1].clone().unwrap_err();
    assert_eq!(
        err,
        ModelError::Stream {
            provider_type: Some("invalid_request_error".into()),
            code: None,
            invalid_request: Some(InvalidRequestKind::ContextWindowExceeded),
            retryable: false,
            message: "prompt is too long: 208310 tokens > 200000 maximum".into(),
        }
    );
    assert!(err.is_context_window_exceeded());
    assert!(!err.is_retryable());
    assert_eq!(err.status(), Some(200));
}

#[test]
fn a_cut_stream_is_truncated_and_keeps_no_tool_call() {
    let head = start(basic_usage())
        + &block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_01A", "name": "add", "input": {}}),
        )
        + &json_part(0, "{\"a\": 1, \"b\": 2}")
        + &stop(0);
    // Cut at an event boundary before message_delta.
    let events = decode_all_splits(&head);
    let err = events.last().unwrap().clone().unwrap_err();
    assert!(matches!(err, ModelError::Truncated(_)), "{err:?}");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(ModelStreamEvent::Finish(_))))
    );
    // Cut inside an event.
    let full = head + &end("tool_use", json!({"output_tokens": 9}));
    let cut = &full[..full.len() - 30];
    let err = decode(cut, 5).last().unwrap().clone().unwrap_err();
    assert!(matches!(err, ModelError::Truncated(_)), "{err:?}");
    // The whole stream is fine.
    assert_eq!(finish(&decode(&full, 5)).message.tool_calls.len(), 1);
}

#[tokio::test]
async fn the_adapter_streams_retries_before_the_stream_and_not_after() {
    let good = start(basic_usage())
        + &block_start(0, json!({"type": "text", "text": ""}))
        + &text(0, "4")
        + &text(0, "2")
        + &stop(0)
        + &end("end_turn", json!({"output_tokens": 2}));
    let fake = FakeMessages::start([
        fake::error(529, "overloaded_error", "Overloaded").insert_header("retry-after", "0.01"),
        fake::event_stream(good),
    ])
    .await;
    let model = builder(&fake.base_url())
        .max_retries(1)
        .retry_min_delay(Duration::from_millis(1))
        .build()
        .unwrap();
    let options = GenerationOptions::default();
    let history = [Message::user("What is 40+2?")];
    let events: Vec<_> = model
        .stream(request(&prefix(), &history, &options))
        .collect()
        .await;
    assert_eq!(
        events[..2],
        [
            Ok(ModelStreamEvent::TextDelta("4".into())),
            Ok(ModelStreamEvent::TextDelta("2".into())),
        ]
    );
    assert_eq!(finish(&events).message.text, "42");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].json()["stream"], true);
    assert_eq!(requests[1].header("accept"), Some("text/event-stream"));

    // An error after the stream began is returned, not retried.
    let broken = start(basic_usage())
        + &event(
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        );
    let fake = FakeMessages::start([fake::event_stream(broken), fake::event_stream("")]).await;
    let model = builder(&fake.base_url()).max_retries(3).build().unwrap();
    let events: Vec<_> = model
        .stream(request(&prefix(), &history, &options))
        .collect()
        .await;
    assert!(
        matches!(events.last(), Some(Err(e)) if e.is_retryable()),
        "{events:?}"
    );
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(fake.remaining(), 1);
}

#[test]
fn a_tool_call_cut_by_max_tokens_is_not_returned_as_a_call() {
    // Trigger: max_tokens reached mid-arguments: partial_json `{"path":"no`, then
    // stop_reason "max_tokens". A complete earlier call of the same turn stays.
    let cut = block_start(
        1,
        json!({"type": "tool_use", "id": "toolu_cut", "name": "read", "input": {}}),
    ) + &json_part(1, "{\"path\":\"no")
        + &stop(1)
        + &end("max_tokens", json!({"output_tokens": 4096}));
    let body = start(basic_usage()) + &cut;
    let events = decode_all_splits(&body);
    let turn = finish(&events);
    assert_eq!(turn.finish_reason, FinishReason::Length);
    assert!(turn.message.tool_calls.is_empty());

    let body = start(basic_usage())
        + &block_start(
            0,
            json!({"type": "tool_use", "id": "toolu_ok", "name": "read", "input": {}}),
        )
        + &json_part(0, "{\"path\":\"a.txt\"}")
        + &stop(0)
        + &cut;
    let events = decode_all_splits(&body);
    let turn = finish(&events);
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    let ids: Vec<_> = turn
        .message
        .tool_calls
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["toolu_ok"]);
}

#[test]
fn a_streamed_refusal_ends_with_an_error_not_an_empty_finish() {
    // Trigger: message_delta with stop_reason "refusal" and no text.
    let body = start(basic_usage()) + &end("refusal", json!({"output_tokens": 0}));
    let events = decode_all_splits(&body);
    let Some(Err(ModelError::Other(message))) = events.last() else {
        panic!("{events:?}")
    };
    assert!(
        message.starts_with("Claude refused to answer (stop_reason \"refusal\"); change"),
        "{message}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(ModelStreamEvent::Finish(_))))
    );
}
