//! [`MemoryStore`]: sessions in memory, for tests and short-lived agents.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::{
    Append, DEFAULT_SESSION, JournalEvent, Lease, LeaseTable, SessionError, SessionInfo,
    SessionStore,
};

/// What [`SessionError`]s call a memory store.
const LOCATION: &str = "memory";

/// One session's journal.
#[derive(Debug, Default)]
struct Journal {
    events: Vec<JournalEvent>,
    steps: u64,
    updated_ms: u64,
}

#[derive(Debug, Default)]
struct Inner {
    sessions: Mutex<HashMap<String, Journal>>,
    leases: LeaseTable,
}

/// A session store in memory (tests, short-lived agents). Clones share the sessions and
/// their leases.
///
/// ```
/// use halo_core::session::{Append, JournalEvent, JournalOutcome, MemoryStore, SessionStore};
///
/// # futures::executor::block_on(async {
/// let store = MemoryStore::new();
/// let done = [JournalEvent::Outcome { outcome: JournalOutcome::Answered, at_ms: 1 }];
/// assert_eq!(store.append(Append::new("s", 0, &done, 1)).await.unwrap(), 1);
/// // A second writer that also expected an empty session is refused.
/// assert!(store.append(Append::new("s", 0, &done, 2)).await.is_err());
/// assert_eq!(store.load("s").await.unwrap(), done);
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Journal>> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The events of the [`DEFAULT_SESSION`] so far.
    pub fn events(&self) -> Vec<JournalEvent> {
        self.session_events(DEFAULT_SESSION)
    }

    /// The events of `session` so far.
    pub fn session_events(&self, session: &str) -> Vec<JournalEvent> {
        self.sessions()
            .get(session)
            .map(|j| j.events.clone())
            .unwrap_or_default()
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn append(&self, append: Append<'_>) -> Result<u64, SessionError> {
        self.inner
            .leases
            .fenced(LOCATION, append.session, append.fence, || {
                let mut sessions = self.sessions();
                let found = sessions
                    .get(append.session)
                    .map_or(0, |j| j.events.len() as u64);
                if found != append.expected {
                    return Err(SessionError::Conflict {
                        location: LOCATION.into(),
                        session: append.session.into(),
                        expected: append.expected,
                        found,
                    });
                }
                if append.events.is_empty() {
                    return Ok(found);
                }
                let journal = sessions.entry(append.session.to_string()).or_default();
                journal.events.extend_from_slice(append.events);
                journal.steps += append.steps();
                journal.updated_ms = append.at_ms;
                Ok(journal.events.len() as u64)
            })
    }

    async fn load(&self, session: &str) -> Result<Vec<JournalEvent>, SessionError> {
        Ok(self.session_events(session))
    }

    async fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        Ok(self
            .sessions()
            .iter()
            .filter(|(_, j)| !j.events.is_empty())
            .map(|(id, j)| SessionInfo {
                id: id.clone(),
                updated_ms: j.updated_ms,
                steps: j.steps,
                entries: j.events.len() as u64,
            })
            .collect())
    }

    async fn delete(&self, session: &str) -> Result<(), SessionError> {
        self.sessions().remove(session);
        Ok(())
    }

    async fn acquire(
        &self,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Lease, SessionError> {
        self.inner
            .leases
            .acquire(LOCATION, session, owner, ttl_ms, now_ms)
    }

    async fn renew(&self, lease: &Lease, ttl_ms: u64, now_ms: u64) -> Result<Lease, SessionError> {
        self.inner.leases.renew(LOCATION, lease, ttl_ms, now_ms)
    }

    async fn release(&self, lease: &Lease) -> Result<(), SessionError> {
        self.inner.leases.release(lease);
        Ok(())
    }
}
