//! The builder of [`ResponsesAdapter`](super::ResponsesAdapter): the Responses options over
//! the shared settings of [`HttpBuilder`].

use std::sync::{Arc, Mutex};

use reqwest::header::AUTHORIZATION;
use serde_json::Value;

use super::{Responses, ResponsesAdapter};
use crate::openai::PromptCacheMode;
use crate::openai::cache::MIN_CACHEABLE_TOKENS;
use crate::transport::{
    ConfigError, HttpAdapter, HttpBuilder, HttpSettings, api_url, check_api_path,
    check_body_fields, extra_headers, key_header,
};

/// OpenAI's API base URL; requests go to `{base}/responses`.
pub const RESPONSES_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model [`ResponsesAdapter::from_env`] uses when `OPENAI_MODEL` is not set.
pub const RESPONSES_DEFAULT_MODEL: &str = "gpt-5-mini";
/// The API key variable [`ResponsesAdapter::from_env`] reads.
pub const API_KEY_VAR: &str = "OPENAI_API_KEY";
/// The base-URL variable [`ResponsesAdapter::from_env`] reads.
pub const BASE_URL_VAR: &str = "OPENAI_BASE_URL";
/// The model variable [`ResponsesAdapter::from_env`] reads.
pub const MODEL_VAR: &str = "OPENAI_MODEL";

/// Body fields the adapter writes itself; [`ResponsesBuilder::body_field`] refuses them.
/// `reasoning` is not among them: a `reasoning` object given here is sent as it is, in
/// place of the one [`GenerationOptions::reasoning`](halo_core::GenerationOptions) makes.
const RESERVED_BODY_FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "text",
    "max_output_tokens",
    "temperature",
    "store",
    "include",
    "prompt_cache_key",
    "prompt_cache_options",
    "previous_response_id",
    "stream",
];

/// Builds a [`ResponsesAdapter`]: the shared settings of [`HttpBuilder`] (key, base URL,
/// timeouts, retries, headers) and the Responses options below. Start from
/// [`ResponsesAdapter::builder`].
///
/// The base URL gets `/responses` appended (default [`RESPONSES_DEFAULT_BASE_URL`]); one
/// that already ends in `/responses` is refused. The key is sent as `Authorization: Bearer`.
///
/// ```
/// use halo_adapters::openai::PromptCacheMode;
/// use halo_adapters::responses::ResponsesAdapter;
///
/// let model = ResponsesAdapter::builder("gpt-5.6")
///     .api_key("sk-test")
///     .base_url("http://127.0.0.1:8080/v1")
///     .prompt_cache(PromptCacheMode::Explicit)
///     .build()
///     .unwrap();
/// assert_eq!(model.endpoint(), "http://127.0.0.1:8080/v1/responses");
/// ```
pub type ResponsesBuilder = HttpBuilder<ResponsesSettings>;

/// The Responses options of a [`ResponsesBuilder`], set through its methods.
#[derive(Debug, Clone)]
pub struct ResponsesSettings {
    encrypted_reasoning: bool,
    reasoning_summary: Option<String>,
    prompt_cache_key: bool,
    prompt_cache: PromptCacheMode,
    min_cacheable_tokens: u64,
    previous_response_id: bool,
}

impl HttpBuilder<ResponsesSettings> {
    pub(crate) fn new(model: String) -> Self {
        HttpBuilder::with(
            HttpSettings::new(model, Some(RESPONSES_DEFAULT_BASE_URL.to_string())),
            ResponsesSettings {
                encrypted_reasoning: true,
                reasoning_summary: None,
                prompt_cache_key: true,
                prompt_cache: PromptCacheMode::Default,
                min_cacheable_tokens: MIN_CACHEABLE_TOKENS,
                previous_response_id: false,
            },
        )
    }

    /// Whether requests are stateless (`store: false`) and ask for reasoning items with
    /// their `encrypted_content` (`include: ["reasoning.encrypted_content"]`), which the
    /// adapter replays verbatim on later turns; on by default. Off, nothing of reasoning is
    /// asked for (a server that does not know `include` accepts the request).
    pub fn encrypted_reasoning(mut self, on: bool) -> Self {
        self.dialect.encrypted_reasoning = on;
        self
    }

    /// `reasoning.summary` (`auto`, `concise` or `detailed`): ask for reasoning summaries,
    /// which stream as reasoning deltas. Not sent by default.
    pub fn reasoning_summary(mut self, summary: impl Into<String>) -> Self {
        self.dialect.reasoning_summary = Some(summary.into());
        self
    }

