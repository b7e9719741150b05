//! Anthropic Messages adapter: request bodies pinned in `tests/data/anthropic/<name>.json`
//! (breakpoint placement, tool-result grouping, thinking replay; `UPDATE_EXPECT=1` rewrites
//! them, review the diff), configuration, error mapping and retries over a loopback fake,
//! and usage normalization. Streaming is in `anthropic/stream.rs`; agent runs against the
//! cache simulator in `anthropic/sim.rs`.

mod fake;
mod sim;
mod stream;

use std::path::PathBuf;
use std::time::Duration;

use halo_adapters::anthropic::{
    API_KEY_VAR, AnthropicAdapter, AnthropicBuilder, CacheMode, CacheTtl, ConfigError,
    EXTENDED_CACHE_TTL_BETA,
};
use halo_core::{
    AssistantMessage, ContentPart, FinishReason, GenerationOptions, InvalidRequestKind, Message,
    ModelAdapter, ModelError, ModelRequest, Reasoning, ResponseFormat, StablePrefix, ToolCall,
    ToolChoice, ToolResult, ToolSpec, Usage,
};
use serde_json::{Value, json};

use fake::FakeMessages;

const KEY: &str = "sk-ant-api03-test-0123456789-SECRET";
const MODEL: &str = "claude-sonnet-4-5";

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/anthropic")
}

/// Compares `body` (pretty-printed, keys sorted) with `tests/data/anthropic/<name>.json`,
/// or rewrites the file under `UPDATE_EXPECT=1`.
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
        "{name}: the body differs from {}\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

/// A builder with the test key, pointed at `base`, without retries.
fn builder(base: &str) -> AnthropicBuilder {
    AnthropicAdapter::builder(MODEL)
        .api_key(KEY)
        .base_url(base)
        .max_retries(0)
}

/// An adapter that never connects (for request bodies).
fn offline(min_tokens: u64) -> AnthropicAdapter {
    builder("http://127.0.0.1:9")
        .min_cacheable_tokens(min_tokens)
        .build()
        .unwrap()
}

fn tool(name: &str, description: &str) -> ToolSpec {
    ToolSpec::new(
        name,
        description,
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
    )
}

/// Two tools, a system prompt and one few-shot exchange.
fn prefix() -> StablePrefix {
    StablePrefix::new("You are a careful calculator. Answer with the number only.")
        .with_tool(tool("add", "Adds two integers."))
        .unwrap()
        .with_tool(tool("mul", "Multiplies two integers."))
        .unwrap()
        .with_few_shot([Message::user("What is 1+1?"), Message::assistant("2")])
}

fn body(model: &AnthropicAdapter, prefix: &StablePrefix, history: &[Message]) -> Vec<u8> {
    let options = GenerationOptions::default();
    model
        .request_body(&ModelRequest::new(prefix, history, &options))
        .unwrap()
        .to_vec()
}

