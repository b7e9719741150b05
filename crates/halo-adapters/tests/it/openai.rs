//! OpenAI-compatible adapter over a loopback fake that speaks the real wire format.
//!
//! Agent runs through `HaloAgent` check the cache invariants on every recorded body (prefix
//! bytes identical, messages append-only, tool calls paired, arguments replayed byte for
//! byte); the rest pins error mapping, retries, usage and finish-reason mapping, and
//! key redaction.

mod fake;
mod history;
mod prompt_cache;
mod stream;
mod stream_fake;

use std::collections::HashMap;
use std::time::Duration;

use halo_adapters::openai::{
    ConfigError, DEEPSEEK_DEFAULT_MODEL, OPENAI_DEFAULT_MODEL, OpenAiCompatible, Profile,
};
use halo_core::tool::{NoArgs, Tool, ToolError, ToolOutput};
use halo_core::{
    ContentPart, FinishReason, GenerationOptions, HaloAgent, InvalidRequestKind, Message,
    ModelAdapter, ModelError, ModelRequest, ModelResponse, ResponseFormat, StablePrefix,
    ToolChoice, ToolSpec, Usage,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use fake::{Completion, FakeChat, Shape, deepseek_usage, error_response, openai_usage, raw_parts};

const KEY: &str = "sk-test-9f8e7d6c5b4a-SECRET";

/// Arguments with odd spacing and key order: they must come back byte for byte.
const ODD_ARGS: &str = "{ \"b\" :2,\"a\":  40 }";

struct Add;
#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// First addend.
    a: i64,
    /// Second addend.
    b: i64,
}
impl Tool for Add {
    type Args = AddArgs;
    fn name(&self) -> &str {
        "add"
    }
    fn description(&self) -> &str {
        "Adds two integers."
    }
    async fn call(&self, args: AddArgs) -> Result<ToolOutput, ToolError> {
        Ok((args.a + args.b).to_string().into())
    }
}

struct Clock;
impl Tool for Clock {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "clock"
    }
    fn description(&self) -> &str {
        "Tells the time."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("12:00".into())
    }
}

fn few_shot() -> Vec<Message> {
    vec![Message::user("What is 1+1?"), Message::assistant("2")]
}

/// Messages that come from the prefix: the system message and the two few-shot turns.
const PREFIX_MESSAGES: usize = 3;

/// The cache invariants over every body of a run: the prefix messages and the `tools`
/// array are byte-identical in all requests, and each request's `messages` starts with the
/// previous request's.
fn assert_cache_invariants(bodies: &[Vec<u8>]) {
    assert!(
        bodies.len() >= 2,
        "need several requests, got {}",
        bodies.len()
    );
    let parts: Vec<_> = bodies.iter().map(|b| raw_parts(b)).collect();
    let (first_messages, first_tools) = &parts[0];
    assert!(first_tools.is_some(), "the run has tools");
    for (n, (messages, tools)) in parts.iter().enumerate() {
        assert_eq!(
            messages[..PREFIX_MESSAGES],
            first_messages[..PREFIX_MESSAGES],
            "prefix messages of request {} differ from request 1",
            n + 1
        );
        assert_eq!(tools, first_tools, "tools of request {} differ", n + 1);
    }
    for n in 1..parts.len() {
        let (before, _) = &parts[n - 1];
        let (after, _) = &parts[n];
        assert!(
            after.len() > before.len(),
            "request {} has no new messages",
            n + 1
        );
        assert_eq!(
            after[..before.len()],
            before[..],
            "request {} does not start with the messages of request {}",
            n + 1,
            n
        );
    }
}

fn bodies(fake: &FakeChat) -> Vec<Vec<u8>> {
    fake.requests().into_iter().map(|r| r.body).collect()
}

/// The assistant message whose first tool call has this id.
fn assistant_with_call<'a>(body: &'a Value, id: &str) -> &'a Value {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant" && m["tool_calls"][0]["id"] == id)
        .unwrap_or_else(|| panic!("no assistant message calling {id} in {body}"))
}

fn tool_result<'a>(body: &'a Value, id: &str) -> &'a Value {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no tool result for {id} in {body}"))
}

#[tokio::test]
async fn openai_agent_run_keeps_prefix_stable_and_replays_arguments() {
    let fake = FakeChat::start([
        Completion::new(Shape::OpenAi)
            .tool_call("call_1", "add", ODD_ARGS)
            .usage(openai_usage(1200, 20, 0))
            .respond(),
        Completion::new(Shape::OpenAi)
            .tool_call("call_2", "clock", "")
            .tool_call("call_3", "add", "{\"a\":1,\"b\":1}")
            .usage(openai_usage(1300, 15, 1152))
            .respond(),
        Completion::new(Shape::OpenAi)
            .text("40+2 is 42, and it is 12:00.")
            .usage(openai_usage(1350, 12, 1280))
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
        .tool(Clock)
        .unwrap()
        .tool(Add)
        .unwrap()
        .options(GenerationOptions::default().with_max_tokens(256))
        .session_id("sess-42")
        .build();

    let out = agent
        .generate_text("What is 40+2, and the time?")
        .await
        .unwrap();
    fake.finish();

    assert_eq!(out.text, "40+2 is 42, and it is 12:00.");
    assert_eq!(out.steps.len(), 3);
    assert_eq!(out.steps[0].tool_results[0].content, "42");
    assert_eq!(out.steps[0].finish_reason, FinishReason::ToolCalls);
    assert_eq!(out.steps[2].finish_reason, FinishReason::Stop);
    let cached: Vec<_> = out
        .steps
        .iter()
        .map(|s| s.usage.cache_read_tokens)
        .collect();
    assert_eq!(cached, [Some(0), Some(1152), Some(1280)]);
    assert_eq!(out.stats.cache_read_tokens, 2432);
    assert_eq!(out.stats.input_tokens, 3850);
    assert_eq!(out.stats.output_tokens, 47);

    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert_cache_invariants(&bodies(&fake));
    for r in &requests {
        assert_eq!(r.authorization.as_deref(), Some(&*format!("Bearer {KEY}")));
        let body = r.json();
        assert_eq!(body["model"], "gpt-4o-mini");
        assert_eq!(body["prompt_cache_key"], "sess-42");
        assert_eq!(body["tool_choice"], "auto");
        assert_eq!(body["max_completion_tokens"], 256);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "You are a calculator."})
        );
        assert_eq!(
            body["messages"][2],
            json!({"role": "assistant", "content": "2"})
        );
        let names: Vec<_> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["add", "clock"],
            "tools in the prefix's (sorted) order"
        );
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(
            body["tools"][0]["function"]["description"],
            "Adds two integers."
        );
        assert_eq!(
            body["tools"][0]["function"]["parameters"]["required"],
            json!(["a", "b"])
        );
        for m in body["messages"].as_array().unwrap() {
            assert!(
                m.get("reasoning_content").is_none(),
                "openai gets no reasoning_content: {m}"
            );
        }
    }

    let second = requests[1].json();
    let call = assistant_with_call(&second, "call_1");
    assert_eq!(call["content"], "");
    assert_eq!(call["tool_calls"][0]["function"]["arguments"], ODD_ARGS);
    assert_eq!(call["tool_calls"][0]["function"]["name"], "add");
    assert_eq!(call["tool_calls"][0]["type"], "function");
    assert_eq!(tool_result(&second, "call_1")["content"], "42");
    // The raw bytes of the replayed call carry the odd string escaped exactly once.
    let (raw_messages, _) = raw_parts(&requests[1].body);
    assert!(
        raw_messages[4].contains(r#""arguments":"{ \"b\" :2,\"a\":  40 }""#),
        "{}",
        raw_messages[4]
    );

    let third = requests[2].json();
    let calls = &assistant_with_call(&third, "call_2")["tool_calls"];
    assert_eq!(
        calls[0]["function"]["arguments"], "{}",
        "\"\" is replayed as {{}}"
    );
    assert_eq!(calls[1]["function"]["arguments"], "{\"a\":1,\"b\":1}");
    assert_eq!(tool_result(&third, "call_2")["content"], "12:00");
    assert_eq!(tool_result(&third, "call_3")["content"], "2");
}

