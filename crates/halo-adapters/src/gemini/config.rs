//! The builder of [`GeminiAdapter`](super::GeminiAdapter), its defaults, and the per-model
//! table of minimum cacheable lengths.
//!
//! Configuration errors are the crate's one [`ConfigError`] (shared by every HTTP
//! adapter), so callers that pick a provider at run time handle one type.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderName;

use super::cache::CacheState;
use super::{GeminiAdapter, GenerateContent};
use crate::transport::{
    ConfigError, HttpAdapter, HttpBuilder, HttpSettings, api_url, check_api_path, extra_headers,
    key_header,
};

/// The Gemini Developer API's base URL (<https://ai.google.dev/api>); `/v1beta` is appended.
pub const GEMINI_DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
/// The model [`GeminiAdapter::from_env`] uses when `GEMINI_MODEL` is not set.
pub const GEMINI_DEFAULT_MODEL: &str = "gemini-2.5-flash";
/// The environment variable holding the API key.
pub const GEMINI_API_KEY_VAR: &str = "GEMINI_API_KEY";
/// The environment variable that overrides the base URL.
pub const GEMINI_BASE_URL_VAR: &str = "GEMINI_BASE_URL";
/// The environment variable that overrides the model.
pub const GEMINI_MODEL_VAR: &str = "GEMINI_MODEL";
/// How long a `cachedContents` object lives after it is created or refreshed, by default:
/// 3600 s, one hour (the API's own default when no `ttl` is sent,
/// <https://ai.google.dev/gemini-api/docs/caching>).
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(3600);
/// By default the adapter refreshes a cached content's TTL when less than this is left
/// (capped at half the TTL): 300 s, five minutes.
pub const DEFAULT_CACHE_REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// The smallest prompt, in tokens, that Gemini caches for `model`, implicitly or in a
/// `cachedContents` object.
///
/// Source: the table on <https://ai.google.dev/gemini-api/docs/caching> as of 2026-05
/// (Gemini 2.5 Flash and 3 Flash 1,024; 2.5 Pro and 3 Pro 4,096). The values change: a
/// 2026-07 version of the page lists 2,048 for both 2.5 models and 4,096 for 3.1 Pro and
/// 3.5 Flash, and the API answers a `cachedContents` create below its minimum with
/// `400 Cached content is too small. total_token_count=…, min_total_token_count=…`.
/// Override it per adapter with [`GeminiBuilder::min_cacheable_tokens`]. Models the table does
/// not know get 4,096, the largest documented minimum.
///
/// ```
/// use halo_adapters::gemini::min_cacheable_tokens;
/// assert_eq!(min_cacheable_tokens("gemini-2.5-flash"), 1024);
/// assert_eq!(min_cacheable_tokens("models/gemini-2.5-pro"), 4096);
/// assert_eq!(min_cacheable_tokens("some-new-model"), 4096);
/// ```
pub fn min_cacheable_tokens(model: &str) -> u64 {
    let model = model.strip_prefix("models/").unwrap_or(model);
    const TABLE: &[(&str, u64)] = &[
        ("gemini-2.5-flash", 1024),
        ("gemini-2.5-pro", 4096),
        ("gemini-3-flash", 1024),
        ("gemini-3-pro", 4096),
    ];
    TABLE
        .iter()
        .find(|(prefix, _)| model.starts_with(prefix))
        .map_or(4096, |(_, n)| *n)
}