/// The JSON paths of every `cache_control` in a body, with its value, in cache order.
fn markers(body: &[u8]) -> Vec<(String, Value)> {
    fn walk(v: &Value, path: String, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    if k == "cache_control" {
                        out.push((path.clone(), child.clone()));
                    } else {
                        walk(child, format!("{path}.{k}"), out);
                    }
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    // In cache order: the top-level marker, then tools, system, messages.
    let body: Value = serde_json::from_slice(body).unwrap();
    let mut out = Vec::new();
    if let Some(top) = body.get("cache_control") {
        out.push((String::new(), top.clone()));
    }
    for key in ["tools", "system", "messages"] {
        if let Some(part) = body.get(key) {
            walk(part, format!(".{key}"), &mut out);
        }
    }
    out
}

fn five_minutes() -> Value {
    json!({"type": "ephemeral"})
}

fn one_hour() -> Value {
    json!({"type": "ephemeral", "ttl": "1h"})
}

fn calls(n: usize) -> AssistantMessage {
    AssistantMessage {
        tool_calls: (1..=n)
            .map(|i| {
                ToolCall::new(
                    format!("toolu_{i:02}"),
                    "add",
                    format!("{{\"a\":{i},\"b\":1}}"),
                )
            })
            .collect(),
        ..AssistantMessage::default()
    }
}

#[test]
fn breakpoints_go_on_the_prefix_end_and_the_newest_message() {
    let model = offline(100);
    let history = [Message::user("What is 40+2?")];
    let bytes = body(&model, &prefix(), &history);
    assert_snapshot("prefix_and_moving_breakpoint", &bytes);
    // The few-shot answer ends the prefix; the newest user block carries the moving one.
    assert_eq!(
        markers(&bytes),
        [
            (".messages[1].content[0]".to_string(), five_minutes()),
            (".messages[2].content[0]".to_string(), five_minutes()),
        ]
    );
    // Without few-shots the prefix ends at the system block.
    let no_shots = StablePrefix::new("You are a careful calculator. Answer with the number only.")
        .with_tool(tool("add", "Adds two integers."))
        .unwrap()
        .with_tool(tool("mul", "Multiplies two integers."))
        .unwrap();
    let bytes = body(&model, &no_shots, &history);
    assert_eq!(
        markers(&bytes)
            .into_iter()
            .map(|(p, _)| p)
            .collect::<Vec<_>>(),
        [".system[0]", ".messages[0].content[0]"]
    );
    // Without a system prompt either, at the last tool.
    let tools_only = StablePrefix::new("")
        .with_tool(tool("add", "Adds two integers."))
        .unwrap()
        .with_tool(tool("mul", "Multiplies two integers."))
        .unwrap();
    let model = offline(50);
    let bytes = body(&model, &tools_only, &history);
    assert_eq!(
        markers(&bytes)
            .into_iter()
            .map(|(p, _)| p)
            .collect::<Vec<_>>(),
        [".tools[1]", ".messages[0].content[0]"]
    );
}

#[test]
fn a_prefix_below_the_model_minimum_gets_no_breakpoint() {
    // The prefix is about 150 estimated tokens, the long question about 600.
    let model = offline(500);
    let history = [Message::user(format!(
        "Add up these numbers: {}",
        (1..=400)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" + ")
    ))];
    let bytes = body(&model, &prefix(), &history);
    assert_snapshot("short_prefix_no_prefix_breakpoint", &bytes);
    assert_eq!(
        markers(&bytes),
        [(".messages[2].content[0]".to_string(), five_minutes())]
    );
    // Everything below the minimum: no marker at all.
    let bytes = body(&offline(100_000), &prefix(), &history);
    assert_eq!(markers(&bytes), []);
    // The per-model table: Haiku 4.5 needs 4096 tokens, so this prefix gets nothing.
    let haiku = AnthropicAdapter::builder("claude-haiku-4-5")
        .api_key(KEY)
        .build()
        .unwrap();
    assert_eq!(haiku.min_cacheable_tokens(), 4096);
    assert_eq!(
        markers(&body(&haiku, &prefix(), &[Message::user("hi")])),
        []
    );
}

#[test]
fn one_hour_breakpoints_come_before_five_minute_ones() {
    let history = [Message::user("What is 40+2?")];
    let model = builder("http://127.0.0.1:9")
        .min_cacheable_tokens(100)
        .cache_mode(CacheMode::Breakpoints {
            prefix_ttl: CacheTtl::OneHour,
            history_ttl: CacheTtl::FiveMinutes,
        })
        .build()
        .unwrap();
    let bytes = body(&model, &prefix(), &history);
    assert_snapshot("one_hour_prefix_five_minute_history", &bytes);
    assert_eq!(
        markers(&bytes),
        [
            (".messages[1].content[0]".to_string(), one_hour()),
            (".messages[2].content[0]".to_string(), five_minutes()),
        ]
    );
    // A 1h history after a 5m prefix would be refused by the API: it is lowered to 5m.
    let model = builder("http://127.0.0.1:9")
        .min_cacheable_tokens(100)
        .cache_mode(CacheMode::Breakpoints {
            prefix_ttl: CacheTtl::FiveMinutes,
            history_ttl: CacheTtl::OneHour,
        })
        .build()
        .unwrap();
    let ttls: Vec<Value> = markers(&body(&model, &prefix(), &history))
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(ttls, [five_minutes(), five_minutes()]);
}

