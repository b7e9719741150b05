//! `ResponsesAdapter` over its loopback simulator (`sim::responses`): the agent loop unary
//! and streamed, tool pairing, reasoning items replayed verbatim across steps with
//! byte-stable requests, the reasoning-item rule the simulator enforces and the adapter
//! never breaks, chaining with `previous_response_id`, the prompt cache (before GPT-5.6
//! and with GPT-5.6+ breakpoints) and the object modes. `responses/wire.rs` covers the exact
//! wire shapes and the error mapping over a wiremock fake.

mod wire;

use futures::StreamExt as _;
use halo_adapters::openai::PromptCacheMode;
use halo_adapters::responses::ResponsesAdapter;
use halo_adapters::sim::SimReply;
use halo_adapters::sim::responses::ResponsesSim;
use halo_core::tool::{Tool, ToolError, ToolOutput};
use halo_core::{
    AgentEvent, CacheVerdict, GenerationOptions, HaloAgent, InvalidRequestKind, ModelAdapter,
    ModelError, OutputMode, ReasoningEffort,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

pub(crate) const KEY: &str = "sk-responses-test-0123456789";

/// Reads a file: a fixed, long text per path.
struct Read;
#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    /// The file's path.
    path: String,
}
impl Tool for Read {
    type Args = ReadArgs;
    fn name(&self) -> &str {
        "read"
    }
    fn description(&self) -> &str {
        "Reads a file of the project."
    }
    async fn call(&self, a: ReadArgs) -> Result<ToolOutput, ToolError> {
        Ok(format!(
            "{}: {}",
            a.path,
            "fn main() { println!(\"hi\"); }\n".repeat(40)
        )
        .into())
    }
}

pub(crate) fn adapter(sim: &ResponsesSim, model: &str) -> ResponsesAdapter {
    ResponsesAdapter::builder(model)
        .api_key(KEY)
        .base_url(sim.base_url())
        .max_retries(0)
        .build()
        .unwrap()
}

/// A system prompt of about `words` words, so the prefix passes the 1,024-token minimum.
fn system(words: usize) -> String {
    let mut s = String::from("You are a careful coding agent. ");
    for i in 0..words {
        s.push_str(&format!("rule{i} "));
    }
    s
}

fn agent(model: ResponsesAdapter) -> HaloAgent {
    HaloAgent::builder(model)
        .system(system(1500))
        .session_id("session-1")
        .tool(Read)
        .unwrap()
        .build()
}

fn reads(n: usize) -> Vec<SimReply> {
    let mut replies: Vec<SimReply> = (0..n)
        .map(|i| SimReply::tool_call("read", json!({"path": format!("src/f{i}.rs")})))
        .collect();
    replies.push(SimReply::text("All files print hi."));
    replies
}

#[tokio::test]
async fn an_agent_loop_runs_tools_and_answers_unary_and_streamed() {
    for stream in [false, true] {
        let sim = ResponsesSim::start().await.unwrap();
        sim.set_reply_script(reads(2));
        let mut agent = agent(adapter(&sim, "gpt-5"));
        let (text, steps) = if stream {
            let events: Vec<_> = agent.stream_text("Read two files.").collect().await;
            let mut text = String::new();
            let mut steps = 0;
            for event in events {
                match event.unwrap() {
                    AgentEvent::TextDelta(t) => text.push_str(&t),
                    AgentEvent::StepFinish(_) => steps += 1,
                    _ => {}
                }
            }
            (text, steps)
        } else {
            let out = agent.generate_text("Read two files.").await.unwrap();
            assert_eq!(out.steps[0].tool_results[0].tool_name, "read");
            (out.text, out.steps.len())
        };
        assert_eq!(
            (text.as_str(), steps),
            ("All files print hi.", 3),
            "stream: {stream}"
        );
        let requests = sim.requests();
        assert_eq!(requests.len(), 3);
        // The third request carries both calls, each answered right after it.
        let input = requests[2]["input"].as_array().unwrap();
        let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message",
                "message",
                "function_call",
                "function_call_output",
                "function_call",
                "function_call_output"
            ]
        );
        assert_eq!(input[2]["call_id"], input[3]["call_id"]);
        assert_eq!(
            input[2]["id"], "fc_sim0001",
            "the call's item id is replayed"
        );
        assert!(sim.records().iter().all(|r| r.status == 200));
        assert_eq!(sim.remaining_replies(), 0);
    }
}

