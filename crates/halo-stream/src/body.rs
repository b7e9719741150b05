//! An HTTP response body for any server framework: [`create_halo_stream`] runs an agent and
//! yields the UI Message Stream's bytes; [`UI_MESSAGE_STREAM_HEADERS`] are the headers to
//! send with them.

use std::convert::Infallible;
use std::fmt;
use std::ops::DerefMut;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _};
use halo_core::HaloAgent;

use crate::encode::{StreamOptions, to_data_stream_with};

/// The response headers of a UI Message Stream, as `(name, value)` pairs (lowercase names):
/// `content-type: text/event-stream`, `cache-control: no-cache`,
/// `x-vercel-ai-ui-message-stream: v1` (the protocol marker the `ai` package sends) and
/// `x-accel-buffering: no` (so nginx does not hold frames back).
///
/// The `ai` package also sends `connection: keep-alive`; it is left out here because it is
/// forbidden in HTTP/2 and HTTP/1.1 keeps connections alive anyway.
pub const UI_MESSAGE_STREAM_HEADERS: [(&str, &str); 4] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// A response body: the SSE bytes of one agent run, `'static` and `Send`.
///
/// It is a `Stream<Item = Result<Bytes, Infallible>>`, the shape `axum::body::Body::from_stream`,
/// `hyper`'s `StreamBody` (after mapping to frames) and `actix-web`'s `streaming` take. Each
/// item is one whole SSE frame. Dropping the body cancels the run (see
/// [`HaloAgent::stream_text`]).
pub struct HaloStream {
    inner: BoxStream<'static, Bytes>,
}

impl fmt::Debug for HaloStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HaloStream").finish_non_exhaustive()
    }
}

impl Stream for HaloStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx).map(|frame| frame.map(Ok))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

/// Runs `agent` on `input` and returns the run as a UI Message Stream body, with the default
/// [`StreamOptions`]. Send it with [`UI_MESSAGE_STREAM_HEADERS`].
///
/// `agent` is anything that hands out `&mut HaloAgent` and can move into the body: a
/// `Box<HaloAgent>` for an agent made per request, or an owned mutex guard
/// (`tokio::sync::Mutex::lock_owned`) for an agent kept across the turns of a chat; the run's
/// messages stay in its log. The run starts when the body is first polled.
///
/// ```
/// use futures::StreamExt;
/// use halo_core::{HaloAgent, testing::ScriptedModel};
///
/// # futures::executor::block_on(async {
/// let agent = HaloAgent::builder(ScriptedModel::new().text("Hi!")).build();
/// let body = halo_stream::create_halo_stream(Box::new(agent), "Hello");
/// // In an axum handler: `(UI_MESSAGE_STREAM_HEADERS.map(..), Body::from_stream(body))`.
/// let frames: Vec<_> = body.map(|f| f.unwrap()).collect().await;
/// assert_eq!(&frames.last().unwrap()[..], b"data: [DONE]\n\n");
/// # });
/// ```
pub fn create_halo_stream<A>(agent: A, input: impl Into<String>) -> HaloStream
where
    A: DerefMut<Target = HaloAgent> + Send + 'static,
{
    create_halo_stream_with(agent, input, StreamOptions::default())
}

/// [`create_halo_stream`] with options (message id, reasoning, Halo's data parts, error text).
pub fn create_halo_stream_with<A>(
    agent: A,
    input: impl Into<String>,
    options: StreamOptions,
) -> HaloStream
where
    A: DerefMut<Target = HaloAgent> + Send + 'static,
{
    let input = input.into();
    let events = async_stream::stream! {
        let mut agent = agent;
        let mut run = std::pin::pin!(agent.stream_text(input));
        while let Some(event) = run.next().await {
            yield event;
        }
    };
    HaloStream {
        inner: to_data_stream_with(events, options).boxed(),
    }
}