#[test]
fn a_turn_longer_than_the_lookback_gets_a_breakpoint_on_the_previous_end() {
    // One assistant turn with 11 parallel calls: 11 tool_use + 11 tool_result blocks put the
    // previous request's end (the question) 22 blocks behind the newest block.
    let model = offline(100);
    let turn = calls(11);
    let mut history = vec![
        Message::user("Add each number to 1, from 1 to 11."),
        Message::Assistant(turn.clone()),
    ];
    for call in &turn.tool_calls {
        history.push(Message::Tool(ToolResult::ok(call, "ok")));
    }
    let bytes = body(&model, &prefix(), &history);
    assert_snapshot("lookback_intermediate_breakpoint", &bytes);
    assert_eq!(
        markers(&bytes)
            .into_iter()
            .map(|(p, _)| p)
            .collect::<Vec<_>>(),
        [
            ".messages[1].content[0]",
            ".messages[2].content[0]",
            ".messages[4].content[10]"
        ]
    );
    // Nine calls: 18 blocks, within the lookback; no extra breakpoint.
    let turn = calls(9);
    let mut history = vec![
        Message::user("Add each number to 1, from 1 to 9."),
        Message::Assistant(turn.clone()),
    ];
    for call in &turn.tool_calls {
        history.push(Message::Tool(ToolResult::ok(call, "ok")));
    }
    assert_eq!(markers(&body(&model, &prefix(), &history)).len(), 2);
}

#[test]
fn tool_results_are_grouped_in_call_order_with_is_error() {
    let model = offline(100_000);
    let assistant = AssistantMessage {
        text: "Let me compute both.".into(),
        reasoning: Vec::new(),
        tool_calls: vec![
            ToolCall::new("toolu_01A", "add", "{ \"b\" :2,\"a\":  40 }"),
            ToolCall::new("toolu_01B", "mul", ""),
        ],
    };
    let history = [
        Message::user("What is 40+2 and 6*7?"),
        Message::Assistant(assistant.clone()),
        // Logged out of call order; the first one failed.
        Message::Tool(ToolResult::ok(&assistant.tool_calls[1], "42")),
        Message::Tool(ToolResult::error(
            &assistant.tool_calls[0],
            "arguments must be integers; call add again with integers",
        )),
        Message::user("Also, be quick."),
        Message::system("The user is in a hurry."),
        Message::User {
            content: vec![
                ContentPart::Text {
                    text: String::new(),
                },
                ContentPart::Image {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
            ],
        },
    ];
    let bytes = body(&model, &prefix(), &history);
    assert_snapshot("tool_results_grouped", &bytes);
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    let messages = json["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    let results = &messages[4]["content"];
    assert_eq!(results[0]["tool_use_id"], "toolu_01A");
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(results[1]["tool_use_id"], "toolu_01B");
    assert!(results[1].get("is_error").is_none());
    // Arguments parsed from the raw string; an empty one is `{}`.
    assert_eq!(messages[3]["content"][1]["input"], json!({"a": 40, "b": 2}));
    assert_eq!(messages[3]["content"][2]["input"], json!({}));
    // The user turn, the history's system message and the image follow the results.
    assert_eq!(results[2]["text"], "Also, be quick.");
    assert_eq!(results[3]["text"], "The user is in a hurry.");
    assert_eq!(results[4]["type"], "image");
    assert_eq!(results.as_array().unwrap().len(), 5);
}

#[test]
fn thinking_is_replayed_verbatim_and_never_alone() {
    let model = offline(100_000);
    let thinking = AssistantMessage {
        text: String::new(),
        reasoning: vec![
            Reasoning {
                text: "The user wants 40+2; the add tool does that.".into(),
                signature: Some("EqQBCkgIARABGAIiQL0-sig==".into()),
            },
            Reasoning {
                text: String::new(),
                signature: Some("redacted_thinking:EmwKAhgBEgy3va3pzix/LafPsn4a".into()),
            },
        ],
        tool_calls: vec![ToolCall::new("toolu_01A", "add", "{\"a\":40,\"b\":2}")],
    };
    let history = [
        Message::user("What is 40+2?"),
        Message::Assistant(thinking.clone()),
        Message::Tool(ToolResult::ok(&thinking.tool_calls[0], "42")),
        // Only thinking: not sent, and the user turns around it merge.
        Message::Assistant(AssistantMessage {
            reasoning: vec![Reasoning {
                text: "Nothing to say.".into(),
                signature: Some("sig-alone".into()),
            }],
            ..AssistantMessage::default()
        }),
        Message::user("And the answer?"),
        // Unsigned reasoning (another provider's) cannot be replayed; the text is.
        Message::Assistant(AssistantMessage {
            text: "42".into(),
            reasoning: vec![Reasoning {
                text: "from deepseek".into(),
                signature: None,
            }],
            tool_calls: Vec::new(),
        }),
        Message::user("Thanks."),
    ];
    let bytes = body(&model, &prefix(), &history);
    assert_snapshot("thinking_replayed", &bytes);
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    let turn = &json["messages"][3]["content"];
    assert_eq!(
        turn[0],
        json!({"type": "thinking", "thinking": "The user wants 40+2; the add tool does that.", "signature": "EqQBCkgIARABGAIiQL0-sig=="})
    );
    assert_eq!(
        turn[1],
        json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"})
    );
    assert_eq!(turn[2]["type"], "tool_use");
    let after = &json["messages"][4]["content"];
    assert_eq!(after[0]["type"], "tool_result");
    assert_eq!(after[1]["text"], "And the answer?");
    assert_eq!(
        json["messages"][5]["content"],
        json!([{"type": "text", "text": "42"}])
    );
    assert!(!String::from_utf8(bytes).unwrap().contains("sig-alone"));
}

#[test]
fn options_and_automatic_caching() {
    let model = builder("http://127.0.0.1:9")
        .cache_mode(CacheMode::Automatic {
            ttl: CacheTtl::OneHour,
        })
        .max_tokens(2048)
        .body_field(
            "thinking",
            json!({"type": "enabled", "budget_tokens": 1024}),
        )
        .build()
        .unwrap();
    let mut options = GenerationOptions::default()
        .with_tool_choice(ToolChoice::Tool("add".into()))
        .with_temperature(0.5)
        .with_seed(7);
    options.stop = vec!["END".into()];
    options.response_format = ResponseFormat::Json {
        schema: Some(json!({"type": "object", "properties": {"n": {"type": "integer"}}})),
    };
    let history = [Message::user("What is 40+2?")];
    let prefix = prefix();
    let request = ModelRequest::new(&prefix, &history, &options).with_session_id("s");
    let bytes = model.request_body(&request).unwrap();
    assert_snapshot("options_automatic_cache", &bytes);
    // Automatic caching: one top-level marker, none on blocks.
    assert_eq!(markers(&bytes), [(String::new(), one_hour())]);
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(json["max_tokens"], 2048, "the builder's default");
    assert_eq!(json["tool_choice"], json!({"type": "tool", "name": "add"}));
    assert!(json.get("seed").is_none());

    // Off: no marker anywhere; max_tokens from the options.
    let model = builder("http://127.0.0.1:9")
        .cache_mode(CacheMode::Off)
        .build()
        .unwrap();
    let options = GenerationOptions::default().with_max_tokens(64);
    let bytes = model
        .request_body(&ModelRequest::new(request.prefix, &history, &options))
        .unwrap();
    assert_eq!(markers(&bytes), []);
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(json["max_tokens"], 64);

    // A JSON format without a schema, and a request without messages, are refused.
    let mut options = GenerationOptions::default();
    options.response_format = ResponseFormat::Json { schema: None };
    let err = model
        .request_body(&ModelRequest::new(request.prefix, &history, &options))
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Unsupported(m) if m.contains("JSON Schema")),
        "{err}"
    );
    let err = model
        .request_body(&ModelRequest::new(
            &StablePrefix::new("s"),
            &[],
            request.options,
        ))
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Unsupported(m) if m.contains("at least one message")),
        "{err}"
    );
}

