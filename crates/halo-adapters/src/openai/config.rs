//! Profiles, the builder of [`OpenAiCompatible`](super::OpenAiCompatible) and its
//! configuration errors.
//!
//! A [`Profile`] holds what differs between vendors of the one OpenAI-compatible dialect:
//! the default base URL, the environment variables, whether `prompt_cache_key` is sent,
//! how `reasoning_content` is replayed and which `max_tokens` field name is used.

use std::fmt;
use std::time::Duration;

use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};

use super::OpenAiCompatible;
use crate::http;

/// OpenAI's API base URL (<https://platform.openai.com/docs/api-reference>).
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model [`OpenAiCompatible::openai_from_env`] uses when `OPENAI_MODEL` is not set.
pub const OPENAI_DEFAULT_MODEL: &str = "gpt-4o-mini";
/// DeepSeek's API base URL (<https://api-docs.deepseek.com/>).
pub const DEEPSEEK_DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
/// The model [`OpenAiCompatible::deepseek_from_env`] uses when `DEEPSEEK_MODEL` is not set.
pub const DEEPSEEK_DEFAULT_MODEL: &str = "deepseek-chat";
/// Retries after the first attempt, by default.
pub const DEFAULT_MAX_RETRIES: u32 = 2;
/// The whole-request timeout by default: 600 s (10 minutes), because DeepSeek may keep a
/// request queued that long before inference starts
/// (<https://api-docs.deepseek.com/quick_start/rate_limit>).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// The connect timeout by default: 30 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The first backoff delay by default: 1 s; it doubles on each retry (with jitter) up to
/// [`MAX_RETRY_DELAY`].
pub const DEFAULT_RETRY_MIN_DELAY: Duration = Duration::from_secs(1);
/// The longest single wait between attempts, `retry-after` included: 60 s (the cap OpenAI's
/// SDKs use). A provider asking for longer is not retried: its error is returned at once.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

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

/// Why an adapter could not be configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required environment variable is unset or empty.
    #[error("environment variable {var} is not set; export it (for example `export {var}=...`)")]
    MissingEnv {
        /// The variable's name.
        var: &'static str,
    },
    /// The profile needs an API key and none was given.
    #[error("the {profile} profile needs an API key; pass it with `.api_key(..)` or set {var}")]
    MissingApiKey {
        /// The profile's name.
        profile: &'static str,
        /// The environment variable that would hold it.
        var: &'static str,
    },
    /// A custom server was configured without a base URL.
    #[error("no base URL was given; pass the server's URL, such as `http://127.0.0.1:8080/v1`")]
    MissingBaseUrl,
    /// The API key cannot go into an HTTP header (it has control characters, a newline).
    #[error(
        "the API key contains characters not allowed in an HTTP header; check for stray newlines"
    )]
    InvalidApiKey,
    /// The base URL does not parse or is not http(s).
    #[error("invalid base URL `{url}`: {reason}")]
    InvalidBaseUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An extra header has an invalid name or value (the value is not shown: it may be secret).
    #[error("invalid extra header `{name}`: the name or the value is not allowed in HTTP")]
    InvalidHeader {
        /// The header's name as given.
        name: String,
    },
    /// An extra body field would overwrite a field the adapter writes.
    #[error(
        "extra body field `{0}` is written by the adapter itself; use the matching option instead"
    )]
    ReservedBodyField(String),
    /// The HTTP client could not be built (TLS backend failure).
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// Builds an [`OpenAiCompatible`] adapter. Start from [`OpenAiCompatible::openai`],
/// [`OpenAiCompatible::deepseek`], [`OpenAiCompatible::custom`] or
/// [`OpenAiCompatible::builder`].
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
#[must_use]
pub struct OpenAiBuilder {
    profile: Profile,
    model: String,
    base_url: Option<String>,
    api_key: Option<SecretString>,
    timeout: Duration,
    connect_timeout: Duration,
    max_retries: u32,
    retry_min_delay: Duration,
    headers: Vec<(String, SecretString)>,
    body: Map<String, Value>,
    reasoning_replay: ReasoningReplay,
    prompt_cache_key: bool,
    provider_name: Option<String>,
    first_event_timeout: Option<Duration>,
}

