//! [`FallbackModel`]: one model over an ordered list of adapters, each call answered by the
//! first that can.
//!
//! A call goes to the first adapter; it goes to the next on:
//! - a retryable error ([`ModelError::is_retryable`]: 429, 5xx, no HTTP answer, a cut
//!   stream, an overload reported mid-stream);
//! - a timeout ([`FallbackModel::timeout`]: no answer, or no first stream event, within it);
//! - a stream that fails before its first event (whatever the error).
//!
//! A stream that failed *after* its first event is never replayed elsewhere: its deltas
//! already reached the caller, so the error ends the stream as it would without a fallback
//! (the agent keeps nothing of the turn and may retry the step). Any other error — an
//! invalid request, a bad key — is returned at once: another provider would refuse the same
//! request, or the configuration needs a human.
//!
//! The answer names the adapter that gave it ([`ModelResponse::provider`]), so the agent's
//! cache ledger counts a switch as an expected miss (the new provider's prompt cache is
//! cold), not a bust, [`AgentStats::provider_switches`](halo_core::AgentStats) counts them,
//! and each step's [`CacheCheck::provider`](halo_core::CacheCheck) says which provider
//! answered it. Switching providers mid-run costs a cold cache on each switch: put the
//! provider that should answer most calls first.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use halo_adapters::anthropic::AnthropicAdapter;
//! use halo_adapters::fallback::FallbackModel;
//! use halo_adapters::openai::OpenAiCompatible;
//! use halo_core::HaloAgent;
//!
//! # fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let model = FallbackModel::new([
//!     Arc::new(OpenAiCompatible::openai_from_env()?) as halo_core::SharedModel,
//!     Arc::new(AnthropicAdapter::from_env()?),
//! ])?
//! .timeout(Duration::from_secs(120));
//! let agent = HaloAgent::builder(model).system("You are terse.").build();
//! # Ok(()) }
//! ```

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt as _;
use halo_core::{
    ModelAdapter, ModelCapabilities, ModelError, ModelEventStream, ModelRequest, ModelResponse,
    ModelStreamEvent, SharedModel,
};

/// The provider name a [`FallbackModel`] reports for tracing.
pub const PROVIDER: &str = "fallback";

/// Why a [`FallbackModel`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FallbackError {
    /// The list of adapters is empty.
    #[error("a fallback model needs at least one adapter")]
    Empty,
}

/// A model over an ordered list of adapters: each call goes to the first, and to the next
/// on a retryable error, a timeout, or a stream failing before its first event (see the
/// [module docs](self)).
#[derive(Clone)]
pub struct FallbackModel {
    models: Vec<SharedModel>,
    timeout: Option<Duration>,
}

