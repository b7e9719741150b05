//! The streamable HTTP transport's sessions (MCP 2025-11-25 `basic/transports`, "Session
//! Management": the `Mcp-Session-Id` of a client that began with `initialize`): rmcp's
//! [`LocalSessionManager`] with three guards around it.
//!
//! - **A cap.** At most `max` live sessions. [`Sessions::reserve`] takes a slot before an
//!   `initialize` reaches rmcp (the router's session guard refuses the request when none is
//!   free), so concurrent handshakes never overshoot; `create_session` refuses too, as a
//!   backstop.
//! - **Idle expiry.** A session with no call in flight and no message for `idle` is closed by
//!   a reaper task (rmcp's own keep-alive is switched off: it would also close a session whose
//!   one long call sends nothing, killing the call).
//! - **Calls die with their session.** Each call's response stream is watched: when the
//!   session is closed (`DELETE`, idle expiry) every call in flight gets
//!   `notifications/cancelled` first, and a stream dropped before its response arrived (the
//!   client went away) cancels its call. rmcp turns the notification into the cancellation of
//!   the call's `RequestContext::ct`; the handler drops the call's future, and a sandboxed
//!   command's process group is killed with it.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::model::{
    CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification, Notification, RequestId,
};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    /// The cap is reached.
    #[error("this server already has {0} sessions, its limit")]
    Full(usize),
    /// rmcp's session manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// The session manager the HTTP transport runs on (cheap to clone).
#[derive(Clone)]
pub(crate) struct Sessions {
    shared: Arc<Shared>,
}

struct Shared {
    inner: LocalSessionManager,
    max: usize,
    idle: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    live: HashMap<SessionId, Live>,
    /// Handshakes admitted by [`Sessions::reserve`] whose session is not created yet.
    reserved: usize,
    next_call: u64,
}

struct Live {
    last_active: Instant,
    /// Calls whose response stream is open: a key of this manager's, and the JSON-RPC id.
    calls: HashMap<u64, RequestId>,
}

/// A slot for one session, taken before an `initialize` request is served; released when
/// dropped (by then the session exists, or the handshake failed).
pub(crate) struct Reservation {
    shared: Arc<Shared>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.shared.lock().reserved -= 1;
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update leaves the state consistent, so a panic elsewhere does not poison it.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn touch(&self, id: &SessionId) {
        if let Some(live) = self.lock().live.get_mut(id) {
            live.last_active = Instant::now();
        }
    }

    /// Sends `notifications/cancelled` for `request` into the session, as a client would.
    async fn cancel_call(&self, session: &SessionId, request: RequestId, reason: &str) {
        let cancelled = ClientJsonRpcMessage::notification(
            ClientNotification::CancelledNotification(Notification::new(
                CancelledNotificationParam::new(Some(request), Some(reason.to_string())),
            )),
        );
        if let Err(e) = self.inner.accept_message(session, cancelled).await {
            tracing::debug!(error = %e, "the session ended before its call could be cancelled");
        }
    }
}

impl Sessions {
    /// At most `max` live sessions, each closed after `idle` without a message or a call in
    /// flight. Spawns the reaper on the current tokio runtime (none outside one: then
    /// sessions are not expired); it ends when the last clone is dropped.
    pub(crate) fn new(max: usize, idle: Duration) -> Sessions {
        let mut inner = LocalSessionManager::default();
        // Idle expiry is this manager's reaper's job (see the module doc).
        inner.session_config.keep_alive = None;
        let sessions = Sessions {
            shared: Arc::new(Shared {
                inner,
                max,
                idle,
                state: Mutex::new(State::default()),
            }),
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(reap(Arc::downgrade(&sessions.shared)));
        }
        sessions
    }

    /// The cap.
    pub(crate) fn max(&self) -> usize {
        self.shared.max
    }

    /// The idle timeout.
    pub(crate) fn idle(&self) -> Duration {
        self.shared.idle
    }

    /// The live sessions now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shared.lock().live.len()
    }

    /// A slot for one more session, or `None` when live and admitted sessions fill the cap.
    pub(crate) fn reserve(&self) -> Option<Reservation> {
        let mut state = self.shared.lock();
        if state.live.len() + state.reserved >= self.shared.max {
            return None;
        }
        state.reserved += 1;
        Some(Reservation {
            shared: self.shared.clone(),
        })
    }
}

