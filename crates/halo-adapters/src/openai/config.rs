//! Profiles and the builder of [`OpenAiCompatible`](super::OpenAiCompatible).
//!
//! A [`Profile`] holds what differs between vendors of the one OpenAI-compatible dialect:
//! the default base URL, the environment variables, whether `prompt_cache_key` is sent,
//! how `reasoning_content` is replayed and which `max_tokens` field name is used.

use reqwest::header::AUTHORIZATION;
use serde_json::Value;

use super::cache::{MIN_CACHEABLE_TOKENS, PromptCacheMode};
use super::{ChatCompletions, OpenAiCompatible};
use crate::transport::{
    ConfigError, HttpAdapter, HttpBuilder, HttpSettings, api_url, check_api_path,
    check_body_fields, extra_headers, key_header,
};

/// OpenAI's API base URL (<https://platform.openai.com/docs/api-reference>).
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model [`OpenAiCompatible::openai_from_env`] uses when `OPENAI_MODEL` is not set.
pub const OPENAI_DEFAULT_MODEL: &str = "gpt-4o-mini";
/// DeepSeek's API base URL (<https://api-docs.deepseek.com/>).
pub const DEEPSEEK_DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
/// The model [`OpenAiCompatible::deepseek_from_env`] uses when `DEEPSEEK_MODEL` is not set.
pub const DEEPSEEK_DEFAULT_MODEL: &str = "deepseek-chat";

/// Body fields the adapter writes itself; [`OpenAiBuilder::body_field`] refuses them.
const RESERVED_BODY_FIELDS: &[&str] = &[
    "model",
    "messages",
    "tools",
    "tool_choice",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "seed",
    "stop",
    "response_format",
    "prompt_cache_key",
    "prompt_cache_options",
    "stream",
    "stream_options",
];

/// A vendor of the OpenAI-compatible chat-completions dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Profile {
    /// OpenAI (<https://platform.openai.com/docs/api-reference/chat>): `prompt_cache_key`
    /// is sent, `max_completion_tokens` names the output limit, reasoning is not replayed.
    OpenAi,
    /// DeepSeek (<https://api-docs.deepseek.com/api/create-chat-completion>): cache hits in
    /// `usage.prompt_cache_hit_tokens`, `reasoning_content` replayed on every assistant
    /// message (thinking mode, <https://api-docs.deepseek.com/guides/thinking_mode>), no
    /// images, `json_object` only.
    DeepSeek,
    /// Any other compatible server (llama.cpp `llama-server`, Ollama, vLLM): the key is
    /// optional and nothing vendor-specific is sent.
    Custom,
}

impl Profile {
    /// The provider name used in tracing (`gen_ai.system`): `openai`, `deepseek` or
    /// `openai_compatible`.
    pub fn name(self) -> &'static str {
        match self {
            Profile::OpenAi => "openai",
            Profile::DeepSeek => "deepseek",
            Profile::Custom => "openai_compatible",
        }
    }

    /// The environment variable holding the API key (`None` for [`Profile::Custom`]).
    pub fn api_key_var(self) -> Option<&'static str> {
        match self {
            Profile::OpenAi => Some("OPENAI_API_KEY"),
            Profile::DeepSeek => Some("DEEPSEEK_API_KEY"),
            Profile::Custom => None,
        }
    }

    /// The environment variable that overrides the base URL (`None` for [`Profile::Custom`]).
    pub fn base_url_var(self) -> Option<&'static str> {
        match self {
            Profile::OpenAi => Some("OPENAI_BASE_URL"),
            Profile::DeepSeek => Some("DEEPSEEK_BASE_URL"),
            Profile::Custom => None,
        }
    }

    /// The environment variable that overrides the model in the `*_from_env` constructors.
    pub fn model_var(self) -> Option<&'static str> {
        match self {
            Profile::OpenAi => Some("OPENAI_MODEL"),
            Profile::DeepSeek => Some("DEEPSEEK_MODEL"),
            Profile::Custom => None,
        }
    }

    /// The vendor's base URL (`None` for [`Profile::Custom`], which needs one).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Profile::OpenAi => Some(OPENAI_DEFAULT_BASE_URL),
            Profile::DeepSeek => Some(DEEPSEEK_DEFAULT_BASE_URL),
            Profile::Custom => None,
        }
    }

    /// The replay policy this profile starts with.
    pub fn default_reasoning_replay(self) -> ReasoningReplay {
        match self {
            Profile::DeepSeek => ReasoningReplay::EveryAssistantMessage,
            Profile::OpenAi | Profile::Custom => ReasoningReplay::Never,
        }
    }
}