impl fmt::Debug for FallbackModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackModel")
            .field(
                "models",
                &self
                    .models
                    .iter()
                    .map(|m| format!("{}/{}", m.provider(), m.model_name()))
                    .collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl FallbackModel {
    /// A fallback over `models`, tried in order.
    ///
    /// # Errors
    /// [`FallbackError::Empty`] for an empty list.
    pub fn new(models: impl IntoIterator<Item = SharedModel>) -> Result<Self, FallbackError> {
        let models: Vec<SharedModel> = models.into_iter().collect();
        if models.is_empty() {
            return Err(FallbackError::Empty);
        }
        Ok(FallbackModel {
            models,
            timeout: None,
        })
    }

    /// The longest wait for one adapter's answer (unary) or first stream event; past it the
    /// call goes to the next adapter (the last one's wait ends the call with
    /// [`ModelError::Transport`]). Default: none, each adapter's own timeouts apply.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The adapters, in order.
    pub fn models(&self) -> &[SharedModel] {
        &self.models
    }

    fn timed_out(&self, model: &SharedModel) -> ModelError {
        ModelError::Transport(format!(
            "{} ({}) gave no answer within {} ms (the fallback's timeout)",
            model.provider(),
            model.model_name(),
            self.timeout.unwrap_or_default().as_millis()
        ))
    }
}

/// Whether an error of a unary call moves the call to the next adapter.
fn switches(error: &ModelError) -> bool {
    error.is_retryable()
}

fn named(mut response: ModelResponse, model: &SharedModel) -> ModelResponse {
    response.provider = Some(model.provider().to_string());
    response
}

#[async_trait]
impl ModelAdapter for FallbackModel {
    fn provider(&self) -> &str {
        PROVIDER
    }

    /// The first adapter's model.
    fn model_name(&self) -> &str {
        self.models[0].model_name()
    }

    /// What every adapter can do (a request must suit whichever answers it).
    fn capabilities(&self) -> ModelCapabilities {
        self.models
            .iter()
            .map(|m| m.capabilities())
            .reduce(|a, b| {
                ModelCapabilities::new()
                    .with_native_output(a.native_output && b.native_output)
                    .with_native_output_with_tools(
                        a.native_output_with_tools && b.native_output_with_tools,
                    )
                    .with_forced_tool(a.forced_tool && b.forced_tool)
                    .with_allowed_tools(a.allowed_tools && b.allowed_tools)
            })
            .unwrap_or_default()
    }

    /// The smallest window among the adapters that know theirs.
    fn context_window(&self) -> Option<u64> {
        self.models.iter().filter_map(|m| m.context_window()).min()
    }

    /// Asks each adapter in turn until one answers; the answer names its provider.
    ///
    /// # Errors
    /// The error of the last adapter tried: the first non-retryable one, or the last
    /// adapter's.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the call in flight; nothing is kept.
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let last = self.models.len() - 1;
        for (i, model) in self.models.iter().enumerate() {
            let answer = match self.timeout {
                Some(limit) => tokio::time::timeout(limit, model.generate(request))
                    .await
                    .unwrap_or_else(|_| Err(self.timed_out(model))),
                None => model.generate(request).await,
            };
            match answer {
                Ok(response) => return Ok(named(response, model)),
                Err(e) if i < last && switches(&e) => {
                    tracing::warn!(
                        provider = %model.provider(),
                        next = %self.models[i + 1].provider(),
                        error = %e,
                        "falling back to the next model"
                    );
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns on the last adapter")
    }

    /// Streams from the first adapter whose stream yields a first event; a stream that
    /// fails before its first event (or gives none within the timeout) moves to the next.
    /// Once an event has come, the stream is this adapter's to the end, errors included.
    ///
    /// # Cancel safety
    /// Dropping the stream closes the adapter's stream; nothing is kept.
    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        Box::pin(async_stream::stream! {
            let last = self.models.len() - 1;
            for (i, model) in self.models.iter().enumerate() {
                let mut events = model.stream(request);
                let first = match self.timeout {
                    Some(limit) => tokio::time::timeout(limit, events.next())
                        .await
                        .unwrap_or_else(|_| Some(Err(self.timed_out(model)))),
                    None => events.next().await,
                };
                let first = match first {
                    Some(Ok(event)) => event,
                    Some(Err(e)) if i < last => {
                        tracing::warn!(
                            provider = %model.provider(),
                            next = %self.models[i + 1].provider(),
                            error = %e,
                            "the stream failed before its first event; falling back to the next model"
                        );
                        continue;
                    }
                    Some(Err(e)) => {
                        yield Err(e);
                        return;
                    }
                    None if i < last => continue,
                    None => {
                        yield Err(ModelError::Truncated(
                            "the stream ended before its first event".into(),
                        ));
                        return;
                    }
                };
                // Committed: this adapter's stream, to its end.
                let rest = futures::stream::iter([Ok(first)]).chain(events);
                futures::pin_mut!(rest);
                while let Some(event) = rest.next().await {
                    match event {
                        Ok(ModelStreamEvent::Finish(response)) => {
                            yield Ok(ModelStreamEvent::Finish(named(response, model)));
                        }
                        Ok(event) => yield Ok(event),
                        Err(e) => {
                            yield Err(e);
                            return;
                        }
                    }
                }
                return;
            }
        })
    }
}
