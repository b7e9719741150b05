//! The OpenAI and DeepSeek cache simulator (`sim::openai::OpenAiSim`): the cache rules on
//! hand-built requests with exact figures, its request checks, its streaming shapes, and
//! agent runs through `OpenAiCompatible` whose reported cache reads equal an independent
//! computation over the recorded bodies.

use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::sim::openai::{
    DeepSeekUnits, OpenAiSim, SimProfile, openai_cached_tokens, prompt_tokens,
};
use halo_adapters::sim::{SimReply, common_prefix, count_tokens};
use halo_core::tool::{Tool, ToolError, ToolOutput};
use halo_core::{
    GenerationOptions, HaloAgent, InvalidRequestKind, Message, ModelAdapter, ModelError,
    ModelRequest, ModelStreamEvent, StablePrefix, ToolCall,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A system prompt of `words` one-token words.
fn system(words: usize) -> String {
    let mut s = String::from("You are a careful assistant.");
    s.push_str(&" cache".repeat(words));
    s
}

fn body(messages: Value) -> Value {
    json!({"model": "gpt-4o-mini", "messages": messages})
}

fn tokens_len(body: &Value) -> usize {
    prompt_tokens(body).unwrap().len()
}

fn shared(a: &Value, b: &Value) -> usize {
    common_prefix(&prompt_tokens(a).unwrap(), &prompt_tokens(b).unwrap())
}

/// Two requests that share exactly `target` tokens: the same system prompt, different
/// user questions.
fn pair_sharing(target: usize) -> (Value, Value) {
    let make = |words: usize, question: &str| {
        body(json!([
            {"role": "system", "content": system(words)},
            {"role": "user", "content": question},
        ]))
    };
    // One word in, so the end of the system text tokenizes the same way at every length.
    let base = shared(&make(1, "Where is the bug?"), &make(1, "Why is it slow?"));
    let words = target + 1 - base;
    let pair = (
        make(words, "Where is the bug?"),
        make(words, "Why is it slow?"),
    );
    assert_eq!(
        shared(&pair.0, &pair.1),
        target,
        "each ` cache` is one token"
    );
    pair
}

async fn post(sim: &OpenAiSim, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/chat/completions", sim.base_url()))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn sim(profile: SimProfile, replies: usize) -> OpenAiSim {
    let sim = OpenAiSim::start(profile).await.unwrap();
    sim.set_reply_script((0..replies).map(|i| SimReply::text(format!("Answer {i}."))));
    sim
}

#[tokio::test]
async fn openai_shared_prefix_of_1500_tokens_reports_1408_cached() {
    let sim = sim(SimProfile::OpenAi, 2).await;
    let (first, second) = pair_sharing(1500);
    let (status, answer) = post(&sim, &first).await;
    assert_eq!(status, 200);
    assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let (_, answer) = post(&sim, &second).await;
    assert_eq!(
        answer["usage"]["prompt_tokens_details"]["cached_tokens"],
        1408
    );
    assert_eq!(answer["usage"]["prompt_tokens"], tokens_len(&second));
    assert!(answer["usage"].get("prompt_cache_hit_tokens").is_none());
    let records = sim.records();
    assert_eq!(records[1].seen_prefix_tokens, 1500);
    assert_eq!(records[1].cached_tokens, 1408);
    assert_eq!(openai_cached_tokens(1500), 1408);
}

#[tokio::test]
async fn openai_shared_prefix_below_1024_tokens_is_not_cached() {
    let sim = sim(SimProfile::OpenAi, 2).await;
    let (first, mut second) = pair_sharing(1000);
    // The second prompt is long (over 1,024 tokens) but shares only 1,000 with the first.
    second["messages"][1]["content"] = json!(format!("Why?{}", " slow".repeat(600)));
    assert!(tokens_len(&second) > 1100);
    post(&sim, &first).await;
    let (_, answer) = post(&sim, &second).await;
    assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(sim.records()[1].seen_prefix_tokens, 1000);
    assert_eq!(openai_cached_tokens(1023), 0);
    assert_eq!(openai_cached_tokens(1024), 1024);
    assert_eq!(openai_cached_tokens(1151), 1024);
}

#[tokio::test]
async fn openai_caches_are_per_prompt_cache_key() {
    let sim = sim(SimProfile::OpenAi, 4).await;
    let (mut first, mut second) = pair_sharing(1500);
    first["prompt_cache_key"] = json!("session-a");
    second["prompt_cache_key"] = json!("session-b");
    post(&sim, &first).await;
    let (_, answer) = post(&sim, &second).await;
    assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    // The same key finds its pool; a keyless request has a pool of its own.
    second["prompt_cache_key"] = json!("session-a");
    let (_, answer) = post(&sim, &second).await;
    assert_eq!(
        answer["usage"]["prompt_tokens_details"]["cached_tokens"],
        1408
    );
    second.as_object_mut().unwrap().remove("prompt_cache_key");
    let (_, answer) = post(&sim, &second).await;
    assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    // Every record still sees the whole shared prefix: the maximum ignores pools.
    assert_eq!(sim.records()[1].seen_prefix_tokens, 1500);
}

#[tokio::test]
async fn drop_cache_makes_the_next_request_a_full_miss() {
    let sim = sim(SimProfile::OpenAi, 3).await;
    let (first, second) = pair_sharing(1500);
    post(&sim, &first).await;
    sim.drop_cache();
    let (_, answer) = post(&sim, &second).await;
    assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let (_, answer) = post(&sim, &second).await;
    assert_eq!(
        answer["usage"]["prompt_tokens_details"]["cached_tokens"],
        openai_cached_tokens(tokens_len(&second))
    );

    let ds = sim_deepseek_units(DeepSeekUnits::Current, 2).await;
    post(&ds, &first).await;
    ds.drop_cache();
    let (_, answer) = post(&ds, &first).await;
    assert_eq!(answer["usage"]["prompt_cache_hit_tokens"], 0);
    assert_eq!(
        answer["usage"]["prompt_cache_miss_tokens"],
        tokens_len(&first)
    );
}

async fn sim_deepseek_units(units: DeepSeekUnits, replies: usize) -> OpenAiSim {
    let sim = sim(SimProfile::DeepSeek, replies).await;
    sim.set_deepseek_units(units);
    sim
}

#[tokio::test]
async fn deepseek_hits_whole_units_at_input_and_output_ends_and_detected_divergences() {
    let sim = sim_deepseek_units(DeepSeekUnits::Current, 4).await;
    let sys = json!({"role": "system", "content": system(40)});
    let r1 = body(json!([sys, {"role": "user", "content": "Where is the bug?"}]));
    let (_, a1) = post(&sim, &r1).await;
    assert_eq!(a1["usage"]["prompt_cache_hit_tokens"], 0);
    assert_eq!(a1["choices"][0]["message"]["content"], "Answer 0.");

    // Turn 2 appends the answer and a question: the unit at the end of turn 1's output
    // (its input + its answer) is a complete prefix, so all of it is a hit.
    let turn1 = json!([
        sys,
        {"role": "user", "content": "Where is the bug?"},
        {"role": "assistant", "content": "Answer 0."},
    ]);
    let mut messages = turn1.as_array().unwrap().clone();
    messages.push(json!({"role": "user", "content": "And the fix?"}));
    let r2 = body(Value::Array(messages));
    let (_, a2) = post(&sim, &r2).await;
    let expected = tokens_len(&body(turn1));
    assert_eq!(a2["usage"]["prompt_cache_hit_tokens"], expected);
    assert_eq!(
        a2["usage"]["prompt_cache_miss_tokens"],
        tokens_len(&r2) - expected
    );
    assert_eq!(a2["usage"]["prompt_tokens"], tokens_len(&r2));
    assert_eq!(
        a2["usage"]["prompt_tokens_details"]["cached_tokens"],
        expected
    );

    // A new question on the same system prompt shares a prefix with turn 1 but matches no
    // whole unit: no hit. The divergence is then stored, and a third question hits it.
    let r3 = body(json!([sys, {"role": "user", "content": "Why is it slow?"}]));
    let (_, a3) = post(&sim, &r3).await;
    assert_eq!(a3["usage"]["prompt_cache_hit_tokens"], 0);
    assert!(sim.records()[2].seen_prefix_tokens > 40);
    let r4 = body(json!([sys, {"role": "user", "content": "Who wrote it?"}]));
    let (_, a4) = post(&sim, &r4).await;
    assert_eq!(a4["usage"]["prompt_cache_hit_tokens"], shared(&r1, &r3));
    assert_eq!(shared(&r1, &r3), shared(&r3, &r4));
}

#[tokio::test]
async fn deepseek_2024_rule_rounds_hits_down_to_64_token_units() {
    let sim = sim_deepseek_units(DeepSeekUnits::Fixed(64), 3).await;
    let (first, second) = pair_sharing(200);
    post(&sim, &first).await;
    let (_, answer) = post(&sim, &second).await;
    assert_eq!(answer["usage"]["prompt_cache_hit_tokens"], 192);
    // Under one unit nothing is cached.
    let (a, b) = pair_sharing(63);
    let sim = sim_deepseek_units(DeepSeekUnits::Fixed(64), 2).await;
    post(&sim, &a).await;
    let (_, answer) = post(&sim, &b).await;
    assert_eq!(answer["usage"]["prompt_cache_hit_tokens"], 0);
}

#[tokio::test]
async fn orphan_tool_calls_and_results_get_openai_shaped_400s() {
    let sim = sim(SimProfile::OpenAi, 1).await;
    let call = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_9", "type": "function", "function": {"name": "read", "arguments": "{}"}},
    ]});
    let (status, answer) = post(
        &sim,
        &body(json!([{"role": "user", "content": "hi"}, call, {"role": "user", "content": "?"}])),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(answer["error"]["type"], "invalid_request_error");
    assert_eq!(answer["error"]["param"], "messages");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not have response messages: call_9"),
        "{answer}"
    );
    let (status, answer) = post(
        &sim,
        &body(json!([
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "call_9", "content": "x"},
        ])),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("must be a response to a preceeding message with 'tool_calls'"),
        "{answer}"
    );
    let (status, _) = post(&sim, &json!({"messages": []})).await;
    assert_eq!(status, 400);
    assert_eq!(sim.remaining_replies(), 1, "rejected requests use no reply");
    assert!(sim.records().iter().all(|r| r.status == 400));

    // Through the adapter: the 400 is a typed invalid request.
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key("sk-sim")
        .base_url(sim.base_url())
        .max_retries(0)
        .build()
        .unwrap();
    let prefix = StablePrefix::new("You are terse.");
    let history = vec![
        Message::user("hi"),
        Message::Assistant(halo_core::AssistantMessage {
            text: String::new(),
            reasoning: Vec::new(),
            tool_calls: vec![ToolCall::new("call_7", "read", "{}")],
        }),
    ];
    let options = GenerationOptions::default();
    let err = model
        .generate(ModelRequest::new(&prefix, &history, &options))
        .await
        .unwrap_err();
    match err {
        ModelError::InvalidRequest {
            status,
            kind: InvalidRequestKind::Other,
            message,
        } => {
            assert_eq!(status, 400);
            assert!(message.contains("call_7"), "{message}");
        }
        other => panic!("expected an invalid request, got {other:?}"),
    }
}

