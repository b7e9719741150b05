//! The baseline: the same session with the date-time in every request's system prompt.

use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use halo_core::{ModelAdapter, ModelError, ModelRequest, ModelResponse};

/// The baseline: the inner adapter, with the current date-time appended to the system
/// prompt of every request. The clock starts at 2026-03-02T09:14:05Z and advances 20 s per
/// call, as a real session's would.
pub(crate) struct Clocked<M> {
    pub(crate) inner: M,
    pub(crate) calls: AtomicU64,
}

impl<M> Clocked<M> {
    pub(crate) fn new(inner: M) -> Self {
        Clocked {
            inner,
            calls: AtomicU64::new(0),
        }
    }
}

/// `2026-03-02T09:14:05Z` plus `seconds` (within the day).
pub(crate) fn clock(seconds: u64) -> String {
    let t = 9 * 3600 + 14 * 60 + 5 + seconds;
    format!(
        "2026-03-02T{:02}:{:02}:{:02}Z",
        t / 3600 % 24,
        t / 60 % 60,
        t % 60
    )
}

#[async_trait]
impl<M: ModelAdapter> ModelAdapter for Clocked<M> {
    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn capabilities(&self) -> halo_core::ModelCapabilities {
        self.inner.capabilities()
    }

    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let mut prefix = request.prefix.clone();
        prefix.set_system(format!(
            "{}\n\nCurrent date and time: {}",
            request.prefix.system(),
            clock(20 * n)
        ));
        let mut request = request;
        request.prefix = &prefix;
        self.inner.generate(request).await
    }
}
