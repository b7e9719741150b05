//! The builder of [`AnthropicAdapter`](super::AnthropicAdapter): key, base URL, model,
//! default `max_tokens`, cache mode, timeouts and retries.

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};

use super::AnthropicAdapter;
use super::cache::{CacheMode, CacheTtl, min_cacheable_tokens};
use crate::http;
use crate::openai::{
    ConfigError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_RETRY_MIN_DELAY,
    DEFAULT_TIMEOUT,
};

/// Anthropic's API base URL; requests go to `{base}/v1/messages`.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The model [`AnthropicAdapter::from_env`] uses when `ANTHROPIC_MODEL` is not set.
pub const ANTHROPIC_DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// The `anthropic-version` header every request carries
/// (<https://platform.claude.com/docs/en/api/versioning>).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` when [`GenerationOptions::max_tokens`](halo_core::GenerationOptions) is
/// unset: Anthropic requires the field.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The `anthropic-beta` value sent when a breakpoint uses the one-hour TTL. The TTL was
/// introduced behind this flag; the API keeps accepting it now that the TTL is generally
/// available.
pub const EXTENDED_CACHE_TTL_BETA: &str = "extended-cache-ttl-2025-04-11";

/// The API key variable [`AnthropicAdapter::from_env`] reads.
pub const API_KEY_VAR: &str = "ANTHROPIC_API_KEY";
/// The base-URL variable [`AnthropicAdapter::from_env`] reads.
pub const BASE_URL_VAR: &str = "ANTHROPIC_BASE_URL";
/// The model variable [`AnthropicAdapter::from_env`] reads.
pub const MODEL_VAR: &str = "ANTHROPIC_MODEL";

/// Body fields the adapter writes itself; [`AnthropicBuilder::body_field`] refuses them.
const RESERVED_BODY_FIELDS: &[&str] = &[
    "model",
    "max_tokens",
    "system",
    "messages",
    "tools",
    "tool_choice",
    "temperature",
    "stop_sequences",
    "output_config",
    "cache_control",
    "stream",
];

/// Headers the adapter writes itself; [`AnthropicBuilder::header`] refuses them.
const RESERVED_HEADERS: &[&str] = &["x-api-key", "anthropic-version", "content-type", "accept"];

/// Builds an [`AnthropicAdapter`]. Start from [`AnthropicAdapter::builder`].
///
/// ```
/// use std::time::Duration;
/// use halo_adapters::anthropic::{AnthropicAdapter, CacheMode, CacheTtl};
///
/// let model = AnthropicAdapter::builder("claude-sonnet-4-5")
///     .api_key("sk-ant-test")
///     .base_url("http://127.0.0.1:8080")
///     .cache_mode(CacheMode::Breakpoints {
///         prefix_ttl: CacheTtl::OneHour,
///         history_ttl: CacheTtl::FiveMinutes,
///     })
///     .max_tokens(1024)
///     .timeout(Duration::from_secs(120))
///     .build()
///     .unwrap();
/// assert_eq!(model.endpoint(), "http://127.0.0.1:8080/v1/messages");
/// assert_eq!(model.min_cacheable_tokens(), 1024);
/// ```
#[must_use]
pub struct AnthropicBuilder {
    model: String,
    base_url: String,
    api_key: Option<SecretString>,
    max_tokens: u32,
    cache_mode: CacheMode,
    min_cacheable_tokens: Option<u64>,
    timeout: Duration,
    connect_timeout: Duration,
    max_retries: u32,
    retry_min_delay: Duration,
    headers: Vec<(String, SecretString)>,
    betas: Vec<String>,
    body: Map<String, Value>,
}

