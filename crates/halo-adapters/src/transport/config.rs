//! Configuration shared by every HTTP adapter: the one [`ConfigError`], the default
//! timeouts and retry policy, and the checks a builder runs on its base URL, headers and
//! extra body fields before an adapter exists.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value};

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

/// Why an adapter could not be configured (every HTTP adapter's builder returns it, so
/// callers that pick a provider at run time handle one type).
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

/// The header that carries the API key, marked sensitive (so `Debug` of a request hides
/// it): `name: {prefix}{key}`, such as `authorization: Bearer sk-…`.
///
/// # Errors
/// [`ConfigError::InvalidApiKey`] for a key HTTP cannot carry.
pub(crate) fn key_header(
    name: HeaderName,
    prefix: &str,
    key: &SecretString,
) -> Result<(HeaderName, HeaderValue), ConfigError> {
    let mut value = HeaderValue::from_str(&format!("{prefix}{}", key.expose_secret()))
        .map_err(|_| ConfigError::InvalidApiKey)?;
    value.set_sensitive(true);
    Ok((name, value))
}

/// The HTTP client of one adapter: these timeouts and the `halo-adapters/{version}` user
/// agent.
///
/// # Errors
/// [`ConfigError::Client`] when the client cannot be built (TLS backend failure).
pub(crate) fn client(
    timeout: Duration,
    connect_timeout: Duration,
) -> Result<reqwest::Client, ConfigError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(connect_timeout)
        .user_agent(concat!("halo-adapters/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ConfigError::Client(e.to_string()))
}

/// A builder's extra headers as a map, every value marked sensitive.
///
/// # Errors
/// [`ConfigError::InvalidHeader`] for a name or value HTTP cannot carry, or a name in
/// `reserved` (lowercase; headers the adapter writes itself).
pub(crate) fn extra_headers(
    headers: &[(String, SecretString)],
    reserved: &[&str],
) -> Result<HeaderMap, ConfigError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let invalid = || ConfigError::InvalidHeader { name: name.clone() };
        let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid())?;
        if reserved.contains(&header_name.as_str()) {
            return Err(invalid());
        }
        let mut header_value =
            HeaderValue::from_str(value.expose_secret()).map_err(|_| invalid())?;
        header_value.set_sensitive(true);
        map.append(header_name, header_value);
    }
    Ok(map)
}

/// Refuses an extra body field the adapter writes itself.
///
/// # Errors
/// [`ConfigError::ReservedBodyField`] naming the first field of `body` in `reserved`.
pub(crate) fn check_body_fields(
    body: &Map<String, Value>,
    reserved: &[&str],
) -> Result<(), ConfigError> {
    match body.keys().find(|k| reserved.contains(&k.as_str())) {
        Some(field) => Err(ConfigError::ReservedBodyField(field.clone())),
        None => Ok(()),
    }
}

/// `url` (the builder's base URL `base` with the API path joined) parsed and checked: `base`
/// names its scheme (`127.0.0.1:9` does not), the scheme is http or https, and there is no
/// query and no fragment.
///
/// # Errors
/// [`ConfigError::InvalidBaseUrl`] naming `base` and what is wrong.
pub(crate) fn api_url(base: &str, url: &str) -> Result<reqwest::Url, ConfigError> {
    let invalid = |reason: String| ConfigError::InvalidBaseUrl {
        url: base.to_string(),
        reason,
    };
    let with_scheme = |what: &str| {
        invalid(format!(
            "{what}: include `http://` or `https://` (e.g. `http://127.0.0.1:8080`)"
        ))
    };
    if !base.contains("://") {
        // `127.0.0.1:9` fails as "relative URL without a base", `localhost:9` parses
        // with the scheme `localhost`: both lack the scheme.
        return Err(with_scheme("the base URL has no scheme"));
    }
    let url = reqwest::Url::parse(url).map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(with_scheme("the scheme must be http or https"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid(
            "the base URL must not have a query or fragment".into(),
        ));
    }
    Ok(url)
}

/// Refuses a base URL whose path already ends in (part of) the API path the adapter
/// appends, such as a URL copied whole from an API reference: `http://127.0.0.1:8080/v1/chat/completions`
/// would be posted to `.../chat/completions/chat/completions`. `find` gets the base URL's
/// path without its trailing slashes and returns the byte offset where the appended part
/// begins, or `None` when it is not there. Call it after [`api_url`], which reports a base
/// URL that does not parse or lacks its scheme.
///
/// # Errors
/// [`ConfigError::InvalidBaseUrl`] naming `base`, the part to drop, and the base URL to
/// pass instead.
pub(crate) fn check_api_path(
    base: &str,
    find: impl Fn(&str) -> Option<usize>,
) -> Result<(), ConfigError> {
    let Ok(mut url) = reqwest::Url::parse(base.trim()) else {
        return Ok(());
    };
    let path = url.path().trim_end_matches('/').to_string();
    let Some(at) = find(&path).filter(|&at| path.is_char_boundary(at)) else {
        return Ok(());
    };
    url.set_path(&path[..at]);
    url.set_query(None);
    url.set_fragment(None);
    Err(ConfigError::InvalidBaseUrl {
        url: base.to_string(),
        reason: format!(
            "it ends in `{}`, which the adapter appends itself; drop it and pass `{}`",
            &path[at..],
            url.as_str().trim_end_matches('/')
        ),
    })
}