/// Whether assistant messages carry `reasoning_content` when the history is sent back.
///
/// DeepSeek's rule changed over time (<https://api-docs.deepseek.com/guides/thinking_mode>,
/// <https://api-docs.deepseek.com/guides/reasoning_model>): R1 rejected replayed
/// reasoning, V3.2 needed it within a tool turn, V4 thinking mode needs it on every assistant
/// message. Make it per-model configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReasoningReplay {
    /// Never send `reasoning_content` (OpenAI; DeepSeek R1).
    Never,
    /// Send it on assistant messages that had reasoning, omit it elsewhere.
    WhenPresent,
    /// Send it on every assistant message: the reasoning text, or `""` where the turn had
    /// none (DeepSeek V4 thinking mode; also keeps the bytes stable for the cache).
    EveryAssistantMessage,
}

/// Builds an [`OpenAiCompatible`] adapter: the shared settings of [`HttpBuilder`] (key,
/// base URL, timeouts, retries, headers) and the chat-completions options below. Start from
/// [`OpenAiCompatible::openai`], [`OpenAiCompatible::deepseek`], [`OpenAiCompatible::custom`]
/// or [`OpenAiCompatible::builder`].
///
/// ```
/// use std::time::Duration;
/// use halo_adapters::openai::OpenAiCompatible;
///
/// let model = OpenAiCompatible::custom("http://127.0.0.1:8080/v1", "qwen2.5-7b")
///     .timeout(Duration::from_secs(120))
///     .max_retries(0)
///     .build()
///     .unwrap();
/// assert_eq!(halo_core::ModelAdapter::model_name(&model), "qwen2.5-7b");
/// ```
pub type OpenAiBuilder = HttpBuilder<ChatSettings>;

/// The chat-completions options of an [`OpenAiBuilder`], set through its methods.
#[derive(Debug, Clone)]
pub struct ChatSettings {
    profile: Profile,
    reasoning_replay: ReasoningReplay,
    prompt_cache_key: bool,
    prompt_cache: PromptCacheMode,
    min_cacheable_tokens: u64,
}

impl HttpBuilder<ChatSettings> {
    pub(crate) fn new(profile: Profile, model: String) -> Self {
        let http = HttpSettings::new(model, profile.default_base_url().map(str::to_string));
        HttpBuilder::with(
            http,
            ChatSettings {
                profile,
                reasoning_replay: profile.default_reasoning_replay(),
                prompt_cache_key: profile == Profile::OpenAi,
                prompt_cache: PromptCacheMode::Default,
                min_cacheable_tokens: MIN_CACHEABLE_TOKENS,
            },
        )
    }

    /// An extra top-level field of every request body, for vendor options the adapter does
    /// not model: DeepSeek `thinking` or `user_id`, llama.cpp `cache_prompt`,
    /// `parallel_tool_calls`. Fields the adapter writes itself are refused at
    /// [`build`](Self::build). Keep them constant within a session: they are part of what
    /// the provider sees on every call.
    pub fn body_field(mut self, name: impl Into<String>, value: Value) -> Self {
        self.http.body.insert(name.into(), value);
        self
    }

    /// The reasoning replay policy; default per profile
    /// ([`Profile::default_reasoning_replay`]).
    pub fn reasoning_replay(mut self, policy: ReasoningReplay) -> Self {
        self.dialect.reasoning_replay = policy;
        self
    }

    /// Whether to send `prompt_cache_key` (the request's session id, or else the prefix
    /// fingerprint); on by default for [`Profile::OpenAi`] only.
    pub fn prompt_cache_key(mut self, send: bool) -> Self {
        self.dialect.prompt_cache_key = send;
        self
    }

    /// GPT-5.6+ prompt caching: `prompt_cache_options` and the cache breakpoints of
    /// [`plan_breakpoints`](super::plan_breakpoints) (on the prefix's last message and the
    /// newest user or tool message, as a `text` part's `prompt_cache_breakpoint`); default
    /// [`PromptCacheMode::Default`] (nothing sent, the only mode for other servers). Writes
    /// cost 1.25× the input price and come back as `cache_write_tokens`.
    pub fn prompt_cache(mut self, mode: PromptCacheMode) -> Self {
        self.dialect.prompt_cache = mode;
        self
    }