#[tokio::test]
async fn a_reasoning_run_replays_its_items_verbatim_across_five_steps_with_byte_stable_requests() {
    for stream in [false, true] {
        let sim = ResponsesSim::start().await.unwrap();
        sim.set_reasoning(Some("First look at the file, then decide.".into()));
        sim.set_reply_script(reads(4));
        let mut agent = agent(adapter(&sim, "gpt-5"));
        if stream {
            let events: Vec<_> = agent.stream_text("Read four files.").collect().await;
            assert!(events.iter().all(Result::is_ok), "{events:?}");
        } else {
            agent.generate_text("Read four files.").await.unwrap();
        }
        let records = sim.records();
        assert_eq!(records.len(), 5);
        assert!(records.iter().all(|r| r.status == 200), "{records:?}");
        let bodies: Vec<String> = records.iter().map(|r| r.body.to_string()).collect();
        let inputs: Vec<&Vec<Value>> = records
            .iter()
            .map(|r| r.body["input"].as_array().unwrap())
            .collect();
        for n in 1..5 {
            // Every earlier request's input leads this one, item for item, byte for byte.
            let (before, now) = (inputs[n - 1], inputs[n]);
            assert_eq!(&now[..before.len()], before.as_slice(), "request {n}");
            // The new items: the reasoning item of the last answer (with its encrypted
            // content, the one `.done` carried), its call, then the call's output.
            let new = &now[before.len()..];
            assert_eq!(new[0]["type"], "reasoning", "request {n}: {new:?}");
            assert!(
                new[0]["encrypted_content"]
                    .as_str()
                    .unwrap()
                    .starts_with("gAAAA-sim-")
            );
            assert!(
                !new[0]["encrypted_content"]
                    .as_str()
                    .unwrap()
                    .ends_with("-sim-")
            );
            assert_eq!(new[1]["type"], "function_call");
            assert_eq!(new[2]["type"], "function_call_output");
            assert_eq!(records[n].body["store"], false);
            assert_eq!(
                records[n].body["include"],
                json!(["reasoning.encrypted_content"])
            );
        }
        // The request bytes are stable: the tools and the prefix are written the same.
        let head = |b: &str| b[..b.find("\"input\"").unwrap()].to_string();
        assert!(bodies.windows(2).all(|w| head(&w[0]) == head(&w[1])));
        assert!(
            records[1..].iter().all(|r| r.cached_tokens > 0),
            "{records:?}"
        );
    }
}

#[tokio::test]
async fn a_reasoning_item_without_its_following_item_is_a_400_the_adapter_never_causes() {
    let sim = ResponsesSim::start().await.unwrap();
    sim.set_reasoning(Some("Think.".into()));
    sim.set_reply_script(reads(1));
    let mut agent = agent(adapter(&sim, "gpt-5"));
    agent.generate_text("Read a file.").await.unwrap();
    let good = sim.requests()[1].clone();
    assert!(sim.records().iter().all(|r| r.status == 200));

    // The same request with the reasoning item's following item dropped, or its
    // encrypted content changed, or the call without its reasoning item before it.
    let input = good["input"].as_array().unwrap();
    let at = input.iter().position(|i| i["type"] == "reasoning").unwrap();
    let post = |input: Vec<Value>| {
        let mut body = good.clone();
        body["input"] = Value::Array(input);
        let url = format!("{}/responses", sim.base_url());
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let mut without_follower = input.clone();
    without_follower.remove(at + 1);
    without_follower.remove(at + 1); // and its output, which would answer nothing
    let (status, err) = post(without_follower).await;
    assert_eq!(status, 400);
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("of type 'reasoning' was provided without its required following item."),
        "{message}"
    );
    let mut tampered = input.clone();
    tampered[at]["encrypted_content"] = json!("gAAAA-forged");
    assert_eq!(post(tampered).await.0, 400);
    let mut orphan = input.clone();
    orphan.remove(at);
    let (status, err) = post(orphan).await;
    assert_eq!(status, 400);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("without its required 'reasoning' item")
    );
}

#[tokio::test]
async fn the_reasoning_rule_error_reads_as_a_missing_reasoning_replay() {
    // What the adapter makes of the 400 (if a log edited by hand ever sent one).
    let sim = ResponsesSim::start().await.unwrap();
    sim.set_reasoning(Some("Think.".into()));
    sim.set_reply_script(reads(1));
    let model = adapter(&sim, "gpt-5");
    let mut agent = agent(model.clone());
    agent.generate_text("Read a file.").await.unwrap();
    let mut history = agent.log().to_vec();
    // Drop the call the reasoning item was followed by (and its result).
    let halo_core::Message::Assistant(turn) = &mut history[1] else {
        panic!()
    };
    turn.tool_calls.clear();
    history.remove(2);
    let prefix = agent.prefix().clone();
    let options = GenerationOptions::default();
    let err = model
        .generate(halo_core::ModelRequest::new(&prefix, &history, &options))
        .await
        .unwrap_err();
    assert_eq!(
        err.invalid_request_kind(),
        Some(InvalidRequestKind::ReasoningReplayMissing),
        "{err}"
    );
}

