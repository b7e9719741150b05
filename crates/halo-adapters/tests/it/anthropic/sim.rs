//! Agent runs against `AnthropicSim`, whose cache figures follow Anthropic's documented
//! rules: each call after the first reads the whole previous request from the cache (the
//! exact token figure the simulator computes), a dropped cache reads nothing and the ledger
//! calls it a bust, a prefix change is the one expected miss, TTLs expire, and a turn wider
//! than the 20-block lookback is still read thanks to the planner's extra breakpoint, and a
//! history trimmed by a bounded log opens with the fixed note and keeps the cache warm.

use std::time::Duration;

use futures::StreamExt as _;
use halo_adapters::TRIMMED_HISTORY_NOTE;
use halo_adapters::anthropic::{AnthropicAdapter, CacheMode, CacheTtl};
use halo_adapters::sim::anthropic::{
    AnthropicSim, FIRST_MESSAGE_NOT_USER, SimBlock, SimRecord, blocks,
};
use halo_adapters::sim::{SimReply, count_tokens};
use halo_core::ledger::CacheVerdict;
use halo_core::tool::{NoArgs, Tool, ToolError, ToolOutput};
use halo_core::{
    AgentEvent, AssistantMessage, GenerationOptions, HaloAgent, InvalidRequestKind, Message,
    ModelAdapter, ModelError, StablePrefix, StepResult, ToolCall,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{KEY, MODEL, request};

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

/// A system prompt well above claude-sonnet-4-5's 1,024-token minimum (about 2,000 tokens).
fn long_system() -> String {
    (1..=100)
        .map(|i| format!("Rule {i}: keep answers short, show the sum you computed, and never guess a number.\n"))
        .collect()
}

fn adapter(sim: &AnthropicSim, mode: CacheMode) -> AnthropicAdapter {
    AnthropicAdapter::builder(MODEL)
        .api_key(KEY)
        .base_url(sim.base_url())
        .cache_mode(mode)
        .max_retries(0)
        .build()
        .unwrap()
}

fn agent(model: AnthropicAdapter) -> HaloAgent {
    HaloAgent::builder(model)
        .system(long_system())
        .tool(Add)
        .unwrap()
        .options(GenerationOptions::default().with_max_tokens(256))
        .build()
}

fn add(a: i64, b: i64) -> SimReply {
    SimReply::tool_call("add", json!({"a": a, "b": b}))
}

/// Each step's reported usage must be exactly the simulator's figures for its request.
fn assert_usage_matches(steps: &[StepResult], records: &[SimRecord]) {
    assert_eq!(steps.len(), records.len());
    for (n, (step, rec)) in steps.iter().zip(records).enumerate() {
        assert_eq!(rec.status, 200, "request {n}");
        assert_eq!(
            step.usage.input_tokens,
            Some(rec.total_input_tokens),
            "request {n}"
        );
        assert_eq!(
            step.usage.cache_read_tokens,
            Some(rec.cache_read_input_tokens),
            "request {n}"
        );
        assert_eq!(
            step.usage.cache_write_tokens,
            Some(rec.cache_creation_input_tokens),
            "request {n}"
        );
        assert_eq!(
            step.usage.output_tokens,
            Some(rec.output_tokens),
            "request {n}"
        );
    }
}

#[tokio::test]
async fn each_call_reads_the_whole_previous_request_and_a_dropped_cache_reads_nothing() {
    let sim = AnthropicSim::start().await.unwrap();
    sim.set_reply_script([
        add(40, 2),
        add(42, 1),
        SimReply::text("40+2+1 is 43."),
        add(43, 7),
        SimReply::text("Plus 7 is 50."),
        SimReply::text("Still 50."),
    ]);
    let mut agent = agent(adapter(&sim, CacheMode::default()));

    let first = agent.generate_text("What is 40+2+1?").await.unwrap();
    assert_eq!(first.text, "40+2+1 is 43.");
    let records = sim.records();
    assert_usage_matches(&first.steps, &records);
    // The first call writes everything; each later one reads exactly the previous request.
    assert_eq!(records[0].cache_read_input_tokens, 0);
    assert_eq!(
        records[0].cache_creation_input_tokens,
        records[0].total_input_tokens
    );
    assert!(
        records[0].total_input_tokens > 1024,
        "{}",
        records[0].total_input_tokens
    );
    for n in 1..records.len() {
        assert_eq!(
            records[n].cache_read_input_tokens,
            records[n - 1].total_input_tokens,
            "request {n} reads request {} whole",
            n - 1
        );
        assert_eq!(
            records[n].cache_read_input_tokens, records[n].seen_prefix_tokens,
            "request {n} reads all a cache could"
        );
        assert_eq!(
            records[n].cache_creation_input_tokens,
            records[n].total_input_tokens - records[n - 1].total_input_tokens,
            "request {n} writes only what is new"
        );
        assert_eq!(
            records[n].input_tokens, 0,
            "nothing after the moving breakpoint"
        );
    }

    // A second run streams (the simulator's SSE path) and still reads the whole previous
    // request: the previous run's last request ended two blocks before this one's end.
    let events: Vec<_> = agent.stream_text("And plus 7?").collect().await;
    let Some(Ok(AgentEvent::Finish(second))) = events.last() else {
        panic!("the run did not finish: {events:?}");
    };
    assert_eq!(second.text, "Plus 7 is 50.");
    let records = sim.records();
    assert_usage_matches(&second.steps, &records[3..]);
    assert_eq!(
        records[3].cache_read_input_tokens,
        records[2].total_input_tokens
    );
    assert_eq!(
        records[4].cache_read_input_tokens,
        records[3].total_input_tokens
    );
    assert_eq!(
        sim.requests()[3]["stream"],
        true,
        "the second run went through the streaming path"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(AgentEvent::CacheBust(_)))),
        "a warm cache is no bust"
    );

    // The provider drops its cache: the next call reads nothing, writes everything, and
    // the ledger reports a bust.
    sim.drop_cache();
    let third = agent.generate_text("Check again.").await.unwrap();
    let records = sim.records();
    let last = records.last().unwrap();
    assert_eq!(last.cache_read_input_tokens, 0);
    assert_eq!(last.cache_creation_input_tokens, last.total_input_tokens);
    assert_eq!(third.steps[0].usage.cache_read_tokens, Some(0));
    assert_eq!(third.stats.cache_busts, 1);
    assert!(agent.cache_ledger().last().unwrap().is_bust());
    assert_eq!(sim.remaining_replies(), 0);
}