#[test]
fn request_bodies_are_stable_and_append_only() {
    // Request N+1's bytes up to the moving breakpoint equal request N's, markers aside.
    let model = offline(100);
    let turn = calls(1);
    let first = [Message::user("What is 1+1?")];
    let second = [
        Message::user("What is 1+1?"),
        Message::Assistant(turn.clone()),
        Message::Tool(ToolResult::ok(&turn.tool_calls[0], "2")),
    ];
    let strip = |bytes: Vec<u8>| -> Value {
        let mut v: Value = serde_json::from_slice(&bytes).unwrap();
        fn scrub(v: &mut Value) {
            match v {
                Value::Object(m) => {
                    m.remove("cache_control");
                    m.values_mut().for_each(scrub);
                }
                Value::Array(a) => a.iter_mut().for_each(scrub),
                _ => {}
            }
        }
        scrub(&mut v);
        v
    };
    let a = strip(body(&model, &prefix(), &first));
    let b = strip(body(&model, &prefix(), &second));
    assert_eq!(a["tools"], b["tools"]);
    assert_eq!(a["system"], b["system"]);
    let (ma, mb) = (
        a["messages"].as_array().unwrap(),
        b["messages"].as_array().unwrap(),
    );
    assert_eq!(ma[..], mb[..ma.len()]);
    assert_eq!(
        body(&model, &prefix(), &second),
        body(&model, &prefix(), &second)
    );
}

