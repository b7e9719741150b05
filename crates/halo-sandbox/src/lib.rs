//! # halo-sandbox
//!
//! Sandboxes whose tools join a Halo agent's stable prefix (work in progress).
