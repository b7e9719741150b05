//! Request bodies, byte for byte: the full request (below the cache minimum), the request
//! naming a cached content (system instruction, tools and few-shots left out) and the
//! `cachedContents` create body, function calls and responses without ids, and thought
//! signatures replayed on the parts they came with, and the note before a history that
//! opens with a function call (the simulator refuses one without it, as the API does).

use halo_adapters::TRIMMED_HISTORY_NOTE;
use halo_adapters::gemini::sanitize_schema;
use halo_adapters::sim::SimReply;
use halo_adapters::sim::gemini::{FUNCTION_CALL_TURN_ORDER, GeminiSim};
use halo_core::{
    AssistantMessage, GenerationOptions, Message, ModelAdapter, Reasoning, ResponseFormat,
    StablePrefix, ToolCall, ToolChoice, ToolResult,
};
use serde_json::json;

use super::{
    KEY, assert_snapshot, big_system, builder, json, list_dir_spec, read_file_spec, request,
};

fn few_shot() -> Vec<Message> {
    let call = ToolCall::new("fs-1", "list_dir", "{}");
    vec![
        Message::user("What is in the workspace?"),
        Message::Assistant(AssistantMessage {
            tool_calls: vec![call.clone()],
            ..AssistantMessage::default()
        }),
        Message::Tool(ToolResult::ok(&call, "README.md\nsrc/")),
        Message::assistant("A README and a src folder."),
    ]
}

fn small_prefix() -> StablePrefix {
    StablePrefix::new("You are a careful coding agent.")
        .with_tool(read_file_spec())
        .unwrap()
        .with_tool(list_dir_spec())
        .unwrap()
        .with_few_shot(few_shot())
}