#[tokio::test]
async fn exhausted_script_answers_418() {
    let sim = sim(SimProfile::DeepSeek, 0).await;
    let (status, answer) = post(&sim, &body(json!([{"role": "user", "content": "hi"}]))).await;
    assert_eq!(status, 418);
    assert_eq!(answer["error"]["type"], "sim_script_exhausted");
}

/// The raw SSE text of a streamed request.
async fn post_stream(sim: &OpenAiSim, body: &Value) -> String {
    let response = reqwest::Client::new()
        .post(format!("{}/chat/completions", sim.base_url()))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    response.text().await.unwrap()
}

fn chunks(sse: &str) -> Vec<Value> {
    assert!(sse.ends_with("data: [DONE]\n\n"), "{sse}");
    sse.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn streams_carry_usage_where_each_provider_puts_it() {
    let mut request = body(json!([{"role": "user", "content": "hi"}]));
    request["stream"] = json!(true);
    request["stream_options"] = json!({"include_usage": true});

    let openai = sim(SimProfile::OpenAi, 1).await;
    let c = chunks(&post_stream(&openai, &request).await);
    let last = c.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["prompt_tokens"], tokens_len(&request));
    assert!(c[..c.len() - 1].iter().all(|c| c["usage"].is_null()));
    assert_eq!(c[c.len() - 2]["choices"][0]["finish_reason"], "stop");

    let deepseek = OpenAiSim::deepseek().await.unwrap();
    deepseek.push_reply(SimReply::tool_call("read", json!({"path": "src/lib.rs"})));
    let c = chunks(&post_stream(&deepseek, &request).await);
    let last = c.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        last["usage"]["prompt_cache_miss_tokens"],
        tokens_len(&request)
    );
    assert_eq!(
        c[1]["choices"][0]["delta"]["tool_calls"][0]["id"],
        "call_0001"
    );
    let arguments: String = c
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(arguments, r#"{"path":"src/lib.rs"}"#);
}