#[tokio::test]
async fn openai_prompt_cache_key_defaults_to_the_prefix_fingerprint() {
    let fake = FakeChat::start([
        Completion::new(Shape::OpenAi)
            .tool_call("c1", "clock", "{}")
            .respond(),
        Completion::new(Shape::OpenAi).text("noon").respond(),
    ])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .build()
        .unwrap();
    let mut agent = HaloAgent::builder(model)
        .system("Tell the time.")
        .tool(Clock)
        .unwrap()
        .build();
    let fingerprint = agent.prefix().fingerprint().to_string();
    agent.generate_text("time?").await.unwrap();
    fake.finish();
    let keys: Vec<_> = fake
        .requests()
        .iter()
        .map(|r| r.json()["prompt_cache_key"].clone())
        .collect();
    assert_eq!(keys, [json!(fingerprint), json!(fingerprint)]);
    assert_eq!(fingerprint.len(), 16);
}

#[tokio::test]
async fn deepseek_agent_run_replays_reasoning_on_every_assistant_message() {
    let fake = FakeChat::start([
        Completion::new(Shape::DeepSeek)
            .reasoning("I should add 40 and 2.")
            .tool_call("call_00_a", "add", ODD_ARGS)
            .usage(deepseek_usage(0, 1100, 30))
            .respond(),
        Completion::new(Shape::DeepSeek)
            .tool_call("call_00_b", "clock", "")
            .usage(deepseek_usage(1088, 40, 10))
            .respond(),
        Completion::new(Shape::DeepSeek)
            .reasoning("Both results are in.")
            .text("42, at 12:00.")
            .usage(deepseek_usage(1152, 20, 8))
            .respond(),
        Completion::new(Shape::DeepSeek)
            .text("You're welcome.")
            .usage(deepseek_usage(1216, 9, 4))
            .respond(),
    ])
    .await;
    let model = OpenAiCompatible::deepseek(DEEPSEEK_DEFAULT_MODEL)
        .api_key(KEY)
        .base_url(fake.base_url())
        .max_retries(0)
        .build()
        .unwrap();
    assert_eq!(model.provider(), "deepseek");
    let mut agent = HaloAgent::builder(model)
        .system("You are a calculator.")
        .few_shot(few_shot())
        .tool(Add)
        .unwrap()
        .tool(Clock)
        .unwrap()
        .options(GenerationOptions::default().with_max_tokens(512))
        .session_id("sess-7")
        .build();

    let first = agent.generate_text("40+2 and the time?").await.unwrap();
    let second = agent.generate_text("Thanks!").await.unwrap();
    fake.finish();

    assert_eq!(first.text, "42, at 12:00.");
    assert_eq!(second.text, "You're welcome.");
    assert_eq!(
        first.steps[0].message.reasoning_text().as_deref(),
        Some("I should add 40 and 2.")
    );
    assert!(first.steps[1].message.reasoning.is_empty());
    let cached: Vec<_> = first
        .steps
        .iter()
        .chain(&second.steps)
        .map(|s| s.usage.cache_read_tokens)
        .collect();
    assert_eq!(cached, [Some(0), Some(1088), Some(1152), Some(1216)]);
    assert_eq!(first.steps[1].usage.input_tokens, Some(1128));
    assert_eq!(first.stats.cache_read_tokens, 2240);

    let requests = fake.requests();
    assert_eq!(requests.len(), 4);
    assert_cache_invariants(&bodies(&fake));
    for r in &requests {
        let body = r.json();
        assert_eq!(body["model"], "deepseek-chat");
        assert!(
            body.get("prompt_cache_key").is_none(),
            "deepseek gets no prompt_cache_key"
        );
        assert_eq!(body["max_tokens"], 512);
        for m in body["messages"].as_array().unwrap() {
            if m["role"] == "assistant" {
                assert!(
                    m["reasoning_content"].is_string(),
                    "reasoning_content on every assistant message: {m}"
                );
                assert!(
                    m["content"].is_string(),
                    "content is a string, never null: {m}"
                );
            } else {
                assert!(m.get("reasoning_content").is_none());
            }
        }
        // The few-shot assistant turn had no reasoning.
        assert_eq!(
            body["messages"][2],
            json!({"role": "assistant", "content": "2", "reasoning_content": ""})
        );
    }
    let last = requests[3].json();
    let a = assistant_with_call(&last, "call_00_a");
    assert_eq!(a["reasoning_content"], "I should add 40 and 2.");
    assert_eq!(a["content"], "");
    assert_eq!(a["tool_calls"][0]["function"]["arguments"], ODD_ARGS);
    let b = assistant_with_call(&last, "call_00_b");
    assert_eq!(b["reasoning_content"], "");
    assert_eq!(b["tool_calls"][0]["function"]["arguments"], "{}");
    let final_answer = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["content"] == "42, at 12:00.")
        .unwrap();
    assert_eq!(final_answer["reasoning_content"], "Both results are in.");
    let user_turns: Vec<_> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(
        user_turns,
        [
            json!("What is 1+1?"),
            json!("40+2 and the time?"),
            json!("Thanks!")
        ]
    );
}

fn prefix() -> StablePrefix {
    StablePrefix::new("Be brief.")
}

async fn call(
    model: &OpenAiCompatible,
    prefix: &StablePrefix,
    options: &GenerationOptions,
) -> Result<ModelResponse, ModelError> {
    let history = [Message::user("hi")];
    model
        .generate(ModelRequest::new(prefix, &history, options))
        .await
}

fn custom(fake: &FakeChat) -> OpenAiCompatible {
    OpenAiCompatible::custom(fake.base_url(), "qwen2.5-7b-instruct")
        .max_retries(0)
        .build()
        .unwrap()
}

