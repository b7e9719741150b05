//! The experience file: cards recorded by the model during a session reach the prompt only
//! at the next session (or a refresh), so recording costs no cache miss; the snapshot keeps
//! the newest cards within its limits; every file that enters the prefix reads the same with
//! CRLF line endings or a byte-order mark.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use halo_core::testing::ScriptedModel;
use halo_core::zones::PromptZones;
use halo_core::{
    AssistantMessage, CacheVerdict, Clock, FinishReason, HaloAgent, Message, ModelResponse,
    SharedSandbox, ToolCall, Usage,
};
use halo_sandbox::VirtualSandbox;
use halo_sandbox::harness::{
    Experience, ExperienceConfig, ExperienceTool, Memory, MemoryConfig, SkillDiscovery, catalog,
    load_rules,
};
use serde_json::json;

use super::put;

#[derive(Debug)]
struct FixedClock(AtomicU64);

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// 2026-12-01T10:00:00Z
const NOW: u64 = 1_796_119_200_000;

fn usage(input: u64, read: u64) -> Usage {
    Usage {
        input_tokens: Some(input),
        cache_read_tokens: Some(read),
        ..Default::default()
    }
}

fn call(id: &str, title: &str, lesson: &str) -> ModelResponse {
    ModelResponse {
        message: AssistantMessage {
            tool_calls: vec![ToolCall::new(
                id,
                "record_experience",
                json!({"title": title, "lesson": lesson}).to_string(),
            )],
            ..Default::default()
        },
        finish_reason: FinishReason::ToolCalls,
        usage: usage(3000, 2900),
        model: None,
        provider: None,
        id: None,
    }
}

fn answer(text: &str, read: u64) -> ModelResponse {
    ModelResponse {
        message: AssistantMessage {
            text: text.into(),
            ..Default::default()
        },
        finish_reason: FinishReason::Stop,
        usage: usage(3200, read),
        model: None,
        provider: None,
        id: None,
    }
}

async fn zones(experience: &Experience) -> PromptZones {
    let snapshot = experience.snapshot().await;
    PromptZones::new("You are a coding agent. ".repeat(100)).sections(snapshot.section)
}

#[tokio::test]
async fn a_lesson_recorded_mid_session_costs_no_cache_miss_until_a_refresh() {
    let sandbox: SharedSandbox = Arc::new(VirtualSandbox::new());
    put(
        sandbox.as_ref(),
        ".agent/experience.md",
        "## 2026-11-30: run clippy with all targets\nCI runs it; local runs missed test code.\n",
    )
    .await;
    let experience = Experience::new(Arc::clone(&sandbox), ExperienceConfig::default());
    let clock = Arc::new(FixedClock(AtomicU64::new(NOW)));
    let model = ScriptedModel::new()
        .respond(call(
            "c1",
            "fixtures first",
            "Run `make fixtures` before the tests.",
        ))
        .respond(answer("done", 2900))
        .respond(answer("again", 3100))
        .respond(answer("after the refresh", 0))
        .respond(answer("and then", 3300));
    let mut agent = HaloAgent::builder(model.clone())
        .clock(clock.clone())
        .zones(zones(&experience).await)
        .tool(ExperienceTool::new(experience.clone(), clock.clone()))
        .unwrap()
        .build();
    let text = agent.prefix().system_text();
    assert!(text.contains(
        "## Experience: lessons recorded after earlier tasks (file `.agent/experience.md`)\n\
         ## 2026-11-30: run clippy with all targets\nCI runs it; local runs missed test code."
    ));

    agent.generate_text("fix the build").await.unwrap();
    let Some(Message::Tool(result)) = agent.log().to_vec().get(2).cloned() else {
        panic!("{:?}", agent.log().to_vec())
    };
    assert!(!result.is_error, "{}", result.content);
    assert_eq!(
        result.content,
        "recorded in .agent/experience.md; it will be read at the start of the next session"
    );
    // The file has the card at once ...
    let file = String::from_utf8(sandbox.read(&experience.config().path).await.unwrap()).unwrap();
    assert!(
        file.ends_with("\n## 2026-12-01: fixtures first\nRun `make fixtures` before the tests.\n")
    );
    // ... but the prompt does not: the session's requests keep one prefix.
    agent.generate_text("and the docs").await.unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests
            .iter()
            .all(|r| r.prefix_bytes == requests[0].prefix_bytes)
    );
    assert!(!String::from_utf8_lossy(&requests[2].prefix_bytes).contains("fixtures first"));
    assert_eq!(agent.stats().prefix_fingerprint_changes, 0);
    assert_eq!(agent.stats().cache_busts, 0);

    // A refresh re-reads it: one expected miss, then hits.
    assert!(agent.refresh_prefix(&zones(&experience).await));
    agent.generate_text("next").await.unwrap();
    assert_eq!(
        agent.cache_ledger().last().unwrap().verdict,
        CacheVerdict::ExpectedMiss
    );
    agent.generate_text("more").await.unwrap();
    assert_eq!(
        agent.cache_ledger().last().unwrap().verdict,
        CacheVerdict::Hit
    );
    let requests = model.requests();
    assert!(
        String::from_utf8_lossy(&requests[3].prefix_bytes)
            .contains("## 2026-12-01: fixtures first\\nRun `make fixtures` before the tests.")
    );
    assert_eq!(agent.stats().prefix_fingerprint_changes, 1);
    assert_eq!(agent.stats().cache_busts, 0);
}

