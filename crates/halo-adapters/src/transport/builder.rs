//! [`HttpBuilder`]: the builder of every HTTP adapter. The settings every provider shares
//! (model, base URL, key, timeouts, retries, extra headers, provider name) are set here
//! once; each dialect adds its own options (`S`: [`ChatSettings`](crate::openai::ChatSettings),
//! [`MessagesSettings`](crate::anthropic::MessagesSettings),
//! [`GeminiSettings`](crate::gemini::GeminiSettings)) and its `build`, which checks the
//! base URL against its API path and says how the key is sent.

use std::fmt;
use std::time::Duration;

use reqwest::header::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};

use super::config::{
    ConfigError, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_RETRY_MIN_DELAY,
    DEFAULT_TIMEOUT, client,
};
use super::{Dialect, Transport};

/// Builds an HTTP adapter: the shared settings below, and the dialect's own options
/// (`S`), set by the methods of the dialect's builder type ([`OpenAiBuilder`](crate::openai::OpenAiBuilder),
/// [`AnthropicBuilder`](crate::anthropic::AnthropicBuilder),
/// [`GeminiBuilder`](crate::gemini::GeminiBuilder)), which also `build` it.
#[must_use]
pub struct HttpBuilder<S> {
    pub(crate) http: HttpSettings,
    pub(crate) dialect: S,
}

/// The settings every HTTP adapter has.
#[derive(Clone)]
pub(crate) struct HttpSettings {
    pub(crate) model: String,
    pub(crate) base_url: Option<String>,
    pub(crate) api_key: Option<SecretString>,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) retry_min_delay: Duration,
    pub(crate) headers: Vec<(String, SecretString)>,
    /// Extra top-level body fields (dialects that take them: chat completions, messages).
    pub(crate) body: Map<String, Value>,
    pub(crate) provider_name: Option<String>,
    pub(crate) first_event_timeout: Option<Duration>,
}

impl HttpSettings {
    /// The defaults, with this model and base URL.
    pub(crate) fn new(model: String, base_url: Option<String>) -> Self {
        HttpSettings {
            model,
            base_url,
            api_key: None,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            retry_min_delay: DEFAULT_RETRY_MIN_DELAY,
            headers: Vec::new(),
            body: Map::new(),
            provider_name: None,
            first_event_timeout: None,
        }
    }

    /// The API key when one was given and is not empty.
    pub(crate) fn key(&self) -> Option<&SecretString> {
        self.api_key
            .as_ref()
            .filter(|k| !k.expose_secret().is_empty())
    }

    /// Reads the key variable (required when named) and the base-URL variable (optional)
    /// through `lookup`; empty values count as unset.
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when the key variable is unset or empty.
    pub(crate) fn read_env(
        &mut self,
        lookup: &impl Fn(&str) -> Option<String>,
        key_var: Option<&'static str>,
        base_url_var: Option<&'static str>,
    ) -> Result<(), ConfigError> {
        let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        if let Some(var) = key_var {
            let key = get(var).ok_or(ConfigError::MissingEnv { var })?;
            self.api_key = Some(SecretString::from(key.trim().to_string()));
        }
        if let Some(url) = base_url_var.and_then(get) {
            self.base_url = Some(url.trim().to_string());
        }
        Ok(())
    }

    /// The model from the variable `var`, when it is set and not empty.
    pub(crate) fn read_model(&mut self, lookup: &impl Fn(&str) -> Option<String>, var: &str) {
        if let Some(model) = lookup(var).filter(|m| !m.trim().is_empty()) {
            self.model = model.trim().to_string();
        }
    }

