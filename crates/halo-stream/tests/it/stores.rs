//! The session store conformance suite (`halo_core::conformance::session_store`) on every
//! store of this crate: the JSONL file here, PostgreSQL and Redis (real servers started by
//! the tests) behind their features.

mod jsonl;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
