//! `team`: a team of agents on a hosted model (issue 14 §7).
//!
//! ```text
//! cargo run -p team -- "TASK"
//! ```
//!
//! The model is picked from the environment as the coder picks it, first match wins:
//! `ANTHROPIC_API_KEY` (optional `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`), `GEMINI_API_KEY`
//! (`GEMINI_BASE_URL`, `GEMINI_MODEL`), `DEEPSEEK_API_KEY` (`DEEPSEEK_BASE_URL`,
//! `DEEPSEEK_MODEL`), `OPENAI_API_KEY` (`OPENAI_BASE_URL`, `OPENAI_MODEL`: any
//! OpenAI-compatible server). The lead proposes the members, they work in turn with
//! broadcasts, the last reviews, the team disbands (`team::run_team`).

use std::sync::Arc;

use anyhow::bail;
use halo_adapters::anthropic::AnthropicAdapter;
use halo_adapters::gemini::GeminiAdapter;
use halo_adapters::openai::OpenAiCompatible;
use halo_core::{ModelAdapter, SharedModel};

fn set(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.is_empty())
}

/// The hosted model the environment names.
fn pick_model() -> anyhow::Result<SharedModel> {
    let model: SharedModel = if set("ANTHROPIC_API_KEY") {
        Arc::new(AnthropicAdapter::from_env()?)
    } else if set("GEMINI_API_KEY") {
        Arc::new(GeminiAdapter::from_env()?)
    } else if set("DEEPSEEK_API_KEY") {
        Arc::new(OpenAiCompatible::deepseek_from_env()?)
    } else if set("OPENAI_API_KEY") {
        Arc::new(OpenAiCompatible::openai_from_env()?)
    } else {
        bail!(
            "no API key set; set ANTHROPIC_API_KEY, GEMINI_API_KEY, DEEPSEEK_API_KEY or OPENAI_API_KEY"
        );
    };
    Ok(model)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let task = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    if task.trim().is_empty() {
        bail!("usage: team \"TASK\"");
    }
    let model = pick_model()?;
    println!("model: {} ({})", model.model_name(), model.provider());
    team::run_team(model, &task, |line| println!("{line}")).await?;
    Ok(())
}
