//! The `cachedContents` lifecycle over [`GeminiSim`]: create, reuse, fingerprint change
//! (new object, old deleted), expiry (recreate once, the request succeeds), TTL refresh,
//! one object for concurrent calls, the too-small fallback, implicit caching, and agent
//! runs with a tool whose cache reads are exact, one of them trimmed by a bounded log.
//!
//! Expected token counts restate the simulator's documented rule here, independently: a
//! cached content counts the `o200k_base` tokens of the canonical JSON of its
//! `{contents, systemInstruction, tools, toolConfig}`; a request's implicit prefix extends
//! it by one piece per `contents` entry (canonical JSON plus a newline).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use halo_adapters::TRIMMED_HISTORY_NOTE;
use halo_adapters::gemini::GeminiAdapter;
use halo_adapters::sim::gemini::{GeminiSim, SimRecord};
use halo_adapters::sim::{SimReply, count_tokens};
use halo_core::ledger::CacheVerdict;
use halo_core::prefix::canonicalize;
use halo_core::{
    AgentEvent, FinishReason, GenerationOptions, HaloAgent, InvalidRequestKind, Message,
    ModelAdapter, ModelError, StablePrefix,
};
use serde_json::{Map, Value, json};

use super::{KEY, ListDir, ReadFile, big_system, builder, list_dir_spec, read_file_spec, request};

fn canonical(v: &Value) -> String {
    canonicalize(v.clone()).to_string()
}

/// The tokens of a cached content, from its create body.
fn cache_tokens(create: &Value) -> u64 {
    let mut m = Map::new();
    for key in ["contents", "systemInstruction", "tools", "toolConfig"] {
        if let Some(v) = create.get(key) {
            m.insert(key.into(), v.clone());
        }
    }
    count_tokens(&canonical(&Value::Object(m)))
}

/// The tokens of one `contents` entry in a request's linearization.
fn piece_tokens(content: &Value) -> u64 {
    count_tokens(&format!("{}\n", canonical(content)))
}

fn of<'a>(records: &'a [SimRecord], method: &str) -> Vec<&'a SimRecord> {
    records.iter().filter(|r| r.is_cache_call(method)).collect()
}

fn generates(records: &[SimRecord]) -> Vec<&SimRecord> {
    records.iter().filter(|r| r.is_generate()).collect()
}

fn adapter(sim: &GeminiSim) -> GeminiAdapter {
    builder(&sim.base_url()).clock(sim.clock()).build().unwrap()
}

fn prefix_one() -> StablePrefix {
    StablePrefix::new(big_system())
        .with_tool(read_file_spec())
        .unwrap()
}

fn prefix_two() -> StablePrefix {
    prefix_one().with_tool(list_dir_spec()).unwrap()
}