impl fmt::Debug for OpenAiBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiBuilder")
            .field("profile", &self.profile)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl OpenAiBuilder {
    pub(crate) fn new(profile: Profile, model: String) -> Self {
        OpenAiBuilder {
            profile,
            model,
            base_url: profile.default_base_url().map(str::to_string),
            api_key: None,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_min_delay: DEFAULT_RETRY_MIN_DELAY,
            headers: Vec::new(),
            body: Map::new(),
            reasoning_replay: profile.default_reasoning_replay(),
            prompt_cache_key: profile == Profile::OpenAi,
            provider_name: None,
            first_event_timeout: None,
        }
    }

    /// The base URL requests go to; `/chat/completions` is appended (so give
    /// `http://127.0.0.1:8080/v1` for llama.cpp, `http://127.0.0.1:11434/v1` for Ollama).
    /// A base URL that already ends in `/chat/completions` is refused at
    /// [`build`](Self::build).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// The API key, sent as `Authorization: Bearer <key>`. It is kept in a
    /// [`SecretString`]: never printed by `Debug`, logged, or put in an error.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        let key: String = key.into();
        self.api_key = Some(SecretString::from(key.trim().to_string()));
        self
    }

    /// The model id, sent as `model` (opaque configuration: no list is checked).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The whole-request timeout; default [`DEFAULT_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Streaming only: the longest wait from the response headers to the stream's first
    /// event (its first `data:`), which keep-alive comments do not extend. DeepSeek keeps a
    /// queued request open with `: keep-alive` lines for up to 10 minutes
    /// (<https://api-docs.deepseek.com/quick_start/rate_limit>); this bounds that wait
    /// separately from
    /// [`timeout`](Self::timeout). Default: none (only the whole-request timeout applies).
    /// When it expires the stream ends with [`ModelError::Transport`](halo_core::ModelError),
    /// which is retryable, without being retried inside the call.
    pub fn first_event_timeout(mut self, timeout: Duration) -> Self {
        self.first_event_timeout = Some(timeout);
        self
    }

    /// The connect timeout; default [`DEFAULT_CONNECT_TIMEOUT`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Retries after the first attempt for retryable errors (429, 5xx, transport);
    /// default [`DEFAULT_MAX_RETRIES`]; `0` disables retrying.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// The first backoff delay when the provider gives no `retry-after`; it doubles per
    /// retry (with jitter) up to [`MAX_RETRY_DELAY`]. Default [`DEFAULT_RETRY_MIN_DELAY`].
    pub fn retry_min_delay(mut self, delay: Duration) -> Self {
        self.retry_min_delay = delay;
        self
    }

    /// An extra HTTP header on every request (an `OpenAI-Organization`, a gateway key).
    /// The value is treated as secret: `Debug` and errors show only the name.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let value: String = value.into();
        self.headers.push((name.into(), SecretString::from(value)));
        self
    }

    /// An extra top-level field of every request body, for vendor options the adapter does
    /// not model: DeepSeek `thinking` or `user_id`, llama.cpp `cache_prompt`,
    /// `parallel_tool_calls`. Fields the adapter writes itself are refused at
    /// [`build`](Self::build). Keep them constant within a session: they are part of what
    /// the provider sees on every call.
    pub fn body_field(mut self, name: impl Into<String>, value: Value) -> Self {
        self.body.insert(name.into(), value);
        self
    }

    /// The reasoning replay policy; default per profile
    /// ([`Profile::default_reasoning_replay`]).
    pub fn reasoning_replay(mut self, policy: ReasoningReplay) -> Self {
        self.reasoning_replay = policy;
        self
    }

    /// Whether to send `prompt_cache_key` (the request's session id, or else the prefix
    /// fingerprint); on by default for [`Profile::OpenAi`] only.
    pub fn prompt_cache_key(mut self, send: bool) -> Self {
        self.prompt_cache_key = send;
        self
    }

    /// The provider name for tracing; default [`Profile::name`].
    pub fn provider_name(mut self, name: impl Into<String>) -> Self {
        self.provider_name = Some(name.into());
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
        let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        if let Some(var) = self.profile.api_key_var() {
            let key = get(var).ok_or(ConfigError::MissingEnv { var })?;
            self = self.api_key(key);
        }
        if let Some(url) = self.profile.base_url_var().and_then(get) {
            self.base_url = Some(url.trim().to_string());
        }
        Ok(self)
    }

    pub(crate) fn model_from_env(mut self, lookup: &impl Fn(&str) -> Option<String>) -> Self {
        if let Some(model) = self
            .profile
            .model_var()
            .and_then(lookup)
            .filter(|m| !m.trim().is_empty())
        {
            self.model = model.trim().to_string();
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
        let raw_url = self.base_url.ok_or(ConfigError::MissingBaseUrl)?;
        let endpoint = endpoint(&raw_url)?;

        let api_key = self.api_key.filter(|k| !k.expose_secret().is_empty());
        match (&api_key, self.profile.api_key_var()) {
            (None, Some(var)) => {
                return Err(ConfigError::MissingApiKey {
                    profile: self.profile.name(),
                    var,
                });
            }
            (Some(key), _) => {
                HeaderValue::from_str(&format!("Bearer {}", key.expose_secret()))
                    .map_err(|_| ConfigError::InvalidApiKey)?;
            }
            _ => {}
        }

        let headers = http::extra_headers(&self.headers, &[])?;
        http::check_body_fields(&self.body, RESERVED_BODY_FIELDS)?;
        let client = http::client(self.timeout, self.connect_timeout)?;

        Ok(OpenAiCompatible {
            provider: self
                .provider_name
                .unwrap_or_else(|| self.profile.name().to_string()),
            profile: self.profile,
            model: self.model,
            endpoint,
            api_key,
            headers,
            body: self.body,
            client,
            timeout: self.timeout,
            max_retries: self.max_retries,
            retry_min_delay: self.retry_min_delay,
            reasoning_replay: self.reasoning_replay,
            prompt_cache_key: self.prompt_cache_key,
            first_event_timeout: self.first_event_timeout,
            body_len_hint: Default::default(),
            prefix_wire: Default::default(),
            histories: Default::default(),
        })
    }
}

/// `{base}/chat/completions`, with one slash between.
///
/// # Errors
/// [`ConfigError::InvalidBaseUrl`] for a base URL [`http::api_url`] refuses, or one that
/// already ends in `/chat/completions`.
fn endpoint(base: &str) -> Result<reqwest::Url, ConfigError> {
    let trimmed = base.trim().trim_end_matches('/');
    let url = http::api_url(base, &format!("{trimmed}/chat/completions"))?;
    http::check_api_path(base, |path| {
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