#[tokio::test]
async fn adding_a_tool_mid_session_is_the_one_expected_miss() {
    let sim = AnthropicSim::start().await.unwrap();
    sim.set_reply_script([
        add(1, 1),
        SimReply::text("2"),
        SimReply::tool_call("clock", json!({})),
        SimReply::text("It is 12:00."),
    ]);
    let mut agent = agent(adapter(&sim, CacheMode::default()));
    agent.generate_text("1+1?").await.unwrap();
    agent.add_tool(Clock).unwrap();
    let out = agent.generate_text("And the time?").await.unwrap();
    let records = sim.records();
    // Tools come first in Anthropic's cache order: a new tool changes every prefix.
    assert_eq!(records[2].cache_read_input_tokens, 0);
    assert_eq!(
        records[3].cache_read_input_tokens,
        records[2].total_input_tokens
    );
    let verdicts: Vec<_> = agent
        .cache_ledger()
        .checks()
        .map(|c| c.verdict.clone())
        .collect();
    assert_eq!(
        verdicts,
        [
            CacheVerdict::Cold,
            CacheVerdict::Hit,
            CacheVerdict::ExpectedMiss,
            CacheVerdict::Hit
        ]
    );
    assert_eq!(agent.cache_ledger().expected_misses(), 1);
    assert_eq!(out.stats.cache_busts, 0);
}

