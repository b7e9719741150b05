//! Integration tests of halo-adapters (one binary; modules per adapter).

mod openai;

#[cfg(feature = "local")]
mod local;
