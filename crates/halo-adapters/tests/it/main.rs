//! Integration tests of halo-adapters (one binary; modules per adapter).

mod anthropic;
mod fallback;
mod gemini;
mod object;
mod openai;
mod reasoning;
mod responses;
mod sim_openai;
mod sse;
mod tables;
mod transport;
mod window;

#[cfg(feature = "local")]
mod local;
