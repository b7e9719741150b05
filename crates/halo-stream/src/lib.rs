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
//! - [`journal::JsonlStore`]: the other way agent events leave the process, to disk — a
//!   session journal in a JSON Lines file for
//!   [`HaloAgentBuilder::session`](halo_core::HaloAgentBuilder::session), fsynced per append,
//!   a torn last line skipped.
//! - Cache busts found by halo-core's predicted-miss ledger go out as transient
//!   [`CACHE_BUST_PART`] data parts, for the chat's `onData` callback
//!   ([`StreamOptions::with_halo_data`] turns them off).
//!
//! The frames, the mapping from agent events and a full transcript of a tool-using run are
//! in [`docs/stream-protocol.md`]. The output is checked by the `ai` package itself
//! (`cargo xtask interop`), and `examples/web-chat` serves it to a browser.
//!
//! [`docs/stream-protocol.md`]: https://github.com/halo-rs/halo/blob/main/docs/stream-protocol.md
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
pub mod journal;

pub use body::{
    HaloStream, UI_MESSAGE_STREAM_HEADERS, create_halo_stream, create_halo_stream_with,
};
pub use chunk::{DONE_FRAME, DataPart, UiFinishReason, UiMessageChunk};
pub use encode::{
    CACHE_BUST_PART, DEFAULT_ERROR_TEXT, StreamOptions, to_data_stream, to_data_stream_with,
    to_ui_message_chunks,
};