#[tokio::test]
async fn custom_server_without_cache_fields_reports_unknown_not_zero() {
    let fake = FakeChat::start([
        Completion::new(Shape::Bare)
            .text("hello")
            .usage(json!({"prompt_tokens": 31, "completion_tokens": 2, "total_tokens": 33}))
            .respond(),
        Completion::new(Shape::Bare)
            .text("no usage at all")
            .respond(),
        // llama.cpp: cached tokens only in its `timings` object.
        Completion::new(Shape::Bare)
            .text("from llama.cpp")
            .usage(json!({"prompt_tokens": 316, "completion_tokens": 5, "total_tokens": 321}))
            .field(
                "timings",
                json!({"cache_n": 308, "prompt_n": 8, "prompt_ms": 30.1, "predicted_n": 5}),
            )
            .respond(),
    ])
    .await;
    let model = custom(&fake);
    assert_eq!(model.provider(), "openai_compatible");
    let options = GenerationOptions::default();
    let first = call(&model, &prefix(), &options).await.unwrap();
    assert_eq!(
        first.usage,
        Usage {
            input_tokens: Some(31),
            output_tokens: Some(2),
            cache_read_tokens: None,
            cache_write_tokens: None,
            reasoning_tokens: None,
        }
    );
    assert_eq!(first.model.as_deref(), Some("qwen2.5-7b-instruct"));
    assert_eq!(first.message.text, "hello");
    let second = call(&model, &prefix(), &options).await.unwrap();
    assert_eq!(second.usage, Usage::default());
    let third = call(&model, &prefix(), &options).await.unwrap();
    assert_eq!(third.usage.cache_read_tokens, Some(308));
    assert_eq!(third.usage.input_tokens, Some(316));
    fake.finish();
    for r in fake.requests() {
        assert_eq!(r.authorization, None, "no key, no Authorization header");
        let body = r.json();
        assert!(body.get("prompt_cache_key").is_none());
        assert!(
            body.get("tools").is_none() && body.get("tool_choice").is_none(),
            "no tools, no tool fields: {body}"
        );
    }
}

#[tokio::test]
async fn llama_cpp_timings_without_usage_give_input_cache_and_output() {
    // Trigger: a llama-server build that sends `timings` and no `usage` lost every count.
    let timings = json!({
        "cache_n": 236, "prompt_n": 14, "prompt_ms": 51.2, "prompt_per_token_ms": 3.66,
        "prompt_per_second": 273.4, "predicted_n": 9, "predicted_ms": 80.1,
        "predicted_per_token_ms": 8.9, "predicted_per_second": 112.4
    });
    let fake = FakeChat::start([Completion::new(Shape::Bare)
        .text("from llama.cpp")
        .field("timings", timings)
        .respond()])
    .await;
    let turn = call(&custom(&fake), &prefix(), &GenerationOptions::default())
        .await
        .unwrap();
    fake.finish();
    assert_eq!(
        turn.usage,
        Usage {
            input_tokens: Some(250),
            output_tokens: Some(9),
            cache_read_tokens: Some(236),
            cache_write_tokens: None,
            reasoning_tokens: None,
        }
    );
}

#[tokio::test]
async fn openai_usage_reads_cache_reads_writes_and_reasoning() {
    let usage = json!({
        "prompt_tokens": 2048, "completion_tokens": 300, "total_tokens": 2348,
        "prompt_tokens_details": {"cached_tokens": 1536, "cache_write_tokens": 512, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 256}
    });
    let fake = FakeChat::start([Completion::new(Shape::OpenAi)
        .text("ok")
        .usage(usage)
        .respond()])
    .await;
    let model = OpenAiCompatible::openai("gpt-5.6")
        .api_key(KEY)
        .base_url(fake.base_url())
        .build()
        .unwrap();
    let got = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap();
    fake.finish();
    assert_eq!(
        got.usage,
        Usage {
            input_tokens: Some(2048),
            output_tokens: Some(300),
            cache_read_tokens: Some(1536),
            cache_write_tokens: Some(512),
            reasoning_tokens: Some(256),
        }
    );
}

#[tokio::test]
async fn deepseek_hit_tokens_win_over_cached_tokens_and_fill_in_input() {
    // prompt_tokens missing: input is hit + miss; prompt_cache_hit_tokens is the source.
    let usage = json!({
        "completion_tokens": 7,
        "prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 25,
        "prompt_tokens_details": {"cached_tokens": 600}
    });
    let fake = FakeChat::start([Completion::new(Shape::DeepSeek)
        .text("ok")
        .usage(usage)
        .respond()])
    .await;
    let model = OpenAiCompatible::deepseek("deepseek-v4-flash")
        .api_key(KEY)
        .base_url(fake.base_url())
        .build()
        .unwrap();
    let got = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap();
    fake.finish();
    assert_eq!(got.usage.cache_read_tokens, Some(640));
    assert_eq!(got.usage.input_tokens, Some(665));
    assert_eq!(got.usage.output_tokens, Some(7));
    assert_eq!(got.model.as_deref(), Some("deepseek-chat"));
    assert_eq!(got.id.as_deref(), Some("chatcmpl-fake"));
}

#[tokio::test]
async fn finish_reasons_are_mapped_and_tool_calls_win() {
    let cases: Vec<(Completion, FinishReason)> = vec![
        (
            Completion::new(Shape::OpenAi).text("a").finish("stop"),
            FinishReason::Stop,
        ),
        (
            Completion::new(Shape::OpenAi).text("a").finish("length"),
            FinishReason::Length,
        ),
        (
            Completion::new(Shape::OpenAi)
                .text("")
                .finish("content_filter"),
            FinishReason::ContentFilter,
        ),
        (
            Completion::new(Shape::OpenAi)
                .tool_call("c1", "clock", "{}")
                .finish("tool_calls"),
            FinishReason::ToolCalls,
        ),
        // Ollama ends tool-call turns with "stop".
        (
            Completion::new(Shape::Bare)
                .tool_call("c2", "clock", "")
                .finish("stop"),
            FinishReason::ToolCalls,
        ),
    ];
    let fake = FakeChat::start(cases.iter().map(|(c, _)| c.respond())).await;
    let model = custom(&fake);
    for (completion, expected) in &cases {
        let got = call(&model, &prefix(), &GenerationOptions::default())
            .await
            .unwrap();
        assert_eq!(
            &got.finish_reason,
            expected,
            "for {}",
            completion.to_json()["choices"][0]
        );
    }
    fake.finish();
}