struct Read;
#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    /// The file to read.
    path: String,
}
impl Tool for Read {
    type Args = ReadArgs;
    fn name(&self) -> &str {
        "read"
    }
    fn description(&self) -> &str {
        "Reads a file."
    }
    async fn call(&self, args: ReadArgs) -> Result<ToolOutput, ToolError> {
        Ok(format!("// {}\n{}", args.path, "fn main() {}\n".repeat(40)).into())
    }
}

fn script() -> Vec<SimReply> {
    vec![
        SimReply::tool_call("read", json!({"path": "src/main.rs"})),
        SimReply::tool_call("read", json!({"path": "src/lib.rs"})),
        SimReply::text("Both files only define empty functions."),
    ]
}

/// Runs a three-step agent session (two tool calls, then an answer) on `model` against
/// `sim`, streaming or not; returns each step's reported cache reads.
async fn agent_run(model: OpenAiCompatible, sim: &OpenAiSim, stream: bool) -> Vec<u64> {
    sim.set_reply_script(script());
    let mut agent = HaloAgent::builder(model)
        .system(system(1400))
        .tool(Read)
        .unwrap()
        .session_id("sess-1")
        .build();
    let steps: Vec<u64> = if stream {
        use futures::StreamExt as _;
        let events: Vec<_> = agent.stream_text("What is in src?").collect().await;
        events
            .into_iter()
            .filter_map(|e| match e.unwrap() {
                halo_core::AgentEvent::StepFinish(step) => step.usage.cache_read_tokens,
                _ => None,
            })
            .collect()
    } else {
        let out = agent.generate_text("What is in src?").await.unwrap();
        assert_eq!(out.text, "Both files only define empty functions.");
        out.steps
            .iter()
            .map(|s| s.usage.cache_read_tokens.unwrap())
            .collect()
    };
    assert_eq!(sim.remaining_replies(), 0);
    let records = sim.records();
    assert_eq!(records.len(), 3);
    assert!(records.iter().all(|r| r.status == 200));
    let reported: Vec<u64> = records.iter().map(|r| r.cached_tokens).collect();
    assert_eq!(steps, reported, "the adapter reports what the sim computed");
    steps
}

