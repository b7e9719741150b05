//! Following a chat's runs from a sequence number: the parts after it that the store holds,
//! then the live ones — from the run's buffer and broadcast when the run goes on in this
//! process, by reading the store again every poll interval when another process makes it.
//! The stream ends after the `finish` of the run going on, or at once when nothing goes on.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use super::events::{Part, Stored, TurnState};
use super::{Names, Shared};
use crate::UiMessageChunk;

/// The parts of the chat `names` after `after`; see the [module docs](self).
pub(crate) fn follow(
    shared: Arc<Shared>,
    names: Names,
    after: Option<u64>,
) -> impl Stream<Item = Part> + Send + 'static {
    async_stream::stream! {
        let mut last = after;
        // Polls of the store without anything new, while another process's run goes on.
        let mut idle = Duration::ZERO;
        loop {
            if let Some(live) = shared.runs.get(&names.events) {
                // What came before this run is in the store.
                if last.is_none_or(|l| l + 1 < live.first) {
                    let stored = match Stored::load(shared.store.as_ref(), &names.events).await {
                        Ok(stored) => stored,
                        Err(e) => {
                            for part in failure(last, &e.to_string()) {
                                yield part;
                            }
                            return;
                        }
                    };
                    for part in stored.parts_after(last) {
                        if part.seq >= live.first {
                            break;
                        }
                        last = Some(part.seq);
                        yield part;
                    }
                }
                let (replay, rx) = live.subscribe(last);
                for part in replay {
                    last = Some(part.seq);
                    let end = part.finish;
                    yield part;
                    if end {
                        return;
                    }
                }
                let Some(rx) = rx else { return };
                let mut rx = BroadcastStream::new(rx);
                while let Some(item) = rx.next().await {
                    match item {
                        Ok(part) => {
                            if last.is_some_and(|l| part.seq <= l) {
                                continue;
                            }
                            last = Some(part.seq);
                            let end = part.finish;
                            yield part;
                            if end {
                                return;
                            }
                        }
                        // Fell behind: read the missed parts from the run's buffer.
                        Err(BroadcastStreamRecvError::Lagged(_)) => break,
                    }
                }
                continue;
            }
            let stored = match Stored::load(shared.store.as_ref(), &names.events).await {
                Ok(stored) => stored,
                Err(e) => {
                    for part in failure(last, &e.to_string()) {
                        yield part;
                    }
                    return;
                }
            };
            let parts = stored.parts_after(last);
            let mut ended = false;
            if parts.is_empty() {
                idle += shared.options.poll;
            } else {
                idle = Duration::ZERO;
            }
            for part in parts {
                last = Some(part.seq);
                ended = part.finish;
                yield part;
            }
            if ended || stored.latest_turn().1 != TurnState::Running {
                return;
            }
            if idle > Duration::from_millis(2 * shared.options.lease_ttl_ms) {
                let text = "the run stopped when the process making it did; send a message to go on";
                for part in failure(last, text) {
                    yield part;
                }
                return;
            }
            tokio::time::sleep(shared.options.poll).await;
        }
    }
}

/// The parts that end a follower's stream with an error: `error` and `finish`, numbered as
/// the last part seen, so a client that resumes after them gets what comes next.
fn failure(last: Option<u64>, text: &str) -> [Part; 2] {
    let seq = last.unwrap_or(0);
    let error = UiMessageChunk::Error {
        error_text: text.to_owned(),
    };
    let finish = UiMessageChunk::Finish {
        finish_reason: Some(crate::UiFinishReason::Error),
    };
    [
        Part {
            seq,
            json: error.to_json().into(),
            finish: false,
        },
        Part {
            seq,
            json: finish.to_json().into(),
            finish: true,
        },
    ]
}
