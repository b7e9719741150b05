//! A chat's events: the stream parts of its runs, numbered and kept in the store beside the
//! chat's journal (the session `chat/USER/CHAT/events`), with the records that frame them.
//!
//! | kind | data | |
//! | --- | --- | --- |
//! | `halo.turn` | `{"messageId"}` | a new user message starts an assistant message |
//! | `halo.run` | `{}` | a paused run goes on (its answers came) |
//! | `halo.part` | a UI Message Stream part | sent to clients as `id: SEQ` + `data: JSON` |
//! | `halo.end` | `{"paused"}` | a run stopped: paused for approvals or results, or done |
//!
//! A part's number is its sequence number in that session, so a client that saw part `N`
//! asks for `after=N`. A run's parts go to its followers at once and to the store in
//! batches ([`Writer`]); a process that follows a run another process makes reads them
//! from the store.

use std::sync::Arc;

use halo_core::session::{Append, JournalEvent, SessionStore};
use serde_json::{Value, json};

use super::{GatewayError, now_ms};
use crate::UiMessageChunk;

/// The kind of a part record.
pub(crate) const PART: &str = "halo.part";
/// The kind of a turn record.
pub(crate) const TURN: &str = "halo.turn";
/// The kind of the record that starts a paused run again.
pub(crate) const RUN: &str = "halo.run";
/// The kind of a run's last record.
pub(crate) const END: &str = "halo.end";

/// One numbered part, as followers get it: its sequence number, its JSON text, and
/// whether it is a `finish` (the end of a run's stream).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Part {
    pub seq: u64,
    pub json: Arc<str>,
    pub finish: bool,
}

impl Part {
    fn of(seq: u64, value: &Value) -> Part {
        Part {
            seq,
            json: value.to_string().into(),
            finish: value.get("type").and_then(Value::as_str) == Some("finish"),
        }
    }

    /// The SSE frame: `id: SEQ\ndata: JSON\n\n`.
    pub(crate) fn frame(&self) -> bytes::Bytes {
        bytes::Bytes::from(format!("id: {}\ndata: {}\n\n", self.seq, self.json))
    }
}

/// Where the latest turn of a chat stands, read from its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TurnState {
    /// No turn yet.
    None,
    /// A run is going on (or stopped without its last record: its process died).
    Running,
    /// The last run paused for approvals or the caller's results.
    Paused,
    /// The last run is over.
    Done,
}

/// The events of a chat as read from the store.
#[derive(Debug, Default)]
pub(crate) struct Stored {
    pub events: Vec<JournalEvent>,
}

impl Stored {
    pub(crate) async fn load(
        store: &dyn SessionStore,
        session: &str,
    ) -> Result<Self, GatewayError> {
        Ok(Stored {
            events: store.load(session).await?,
        })
    }

    /// How many records there are: the next record's sequence number.
    pub(crate) fn len(&self) -> u64 {
        self.events.len() as u64
    }

    /// The parts numbered after `after`.
    pub(crate) fn parts_after(&self, after: Option<u64>) -> Vec<Part> {
        let from = after.map_or(0, |a| a + 1);
        self.events
            .iter()
            .enumerate()
            .skip(from as usize)
            .filter_map(|(seq, e)| match e {
                JournalEvent::Custom { kind, data, .. } if kind == PART => {
                    Some(Part::of(seq as u64, data))
                }
                _ => None,
            })
            .collect()
    }

    /// The sequence number of the latest turn record and where that turn stands.
    pub(crate) fn latest_turn(&self) -> (Option<u64>, TurnState) {
        let mut start = None;
        let mut state = TurnState::None;
        for (seq, event) in self.events.iter().enumerate() {
            let JournalEvent::Custom { kind, data, .. } = event else {
                continue;
            };
            match kind.as_str() {
                TURN => {
                    start = Some(seq as u64);
                    state = TurnState::Running;
                }
                PART | RUN if state != TurnState::None => state = TurnState::Running,
                END => {
                    state = if data.get("paused").and_then(Value::as_bool) == Some(true) {
                        TurnState::Paused
                    } else {
                        TurnState::Done
                    };
                }
                _ => {}
            }
        }
        (start, state)
    }

    /// The message id of the latest turn.
    pub(crate) fn latest_message_id(&self) -> Option<String> {
        self.events.iter().rev().find_map(|e| match e {
            JournalEvent::Custom { kind, data, .. } if kind == TURN => data
                .get("messageId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        })
    }
}

/// Appends a run's records to the events session in batches, numbering them as they come
/// (the run's process is the only writer while it holds the chat's lease).
pub(crate) struct Writer {
    store: Arc<dyn SessionStore>,
    session: String,
    /// The number of records written.
    written: u64,
    pending: Vec<JournalEvent>,
}

impl Writer {
    pub(crate) fn new(store: Arc<dyn SessionStore>, session: String, len: u64) -> Self {
        Writer {
            store,
            session,
            written: len,
            pending: Vec::new(),
        }
    }

    /// The sequence number the next record gets.
    pub(crate) fn next_seq(&self) -> u64 {
        self.written + self.pending.len() as u64
    }

    /// Queues a record; returns its sequence number.
    pub(crate) fn push(&mut self, kind: &str, data: Value) -> u64 {
        let seq = self.next_seq();
        self.pending.push(JournalEvent::Custom {
            kind: kind.into(),
            data,
            at_ms: now_ms(),
        });
        seq
    }

    /// Queues a part; returns it numbered.
    pub(crate) fn part(&mut self, chunk: &UiMessageChunk) -> Part {
        let value = serde_json::to_value(chunk).unwrap_or_else(
            |e| json!({"type": "error", "errorText": format!("cannot encode a stream part: {e}")}),
        );
        let seq = self.push(PART, value.clone());
        Part {
            seq,
            json: chunk.to_json().into(),
            finish: matches!(chunk, UiMessageChunk::Finish { .. }),
        }
    }

    /// Writes what is queued.
    ///
    /// # Errors
    /// The store's; the records stay queued.
    pub(crate) async fn flush(&mut self) -> Result<(), GatewayError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let append = Append::new(&self.session, self.written, &self.pending, now_ms());
        self.written = self.store.append(append).await?;
        self.pending.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custom(kind: &str, data: Value) -> JournalEvent {
        JournalEvent::Custom {
            kind: kind.into(),
            data,
            at_ms: 0,
        }
    }

    #[test]
    fn the_latest_turn_and_its_parts_are_found_by_number() {
        let mut stored = Stored::default();
        assert_eq!(stored.latest_turn(), (None, TurnState::None));
        stored.events = vec![
            custom(TURN, json!({"messageId": "a1"})),
            custom(PART, json!({"type": "start"})),
            custom(PART, json!({"type": "finish"})),
            custom(END, json!({"paused": false})),
            custom(TURN, json!({"messageId": "a2"})),
            custom(PART, json!({"type": "start"})),
        ];
        assert_eq!(stored.latest_turn(), (Some(4), TurnState::Running));
        assert_eq!(stored.latest_message_id().as_deref(), Some("a2"));
        let parts = stored.parts_after(Some(1));
        assert_eq!(parts.iter().map(|p| p.seq).collect::<Vec<_>>(), [2, 5]);
        assert!(parts[0].finish && !parts[1].finish);
        assert_eq!(
            &parts[1].frame()[..],
            b"id: 5\ndata: {\"type\":\"start\"}\n\n"
        );
        stored.events.push(custom(END, json!({"paused": true})));
        assert_eq!(stored.latest_turn(), (Some(4), TurnState::Paused));
    }
}
