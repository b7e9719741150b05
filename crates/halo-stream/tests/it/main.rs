//! halo-stream's integration tests: one binary, one module per concern.

mod body;
mod encode;
mod journal;
mod scenarios;
mod transcripts;
