//! Bodies of requests whose history extends an earlier one's: the adapter writes only the
//! new messages into the buffer it kept, and the bytes are those of a body written anew,
//! whatever the agents sharing the adapter do in between.

use bytes::Bytes;
use halo_adapters::openai::{OpenAiCompatible, ReasoningReplay};
use halo_core::{
    AssistantMessage, ContentPart, GenerationOptions, Message, MessageLog, ModelError,
    ModelRequest, Reasoning, StablePrefix, ToolCall, ToolResult, ToolSpec,
};
use serde_json::json;

fn openai() -> OpenAiCompatible {
    OpenAiCompatible::openai("gpt-4o")
        .api_key("sk-test")
        .body_field("user", json!("halo \"tests\""))
        .build()
        .unwrap()
}

fn deepseek() -> OpenAiCompatible {
    OpenAiCompatible::deepseek("deepseek-reasoner")
        .api_key("sk-test")
        .reasoning_replay(ReasoningReplay::EveryAssistantMessage)
        .build()
        .unwrap()
}

fn prefix(system: &str) -> StablePrefix {
    StablePrefix::new(system)
        .with_tool(ToolSpec::new(
            "lookup",
            "Looks a key up.",
            json!({"type": "object", "properties": {"key": {"type": "string"}}}),
        ))
        .unwrap()
        .with_few_shot([Message::user("k?"), Message::assistant("v.")])
}