/// OpenAI's rule computed here from the recorded bodies: the longest shared token prefix
/// with an earlier request, from 1,024 in 128-token steps.
fn openai_expected(bodies: &[Value], n: usize) -> u64 {
    let this = prompt_tokens(&bodies[n]).unwrap();
    let shared = bodies[..n]
        .iter()
        .map(|b| common_prefix(&prompt_tokens(b).unwrap(), &this))
        .max()
        .unwrap_or(0);
    openai_cached_tokens(shared) as u64
}

#[tokio::test]
async fn openai_agent_turn_two_reads_the_cache_the_rule_predicts() {
    for stream in [false, true] {
        let sim = OpenAiSim::openai().await.unwrap();
        let model = OpenAiCompatible::openai("gpt-4o-mini")
            .api_key("sk-sim")
            .base_url(sim.base_url())
            .max_retries(0)
            .build()
            .unwrap();
        let cached = agent_run(model, &sim, stream).await;
        let bodies = sim.requests();
        assert!(bodies.iter().all(|b| b["prompt_cache_key"] == "sess-1"));
        assert_eq!(cached[0], 0);
        assert_eq!(cached[1], openai_expected(&bodies, 1));
        assert_eq!(cached[2], openai_expected(&bodies, 2));
        // Turn 2 holds all of turn 1's prompt: everything but the last partial 128 block.
        let first = tokens_len(&bodies[0]) as u64;
        assert_eq!(cached[1], first - first % 128);
        assert!(cached[1] >= 1408, "{cached:?}");
    }
}