#[test]
fn a_history_opening_with_an_assistant_turn_gets_the_trimmed_note_after_the_few_shots() {
    // Trigger: a bounded log evicted the user's turn, so the history opens with a tool call.
    let model = offline(100_000);
    let turn = calls(1);
    let history = [
        Message::Assistant(turn.clone()),
        Message::Tool(ToolResult::ok(&turn.tool_calls[0], "2")),
    ];
    let bytes = body(&model, &prefix(), &history);
    assert_snapshot("trimmed_history_note", &bytes);
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        json["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "What is 1+1?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "2"}]},
            {"role": "user", "content": [{"type": "text", "text": "(earlier messages of this conversation were trimmed)"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "add", "input": {"a": 1, "b": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "2"}]},
        ])
    );
    assert_eq!(
        halo_adapters::TRIMMED_HISTORY_NOTE,
        json["messages"][2]["content"][0]["text"]
    );
    // Without few-shots the note is the first message; the same history, the same bytes.
    let bare = StablePrefix::new("s")
        .with_tool(tool("add", "Adds two integers."))
        .unwrap();
    let bytes = body(&model, &bare, &history);
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        json["messages"][0],
        json!({"role": "user", "content": [{"type": "text", "text": "(earlier messages of this conversation were trimmed)"}]})
    );
    assert_eq!(json["messages"].as_array().unwrap().len(), 3);
    assert_eq!(bytes, body(&model, &bare, &history));
    // A history opening with a user or system message gets no note.
    for first in [Message::user("Go on."), Message::system("Be brief.")] {
        let history = [
            first,
            Message::Assistant(turn.clone()),
            Message::Tool(ToolResult::ok(&turn.tool_calls[0], "2")),
        ];
        let json: Value = serde_json::from_slice(&body(&model, &bare, &history)).unwrap();
        assert_eq!(json["messages"].as_array().unwrap().len(), 3);
        assert!(
            !json.to_string().contains("were trimmed"),
            "{}",
            json["messages"]
        );
    }
}

#[test]
fn configuration_from_the_environment() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |var: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| v.to_string())
        }
    };
    let err = AnthropicAdapter::from_env_with(env(&[("ANTHROPIC_API_KEY", "  ")])).unwrap_err();
    assert_eq!(err, ConfigError::MissingEnv { var: API_KEY_VAR });
    let model = AnthropicAdapter::from_env_with(env(&[("ANTHROPIC_API_KEY", KEY)])).unwrap();
    assert_eq!(model.endpoint(), "https://api.anthropic.com/v1/messages");
    assert_eq!(ModelAdapter::model_name(&model), "claude-sonnet-4-5");
    assert_eq!(ModelAdapter::provider(&model), "anthropic");
    let model = AnthropicAdapter::from_env_with(env(&[
        ("ANTHROPIC_API_KEY", KEY),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000/"),
        ("ANTHROPIC_MODEL", "claude-opus-4-5"),
    ]))
    .unwrap();
    assert_eq!(model.endpoint(), "http://127.0.0.1:4000/v1/messages");
    assert_eq!(ModelAdapter::model_name(&model), "claude-opus-4-5");
    assert_eq!(model.min_cacheable_tokens(), 4096);
    let debug = format!("{model:?}");
    assert!(
        !debug.contains(KEY) && debug.contains("[redacted]"),
        "{debug}"
    );

    assert!(matches!(
        AnthropicAdapter::builder(MODEL).build(),
        Err(ConfigError::MissingApiKey { .. })
    ));
    assert!(matches!(
        builder("http://x").header("x-api-key", "other").build(),
        Err(ConfigError::InvalidHeader { .. })
    ));
    assert!(matches!(
        builder("http://x").body_field("messages", json!([])).build(),
        Err(ConfigError::ReservedBodyField(f)) if f == "messages"
    ));
    assert!(matches!(
        builder("http://x").api_key("bad\nkey").build(),
        Err(ConfigError::InvalidApiKey)
    ));
}

fn request<'a>(
    prefix: &'a StablePrefix,
    history: &'a [Message],
    options: &'a GenerationOptions,
) -> ModelRequest<'a> {
    ModelRequest::new(prefix, history, options)
}