/// DeepSeek interrupted inference: the turn is incomplete, so it is a retryable error, and a
/// retry that succeeds gives the whole answer.
#[tokio::test]
async fn insufficient_system_resource_is_retried_as_a_truncated_turn() {
    let fake = FakeChat::start([
        Completion::new(Shape::DeepSeek)
            .text("The answer is")
            .finish("insufficient_system_resource")
            .respond(),
        Completion::new(Shape::DeepSeek)
            .text("The answer is 42.")
            .respond(),
    ])
    .await;
    let once = custom(&fake);
    let err = call(&once, &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Truncated(m) if m.starts_with("insufficient_system_resource")),
        "{err:?}"
    );
    assert!(err.is_retryable());
    let got = call(&once, &prefix(), &GenerationOptions::default())
        .await
        .unwrap();
    assert_eq!(got.message.text, "The answer is 42.");
    fake.finish();

    let fake = FakeChat::start([
        Completion::new(Shape::DeepSeek)
            .finish("insufficient_system_resource")
            .respond(),
        Completion::new(Shape::DeepSeek).text("42").respond(),
    ])
    .await;
    let retrying = OpenAiCompatible::custom(fake.base_url(), "deepseek-chat")
        .max_retries(1)
        .retry_min_delay(Duration::from_millis(1))
        .build()
        .unwrap();
    let got = call(&retrying, &prefix(), &GenerationOptions::default())
        .await
        .unwrap();
    assert_eq!(got.message.text, "42");
    assert_eq!(fake.requests().len(), 2);
    fake.finish();
}

#[tokio::test]
async fn tool_calls_keep_the_raw_argument_string_and_reasoning_is_read() {
    let fake = FakeChat::start([Completion::new(Shape::DeepSeek)
        .reasoning("think")
        .tool_call("call_x", "add", ODD_ARGS)
        .tool_call("call_y", "clock", "")
        .respond()])
    .await;
    let model = custom(&fake);
    let got = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap();
    fake.finish();
    let calls = &got.message.tool_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_x", "add")
    );
    assert_eq!(calls[0].raw_arguments, ODD_ARGS);
    assert_eq!(calls[0].arguments().unwrap(), json!({"a": 40, "b": 2}));
    assert_eq!(calls[1].raw_arguments, "");
    assert_eq!(got.message.reasoning_text().as_deref(), Some("think"));
    assert_eq!(got.message.text, "");
}

#[tokio::test]
async fn request_body_bytes_are_exact() {
    // A pinned body: any drift in field order, names or shapes shows up here.
    let model = OpenAiCompatible::custom("http://127.0.0.1:9/v1", "m")
        .body_field("cache_prompt", json!(true))
        .build()
        .unwrap();
    let prefix = StablePrefix::new("sys")
        .with_tool(ToolSpec::new(
            "t",
            "T.",
            json!({"type": "object", "properties": {}}),
        ))
        .unwrap();
    let mut assistant = halo_core::AssistantMessage::default();
    assistant
        .tool_calls
        .push(halo_core::ToolCall::new("c1", "t", ""));
    let history = [
        Message::user("u"),
        Message::Assistant(assistant.clone()),
        Message::Tool(halo_core::ToolResult::ok(&assistant.tool_calls[0], "r")),
    ];
    let mut options = GenerationOptions::default()
        .with_tool_choice(ToolChoice::Tool("t".into()))
        .with_max_tokens(5)
        .with_temperature(0.5)
        .with_seed(7);
    options.stop = vec!["END".into()];
    options.response_format = ResponseFormat::Json { schema: None };
    let body = model
        .request_body(&ModelRequest::new(&prefix, &history, &options).with_session_id("s"))
        .unwrap();
    assert_eq!(
        String::from_utf8(body.to_vec()).unwrap(),
        concat!(
            r#"{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":"u"},"#,
            r#"{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"t","arguments":"{}"}}]},"#,
            r#"{"role":"tool","tool_call_id":"c1","content":"r"}],"#,
            r#""tools":[{"type":"function","function":{"name":"t","description":"T.","parameters":{"properties":{},"type":"object"}}}],"#,
            r#""tool_choice":{"type":"function","function":{"name":"t"}},"max_tokens":5,"temperature":0.5,"seed":7,"#,
            r#""stop":["END"],"response_format":{"type":"json_object"},"cache_prompt":true}"#
        )
    );
    // Body fields alone after the messages, in the order of their names.
    let model = OpenAiCompatible::custom("http://127.0.0.1:9/v1", "m")
        .body_field("x_b", json!([true, null]))
        .body_field("x_a", json!({"k": "v\""}))
        .build()
        .unwrap();
    let options = GenerationOptions::default();
    let body = model
        .request_body(&ModelRequest::new(
            &StablePrefix::new(""),
            &history[..1],
            &options,
        ))
        .unwrap();
    assert_eq!(
        String::from_utf8(body.to_vec()).unwrap(),
        r#"{"model":"m","messages":[{"role":"user","content":"u"}],"x_a":{"k":"v\""},"x_b":[true,null]}"#
    );
}

#[tokio::test]
async fn tool_choice_modes_and_json_schema_are_sent() {
    let model = OpenAiCompatible::openai("gpt-4o")
        .api_key(KEY)
        .build()
        .unwrap();
    let prefix = StablePrefix::new("s")
        .with_tool(ToolSpec::new("t", "T", json!({"type": "object"})))
        .unwrap();
    let history = [Message::user("u")];
    let body_for = |options: GenerationOptions| -> Value {
        let bytes = model
            .request_body(&ModelRequest::new(&prefix, &history, &options))
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    };
    for (choice, wire) in [
        (ToolChoice::Auto, json!("auto")),
        (ToolChoice::Required, json!("required")),
        (ToolChoice::None, json!("none")),
    ] {
        let body = body_for(GenerationOptions::default().with_tool_choice(choice));
        assert_eq!(body["tool_choice"], wire);
        assert_eq!(
            body["tools"].as_array().unwrap().len(),
            1,
            "tools stay in the request"
        );
    }
    let schema = json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": false});
    let mut options = GenerationOptions::default();
    options.response_format = ResponseFormat::Json {
        schema: Some(schema.clone()),
    };
    let body = body_for(options);
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "response", "schema": schema, "strict": true}})
    );
}

#[tokio::test]
async fn images_go_as_image_url_parts_and_deepseek_refuses_them() {
    let prefix = prefix();
    let history = [Message::User {
        content: vec![
            ContentPart::Text {
                text: "what is this?".into(),
            },
            ContentPart::Image {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            },
        ],
    }];
    let options = GenerationOptions::default();
    let request = ModelRequest::new(&prefix, &history, &options);

    let openai = OpenAiCompatible::openai("gpt-4o")
        .api_key(KEY)
        .build()
        .unwrap();
    let body: Value = serde_json::from_slice(&openai.request_body(&request).unwrap()).unwrap();
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
        ])
    );

    let deepseek = OpenAiCompatible::deepseek("deepseek-chat")
        .api_key(KEY)
        .build()
        .unwrap();
    let err = deepseek.request_body(&request).unwrap_err();
    assert!(
        matches!(&err, ModelError::Unsupported(m) if m.contains("no images")),
        "{err}"
    );
    let mut options = GenerationOptions::default();
    options.response_format = ResponseFormat::Json {
        schema: Some(json!({"type": "object"})),
    };
    let err = deepseek
        .request_body(&ModelRequest::new(&prefix, &history[..0], &options))
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Unsupported(m) if m.contains("json_object")),
        "{err}"
    );
}