#[tokio::test]
async fn custom_profile_on_the_openai_sim_shares_the_keyless_pool() {
    let sim = OpenAiSim::openai().await.unwrap();
    let model = OpenAiCompatible::custom(sim.base_url(), "gpt-4o-mini")
        .max_retries(0)
        .build()
        .unwrap();
    let cached = agent_run(model, &sim, false).await;
    let bodies = sim.requests();
    assert!(bodies.iter().all(|b| b.get("prompt_cache_key").is_none()));
    assert_eq!(cached[1], openai_expected(&bodies, 1));
    assert!(cached[1] > 0);
}

#[tokio::test]
async fn deepseek_agent_turn_two_hits_turn_one_input_and_output() {
    for stream in [false, true] {
        let sim = OpenAiSim::deepseek().await.unwrap();
        let model = OpenAiCompatible::deepseek("deepseek-chat")
            .api_key("sk-sim")
            .base_url(sim.base_url())
            .max_retries(0)
            .build()
            .unwrap();
        let cached = agent_run(model, &sim, stream).await;
        let bodies = sim.requests();
        assert_eq!(cached[0], 0);
        // The unit at the end of turn 1's output: turn 2's messages up to and including the
        // assistant's tool call (with its `reasoning_content: ""`, as the adapter replays it).
        for n in [1, 2] {
            let mut unit = bodies[n].clone();
            let messages = unit["messages"].as_array_mut().unwrap();
            let last_assistant = messages
                .iter()
                .rposition(|m| m["role"] == "assistant")
                .unwrap();
            assert_eq!(messages[last_assistant]["reasoning_content"], "");
            messages.truncate(last_assistant + 1);
            assert_eq!(cached[n], tokens_len(&unit) as u64, "turn {}", n + 1);
        }
        let records = sim.records();
        assert!(
            records[1].cached_tokens > records[1].seen_prefix_tokens,
            "deepseek also caches the answer it generated"
        );
    }
}

#[tokio::test]
async fn completion_tokens_count_the_generated_text() {
    let sim = sim(SimProfile::OpenAi, 0).await;
    sim.push_reply(SimReply::text(
        "Twelve words or so, counted with the o200k tokenizer.",
    ));
    let (_, answer) = post(&sim, &body(json!([{"role": "user", "content": "hi"}]))).await;
    assert_eq!(
        answer["usage"]["completion_tokens"],
        count_tokens("Twelve words or so, counted with the o200k tokenizer.")
    );
    assert_eq!(answer["choices"][0]["message"]["refusal"], Value::Null);
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
}