#[tokio::test]
async fn headers_and_usage_normalization() {
    let fake = FakeMessages::start([fake::message(
        json!([
            {"type": "thinking", "thinking": "Easy.", "signature": "sig-1"},
            {"type": "text", "text": "Adding."},
            {"type": "tool_use", "id": "toolu_01X", "name": "add", "input": {"a": 40, "b": 2}},
        ]),
        "tool_use",
        json!({"input_tokens": 21, "cache_creation_input_tokens": 188, "cache_read_input_tokens": 1800, "output_tokens": 393}),
    )])
    .await;
    let model = builder(&fake.base_url())
        .cache_mode(CacheMode::Breakpoints {
            prefix_ttl: CacheTtl::OneHour,
            history_ttl: CacheTtl::FiveMinutes,
        })
        .build()
        .unwrap();
    let options = GenerationOptions::default();
    let history = [Message::user("What is 40+2?")];
    let out = model
        .generate(request(&prefix(), &history, &options))
        .await
        .unwrap();

    assert_eq!(
        out.usage,
        Usage {
            input_tokens: Some(21 + 188 + 1800),
            output_tokens: Some(393),
            cache_read_tokens: Some(1800),
            cache_write_tokens: Some(188),
            reasoning_tokens: None,
        }
    );
    assert_eq!(out.finish_reason, FinishReason::ToolCalls);
    assert_eq!(out.message.text, "Adding.");
    assert_eq!(
        out.message.reasoning,
        [Reasoning {
            text: "Easy.".into(),
            signature: Some("sig-1".into())
        }]
    );
    assert_eq!(out.message.tool_calls[0].id, "toolu_01X");
    assert_eq!(
        out.message.tool_calls[0].raw_arguments,
        "{\"a\":40,\"b\":2}"
    );
    assert_eq!(out.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    assert_eq!(out.id.as_deref(), Some("msg_01Test"));

    let sent = &fake.requests()[0];
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("anthropic-beta"), Some(EXTENDED_CACHE_TTL_BETA));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.json()["max_tokens"],
        4096,
        "Anthropic requires max_tokens"
    );
}

#[tokio::test]
async fn a_refusal_is_an_error_that_keeps_what_claude_wrote() {
    // Trigger: stop_reason "refusal" (the answer was stopped by Claude's classifiers).
    let fake = FakeMessages::start([fake::message(
        json!([{"type": "text", "text": "I can't help with that."}]),
        "refusal",
        json!({"input_tokens": 1, "output_tokens": 6}),
    )])
    .await;
    let model = builder(&fake.base_url()).build().unwrap();
    let options = GenerationOptions::default();
    let history = [Message::user("hi")];
    let e = model
        .generate(request(&prefix(), &history, &options))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        ModelError::Other(
            "Claude refused to answer (stop_reason \"refusal\"); it had written: I can't help \
             with that.; change the prompt, retrying it unchanged is refused again"
                .into()
        )
    );
    assert!(!e.is_retryable());
}

#[tokio::test]
async fn stop_reasons_map_to_finish_reasons() {
    let usage = json!({"input_tokens": 1, "output_tokens": 1});
    let text = json!([{"type": "text", "text": "x"}]);
    let cases = [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("max_tokens", FinishReason::Length),
        ("pause_turn", FinishReason::Other("pause_turn".into())),
    ];
    let fake = FakeMessages::start(
        cases
            .iter()
            .map(|(reason, _)| fake::message(text.clone(), reason, usage.clone())),
    )
    .await;
    let model = builder(&fake.base_url()).build().unwrap();
    let options = GenerationOptions::default();
    let history = [Message::user("hi")];
    for (reason, expected) in cases {
        let out = model
            .generate(request(&prefix(), &history, &options))
            .await
            .unwrap();
        assert_eq!(out.finish_reason, expected, "{reason}");
        // No cache fields reported: reads and writes stay unknown, the total is the input.
        assert_eq!(out.usage.input_tokens, Some(1));
        assert_eq!(out.usage.cache_read_tokens, None);
    }
}

