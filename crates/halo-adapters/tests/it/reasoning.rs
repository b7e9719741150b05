//! The portable reasoning setting (`GenerationOptions::reasoning`) in each provider's own
//! field, and the provider's own value (a builder setting, a body field) winning over it.

use halo_adapters::anthropic::AnthropicAdapter;
use halo_adapters::gemini::GeminiAdapter;
use halo_adapters::openai::OpenAiCompatible;
use halo_core::{GenerationOptions, Message, ModelRequest, ReasoningEffort, StablePrefix};
use serde_json::{Value, json};

const KEY: &str = "sk-reasoning-test-0123456789";
const BASE: &str = "http://127.0.0.1:9";

fn body(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

fn request_with<T>(effort: Option<ReasoningEffort>, f: impl FnOnce(&ModelRequest<'_>) -> T) -> T {
    let prefix = StablePrefix::new("s");
    let history = [Message::user("hi")];
    let mut options = GenerationOptions::default();
    if let Some(effort) = effort {
        options = options.with_reasoning(effort);
    }
    f(&ModelRequest::new(&prefix, &history, &options))
}

#[test]
fn openai_gets_reasoning_effort_and_a_budget_becomes_its_level() {
    let model = OpenAiCompatible::openai("gpt-5")
        .api_key(KEY)
        .base_url(BASE)
        .build()
        .unwrap();
    let medium = request_with(Some(ReasoningEffort::Medium), |r| {
        body(&model.request_body(r).unwrap())
    });
    assert_eq!(medium["reasoning_effort"], "medium");
    let budget = request_with(Some(ReasoningEffort::Budget(1000)), |r| {
        body(&model.request_body(r).unwrap())
    });
    assert_eq!(budget["reasoning_effort"], "low");
    let none = request_with(None, |r| body(&model.request_body(r).unwrap()));
    assert!(none.get("reasoning_effort").is_none());
    // The provider's own value wins.
    let own = OpenAiCompatible::openai("gpt-5")
        .api_key(KEY)
        .base_url(BASE)
        .body_field("reasoning_effort", json!("minimal"))
        .build()
        .unwrap();
    let own = request_with(Some(ReasoningEffort::High), |r| {
        body(&own.request_body(r).unwrap())
    });
    assert_eq!(own["reasoning_effort"], "minimal");
    // A compatible server gets nothing it may not know.
    let custom = OpenAiCompatible::custom(BASE, "qwen").build().unwrap();
    let custom = request_with(Some(ReasoningEffort::High), |r| {
        body(&custom.request_body(r).unwrap())
    });
    assert!(custom.get("reasoning_effort").is_none());
}

#[test]
fn deepseek_reasoning_picks_its_thinking_model() {
    let chat = OpenAiCompatible::deepseek("deepseek-chat")
        .api_key(KEY)
        .base_url(BASE)
        .build()
        .unwrap();
    let thinking = request_with(Some(ReasoningEffort::Low), |r| {
        body(&chat.request_body(r).unwrap())
    });
    assert_eq!(thinking["model"], "deepseek-reasoner");
    assert!(thinking.get("reasoning_effort").is_none());
    let plain = request_with(None, |r| body(&chat.request_body(r).unwrap()));
    assert_eq!(plain["model"], "deepseek-chat");
    // A model that thinks on its own (V4) takes the effort instead.
    let v4 = OpenAiCompatible::deepseek("deepseek-v4-flash")
        .api_key(KEY)
        .base_url(BASE)
        .build()
        .unwrap();
    let v4 = request_with(Some(ReasoningEffort::High), |r| {
        body(&v4.request_body(r).unwrap())
    });
    assert_eq!(
        (v4["model"].as_str(), v4["reasoning_effort"].as_str()),
        (Some("deepseek-v4-flash"), Some("high"))
    );
}

#[test]
fn anthropic_gets_a_thinking_budget_and_room_for_it() {
    let model = AnthropicAdapter::builder("claude-sonnet-4-5")
        .api_key(KEY)
        .base_url(BASE)
        .build()
        .unwrap();
    let medium = request_with(Some(ReasoningEffort::Medium), |r| {
        body(&model.request_body(r).unwrap())
    });
    assert_eq!(
        medium["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
    assert_eq!(
        medium["max_tokens"],
        8192 + 4096,
        "max_tokens must exceed the budget"
    );
    let tiny = request_with(Some(ReasoningEffort::Budget(10)), |r| {
        body(&model.request_body(r).unwrap())
    });
    assert_eq!(tiny["thinking"]["budget_tokens"], 1024, "the API's minimum");
    let own = AnthropicAdapter::builder("claude-sonnet-4-5")
        .api_key(KEY)
        .base_url(BASE)
        .body_field(
            "thinking",
            json!({"type": "enabled", "budget_tokens": 3000}),
        )
        .build()
        .unwrap();
    let own = request_with(Some(ReasoningEffort::High), |r| {
        body(&own.request_body(r).unwrap())
    });
    assert_eq!(own["thinking"]["budget_tokens"], 3000);
    assert_eq!(own["max_tokens"], 4096);
}

#[test]
fn gemini_gets_a_thinking_budget_and_the_builders_wins() {
    let model = GeminiAdapter::builder()
        .api_key(KEY)
        .base_url(BASE)
        .build()
        .unwrap();
    let high = request_with(Some(ReasoningEffort::High), |r| {
        body(&model.request_body(r, None).unwrap())
    });
    assert_eq!(
        high["generationConfig"]["thinkingConfig"]["thinkingBudget"],
        24576
    );
    let none = request_with(None, |r| body(&model.request_body(r, None).unwrap()));
    assert!(
        none.get("generationConfig")
            .is_none_or(|g| g.get("thinkingConfig").is_none())
    );
    let own = GeminiAdapter::builder()
        .api_key(KEY)
        .base_url(BASE)
        .thinking_budget(0)
        .build()
        .unwrap();
    let own = request_with(Some(ReasoningEffort::High), |r| {
        body(&own.request_body(r, None).unwrap())
    });
    assert_eq!(
        own["generationConfig"]["thinkingConfig"]["thinkingBudget"],
        0
    );
}
