//! Conformance suites (feature `testing`): checks that any implementation of a Halo trait,
//! in this workspace or outside it, keeps the trait's contract.
//!
//! - [`session_store`]: the [`SessionStore`](crate::session::SessionStore) contract —
//!   ordering, the expected-sequence check, two concurrent writers, torn and damaged
//!   entries, a newer format, compaction boundaries, large entries, listing, deleting, and
//!   leases that expire and are taken over.

pub mod session_store;
