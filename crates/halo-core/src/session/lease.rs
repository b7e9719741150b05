//! [`LeaseTable`]: session leases kept in memory, for stores whose data one process owns
//! ([`MemoryStore`](super::MemoryStore), a JSONL file): no other process can hold a stale
//! lease there, so the table needs no persistence.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::{Lease, SessionError};

/// One session's lease state: its current fence and, while held, its owner.
#[derive(Debug, Clone, Default)]
struct Slot {
    owner: Option<String>,
    fence: u64,
    expires_at_ms: u64,
}

/// Session leases in memory, with the semantics of [`SessionStore`](super::SessionStore)'s
/// `acquire`, `renew` and `release`, and the fence check of a fenced append
/// ([`LeaseTable::fenced`]). Fence tokens start at 1 and grow with each acquire.
///
/// ```
/// use halo_core::session::{LeaseTable, SessionError};
///
/// let leases = LeaseTable::default();
/// let a = leases.acquire("mem", "s", "worker a", 1_000, 0).unwrap();
/// assert!(matches!(leases.acquire("mem", "s", "worker b", 1_000, 500), Err(SessionError::InUse { .. })));
/// let b = leases.acquire("mem", "s", "worker b", 1_000, 1_000).unwrap(); // a's expired
/// assert!(b.fence > a.fence);
/// assert!(matches!(leases.fenced("mem", "s", Some(a.fence), || Ok(())), Err(SessionError::Fenced { .. })));
/// ```
#[derive(Debug, Default)]
pub struct LeaseTable {
    slots: Mutex<HashMap<String, Slot>>,
}

impl LeaseTable {
    fn slots(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`SessionStore::acquire`](super::SessionStore::acquire); `location` names the store
    /// in errors.
    ///
    /// # Errors
    /// [`SessionError::InUse`] while another owner's lease runs.
    pub fn acquire(
        &self,
        location: &str,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Lease, SessionError> {
        let mut slots = self.slots();
        let slot = slots.entry(session.to_string()).or_default();
        if let Some(holder) = &slot.owner
            && holder != owner
            && slot.expires_at_ms > now_ms
        {
            return Err(SessionError::InUse {
                location: location.to_string(),
                session: session.to_string(),
                holder: holder.clone(),
                expires_at_ms: Some(slot.expires_at_ms),
            });
        }
        slot.fence += 1;
        slot.owner = Some(owner.to_string());
        slot.expires_at_ms = now_ms.saturating_add(ttl_ms);
        Ok(Lease {
            session: session.to_string(),
            owner: owner.to_string(),
            fence: slot.fence,
            expires_at_ms: slot.expires_at_ms,
        })
    }

    /// [`SessionStore::renew`](super::SessionStore::renew).
    ///
    /// # Errors
    /// [`SessionError::Fenced`] when `lease` is no longer current.
    pub fn renew(
        &self,
        location: &str,
        lease: &Lease,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Lease, SessionError> {
        let mut slots = self.slots();
        let slot = slots.entry(lease.session.clone()).or_default();
        check(location, &lease.session, slot, lease.fence)?;
        slot.expires_at_ms = now_ms.saturating_add(ttl_ms);
        Ok(Lease {
            expires_at_ms: slot.expires_at_ms,
            ..lease.clone()
        })
    }

    /// [`SessionStore::release`](super::SessionStore::release): ends `lease` if it is
    /// current.
    pub fn release(&self, lease: &Lease) {
        let mut slots = self.slots();
        if let Some(slot) = slots.get_mut(&lease.session)
            && slot.fence == lease.fence
        {
            slot.owner = None;
            slot.expires_at_ms = 0;
        }
    }

    /// Runs `write` (an append) when `fence` is `None` or the session's current lease,
    /// holding the table so no acquire comes between the check and the write.
    ///
    /// # Errors
    /// [`SessionError::Fenced`] (and `write` is not run), or `write`'s error.
    pub fn fenced<T>(
        &self,
        location: &str,
        session: &str,
        fence: Option<u64>,
        write: impl FnOnce() -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        let slots = self.slots();
        if let Some(fence) = fence {
            let slot = slots.get(session).cloned().unwrap_or_default();
            check(location, session, &slot, fence)?;
        }
        let out = write();
        drop(slots);
        out
    }
}

/// `fence` must be the slot's current fence, still held.
fn check(location: &str, session: &str, slot: &Slot, fence: u64) -> Result<(), SessionError> {
    if slot.fence == fence && slot.owner.is_some() {
        return Ok(());
    }
    Err(SessionError::Fenced {
        location: location.to_string(),
        session: session.to_string(),
        fence,
        holder: slot.owner.clone(),
        current: slot.fence,
    })
}
