//! `OpenAiCompatible::stream` over loopback fakes that speak the real streaming format:
//! one test per stream shape: framing (over the hand-rolled split server so network
//! reads really split anywhere) and chunk assembly, each asserting the exact
//! assembled text, reasoning, tool calls (ids, names, raw and parsed arguments), usage and
//! finish reason; plus `HaloAgent::stream_text` end to end.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use halo_adapters::openai::OpenAiCompatible;
use halo_core::tool::{NoArgs, Tool, ToolError, ToolOutput};
use halo_core::{
    AgentEvent, FinishReason, GenerationOptions, HaloAgent, HaloError, InvalidRequestKind, Message,
    ModelAdapter, ModelError, ModelRequest, ModelResponse, ModelStreamEvent, ToolCall, Usage,
};
use serde_json::{Value, json};

use super::fake::{
    Completion, FakeChat, Shape, deepseek_usage, error_response, openai_usage, raw_parts,
};
use super::stream_fake::{
    Ending, Reply, SplitServer, Turn, args, byte_pieces, char_pieces, sse_response, start,
};
use super::{Add, Clock, KEY, ODD_ARGS, assert_cache_invariants, few_shot, prefix};

/// What one streamed call gave: its deltas, and the finish or the error that ended it.
#[derive(Debug)]
struct Streamed {
    deltas: Vec<ModelStreamEvent>,
    result: Result<ModelResponse, ModelError>,
}

impl Streamed {
    fn turn(&self) -> &ModelResponse {
        match &self.result {
            Ok(t) => t,
            Err(e) => panic!("the stream failed: {e:?}; deltas {:?}", self.deltas),
        }
    }

    fn error(&self) -> &ModelError {
        match &self.result {
            Err(e) => e,
            Ok(t) => panic!("the stream finished: {t:?}"),
        }
    }

