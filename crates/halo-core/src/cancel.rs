//! [`CancelToken`]: stops an agent's run from another task.
//!
//! [`HaloAgent::cancel_token`](crate::HaloAgent::cancel_token) hands out a token; calling
//! [`CancelToken::cancel`] while a run is in flight ends it at once, as dropping its future or
//! stream would — the model call or the running tools are dropped and the log keeps only
//! complete steps — and the run returns [`HaloError::Cancelled`].
//! The step in flight stays in the run state, so [`resume`](crate::HaloAgent::resume)
//! continues it. Each run starts uncancelled.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::Stream;
use futures::task::AtomicWaker;

use crate::error::HaloError;

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    waker: AtomicWaker,
}

/// Cancels an agent's run in flight. Cheap to clone, `Send` and `Sync`.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

impl CancelToken {
    /// Ends the run in flight (if any) with [`HaloError::Cancelled`].
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.waker.wake();
    }

    /// Whether [`cancel`](Self::cancel) was called since the run started.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    pub(crate) fn reset(&self) {
        self.inner.cancelled.store(false, Ordering::SeqCst);
    }
}

/// `events`, ended with one `Err(HaloError::Cancelled)` as soon as `token` is cancelled (the
/// inner stream is dropped then, as if the caller had dropped it).
pub(crate) fn cancellable<S, T>(
    events: S,
    token: CancelToken,
) -> impl Stream<Item = Result<T, HaloError>> + Send
where
    S: Stream<Item = Result<T, HaloError>> + Send,
{
    let mut events = Some(Box::pin(events));
    futures::stream::poll_fn(move |cx: &mut Context<'_>| {
        let Some(inner) = events.as_mut() else {
            return Poll::Ready(None);
        };
        token.inner.waker.register(cx.waker());
        if token.is_cancelled() {
            events = None;
            return Poll::Ready(Some(Err(HaloError::Cancelled)));
        }
        Pin::new(inner).poll_next(cx)
    })
}