/// One tool step: a call (with reasoning, escapes and non-ASCII) and its result.
fn step(log: &mut MessageLog, n: usize) {
    let call = ToolCall::new(
        format!("call_{n}"),
        "lookup",
        format!(r#"{{"key":"k{n} \"quoted\" é"}}"#),
    );
    log.push_step(
        Message::Assistant(AssistantMessage {
            text: format!("Looking up k{n}…"),
            reasoning: vec![Reasoning {
                text: format!("need k{n}\n"),
                signature: None,
            }],
            tool_calls: vec![call.clone()],
        }),
        [Message::Tool(ToolResult::ok(
            &call,
            format!("k{n}: value\twith \u{1} control"),
        ))],
    );
}

/// The body `model` sends for `log` as the engine lends it (with its history key), checked
/// byte for byte against the body a fresh adapter (`fresh`) writes anew for it.
fn sent(
    model: &OpenAiCompatible,
    fresh: fn() -> OpenAiCompatible,
    prefix: &StablePrefix,
    log: &mut MessageLog,
    options: &GenerationOptions,
) -> Result<Bytes, ModelError> {
    log.as_slice();
    let history = log.contiguous().unwrap();
    let key = log.history_key(history);
    assert!(key.is_some());
    let request = ModelRequest::new(prefix, history, options)
        .with_history_key(key)
        .with_session_id("s-1");
    let body = model.request_body(&request)?;
    let anew = fresh()
        .request_body(&ModelRequest::new(prefix, history, options).with_session_id("s-1"))?;
    assert_eq!(
        String::from_utf8_lossy(&body),
        String::from_utf8_lossy(&anew),
        "the kept history gives the bytes of a rewrite"
    );
    Ok(body)
}

#[test]
fn kept_histories_write_the_bytes_of_a_rewrite() {
    let model = openai();
    let p = prefix("You look things up.");
    let options = GenerationOptions::default();
    let body = |log: &mut MessageLog, options: &GenerationOptions| {
        sent(&model, openai, &p, log, options).unwrap()
    };

    let mut a = MessageLog::with_capacity(1000);
    a.push(Message::user("Which values do k0 to k9 hold?"));
    let mut last = body(&mut a, &options);
    for n in 0..4 {
        step(&mut a, n);
        let at = last.as_ptr();
        drop(last);
        last = body(&mut a, &options);
        assert_eq!(
            last.as_ptr(),
            at,
            "appended in place: the kept buffer, not a copy"
        );
    }
    // A body still held elsewhere (a stream not yet dropped) is copied, not written into.
    step(&mut a, 4);
    let held = last;
    last = body(&mut a, &options);
    assert_ne!(last.as_ptr(), held.as_ptr());
    drop(held);

    // Other options and a streamed-or-not tail change only the tail.
    step(&mut a, 5);
    let options_2 = GenerationOptions::default()
        .with_max_tokens(64)
        .with_seed(7);
    body(&mut a, &options_2);

    // Another agent on the same adapter, interleaved: each continues its own history.
    let mut b = MessageLog::with_capacity(1000);
    b.push(Message::user("Another session."));
    for n in 0..3 {
        body(&mut b, &options);
        step(&mut a, 10 + n);
        body(&mut a, &options);
        step(&mut b, 20 + n);
    }
    body(&mut b, &options);

    // A clone and its origin share the history up to the clone, then part.
    let mut c = a.clone();
    c.push(Message::user("the clone's question"));
    body(&mut c, &options);
    a.push(Message::user("the origin's question"));
    body(&mut a, &options);
    step(&mut c, 30);
    body(&mut c, &options);

    // An edit, a cleared log, a changed prefix: written anew.
    a.retain(|i, _, _| i != 0);
    body(&mut a, &options);
    b.clear();
    b.push(Message::user("after clearing"));
    body(&mut b, &options);
    let q = prefix("You look things up, tersely.");
    sent(&model, openai, &q, &mut c, &options).unwrap();
    body(&mut c, &options);

    // More histories than the adapter keeps: the oldest are written anew.
    let mut many: Vec<MessageLog> = (0..6)
        .map(|i| {
            let mut log = MessageLog::with_capacity(1000);
            log.push(Message::user(format!("session {i}")));
            log
        })
        .collect();
    for round in 0..3 {
        for log in &mut many {
            step(log, round);
            body(log, &options);
        }
    }
}

#[test]
fn an_evicted_front_an_empty_prefix_and_an_unsendable_message_are_written_anew() {
    // Eviction: the log opens with an assistant turn, so the trimmed-history note comes in.
    let model = openai();
    let p = prefix("s");
    let options = GenerationOptions::default();
    let mut log = MessageLog::with_capacity(5);
    log.push(Message::user("first"));
    for n in 0..6 {
        step(&mut log, n);
        sent(&model, openai, &p, &mut log, &options).unwrap();
    }
    assert!(log.evicted() > 0);

    // No system text, tools or few-shot turns: the first message has no comma before it.
    let bare = StablePrefix::new("");
    let mut log = MessageLog::with_capacity(100);
    log.push(Message::user("hi"));
    sent(&model, openai, &bare, &mut log, &options).unwrap();
    step(&mut log, 0);
    sent(&model, openai, &bare, &mut log, &options).unwrap();

    // DeepSeek: reasoning replayed on every assistant turn; an image cannot be sent, and
    // the history after it is written anew once the log no longer holds it.
    let model = deepseek();
    let mut log = MessageLog::with_capacity(100);
    log.push(Message::user("hi"));
    step(&mut log, 0);
    sent(&model, deepseek, &p, &mut log, &options).unwrap();
    log.push(Message::User {
        content: vec![ContentPart::Image {
            media_type: "image/png".into(),
            data: "iVBORw0KGgo=".into(),
        }],
    });
    let err = sent(&model, deepseek, &p, &mut log, &options).unwrap_err();
    assert!(matches!(err, ModelError::Unsupported(_)), "{err}");
    let n = log.len() - 1;
    log.retain(|i, _, _| i != n);
    step(&mut log, 1);
    sent(&model, deepseek, &p, &mut log, &options).unwrap();
}

#[test]
fn agents_on_threads_sharing_one_adapter_never_get_each_other_s_bytes() {
    let model = std::sync::Arc::new(openai());
    let p = prefix("You look things up.");
    std::thread::scope(|scope| {
        for agent in 0..6 {
            let (model, p) = (model.clone(), &p);
            scope.spawn(move || {
                let options = GenerationOptions::default();
                let mut log = MessageLog::with_capacity(1000);
                // The same first message everywhere: only the keys tell the logs apart.
                log.push(Message::user("Which values do k0 to k9 hold?"));
                for n in 0..40 {
                    sent(&model, openai, p, &mut log, &options).unwrap();
                    step(&mut log, 100 * agent + n);
                }
            });
        }
    });
}
