//! # halo-stream
//!
//! A Halo agent run as the Vercel AI SDK **UI Message Stream protocol (v1)**, the stream that
//! `useChat` and the `ai` package's chat client (`Chat`, `DefaultChatTransport`) read: SSE
//! frames `data: {json}\n\n`, one per part (`start`, `start-step`, `text-delta`,
//! `tool-input-available`, `tool-output-available`, `finish-step`, `finish`, ...), ending
//! with `data: [DONE]\n\n`, sent with the header `x-vercel-ai-ui-message-stream: v1`.
//!
//! - [`to_data_stream`]: any stream of [`AgentEvent`](halo_core::AgentEvent)s (from
//!   [`HaloAgent::stream_text`](halo_core::HaloAgent::stream_text)) to SSE bytes.
//! - [`create_halo_stream`]: runs an agent and returns a `'static + Send` body stream
//!   ([`HaloStream`], items `Result<Bytes, Infallible>`) for axum, hyper or any framework;
//!   send it with [`UI_MESSAGE_STREAM_HEADERS`].
//! - [`UiMessageChunk`]: the parts themselves, for transports other than SSE.
//! - Session stores ([`SessionStore`](halo_core::SessionStore)s for
//!   [`HaloAgentBuilder::session`](halo_core::HaloAgentBuilder::session)), the other way
//!   agent events leave the process: [`journal::JsonlStore`], a JSON Lines file that one
//!   process owns (fsynced per append, a torn last line skipped), and behind the features
//!   `postgres` and `redis` the stores `postgres::PostgresStore` and `redis::RedisStore`
//!   for sessions that many processes share. `docs/sessions.md` says how to pick one;
//!   `testing` starts real PostgreSQL and Redis servers for tests.
//! - `restate` (feature `restate`): a run that outlives its process, as a
//!   [Restate](https://restate.dev) virtual object per session whose every model and tool
//!   call is a journaled step, finished by another worker when its own dies; see
//!   [`docs/durable.md`].
//! - `gateway::Gateway` (feature `gateway`): agents as a web service — an axum router
//!   whose runs outlive their connections, with approvals and steering from the browser and
//!   login; `docs/gateway.md`.
//! - Cache busts found by halo-core's predicted-miss ledger go out as transient
//!   [`CACHE_BUST_PART`] data parts, for the chat's `onData` callback
//!   ([`StreamOptions::with_halo_data`] turns them off), handoffs between agents as
//!   [`HANDOFF_PART`] ones.
//! - Events from inside — the steps, tool calls and text of an agent a tool runs — go out
//!   as the AI SDK's nested tool output: preliminary outputs of the call's tool part, each
//!   the inner agent's `UIMessage` so far ([`nested`]).
//!
//! The frames, the mapping from agent events and a full transcript of a tool-using run are
//! in [`docs/stream-protocol.md`]. The output is checked by the `ai` package itself
//! (`cargo xtask interop`), and `examples/web-chat` serves it to a browser.
//!
//! [`docs/stream-protocol.md`]: https://github.com/halo-rs/halo/blob/main/docs/stream-protocol.md
//! [`docs/durable.md`]: https://github.com/halo-rs/halo/blob/main/docs/durable.md
//!
//! ```
//! use futures::StreamExt;
//! use halo_core::{HaloAgent, testing::ScriptedModel};
//!
//! # futures::executor::block_on(async {
//! let agent = HaloAgent::builder(ScriptedModel::new().text("Hello!")).build();
//! let body = halo_stream::create_halo_stream(Box::new(agent), "Hi");
//! let bytes: Vec<u8> = body.map(|frame| frame.unwrap().to_vec()).concat().await;
//! assert_eq!(
//!     String::from_utf8(bytes).unwrap(),
//!     "data: {\"type\":\"start\"}\n\n\
//!      data: {\"type\":\"start-step\"}\n\n\
//!      data: {\"type\":\"text-start\",\"id\":\"text-1\"}\n\n\
//!      data: {\"type\":\"text-delta\",\"id\":\"text-1\",\"delta\":\"Hello!\"}\n\n\
//!      data: {\"type\":\"text-end\",\"id\":\"text-1\"}\n\n\
//!      data: {\"type\":\"finish-step\"}\n\n\
//!      data: {\"type\":\"finish\",\"finishReason\":\"stop\"}\n\n\
//!      data: [DONE]\n\n"
//! );
//! # });
//! ```

mod body;
mod chunk;
mod encode;
#[cfg(feature = "gateway")]
pub mod gateway;
pub mod journal;
pub mod nested;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "restate")]
pub mod restate;
#[cfg(feature = "testing")]
pub mod testing;

pub use body::{
    HaloStream, UI_MESSAGE_STREAM_HEADERS, create_halo_stream, create_halo_stream_with,
};
pub use chunk::{DONE_FRAME, DataPart, TextPart, UiFinishReason, UiMessageChunk};
pub use encode::{
    CACHE_BUST_PART, DEFAULT_ERROR_TEXT, HANDOFF_PART, HISTORY_REWRITTEN_PART, STEP_USAGE_PART,
    StreamOptions, to_data_stream, to_data_stream_with, to_ui_message_chunks,
};