#[tokio::test]
async fn rate_limits_and_overload_are_retried_after_retry_after() {
    let ok = fake::message(
        json!([{"type": "text", "text": "42"}]),
        "end_turn",
        json!({"input_tokens": 10, "output_tokens": 2}),
    );
    let fake = FakeMessages::start([
        fake::error(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
        )
        .insert_header("retry-after", "0.02"),
        fake::error(529, "overloaded_error", "Overloaded").insert_header("retry-after", "0.01"),
        ok,
    ])
    .await;
    let model = builder(&fake.base_url())
        .max_retries(2)
        .retry_min_delay(Duration::from_millis(1))
        .build()
        .unwrap();
    let options = GenerationOptions::default();
    let history = [Message::user("What is 40+2?")];
    let out = model
        .generate(request(&prefix(), &history, &options))
        .await
        .unwrap();
    assert_eq!(out.message.text, "42");
    assert_eq!(fake.requests().len(), 3);
    assert_eq!(
        fake.requests()[0].body,
        fake.requests()[2].body,
        "the same body is resent"
    );

    // Without retries the error carries the delay and says what happened.
    let fake = FakeMessages::start([
        fake::error(529, "overloaded_error", "Overloaded").insert_header("retry-after", "3")
    ])
    .await;
    let model = builder(&fake.base_url()).build().unwrap();
    let err = model
        .generate(request(&prefix(), &history, &options))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ModelError::Server {
            status: 529,
            retry_after: Some(Duration::from_secs(3)),
            message: "Overloaded (type overloaded_error)".into()
        }
    );
    assert!(err.is_retryable());
}

/// Whether an error is the expected variant.
type ErrorCheck = fn(&ModelError) -> bool;

#[tokio::test]
async fn client_errors_are_typed_not_retried_and_redacted() {
    let cases: Vec<(u16, &str, String, ErrorCheck)> = vec![
        (
            400,
            "invalid_request_error",
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A".into(),
            |e| matches!(e, ModelError::InvalidRequest { status: 400, .. }),
        ),
        (
            401,
            "authentication_error",
            format!("invalid x-api-key {KEY}"),
            |e| matches!(e, ModelError::Authentication { status: 401, .. }),
        ),
        (
            403,
            "permission_error",
            "Your API key does not have permission to use the specified resource.".into(),
            |e| matches!(e, ModelError::Authentication { status: 403, .. }),
        ),
        (
            404,
            "not_found_error",
            "model: claude-sonnet-9".into(),
            |e| matches!(e, ModelError::InvalidRequest { status: 404, .. }),
        ),
        (
            413,
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes.".into(),
            |e| matches!(e, ModelError::InvalidRequest { status: 413, .. }),
        ),
    ];
    let options = GenerationOptions::default();
    let history = [Message::user("hi")];
    for (status, kind, message, check) in cases {
        let fake = FakeMessages::start([fake::error(status, kind, &message)]).await;
        let model = builder(&fake.base_url())
            .max_retries(3)
            .retry_min_delay(Duration::from_millis(1))
            .build()
            .unwrap();
        let err = model
            .generate(request(&prefix(), &history, &options))
            .await
            .unwrap_err();
        assert!(check(&err), "{status}: {err:?}");
        assert!(!err.is_retryable(), "{status}");
        assert_eq!(fake.requests().len(), 1, "{status} is not retried");
        let text = err.to_string();
        assert!(text.contains(&format!("(type {kind})")), "{text}");
        assert!(!text.contains(KEY), "{text}");
        assert!(text.contains(&message.replace(KEY, "[redacted]")), "{text}");
    }
}

#[tokio::test]
async fn invalid_requests_name_their_kind_from_the_message() {
    // Each message as the Messages API sends it (sources in `anthropic/error.rs`).
    let cases = [
        (
            "prompt is too long: 208310 tokens > 200000 maximum",
            InvalidRequestKind::ContextWindowExceeded,
        ),
        (
            "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
            InvalidRequestKind::ReasoningReplayMissing,
        ),
        (
            "tools.12.custom.input_schema: JSON schema is invalid. It must match JSON Schema draft 2020-12 (https://json-schema.org/draft/2020-12). Learn more about tool use at https://docs.claude.com/en/docs/tool-use.",
            InvalidRequestKind::ToolSchemaRejected,
        ),
        ("max_tokens: Field required", InvalidRequestKind::Other),
    ];
    let fake = FakeMessages::start(
        cases
            .iter()
            .map(|(message, _)| fake::error(400, "invalid_request_error", message)),
    )
    .await;
    let model = builder(&fake.base_url()).max_retries(0).build().unwrap();
    let options = GenerationOptions::default();
    let history = [Message::user("hi")];
    for (message, kind) in cases {
        let err = model
            .generate(request(&prefix(), &history, &options))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ModelError::InvalidRequest {
                status: 400,
                kind,
                message: format!("{message} (type invalid_request_error)"),
            }
        );
    }
    assert_eq!(fake.requests().len(), 4);
    let err = ModelError::InvalidRequest {
        status: 400,
        kind: InvalidRequestKind::ContextWindowExceeded,
        message: "prompt is too long: 208310 tokens > 200000 maximum (type invalid_request_error)"
            .into(),
    };
    assert_eq!(
        err.to_string(),
        "the request exceeds the model's context window (HTTP 400): prompt is too long: 208310 \
         tokens > 200000 maximum (type invalid_request_error); shorten or compact the history"
    );
}

