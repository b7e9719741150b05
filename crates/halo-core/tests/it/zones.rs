//! Prompt zones on the agent: frozen for the session, the date from the
//! agent's clock, a refresh is one expected miss; discardable tool results.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use halo_core::testing::ScriptedModel;
use halo_core::zones::{PromptZones, VOLATILE_MARKER, ZoneSection};
use halo_core::{
    AssistantMessage, CacheVerdict, Clock, FinishReason, HaloAgent, MemoryStore, Message,
    ModelResponse, NoArgs, RunState, SessionStore, SkillMeta, Tool, ToolError, ToolOutput, Usage,
};
use serde_json::json;

#[derive(Debug, Default)]
struct FixedClock(AtomicU64);

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

fn answer(text: &str, input: u64, read: u64) -> ModelResponse {
    ModelResponse {
        id: None,
        message: AssistantMessage {
            text: text.into(),
            ..Default::default()
        },
        finish_reason: FinishReason::Stop,
        usage: Usage {
            input_tokens: Some(input),
            cache_read_tokens: Some(read),
            ..Default::default()
        },
        model: None,
        provider: None,
    }
}

fn zones(rules: &str) -> PromptZones {
    PromptZones::new("You are a coding agent.".repeat(200))
        .section(ZoneSection::file("AGENTS.md", rules))
        .skills([SkillMeta {
            name: "pdf".into(),
            description: "Work with PDF files.".into(),
            location: Some(".agents/skills/pdf/SKILL.md".into()),
        }])
}

#[tokio::test]
async fn zones_are_frozen_for_the_session_and_a_refresh_is_one_expected_miss() {
    // 2026-12-01T10:00:00Z
    let clock = Arc::new(FixedClock(AtomicU64::new(1_796_119_200_000)));
    let model = ScriptedModel::new()
        .respond(answer("one", 2000, 0))
        .respond(answer("two", 2100, 1900))
        .respond(answer("three", 2200, 0))
        .respond(answer("four", 2300, 2100));
    let mut agent = HaloAgent::builder(model.clone())
        .clock(clock.clone())
        .zones(zones("Run the tests."))
        .build();
    let text = agent.prefix().system_text();
    assert!(text.contains("## AGENTS.md (file `AGENTS.md`)\nRun the tests."));
    assert!(text.contains("<name>pdf</name>"));
    assert!(text.ends_with(&format!("{VOLATILE_MARKER}\nToday's date: 2026-12-01.")));

    agent.generate_text("first").await.unwrap();
    // Hours later the same day: nothing changes, the call is a hit.
    clock.0.fetch_add(5 * 3_600_000, Ordering::SeqCst);
    assert!(!agent.refresh_prefix(&zones("Run the tests.")));
    agent.generate_text("second").await.unwrap();
    assert_eq!(
        agent.cache_ledger().last().unwrap().verdict,
        CacheVerdict::Hit
    );

    // The rules file changed and the caller refreshes: one expected miss, then hits.
    assert!(agent.refresh_prefix(&zones("Run the tests and clippy.")));
    agent.generate_text("third").await.unwrap();
    assert_eq!(
        agent.cache_ledger().last().unwrap().verdict,
        CacheVerdict::ExpectedMiss
    );
    agent.generate_text("fourth").await.unwrap();
    assert_eq!(
        agent.cache_ledger().last().unwrap().verdict,
        CacheVerdict::Hit
    );
    assert_eq!(agent.stats().prefix_fingerprint_changes, 1);
    assert_eq!(agent.stats().cache_busts, 0);

    let requests = model.requests();
    assert_eq!(requests[0].prefix_bytes, requests[1].prefix_bytes);
    assert_ne!(requests[1].prefix_bytes, requests[2].prefix_bytes);
    assert_eq!(requests[2].prefix_bytes, requests[3].prefix_bytes);
}

struct LoadBody;

impl Tool for LoadBody {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "load_skill"
    }
    fn description(&self) -> &str {
        "Loads a skill."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("SKILL BODY").discardable())
    }
}

#[tokio::test]
async fn a_discardable_output_is_a_discardable_result_in_the_log_and_the_journal() {
    let model = ScriptedModel::new()
        .tool_call("load_skill", json!({}))
        .text("done");
    let store = MemoryStore::new();
    let mut agent = HaloAgent::builder(model.clone())
        .tool(LoadBody)
        .unwrap()
        .session(Arc::new(store.clone()))
        .build();
    agent.generate_text("go").await.unwrap();
    let log = agent.log();
    let at = (0..log.len())
        .find(|&i| matches!(&log.to_vec()[i], Message::Tool(_)))
        .unwrap();
    assert!(log.is_discardable(at));
    assert_eq!(log.discardable_indices(), vec![at]);
    // The flag never reaches the model's request text, and a journal keeps it.
    let Message::Tool(sent) = &model.requests()[1].history[at] else {
        panic!("a tool result")
    };
    assert_eq!(sent.content, "SKILL BODY");
    let journal = store.load(agent.session_name()).await.unwrap();
    let back = RunState::from_journal(&journal, 100);
    assert_eq!(back.log().discardable_indices(), vec![at]);
}
