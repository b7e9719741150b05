//! # halo-adapters
//!
//! Model adapters for Halo agents: the OpenAI-compatible chat-completions dialect with
//! OpenAI and DeepSeek profiles (and any compatible server by base URL), and, with the
//! `local` feature, an embedded llama.cpp model that keeps its KV cache between calls.
//! [`anthropic`] speaks Anthropic's Messages API and places its `cache_control` breakpoints.
//! [`gemini`] speaks Gemini's `generateContent` API and keeps a `cachedContents` object per prefix.

pub mod anthropic;
pub mod gemini;
pub mod openai;
pub mod sse;

#[cfg(feature = "local")]
pub mod local;

#[cfg(feature = "sim")]
pub mod sim;