    /// The prefix size, in tokens, from which the planner marks the prefix; default
    /// [`MIN_CACHEABLE_TOKENS`].
    pub fn min_cacheable_tokens(mut self, tokens: u64) -> Self {
        self.dialect.min_cacheable_tokens = tokens;
        self
    }

    /// Reads the profile's API key variable (required) and base-URL variable (optional)
    /// from the process environment: `OPENAI_API_KEY` / `OPENAI_BASE_URL` or
    /// `DEEPSEEK_API_KEY` / `DEEPSEEK_BASE_URL`. A [`Profile::Custom`] builder is returned
    /// unchanged.
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when the key variable is unset or empty.
    pub fn env(self) -> Result<Self, ConfigError> {
        self.env_from(|var| std::env::var(var).ok())
    }

    /// [`env`](Self::env) with the variables read through `lookup` (for tests and for
    /// configuration that lives elsewhere). Empty values count as unset.
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when the key variable is unset or empty.
    pub fn env_from(
        mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let profile = self.dialect.profile;
        self.http
            .read_env(&lookup, profile.api_key_var(), profile.base_url_var())?;
        Ok(self)
    }

    pub(crate) fn model_from_env(mut self, lookup: &impl Fn(&str) -> Option<String>) -> Self {
        if let Some(var) = self.dialect.profile.model_var() {
            self.http.read_model(lookup, var);
        }
        self
    }

    /// Builds the adapter.
    ///
    /// # Errors
    /// [`ConfigError`] for a missing key (OpenAI and DeepSeek profiles), a missing or invalid
    /// base URL, an API key or header that HTTP cannot carry, a reserved body field, or an
    /// HTTP client that cannot be built.
    pub fn build(self) -> Result<OpenAiCompatible, ConfigError> {
        let HttpBuilder { http, dialect } = self;
        let profile = dialect.profile;
        let raw_url = http.base_url.clone().ok_or(ConfigError::MissingBaseUrl)?;
        let endpoint = endpoint(&raw_url)?;
        let key = match (http.key(), profile.api_key_var()) {
            (None, Some(var)) => {
                return Err(ConfigError::MissingApiKey {
                    profile: profile.name(),
                    var,
                });
            }
            (Some(key), _) => Some(key_header(AUTHORIZATION, "Bearer ", key)?),
            _ => None,
        };
        let mut headers = extra_headers(&http.headers, &[])?;
        if let Some((name, value)) = key {
            // After the extra headers, as reqwest's `bearer_auth` appended it before.
            headers.append(name, value);
        }
        check_body_fields(&http.body, RESERVED_BODY_FIELDS)?;
        let body = http.body.clone();
        let transport = http.into_transport::<ChatCompletions>(profile.name(), headers)?;
        Ok(HttpAdapter {
            transport,
            dialect: ChatCompletions {
                profile,
                endpoint,
                body,
                reasoning_replay: dialect.reasoning_replay,
                prompt_cache_key: dialect.prompt_cache_key,
                prompt_cache: dialect.prompt_cache,
                min_cacheable_tokens: dialect.min_cacheable_tokens,
                body_len_hint: Default::default(),
                prefix_wire: Default::default(),
                histories: Default::default(),
            },
        })
    }
}

/// `{base}/chat/completions`, with one slash between.
///
/// # Errors
/// [`ConfigError::InvalidBaseUrl`] for a base URL [`api_url`] refuses, or one that
/// already ends in `/chat/completions`.
fn endpoint(base: &str) -> Result<reqwest::Url, ConfigError> {
    let trimmed = base.trim().trim_end_matches('/');
    let url = api_url(base, &format!("{trimmed}/chat/completions"))?;
    check_api_path(base, |path| {
        path.strip_suffix("/chat/completions").map(str::len)
    })?;
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_appends_chat_completions_once() {
        assert_eq!(
            endpoint("https://api.deepseek.com").unwrap().as_str(),
            "https://api.deepseek.com/chat/completions"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:8080/v1/").unwrap().as_str(),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert!(matches!(
            endpoint("ftp://x"),
            Err(ConfigError::InvalidBaseUrl { .. })
        ));
        assert!(matches!(
            endpoint("not a url"),
            Err(ConfigError::InvalidBaseUrl { .. })
        ));
    }
}
