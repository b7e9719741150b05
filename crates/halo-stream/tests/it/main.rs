//! halo-stream's integration tests: one binary, one module per concern.

mod body;
mod encode;
#[cfg(feature = "gateway")]
mod gateway;
mod journal;
mod scenarios;
mod stores;
mod transcripts;