/// Streaming through the adapter assembles the same turn the JSON path gives.
#[tokio::test]
async fn adapter_stream_over_the_sim_assembles_tool_calls() {
    use futures::StreamExt as _;
    let sim = OpenAiSim::openai().await.unwrap();
    sim.push_reply(SimReply::ToolCalls(vec![
        ("read".into(), json!({"path": "a.rs"})),
        ("read".into(), json!({"path": "b.rs"})),
    ]));
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key("sk-sim")
        .base_url(sim.base_url())
        .max_retries(0)
        .build()
        .unwrap();
    let prefix = StablePrefix::new("You are terse.");
    let history = vec![Message::user("read both")];
    let options = GenerationOptions::default();
    let events: Vec<_> = model
        .stream(ModelRequest::new(&prefix, &history, &options))
        .collect()
        .await;
    let Some(Ok(ModelStreamEvent::Finish(response))) = events.last() else {
        panic!("no finish: {events:?}");
    };
    let calls: Vec<(&str, &str)> = response
        .message
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.raw_arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_0001", r#"{"path":"a.rs"}"#),
            ("call_0002", r#"{"path":"b.rs"}"#)
        ]
    );
    assert_eq!(
        response.usage.input_tokens,
        Some(sim.records()[0].prompt_tokens)
    );
    assert_eq!(response.usage.cache_read_tokens, Some(0));
}

/// A tool that returns a fixed line; added mid-session to change the prefix.
struct Clock;
impl Tool for Clock {
    type Args = halo_core::NoArgs;
    fn name(&self) -> &str {
        "clock"
    }
    fn description(&self) -> &str {
        "Tells the time."
    }
    async fn call(&self, _: halo_core::NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("noon".into())
    }
}

// The ledger over the OpenAI rule: a tool added mid-session is exactly one expected miss, a
// cache the provider dropped is a bust, and ordinary turns are hits.
#[tokio::test]
async fn ledger_sees_one_expected_miss_for_a_new_tool_and_a_bust_for_a_dropped_cache() {
    use halo_core::CacheVerdict;
    let sim = OpenAiSim::openai().await.unwrap();
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key("sk-sim")
        .base_url(sim.base_url())
        .max_retries(0)
        .build()
        .unwrap();
    let mut agent = HaloAgent::builder(model)
        .system(system(1400))
        .tool(Read)
        .unwrap()
        .session_id("sess-ledger")
        .build();
    let ask = async |agent: &mut HaloAgent, sim: &OpenAiSim, reply: SimReply| {
        sim.push_reply(reply);
        agent.generate_text("next").await.unwrap()
    };
    ask(&mut agent, &sim, SimReply::text("one")).await;
    ask(&mut agent, &sim, SimReply::text("two")).await;
    agent.add_tool(Clock).unwrap();
    ask(&mut agent, &sim, SimReply::text("three")).await;
    ask(&mut agent, &sim, SimReply::text("four")).await;
    sim.drop_cache();
    let out = ask(&mut agent, &sim, SimReply::text("five")).await;
    let verdicts: Vec<CacheVerdict> = agent
        .cache_ledger()
        .checks()
        .map(|c| match &c.verdict {
            CacheVerdict::Bust { .. } => CacheVerdict::Bust {
                cause: String::new(),
            },
            v => v.clone(),
        })
        .collect();
    assert_eq!(
        verdicts,
        [
            CacheVerdict::Cold,
            CacheVerdict::Hit,
            CacheVerdict::ExpectedMiss,
            CacheVerdict::Hit,
            CacheVerdict::Bust {
                cause: String::new()
            },
        ]
    );
    assert_eq!(agent.cache_ledger().expected_misses(), 1);
    assert_eq!((out.stats.cache_busts, agent.stats().cache_busts), (1, 1));
    let bust = agent.cache_ledger().last().unwrap();
    assert_eq!(bust.observed_cached_tokens, Some(0));
    assert!(bust.expected_cached_tokens.unwrap() >= 1024, "{bust:?}");
    // The hits read what the sim's rule gives for the shared prefix.
    let records = sim.records();
    assert!(records[1].cached_tokens >= 1408 && records[3].cached_tokens >= 1408);
}

