//! The builder of [`AnthropicAdapter`](super::AnthropicAdapter): key, base URL, model,
//! default `max_tokens`, cache mode and beta flags, over the shared settings of
//! [`HttpBuilder`].

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::Value;

use super::cache::{CacheMode, CacheTtl, min_cacheable_tokens};
use super::{AnthropicAdapter, Messages};
use crate::transport::{
    ConfigError, HttpAdapter, HttpBuilder, HttpSettings, api_url, check_api_path,
    check_body_fields, extra_headers, key_header,
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

/// Builds an [`AnthropicAdapter`]: the shared settings of [`HttpBuilder`] (key, base URL,
/// timeouts, retries, headers) and the Messages options below. Start from
/// [`AnthropicAdapter::builder`].
///
/// The base URL gets `/v1/messages` appended, or only `/messages` when it already ends in
/// `/v1`; default [`ANTHROPIC_DEFAULT_BASE_URL`]. The key is sent as `x-api-key`;
/// `x-api-key`, `anthropic-version`, `content-type` and `accept` are refused as extra
/// headers (use [`beta`](Self::beta) for `anthropic-beta`).
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
pub type AnthropicBuilder = HttpBuilder<MessagesSettings>;

/// The Messages options of an [`AnthropicBuilder`], set through its methods.
#[derive(Debug, Clone)]
pub struct MessagesSettings {
    max_tokens: u32,
    cache_mode: CacheMode,
    min_cacheable_tokens: Option<u64>,
    betas: Vec<String>,
}

impl HttpBuilder<MessagesSettings> {
    pub(crate) fn new(model: String) -> Self {
        HttpBuilder::with(
            HttpSettings::new(model, Some(ANTHROPIC_DEFAULT_BASE_URL.to_string())),
            MessagesSettings {
                max_tokens: DEFAULT_MAX_TOKENS,
                cache_mode: CacheMode::default(),
                min_cacheable_tokens: None,
                betas: Vec::new(),
            },
        )
    }

    /// `max_tokens` for requests whose options leave it unset; default
    /// [`DEFAULT_MAX_TOKENS`].
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.dialect.max_tokens = n;
        self
    }

    /// How the prompt cache is asked for; default [`CacheMode::Breakpoints`] with 5-minute
    /// TTLs.
    pub fn cache_mode(mut self, mode: CacheMode) -> Self {
        self.dialect.cache_mode = mode;
        self
    }

    /// Overrides the model's minimum cacheable length in tokens (the per-model table,
    /// [`MIN_CACHEABLE_TOKENS`](super::MIN_CACHEABLE_TOKENS), goes stale as models change).
    pub fn min_cacheable_tokens(mut self, tokens: u64) -> Self {
        self.dialect.min_cacheable_tokens = Some(tokens);
        self
    }

    /// A beta feature flag, joined with the others into one `anthropic-beta` header.
    pub fn beta(mut self, flag: impl Into<String>) -> Self {
        self.dialect.betas.push(flag.into());
        self
    }

    /// An extra top-level field of every request body, for options the adapter does not
    /// model: `thinking` (`{"type": "enabled", "budget_tokens": 2048}`), `metadata`,
    /// `top_k`, `service_tier`. Fields the adapter writes itself are refused at
    /// [`build`](Self::build). Keep them constant within a session: changing `thinking`
    /// invalidates the cached messages.
    pub fn body_field(mut self, name: impl Into<String>, value: Value) -> Self {
        self.http.body.insert(name.into(), value);
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
        self.http
            .read_env(&lookup, Some(API_KEY_VAR), Some(BASE_URL_VAR))?;
        Ok(self)
    }

    pub(crate) fn model_from_env(mut self, lookup: &impl Fn(&str) -> Option<String>) -> Self {
        self.http.read_model(lookup, MODEL_VAR);
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
        let HttpBuilder { http, dialect } = self;
        let base_url = http.base_url.clone().unwrap_or_default();
        let endpoint = endpoint(&base_url)?;
        let key = http.key().ok_or(ConfigError::MissingApiKey {
            profile: "anthropic",
            var: API_KEY_VAR,
        })?;
        let (key_name, key_value) = key_header(HeaderName::from_static("x-api-key"), "", key)?;

        let mut headers = extra_headers(&http.headers, RESERVED_HEADERS)?;
        headers.insert(key_name, key_value);
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        let mut betas = dialect.betas;
        let uses_one_hour = match dialect.cache_mode {
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

        check_body_fields(&http.body, RESERVED_BODY_FIELDS)?;
        let body = http.body.clone();
        let min_cacheable_tokens = dialect
            .min_cacheable_tokens
            .unwrap_or_else(|| min_cacheable_tokens(&http.model));
        let transport = http.into_transport::<Messages>(super::PROVIDER, headers)?;
        Ok(HttpAdapter {
            transport,
            dialect: Messages {
                endpoint,
                body,
                max_tokens: dialect.max_tokens,
                cache_mode: dialect.cache_mode,
                min_cacheable_tokens,
            },
        })
    }
}

/// `{base}/v1/messages` (or `{base}/messages` when the base already ends in `/v1`).
///
/// # Errors
/// [`ConfigError::InvalidBaseUrl`] for a base URL [`api_url`] refuses, or one that
/// already ends in `/v1/messages`.
fn endpoint(base: &str) -> Result<reqwest::Url, ConfigError> {
    let trimmed = base.trim().trim_end_matches('/');
    let joined = if trimmed.ends_with("/v1") {
        format!("{trimmed}/messages")
    } else {
        format!("{trimmed}/v1/messages")
    };
    let url = api_url(base, &joined)?;
    check_api_path(base, |path| path.strip_suffix("/v1/messages").map(str::len))?;
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