/// Closes idle sessions until the manager is gone; looks every quarter of the idle
/// timeout (at least every 50 ms, at most every 30 s).
async fn reap(shared: Weak<Shared>) {
    let period = shared.upgrade().map_or(Duration::from_secs(1), |s| {
        (s.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30))
    });
    loop {
        tokio::time::sleep(period).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let expired: Vec<SessionId> = {
            let state = shared.lock();
            state
                .live
                .iter()
                .filter(|(_, live)| {
                    live.calls.is_empty() && live.last_active.elapsed() >= shared.idle
                })
                .map(|(id, _)| id.clone())
                .collect()
        };
        let sessions = Sessions { shared };
        for id in expired {
            tracing::debug!(session = %id, "closing an idle MCP session");
            if let Err(e) = sessions.close_session(&id).await {
                tracing::debug!(session = %id, error = %e, "closing an idle session failed");
            }
        }
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // Admitted handshakes hold a reservation, so this only refuses a caller that skipped
        // `reserve` (a backstop; the router's guard answers the client properly).
        let live = self.shared.lock().live.len();
        if live >= self.shared.max {
            return Err(SessionsError::Full(self.shared.max));
        }
        let (id, transport) = self.shared.inner.create_session().await?;
        self.shared.lock().live.insert(
            id.clone(),
            Live {
                last_active: Instant::now(),
                calls: HashMap::new(),
            },
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<rmcp::model::ServerJsonRpcMessage, Self::Error> {
        self.shared.touch(id);
        Ok(self.shared.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.shared.inner.has_session(id).await?)
    }

    /// Cancels the session's calls in flight, then closes it.
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let calls: Vec<RequestId> = match self.shared.lock().live.remove(id) {
            Some(live) => live.calls.into_values().collect(),
            None => Vec::new(),
        };
        for request in calls {
            self.shared
                .cancel_call(id, request, "the session was closed")
                .await;
        }
        Ok(self.shared.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let request = match &message {
            ClientJsonRpcMessage::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        let key = {
            let mut state = self.shared.lock();
            let key = state.next_call;
            state.next_call += 1;
            if let (Some(live), Some(request)) = (state.live.get_mut(id), request.clone()) {
                live.last_active = Instant::now();
                live.calls.insert(key, request);
            }
            key
        };
        let mut watch = CallWatch {
            shared: self.shared.clone(),
            session: id.clone(),
            key,
            request,
            finished: false,
        };
        let stream = match self.shared.inner.create_stream(id, message).await {
            Ok(stream) => stream,
            Err(e) => {
                // The call never reached the session: nothing to cancel.
                watch.finished = true;
                return Err(e.into());
            }
        };
        Ok(CallStream {
            inner: Box::pin(stream),
            watch,
        })
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.shared.touch(id);
        Ok(self.shared.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.shared.touch(id);
        Ok(self.shared.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.shared.touch(id);
        Ok(self.shared.inner.resume(id, last_event_id).await?)
    }
}

/// One call's response stream; see [`CallWatch`].
struct CallStream {
    inner: Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync>>,
    watch: CallWatch,
}

impl Stream for CallStream {
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        if let Poll::Ready(None) = polled {
            // rmcp ends a call's stream after its response.
            self.watch.finished = true;
        }
        polled
    }
}

/// Unregisters a call when its stream goes; cancels the call when the stream was dropped
/// before it ended (the client disconnected).
struct CallWatch {
    shared: Arc<Shared>,
    session: SessionId,
    key: u64,
    request: Option<RequestId>,
    finished: bool,
}

impl Drop for CallWatch {
    fn drop(&mut self) {
        let registered = {
            let mut state = self.shared.lock();
            state.live.get_mut(&self.session).is_some_and(|live| {
                live.last_active = Instant::now();
                live.calls.remove(&self.key).is_some()
            })
        };
        // Not registered any more: the session was closed, and that cancelled the call.
        let (Some(request), false, true) = (self.request.take(), self.finished, registered) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = self.shared.clone();
        let session = self.session.clone();
        runtime.spawn(async move {
            shared
                .cancel_call(&session, request, "the client disconnected")
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reservations_and_live_sessions_never_pass_the_cap() {
        let sessions = Sessions::new(2, Duration::from_secs(60));
        let first = sessions.reserve().expect("a free slot");
        let (a, _t1) = sessions.create_session().await.unwrap();
        drop(first);
        let second = sessions.reserve().expect("a second slot");
        assert!(sessions.reserve().is_none(), "one live and one admitted");
        let (_b, _t2) = sessions.create_session().await.unwrap();
        drop(second);
        assert_eq!(sessions.len(), 2);
        assert!(sessions.reserve().is_none());
        assert!(matches!(
            sessions.create_session().await,
            Err(SessionsError::Full(2))
        ));
        sessions.close_session(&a).await.unwrap();
        assert_eq!(sessions.len(), 1);
        assert!(
            sessions.reserve().is_some(),
            "a closed session frees its slot"
        );
    }
}