#[tokio::test]
async fn lifecycle_create_reuse_replace_expire_recreate() {
    let sim = GeminiSim::start().await.unwrap();
    sim.set_reply_script((1..=4).map(|n| SimReply::text(format!("answer {n}"))));
    let model = adapter(&sim);
    let options = GenerationOptions::default();
    let p1 = prefix_one();
    let p2 = prefix_two();

    // 1. Create: the first call creates the object, then names it.
    let h1 = [Message::user("What does src/main.rs print?")];
    let out = model.generate(request(&p1, &h1, &options)).await.unwrap();
    let records = sim.records();
    assert_eq!(records.len(), 2, "{records:#?}");
    assert!(records[0].is_cache_call("POST") && records[1].is_generate());
    let create = &records[0].body;
    assert_eq!(create["model"], "models/gemini-2.5-flash");
    assert_eq!(create["ttl"], "3600s");
    let first = sim.cached_contents();
    assert_eq!(first.len(), 1);
    let name1 = first[0].name.clone();
    let body = &records[1].body;
    assert_eq!(body["cachedContent"], name1.as_str());
    for omitted in ["systemInstruction", "tools", "toolConfig"] {
        assert!(
            body.get(omitted).is_none(),
            "{omitted} sent with a cached content"
        );
    }
    let explicit = cache_tokens(create);
    assert!(
        explicit >= 1024,
        "the prefix is above the minimum: {explicit}"
    );
    assert_eq!(first[0].tokens, explicit);
    assert_eq!(out.usage.cache_read_tokens, Some(explicit));
    assert_eq!(
        out.usage.cache_write_tokens,
        Some(explicit),
        "this call created it"
    );
    assert_eq!(
        out.usage.input_tokens,
        Some(explicit + piece_tokens(&body["contents"][0]))
    );
    assert_eq!(
        model.cached_content().await.as_deref(),
        Some(name1.as_str())
    );

    // 2. Reuse: same fingerprint, longer history; nothing is created.
    let h2 = [
        Message::user("What does src/main.rs print?"),
        Message::assistant("answer 1"),
        Message::user("And Cargo.toml?"),
    ];
    let out = model.generate(request(&p1, &h2, &options)).await.unwrap();
    let records = sim.records();
    assert_eq!(records.len(), 3);
    assert_eq!(records[2].body["cachedContent"], name1.as_str());
    assert_eq!(out.usage.cache_write_tokens, None);
    // Explicit tokens plus the implicit hit on the first history turn.
    let expected = explicit + piece_tokens(&records[2].body["contents"][0]);
    assert_eq!(out.usage.cache_read_tokens, Some(expected));

    // 3. Fingerprint change (a tool added): a new object, and the old one deleted.
    let out = model.generate(request(&p2, &h2, &options)).await.unwrap();
    let records = sim.records();
    assert_eq!(of(&records, "POST").len(), 2);
    let deletes = of(&records, "DELETE");
    assert_eq!(deletes.len(), 1);
    assert_eq!(deletes[0].path, format!("/v1beta/{name1}"));
    assert_eq!(deletes[0].status, 200);
    let live = sim.cached_contents();
    assert_eq!(live.len(), 1);
    let name2 = live[0].name.clone();
    assert_ne!(name2, name1);
    let last = generates(&records).last().copied().unwrap();
    assert_eq!(last.body["cachedContent"], name2.as_str());
    assert_eq!(out.usage.cache_write_tokens, Some(live[0].tokens));

    // 4. Expiry the adapter did not see coming: 403, recreate once, retry, success.
    sim.expire_all();
    let out = model.generate(request(&p2, &h2, &options)).await.unwrap();
    assert_eq!(out.message.text, "answer 4");
    let records = sim.records();
    let tail: Vec<_> = records[records.len() - 3..]
        .iter()
        .map(|r| {
            (
                r.method.as_str(),
                r.status,
                r.body.get("cachedContent").cloned(),
            )
        })
        .collect();
    let name3 = sim.cached_contents()[0].name.clone();
    assert_eq!(
        tail,
        [
            ("POST", 403, Some(json!(name2))),
            ("POST", 200, None),
            ("POST", 200, Some(json!(name3))),
        ]
    );
    assert_eq!(of(&records, "POST").len(), 3, "recreated exactly once");
    assert_eq!(model.cached_content().await, Some(name3.clone()));
    assert_eq!(sim.remaining_replies(), 0);

    // The end of a session: the object is deleted now rather than at the end of its TTL.
    assert_eq!(model.delete_cached_content().await.unwrap(), Some(name3));
    assert!(sim.cached_contents().is_empty());
    for r in sim.records() {
        assert!(r.api_key_header);
        assert!(!r.query.unwrap_or_default().contains(KEY));
    }
}