/// One error case: the fake's answer and what the adapter must make of it.
struct ErrorCase {
    name: &'static str,
    response: ResponseTemplate,
    check: fn(&ModelError) -> bool,
    retryable: bool,
    retry_after: Option<Duration>,
    excerpt: &'static str,
}

#[tokio::test]
async fn http_errors_map_to_typed_errors_with_excerpts_and_no_key() {
    let cases = vec![
        ErrorCase {
            name: "400",
            response: error_response(
                400,
                "Invalid 'messages[1].content': empty",
                "invalid_request_error",
                None,
            ),
            check: |e| matches!(e, ModelError::InvalidRequest { status: 400, .. }),
            retryable: false,
            retry_after: None,
            excerpt: "Invalid 'messages[1].content': empty (type invalid_request_error)",
        },
        ErrorCase {
            name: "401 echoing the key",
            response: error_response(
                401,
                &format!(
                    "Incorrect API key provided: {KEY}. You can find your API key at https://platform.openai.com/account/api-keys."
                ),
                "invalid_request_error",
                Some("invalid_api_key"),
            ),
            check: |e| matches!(e, ModelError::Authentication { status: 401, .. }),
            retryable: false,
            retry_after: None,
            excerpt: "Incorrect API key provided: [redacted].",
        },
        // Regression: the excerpt used to be cut before redaction, so a key straddling the
        // cut survived in part.
        ErrorCase {
            name: "401 echoing the key across the excerpt's end",
            response: error_response(
                401,
                &format!("{} you sent Bearer {KEY}", "x".repeat(455)),
                "invalid_request_error",
                None,
            ),
            check: |e| matches!(e, ModelError::Authentication { status: 401, .. }),
            retryable: false,
            retry_after: None,
            excerpt: "xxxxxxxxxx",
        },
        ErrorCase {
            name: "402",
            response: error_response(
                402,
                "Insufficient Balance",
                "unknown_error",
                Some("invalid_request_error"),
            ),
            check: |e| matches!(e, ModelError::InsufficientBalance { status: 402, .. }),
            retryable: false,
            retry_after: None,
            excerpt: "Insufficient Balance",
        },
        ErrorCase {
            name: "403",
            response: error_response(
                403,
                "Project does not have access to model",
                "invalid_request_error",
                Some("model_not_found"),
            ),
            check: |e| matches!(e, ModelError::Authentication { status: 403, .. }),
            retryable: false,
            retry_after: None,
            excerpt: "Project does not have access to model",
        },
        ErrorCase {
            name: "422",
            response: error_response(
                422,
                "Invalid parameters: temperature must be at most 2",
                "invalid_request_error",
                None,
            ),
            check: |e| matches!(e, ModelError::InvalidRequest { status: 422, .. }),
            retryable: false,
            retry_after: None,
            excerpt: "Invalid parameters: temperature must be at most 2",
        },
        ErrorCase {
            name: "429 retry-after seconds",
            response: error_response(
                429,
                "Rate limit reached for requests",
                "requests",
                Some("rate_limit_exceeded"),
            )
            .insert_header("retry-after", "2"),
            check: |e| matches!(e, ModelError::RateLimited { .. }),
            retryable: true,
            retry_after: Some(Duration::from_secs(2)),
            excerpt: "Rate limit reached for requests (type requests, code rate_limit_exceeded)",
        },
        ErrorCase {
            name: "429 retry-after-ms first",
            response: error_response(429, "Rate limit reached", "requests", None)
                .insert_header("retry-after-ms", "1500")
                .insert_header("retry-after", "9"),
            check: |e| matches!(e, ModelError::RateLimited { .. }),
            retryable: true,
            retry_after: Some(Duration::from_millis(1500)),
            excerpt: "Rate limit reached",
        },
        ErrorCase {
            name: "429 insufficient_quota",
            response: error_response(
                429,
                "You exceeded your current quota, please check your plan and billing details.",
                "insufficient_quota",
                Some("insufficient_quota"),
            )
            .insert_header("retry-after", "1"),
            check: |e| matches!(e, ModelError::InsufficientBalance { status: 429, .. }),
            retryable: false,
            retry_after: None,
            excerpt: "You exceeded your current quota",
        },
        ErrorCase {
            name: "429 credit_balance_exhausted code",
            response: error_response(
                429,
                "Your credit balance is exhausted.",
                "requests",
                Some("credit_balance_exhausted"),
            ),
            check: |e| matches!(e, ModelError::InsufficientBalance { status: 429, .. }),
            retryable: false,
            retry_after: None,
            excerpt: "Your credit balance is exhausted.",
        },
        ErrorCase {
            name: "500",
            response: error_response(
                500,
                "The server had an error while processing your request.",
                "server_error",
                None,
            ),
            check: |e| matches!(e, ModelError::Server { status: 500, .. }),
            retryable: true,
            retry_after: None,
            excerpt: "The server had an error while processing your request.",
        },
        ErrorCase {
            name: "503 with retry-after",
            response: error_response(
                503,
                "Server overloaded, please retry shortly.",
                "server_error",
                None,
            )
            .insert_header("retry-after", "1"),
            check: |e| matches!(e, ModelError::Server { status: 503, .. }),
            retryable: true,
            retry_after: Some(Duration::from_secs(1)),
            excerpt: "Server overloaded, please retry shortly.",
        },
        ErrorCase {
            name: "502 html body",
            response: ResponseTemplate::new(502)
                .set_body_raw("<html><body>502 Bad Gateway</body></html>", "text/html"),
            check: |e| matches!(e, ModelError::Server { status: 502, .. }),
            retryable: true,
            retry_after: None,
            excerpt: "provider error (HTTP 502): 502 Bad Gateway; `http://127.0.0.1:",
        },
        ErrorCase {
            name: "404 ollama string error",
            response: ResponseTemplate::new(404).set_body_json(
                json!({"error": "model \"llama9\" not found, try pulling it first"}),
            ),
            check: |e| matches!(e, ModelError::Http { status: 404, .. }),
            retryable: false,
            retry_after: None,
            excerpt: "model \"llama9\" not found, try pulling it first",
        },
    ];
    let fake = FakeChat::start(cases.iter().map(|c| c.response.clone())).await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .max_retries(0)
        .build()
        .unwrap();
    for case in &cases {
        let err = call(&model, &prefix(), &GenerationOptions::default())
            .await
            .unwrap_err();
        assert!((case.check)(&err), "{}: got {err:?}", case.name);
        assert_eq!(err.is_retryable(), case.retryable, "{}: {err:?}", case.name);
        assert_eq!(
            err.retry_after(),
            case.retry_after,
            "{}: {err:?}",
            case.name
        );
        let text = err.to_string();
        assert!(
            text.contains(case.excerpt),
            "{}: `{text}` lacks `{}`",
            case.name,
            case.excerpt
        );
        let debug = format!("{err:?}");
        let leaked = KEY
            .as_bytes()
            .windows(8)
            .filter_map(|w| std::str::from_utf8(w).ok())
            .find(|w| text.contains(w) || debug.contains(w));
        assert_eq!(
            leaked, None,
            "{}: part of the key leaked: {text}",
            case.name
        );
    }
    fake.finish();
    assert_eq!(
        fake.requests().len(),
        cases.len(),
        "max_retries(0) sends each request once"
    );
}