/// The source of "now" the adapter measures cache expiry with. The default is
/// [`SystemTime::now`]; tests give a clock they can advance (the Gemini simulator's).
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// Builds a [`GeminiAdapter`]: the shared settings of [`HttpBuilder`] (key, base URL,
/// timeouts, retries, headers) and the Gemini options below. Start from
/// [`GeminiAdapter::builder`].
///
/// The model id (a leading `models/` is accepted and dropped) goes into the request URL as
/// given: it is not checked against a list, and an unknown one answers 404. The base URL
/// gets `/v1beta/...` appended unless it already ends in `/v1beta`; default
/// [`GEMINI_DEFAULT_BASE_URL`]; one that already has the `/models/...` part is refused at
/// [`build`](Self::build). The key goes in the `x-goog-api-key` header, never in the URL,
/// so it cannot leak into logged URLs.
///
/// ```
/// use std::time::Duration;
/// use halo_adapters::gemini::GeminiAdapter;
///
/// let model = GeminiAdapter::builder()
///     .api_key("test-key")
///     .model("gemini-2.5-pro")
///     .base_url("http://127.0.0.1:8089")
///     .cache_ttl(Duration::from_secs(600))
///     .max_retries(0)
///     .build()
///     .unwrap();
/// assert_eq!(halo_core::ModelAdapter::model_name(&model), "gemini-2.5-pro");
/// ```
pub type GeminiBuilder = HttpBuilder<GeminiSettings>;

/// The Gemini options of a [`GeminiBuilder`], set through its methods.
pub struct GeminiSettings {
    explicit_cache: bool,
    cache_ttl: Duration,
    cache_refresh_margin: Duration,
    min_cacheable_tokens: Option<u64>,
    thinking_budget: Option<i64>,
    include_thoughts: bool,
    clock: Option<Clock>,
}

impl fmt::Debug for GeminiSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GeminiSettings")
            .field("explicit_cache", &self.explicit_cache)
            .field("cache_ttl", &self.cache_ttl)
            .field("cache_refresh_margin", &self.cache_refresh_margin)
            .field("min_cacheable_tokens", &self.min_cacheable_tokens)
            .field("thinking_budget", &self.thinking_budget)
            .field("include_thoughts", &self.include_thoughts)
            .finish_non_exhaustive()
    }
}

impl Default for HttpBuilder<GeminiSettings> {
    fn default() -> Self {
        HttpBuilder::with(
            HttpSettings::new(
                GEMINI_DEFAULT_MODEL.to_string(),
                Some(GEMINI_DEFAULT_BASE_URL.to_string()),
            ),
            GeminiSettings {
                explicit_cache: true,
                cache_ttl: DEFAULT_CACHE_TTL,
                cache_refresh_margin: DEFAULT_CACHE_REFRESH_MARGIN,
                min_cacheable_tokens: None,
                thinking_budget: None,
                include_thoughts: false,
                clock: None,
            },
        )
    }
}

impl HttpBuilder<GeminiSettings> {
    /// Whether the adapter keeps the stable prefix in an explicit `cachedContents` object
    /// once it reaches the model's minimum (see the module docs); on by default. Off, every
    /// request carries the whole prefix and relies on Gemini's implicit caching.
    pub fn explicit_cache(mut self, on: bool) -> Self {
        self.dialect.explicit_cache = on;
        self
    }