#[tokio::test]
async fn the_ttl_is_refreshed_close_to_expiry_and_an_expired_object_replaced() {
    let sim = GeminiSim::start().await.unwrap();
    sim.set_reply_script((1..=4).map(|n| SimReply::text(format!("answer {n}"))));
    let model = builder(&sim.base_url())
        .clock(sim.clock())
        .cache_ttl(Duration::from_secs(600))
        .build()
        .unwrap();
    let p = prefix_one();
    let options = GenerationOptions::default();
    let h = [Message::user("hi")];

    model.generate(request(&p, &h, &options)).await.unwrap();
    let name = sim.cached_contents()[0].name.clone();
    let expires = sim.cached_contents()[0].expire_time;

    // 350 s later 250 s are left, under the 300 s margin: refreshed before the call.
    sim.advance_clock(Duration::from_secs(350));
    model.generate(request(&p, &h, &options)).await.unwrap();
    let records = sim.records();
    let patches = of(&records, "PATCH");
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].path, format!("/v1beta/{name}"));
    assert_eq!(patches[0].query.as_deref(), Some("updateMask=ttl"));
    assert_eq!(patches[0].body, json!({"ttl": "600s"}));
    let refreshed = sim.cached_contents()[0].expire_time;
    assert!(
        refreshed >= expires + Duration::from_secs(349),
        "the expiry moved by the 350 s that passed"
    );

    // 500 s more would be past the original expiry: the same object still serves.
    sim.advance_clock(Duration::from_secs(500));
    model.generate(request(&p, &h, &options)).await.unwrap();
    let records = sim.records();
    assert_eq!(of(&records, "POST").len(), 1, "never recreated");
    assert_eq!(of(&records, "PATCH").len(), 2);
    assert!(
        generates(&records)
            .iter()
            .all(|r| r.status == 200 && r.body["cachedContent"] == name.as_str())
    );

    // Past the expiry with no call in between: a new object, no 403 first, no delete.
    sim.advance_clock(Duration::from_secs(2000));
    model.generate(request(&p, &h, &options)).await.unwrap();
    let records = sim.records();
    assert_eq!(of(&records, "POST").len(), 2);
    assert!(of(&records, "DELETE").is_empty());
    assert!(generates(&records).iter().all(|r| r.status == 200));
}

#[tokio::test]
async fn concurrent_calls_with_one_prefix_create_one_object() {
    let sim = GeminiSim::start().await.unwrap();
    sim.set_reply_script([
        SimReply::text("a"),
        SimReply::text("b"),
        SimReply::text("c"),
    ]);
    let model = Arc::new(adapter(&sim));
    let p = prefix_one();
    let options = GenerationOptions::default();
    let h = [Message::user("hi")];
    let (a, b, c) = tokio::join!(
        model.generate(request(&p, &h, &options)),
        model.generate(request(&p, &h, &options)),
        model.generate(request(&p, &h, &options)),
    );
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    let records = sim.records();
    assert_eq!(of(&records, "POST").len(), 1, "{records:#?}");
    assert_eq!(generates(&records).len(), 3);
}

#[tokio::test]
async fn a_create_refused_as_too_small_falls_back_to_the_full_prefix_for_good() {
    let sim = GeminiSim::start().await.unwrap();
    sim.set_reply_script([SimReply::text("a"), SimReply::text("b")]);
    // The adapter thinks 10 tokens is enough; the API (1,024 for 2.5 Flash) disagrees.
    let model = builder(&sim.base_url())
        .clock(sim.clock())
        .min_cacheable_tokens(10)
        .build()
        .unwrap();
    let p = StablePrefix::new("Short.")
        .with_tool(read_file_spec())
        .unwrap();
    let options = GenerationOptions::default();
    let h = [Message::user("hi")];
    model.generate(request(&p, &h, &options)).await.unwrap();
    model.generate(request(&p, &h, &options)).await.unwrap();
    let records = sim.records();
    let creates = of(&records, "POST");
    assert_eq!(creates.len(), 1, "tried once, then remembered");
    assert_eq!(creates[0].status, 400);
    let gens = generates(&records);
    assert_eq!(gens.len(), 2);
    for g in gens {
        assert_eq!(g.status, 200);
        assert!(g.body.get("cachedContent").is_none());
        assert_eq!(g.body["systemInstruction"]["parts"][0]["text"], "Short.");
    }
}