    /// The transport of an adapter of dialect `D`: the client built with these timeouts,
    /// `headers` (the checked extra headers, the key's header and the dialect's fixed ones),
    /// the provider name (the builder's, else `default_provider`).
    ///
    /// # Errors
    /// [`ConfigError::Client`] when the HTTP client cannot be built.
    pub(crate) fn into_transport<D: Dialect>(
        self,
        default_provider: &str,
        headers: HeaderMap,
    ) -> Result<Transport, ConfigError> {
        let client = client(self.timeout, self.connect_timeout)?;
        let api_key = self.key().cloned();
        Ok(Transport {
            provider: self
                .provider_name
                .unwrap_or_else(|| default_provider.to_string()),
            model: self.model,
            client,
            headers,
            api_key,
            timeout: self.timeout,
            max_retries: self.max_retries,
            retry_min_delay: self.retry_min_delay,
            first_event_timeout: self.first_event_timeout,
            from_status: D::from_status,
            what: D::NAME,
        })
    }
}

impl<S: fmt::Debug> fmt::Debug for HttpBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let http = &self.http;
        f.debug_struct("HttpBuilder")
            .field("model", &http.model)
            .field("base_url", &http.base_url)
            .field("api_key", &http.api_key.as_ref().map(|_| "[redacted]"))
            .field(
                "headers",
                &http.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("max_retries", &http.max_retries)
            .field("timeout", &http.timeout)
            .field("settings", &self.dialect)
            .finish_non_exhaustive()
    }
}

impl<S> HttpBuilder<S> {
    pub(crate) fn with(http: HttpSettings, dialect: S) -> Self {
        HttpBuilder { http, dialect }
    }

    /// The base URL requests go to (proxies, gateways, compatible servers, test fakes); the
    /// adapter appends its API path (see the dialect's `endpoint`). A base URL that already
    /// ends in that path is refused at `build`, naming the URL to pass instead.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.http.base_url = Some(url.into());
        self
    }

    /// The API key (surrounding whitespace dropped), sent in the provider's header. It is
    /// kept in a [`SecretString`]: never printed by `Debug`, logged, or put in an error.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        let key: String = key.into();
        self.http.api_key = Some(SecretString::from(key.trim().to_string()));
        self
    }

    /// The model id requests name (opaque configuration: no list is checked).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.http.model = model.into();
        self
    }

    /// The whole-request timeout; default [`DEFAULT_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.http.timeout = timeout;
        self
    }

    /// The connect timeout; default [`DEFAULT_CONNECT_TIMEOUT`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.http.connect_timeout = timeout;
        self
    }

    /// Streaming only: the longest wait from the response headers to the stream's first
    /// event, which keep-alive comments do not extend. DeepSeek keeps a queued request
    /// open with `: keep-alive` lines for up to 10 minutes
    /// (<https://api-docs.deepseek.com/quick_start/rate_limit>); this bounds that wait
    /// separately from [`timeout`](Self::timeout). Default: none (only the whole-request
    /// timeout applies). When it expires the stream ends with
    /// [`ModelError::Transport`](halo_core::ModelError), which is retryable, without being
    /// retried inside the call.
    pub fn first_event_timeout(mut self, timeout: Duration) -> Self {
        self.http.first_event_timeout = Some(timeout);
        self
    }

    /// Retries after the first attempt for retryable errors (429, 5xx, transport);
    /// default [`DEFAULT_MAX_RETRIES`]; `0` disables retrying.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.http.max_retries = n;
        self
    }

    /// The first backoff delay when the provider gives no delay of its own; it doubles per
    /// retry (with jitter) up to [`MAX_RETRY_DELAY`](super::MAX_RETRY_DELAY). Default
    /// [`DEFAULT_RETRY_MIN_DELAY`].
    pub fn retry_min_delay(mut self, delay: Duration) -> Self {
        self.http.retry_min_delay = delay;
        self
    }

    /// An extra HTTP header on every request (an `OpenAI-Organization`, a gateway key).
    /// The value is treated as secret: `Debug` and errors show only the name. Headers the
    /// adapter writes itself are refused at `build`.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let value: String = value.into();
        self.http
            .headers
            .push((name.into(), SecretString::from(value)));
        self
    }

    /// The provider name for tracing; by default the dialect's (`openai`, `deepseek`,
    /// `openai_compatible`, `anthropic`, `gemini`).
    pub fn provider_name(mut self, name: impl Into<String>) -> Self {
        self.http.provider_name = Some(name.into());
        self
    }
}