#[tokio::test]
async fn the_cache_reads_the_whole_earlier_request_and_the_ledger_sees_no_bust() {
    let sim = ResponsesSim::start().await.unwrap();
    sim.set_reply_script(reads(6));
    let mut agent = agent(adapter(&sim, "gpt-5"));
    let out = agent.generate_text("Read six files.").await.unwrap();
    let records = sim.records();
    for (n, r) in records.iter().enumerate().skip(1) {
        // OpenAI's rule: the shared prefix from 1,024 tokens, in 128-token steps.
        let expected = r.seen_prefix_tokens - r.seen_prefix_tokens % 128;
        assert_eq!(r.cached_tokens, expected, "request {n}");
    }
    assert_eq!(out.stats.cache_busts, 0);
    assert!(
        out.steps[1..]
            .iter()
            .all(|s| s.cache.verdict == CacheVerdict::Hit)
    );
    assert_eq!(records[0].body["prompt_cache_key"], "session-1");
}

#[tokio::test]
async fn gpt_5_6_explicit_breakpoints_mark_the_prefix_and_the_newest_block_and_writes_are_counted()
{
    let sim = ResponsesSim::start().await.unwrap();
    sim.set_reply_script(reads(3));
    let model = ResponsesAdapter::builder("gpt-5.6")
        .api_key(KEY)
        .base_url(sim.base_url())
        .prompt_cache(PromptCacheMode::Explicit)
        .build()
        .unwrap();
    let mut agent = agent(model);
    let out = agent.generate_text("Read three files.").await.unwrap();
    let records = sim.records();
    for (n, r) in records.iter().enumerate() {
        let body = &r.body;
        assert_eq!(
            body["prompt_cache_options"],
            json!({"mode": "explicit", "ttl": "30m"})
        );
        let input = body["input"].as_array().unwrap();
        let marked: Vec<usize> = input
            .iter()
            .enumerate()
            .filter(|(_, i)| i.to_string().contains("prompt_cache_breakpoint"))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            marked,
            [0, input.len() - 1],
            "request {n}: the prefix and the newest"
        );
    }
    // The first request writes its prefix and its end; each later one reads the whole
    // previous request and writes only what it adds.
    assert_eq!(records[0].cached_tokens, 0);
    assert_eq!(records[0].cache_write_tokens, records[0].input_tokens);
    for r in &records[1..] {
        assert_eq!(
            r.cached_tokens, r.seen_prefix_tokens,
            "exact, not in 128-token steps"
        );
        assert_eq!(r.cache_write_tokens, r.input_tokens - r.cached_tokens);
    }
    let written: u64 = records.iter().map(|r| r.cache_write_tokens).sum();
    assert_eq!(
        out.stats.cache_write_tokens, written,
        "the ledger counts writes"
    );
    assert_eq!(out.stats.cache_busts, 0);
    // A new session with the same prefix reads the prefix's breakpoint.
    sim.set_reply_script([SimReply::text("ok")]);
    let mut other = HaloAgent::builder(
        ResponsesAdapter::builder("gpt-5.6")
            .api_key(KEY)
            .base_url(sim.base_url())
            .prompt_cache(PromptCacheMode::Explicit)
            .build()
            .unwrap(),
    )
    .system(system(1500))
    .session_id("session-1")
    .tool(Read)
    .unwrap()
    .build();
    other.generate_text("Something else.").await.unwrap();
    let last = sim.records().pop().unwrap();
    assert!(
        last.cached_tokens >= 1024 && last.cached_tokens < last.input_tokens,
        "{last:?}"
    );
}

#[tokio::test]
async fn previous_response_id_chains_requests_when_asked() {
    let sim = ResponsesSim::start().await.unwrap();
    sim.set_reply_script(reads(2));
    let model = ResponsesAdapter::builder("gpt-5")
        .api_key(KEY)
        .base_url(sim.base_url())
        .previous_response_id(true)
        .build()
        .unwrap();
    let mut agent = agent(model);
    let out = agent.generate_text("Read two files.").await.unwrap();
    assert_eq!(out.text, "All files print hi.");
    let records = sim.records();
    assert!(records.iter().all(|r| r.status == 200), "{records:?}");
    assert_eq!(records[0].body["store"], true);
    assert!(records[0].body.get("previous_response_id").is_none());
    assert!(records[0].body.get("include").is_none());
    for (n, r) in records.iter().enumerate().skip(1) {
        assert_eq!(r.body["previous_response_id"], format!("resp_sim{n:04}"));
        let input = r.body["input"].as_array().unwrap();
        assert_eq!(input.len(), 1, "only the call's output: {input:?}");
        assert_eq!(input[0]["type"], "function_call_output");
    }
}