#[tokio::test]
async fn with_explicit_caching_off_the_implicit_cache_serves_the_repeated_prefix() {
    let sim = GeminiSim::start().await.unwrap();
    sim.set_reply_script([SimReply::text("a"), SimReply::text("b")]);
    let model = builder(&sim.base_url())
        .explicit_cache(false)
        .build()
        .unwrap();
    let p = prefix_one();
    let options = GenerationOptions::default();
    let h1 = [Message::user("hi")];
    let first = model.generate(request(&p, &h1, &options)).await.unwrap();
    assert_eq!(
        first.usage.cache_read_tokens,
        Some(0),
        "nothing seen before"
    );
    let h2 = [
        Message::user("hi"),
        Message::assistant("a"),
        Message::user("more"),
    ];
    let second = model.generate(request(&p, &h2, &options)).await.unwrap();
    let records = sim.records();
    assert!(of(&records, "POST").is_empty());
    let body = &records[1].body;
    assert!(body.get("cachedContent").is_none());
    let head = json!({"systemInstruction": body["systemInstruction"], "tools": body["tools"]});
    let expected = count_tokens(&canonical(&head)) + piece_tokens(&body["contents"][0]);
    assert!(expected >= 1024);
    assert_eq!(second.usage.cache_read_tokens, Some(expected));
    let all: u64 = count_tokens(&canonical(&head))
        + body["contents"]
            .as_array()
            .unwrap()
            .iter()
            .map(piece_tokens)
            .sum::<u64>();
    assert_eq!(second.usage.input_tokens, Some(all));

    // An eviction: the same request reads nothing.
    sim.drop_cache();
    sim.push_reply(SimReply::text("c"));
    let third = model.generate(request(&p, &h2, &options)).await.unwrap();
    assert_eq!(third.usage.cache_read_tokens, Some(0));
}

fn agent(sim: &GeminiSim) -> HaloAgent {
    HaloAgent::builder(adapter(sim))
        .system(big_system())
        .tool(ReadFile)
        .unwrap()
        .tool(ListDir)
        .unwrap()
        .build()
}

#[tokio::test]
async fn agent_run_with_a_tool_reads_exactly_the_cached_prefix_on_turn_two() {
    let sim = GeminiSim::start().await.unwrap();
    // Like Gemini 3: signed calls, checked on replay, and a thought summary per turn.
    sim.set_thought_signatures(true);
    sim.set_thoughts(Some("I should look at the file first.".into()));
    sim.set_reply_script([
        SimReply::ToolCalls(vec![
            (
                "read_file".into(),
                json!({"path": "src/main.rs", "mode": "plain"}),
            ),
            ("list_dir".into(), json!({})),
        ]),
        SimReply::text("main prints src/main.rs; the folder has README.md and src/."),
    ]);
    let mut agent = agent(&sim);
    let out = agent.generate_text("What does main print?").await.unwrap();
    assert_eq!(
        out.text,
        "main prints src/main.rs; the folder has README.md and src/."
    );
    assert_eq!(out.steps.len(), 2);
    assert_eq!(out.steps[0].finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        out.steps[0].tool_results[0].content,
        "fn main() { println!(\"src/main.rs\"); }"
    );
    assert_eq!(
        out.steps[0].message.reasoning_text().as_deref(),
        Some("I should look at the file first.")
    );

    let records = sim.records();
    assert_eq!(of(&records, "POST").len(), 1, "one object for the run");
    let gens = generates(&records);
    assert_eq!(gens.len(), 2);
    assert!(gens.iter().all(|g| g.status == 200), "{gens:#?}");
    let explicit = cache_tokens(&records[0].body);
    // Turn 1 reads the cached content; turn 2 also the first history turn (implicit).
    assert_eq!(out.steps[0].usage.cache_read_tokens, Some(explicit));
    let turn2 = &gens[1].body;
    assert_eq!(
        out.steps[1].usage.cache_read_tokens,
        Some(explicit + piece_tokens(&turn2["contents"][0]))
    );
    assert_eq!(
        out.stats.cache_read_tokens,
        2 * explicit + piece_tokens(&turn2["contents"][0])
    );
    assert_eq!(out.stats.cache_write_tokens, explicit);

    // The model turn is replayed as received: thought, then the signed call first.
    let model_turn = &turn2["contents"][1];
    assert_eq!(model_turn["role"], "model");
    let parts = model_turn["parts"].as_array().unwrap();
    assert_eq!(
        parts[0],
        json!({"thought": true, "text": "I should look at the file first."})
    );
    assert_eq!(parts[1]["thoughtSignature"], "sim-signature-sim-response-1");
    assert_eq!(
        parts[1]["functionCall"],
        json!({"name": "read_file", "args": {"mode": "plain", "path": "src/main.rs"}})
    );
    assert_eq!(
        parts[2],
        json!({"functionCall": {"name": "list_dir", "args": {}}})
    );
    // Both results in one user content, in call order, without ids.
    assert_eq!(
        turn2["contents"][2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "read_file", "response": {"result": "fn main() { println!(\"src/main.rs\"); }"}}},
            {"functionResponse": {"name": "list_dir", "response": {"result": "README.md\nsrc/"}}}
        ]})
    );
}