    fn text(&self) -> String {
        self.deltas
            .iter()
            .filter_map(|d| match d {
                ModelStreamEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    fn reasoning(&self) -> String {
        self.deltas
            .iter()
            .filter_map(|d| match d {
                ModelStreamEvent::ReasoningDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Runs one streaming call and checks the stream contract: at most one `Finish`, as the
/// last item; an error ends the stream; the deltas add up to the finished turn.
async fn stream_call(model: &OpenAiCompatible) -> Streamed {
    let history = [Message::user("hi")];
    let prefix = prefix();
    let options = GenerationOptions::default();
    let items: Vec<_> = model
        .stream(ModelRequest::new(&prefix, &history, &options))
        .collect()
        .await;
    let mut deltas = Vec::new();
    let mut result = None;
    for (i, item) in items.into_iter().enumerate() {
        assert!(result.is_none(), "item {i} after the stream ended");
        match item {
            Ok(ModelStreamEvent::Finish(turn)) => result = Some(Ok(turn)),
            Ok(delta) => deltas.push(delta),
            Err(e) => result = Some(Err(e)),
        }
    }
    let streamed = Streamed {
        deltas,
        result: result.unwrap_or_else(|| {
            Err(ModelError::Other(
                "the stream ended with neither Finish nor an error".into(),
            ))
        }),
    };
    if let Ok(turn) = &streamed.result {
        assert_eq!(streamed.text(), turn.message.text, "text deltas add up");
        assert_eq!(
            streamed.reasoning(),
            turn.message.reasoning_text().unwrap_or_default(),
            "reasoning deltas add up"
        );
        let mut calls: Vec<(String, String, String)> = Vec::new();
        for d in &streamed.deltas {
            match d {
                ModelStreamEvent::ToolCallStart { index, id, name } => {
                    assert_eq!(*index, calls.len(), "calls start in order of their index");
                    calls.push((id.clone(), name.clone(), String::new()));
                }
                ModelStreamEvent::ToolCallDelta { index, arguments } => {
                    calls[*index].2.push_str(arguments);
                }
                _ => {}
            }
        }
        let finished: Vec<_> = turn
            .message
            .tool_calls
            .iter()
            .map(|c| {
                let text = |s: &halo_core::SmolStr| s.to_string();
                (text(&c.id), text(&c.name), text(&c.raw_arguments))
            })
            .collect();
        // Per call: the turn orders calls by wire index, the events by first appearance.
        let (mut by_id, mut finished) = (calls, finished);
        by_id.sort();
        finished.sort();
        assert_eq!(by_id, finished, "tool-call deltas add up");
    }
    streamed
}

fn deepseek(base_url: String) -> OpenAiCompatible {
    OpenAiCompatible::deepseek("deepseek-chat")
        .api_key(KEY)
        .base_url(base_url)
        .max_retries(0)
        .build()
        .unwrap()
}

fn bare(base_url: String) -> OpenAiCompatible {
    OpenAiCompatible::custom(base_url, "qwen2.5-7b-instruct")
        .max_retries(0)
        .build()
        .unwrap()
}

fn assert_call(call: &ToolCall, id: &str, name: &str, raw: &str, parsed: Value) {
    assert_eq!(
        (
            call.id.as_str(),
            call.name.as_str(),
            call.raw_arguments.as_str()
        ),
        (id, name, raw)
    );
    assert_eq!(
        call.arguments().unwrap(),
        parsed,
        "parsed arguments of {id}"
    );
}

// ---------------------------------------------------------------------------------------
// Framing, over the split server. One reference turn, read through every framing.

const REASONING: &str = "The user wants 温度 in ℃; call the tool.";
const TEXT: &str = "Checking: 温度 ≈ 25℃ …";
const WEATHER_ARGS: &str = r#"{"city": "東京", "unit": "℃", "note": "a \"quoted\"\nline"}"#;

/// A DeepSeek turn: reasoning, text and one tool call, in small pieces; usage on the finish
/// chunk; `[DONE]`.
fn reference_turn() -> Turn {
    let mut turn = Turn::new(Shape::DeepSeek);
    for piece in char_pieces(REASONING, 7) {
        turn = turn.reasoning(&piece);
    }
    for piece in char_pieces(TEXT, 5) {
        turn = turn.text(&piece);
    }
    turn.calls(vec![start(0, "call_00_weather", "weather")])
        .args_in_pieces(0, WEATHER_ARGS, 4)
        .finish_with_usage("tool_calls", deepseek_usage(1024, 76, 42))
        .done()
}

fn assert_reference(s: &Streamed) {
    let turn = s.turn();
    assert_eq!(turn.message.text, TEXT);
    assert_eq!(turn.message.reasoning_text().as_deref(), Some(REASONING));
    assert_eq!(turn.message.tool_calls.len(), 1);
    assert_call(
        &turn.message.tool_calls[0],
        "call_00_weather",
        "weather",
        WEATHER_ARGS,
        json!({"city": "東京", "unit": "℃", "note": "a \"quoted\"\nline"}),
    );
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        turn.usage,
        Usage {
            input_tokens: Some(1100),
            output_tokens: Some(42),
            cache_read_tokens: Some(1024),
            cache_write_tokens: None,
            reasoning_tokens: None,
        }
    );
    assert_eq!(turn.model.as_deref(), Some("deepseek-chat"));
    assert_eq!(turn.id.as_deref(), Some("chatcmpl-stream"));
}

/// Serves `reply` once and streams one call through it.
async fn over_split_server(reply: Reply) -> Streamed {
    let server = SplitServer::start([reply]).await;
    let got = stream_call(&deepseek(server.base_url())).await;
    assert_eq!(server.requests().len(), 1);
    server.finish();
    got
}

#[tokio::test]
async fn lf_crlf_and_cr_line_endings_give_the_same_turn() {
    for ending in [Ending::Lf, Ending::CrLf, Ending::Cr] {
        let body = reference_turn().body(ending);
        // 13-byte reads split terminators, JSON and UTF-8 characters alike.
        let got = over_split_server(Reply::Pieces(byte_pieces(&body, 13))).await;
        assert_reference(&got);
    }
}

#[tokio::test]
async fn a_cr_and_lf_split_across_reads_is_one_terminator() {
    // Each chunk over several `data:` lines, and every read ends right after a CR: were the
    // LF at the start of the next read a second terminator, each line would end its event
    // and the halves would not parse.
    let body = reference_turn().body_multiline(Ending::CrLf);
    let mut pieces = vec![Vec::new()];
    for byte in body {
        pieces.last_mut().unwrap().push(byte);
        if byte == b'\r' {
            pieces.push(Vec::new());
        }
    }
    assert!(pieces.len() > 100);
    let got = over_split_server(Reply::Pieces(pieces)).await;
    assert_reference(&got);
}

#[tokio::test]
async fn keep_alive_comments_and_data_without_a_space_are_read() {
    // DeepSeek's queueing keep-alives before the first byte of data, and between events.
    let turn = reference_turn();
    let body = turn.body_without_space(Ending::Lf);
    let text = String::from_utf8(body).unwrap();
    let mut with_comments = String::from(": keep-alive\n\n: keep-alive\n\n");
    for event in text.split_inclusive("\n\n") {
        with_comments.push_str(event);
        with_comments.push_str(": keep-alive\n\n");
    }
    assert!(with_comments.contains("data:{\""));
    let got = over_split_server(Reply::Pieces(byte_pieces(with_comments.as_bytes(), 64))).await;
    assert_reference(&got);
}

#[tokio::test]
async fn multi_line_data_is_joined_with_newlines() {
    let body = reference_turn().body_multiline(Ending::Lf);
    assert!(String::from_utf8_lossy(&body).contains("data: {\ndata:   \"choices\""));
    let got = over_split_server(Reply::Pieces(byte_pieces(&body, 100))).await;
    assert_reference(&got);
}

#[tokio::test]
async fn named_message_events_are_read_and_an_error_event_fails() {
    let text = String::from_utf8(reference_turn().body(Ending::Lf)).unwrap();
    let named = text.replace("data: ", "event: message\ndata: ");
    let got = over_split_server(Reply::Pieces(byte_pieces(named.as_bytes(), 50))).await;
    assert_reference(&got);

    let body = Turn::new(Shape::OpenAi)
        .text("Hel")
        .raw("event: error\ndata: {\"error\":{\"message\":\"Overloaded\",\"type\":\"overloaded_error\"}}\n\n")
        .body(Ending::Lf);
    let got = over_split_server(Reply::Pieces(byte_pieces(&body, 50))).await;
    assert_eq!(got.text(), "Hel");
    assert_eq!(
        got.error(),
        &ModelError::Stream {
            provider_type: Some("overloaded_error".into()),
            code: None,
            invalid_request: None,
            retryable: true,
            message: "Overloaded".into(),
        }
    );
    assert!(got.error().is_retryable());
    assert_eq!(got.error().status(), Some(200));
}

#[tokio::test]
async fn utf8_characters_split_across_reads_arrive_whole() {
    // One-byte reads split every multi-byte character of the reasoning, text and arguments.
    let body = Turn::new(Shape::DeepSeek)
        .reasoning(REASONING)
        .text(TEXT)
        .calls(vec![start(0, "call_00_weather", "weather")])
        .calls(vec![args(0, WEATHER_ARGS)])
        .finish_with_usage("tool_calls", deepseek_usage(1024, 76, 42))
        .done()
        .body(Ending::CrLf);
    let got = over_split_server(Reply::Pieces(byte_pieces(&body, 1))).await;
    assert_reference(&got);
    assert!(got.deltas.iter().all(|d| match d {
        ModelStreamEvent::TextDelta(t) | ModelStreamEvent::ReasoningDelta(t) =>
            !t.contains('\u{FFFD}'),
        _ => true,
    }));
}

#[tokio::test]
async fn done_present_or_absent_gives_the_same_turn() {
    let with_done = reference_turn().body(Ending::Lf);
    let text = String::from_utf8(with_done.clone()).unwrap();
    let without_done = text.replace("data: [DONE]\n\n", "");
    assert_ne!(without_done.len(), text.len());
    for body in [with_done, without_done.into_bytes()] {
        let got = over_split_server(Reply::Pieces(byte_pieces(&body, 33))).await;
        assert_reference(&got);
    }
    // Nothing after [DONE] is read.
    let mut after = reference_turn().body(Ending::Lf);
    after.extend_from_slice(b"data: {not json\n\n");
    let got = over_split_server(Reply::Pieces(byte_pieces(&after, 33))).await;
    assert_reference(&got);
}

#[tokio::test]
async fn error_payloads_mid_stream_keep_status_200_with_type_and_code() {
    // Trigger: a mid-stream `server_error` read as HTTP 500, indistinguishable from an HTTP
    // 500 answered before the stream.
    let stream = |provider_type: Option<&str>,
                  code: Option<&str>,
                  invalid_request: Option<InvalidRequestKind>,
                  retryable: bool,
                  message: &str| ModelError::Stream {
        provider_type: provider_type.map(Into::into),
        code: code.map(Into::into),
        invalid_request,
        retryable,
        message: message.into(),
    };
    let cases: Vec<(&str, ModelError)> = vec![
        (
            r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}"#,
            stream(
                Some("server_error"),
                None,
                None,
                true,
                "The server had an error while processing your request.",
            ),
        ),
        (
            // vLLM: the status as a numeric code.
            r#"{"error":{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}}"#,
            stream(
                Some("BadRequestError"),
                Some("400"),
                Some(InvalidRequestKind::Other),
                false,
                "max_tokens is too large",
            ),
        ),
        (
            r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
            stream(
                Some("requests"),
                Some("rate_limit_exceeded"),
                None,
                true,
                "Rate limit reached",
            ),
        ),
        (
            // OpenAI's code for an over-long prompt, as its Responses stream reports it.
            r#"{"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model. Please adjust your input and try again.","param":"input"}}"#,
            stream(
                Some("invalid_request_error"),
                Some("context_length_exceeded"),
                Some(InvalidRequestKind::ContextWindowExceeded),
                false,
                "Your input exceeds the context window of this model. Please adjust your input and try again.",
            ),
        ),
        (
            // Newer llama-server: `data: {"error": …}` with its error type and HTTP code.
            r#"{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}"#,
            stream(
                Some("exceed_context_size_error"),
                Some("400"),
                Some(InvalidRequestKind::ContextWindowExceeded),
                false,
                "request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it",
            ),
        ),
        (
            r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
            stream(
                Some("insufficient_quota"),
                Some("insufficient_quota"),
                None,
                false,
                "You exceeded your current quota, please check your plan and billing details.",
            ),
        ),
        (
            r#"{"error":"something odd happened"}"#,
            stream(None, None, None, false, "something odd happened"),
        ),
    ];
    for (payload, expected) in cases {
        let body = Turn::new(Shape::OpenAi)
            .text("Partial ")
            .text("answer")
            .raw(&format!("data: {payload}\n\n"))
            .finish("stop")
            .done()
            .body(Ending::Lf);
        let got = over_split_server(Reply::Pieces(byte_pieces(&body, 40))).await;
        assert_eq!(got.text(), "Partial answer", "deltas before the error");
        assert_eq!(got.error(), &expected, "for {payload}");
        assert_eq!(got.error().status(), Some(200), "for {payload}");
    }
}

#[tokio::test]
async fn llama_cpp_timings_on_the_final_chunk_give_the_usage() {
    // Trigger: llama-server's final chunk with `timings` and no `usage` lost every count.
    let final_chunk = json!({
        "choices": [{"finish_reason": "stop", "index": 0, "delta": {}}],
        "created": 1_750_000_000,
        "id": "chatcmpl-llama",
        "model": "qwen2.5-7b-instruct",
        "system_fingerprint": "b6000-abcdef01",
        "object": "chat.completion.chunk",
        "timings": {
            "cache_n": 236, "prompt_n": 14, "prompt_ms": 51.2, "prompt_per_token_ms": 3.66,
            "prompt_per_second": 273.4, "predicted_n": 9, "predicted_ms": 80.1,
            "predicted_per_token_ms": 8.9, "predicted_per_second": 112.4
        }
    });
    let body = Turn::new(Shape::Bare)
        .text("from llama.cpp")
        .raw_chunk(final_chunk)
        .done()
        .body(Ending::Lf);
    let server = SplitServer::start([Reply::Pieces(byte_pieces(&body, 64))]).await;
    let got = stream_call(&bare(server.base_url())).await;
    server.finish();
    assert_eq!(
        got.turn().usage,
        Usage {
            input_tokens: Some(250),
            output_tokens: Some(9),
            cache_read_tokens: Some(236),
            cache_write_tokens: None,
            reasoning_tokens: None,
        }
    );
    assert_eq!(got.turn().finish_reason, FinishReason::Stop);
}

#[tokio::test]
async fn the_old_llama_cpp_error_field_line_is_an_error() {
    // Old llama-server: `error: {json}` instead of a data line, then [DONE].
    let body = Turn::new(Shape::Bare)
        .text("The")
        .raw("error: {\"code\":500,\"message\":\"the context is full\",\"type\":\"server_error\"}\n\n")
        .done()
        .body(Ending::Lf);
    let server = SplitServer::start([Reply::Pieces(byte_pieces(&body, 16))]).await;
    let got = stream_call(&bare(server.base_url())).await;
    server.finish();
    assert_eq!(got.text(), "The");
    assert_eq!(
        got.error(),
        &ModelError::Stream {
            provider_type: Some("server_error".into()),
            code: Some("500".into()),
            invalid_request: None,
            retryable: true,
            message: "the context is full".into(),
        }
    );
    assert_eq!(
        got.error().to_string(),
        "the provider reported an error mid-stream (HTTP 200, type server_error, code 500): \
         the context is full; try again"
    );
}

#[tokio::test]
async fn a_stream_cut_mid_event_is_truncated_and_never_finishes() {
    let body = reference_turn().body(Ending::Lf);
    let text = String::from_utf8_lossy(&body).into_owned();
    // Cut inside the finish chunk's data line.
    let cut_at = text.find("\"finish_reason\":\"tool_calls\"").unwrap();
    let partial = body[..cut_at].to_vec();

    // The connection drops inside an HTTP chunk: the body itself fails.
    let got = over_split_server(Reply::CutAfter(byte_pieces(&partial, 64))).await;
    assert!(
        matches!(got.error(), ModelError::Truncated(m) if m.starts_with("the connection failed mid-stream")),
        "{:?}",
        got.error()
    );
    assert!(got.error().is_retryable());
    assert_eq!(got.text(), TEXT, "deltas before the cut were delivered");

    // The body ends cleanly for HTTP, but in the middle of an event.
    let got = over_split_server(Reply::CloseDelimited(byte_pieces(&partial, 64))).await;
    assert!(
        matches!(got.error(), ModelError::Truncated(m) if m.contains("in the middle of an event")),
        "{:?}",
        got.error()
    );

    // The body ends at an event boundary, but before any finish_reason or [DONE].
    let at_boundary = text[..text.find("\"finish_reason\":\"tool_calls\"").unwrap()]
        .rfind("data: ")
        .unwrap();
    let got = over_split_server(Reply::CloseDelimited(byte_pieces(&body[..at_boundary], 64))).await;
    assert_eq!(
        got.error(),
        &ModelError::Truncated("the stream ended before a finish_reason or [DONE]".into())
    );
}

#[tokio::test]
async fn retries_stop_at_the_first_byte_of_the_body() {
    let body = reference_turn().body(Ending::Lf);
    let server = SplitServer::start([
        Reply::Status(
            503,
            r#"{"error":{"message":"Service busy","type":"server_error"}}"#.into(),
        ),
        Reply::CutAfter(byte_pieces(&body[..200], 50)),
    ])
    .await;
    let model = OpenAiCompatible::deepseek("deepseek-chat")
        .api_key(KEY)
        .base_url(server.base_url())
        .max_retries(3)
        .retry_min_delay(Duration::from_millis(1))
        .build()
        .unwrap();
    let got = stream_call(&model).await;
    assert!(matches!(got.error(), ModelError::Truncated(_)));
    assert_eq!(
        server.requests().len(),
        2,
        "the 503 was retried; the cut after the first byte was not"
    );
    server.finish();
}

#[tokio::test]
async fn keep_alives_do_not_extend_the_first_event_timeout() {
    // DeepSeek queueing: comments for a while, then the answer.
    let mut pieces: Vec<Vec<u8>> = (0..150).map(|_| b": keep-alive\n\n".to_vec()).collect();
    pieces.extend(byte_pieces(&reference_turn().body(Ending::Lf), 512));
    let server = SplitServer::start([Reply::Pieces(pieces.clone()), Reply::Pieces(pieces)]).await;
    let patient = deepseek(server.base_url());
    assert_reference(&stream_call(&patient).await);
    let impatient = OpenAiCompatible::deepseek("deepseek-chat")
        .api_key(KEY)
        .base_url(server.base_url())
        .max_retries(0)
        .first_event_timeout(Duration::from_millis(40))
        .build()
        .unwrap();
    let got = stream_call(&impatient).await;
    assert!(
        matches!(got.error(), ModelError::Transport(m) if m.starts_with("no stream event within 40 ms")),
        "{:?}",
        got.error()
    );
    assert!(got.deltas.is_empty());
    server.finish();
}

// ---------------------------------------------------------------------------------------
// Chunk assembly, over wiremock (whole bodies) unless the split matters.

#[tokio::test]
async fn openai_text_deltas_with_the_usage_chunk_after_the_finish() {
    let fake = FakeChat::start([Turn::new(Shape::OpenAi)
        .text("Hello")
        .text(", ")
        .text("world.")
        .finish("stop")
        // The empty-choices usage chunk must not clear the finish reason.
        .usage_chunk(json!({
            "prompt_tokens": 1300, "completion_tokens": 12, "total_tokens": 1312,
            "prompt_tokens_details": {"cached_tokens": 1152, "cache_write_tokens": 64},
            "completion_tokens_details": {"reasoning_tokens": 3}
        }))
        .done()
        .respond()])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .build()
        .unwrap();
    let got = stream_call(&model).await;
    fake.finish();
    assert_eq!(
        got.deltas,
        [
            ModelStreamEvent::TextDelta("Hello".into()),
            ModelStreamEvent::TextDelta(", ".into()),
            ModelStreamEvent::TextDelta("world.".into()),
        ]
    );
    let turn = got.turn();
    assert_eq!(turn.message.text, "Hello, world.");
    assert!(turn.message.tool_calls.is_empty() && turn.message.reasoning.is_empty());
    assert_eq!(turn.finish_reason, FinishReason::Stop);
    assert_eq!(
        turn.usage,
        Usage {
            input_tokens: Some(1300),
            output_tokens: Some(12),
            cache_read_tokens: Some(1152),
            cache_write_tokens: Some(64),
            reasoning_tokens: Some(3),
        }
    );
    assert_eq!(turn.model.as_deref(), Some("gpt-4o-mini-2024-07-18"));
}

#[tokio::test]
async fn deepseek_reasoning_deltas_and_usage_on_the_last_content_chunk() {
    let fake = FakeChat::start([Turn::new(Shape::DeepSeek)
        .reasoning("Two ")
        .reasoning("plus two.")
        .text("4")
        .finish_with_usage("stop", deepseek_usage(640, 12, 9))
        .done()
        .respond()])
    .await;
    let got = stream_call(&deepseek(fake.base_url())).await;
    fake.finish();
    assert_eq!(
        got.deltas,
        [
            ModelStreamEvent::ReasoningDelta("Two ".into()),
            ModelStreamEvent::ReasoningDelta("plus two.".into()),
            ModelStreamEvent::TextDelta("4".into()),
        ]
    );
    let turn = got.turn();
    assert_eq!(turn.message.text, "4");
    assert_eq!(
        turn.message.reasoning_text().as_deref(),
        Some("Two plus two.")
    );
    assert_eq!(turn.finish_reason, FinishReason::Stop);
    assert_eq!(turn.usage.input_tokens, Some(652));
    assert_eq!(turn.usage.cache_read_tokens, Some(640));
    assert_eq!(turn.usage.output_tokens, Some(9));
    assert_eq!(turn.usage.cache_write_tokens, None);
}

#[tokio::test]
async fn tool_call_arguments_split_at_every_character_are_kept_raw() {
    let raw = r#"{"path": "src/温度.rs", "text": "line1\nline2 \"q\" ℃", "n": [1, 2.5e3]}"#;
    let fake = FakeChat::start([Turn::new(Shape::OpenAi)
        .calls(vec![start(0, "call_w", "write")])
        .args_in_pieces(0, raw, 1)
        .finish("tool_calls")
        .usage_chunk(openai_usage(900, 40, 0))
        .done()
        .respond()])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .build()
        .unwrap();
    let got = stream_call(&model).await;
    fake.finish();
    let fragments = got
        .deltas
        .iter()
        .filter(|d| matches!(d, ModelStreamEvent::ToolCallDelta { .. }))
        .count();
    assert_eq!(fragments, raw.chars().count(), "one delta per fragment");
    let turn = got.turn();
    assert_call(
        &turn.message.tool_calls[0],
        "call_w",
        "write",
        raw,
        json!({"path": "src/温度.rs", "text": "line1\nline2 \"q\" ℃", "n": [1, 2500.0]}),
    );
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(turn.usage.input_tokens, Some(900));
    assert_eq!(turn.usage.cache_read_tokens, Some(0));
}

#[tokio::test]
async fn parallel_calls_interleave_within_and_across_chunks() {
    let fake = FakeChat::start([Turn::new(Shape::OpenAi)
        .calls(vec![start(0, "call_a", "add"), start(1, "call_b", "clock")])
        .calls(vec![args(1, "{"), args(0, "{\"a\":")])
        .calls(vec![args(0, "1,\"b\":2}")])
        .calls(vec![
            args(1, "}"),
            start(2, "call_c", "add"),
            args(2, "{\"a\":3,"),
        ])
        .calls(vec![args(2, "\"b\":4}")])
        .finish("tool_calls")
        .usage_chunk(openai_usage(100, 30, 0))
        .done()
        .respond()])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .build()
        .unwrap();
    let got = stream_call(&model).await;
    fake.finish();
    let start_ev = |index, id: &str, name: &str| ModelStreamEvent::ToolCallStart {
        index,
        id: id.into(),
        name: name.into(),
    };
    let delta = |index, a: &str| ModelStreamEvent::ToolCallDelta {
        index,
        arguments: a.into(),
    };
    assert_eq!(
        got.deltas,
        [
            start_ev(0, "call_a", "add"),
            start_ev(1, "call_b", "clock"),
            delta(1, "{"),
            delta(0, "{\"a\":"),
            delta(0, "1,\"b\":2}"),
            delta(1, "}"),
            start_ev(2, "call_c", "add"),
            delta(2, "{\"a\":3,"),
            delta(2, "\"b\":4}"),
        ]
    );
    let calls = &got.turn().message.tool_calls;
    assert_eq!(calls.len(), 3);
    assert_call(
        &calls[0],
        "call_a",
        "add",
        "{\"a\":1,\"b\":2}",
        json!({"a": 1, "b": 2}),
    );
    assert_call(&calls[1], "call_b", "clock", "{}", json!({}));
    assert_call(
        &calls[2],
        "call_c",
        "add",
        "{\"a\":3,\"b\":4}",
        json!({"a": 3, "b": 4}),
    );
    assert_eq!(got.turn().finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn parallel_calls_started_out_of_index_order_keep_the_providers_index_order() {
    // Trigger: index 1 started before index 0, and the turn listed call_b first.
    let fake = FakeChat::start([Turn::new(Shape::OpenAi)
        .calls(vec![start(1, "call_b", "clock")])
        .calls(vec![start(0, "call_a", "add"), args(1, "{}")])
        .calls(vec![args(0, "{\"a\":1,\"b\":2}")])
        .calls(vec![
            start(2, "call_c", "add"),
            args(2, "{\"a\":3,\"b\":4}"),
        ])
        .finish("tool_calls")
        .usage_chunk(openai_usage(100, 30, 0))
        .done()
        .respond()])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .build()
        .unwrap();
    let got = stream_call(&model).await;
    fake.finish();
    // The events number calls as they appear, so each delta names its call from the start.
    let starts: Vec<_> = got
        .deltas
        .iter()
        .filter_map(|d| match d {
            ModelStreamEvent::ToolCallStart { index, id, .. } => Some((*index, id.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [(0, "call_b"), (1, "call_a"), (2, "call_c")]);
    let calls = &got.turn().message.tool_calls;
    let ids: Vec<_> = calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_a", "call_b", "call_c"], "wire index order");
    assert_call(
        &calls[0],
        "call_a",
        "add",
        "{\"a\":1,\"b\":2}",
        json!({"a": 1, "b": 2}),
    );
    assert_call(&calls[1], "call_b", "clock", "{}", json!({}));
    assert_eq!(got.turn().finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn ollama_parallel_calls_at_index_zero_with_empty_or_absent_arguments() {
    // Ollama: every call at index 0, told apart by id; arguments "" or absent; the turn
    // ends with "stop" although it called tools.
    let fake = FakeChat::start([Turn::new(Shape::Bare)
        .calls(vec![start(0, "call_x", "clock")])
        .calls(vec![json!({"index": 0, "id": "call_y", "type": "function", "function": {"name": "clock"}})])
        .calls(vec![json!({"index": 0, "id": "call_z", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1,\"b\":2}"}})])
        .finish("stop")
        .done()
        .respond()])
    .await;
    let got = stream_call(&bare(fake.base_url())).await;
    fake.finish();
    let turn = got.turn();
    let calls = &turn.message.tool_calls;
    assert_eq!(calls.len(), 3);
    assert_call(&calls[0], "call_x", "clock", "", json!({}));
    assert_call(&calls[1], "call_y", "clock", "", json!({}));
    assert_call(
        &calls[2],
        "call_z",
        "add",
        "{\"a\":1,\"b\":2}",
        json!({"a": 1, "b": 2}),
    );
    assert_eq!(
        calls[0].replay_arguments(),
        "{}",
        "\"\" is replayed as {{}}"
    );
    assert_eq!(
        turn.finish_reason,
        FinishReason::ToolCalls,
        "stop with calls"
    );
    assert_eq!(
        turn.usage,
        Usage::default(),
        "no usage sent: unknown, not 0"
    );
    assert_eq!(turn.message.text, "");
}

#[tokio::test]
async fn finish_reasons_are_mapped() {
    let cases = [
        (
            Turn::new(Shape::OpenAi).text("cut").finish("length"),
            FinishReason::Length,
        ),
        (
            Turn::new(Shape::OpenAi).text("").finish("content_filter"),
            FinishReason::ContentFilter,
        ),
        (
            Turn::new(Shape::OpenAi)
                .calls(vec![start(0, "c1", "clock")])
                .finish("tool_calls"),
            FinishReason::ToolCalls,
        ),
        (
            Turn::new(Shape::Bare).text("ok").finish("stop"),
            FinishReason::Stop,
        ),
        (
            Turn::new(Shape::Bare).text("hm").finish("eos_token"),
            FinishReason::Other("eos_token".into()),
        ),
    ];
    let fake = FakeChat::start(cases.iter().map(|(t, _)| t.clone().done().respond())).await;
    let model = bare(fake.base_url());
    for (_, expected) in &cases {
        let got = stream_call(&model).await;
        assert_eq!(&got.turn().finish_reason, expected);
    }
    fake.finish();
}

#[tokio::test]
async fn insufficient_system_resource_is_a_retryable_truncation() {
    let fake = FakeChat::start([Turn::new(Shape::DeepSeek)
        .text("The answer")
        .finish_with_usage("insufficient_system_resource", deepseek_usage(0, 50, 3))
        .done()
        .respond()])
    .await;
    let got = stream_call(&deepseek(fake.base_url())).await;
    fake.finish();
    assert_eq!(got.text(), "The answer");
    assert!(
        matches!(got.error(), ModelError::Truncated(m) if m.starts_with("insufficient_system_resource")),
        "{:?}",
        got.error()
    );
    assert!(got.error().is_retryable());
}

#[tokio::test]
async fn http_errors_before_the_stream_map_like_generate_and_are_retried() {
    let fake = FakeChat::start([
        error_response(
            429,
            "Rate limit reached",
            "requests",
            Some("rate_limit_exceeded"),
        )
        .insert_header("retry-after-ms", "5"),
        Turn::new(Shape::OpenAi)
            .text("ok")
            .finish("stop")
            .done()
            .respond(),
        error_response(
            401,
            "Incorrect API key provided",
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
        error_response(
            401,
            "Incorrect API key provided",
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
        error_response(402, "Insufficient Balance", "unknown_error", None),
    ])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .max_retries(1)
        .retry_min_delay(Duration::from_millis(1))
        .build()
        .unwrap();
    let got = stream_call(&model).await;
    assert_eq!(got.turn().message.text, "ok", "the 429 was retried");
    assert_eq!(fake.requests().len(), 2);

    let streamed = stream_call(&model).await;
    let history = [Message::user("hi")];
    let prefix = prefix();
    let generated = model
        .generate(ModelRequest::new(
            &prefix,
            &history,
            &GenerationOptions::default(),
        ))
        .await
        .unwrap_err();
    assert_eq!(streamed.error(), &generated, "the same mapping as generate");
    assert!(matches!(
        generated,
        ModelError::Authentication { status: 401, .. }
    ));

    let got = stream_call(&model).await;
    assert!(
        matches!(
            got.error(),
            ModelError::InsufficientBalance { status: 402, .. }
        ),
        "{:?}",
        got.error()
    );
    assert_eq!(
        fake.requests().len(),
        5,
        "non-retryable errors are not retried"
    );
    fake.finish();
}

#[tokio::test]
async fn the_streamed_turn_equals_the_generated_turn() {
    let timings = json!({"cache_n": 236, "prompt_n": 20, "predicted_n": 5});
    let pairs: Vec<(Completion, Turn)> = vec![
        (
            Completion::new(Shape::OpenAi)
                .text("Hello, world.")
                .usage(openai_usage(1200, 20, 1024)),
            Turn::new(Shape::OpenAi)
                .text("Hello, ")
                .text("world.")
                .finish("stop")
                .usage_chunk(openai_usage(1200, 20, 1024)),
        ),
        (
            Completion::new(Shape::DeepSeek)
                .reasoning(REASONING)
                .text(TEXT)
                .tool_call("call_00_weather", "weather", WEATHER_ARGS)
                .usage(deepseek_usage(1024, 76, 42)),
            reference_turn(),
        ),
        (
            Completion::new(Shape::OpenAi)
                .tool_call("call_1", "add", ODD_ARGS)
                .tool_call("call_2", "clock", "")
                .usage(openai_usage(300, 30, 0)),
            Turn::new(Shape::OpenAi)
                .calls(vec![start(0, "call_1", "add"), start(1, "call_2", "clock")])
                .args_in_pieces(0, ODD_ARGS, 3)
                .finish("tool_calls")
                .usage_chunk(openai_usage(300, 30, 0)),
        ),
        (
            // llama.cpp: no cached_tokens field, timings on the last chunk.
            Completion::new(Shape::Bare)
                .text("Hi")
                .usage(json!({"prompt_tokens": 256, "completion_tokens": 5, "total_tokens": 261}))
                .field("timings", timings.clone()),
            Turn::new(Shape::Bare).text("Hi").raw_chunk(json!({
                "id": "chatcmpl-stream", "object": "chat.completion.chunk", "created": 1,
                "model": "qwen2.5-7b-instruct",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 256, "completion_tokens": 5, "total_tokens": 261},
                "timings": timings,
            })),
        ),
    ];
    let mut script = Vec::new();
    for (completion, turn) in &pairs {
        script.push(completion.respond());
        script.push(turn.clone().done().respond());
    }
    let fake = FakeChat::start(script).await;
    let model = bare(fake.base_url());
    let history = [Message::user("hi")];
    let prefix = prefix();
    let options = GenerationOptions::default();
    for (completion, _) in &pairs {
        let generated = model
            .generate(ModelRequest::new(&prefix, &history, &options))
            .await
            .unwrap();
        let streamed = stream_call(&model).await;
        // Each fake names its response: the ids differ by design, the rest must not.
        let mut turn = streamed.turn().clone();
        assert_eq!(turn.id.as_deref(), Some("chatcmpl-stream"));
        assert_eq!(generated.id.as_deref(), Some("chatcmpl-fake"));
        turn.id.clone_from(&generated.id);
        assert_eq!(
            turn,
            generated,
            "for {}",
            completion.to_json()["choices"][0]
        );
    }
    fake.finish();
}

#[tokio::test]
async fn the_stream_request_asks_for_usage_and_keeps_the_plain_body_bytes() {
    let fake = FakeChat::start([Turn::new(Shape::OpenAi)
        .text("ok")
        .finish("stop")
        .done()
        .respond()])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .build()
        .unwrap();
    stream_call(&model).await.turn();
    fake.finish();
    let history = [Message::user("hi")];
    let prefix = prefix();
    let options = GenerationOptions::default();
    let plain = model
        .request_body(&ModelRequest::new(&prefix, &history, &options))
        .unwrap();
    let sent = &fake.requests()[0].body;
    let json: Value = serde_json::from_slice(sent).unwrap();
    assert_eq!(json["stream"], true);
    assert_eq!(json["stream_options"], json!({"include_usage": true}));
    // The streamed body is the plain body with the two fields appended: the same prefix bytes.
    let mut expected = plain[..plain.len() - 1].to_vec();
    expected.extend_from_slice(br#","stream":true,"stream_options":{"include_usage":true}}"#);
    assert_eq!(
        String::from_utf8_lossy(sent),
        String::from_utf8_lossy(&expected)
    );
    assert_eq!(raw_parts(sent), raw_parts(&plain));
}

#[tokio::test]
async fn a_json_answer_to_a_stream_request_is_read_as_one_turn() {
    let completion = Completion::new(Shape::Bare)
        .text("whole")
        .tool_call("c1", "clock", "{}");
    let fake = FakeChat::start([completion.respond()]).await;
    let got = stream_call(&bare(fake.base_url())).await;
    fake.finish();
    assert_eq!(got.turn().message.text, "whole");
    assert_call(
        &got.turn().message.tool_calls[0],
        "c1",
        "clock",
        "{}",
        json!({}),
    );
    assert_eq!(got.turn().finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn data_that_is_not_a_chunk_is_an_invalid_response() {
    let fake = FakeChat::start([sse_response(b"data: {\"choices\": 5}\n\n".to_vec())]).await;
    let got = stream_call(&bare(fake.base_url())).await;
    fake.finish();
    assert!(
        matches!(got.error(), ModelError::InvalidResponse(m) if m.starts_with("a stream event is not a chat.completion.chunk")),
        "{:?}",
        got.error()
    );
}

// ---------------------------------------------------------------------------------------
// HaloAgent::stream_text end to end.

/// A compact form of an agent event for sequence assertions.
fn label(event: &AgentEvent) -> String {
    match event {
        AgentEvent::StepStart { step } => format!("step {step}"),
        AgentEvent::TextDelta(t) => format!("text {t}"),
        AgentEvent::ReasoningDelta(t) => format!("reasoning {t}"),
        AgentEvent::ToolCallStart { id, name } => format!("call start {id} {name}"),
        AgentEvent::ToolCallDelta { id, arguments } => format!("call delta {id} {arguments}"),
        AgentEvent::ToolCall(c) => format!("call {} {} {}", c.id, c.name, c.raw_arguments),
        AgentEvent::ToolResult(r) => format!("result {} {}", r.tool_call_id, r.content),
        AgentEvent::StepFinish(s) => format!("step finish {:?}", s.finish_reason),
        AgentEvent::Finish(r) => format!("finish {}", r.text),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn stream_text_runs_a_two_step_tool_loop_over_sse() {
    let fake = FakeChat::start([
        Turn::new(Shape::OpenAi)
            .text("Adding.")
            .calls(vec![start(0, "call_1", "add"), start(1, "call_2", "clock")])
            .args_in_pieces(0, ODD_ARGS, 8)
            .finish("tool_calls")
            .usage_chunk(openai_usage(1200, 20, 0))
            .done()
            .respond(),
        Turn::new(Shape::OpenAi)
            .text("42, ")
            .text("at 12:00.")
            .finish("stop")
            .usage_chunk(openai_usage(1300, 9, 1152))
            .done()
            .respond(),
    ])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .max_retries(0)
        .build()
        .unwrap();
    let mut agent = HaloAgent::builder(model)
        .system("You are a calculator.")
        .few_shot(few_shot())
        .tool(Add)
        .unwrap()
        .tool(Clock)
        .unwrap()
        .session_id("sess-s")
        .build();
    let events: Vec<AgentEvent> = agent
        .stream_text("What is 40+2, and the time?")
        .map(|e| e.unwrap())
        .collect()
        .await;
    fake.finish();
    let labels: Vec<String> = events.iter().map(label).collect();
    assert_eq!(
        labels,
        [
            "step 1",
            "text Adding.",
            "call start call_1 add",
            "call start call_2 clock",
            "call delta call_1 { \"b\" :2",
            "call delta call_1 ,\"a\":  4",
            "call delta call_1 0 }",
            "call call_1 add { \"b\" :2,\"a\":  40 }",
            "call call_2 clock ",
            "result call_1 42",
            "result call_2 12:00",
            "step finish ToolCalls",
            "step 2",
            "text 42, ",
            "text at 12:00.",
            "step finish Stop",
            "finish 42, at 12:00.",
        ]
    );
    let AgentEvent::Finish(out) = events.last().unwrap() else {
        panic!("the last event is Finish")
    };
    assert_eq!(out.steps.len(), 2);
    assert_eq!(out.stats.input_tokens, 2500);
    assert_eq!(out.stats.cache_read_tokens, 1152);
    assert_eq!(out.stats.output_tokens, 29);

    let bodies: Vec<Vec<u8>> = fake.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 2);
    // Prefix bytes identical, append-only, calls paired (the fake checks pairing too).
    assert_cache_invariants(&bodies);
    let second: Value = serde_json::from_slice(&bodies[1]).unwrap();
    let assistant = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .unwrap();
    assert_eq!(assistant["content"], "Adding.");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        ODD_ARGS
    );
    assert_eq!(assistant["tool_calls"][1]["function"]["arguments"], "{}");
    for body in &bodies {
        let json: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(json["stream"], true);
        assert_eq!(json["prompt_cache_key"], "sess-s");
    }
}

/// Counts its calls: a tool that must never run.
struct Touch(Arc<AtomicUsize>);
impl Tool for Touch {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "touch"
    }
    fn description(&self) -> &str {
        "Touches a file."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok("touched".into())
    }
}

#[tokio::test]
async fn a_tool_call_from_a_cut_stream_never_runs_and_nothing_is_logged() {
    let body = Turn::new(Shape::OpenAi)
        .calls(vec![start(0, "call_t", "touch")])
        .args_in_pieces(0, "{\"path\": \"a.txt\"}", 4)
        .finish("tool_calls")
        .done()
        .body(Ending::Lf);
    let text = String::from_utf8(body.clone()).unwrap();
    let cut = text.find("\"finish_reason\":\"tool_calls\"").unwrap();
    let server = SplitServer::start([Reply::CutAfter(byte_pieces(&body[..cut], 20))]).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let model = OpenAiCompatible::custom(server.base_url(), "m")
        .max_retries(0)
        .build()
        .unwrap();
    let mut agent = HaloAgent::builder(model)
        .system("Touch files.")
        .tool(Touch(runs.clone()))
        .unwrap()
        .build();
    let events: Vec<_> = agent.stream_text("touch a.txt").collect().await;
    server.finish();
    let (last, before) = events.split_last().unwrap();
    assert!(
        matches!(last, Err(HaloError::Model(ModelError::Truncated(_)))),
        "{last:?}"
    );
    let labels: Vec<String> = before.iter().map(|e| label(e.as_ref().unwrap())).collect();
    assert_eq!(labels[0], "step 1");
    assert_eq!(labels[1], "call start call_t touch");
    assert!(
        labels[2..]
            .iter()
            .all(|l| l.starts_with("call delta call_t")),
        "{labels:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the tool never ran");
    let log: Vec<&Message> = agent.log().messages().collect();
    assert_eq!(log.len(), 1, "only the user message is logged: {log:?}");
    assert!(matches!(log[0], Message::User { .. }));
}

#[test]
fn a_tool_call_cut_by_length_is_not_returned_as_a_call() {
    // Trigger: finish_reason "length" while a tool call's arguments were mid-JSON.
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_cut\",\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"{\\\"path\\\":\\\"no\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let reads = body.as_bytes().chunks(5).map(Ok::<_, ModelError>);
    let events: Vec<_> = futures::executor::block_on(
        halo_adapters::openai::decode_stream(futures::stream::iter(reads)).collect(),
    );
    let Some(Ok(ModelStreamEvent::Finish(turn))) = events.last() else {
        panic!("no finish: {events:?}")
    };
    assert_eq!(turn.finish_reason, FinishReason::Length);
    assert!(turn.message.tool_calls.is_empty());
}