#[tokio::test]
async fn a_retry_after_beyond_the_max_delay_fails_at_once_with_the_delay() {
    // Trigger: a 429 with `retry-after: 99999` (it used to wait 60 s and retry).
    let fake = FakeMessages::start([
        fake::error(429, "rate_limit_error", "Daily quota exhausted")
            .insert_header("retry-after", "99999"),
        fake::message(
            json!([{"type": "text", "text": "too early"}]),
            "end_turn",
            json!({"input_tokens": 1, "output_tokens": 1}),
        ),
    ])
    .await;
    let model = builder(&fake.base_url())
        .max_retries(3)
        .retry_min_delay(Duration::from_millis(1))
        .build()
        .unwrap();
    let options = GenerationOptions::default();
    let history = [Message::user("hi")];
    let e = model
        .generate(request(&prefix(), &history, &options))
        .await
        .unwrap_err();
    assert_eq!(e.retry_after(), Some(Duration::from_secs(99_999)));
    assert_eq!(
        e.to_string(),
        "rate limited (HTTP 429), retry after 27 h 46 min: Daily quota exhausted (type \
         rate_limit_error); not retried: the provider asked to wait longer than the 60 s the \
         adapter waits (MAX_RETRY_DELAY)"
    );
    assert_eq!(fake.requests().len(), 1, "not retried");
}

#[tokio::test]
async fn a_404_names_the_full_url_and_says_to_check_the_base_url_and_model() {
    // Trigger: an unknown model (Anthropic answers 404 not_found_error).
    let fake =
        FakeMessages::start([fake::error(404, "not_found_error", "model: claude-nope")]).await;
    let model = builder(&fake.base_url()).build().unwrap();
    let options = GenerationOptions::default();
    let history = [Message::user("hi")];
    let e = model
        .generate(request(&prefix(), &history, &options))
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(404));
    let text = e.to_string();
    assert!(text.contains("model: claude-nope"), "{text}");
    assert_eq!(
        text,
        format!(
            "the provider rejected the request (HTTP 404): model: claude-nope (type \
             not_found_error); `{}/v1/messages` was not found: check the base URL and the model \
             name",
            fake.base_url()
        )
    );
}

#[tokio::test]
async fn a_base_url_ending_in_v1_messages_is_refused_saying_what_to_drop() {
    // Trigger: `https://api.anthropic.com/v1/messages` as the base URL was posted to
    // `.../v1/messages/v1/messages`.
    let fake = FakeMessages::start([fake::message(
        json!([{"type": "text", "text": "hello"}]),
        "end_turn",
        json!({"input_tokens": 1, "output_tokens": 1}),
    )])
    .await;
    for base in [
        format!("{}/v1/messages", fake.base_url()),
        format!("{}/v1/messages/", fake.base_url()),
    ] {
        let e = builder(&base).build().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "invalid base URL `{base}`: it ends in `/v1/messages`, which the adapter appends \
                 itself; drop it and pass `{}`",
                fake.base_url()
            )
        );
    }
    // `/v1` alone stays allowed, and the suggested base URL works end to end.
    for base in [fake.base_url(), format!("{}/v1", fake.base_url())] {
        let model = builder(&base).build().unwrap();
        assert_eq!(model.endpoint(), format!("{}/v1/messages", fake.base_url()));
    }
    let model = builder(&fake.base_url()).build().unwrap();
    let options = GenerationOptions::default();
    let history = [Message::user("hi")];
    let out = model
        .generate(request(&prefix(), &history, &options))
        .await
        .unwrap();
    assert_eq!(out.message.text, "hello");
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn a_base_url_without_a_scheme_is_a_config_error_saying_to_add_it() {
    // Trigger: ANTHROPIC_BASE_URL=127.0.0.1:9 gave "relative URL without a base".
    let e = builder("127.0.0.1:9").build().unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid base URL `127.0.0.1:9`: the base URL has no scheme: include `http://` or \
         `https://` (e.g. `http://127.0.0.1:8080`)"
    );
}