#[tokio::test]
async fn a_streamed_agent_run_sends_and_reads_the_same_as_a_plain_one() {
    let script = || {
        [
            SimReply::tool_call("list_dir", json!({})),
            SimReply::text("The folder has README.md and src/."),
        ]
    };
    let plain_sim = GeminiSim::start().await.unwrap();
    plain_sim.set_thought_signatures(true);
    plain_sim.set_reply_script(script());
    let plain = agent(&plain_sim)
        .generate_text("List the folder.")
        .await
        .unwrap();

    let sim = GeminiSim::start().await.unwrap();
    sim.set_thought_signatures(true);
    sim.set_reply_script(script());
    let mut streaming = agent(&sim);
    let events: Vec<AgentEvent> = streaming
        .stream_text("List the folder.")
        .map(Result::unwrap)
        .collect()
        .await;
    assert!(events.iter().any(|e| matches!(e, AgentEvent::TextDelta(_))));
    let streamed_bodies: Vec<Value> = sim.requests();
    let plain_bodies: Vec<Value> = plain_sim.requests();
    assert_eq!(streamed_bodies, plain_bodies, "the same bodies either way");
    let streamed_gens: Vec<_> = sim
        .records()
        .into_iter()
        .filter(SimRecord::is_generate)
        .collect();
    assert!(streamed_gens.iter().all(
        |r| r.path.ends_with(":streamGenerateContent") && r.query.as_deref() == Some("alt=sse")
    ));
    let usages: Vec<_> = streamed_gens
        .iter()
        .map(|r| r.usage.unwrap().cached_tokens)
        .collect();
    assert_eq!(
        usages,
        plain
            .steps
            .iter()
            .map(|s| s.usage.cache_read_tokens.unwrap())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        streaming.stats().cache_read_tokens,
        plain.stats.cache_read_tokens
    );
}