#[tokio::test]
async fn invalid_requests_name_their_kind_from_the_providers_code_or_message() {
    // Each body as the provider sends it (sources in `openai/error.rs`).
    let cases: Vec<(&str, ResponseTemplate, InvalidRequestKind)> = vec![
        (
            "OpenAI context_length_exceeded",
            error_response(
                400,
                "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.",
                "invalid_request_error",
                Some("context_length_exceeded"),
            ),
            InvalidRequestKind::ContextWindowExceeded,
        ),
        (
            "DeepSeek maximum context length",
            error_response(
                400,
                "This model's maximum context length is 131072 tokens. However, you requested 131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.",
                "invalid_request_error",
                Some("invalid_request_error"),
            ),
            InvalidRequestKind::ContextWindowExceeded,
        ),
        (
            "llama.cpp exceed_context_size_error",
            ResponseTemplate::new(400).set_body_json(json!({"error": {
                "code": 400,
                "message": "request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4476,
                "n_ctx": 4096
            }})),
            InvalidRequestKind::ContextWindowExceeded,
        ),
        (
            "DeepSeek reasoning_content not passed back",
            error_response(
                400,
                "The `reasoning_content` in the thinking mode must be passed back to the API.",
                "invalid_request_error",
                Some("invalid_request_error"),
            ),
            InvalidRequestKind::ReasoningReplayMissing,
        ),
        (
            "OpenAI invalid_function_parameters",
            ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": "Invalid schema for function 'read': In context=(), 'additionalProperties' is required to be supplied and to be false.",
                "type": "invalid_request_error",
                "param": "tools[0].function.parameters",
                "code": "invalid_function_parameters"
            }})),
            InvalidRequestKind::ToolSchemaRejected,
        ),
        (
            "any other 400",
            error_response(
                400,
                "Invalid 'messages[1].content': empty",
                "invalid_request_error",
                None,
            ),
            InvalidRequestKind::Other,
        ),
    ];
    let fake = FakeChat::start(cases.iter().map(|c| c.1.clone())).await;
    let model = custom(&fake);
    for (name, _, kind) in &cases {
        let err = call(&model, &prefix(), &GenerationOptions::default())
            .await
            .unwrap_err();
        let ModelError::InvalidRequest {
            status: 400,
            kind: got,
            ..
        } = &err
        else {
            panic!("{name}: {err:?}")
        };
        assert_eq!(got, kind, "{name}");
        assert_eq!(
            err.is_context_window_exceeded(),
            *kind == InvalidRequestKind::ContextWindowExceeded,
            "{name}"
        );
        assert!(!err.is_retryable(), "{name}");
    }
    fake.finish();
}

#[tokio::test]
async fn a_context_window_error_says_to_shorten_the_history() {
    let fake = FakeChat::start([error_response(
        400,
        "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.",
        "invalid_request_error",
        Some("context_length_exceeded"),
    )])
    .await;
    let err = call(&custom(&fake), &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    fake.finish();
    assert_eq!(
        err.to_string(),
        "the request exceeds the model's context window (HTTP 400): This model's maximum \
         context length is 4097 tokens. However, your messages resulted in 4294 tokens. \
         Please reduce the length of the messages. (type invalid_request_error, code \
         context_length_exceeded); shorten or compact the history"
    );
}

#[tokio::test]
async fn long_error_bodies_are_cut_to_a_bounded_excerpt() {
    let long = "ü".repeat(2000);
    let fake = FakeChat::start([error_response(400, &long, "invalid_request_error", None)]).await;
    let model = custom(&fake);
    let err = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    fake.finish();
    let ModelError::InvalidRequest { message, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(message.starts_with("üüü"), "{message}");
    assert!(
        message.len() <= halo_adapters::openai::MAX_EXCERPT_BYTES + 40,
        "{} bytes",
        message.len()
    );
    assert!(message.contains('…'));
}

#[tokio::test]
async fn a_503_then_200_succeeds_with_one_retry() {
    let fake = FakeChat::start([
        error_response(503, "Server overloaded", "server_error", None)
            .insert_header("retry-after-ms", "5"),
        Completion::new(Shape::OpenAi).text("recovered").respond(),
    ])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .max_retries(1)
        .build()
        .unwrap();
    let got = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap();
    fake.finish();
    assert_eq!(got.message.text, "recovered");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].body, requests[1].body,
        "a retry resends the same bytes"
    );
}

#[tokio::test]
async fn retries_stop_at_max_retries_and_skip_non_retryable_errors() {
    let fake = FakeChat::start([
        error_response(500, "boom 1", "server_error", None),
        error_response(500, "boom 2", "server_error", None),
        error_response(429, "slow down", "requests", None).insert_header("retry-after-ms", "1"),
        Completion::new(Shape::Bare)
            .text("third time lucky")
            .respond(),
        error_response(401, "bad key", "invalid_request_error", None),
    ])
    .await;
    let model = OpenAiCompatible::custom(fake.base_url(), "m")
        .max_retries(1)
        .retry_min_delay(Duration::from_millis(1))
        .build()
        .unwrap();
    let err = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Server { status: 500, message, .. }
            if message.starts_with("boom 2 (type server_error); gave up after 1 retry over ")
                && message.ends_with(" ms")),
        "{err:?}"
    );
    assert_eq!(fake.requests().len(), 2, "one try and one retry");

    let got = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap();
    assert_eq!(got.message.text, "third time lucky");
    assert_eq!(fake.requests().len(), 4);

    let err = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        ModelError::Authentication { status: 401, .. }
    ));
    assert_eq!(fake.requests().len(), 5, "401 is not retried");
    fake.finish();
}

