//! The model a run uses: the profile's provider (its model and base URL over the
//! environment's), else the first provider whose API key the environment has, else the
//! embedded model.

use std::sync::Arc;

#[cfg(not(feature = "local"))]
use anyhow::bail;
use halo_adapters::profiles::ProfileSettings;
use halo_core::SharedModel;

/// Whether the environment variable `var` is set and not empty.
fn set(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.is_empty())
}

/// The model a run uses.
pub struct Picked {
    pub model: SharedModel,
    /// A one-line description.
    pub desc: String,
    /// Whether it is the small embedded model.
    pub small: bool,
    /// The Gemini adapter, whose `cachedContents` object is deleted at the end of the session
    /// (it would otherwise be billed for storage until its TTL ends).
    pub gemini: Option<Arc<halo_adapters::gemini::GeminiAdapter>>,
}

impl Picked {
    fn remote(model: SharedModel, desc: String) -> Self {
        Picked {
            model,
            desc,
            small: false,
            gemini: None,
        }
    }
}

/// The model the profile names (its provider, with its model and base URL over the
/// environment's), else the one the environment names.
pub fn pick_model(profile: &ProfileSettings) -> anyhow::Result<Picked> {
    use halo_adapters::anthropic::AnthropicAdapter;
    use halo_adapters::gemini::GeminiAdapter;
    use halo_adapters::openai::{OpenAiCompatible, Profile};
    let env = |var: &str| profile.lookup(var, |v| std::env::var(v).ok());
    let chosen = profile.provider.as_deref();
    let wants = |provider: &str, key: &str| chosen.map_or(set(key), |p| p == provider);
    if wants("anthropic", "ANTHROPIC_API_KEY") {
        let m = AnthropicAdapter::from_env_with(env)?;
        let desc = format!(
            "Anthropic {} at {}",
            halo_core::ModelAdapter::model_name(&m),
            m.endpoint()
        );
        return Ok(Picked::remote(Arc::new(m), desc));
    }
    if wants("gemini", "GEMINI_API_KEY") {
        let m = Arc::new(GeminiAdapter::from_env_with(env)?);
        let desc = format!(
            "Gemini {} at {}",
            halo_core::ModelAdapter::model_name(&*m),
            m.endpoint()
        );
        return Ok(Picked {
            gemini: Some(Arc::clone(&m)),
            ..Picked::remote(m, desc)
        });
    }
    if wants("deepseek", "DEEPSEEK_API_KEY") {
        let m = OpenAiCompatible::from_env_with(Profile::DeepSeek, env)?;
        let desc = format!(
            "DeepSeek {} at {}",
            halo_core::ModelAdapter::model_name(&m),
            m.endpoint()
        );
        return Ok(Picked::remote(Arc::new(m), desc));
    }
    if wants("openai", "OPENAI_API_KEY") {
        let m = OpenAiCompatible::from_env_with(Profile::OpenAi, env)?;
        let desc = format!(
            "OpenAI-compatible {} at {}",
            halo_core::ModelAdapter::model_name(&m),
            m.endpoint()
        );
        return Ok(Picked::remote(Arc::new(m), desc));
    }
    local_model()
}

/// The embedded model, with the adapter settings of [`coder::embedded_config`].
#[cfg(feature = "local")]
fn local_model() -> anyhow::Result<Picked> {
    use halo_adapters::local::{LocalAdapter, default_model_path};
    let path = default_model_path();
    let m = LocalAdapter::load(&path, coder::embedded_config())?;
    Ok(Picked {
        small: true,
        ..Picked::remote(Arc::new(m), format!("embedded model {}", path.display()))
    })
}

#[cfg(not(feature = "local"))]
fn local_model() -> anyhow::Result<Picked> {
    bail!(
        "no API key set and this build has no embedded model; set ANTHROPIC_API_KEY, GEMINI_API_KEY, DEEPSEEK_API_KEY or OPENAI_API_KEY, or build with `--features local`"
    )
}