#[tokio::test]
async fn the_snapshot_keeps_the_newest_whole_cards_within_its_limits() {
    let sandbox: SharedSandbox = Arc::new(VirtualSandbox::new());
    let mut file = String::from("# Lessons\nNot a card.\n");
    for i in 0..30 {
        file.push_str(&format!(
            "\n## 2026-11-{:02}: lesson {i}\n{}\n",
            i % 28 + 1,
            "x".repeat(50)
        ));
    }
    put(sandbox.as_ref(), ".agent/experience.md", &file).await;

    let snap = Experience::new(Arc::clone(&sandbox), ExperienceConfig::default())
        .snapshot()
        .await;
    assert_eq!((snap.cards, snap.left_out), (20, 10));
    let body = snap.section.unwrap().body;
    assert!(body.starts_with("## 2026-11-11: lesson 10\n"), "{body:.80}");
    assert!(body.ends_with(&format!("## 2026-11-02: lesson 29\n{}", "x".repeat(50))));
    assert!(!body.contains("Not a card"));

    // A byte budget of three cards' size keeps the newest three, whole.
    let config = ExperienceConfig {
        max_bytes: 3 * 80,
        ..ExperienceConfig::default()
    };
    let snap = Experience::new(Arc::clone(&sandbox), config)
        .snapshot()
        .await;
    assert_eq!((snap.cards, snap.left_out), (3, 27));
    let body = snap.section.unwrap().body;
    assert_eq!(body.matches("\n## ").count() + 1, 3);
    assert!(body.starts_with("## 2026-11-"));
    assert!(body.contains(": lesson 27\n") && body.contains(": lesson 29\n"));

    assert!(
        Experience::new(sandbox, ExperienceConfig::off())
            .snapshot()
            .await
            .section
            .is_none()
    );
}

/// Writes the same project with `\n` or with `\r\n` line endings and a byte-order mark.
async fn project(crlf: bool) -> SharedSandbox {
    let sandbox: SharedSandbox = Arc::new(VirtualSandbox::new());
    let fix = |text: &str| {
        if crlf {
            format!("\u{feff}{}", text.replace('\n', "\r\n"))
        } else {
            text.to_string()
        }
    };
    for (path, text) in [
        ("AGENTS.md", "# Rules\nRun the tests.\n\nUse tabs.\n"),
        (".agent/rules/style.md", "Short functions.\nNo panics.\n"),
        (
            ".agent/memory.md",
            "- 2026-11-30T10:00:00Z task: a | result: b\n- 2026-11-30T11:00:00Z task: c | result: d\n",
        ),
        (
            ".agent/experience.md",
            "## 2026-11-30: one\nfirst line\nsecond line\n\n## 2026-11-30: two\nthird\n",
        ),
        (
            ".agents/skills/pdf/SKILL.md",
            "---\nname: pdf\ndescription: >\n  Fill PDF forms\n  and extract text.\n---\n# PDF\nbody\n",
        ),
    ] {
        put(sandbox.as_ref(), path, fix(text)).await;
    }
    sandbox
}

async fn prefix_bytes(sandbox: SharedSandbox) -> Vec<u8> {
    let rules = load_rules(sandbox.as_ref(), &halo_core::sandbox::SandboxPath::root()).await;
    let memory = Memory::new(Arc::clone(&sandbox), MemoryConfig::default())
        .snapshot()
        .await;
    let experience = Experience::new(Arc::clone(&sandbox), ExperienceConfig::default())
        .snapshot()
        .await;
    let set = SkillDiscovery::new().discover(sandbox.as_ref()).await;
    assert_eq!(set.skills.len(), 1, "{:?}", set.diagnostics);
    PromptZones::new("Role.")
        .sections(rules.sections)
        .sections(memory.section)
        .sections(experience.section)
        .skills(catalog(&set, 4_000).skills)
        .to_prefix(NOW)
        .canonical_bytes()
        .to_vec()
}

#[tokio::test]
async fn crlf_line_endings_and_a_byte_order_mark_send_the_same_prefix_bytes() {
    let plain = prefix_bytes(project(false).await).await;
    let windows = prefix_bytes(project(true).await).await;
    let text = String::from_utf8(plain.clone()).unwrap();
    assert!(text.contains("Run the tests.\\n\\nUse tabs."), "{text}");
    assert!(text.contains("first line\\nsecond line"), "{text}");
    assert!(text.contains("Fill PDF forms and extract text."), "{text}");
    assert!(!text.contains("\\r") && !text.contains('\u{feff}'));
    assert_eq!(String::from_utf8(windows).unwrap(), text);
}