#[tokio::test]
async fn five_minute_entries_expire_and_a_one_hour_prefix_survives() {
    let sim = AnthropicSim::start().await.unwrap();
    sim.set_reply_script([
        SimReply::text("2"),
        SimReply::text("4"),
        SimReply::text("6"),
        SimReply::text("8"),
    ]);
    let mode = CacheMode::Breakpoints {
        prefix_ttl: CacheTtl::OneHour,
        history_ttl: CacheTtl::FiveMinutes,
    };
    let mut agent = agent(adapter(&sim, mode));
    agent.generate_text("1+1?").await.unwrap();
    let records = sim.records();
    let request = &sim.requests()[0];
    assert_eq!(
        request["system"][0]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    // Block 0 is the tool, block 1 the system prompt: the prefix is those two.
    assert_eq!(records[0].breakpoints, [1, 2]);

    // Six minutes later the history entry is gone; the one-hour prefix is read.
    sim.advance_clock(Duration::from_secs(6 * 60));
    agent.generate_text("2+2?").await.unwrap();
    let prefix_only = sim.records()[1].cache_read_input_tokens;
    assert!(prefix_only > 1024, "{prefix_only}");
    assert!(prefix_only < records[0].total_input_tokens);
    // Within five minutes the whole previous request is read again.
    sim.advance_clock(Duration::from_secs(4 * 60));
    agent.generate_text("3+3?").await.unwrap();
    let records = sim.records();
    assert_eq!(
        records[2].cache_read_input_tokens,
        records[1].total_input_tokens
    );
    // After an hour nothing is left.
    sim.advance_clock(Duration::from_secs(65 * 60));
    agent.generate_text("4+4?").await.unwrap();
    assert_eq!(sim.records()[3].cache_read_input_tokens, 0);
}

#[tokio::test]
async fn a_turn_wider_than_the_lookback_is_still_read() {
    // Eleven parallel calls put 22 blocks between the previous request's end and the
    // newest block. The planner's extra breakpoint reads it; automatic caching (one
    // breakpoint on the last block) cannot reach it.
    let eleven = || {
        SimReply::ToolCalls(
            (1..=11)
                .map(|i| ("add".to_string(), json!({"a": i, "b": 1})))
                .collect(),
        )
    };
    let mut reads = Vec::new();
    for mode in [
        CacheMode::default(),
        CacheMode::Automatic {
            ttl: CacheTtl::FiveMinutes,
        },
    ] {
        let sim = AnthropicSim::start().await.unwrap();
        sim.set_reply_script([eleven(), SimReply::text("Done.")]);
        let mut agent = agent(adapter(&sim, mode));
        agent
            .generate_text("Add 1 to each of 1..=11.")
            .await
            .unwrap();
        let records = sim.records();
        assert_eq!(records[1].status, 200);
        reads.push((
            records[1].cache_read_input_tokens,
            records[0].total_input_tokens,
        ));
    }
    let (planned, previous) = reads[0];
    assert_eq!(
        planned, previous,
        "breakpoints: the whole previous request is read"
    );
    let (automatic, _) = reads[1];
    assert_eq!(automatic, 0, "automatic caching misses beyond the lookback");
}

#[tokio::test]
async fn the_simulator_rejects_an_unanswered_tool_use_in_anthropics_shape() {
    let sim = AnthropicSim::start().await.unwrap();
    sim.push_reply(SimReply::text("unused"));
    let model = adapter(&sim, CacheMode::default());
    let prefix = StablePrefix::new("s")
        .with_tool(halo_core::ToolSpec::new(
            "add",
            "Adds.",
            json!({"type": "object"}),
        ))
        .unwrap();
    let history = [
        Message::user("1+1?"),
        Message::Assistant(AssistantMessage {
            tool_calls: vec![ToolCall::new("toolu_01A", "add", "{}")],
            ..AssistantMessage::default()
        }),
        Message::user("never mind"),
    ];
    let options = GenerationOptions::default();
    let err = model
        .generate(request(&prefix, &history, &options))
        .await
        .unwrap_err();
    let ModelError::InvalidRequest {
        status: 400,
        kind: InvalidRequestKind::Other,
        message,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert!(
        message.contains(
            "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_01A"
        ) && message.contains("(type invalid_request_error)"),
        "{message}"
    );
    assert_eq!(sim.remaining_replies(), 1, "no reply was used");
    assert_eq!(sim.records()[0].status, 400);
}

/// The messages of a request body with every `cache_control` key removed (markers move
/// from call to call; the content they sit on does not).
fn unmarked_messages(body: &Value) -> Vec<Value> {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.remove("cache_control");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages.iter_mut().for_each(strip);
    messages
}

/// The `o200k_base` tokens of the first `n` blocks of a request, as the simulator counts
/// them (block by block).
fn block_tokens(body: &Value, n: usize) -> u64 {
    blocks(body).unwrap()[..n]
        .iter()
        .map(|b| count_tokens(&b.text))
        .sum()
}

#[tokio::test]
async fn a_trimmed_history_opens_with_the_note_and_keeps_the_cache_warm() {
    // Trigger: a log of 4 messages evicts the user's task after the second step, so the
    // history opens with an assistant tool call (HTTP 400 on a strict Messages API).
    let sim = AnthropicSim::start().await.unwrap();
    sim.set_reply_script([
        SimReply::ToolCalls(vec![
            ("add".into(), json!({"a": 1, "b": 2})),
            ("add".into(), json!({"a": 3, "b": 4})),
        ]),
        add(3, 7),
        add(10, 5),
        add(15, 6),
        SimReply::text("The total is 21."),
    ]);
    let mut agent = HaloAgent::builder(adapter(&sim, CacheMode::default()))
        .system(long_system())
        .tool(Add)
        .unwrap()
        .options(GenerationOptions::default().with_max_tokens(256))
        .log_capacity(4)
        .build();
    let out = agent
        .generate_text("Add 1+2 and 3+4, then add 5 and 6 to the sum.")
        .await
        .unwrap();
    assert_eq!(out.text, "The total is 21.");
    let records = sim.records();
    assert_eq!(records.len(), 5);
    assert!(records.iter().all(|r| r.status == 200), "{records:#?}");
    assert_usage_matches(&out.steps, &records);
    assert_eq!(sim.remaining_replies(), 0);

    let bodies = sim.requests();
    let note = json!({"role": "user", "content": [{"type": "text", "text": TRIMMED_HISTORY_NOTE}]});
    let task = json!({"role": "user", "content": [{"type": "text", "text": "Add 1+2 and 3+4, then add 5 and 6 to the sum."}]});
    let call = |n: u64, a: i64, b: i64| json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("toolu_01{n:022}"), "name": "add", "input": {"a": a, "b": b}}]});
    let result = |n: u64, sum: &str| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_01{n:022}"), "content": sum}]});
    let messages: Vec<Vec<Value>> = bodies.iter().map(unmarked_messages).collect();
    // Calls 1 and 2: the task is still there, no note.
    assert_eq!(messages[0], std::slice::from_ref(&task));
    assert_eq!(messages[1][0], task);
    assert_eq!(messages[1].len(), 3);
    // Call 3: the task and the first step are evicted; the note opens the history.
    assert_eq!(messages[2], [note.clone(), call(3, 3, 7), result(3, "10")]);
    // Call 4: nothing evicted; the same note, then one more step.
    assert_eq!(
        messages[3],
        [
            note.clone(),
            call(3, 3, 7),
            result(3, "10"),
            call(4, 10, 5),
            result(4, "15")
        ]
    );
    // Call 5: the oldest step evicted; the note again, before the next one.
    assert_eq!(
        messages[4],
        [
            note.clone(),
            call(4, 10, 5),
            result(4, "15"),
            call(5, 15, 6),
            result(5, "21")
        ]
    );
    // The note carries no marker, and the system prompt and tools are untouched.
    assert_eq!(bodies[2]["messages"][0], note);
    for body in &bodies[1..] {
        assert_eq!(body["system"], bodies[0]["system"]);
        assert_eq!(body["tools"], bodies[0]["tools"]);
    }

    // Call 4 renders call 3 block for block, then appends: it reads call 3 whole.
    let (third, fourth) = (blocks(&bodies[2]).unwrap(), blocks(&bodies[3]).unwrap());
    let texts = |b: &[SimBlock]| {
        b.iter()
            .map(|b| (b.role.clone(), b.text.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(texts(&fourth[..third.len()]), texts(&third));
    assert_eq!(
        records[3].cache_read_input_tokens,
        records[2].total_input_tokens
    );
    assert_eq!(
        records[3].cache_read_input_tokens,
        records[3].seen_prefix_tokens
    );
    // Calls 3 and 5 follow an eviction: they read the prefix (the tool and the system
    // prompt, blocks 0 and 1), and call 5 shares the note with call 4 besides.
    let prefix_tokens = block_tokens(&bodies[0], 2);
    assert_eq!(records[2].cache_read_input_tokens, prefix_tokens);
    assert_eq!(records[4].cache_read_input_tokens, prefix_tokens);
    // (Token by token it shares a little more: the start of the next block's JSON.)
    let seen = records[4].seen_prefix_tokens;
    assert!(
        (block_tokens(&bodies[4], 3)..block_tokens(&bodies[4], 4)).contains(&seen),
        "call 5 starts with call 4's tool, system prompt and note, then differs: {seen}"
    );
    // The ledger expects only the prefix after an eviction: no call is a bust.
    let verdicts: Vec<_> = agent
        .cache_ledger()
        .checks()
        .map(|c| c.verdict.clone())
        .collect();
    assert_eq!(
        verdicts,
        [
            CacheVerdict::Cold,
            CacheVerdict::Hit,
            CacheVerdict::Hit,
            CacheVerdict::Hit,
            CacheVerdict::Hit
        ]
    );
}

#[tokio::test]
async fn the_simulator_rejects_an_assistant_first_message_in_anthropics_shape() {
    // Regression guard: a request builder that lets an assistant turn open `messages` fails
    // here the way a strict Messages API fails it.
    let sim = AnthropicSim::start().await.unwrap();
    sim.push_reply(SimReply::text("unused"));
    let body = json!({
        "model": MODEL,
        "max_tokens": 64,
        "tools": [{"name": "add", "description": "Adds.", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01A", "name": "add", "input": {"a": 1, "b": 2}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A", "content": "3"}]},
        ],
    });
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", sim.base_url()))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        answer,
        json!({
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "messages: first message must use the \"user\" role"},
            "request_id": "req_sim",
        })
    );
    assert_eq!(FIRST_MESSAGE_NOT_USER, answer["error"]["message"]);
    assert_eq!(sim.remaining_replies(), 1, "no reply was used");
    assert_eq!(sim.records()[0].status, 400);
}