// Regression: a log trimmed to its last tool steps opened the request with an assistant
// turn (the user's task evicted), which DeepSeek's reasoner refuses; the adapter puts the
// fixed note first, and the same bytes every call keep the cache matching.
#[tokio::test]
async fn a_trimmed_history_opens_with_the_note() {
    let sim = OpenAiSim::deepseek().await.unwrap();
    let model = OpenAiCompatible::deepseek("deepseek-chat")
        .api_key("sk-sim")
        .base_url(sim.base_url())
        .max_retries(0)
        .build()
        .unwrap();
    sim.set_reply_script(vec![
        SimReply::tool_call("read", json!({"path": "a.rs"})),
        SimReply::tool_call("read", json!({"path": "b.rs"})),
        SimReply::tool_call("read", json!({"path": "c.rs"})),
        SimReply::tool_call("read", json!({"path": "d.rs"})),
        SimReply::text("done"),
    ]);
    let mut agent = HaloAgent::builder(model)
        .system(system(200))
        .tool(Read)
        .unwrap()
        .log_capacity(4)
        .build();
    let out = agent.generate_text("Read four files.").await.unwrap();
    assert_eq!(out.text, "done");
    let firsts: Vec<(String, String)> = sim
        .requests()
        .iter()
        .map(|b| {
            let m = &b["messages"][1];
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let note = (
        "user".to_string(),
        halo_adapters::TRIMMED_HISTORY_NOTE.to_string(),
    );
    let task = ("user".to_string(), "Read four files.".to_string());
    // Capacity 4: the task and the first step fit until the second step is logged.
    assert_eq!(
        firsts,
        [task.clone(), task, note.clone(), note.clone(), note]
    );
    for b in sim.requests().iter().skip(2) {
        assert_eq!(b["messages"][2]["role"], "assistant");
    }
}

#[tokio::test]
async fn a_prompt_over_the_context_window_gets_each_providers_context_error() {
    use futures::StreamExt as _;
    for profile in [SimProfile::OpenAi, SimProfile::DeepSeek] {
        let sim = OpenAiSim::start(profile).await.unwrap();
        sim.push_reply(SimReply::text("fits"));
        sim.set_context_window(Some(5));
        let model = OpenAiCompatible::custom(sim.base_url(), "sim-model")
            .max_retries(0)
            .build()
            .unwrap();
        let prefix = StablePrefix::new("You are terse.");
        let history = [Message::user("Say hi to everyone in the room, please.")];
        let options = GenerationOptions::default();
        let request = ModelRequest::new(&prefix, &history, &options);
        let err = model.generate(request).await.unwrap_err();
        let ModelError::InvalidRequest {
            status: 400,
            kind: InvalidRequestKind::ContextWindowExceeded,
            message,
        } = &err
        else {
            panic!("{profile:?}: {err:?}")
        };
        assert!(
            message.starts_with("This model's maximum context length is 5 tokens. However, "),
            "{profile:?}: {message}"
        );
        assert!(err.is_context_window_exceeded());
        // Before the stream, so the stream reports the same HTTP 400, not a mid-stream error.
        let streamed: Vec<_> = model.stream(request).collect().await;
        assert_eq!(streamed.len(), 1, "{profile:?}: {streamed:?}");
        assert_eq!(streamed[0].as_ref().unwrap_err().status(), Some(400));
        assert!(
            streamed[0]
                .as_ref()
                .unwrap_err()
                .is_context_window_exceeded()
        );
        let records = sim.records();
        assert_eq!(records.len(), 2);
        assert!(records.iter().all(|r| r.status == 400));
        assert_eq!(
            sim.remaining_replies(),
            1,
            "a rejected request uses no reply"
        );
        // Without the window the same request fits.
        sim.set_context_window(None);
        assert_eq!(model.generate(request).await.unwrap().message.text, "fits");
    }
}