#[tokio::test]
async fn full_request_below_the_minimum_carries_the_whole_prefix() {
    let sim = GeminiSim::start().await.unwrap();
    sim.push_reply(SimReply::text("It prints hello."));
    let model = builder(&sim.base_url()).build().unwrap();
    let prefix = small_prefix();
    let history = [Message::user("What does src/main.rs print?")];
    let options = GenerationOptions::default()
        .with_max_tokens(512)
        .with_temperature(0.2)
        .with_seed(7)
        .with_tool_choice(ToolChoice::Required);
    let req = request(&prefix, &history, &options);
    assert!(model.estimated_prefix_tokens(&req) < model.min_cacheable_tokens());

    let body = model.request_body(&req, None).unwrap();
    assert_snapshot("full_below_minimum", &body);
    let out = model.generate(req).await.unwrap();
    assert_eq!(out.message.text, "It prints hello.");

    // No cache was created and the wire body is exactly the snapshot's.
    let records = sim.records();
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(records[0].is_generate());
    assert_eq!(records[0].body, json(&body));
    assert!(records[0].api_key_header);
    assert_eq!(records[0].query, None, "the key never goes in the URL");
    let sent = &records[0].body;
    assert_eq!(
        sent["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    assert_eq!(
        sent["contents"].as_array().unwrap().len(),
        5,
        "4 few-shot turns + 1"
    );
    assert!(!serde_json::to_string(sent).unwrap().contains(KEY));
}

#[test]
fn cached_request_leaves_system_tools_and_few_shots_to_the_cached_content() {
    let model = builder("http://127.0.0.1:9").build().unwrap();
    let prefix = StablePrefix::new(big_system())
        .with_tool(read_file_spec())
        .unwrap()
        .with_tool(list_dir_spec())
        .unwrap()
        .with_few_shot(few_shot());
    let history = [Message::user("What does src/main.rs print?")];
    let options = GenerationOptions::default().with_max_tokens(512);
    let req = request(&prefix, &history, &options);
    assert!(model.estimated_prefix_tokens(&req) >= model.min_cacheable_tokens());

    let body = model
        .request_body(&req, Some("cachedContents/sim00000001"))
        .unwrap();
    assert_snapshot("cached_reference", &body);
    let v = json(&body);
    for omitted in ["systemInstruction", "tools", "toolConfig"] {
        assert!(v.get(omitted).is_none(), "{omitted} must live in the cache");
    }
    assert_eq!(v["contents"].as_array().unwrap().len(), 1, "history only");

    // The create body holds what the request leaves out; the system text is long, so the
    // snapshot keeps only its start.
    let bytes = model.cached_content_body(&req).unwrap();
    let create = json(&bytes);
    assert_eq!(
        create["systemInstruction"]["parts"][0]["text"],
        big_system()
    );
    assert_eq!(create["contents"].as_array().unwrap().len(), 4);
    assert_eq!(create["ttl"], "3600s");
    assert_eq!(
        create["displayName"],
        format!("halo {}", prefix.fingerprint())
    );
    let system = serde_json::to_string(&big_system()).unwrap();
    let shown = String::from_utf8(bytes)
        .unwrap()
        .replace(&system, "\"<big_system()>\"");
    assert_snapshot("cached_content_create", shown.as_bytes());
}

#[test]
fn function_calls_and_responses_round_trip_without_internal_ids() {
    let model = builder("http://127.0.0.1:9").build().unwrap();
    let prefix = StablePrefix::new("You read files.")
        .with_tool(read_file_spec())
        .unwrap()
        .with_tool(list_dir_spec())
        .unwrap();
    // One call as the API usually sends it (no id: Halo's internal id, never sent), one
    // with an API id (sent back on the call and its response).
    let internal = ToolCall::new(
        "gemini-call-0",
        "read_file",
        "{\"path\":\"a.rs\",\"mode\":\"plain\"}",
    );
    let mut with_id = ToolCall::new("fc-api-7", "list_dir", "{}");
    with_id.provider_data = Some(json!({"functionCallId": "fc-api-7"}));
    let history = [
        Message::user("Read a.rs and list the folder."),
        Message::Assistant(AssistantMessage {
            tool_calls: vec![internal.clone(), with_id.clone()],
            ..AssistantMessage::default()
        }),
        // Logged in the other order: the body puts them in call order.
        Message::Tool(ToolResult::ok(&with_id, "README.md\nsrc/")),
        Message::Tool(ToolResult::error(
            &internal,
            "no such file: a.rs; list the folder first",
        )),
        Message::assistant("a.rs does not exist."),
        Message::user("Fine."),
    ];
    let options = GenerationOptions::default();
    let body = model
        .request_body(&request(&prefix, &history, &options), None)
        .unwrap();
    assert_snapshot("function_round_trip", &body);
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(
        !text.contains("gemini-call-0"),
        "internal ids never go on the wire"
    );
    assert_eq!(
        text.matches("fc-api-7").count(),
        2,
        "call and response carry the API id"
    );
}

#[test]
fn thought_signatures_are_replayed_on_their_parts() {
    let model = builder("http://127.0.0.1:9").build().unwrap();
    let prefix = StablePrefix::new("You read files.")
        .with_tool(read_file_spec())
        .unwrap();
    let mut first = ToolCall::new(
        "gemini-call-0",
        "read_file",
        "{\"path\":\"src/main.rs\",\"mode\":\"numbered\"}",
    );
    first.provider_data = Some(json!({"thoughtSignature": "sig-call-1"}));
    let second = ToolCall::new(
        "gemini-call-1",
        "read_file",
        "{\"path\":\"Cargo.toml\",\"mode\":\"plain\"}",
    );
    let history = [
        Message::user("What does main print, and what is the crate called?"),
        Message::Assistant(AssistantMessage {
            text: String::new(),
            reasoning: vec![Reasoning {
                text: "Two files to read.".into(),
                signature: Some("sig-thought".into()),
            }],
            tool_calls: vec![first.clone(), second.clone()],
        }),
        Message::Tool(ToolResult::ok(&first, "1 fn main() { println!(\"hi\"); }")),
        Message::Tool(ToolResult::ok(&second, "[package]\nname = \"demo\"")),
        Message::Assistant(AssistantMessage {
            text: "It prints hi; the crate is demo.".into(),
            reasoning: vec![Reasoning {
                text: String::new(),
                signature: Some("sig-text".into()),
            }],
            tool_calls: Vec::new(),
        }),
        Message::user("Thanks."),
    ];
    let options = GenerationOptions::default();
    let body = model
        .request_body(&request(&prefix, &history, &options), None)
        .unwrap();
    assert_snapshot("thought_signatures", &body);
    let v = json(&body);
    let call_turn = &v["contents"][1]["parts"];
    assert_eq!(
        call_turn[0],
        json!({"thought": true, "text": "Two files to read.", "thoughtSignature": "sig-thought"})
    );
    assert_eq!(call_turn[1]["thoughtSignature"], "sig-call-1");
    assert!(
        call_turn[2].get("thoughtSignature").is_none(),
        "only the first call was signed"
    );
    assert_eq!(
        v["contents"][3]["parts"],
        json!([{"text": "It prints hi; the crate is demo.", "thoughtSignature": "sig-text"}])
    );
}

#[test]
fn json_response_format_and_thinking_go_in_generation_config() {
    let model = builder("http://127.0.0.1:9")
        .thinking_budget(1024)
        .include_thoughts(true)
        .build()
        .unwrap();
    let prefix = StablePrefix::new("Answer in JSON.");
    let history = [Message::user("Name a color.")];
    let mut options = GenerationOptions::default();
    options.response_format = ResponseFormat::Json {
        schema: Some(
            json!({"type": "object", "additionalProperties": false, "properties": {"color": {"type": "string"}}, "required": ["color"]}),
        ),
    };
    options.stop = vec!["END".into()];
    let v = json(
        &model
            .request_body(&request(&prefix, &history, &options), None)
            .unwrap(),
    );
    assert_eq!(
        v["generationConfig"],
        json!({
            "stopSequences": ["END"],
            "responseMimeType": "application/json",
            "responseSchema": {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
            "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true}
        })
    );
    assert_eq!(
        v["systemInstruction"],
        json!({"parts": [{"text": "Answer in JSON."}]})
    );
    assert!(v.get("tools").is_none() && v.get("toolConfig").is_none());
}

#[test]
fn tool_schemas_from_schemars_are_sanitized() {
    let spec = read_file_spec();
    // What schemars writes for an Option and a doc-commented enum.
    assert!(
        spec.parameters.to_string().contains("\"null\""),
        "{}",
        spec.parameters
    );
    let clean = sanitize_schema(&spec.parameters);
    assert_eq!(
        clean,
        json!({
            "title": "ReadArgs",
            "description": "Lines a range of a file.",
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file's path, relative to the workspace."},
                "start": {"type": "integer", "nullable": true, "minimum": 0, "description": "The first line (1-based); the whole file when absent."},
                "mode": {"description": "How to show the lines.", "anyOf": [
                    {"type": "string", "enum": ["plain"], "description": "As they are."},
                    {"type": "string", "enum": ["numbered"], "description": "With line numbers."}
                ]}
            },
            "required": ["path", "mode"]
        }),
        "from {}",
        spec.parameters
    );
    // A tool without arguments has no `parameters` at all.
    let model = builder("http://127.0.0.1:9").build().unwrap();
    let prefix = StablePrefix::new("s").with_tool(list_dir_spec()).unwrap();
    let history = [Message::user("ls")];
    let options = GenerationOptions::default();
    let v = json(
        &model
            .request_body(&request(&prefix, &history, &options), None)
            .unwrap(),
    );
    assert_eq!(
        v["tools"],
        json!([{"functionDeclarations": [{"name": "list_dir", "description": "Lists the workspace's top folder."}]}])
    );
}

/// A model turn calling `read_file` on `path` (no API id, no signature), and its result.
fn read_step(id: &str, path: &str) -> [Message; 2] {
    let call = ToolCall::new(
        id,
        "read_file",
        format!("{{\"path\":\"{path}\",\"mode\":\"plain\"}}"),
    );
    [
        Message::Assistant(AssistantMessage {
            tool_calls: vec![call.clone()],
            ..AssistantMessage::default()
        }),
        Message::Tool(ToolResult::ok(&call, format!("{path} prints hi"))),
    ]
}

fn note() -> serde_json::Value {
    json!({"role": "user", "parts": [{"text": TRIMMED_HISTORY_NOTE}]})
}

#[tokio::test]
async fn a_history_opening_with_a_function_call_gets_the_trimmed_note_and_is_accepted() {
    // Trigger: a bounded log evicted the user's turn; the few-shots end with a model turn,
    // so the history's call would follow a model turn.
    let sim = GeminiSim::start().await.unwrap();
    sim.set_reply_script([SimReply::text("It prints hi."), SimReply::text("Done.")]);
    let model = builder(&sim.base_url()).build().unwrap();
    let prefix = small_prefix();
    let history = read_step("c1", "a.rs");
    let options = GenerationOptions::default();
    let req = request(&prefix, &history, &options);
    let body = model.request_body(&req, None).unwrap();
    assert_snapshot("trimmed_history_note", &body);
    let contents = json(&body)["contents"].as_array().unwrap().clone();
    assert_eq!(
        contents.len(),
        4 + 3,
        "4 few-shot turns, the note, the step"
    );
    assert_eq!(
        contents[3]["role"], "model",
        "the few-shots end with a model turn"
    );
    assert_eq!(
        contents[4..],
        [
            note(),
            json!({"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"mode": "plain", "path": "a.rs"}}}]}),
            json!({"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"result": "a.rs prints hi"}}}]}),
        ]
    );
    assert_eq!(model.request_body(&req, None).unwrap(), body, "same bytes");
    let out = model.generate(req).await.unwrap();
    assert_eq!(out.message.text, "It prints hi.");
    assert_eq!(sim.records()[0].body, json(&body));

    // Without few-shots, with a cached content: the note is the first content sent.
    let bare = StablePrefix::new("s").with_tool(read_file_spec()).unwrap();
    let req = request(&bare, &history, &options);
    let body = json(&model.request_body(&req, Some("cachedContents/x")).unwrap());
    assert_eq!(body["contents"][0], note());
    assert_eq!(body["contents"].as_array().unwrap().len(), 3);

    // Mid-history, a call right after a text-only model turn gets the note too.
    let [call, result] = read_step("c2", "b.rs");
    let history = [
        Message::user("Read b.rs."),
        Message::assistant("Reading it now."),
        call,
        result,
    ];
    let req = request(&bare, &history, &options);
    let body = json(&model.request_body(&req, None).unwrap());
    let roles: Vec<&str> = body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user", "model", "user"]);
    assert_eq!(body["contents"][2], note());
    model.generate(req).await.unwrap();
    assert_eq!(sim.records()[1].status, 200);

    // A history opening with a user turn, and model turns without calls, get none.
    let history = [
        Message::user("Hi."),
        Message::assistant("Hello."),
        Message::assistant("How can I help?"),
    ];
    let body = model
        .request_body(&request(&bare, &history, &options), None)
        .unwrap();
    assert!(
        !String::from_utf8(body.to_vec())
            .unwrap()
            .contains("were trimmed")
    );
}

#[tokio::test]
async fn the_simulator_rejects_a_function_call_turn_out_of_place_in_googles_shape() {
    // Regression guard: a request builder that lets a function-call turn follow anything but
    // a user or function-response turn fails here the way the real API fails it.
    let sim = GeminiSim::start().await.unwrap();
    sim.push_reply(SimReply::text("unused"));
    let call =
        json!({"role": "model", "parts": [{"functionCall": {"name": "list_dir", "args": {}}}]});
    let response = json!({"role": "user", "parts": [{"functionResponse": {"name": "list_dir", "response": {"result": "src/"}}}]});
    let tools = json!([{"functionDeclarations": [{"name": "list_dir", "description": "Lists."}]}]);
    let openings = [
        json!([call, response]),
        json!([
            {"role": "user", "parts": [{"text": "List it."}]},
            {"role": "model", "parts": [{"text": "Listing."}]},
            call,
            response
        ]),
    ];
    let client = reqwest::Client::new();
    for contents in openings {
        let answer = client
            .post(format!(
                "{}/v1beta/models/gemini-2.5-flash:generateContent",
                sim.base_url()
            ))
            .header("x-goog-api-key", KEY)
            .json(&json!({"contents": contents, "tools": tools}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 400);
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(
            body,
            json!({"error": {
                "code": 400,
                "message": "Please ensure that function call turn comes immediately after a user turn or after a function response turn.",
                "status": "INVALID_ARGUMENT",
            }})
        );
        assert_eq!(FUNCTION_CALL_TURN_ORDER, body["error"]["message"]);
    }
    assert_eq!(sim.remaining_replies(), 1, "no reply was used");
}

#[tokio::test]
async fn empty_text_is_never_sent_as_a_part_and_an_empty_turn_is_skipped() {
    // Trigger: an empty user message, an empty assistant turn and an empty text part in the
    // history (Gemini answers `{"text": ""}` with "required oneof field 'data' ...").
    let sim = GeminiSim::start().await.unwrap();
    sim.push_reply(SimReply::text("Done."));
    let model = builder(&sim.base_url()).build().unwrap();
    let prefix = small_prefix();
    let history = [
        Message::user("Start."),
        Message::assistant(""),
        Message::User {
            content: Vec::new(),
        },
        Message::User {
            content: vec![
                halo_core::ContentPart::Text {
                    text: String::new(),
                },
                halo_core::ContentPart::Text {
                    text: "Go on.".into(),
                },
            ],
        },
    ];
    let options = GenerationOptions::default();
    let req = request(&prefix, &history, &options);
    let body: serde_json::Value =
        serde_json::from_slice(&model.request_body(&req, None).unwrap()).unwrap();
    let contents = body["contents"].as_array().unwrap();
    let last_two: Vec<_> = contents[contents.len() - 2..].to_vec();
    assert_eq!(
        last_two,
        [
            json!({"role": "user", "parts": [{"text": "Start."}]}),
            json!({"role": "user", "parts": [{"text": "Go on."}]}),
        ]
    );
    assert_eq!(model.generate(req).await.unwrap().message.text, "Done.");
}

#[tokio::test]
async fn the_simulator_rejects_an_empty_text_part_as_gemini_does() {
    // Trigger: a request with `{"text": ""}`; a regression in the adapter must fail loudly.
    let sim = GeminiSim::start().await.unwrap();
    let answer = reqwest::Client::new()
        .post(format!(
            "{}/v1beta/models/gemini-2.5-flash:generateContent",
            sim.base_url()
        ))
        .header("x-goog-api-key", KEY)
        .json(&json!({"contents": [
            {"role": "user", "parts": [{"text": "Hi."}]},
            {"role": "model", "parts": [{"text": ""}]},
            {"role": "user", "parts": [{"text": "Again."}]},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        "* GenerateContentRequest.contents[1].parts[0].data: required oneof field 'data' must have one initialized field"
    );
}