#[tokio::test]
async fn object_modes_native_tool_and_prompted() {
    #[derive(Debug, PartialEq, Deserialize, JsonSchema)]
    struct Weather {
        /// The city.
        city: String,
        /// Degrees Celsius.
        celsius: i32,
    }
    let sim = ResponsesSim::start().await.unwrap();
    sim.set_reply_script([SimReply::json(&json!({"city": "Oslo", "celsius": -3}))]);
    let mut a = agent(adapter(&sim, "gpt-5"));
    let out = a.generate_object::<Weather>("Oslo?").await.unwrap();
    assert_eq!(out.mode, OutputMode::Native);
    assert_eq!(
        out.object,
        Weather {
            city: "Oslo".into(),
            celsius: -3
        }
    );
    let body = &sim.requests()[0];
    assert_eq!(body["text"]["format"]["type"], "json_schema");
    assert_eq!(body["text"]["format"]["strict"], true);
    assert_eq!(
        body["text"]["format"]["schema"]["additionalProperties"],
        false
    );
    assert_eq!(body["tool_choice"], "none");

    let sim = ResponsesSim::start().await.unwrap();
    sim.set_reply_script([SimReply::tool_call(
        halo_core::output::DEFAULT_OUTPUT_TOOL,
        json!({"city": "Oslo", "celsius": -3}),
    )]);
    let mut a = agent(adapter(&sim, "gpt-5"));
    let out = a
        .generate_object_with(
            halo_core::Output::<Weather>::new().mode(OutputMode::Tool),
            "Oslo?",
        )
        .await
        .unwrap();
    assert_eq!(out.mode, OutputMode::Tool);
    let body = &sim.requests()[0];
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "name": halo_core::output::DEFAULT_OUTPUT_TOOL})
    );

    let sim = ResponsesSim::start().await.unwrap();
    sim.set_reply_script([SimReply::text(
        "Here it is:\n```json\n{\"city\": \"Oslo\", \"celsius\": -3}\n```",
    )]);
    let mut a = agent(adapter(&sim, "gpt-5"));
    let out = a
        .generate_object_with(
            halo_core::Output::<Weather>::new().mode(OutputMode::Prompted),
            "Oslo?",
        )
        .await
        .unwrap();
    assert_eq!((out.mode, out.object.celsius), (OutputMode::Prompted, -3));
    assert!(
        sim.requests()[0].get("text").is_none(),
        "no native format when prompted"
    );
}

#[tokio::test]
async fn the_portable_reasoning_setting_is_reasoning_effort_and_a_body_field_wins() {
    let sim = ResponsesSim::start().await.unwrap();
    sim.set_reply_script([SimReply::text("a"), SimReply::text("b")]);
    let options = GenerationOptions::default().with_reasoning(ReasoningEffort::Budget(20_000));
    let mut a = HaloAgent::builder(adapter(&sim, "gpt-5"))
        .options(options.clone())
        .build();
    a.generate_text("hi").await.unwrap();
    let model = ResponsesAdapter::builder("gpt-5")
        .api_key(KEY)
        .base_url(sim.base_url())
        .body_field("reasoning", json!({"effort": "minimal"}))
        .build()
        .unwrap();
    let mut b = HaloAgent::builder(model).options(options).build();
    b.generate_text("hi").await.unwrap();
    let requests = sim.requests();
    assert_eq!(requests[0]["reasoning"], json!({"effort": "high"}));
    assert_eq!(requests[1]["reasoning"], json!({"effort": "minimal"}));
}

#[tokio::test]
async fn a_prompt_over_the_window_is_a_context_window_error() {
    let sim = ResponsesSim::start().await.unwrap();
    sim.set_context_window(Some(200));
    sim.push_reply(SimReply::text("never"));
    let err = agent(adapter(&sim, "gpt-5"))
        .generate_text("hi")
        .await
        .unwrap_err();
    let halo_core::HaloError::Model(err) = err else {
        panic!("{err:?}")
    };
    assert!(err.is_context_window_exceeded(), "{err}");
    assert!(matches!(
        err,
        ModelError::InvalidRequest { status: 400, .. }
    ));
    assert_eq!(sim.remaining_replies(), 1);
    assert_eq!(adapter(&sim, "gpt-5").provider(), "openai");
}
