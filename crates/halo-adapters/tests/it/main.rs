//! Integration tests of halo-adapters (one binary; modules per adapter).

mod openai;
mod sim_openai;
mod sse;

#[cfg(feature = "local")]
mod local;
