//! # halo-adapters
//!
//! Model adapters for Halo agents: the OpenAI-compatible chat-completions dialect with
//! OpenAI and DeepSeek profiles (and any compatible server by base URL), and, with the
//! `local` feature, an embedded llama.cpp model that keeps its KV cache between calls.
//! [`anthropic`] speaks Anthropic's Messages API and places its `cache_control` breakpoints.
//! [`gemini`] speaks Gemini's `generateContent` API and keeps a `cachedContents` object per prefix.
//! With the `sim` feature, `sim` serves loopback simulators of the OpenAI, DeepSeek, Anthropic
//! and Gemini APIs that compute cached tokens by each provider's documented rules.
//! [`responses`] speaks OpenAI's Responses API, replaying reasoning items verbatim.
//! [`fallback`] puts an ordered list of adapters behind one model.
//! Every HTTP adapter is [`transport::HttpAdapter`] over its dialect: one transport
//! (`docs/adapters.md` says how to add a provider).
//! [`window`] is the per-model table of context windows every adapter reports.

pub mod anthropic;
pub mod fallback;
mod finish;
pub mod gemini;
pub mod openai;
pub mod responses;
pub mod sse;
mod strict;
pub mod transport;
pub mod window;

#[cfg(feature = "local")]
pub mod local;

#[cfg(feature = "profiles")]
pub mod profiles;
#[cfg(feature = "sim")]
pub mod sim;

#[cfg(feature = "tokens")]
pub mod tokens;

/// The text of the user turn the adapters (OpenAI-compatible, Anthropic, Gemini) insert
/// where a trimmed history would open with a model turn.
///
/// A bounded [`MessageLog`](halo_core::MessageLog) evicts whole units from the front, so
/// after enough steps the history can start with an assistant turn calling tools, the
/// user's task gone. Anthropic wants the first message to use the `user` role; Gemini wants
/// a function-call turn right after a user turn or a function-response turn. The adapters
/// put one user turn with this fixed text before such a turn (see [`anthropic`] and
/// [`gemini`]); it is always the same bytes, so a trimmed history renders the same way on
/// every call and the prompt cache keeps matching.
pub const TRIMMED_HISTORY_NOTE: &str = "(earlier messages of this conversation were trimmed)";