impl fmt::Debug for AnthropicBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicBuilder")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("max_tokens", &self.max_tokens)
            .field("cache_mode", &self.cache_mode)
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl AnthropicBuilder {
    pub(crate) fn new(model: String) -> Self {
        AnthropicBuilder {
            model,
            base_url: ANTHROPIC_DEFAULT_BASE_URL.to_string(),
            api_key: None,
            max_tokens: DEFAULT_MAX_TOKENS,
            cache_mode: CacheMode::default(),
            min_cacheable_tokens: None,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_min_delay: DEFAULT_RETRY_MIN_DELAY,
            headers: Vec::new(),
            betas: Vec::new(),
            body: Map::new(),
        }
    }

    /// The API key, sent as `x-api-key`. It is kept in a [`SecretString`]: never printed by
    /// `Debug`, logged, or put in an error.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        let key: String = key.into();
        self.api_key = Some(SecretString::from(key.trim().to_string()));
        self
    }

    /// The base URL (proxies, gateways, test fakes); `/v1/messages` is appended, or only
    /// `/messages` when the URL already ends in `/v1`. Default [`ANTHROPIC_DEFAULT_BASE_URL`].
    /// A base URL that already ends in `/v1/messages` is refused at [`build`](Self::build).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The model id, sent as `model` (opaque: no list is checked). It also picks the
    /// minimum cacheable length ([`min_cacheable_tokens`]).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// `max_tokens` for requests whose options leave it unset; default
    /// [`DEFAULT_MAX_TOKENS`].
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }

    /// How the prompt cache is asked for; default [`CacheMode::Breakpoints`] with 5-minute
    /// TTLs.
    pub fn cache_mode(mut self, mode: CacheMode) -> Self {
        self.cache_mode = mode;
        self
    }

    /// Overrides the model's minimum cacheable length in tokens (the per-model table,
    /// [`MIN_CACHEABLE_TOKENS`](super::MIN_CACHEABLE_TOKENS), goes stale as models change).
    pub fn min_cacheable_tokens(mut self, tokens: u64) -> Self {
        self.min_cacheable_tokens = Some(tokens);
        self
    }

    /// The whole-request timeout; default [`DEFAULT_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The connect timeout; default [`DEFAULT_CONNECT_TIMEOUT`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Retries after the first attempt for retryable errors (429, 5xx including 529,
    /// transport); default [`DEFAULT_MAX_RETRIES`]; `0` disables retrying.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// The first backoff delay when the provider gives no `retry-after`; it doubles per
    /// retry (with jitter) up to [`MAX_RETRY_DELAY`](crate::openai::MAX_RETRY_DELAY).
    /// Default [`DEFAULT_RETRY_MIN_DELAY`].
    pub fn retry_min_delay(mut self, delay: Duration) -> Self {
        self.retry_min_delay = delay;
        self
    }

    /// An extra HTTP header on every request (a gateway key). The value is treated as
    /// secret: `Debug` and errors show only the name. `x-api-key`, `anthropic-version`,
    /// `content-type` and `accept` are refused at [`build`](Self::build); use
    /// [`beta`](Self::beta) for `anthropic-beta`.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let value: String = value.into();
        self.headers.push((name.into(), SecretString::from(value)));
        self
    }

    /// A beta feature flag, joined with the others into one `anthropic-beta` header.
    pub fn beta(mut self, flag: impl Into<String>) -> Self {
        self.betas.push(flag.into());
        self
    }

    /// An extra top-level field of every request body, for options the adapter does not
    /// model: `thinking` (`{"type": "enabled", "budget_tokens": 2048}`), `metadata`,
    /// `top_k`, `service_tier`. Fields the adapter writes itself are refused at
    /// [`build`](Self::build). Keep them constant within a session: changing `thinking`
    /// invalidates the cached messages.
    pub fn body_field(mut self, name: impl Into<String>, value: Value) -> Self {
        self.body.insert(name.into(), value);
        self
    }

    /// Reads `ANTHROPIC_API_KEY` (required) and `ANTHROPIC_BASE_URL` (optional) from the
    /// process environment.
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `ANTHROPIC_API_KEY` is unset or empty.
    pub fn env(self) -> Result<Self, ConfigError> {
        self.env_from(|var| std::env::var(var).ok())
    }

    /// [`env`](Self::env) with the variables read through `lookup`. Empty values count as
    /// unset.
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `ANTHROPIC_API_KEY` is unset or empty.
    pub fn env_from(
        mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        let key = get(API_KEY_VAR).ok_or(ConfigError::MissingEnv { var: API_KEY_VAR })?;
        self = self.api_key(key);
        if let Some(url) = get(BASE_URL_VAR) {
            self.base_url = url.trim().to_string();
        }
        Ok(self)
    }

    pub(crate) fn model_from_env(mut self, lookup: &impl Fn(&str) -> Option<String>) -> Self {
        if let Some(model) = lookup(MODEL_VAR).filter(|m| !m.trim().is_empty()) {
            self.model = model.trim().to_string();
        }
        self
    }

    /// Builds the adapter.
    ///
    /// # Errors
    /// [`ConfigError::MissingApiKey`] without a key; [`ConfigError::InvalidBaseUrl`],
    /// [`ConfigError::InvalidApiKey`], [`ConfigError::InvalidHeader`] (also for a reserved
    /// header name), [`ConfigError::ReservedBodyField`], or [`ConfigError::Client`] when the
    /// HTTP client cannot be built.
    pub fn build(self) -> Result<AnthropicAdapter, ConfigError> {
        let endpoint = endpoint(&self.base_url)?;
        let api_key = self
            .api_key
            .filter(|k| !k.expose_secret().is_empty())
            .ok_or(ConfigError::MissingApiKey {
                profile: "anthropic",
                var: API_KEY_VAR,
            })?;
        HeaderValue::from_str(api_key.expose_secret()).map_err(|_| ConfigError::InvalidApiKey)?;

        let mut headers = http::extra_headers(&self.headers, RESERVED_HEADERS)?;
        let mut betas = self.betas;
        let uses_one_hour = match self.cache_mode {
            CacheMode::Breakpoints {
                prefix_ttl,
                history_ttl,
            } => prefix_ttl == CacheTtl::OneHour || history_ttl == CacheTtl::OneHour,
            CacheMode::Automatic { ttl } => ttl == CacheTtl::OneHour,
            CacheMode::Off => false,
        };
        if uses_one_hour && !betas.iter().any(|b| b == EXTENDED_CACHE_TTL_BETA) {
            betas.push(EXTENDED_CACHE_TTL_BETA.to_string());
        }
        if !betas.is_empty() {
            let value = HeaderValue::from_str(&betas.join(",")).map_err(|_| {
                ConfigError::InvalidHeader {
                    name: "anthropic-beta".into(),
                }
            })?;
            headers.insert(HeaderName::from_static("anthropic-beta"), value);
        }

        http::check_body_fields(&self.body, RESERVED_BODY_FIELDS)?;
        let client = http::client(self.timeout, self.connect_timeout)?;

        Ok(AnthropicAdapter {
            min_cacheable_tokens: self
                .min_cacheable_tokens
                .unwrap_or_else(|| min_cacheable_tokens(&self.model)),
            model: self.model,
            endpoint,
            api_key,
            headers,
            body: self.body,
            client,
            timeout: self.timeout,
            max_retries: self.max_retries,
            retry_min_delay: self.retry_min_delay,
            max_tokens: self.max_tokens,
            cache_mode: self.cache_mode,
        })
    }
}

/// `{base}/v1/messages` (or `{base}/messages` when the base already ends in `/v1`).
///
/// # Errors
/// [`ConfigError::InvalidBaseUrl`] for a base URL [`http::api_url`] refuses, or one that
/// already ends in `/v1/messages`.
fn endpoint(base: &str) -> Result<reqwest::Url, ConfigError> {
    let trimmed = base.trim().trim_end_matches('/');
    let joined = if trimmed.ends_with("/v1") {
        format!("{trimmed}/messages")
    } else {
        format!("{trimmed}/v1/messages")
    };
    let url = http::api_url(base, &joined)?;
    http::check_api_path(base, |path| path.strip_suffix("/v1/messages").map(str::len))?;
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_appends_v1_messages_once() {
        assert_eq!(
            endpoint("https://api.anthropic.com").unwrap().as_str(),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:4000/v1/").unwrap().as_str(),
            "http://127.0.0.1:4000/v1/messages"
        );
        assert!(matches!(
            endpoint("ftp://x"),
            Err(ConfigError::InvalidBaseUrl { .. })
        ));
        assert!(matches!(
            endpoint("http://x?a=1"),
            Err(ConfigError::InvalidBaseUrl { .. })
        ));
    }
}
