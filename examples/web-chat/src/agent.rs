//! The chat's agent: the model `--model` names, the weather tool, and with
//! `--coding-tools DIR` the coding tools over that folder, `bash` asking for approval.

use std::sync::Arc;

use anyhow::{Context, bail};
use halo_core::{HaloAgent, HaloAgentBuilder, HaloError, SharedModel, Tool, ToolError, ToolOutput};
use halo_stream::gateway::ChatContext;

/// The weather tool the agent calls: fixed answers, so runs are reproducible.
pub struct GetWeather;

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct GetWeatherArgs {
    /// The city's name, e.g. "Paris".
    city: String,
}

impl Tool for GetWeather {
    type Args = GetWeatherArgs;
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "Current weather of a city."
    }
    fn annotations(&self) -> halo_core::ToolAnnotations {
        // It only reads: no approval under the coding tools' permission policy.
        halo_core::ToolAnnotations::default()
            .with_read_only(true)
            .with_idempotent(true)
    }
    async fn call(&self, args: GetWeatherArgs) -> Result<ToolOutput, ToolError> {
        let report = match args.city.to_lowercase().as_str() {
            "paris" => "sunny, 21 °C",
            "oslo" => "snow, -3 °C",
            "lisbon" => "clear, 24 °C",
            _ => "cloudy, 15 °C",
        };
        Ok(ToolOutput::text(report))
    }
}

/// What every chat's agent is made of.
#[derive(Clone)]
pub struct Recipe {
    pub model: SharedModel,
    /// The folder of the coding tools, when given.
    pub coding_tools: Option<halo_sandbox::ContainerSandbox>,
}

impl Recipe {
    /// The builder of a chat's agent (the gateway adds the session and approvals).
    pub fn builder(&self, _chat: &ChatContext<'_>) -> Result<HaloAgentBuilder, HaloError> {
        let mut builder = HaloAgent::builder_shared(self.model.clone())
            .system(
                "You are a helpful assistant. For the weather call get_weather, then answer in one sentence.",
            )
            .tool(GetWeather)?
            .max_steps(8);
        if let Some(sandbox) = &self.coding_tools {
            use halo_sandbox::policy::{PermissionPolicy, PermissionPreset};
            builder = builder
                .tools(sandbox.tools())?
                // Reads go, writes inside the folder go, commands wait for approval.
                .hook(PermissionPolicy::new(PermissionPreset::WorkspaceWrite));
        }
        Ok(builder)
    }
}

/// The model of the profile `name` in the user's config file (`$HALO_CONFIG`, else
/// `~/.config/halo/config.toml`; `halo_adapters::profiles`): its provider with its model and
/// base URL over the environment's (API keys stay in the environment).
pub fn profile_model(name: &str) -> anyhow::Result<(SharedModel, String)> {
    use halo_adapters::anthropic::AnthropicAdapter;
    use halo_adapters::gemini::GeminiAdapter;
    use halo_adapters::openai::{OpenAiCompatible, Profile};
    use halo_adapters::profiles::ProfileFile;
    let file = ProfileFile::load(ProfileFile::default_path())?;
    let profile = file.resolve(Some(name), None)?;
    let env = |var: &str| profile.lookup(var, |v| std::env::var(v).ok());
    let model: SharedModel = match profile.provider.as_deref() {
        Some("anthropic") => Arc::new(AnthropicAdapter::from_env_with(env)?),
        Some("gemini") => Arc::new(GeminiAdapter::from_env_with(env)?),
        Some("deepseek") => Arc::new(OpenAiCompatible::from_env_with(Profile::DeepSeek, env)?),
        Some("openai") => Arc::new(OpenAiCompatible::from_env_with(Profile::OpenAi, env)?),
        Some("local") => return local_model(),
        _ => bail!(
            "profile `{name}` in {} names no provider; `coder profile set provider PROVIDER --profile {name}`",
            file.path().display()
        ),
    };
    let desc = format!(
        "profile {name}: {} {}",
        model.provider(),
        model.model_name()
    );
    Ok((model, desc))
}

/// The model `--model` names, and a line describing it.
pub fn pick_model(name: &str) -> anyhow::Result<(SharedModel, String)> {
    match name {
        "scripted" => Ok((
            Arc::new(crate::model::WeatherScript),
            "scripted weather model".into(),
        )),
        "openai" => {
            let m = halo_adapters::openai::OpenAiCompatible::openai_from_env().context(
                "--model openai reads OPENAI_API_KEY (required), OPENAI_BASE_URL and OPENAI_MODEL",
            )?;
            let desc = format!(
                "OpenAI-compatible {} at {}",
                halo_core::ModelAdapter::model_name(&m),
                m.endpoint()
            );
            Ok((Arc::new(m), desc))
        }
        "local" => local_model(),
        other => bail!("unknown model `{other}`; use `scripted`, `openai` or `local`"),
    }
}

#[cfg(feature = "local")]
fn local_model() -> anyhow::Result<(SharedModel, String)> {
    use halo_adapters::local::{AutoToolChoice, LocalAdapter, LocalConfig, default_model_path};
    let config =
        LocalConfig::default().with_auto_tool_choice(AutoToolChoice::CallThenAnswer { rounds: 1 });
    let path = default_model_path();
    let desc = format!("embedded model {}", path.display());
    Ok((Arc::new(LocalAdapter::load(path, config)?), desc))
}

#[cfg(not(feature = "local"))]
fn local_model() -> anyhow::Result<(SharedModel, String)> {
    bail!("this build has no embedded model; build with `--features local`")
}