    /// The `ttl` a cached content is created and refreshed with; default
    /// [`DEFAULT_CACHE_TTL`]. Sent in whole seconds (at least one). Explicit caches pay
    /// storage per token-hour, so a shorter TTL costs less for sessions with long pauses.
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.dialect.cache_ttl = ttl.max(Duration::from_secs(1));
        self
    }

    /// Refresh a cached content's TTL (`PATCH …?updateMask=ttl`) when less than this is
    /// left before it expires; default [`DEFAULT_CACHE_REFRESH_MARGIN`], capped at half the
    /// TTL.
    pub fn cache_refresh_margin(mut self, margin: Duration) -> Self {
        self.dialect.cache_refresh_margin = margin;
        self
    }

    /// The prompt size, in tokens, from which the prefix goes into a `cachedContents`
    /// object; default [`min_cacheable_tokens`] of the model.
    pub fn min_cacheable_tokens(mut self, tokens: u64) -> Self {
        self.dialect.min_cacheable_tokens = Some(tokens);
        self
    }

    /// `generationConfig.thinkingConfig.thinkingBudget` in tokens (`0` turns thinking off
    /// on 2.5 Flash, `-1` lets the model decide); not sent by default.
    pub fn thinking_budget(mut self, tokens: i64) -> Self {
        self.dialect.thinking_budget = Some(tokens);
        self
    }

    /// `generationConfig.thinkingConfig.includeThoughts`: ask for thought summaries, which
    /// arrive as reasoning. Off by default.
    pub fn include_thoughts(mut self, on: bool) -> Self {
        self.dialect.include_thoughts = on;
        self
    }

    /// The clock cache expiry is measured with; default [`SystemTime::now`]. A test gives
    /// one it can advance, together with the simulator's.
    pub fn clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.dialect.clock = Some(Arc::new(clock));
        self
    }

    /// Reads `GEMINI_API_KEY` (required), `GEMINI_BASE_URL` and `GEMINI_MODEL` (optional)
    /// from the process environment.
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `GEMINI_API_KEY` is unset or empty.
    pub fn env(self) -> Result<Self, ConfigError> {
        self.env_from(|var| std::env::var(var).ok())
    }

    /// [`env`](Self::env) with the variables read through `lookup` (for tests and for
    /// configuration that lives elsewhere). Empty values count as unset.
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when `GEMINI_API_KEY` is unset or empty.
    pub fn env_from(
        mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        self.http
            .read_env(&lookup, Some(GEMINI_API_KEY_VAR), Some(GEMINI_BASE_URL_VAR))?;
        self.http.read_model(&lookup, GEMINI_MODEL_VAR);
        Ok(self)
    }

    /// Builds the adapter.
    ///
    /// # Errors
    /// [`ConfigError`] for a missing API key, an invalid base URL or model id, a key or
    /// header that HTTP cannot carry, or an HTTP client that cannot be built.
    pub fn build(self) -> Result<GeminiAdapter, ConfigError> {
        let HttpBuilder { mut http, dialect } = self;
        let key = http.key().ok_or(ConfigError::MissingApiKey {
            profile: "gemini",
            var: GEMINI_API_KEY_VAR,
        })?;
        let (key_name, key_value) = key_header(HeaderName::from_static("x-goog-api-key"), "", key)?;
        let model = http.model.trim();
        http.model = model.strip_prefix("models/").unwrap_or(model).to_string();

        let base_url = http.base_url.clone().unwrap_or_default();
        let endpoints = Endpoints::new(&base_url, &http.model)?;

        let mut headers = extra_headers(&http.headers, &[])?;
        headers.insert(key_name, key_value);

        let min_cacheable_tokens = dialect
            .min_cacheable_tokens
            .unwrap_or_else(|| min_cacheable_tokens(&http.model));
        let transport = http.into_transport::<GenerateContent>("gemini", headers)?;
        Ok(HttpAdapter {
            transport,
            dialect: GenerateContent {
                endpoints,
                explicit_cache: dialect.explicit_cache,
                cache_ttl: dialect.cache_ttl,
                cache_refresh_margin: dialect.cache_refresh_margin.min(dialect.cache_ttl / 2),
                min_cacheable_tokens,
                thinking_budget: dialect.thinking_budget,
                include_thoughts: dialect.include_thoughts,
                clock: dialect.clock.unwrap_or_else(|| Arc::new(SystemTime::now)),
                cache: Arc::new(tokio::sync::Mutex::new(CacheState::default())),
                next_call_id: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            },
        })
    }
}

/// The URLs one adapter talks to.
#[derive(Debug, Clone)]
pub(crate) struct Endpoints {
    /// `{base}/v1beta` (no trailing slash).
    pub api: reqwest::Url,
    /// `{api}/models/{model}:generateContent`.
    pub generate: reqwest::Url,
    /// `{api}/models/{model}:streamGenerateContent?alt=sse`.
    pub stream: reqwest::Url,
    /// `{api}/cachedContents`.
    pub cached_contents: reqwest::Url,
}