#[tokio::test]
async fn a_trimmed_history_opens_with_the_note_and_keeps_the_cache_warm() {
    // Trigger: a log of 4 messages evicts the user's task after the second step, so the
    // history opens with a function-call turn (HTTP 400 from the real API).
    let sim = GeminiSim::start().await.unwrap();
    sim.set_thought_signatures(true);
    let read = |path: &str| {
        (
            "read_file".to_string(),
            json!({"path": path, "mode": "plain"}),
        )
    };
    sim.set_reply_script([
        SimReply::ToolCalls(vec![read("src/main.rs"), ("list_dir".into(), json!({}))]),
        SimReply::ToolCalls(vec![read("src/a.rs")]),
        SimReply::ToolCalls(vec![read("src/b.rs")]),
        SimReply::ToolCalls(vec![read("src/c.rs")]),
        SimReply::text("All four files print their own path."),
    ]);
    let mut agent = HaloAgent::builder(adapter(&sim))
        .system(big_system())
        .tool(ReadFile)
        .unwrap()
        .tool(ListDir)
        .unwrap()
        .log_capacity(4)
        .build();
    let out = agent
        .generate_text("What do the files of src print?")
        .await
        .unwrap();
    assert_eq!(out.text, "All four files print their own path.");
    assert_eq!(out.steps.len(), 5);
    assert_eq!(sim.remaining_replies(), 0);
    let records = sim.records();
    assert_eq!(
        of(&records, "POST").len(),
        1,
        "one cached content for the run"
    );
    let gens = generates(&records);
    assert_eq!(gens.len(), 5);
    assert!(gens.iter().all(|g| g.status == 200), "{gens:#?}");

    let note = json!({"role": "user", "parts": [{"text": TRIMMED_HISTORY_NOTE}]});
    let task = json!({"role": "user", "parts": [{"text": "What do the files of src print?"}]});
    let call = |response: u64, path: &str| {
        json!({"role": "model", "parts": [{
            "functionCall": {"name": "read_file", "args": {"mode": "plain", "path": path}},
            "thoughtSignature": format!("sim-signature-sim-response-{response}"),
        }]})
    };
    let result = |path: &str| {
        json!({"role": "user", "parts": [{"functionResponse": {
            "name": "read_file",
            "response": {"result": format!("fn main() {{ println!(\"{path}\"); }}")},
        }}]})
    };
    let contents: Vec<&Value> = gens.iter().map(|g| &g.body["contents"]).collect();
    // Calls 1 and 2: the task is still there, no note.
    assert_eq!(*contents[0], json!([task]));
    assert_eq!(contents[1][0], task);
    assert_eq!(contents[1].as_array().unwrap().len(), 3);
    // Call 3: the task and the first step are evicted; the note opens the history.
    assert_eq!(
        *contents[2],
        json!([note, call(2, "src/a.rs"), result("src/a.rs")])
    );
    // Call 4: nothing evicted; the same note, then one more step.
    assert_eq!(
        *contents[3],
        json!([
            note,
            call(2, "src/a.rs"),
            result("src/a.rs"),
            call(3, "src/b.rs"),
            result("src/b.rs")
        ])
    );
    // Call 5: the oldest step evicted; the note again, before the next one.
    assert_eq!(
        *contents[4],
        json!([
            note,
            call(3, "src/b.rs"),
            result("src/b.rs"),
            call(4, "src/c.rs"),
            result("src/c.rs")
        ])
    );
    // The note is history: every call names the same cached content, untouched.
    let name = gens[0].body["cachedContent"].as_str().unwrap();
    assert!(gens.iter().all(|g| g.body["cachedContent"] == name));

    // Call 4 starts with all of call 3: the implicit cache reads call 3 whole.
    let usage = |n: usize| gens[n].usage.unwrap();
    assert_eq!(usage(3).cached_tokens, usage(2).prompt_tokens);
    assert_eq!(usage(3).cached_tokens, usage(3).seen_prefix_tokens);
    // Calls 3 and 5 follow an eviction. Call 3 reads the cached content (and, token by
    // token, the opening of a user content's JSON); call 5 also the note it shares with
    // call 4, but not the whole next content.
    let explicit = cache_tokens(&records[0].body);
    assert_eq!(usage(2).explicit_tokens, explicit);
    let with_note = explicit + piece_tokens(&note);
    let cached = usage(2).cached_tokens;
    assert!((explicit..with_note).contains(&cached), "call 3: {cached}");
    let cached = usage(4).cached_tokens;
    let next = with_note + piece_tokens(&contents[4][1]);
    assert!((with_note..next).contains(&cached), "call 5: {cached}");
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
async fn a_prompt_over_the_context_window_is_geminis_input_token_count_error() {
    let sim = GeminiSim::start().await.unwrap();
    sim.push_reply(SimReply::text("fits"));
    sim.set_context_window(Some(10));
    let model = builder(&sim.base_url())
        .clock(sim.clock())
        .max_retries(0)
        .build()
        .unwrap();
    let prefix = StablePrefix::new("You are terse and you answer in one word.");
    let history = [Message::user("Say hi to everyone in the room, please.")];
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
    assert!(
        message.starts_with("The input token count (")
            && message.ends_with(
                ") exceeds the maximum number of tokens allowed (10). (status INVALID_ARGUMENT)"
            ),
        "{message}"
    );
    let generates = generates(&sim.records())
        .iter()
        .map(|r| r.status)
        .collect::<Vec<_>>();
    assert_eq!(generates, [400]);
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
