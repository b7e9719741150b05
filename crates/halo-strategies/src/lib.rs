//! # halo-strategies
//!
//! Context strategies (truncate, evict, compact) and repair strategies (JSON repair, loop
//! suppression) for Halo agents.
//!
//! **Status: empty.** This crate has no API yet; strategies are a later issue. It exists so
//! the workspace layout is final and the dependency rules are checked from the start.