#[tokio::test]
async fn unreadable_success_bodies_are_invalid_responses() {
    let fake = FakeChat::start([
        ResponseTemplate::new(200).set_body_raw("<html>maintenance</html>", "text/html"),
        ResponseTemplate::new(200).set_body_json(json!({"id": "x", "object": "chat.completion", "choices": []})),
        ResponseTemplate::new(200).set_body_json(json!({"error": {"message": "upstream provider failed"}})),
        ResponseTemplate::new(200).set_body_json(json!({"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}}]})),
    ])
    .await;
    let model = custom(&fake);
    let expected = [
        "maintenance",
        "no choices",
        "upstream provider failed",
        "no function name",
    ];
    for want in expected {
        let err = call(&model, &prefix(), &GenerationOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ModelError::InvalidResponse(m) if m.contains(want)),
            "want `{want}`: {err:?}"
        );
        assert!(!err.is_retryable());
    }
    fake.finish();
}

#[tokio::test]
async fn connection_failures_and_timeouts_are_transport_errors() {
    let port = closed_port();
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .max_retries(0)
        .build()
        .unwrap();
    let err = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    // Without retries there is no retry note.
    assert!(
        matches!(&err, ModelError::Transport(m)
            if m.starts_with(&format!("cannot connect to http://127.0.0.1:{port}/v1/chat/completions: "))
                && m.ends_with("; check the base URL and that the server there is running")
                && !m.contains("retr")),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert!(!err.to_string().contains(KEY));

    let fake = FakeChat::start([Completion::new(Shape::OpenAi)
        .text("too late")
        .respond()
        .set_delay(Duration::from_secs(5))])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .timeout(Duration::from_millis(200))
        .max_retries(0)
        .build()
        .unwrap();
    let err = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ModelError::Transport(format!(
            "the request to {}/chat/completions timed out after 200 ms; raise the adapter's \
             timeout or retry later",
            fake.base_url()
        ))
    );
}

/// The 501 page of Python's `http.server` (`python3 -m http.server` answers a POST with it).
const PYTHON_501_PAGE: &str = "<!DOCTYPE HTML>
<html lang=\"en\">
    <head>
        <meta charset=\"utf-8\">
        <title>Error response</title>
    </head>
    <body>
        <h1>Error response</h1>
        <p>Error code: 501</p>
        <p>Message: Unsupported method ('POST').</p>
        <p>Error code explanation: 501 - Server does not support this operation.</p>
    </body>
</html>
";

/// nginx's 404 page.
const NGINX_404_PAGE: &str = "<html>\r
<head><title>404 Not Found</title></head>\r
<body>\r
<center><h1>404 Not Found</h1></center>\r
<hr><center>nginx/1.24.0</center>\r
</body>\r
</html>\r
";

#[tokio::test]
async fn an_html_error_page_is_one_line_of_its_text_and_names_the_full_url() {
    // Trigger: a base URL pointing at a static server or a proxy printed its whole HTML
    // error page, markup and newlines, and named only the URL path, or nothing.
    let fake = FakeChat::start([
        ResponseTemplate::new(501).set_body_raw(PYTHON_501_PAGE, "text/html;charset=utf-8"),
        ResponseTemplate::new(404).set_body_raw(NGINX_404_PAGE, "text/html"),
    ])
    .await;
    let model = custom(&fake);
    let url = format!("{}/chat/completions", fake.base_url());

    let err = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "unexpected HTTP 501: Error response Error response Error code: 501 Message: \
             Unsupported method ('POST'). Error code explanation: 501 - Server does not support \
             this operation.; `{url}` answered with an HTML page, not an API error: check that \
             the base URL points at the provider's API"
        )
    );
    assert!(!err.is_retryable());

    let err = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ModelError::Http {
            status: 404,
            message: format!(
                "404 Not Found 404 Not Found nginx/1.24.0; `{url}` was not found: check the \
                 base URL and the model name"
            ),
        }
    );
    assert!(!err.to_string().contains('\n'));
    fake.finish();
}

/// A port on 127.0.0.1 with nothing listening: bound, then closed.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn nothing_listening_names_the_full_url_and_the_retries_made_over_how_long() {
    // Trigger: a base URL with no server behind it; the error did not say that it had been
    // retried, nor for how long.
    let port = closed_port();
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .max_retries(2)
        .retry_min_delay(Duration::from_millis(20))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let err = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(err.is_retryable());
    let ModelError::Transport(message) = &err else {
        panic!("not a transport error: {err:?}");
    };
    let (head, tail) = message
        .split_once("; gave up after 2 retries over ")
        .unwrap_or_else(|| panic!("no retry count: {message}"));
    assert!(
        head.starts_with(&format!(
            "cannot connect to {url}: tcp connect error: Connection refused"
        )),
        "{message}"
    );
    let (ms, advice) = tail
        .split_once(" ms; ")
        .expect("milliseconds, then the advice");
    assert_eq!(
        advice,
        "check the base URL and that the server there is running"
    );
    let ms: u128 = ms.parse().expect("a whole number of milliseconds");
    // The backoff waits at least 20 ms, then 40 ms; the count is within the call's own time.
    assert!(
        (60..=took.as_millis()).contains(&ms),
        "{ms} ms, call took {took:?}"
    );
    assert!(!err.to_string().contains(KEY));
}

#[test]
fn the_key_never_shows_in_debug_output() {
    let builder = OpenAiCompatible::openai("gpt-4o")
        .api_key(KEY)
        .header("X-Gateway-Key", "gw-secret-123");
    let shown = format!("{builder:?}");
    assert!(
        !shown.contains(KEY) && !shown.contains("gw-secret-123"),
        "{shown}"
    );
    let model = builder.build().unwrap();
    let shown = format!("{model:?}");
    assert!(
        !shown.contains(KEY) && !shown.contains("gw-secret-123"),
        "{shown}"
    );
    assert!(
        shown.contains("[redacted]") && shown.contains("x-gateway-key"),
        "{shown}"
    );
}

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

#[test]
fn profiles_read_their_environment() {
    let openai =
        OpenAiCompatible::from_env_with(Profile::OpenAi, env(&[("OPENAI_API_KEY", "sk-1")]))
            .unwrap();
    assert_eq!(
        openai.endpoint(),
        "https://api.openai.com/v1/chat/completions"
    );
    assert_eq!(openai.model_name(), OPENAI_DEFAULT_MODEL);
    assert_eq!(openai.provider(), "openai");

    let proxied = OpenAiCompatible::from_env_with(
        Profile::OpenAi,
        env(&[
            ("OPENAI_API_KEY", "sk-1\n"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1/"),
            ("OPENAI_MODEL", "qwen3"),
        ]),
    )
    .unwrap();
    assert_eq!(
        proxied.endpoint(),
        "http://127.0.0.1:8000/v1/chat/completions"
    );
    assert_eq!(proxied.model_name(), "qwen3");

    let deepseek =
        OpenAiCompatible::from_env_with(Profile::DeepSeek, env(&[("DEEPSEEK_API_KEY", "sk-2")]))
            .unwrap();
    assert_eq!(
        deepseek.endpoint(),
        "https://api.deepseek.com/chat/completions"
    );
    assert_eq!(deepseek.model_name(), "deepseek-chat");
    assert_eq!(deepseek.profile(), Profile::DeepSeek);
    let gateway = OpenAiCompatible::from_env_with(
        Profile::DeepSeek,
        env(&[
            ("DEEPSEEK_API_KEY", "sk-2"),
            ("DEEPSEEK_BASE_URL", "https://gw.example/deepseek"),
        ]),
    )
    .unwrap();
    assert_eq!(
        gateway.endpoint(),
        "https://gw.example/deepseek/chat/completions"
    );

    assert_eq!(
        OpenAiCompatible::from_env_with(Profile::DeepSeek, env(&[("DEEPSEEK_API_KEY", "  ")]))
            .unwrap_err(),
        ConfigError::MissingEnv {
            var: "DEEPSEEK_API_KEY"
        }
    );
    assert_eq!(
        OpenAiCompatible::from_env_with(Profile::OpenAi, env(&[])).unwrap_err(),
        ConfigError::MissingEnv {
            var: "OPENAI_API_KEY"
        }
    );
}

#[test]
fn bad_configuration_is_a_typed_error() {
    assert_eq!(
        OpenAiCompatible::openai("gpt-4o").build().unwrap_err(),
        ConfigError::MissingApiKey {
            profile: "openai",
            var: "OPENAI_API_KEY"
        }
    );
    assert_eq!(
        OpenAiCompatible::deepseek("x")
            .api_key("sk-a\nb")
            .build()
            .unwrap_err(),
        ConfigError::InvalidApiKey
    );
    assert!(matches!(
        OpenAiCompatible::custom("localhost:8080", "m")
            .build()
            .unwrap_err(),
        ConfigError::InvalidBaseUrl { .. }
    ));
    assert_eq!(
        OpenAiCompatible::builder(Profile::Custom)
            .build()
            .unwrap_err(),
        ConfigError::MissingBaseUrl
    );
    assert_eq!(
        OpenAiCompatible::custom("http://127.0.0.1:1/v1", "m")
            .body_field("messages", json!([]))
            .build()
            .unwrap_err(),
        ConfigError::ReservedBodyField("messages".into())
    );
    let err = OpenAiCompatible::custom("http://127.0.0.1:1/v1", "m")
        .header("X-Key", "bad\nvalue")
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::InvalidHeader {
            name: "X-Key".into()
        }
    );
    assert!(!err.to_string().contains("bad\nvalue"));
}

