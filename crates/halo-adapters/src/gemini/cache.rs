//! The explicit cache lifecycle: one `cachedContents` object per stable prefix, created,
//! reused, refreshed, replaced and recreated as the module docs of
//! [`gemini`](super) describe.
//!
//! API: <https://ai.google.dev/api/caching> (`POST /v1beta/cachedContents`, `PATCH
//! /v1beta/{name}?updateMask=ttl`, `DELETE /v1beta/{name}`).
//!
//! The state lives behind a `tokio::sync::Mutex` held across the create call, so requests
//! of one adapter that need the same prefix wait for the first one's create and then reuse
//! its object: concurrent calls never create two objects for one prefix.
//!
//! Expiry is tracked on the adapter's clock from the moment the create or refresh request
//! was *sent* (plus the TTL). That is never later than the server's `expireTime`, which is
//! counted from when the server received it, so no RFC 3339 parsing and no clock skew
//! between this machine and Google's enter the decision.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use halo_core::{Fingerprint, ModelError};
use reqwest::Method;
use serde::Deserialize;

use super::GenerateContent;
use super::error::is_too_small;
use super::request::{CreateCachedContent, Prefix};
use crate::transport::Transport;

/// How many prefixes refused as too small are remembered (so their create is not tried
/// on every call).
const TOO_SMALL_MEMORY: usize = 16;

/// What identifies the content of a cached content: the prefix fingerprint and the tool
/// config (a tool choice other than auto), which lives in the cache too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CacheKey {
    pub fingerprint: Fingerprint,
    pub tool_config: Option<String>,
}

/// The adapter's cache state.
#[derive(Debug, Default)]
pub(crate) struct CacheState {
    current: Option<CacheEntry>,
    too_small: Vec<CacheKey>,
}

#[derive(Debug, Clone)]
struct CacheEntry {
    key: CacheKey,
    /// `cachedContents/{id}`.
    name: String,
    /// When the object expires, by the adapter's clock (see the module docs).
    expires_at: SystemTime,
}

/// The cached content one call uses.
#[derive(Debug, Clone)]
pub(crate) struct CacheUse {
    /// `cachedContents/{id}`.
    pub name: String,
    /// The object's token count when this call created it (`usageMetadata.totalTokenCount`
    /// of the create answer), else `None`.
    pub created_tokens: Option<u64>,
}

/// The create (and get) answer: only what the adapter reads.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct CachedContentAnswer {
    name: Option<String>,
    usage_metadata: Option<CacheUsage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct CacheUsage {
    total_token_count: Option<u64>,
}

/// The estimated token count of what goes into a cached content: its JSON bytes / 4,
/// Google's rule of thumb that a token is about four characters
/// (<https://ai.google.dev/gemini-api/docs/tokens>). It is free (no `countTokens` round
/// trip per prefix); when it errs high, the API refuses the create as too small, and the
/// adapter then sends that prefix in full for the rest of its life.
pub(crate) fn estimate_tokens(prefix: &Prefix) -> u64 {
    serde_json::to_vec(prefix).map_or(0, |b| b.len() as u64 / 4)
}

/// A `google.protobuf.Duration` JSON string in whole seconds (at least one).
pub(crate) fn ttl_string(ttl: Duration) -> String {
    format!("{}s", ttl.as_secs().max(1))
}

impl GenerateContent {
    /// The cached content a call with `key` should name, creating, refreshing or replacing
    /// the object as needed; `None` when the call should carry its prefix in full (the API
    /// refused the prefix as too small, or creating failed).
    ///
    /// `gone` is the name of an object the server just said has expired or is gone: if it
    /// is still the current one, it is forgotten and a new one is created.
    pub(crate) async fn cache_for(
        &self,
        t: &Transport,
        key: &CacheKey,
        prefix: &Prefix,
        gone: Option<&str>,
    ) -> Option<CacheUse> {
        let mut state = self.cache.lock().await;
        if let Some(gone) = gone
            && state.current.as_ref().is_some_and(|e| e.name == gone)
        {
            state.current = None;
        }
        if state.too_small.contains(key) {
            drop(state);
            self.release_other_than(t, key).await;
            return None;
        }
        let now = (self.clock)();
        if let Some(entry) = state.current.as_mut().filter(|e| e.key == *key)
            && now < entry.expires_at
        {
            let left = entry.expires_at.duration_since(now).unwrap_or_default();
            if left > self.cache_refresh_margin {
                return Some(CacheUse {
                    name: entry.name.clone(),
                    created_tokens: None,
                });
            }
            match self.refresh(t, &entry.name).await {
                Ok(expires_at) => {
                    entry.expires_at = expires_at;
                    return Some(CacheUse {
                        name: entry.name.clone(),
                        created_tokens: None,
                    });
                }
                Err(e) if matches!(e.status(), Some(403 | 404)) => {
                    tracing::debug!(provider = %t.provider(), name = %entry.name, error = %e, "cached content is gone; creating a new one");
                    state.current = None;
                }
                Err(e) => {
                    // Still valid for `left`: use it, and try the refresh again next call.
                    tracing::warn!(provider = %t.provider(), name = %entry.name, error = %e, "refreshing the cached content's TTL failed");
                    return Some(CacheUse {
                        name: entry.name.clone(),
                        created_tokens: None,
                    });
                }
            }
        }

        // A new object: the first for this prefix, or the old one expired or was replaced.
        let old = state
            .current
            .take()
            .filter(|e| e.key != *key && now < e.expires_at);
        let created = self.create(t, key, prefix).await;
        if let Some(old) = old {
            self.delete_best_effort(t, &old.name).await;
        }
        match created {
            Ok((name, created_tokens, expires_at)) => {
                state.current = Some(CacheEntry {
                    key: key.clone(),
                    name: name.clone(),
                    expires_at,
                });
                Some(CacheUse {
                    name,
                    created_tokens,
                })
            }
            Err(e) if is_too_small(&e) => {
                tracing::debug!(provider = %t.provider(), error = %e, "the prefix is below the model's cache minimum; sending it in full");
                if state.too_small.len() >= TOO_SMALL_MEMORY {
                    state.too_small.remove(0);
                }
                state.too_small.push(key.clone());
                None
            }
            Err(e) => {
                tracing::warn!(provider = %t.provider(), error = %e, "creating the cached content failed; sending the prefix in full");
                None
            }
        }
    }

