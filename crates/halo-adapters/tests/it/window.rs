//! Each adapter reports its model's context window from the shared per-model table
//! (`halo_adapters::window`), an agent whose context config names no window takes it at
//! build time, and the simulators report the window they enforce.

use std::sync::Arc;

use halo_adapters::anthropic::AnthropicAdapter;
use halo_adapters::gemini::GeminiAdapter;
use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::sim::anthropic::AnthropicSim;
use halo_adapters::sim::gemini::GeminiSim;
use halo_adapters::sim::openai::OpenAiSim;
use halo_core::context::{ContextBudget, ContextPlan, ContextStrategy};
use halo_core::{
    ContextConfig, DEFAULT_CONTEXT_WINDOW, HaloAgent, MessageLog, ModelAdapter, StablePrefix,
};

fn openai(model: &str) -> OpenAiCompatible {
    OpenAiCompatible::openai(model)
        .api_key("sk-test")
        .build()
        .unwrap()
}

fn deepseek(model: &str) -> OpenAiCompatible {
    OpenAiCompatible::deepseek(model)
        .api_key("sk-test")
        .build()
        .unwrap()
}

fn anthropic(model: &str) -> AnthropicAdapter {
    AnthropicAdapter::builder(model)
        .api_key("sk-ant-test")
        .build()
        .unwrap()
}

fn gemini(model: &str) -> GeminiAdapter {
    GeminiAdapter::builder()
        .api_key("k")
        .model(model)
        .build()
        .unwrap()
}

#[test]
fn every_adapter_reports_its_models_window_from_the_table() {
    let cases: Vec<(Box<dyn ModelAdapter>, Option<u64>)> = vec![
        (Box::new(openai("gpt-4o")), Some(128_000)),
        (Box::new(openai("gpt-4.1-mini")), Some(1_047_576)),
        (Box::new(openai("gpt-5")), Some(400_000)),
        (Box::new(openai("o3")), Some(200_000)),
        (Box::new(deepseek("deepseek-chat")), Some(128_000)),
        (Box::new(deepseek("deepseek-reasoner")), Some(128_000)),
        (
            Box::new(anthropic("claude-3-7-sonnet-20250219")),
            Some(200_000),
        ),
        (Box::new(anthropic("claude-sonnet-4-5")), Some(200_000)),
        (Box::new(gemini("gemini-2.5-flash")), Some(1_048_576)),
        (Box::new(gemini("gemini-1.5-pro")), Some(2_097_152)),
        // Ids the table does not know: a local server's model, a made-up family.
        (
            Box::new(
                OpenAiCompatible::custom("http://127.0.0.1:8080/v1", "qwen2.5-coder:7b")
                    .build()
                    .unwrap(),
            ),
            None,
        ),
        (Box::new(openai("sim-model")), None),
        (Box::new(anthropic("claude-next")), None),
        (Box::new(gemini("gemma-3-27b-it")), None),
    ];
    for (model, window) in cases {
        assert_eq!(model.context_window(), window, "{}", model.model_name());
    }
}

#[derive(Debug)]
struct Keep;

impl ContextStrategy for Keep {
    fn plan(&self, _: &StablePrefix, _: &MessageLog, _: &ContextBudget<'_>) -> ContextPlan {
        ContextPlan::keep()
    }
}

#[test]
fn an_agent_takes_the_adapters_window_unless_it_sets_one() {
    let agent = |model: OpenAiCompatible, config: ContextConfig| {
        HaloAgent::builder(model).context(config).build()
    };
    let from_model = || ContextConfig::for_model(Arc::new(Keep));
    assert_eq!(
        agent(openai("gpt-4o"), from_model()).context_window(),
        Some(128_000)
    );
    assert_eq!(
        agent(openai("gpt-4o"), from_model().with_context_window(16_000)).context_window(),
        Some(16_000)
    );
    assert_eq!(
        agent(openai("sim-model"), from_model()).context_window(),
        Some(DEFAULT_CONTEXT_WINDOW)
    );
    assert_eq!(
        HaloAgent::builder(openai("gpt-4o"))
            .build()
            .context_window(),
        None,
        "no context strategy, no window"
    );
}

#[tokio::test]
async fn the_simulators_report_the_window_they_enforce() {
    let openai = OpenAiSim::openai().await.unwrap();
    let anthropic = AnthropicSim::start().await.unwrap();
    let gemini = GeminiSim::start().await.unwrap();
    assert_eq!(
        (
            openai.context_window(),
            anthropic.context_window(),
            gemini.context_window()
        ),
        (None, None, None)
    );
    openai.set_context_window(Some(16_000));
    anthropic.set_context_window(Some(200_000));
    gemini.set_context_window(Some(1_048_576));
    assert_eq!(openai.context_window(), Some(16_000));
    assert_eq!(anthropic.context_window(), Some(200_000));
    assert_eq!(gemini.context_window(), Some(1_048_576));
}