    /// Whether to send `prompt_cache_key` (the request's session id, else the prefix
    /// fingerprint); on by default.
    pub fn prompt_cache_key(mut self, send: bool) -> Self {
        self.dialect.prompt_cache_key = send;
        self
    }

    /// GPT-5.6+ prompt caching: `prompt_cache_options` and the breakpoints of
    /// [`plan_breakpoints`](crate::openai::plan_breakpoints); default
    /// [`PromptCacheMode::Default`] (nothing sent).
    pub fn prompt_cache(mut self, mode: PromptCacheMode) -> Self {
        self.dialect.prompt_cache = mode;
        self
    }

    /// The prefix size, in tokens, from which the planner marks the prefix; default
    /// [`MIN_CACHEABLE_TOKENS`](crate::openai::MIN_CACHEABLE_TOKENS).
    pub fn min_cacheable_tokens(mut self, tokens: u64) -> Self {
        self.dialect.min_cacheable_tokens = tokens;
        self
    }

    /// Whether to chain requests with `previous_response_id` (and `store: true`): a
    /// request whose history extends the one the last response answered sends only the
    /// new items. Off by default: stateless replay keeps a run a value that any process
    /// can continue, while a chained one depends on what the server stored. An adapter
    /// chains one conversation at a time.
    pub fn previous_response_id(mut self, on: bool) -> Self {
        self.dialect.previous_response_id = on;
        self
    }

    /// An extra top-level field of every request body, for options the adapter does not
    /// model: `reasoning` (`{"effort": "high", "summary": "auto"}`, sent instead of the one
    /// [`GenerationOptions::reasoning`](halo_core::GenerationOptions) makes),
    /// `service_tier`, `safety_identifier`, `parallel_tool_calls`, `truncation`. Fields the
    /// adapter writes itself are refused at [`build`](Self::build).
    pub fn body_field(mut self, name: impl Into<String>, value: Value) -> Self {
        self.http.body.insert(name.into(), value);
        self
    }

    /// Reads `OPENAI_API_KEY` (required) and `OPENAI_BASE_URL` (optional) from the process
    /// environment.
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `OPENAI_API_KEY` is unset or empty.
    pub fn env(self) -> Result<Self, ConfigError> {
        self.env_from(|var| std::env::var(var).ok())
    }

    /// [`env`](Self::env) with the variables read through `lookup`. Empty values count as
    /// unset.
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `OPENAI_API_KEY` is unset or empty.
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
    /// [`ConfigError`] for a missing key, an invalid base URL, a key or header that HTTP
    /// cannot carry, a reserved body field, or an HTTP client that cannot be built.
    pub fn build(self) -> Result<ResponsesAdapter, ConfigError> {
        let HttpBuilder { http, dialect } = self;
        let base_url = http.base_url.clone().unwrap_or_default();
        let endpoint = endpoint(&base_url)?;
        let key = http.key().ok_or(ConfigError::MissingApiKey {
            profile: "openai",
            var: API_KEY_VAR,
        })?;
        let (name, value) = key_header(AUTHORIZATION, "Bearer ", key)?;
        let mut headers = extra_headers(&http.headers, &[])?;
        headers.append(name, value);
        check_body_fields(&http.body, RESERVED_BODY_FIELDS)?;
        let body = http.body.clone();
        let transport = http.into_transport::<Responses>("openai", headers)?;
        Ok(HttpAdapter {
            transport,
            dialect: Responses {
                endpoint,
                body,
                encrypted_reasoning: dialect.encrypted_reasoning,
                reasoning_summary: dialect.reasoning_summary,
                prompt_cache_key: dialect.prompt_cache_key,
                prompt_cache: dialect.prompt_cache,
                min_cacheable_tokens: dialect.min_cacheable_tokens,
                previous_response_id: dialect.previous_response_id,
                chain: Arc::new(Mutex::new(super::Chain::default())),
            },
        })
    }
}

/// `{base}/responses`, with one slash between.
///
/// # Errors
/// [`ConfigError::InvalidBaseUrl`] for a base URL [`api_url`] refuses, or one that already
/// ends in `/responses`.
fn endpoint(base: &str) -> Result<reqwest::Url, ConfigError> {
    let trimmed = base.trim().trim_end_matches('/');
    let url = api_url(base, &format!("{trimmed}/responses"))?;
    check_api_path(base, |path| path.strip_suffix("/responses").map(str::len))?;
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_appends_responses_once() {
        assert_eq!(
            endpoint("https://api.openai.com/v1").unwrap().as_str(),
            "https://api.openai.com/v1/responses"
        );
        assert!(matches!(
            endpoint("http://127.0.0.1:8080/v1/responses"),
            Err(ConfigError::InvalidBaseUrl { .. })
        ));
    }
}