    /// Deletes the current cached content when it belongs to another prefix (the
    /// fingerprint changed to one that is not cached explicitly).
    pub(crate) async fn release_other_than(&self, t: &Transport, key: &CacheKey) {
        let mut state = self.cache.lock().await;
        if let Some(old) = state.current.take_if(|e| e.key != *key) {
            let now = (self.clock)();
            if now < old.expires_at {
                self.delete_best_effort(t, &old.name).await;
            }
        }
    }

    /// `POST cachedContents`: the new object's name, its token count (if reported) and its
    /// expiry on the adapter's clock.
    async fn create(
        &self,
        t: &Transport,
        key: &CacheKey,
        prefix: &Prefix,
    ) -> Result<(String, Option<u64>, SystemTime), ModelError> {
        let body = CreateCachedContent {
            model: format!("models/{}", t.model()),
            prefix,
            ttl: ttl_string(self.cache_ttl),
            // Names the prefix in the console's list of caches.
            display_name: format!("halo {}", key.fingerprint),
        };
        let body = serde_json::to_vec(&body)
            .map(Bytes::from)
            .map_err(|e| ModelError::Other(format!("cannot serialize the cache body: {e}")))?;
        let sent_at = (self.clock)();
        let response = t
            .send(
                Method::POST,
                &self.endpoints.cached_contents,
                Some(&body),
                "application/json",
            )
            .await?;
        let bytes = t.read(response).await?;
        let answer: CachedContentAnswer = serde_json::from_slice(&bytes).map_err(|e| {
            ModelError::InvalidResponse(format!("the cachedContents answer is not JSON: {e}"))
        })?;
        let name = answer.name.filter(|n| valid_name(n)).ok_or_else(|| {
            ModelError::InvalidResponse(
                "the cachedContents answer has no `cachedContents/{id}` name".into(),
            )
        })?;
        tracing::debug!(provider = %t.provider(), name = %name, "created cached content");
        Ok((
            name,
            answer.usage_metadata.and_then(|u| u.total_token_count),
            sent_at + self.cache_ttl,
        ))
    }

    /// `PATCH {name}?updateMask=ttl`: the new expiry.
    async fn refresh(&self, t: &Transport, name: &str) -> Result<SystemTime, ModelError> {
        let mut url = self.endpoints.resource(name);
        url.set_query(Some("updateMask=ttl"));
        let body =
            Bytes::from(serde_json::json!({ "ttl": ttl_string(self.cache_ttl) }).to_string());
        let sent_at = (self.clock)();
        t.send(Method::PATCH, &url, Some(&body), "application/json")
            .await?;
        tracing::debug!(provider = %t.provider(), name = %name, "refreshed the cached content's TTL");
        Ok(sent_at + self.cache_ttl)
    }

    /// `DELETE {name}`, logging a failure instead of returning it: the object expires on
    /// its own at the end of its TTL.
    async fn delete_best_effort(&self, t: &Transport, name: &str) {
        match self.delete(t, name).await {
            Ok(()) => {
                tracing::debug!(provider = %t.provider(), name = %name, "deleted the old cached content");
            }
            Err(e) => {
                tracing::warn!(provider = %t.provider(), name = %name, error = %e, "deleting the old cached content failed; it expires at the end of its TTL");
            }
        }
    }

    pub(crate) async fn delete(&self, t: &Transport, name: &str) -> Result<(), ModelError> {
        t.send(
            Method::DELETE,
            &self.endpoints.resource(name),
            None,
            "application/json",
        )
        .await
        .map(drop)
    }

    /// The current cache entry's name (for [`GeminiAdapter::cached_content`](super::GeminiAdapter::cached_content)).
    pub(crate) async fn current_cache_name(&self) -> Option<String> {
        self.cache
            .lock()
            .await
            .current
            .as_ref()
            .map(|e| e.name.clone())
    }

    /// Forgets and deletes the current cache entry.
    pub(crate) async fn take_current(&self) -> Option<String> {
        self.cache.lock().await.current.take().map(|e| e.name)
    }
}

/// A resource name the adapter will put in a URL: `cachedContents/` and an id of letters,
/// digits, `-` and `_`.
fn valid_name(name: &str) -> bool {
    name.strip_prefix("cachedContents/").is_some_and(|id| {
        !id.is_empty()
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_before_they_reach_a_url() {
        assert!(valid_name("cachedContents/abc-12_x"));
        assert!(!valid_name("cachedContents/"));
        assert!(!valid_name("cachedContents/../models"));
        assert!(!valid_name("models/x"));
        assert_eq!(ttl_string(Duration::from_millis(10)), "1s");
        assert_eq!(ttl_string(Duration::from_secs(3600)), "3600s");
    }
}
