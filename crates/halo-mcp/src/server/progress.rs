//! MCP progress notifications from inside a served tool (`notifications/progress`, MCP
//! 2025-11-25 `basic/utilities/progress`).
//!
//! The server runs each `tools/call` whose request carried `_meta.progressToken` inside a
//! task-local scope; a tool (any [`DynTool`](halo_core::DynTool), e.g. [`ServedAgent`](super::ServedAgent))
//! reads it with [`Progress::current`] and reports steps. Outside a served call, or when the
//! client asked for no progress, there is none and reporting is a no-op for the caller.

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;

tokio::task_local! {
    static CURRENT: Progress;
}

/// Where the running call's progress goes: the client's session and its progress token.
#[derive(Clone, Debug)]
pub struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
}

impl Progress {
    /// The progress channel of the `tools/call` this task is running, if the client asked
    /// for progress (`_meta.progressToken`) and the call runs in this server.
    pub fn current() -> Option<Progress> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// Sends one `notifications/progress`: `progress` must grow from one report to the
    /// next (the spec's rule); `total` when known; `message` says what happened. A session
    /// that has closed is not an error: the report is dropped.
    pub async fn report(&self, progress: f64, total: Option<f64>, message: impl Into<String>) {
        let mut param =
            ProgressNotificationParam::new(self.token.clone(), progress).with_message(message);
        if let Some(total) = total {
            param = param.with_total(total);
        }
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!(error = %e, "a progress notification was not delivered");
        }
    }

    /// Runs `future` with `progress` as its [`current`](Self::current) progress channel.
    pub(crate) async fn scope<F: Future>(progress: Option<Progress>, future: F) -> F::Output {
        match progress {
            Some(p) => CURRENT.scope(p, future).await,
            None => future.await,
        }
    }

    pub(crate) fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        Progress { peer, token }
    }
}
