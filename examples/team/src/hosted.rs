//! The hosted model the environment names, as the coder picks one (first match wins):
//! `ANTHROPIC_API_KEY` (optional `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`), `GEMINI_API_KEY`
//! (`GEMINI_BASE_URL`, `GEMINI_MODEL`), `DEEPSEEK_API_KEY` (`DEEPSEEK_BASE_URL`,
//! `DEEPSEEK_MODEL`), `OPENAI_API_KEY` (`OPENAI_BASE_URL`, `OPENAI_MODEL`: any
//! OpenAI-compatible server).

use std::sync::Arc;

use anyhow::bail;
use halo_adapters::anthropic::AnthropicAdapter;
use halo_adapters::gemini::GeminiAdapter;
use halo_adapters::openai::OpenAiCompatible;
use halo_core::SharedModel;

fn set(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.is_empty())
}

/// The hosted model the environment names.
///
/// # Errors
/// No API key set, or the adapter's own configuration errors.
pub fn pick_model() -> anyhow::Result<SharedModel> {
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