impl Endpoints {
    fn new(base: &str, model: &str) -> Result<Self, ConfigError> {
        let trimmed = base.trim().trim_end_matches('/');
        let api = if trimmed.ends_with("/v1beta") {
            trimmed.to_string()
        } else {
            format!("{trimmed}/v1beta")
        };
        let api_url = api_url(base, &api)?;
        // A URL copied from the API reference names the model and the method itself.
        check_api_path(base, |path| {
            path.rfind("/models/")
                .or_else(|| path.strip_suffix("/models").map(str::len))
        })?;
        let at = |last: &str| {
            let mut url = api_url.clone();
            if let Ok(mut segments) = url.path_segments_mut() {
                segments.pop_if_empty().push("models").push(last);
            }
            url
        };
        let mut stream = at(&format!("{model}:streamGenerateContent"));
        stream.set_query(Some("alt=sse"));
        let mut cached_contents = api_url.clone();
        if let Ok(mut segments) = cached_contents.path_segments_mut() {
            segments.pop_if_empty().push("cachedContents");
        }
        Ok(Endpoints {
            generate: at(&format!("{model}:generateContent")),
            stream,
            cached_contents,
            api: api_url,
        })
    }

    /// `{api}/{name}` for a cached content's resource name (`cachedContents/{id}`).
    pub(crate) fn resource(&self, name: &str) -> reqwest::Url {
        let mut url = self.api.clone();
        {
            // A URL with an http(s) scheme always has path segments.
            if let Ok(mut segments) = url.path_segments_mut() {
                segments.pop_if_empty();
                for part in name.split('/') {
                    segments.push(part);
                }
            }
        }
        url
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn endpoints_append_v1beta_once_and_name_the_model() {
        let e = Endpoints::new(
            "https://generativelanguage.googleapis.com/",
            "gemini-2.5-flash",
        )
        .unwrap();
        assert_eq!(
            e.generate.as_str(),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert_eq!(
            e.stream.as_str(),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        let e = Endpoints::new("http://127.0.0.1:9/proxy/v1beta", "m").unwrap();
        assert_eq!(
            e.cached_contents.as_str(),
            "http://127.0.0.1:9/proxy/v1beta/cachedContents"
        );
        assert_eq!(
            e.resource("cachedContents/abc-1").as_str(),
            "http://127.0.0.1:9/proxy/v1beta/cachedContents/abc-1"
        );
        // A name with odd characters cannot escape the path.
        assert_eq!(
            e.resource("cachedContents/a?b#c").as_str(),
            "http://127.0.0.1:9/proxy/v1beta/cachedContents/a%3Fb%23c"
        );
        assert!(matches!(
            Endpoints::new("ftp://x", "m"),
            Err(ConfigError::InvalidBaseUrl { .. })
        ));
    }

    #[test]
    fn env_needs_the_key_and_reads_url_and_model() {
        let vars = |k: &str| match k {
            "GEMINI_API_KEY" => Some(" k-1 ".to_string()),
            "GEMINI_BASE_URL" => Some("http://127.0.0.1:1".to_string()),
            "GEMINI_MODEL" => Some("models/gemini-2.5-pro".to_string()),
            _ => None,
        };
        let b = GeminiBuilder::default().env_from(vars).unwrap();
        assert_eq!(b.http.model, "models/gemini-2.5-pro");
        assert_eq!(b.http.base_url.as_deref(), Some("http://127.0.0.1:1"));
        assert_eq!(b.http.key().unwrap().expose_secret(), "k-1");
        let model = b.build().unwrap();
        assert_eq!(
            model.transport.model(),
            "gemini-2.5-pro",
            "models/ is dropped"
        );
        let err = GeminiBuilder::default().env_from(|_| None).unwrap_err();
        assert_eq!(
            err,
            ConfigError::MissingEnv {
                var: "GEMINI_API_KEY"
            }
        );
        assert!(matches!(
            GeminiBuilder::default().build(),
            Err(ConfigError::MissingApiKey { .. })
        ));
    }
}