#[test]
fn the_cache_invariant_check_catches_drift() {
    // The helper the agent-run tests rely on must fail on each kind of drift.
    let body = |system: &str, tools: &str, history: &[&str]| -> Vec<u8> {
        let mut messages = vec![
            json!({"role": "system", "content": system}),
            json!({"role": "user", "content": "What is 1+1?"}),
            json!({"role": "assistant", "content": "2"}),
        ];
        messages.extend(
            history
                .iter()
                .map(|h| json!({"role": "user", "content": h})),
        );
        serde_json::to_vec(&json!({"model": "m", "messages": messages, "tools": [{"name": tools}]}))
            .unwrap()
    };
    let fails = |bodies: Vec<Vec<u8>>| {
        std::panic::catch_unwind(|| assert_cache_invariants(&bodies)).is_err()
    };
    assert!(!fails(vec![
        body("s", "t", &["a"]),
        body("s", "t", &["a", "b"])
    ]));
    assert!(
        fails(vec![body("s", "t", &["a"]), body("S", "t", &["a", "b"])]),
        "system drift"
    );
    assert!(
        fails(vec![body("s", "t", &["a"]), body("s", "T", &["a", "b"])]),
        "tools drift"
    );
    assert!(
        fails(vec![body("s", "t", &["a"]), body("s", "t", &["x", "b"])]),
        "history rewritten"
    );
    assert!(
        fails(vec![body("s", "t", &["a"]), body("s", "t", &["a"])]),
        "nothing appended"
    );
}

/// A tracing writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The process-wide log capture. A global subscriber, not a scoped one: with a scoped
/// (`set_default`) subscriber, a test thread without one can hit a callsite first and cache
/// its interest as "never" for the whole process (tokio-rs/tracing#3611), which made this
/// test fail in about 2 of 3 runs while the local-model tests loaded the CPU.
fn captured_logs() -> Captured {
    static LOGS: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("halo_adapters=trace"))
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other test sets a global subscriber");
        captured
    })
    .clone()
}

#[tokio::test]
async fn logs_show_sizes_and_retries_but_never_the_key() {
    let captured = captured_logs();

    let fake = FakeChat::start([
        error_response(
            401,
            &format!("Incorrect API key provided: {KEY}"),
            "invalid_request_error",
            None,
        ),
        error_response(503, "overloaded", "server_error", None)
            .insert_header("retry-after-ms", "1"),
        Completion::new(Shape::OpenAi).text("ok").respond(),
    ])
    .await;
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url(fake.base_url())
        .max_retries(1)
        .build()
        .unwrap();
    let err = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Authentication { .. }));
    let ok = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap();
    assert_eq!(ok.message.text, "ok");
    fake.finish();

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("request_bytes="),
        "debug events carry sizes: {logs}"
    );
    assert!(logs.contains("response_bytes="), "{logs}");
    assert!(
        logs.contains("retrying chat completion") && logs.contains("wait_ms=1"),
        "{logs}"
    );
    assert!(!logs.contains(KEY), "the key leaked into the logs");
}

/// The base URL a [`ConfigError::InvalidBaseUrl`] says to pass instead (its last `...`).
fn suggested_base(e: &ConfigError) -> String {
    match e {
        ConfigError::InvalidBaseUrl { reason, .. } => reason
            .rsplit('`')
            .nth(1)
            .expect("the reason quotes a base URL")
            .to_string(),
        other => panic!("not an invalid base URL: {other:?}"),
    }
}

#[tokio::test]
async fn a_base_url_ending_in_chat_completions_is_refused_saying_what_to_drop() {
    // Trigger: `.../v1/chat/completions` as the base URL was posted to
    // `.../v1/chat/completions/chat/completions`.
    let fake = FakeChat::start([Completion::new(Shape::OpenAi).text("hello").respond()]).await;
    for base in [
        format!("{}/chat/completions", fake.base_url()),
        format!("{}/chat/completions/", fake.base_url()),
    ] {
        let e = OpenAiCompatible::custom(&base, "m").build().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "invalid base URL `{base}`: it ends in `/chat/completions`, which the adapter \
                 appends itself; drop it and pass `{}`",
                fake.base_url()
            )
        );
        assert_eq!(suggested_base(&e), fake.base_url());
    }
    // The same for the OpenAI profile, whose base URL may come from OPENAI_BASE_URL.
    let e = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key(KEY)
        .base_url("https://api.openai.com/v1/chat/completions")
        .build()
        .unwrap_err();
    assert_eq!(suggested_base(&e), "https://api.openai.com/v1");

    // The base URL without the suffix works end to end (the fake answers only at
    // `/v1/chat/completions`).
    let model = OpenAiCompatible::custom(fake.base_url(), "m")
        .max_retries(0)
        .build()
        .unwrap();
    assert_eq!(
        model.endpoint(),
        format!("{}/chat/completions", fake.base_url())
    );
    let got = call(&model, &prefix(), &GenerationOptions::default())
        .await
        .unwrap();
    assert_eq!(got.message.text, "hello");
    assert_eq!(fake.requests().len(), 1);
    fake.finish();
}

#[test]
fn a_base_url_without_a_scheme_is_a_config_error_saying_to_add_it() {
    // Trigger: a base URL like `127.0.0.1:8080` ("relative URL without a base").
    let e = OpenAiCompatible::custom("127.0.0.1:8080", "m")
        .build()
        .unwrap_err();
    assert!(
        e.to_string().contains("include `http://` or `https://`"),
        "{e}"
    );
}