#[tokio::test]
async fn a_prompt_over_the_context_window_is_anthropics_prompt_is_too_long() {
    let sim = AnthropicSim::start().await.unwrap();
    sim.push_reply(SimReply::text("fits"));
    sim.set_context_window(Some(10));
    let model = adapter(&sim, CacheMode::default());
    let prefix = StablePrefix::new(long_system());
    let history = [Message::user("hi")];
    let options = GenerationOptions::default();
    let err = model
        .generate(request(&prefix, &history, &options))
        .await
        .unwrap_err();
    let ModelError::InvalidRequest {
        status: 400,
        kind: InvalidRequestKind::ContextWindowExceeded,
        message,
    } = &err
    else {
        panic!("{err:?}")
    };
    let total = sim.records()[0].body.clone();
    let tokens: u64 = blocks(&total)
        .unwrap()
        .iter()
        .map(|b| count_tokens(&b.text))
        .sum();
    assert_eq!(
        message,
        &format!("prompt is too long: {tokens} tokens > 10 maximum (type invalid_request_error)")
    );
    assert_eq!(sim.records()[0].status, 400);
    assert_eq!(
        sim.remaining_replies(),
        1,
        "a rejected request uses no reply"
    );
    sim.set_context_window(None);
    let out = model
        .generate(request(&prefix, &history, &options))
        .await
        .unwrap();
    assert_eq!(out.message.text, "fits");
}
