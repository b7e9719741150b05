//! Integration tests of halo-adapters (one binary; modules per adapter).

mod anthropic;
mod gemini;
mod object;
mod openai;
mod sim_openai;
mod sse;
mod window;

#[cfg(feature = "local")]
mod local;
