//! Runs apart from connections: a run is a task that holds its chat's lease, drives the
//! agent, numbers each stream part, hands it to the run's live followers at once
//! (`tokio::sync::broadcast`, read through `tokio-stream`'s `BroadcastStream`) and to the
//! store in batches; steering messages reach it through a channel read as a
//! `ReceiverStream`. A client that goes away leaves the run going.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use halo_core::session::{JournalEvent, Lease};
use halo_core::{AgentEvent, GenerateTextResult, HaloAgent};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;

use super::events::{END, Part, RUN, Stored, TURN, Writer};
use super::{Names, Shared, now_ms};
use crate::{StreamOptions, UiMessageChunk, to_ui_message_chunks};

/// Parts a live follower may fall behind by before it re-reads them from the run's buffer.
const FANOUT: usize = 1024;

/// How often queued parts are written to the store, at most.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// A run going on in this process.
pub(crate) struct Live {
    /// The sequence number of the run's first record.
    pub first: u64,
    state: Mutex<LiveState>,
    /// Steering messages for the run.
    steer: mpsc::Sender<String>,
}

struct LiveState {
    parts: Vec<Part>,
    /// Whether steering messages are taken: until the run's last event.
    steerable: bool,
    /// Once the run's last event came: whether it paused.
    ended: Option<bool>,
    /// Dropped when the run ends, which ends the followers' receivers.
    tx: Option<broadcast::Sender<Part>>,
}

impl Live {
    fn lock(&self) -> std::sync::MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, part: Part) {
        let mut state = self.lock();
        if let Some(tx) = &state.tx {
            // No receiver is fine: the part is in the buffer and the store.
            let _ = tx.send(part.clone());
        }
        state.parts.push(part);
    }

    fn end(&self) {
        self.lock().tx = None;
    }

    /// Queues a steering message for the run; `false` once the run made its last step.
    pub(crate) fn steer(&self, text: String) -> bool {
        let state = self.lock();
        state.steerable && self.steer.try_send(text).is_ok()
    }

    fn stop_steering(&self) {
        self.lock().steerable = false;
    }

    /// Whether the run is over without a pause (its last records may not be written yet).
    pub(crate) fn done(&self) -> bool {
        self.lock().ended == Some(false)
    }

    /// The run's parts after `after`, and a receiver of the ones to come (none once the
    /// run ended). Taken under one lock, so nothing is missed or sent twice.
    pub(crate) fn subscribe(
        &self,
        after: Option<u64>,
    ) -> (Vec<Part>, Option<broadcast::Receiver<Part>>) {
        let state = self.lock();
        let parts = state
            .parts
            .iter()
            .filter(|p| after.is_none_or(|a| p.seq > a))
            .cloned()
            .collect();
        (parts, state.tx.as_ref().map(broadcast::Sender::subscribe))
    }
}

/// The runs going on in this process, by the session of their events.
#[derive(Default)]
pub(crate) struct Runs {
    live: Mutex<HashMap<String, Arc<Live>>>,
}

impl Runs {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run of the chat whose events are `events`, if one is going on here.
    pub(crate) fn get(&self, events: &str) -> Option<Arc<Live>> {
        self.map().get(events).cloned()
    }
}

/// A chat ready for a run: its lease held, its agent built and restored, its events read.
pub(crate) struct Prepared {
    pub names: Names,
    pub agent: HaloAgent,
    pub lease: Lease,
    pub events: Stored,
    /// The number of entries of the chat's inbox (shared stores): later ones are for this run.
    pub inbox: u64,
}

/// How a run begins.
pub(crate) enum Start {
    /// A new user message: a new assistant message.
    New { text: String },
    /// The paused run goes on (its answers were fed): the same assistant message, with the
    /// approval responses first.
    Continue { responses: Vec<UiMessageChunk> },
}

/// How a run ended, for a caller that waits for it.
pub(crate) type RunEnd = Result<GenerateTextResult, String>;

/// A run just spawned.
pub(crate) struct Started {
    /// Follow from after this number to get the run's parts.
    pub after: Option<u64>,
    /// How it ended.
    pub end: oneshot::Receiver<RunEnd>,
}

impl Shared {
    /// Spawns the run of `prepared`, streamed with `options` (the message id is set here),
    /// once its first record is in the store: from then on every process sees it going on.
    ///
    /// # Errors
    /// The store's, when the first record cannot be written; the lease is released then.
    pub(crate) async fn spawn(
        self: &Arc<Self>,
        prepared: Prepared,
        start: Start,
        options: StreamOptions,
    ) -> Result<Started, super::GatewayError> {
        let Prepared {
            names,
            agent,
            lease,
            events,
            inbox,
        } = prepared;
        let mut writer = Writer::new(self.store.clone(), names.events.clone(), events.len());
        let (message_id, after) = match &start {
            Start::New { .. } => {
                let turns = events
                    .events
                    .iter()
                    .filter(|e| matches!(e, JournalEvent::Custom { kind, .. } if kind == TURN))
                    .count();
                let id = format!("a{}", turns + 1);
                let seq = writer.push(TURN, json!({ "messageId": id }));
                (id, Some(seq))
            }
            Start::Continue { .. } => {
                let seq = writer.push(RUN, json!({}));
                (
                    events.latest_message_id().unwrap_or_else(|| "a0".into()),
                    Some(seq),
                )
            }
        };
        if let Err(e) = writer.flush().await {
            let _ = self.store.release(&lease).await;
            return Err(e);
        }
        let (steer_tx, steer_rx) = mpsc::channel(64);
        let (tx, _) = broadcast::channel(FANOUT);
        let live = Arc::new(Live {
            first: writer.next_seq(),
            state: Mutex::new(LiveState {
                parts: Vec::new(),
                steerable: true,
                ended: None,
                tx: Some(tx),
            }),
            steer: steer_tx,
        });
        self.runs.map().insert(names.events.clone(), live.clone());
        let (end_tx, end) = oneshot::channel();
        let shared = self.clone();
        let run = Run {
            shared,
            names,
            lease,
            live,
            writer,
            inbox_seen: inbox,
        };
        tokio::spawn(run.go(
            agent,
            start,
            options.with_message_id(message_id),
            steer_rx,
            end_tx,
        ));
        Ok(Started { after, end })
    }
}

/// Runs the agent and sends its stream parts to the run's task; notes how the run ended
/// (and that it takes no more steering) as soon as its last event comes.
async fn drive(
    mut agent: HaloAgent,
    start: Start,
    options: StreamOptions,
    chunks: mpsc::Sender<UiMessageChunk>,
    finish: Arc<Mutex<Option<RunEnd>>>,
    live: Arc<Live>,
) {
    let events = match start {
        Start::New { text } => agent.stream_text(text).boxed(),
        Start::Continue { .. } => agent.resume_stream().boxed(),
    };
    let events = events.inspect(move |event| {
        let end = match event {
            Ok(AgentEvent::Finish(result)) => Some(Ok((**result).clone())),
            Err(e) => Some(Err(e.to_string())),
            _ => None,
        };
        if let Some(end) = end {
            let paused = end
                .as_ref()
                .is_ok_and(|r| !r.pending_approvals.is_empty() || !r.pending_tool_calls.is_empty());
            live.lock().ended = Some(paused);
            live.stop_steering();
            *finish.lock().unwrap_or_else(|p| p.into_inner()) = Some(end);
        }
    });
    let mut parts = std::pin::pin!(to_ui_message_chunks(events, options));
    while let Some(chunk) = parts.next().await {
        if chunks.send(chunk).await.is_err() {
            return;
        }
    }
}

/// One run's task.
struct Run {
    shared: Arc<Shared>,
    names: Names,
    lease: Lease,
    live: Arc<Live>,
    writer: Writer,
    /// Inbox entries already taken (shared stores).
    inbox_seen: u64,
}

impl Run {
    fn publish(&mut self, chunk: &UiMessageChunk) {
        let part = self.writer.part(chunk);
        self.live.publish(part);
    }

    async fn go(
        mut self,
        agent: HaloAgent,
        start: Start,
        options: StreamOptions,
        steer_rx: mpsc::Receiver<String>,
        end_tx: oneshot::Sender<RunEnd>,
    ) {
        let steering = agent.steering();
        let mut steer = ReceiverStream::new(steer_rx);
        let finish: Arc<Mutex<Option<RunEnd>>> = Arc::default();
        let ttl = self.shared.options.lease_ttl_ms;
        let mut renew = tokio::time::interval(Duration::from_millis(ttl / 3));
        let mut flush = tokio::time::interval(FLUSH_EVERY);
        let mut inbox = tokio::time::interval(self.shared.options.poll);
        let mut stopped: Option<String> = None;
        let mut responses = match &start {
            Start::Continue { responses } => responses.clone(),
            Start::New { .. } => Vec::new(),
        };
        // The agent runs in a task of its own: its store writes are never held up by this
        // task's (a transaction left waiting while this task renews the lease it locks
        // would never end).
        let (chunk_tx, chunk_rx) = mpsc::channel(FANOUT);
        let driver = tokio::spawn(drive(
            agent,
            start,
            options,
            chunk_tx,
            finish.clone(),
            self.live.clone(),
        ));
        let mut chunks = ReceiverStream::new(chunk_rx);
        loop {
            tokio::select! {
                chunk = chunks.next() => {
                    let Some(chunk) = chunk else { break };
                    self.publish(&chunk);
                    if matches!(chunk, UiMessageChunk::Start { .. }) {
                        for response in std::mem::take(&mut responses) {
                            self.publish(&response);
                        }
                    }
                }
                Some(text) = steer.next() => steering.send(text),
                _ = flush.tick() => {
                    if let Err(e) = self.writer.flush().await {
                        tracing::warn!(chat = %self.names.journal, "cannot write the run's events: {e}");
                    }
                }
                _ = renew.tick() => {
                    if let Err(e) = self.shared.store.renew(&self.lease, ttl, now_ms()).await {
                        stopped = Some(format!("the chat's lease was lost: {e}"));
                        break;
                    }
                }
                _ = inbox.tick(), if self.shared.options.shared => {
                    for text in self.take_inbox().await {
                        steering.send(text);
                    }
                }
            }
        }
        if let Some(reason) = &stopped {
            // The run was dropped mid-way: its stream still ends properly.
            driver.abort();
            self.publish(&UiMessageChunk::Error {
                error_text: reason.clone(),
            });
            self.publish(&UiMessageChunk::Finish {
                finish_reason: Some(crate::UiFinishReason::Error),
            });
        }
        // The agent is dropped with its task.
        let _ = driver.await;
        self.live.stop_steering();
        let undelivered = steering.pending() + steer.into_inner().len();
        if undelivered > 0 {
            tracing::warn!(chat = %self.names.journal, "{undelivered} steering messages came after the run's last step and were not delivered");
        }
        let end = finish
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| Err(stopped.unwrap_or_else(|| "the run stopped".into())));
        let paused = end
            .as_ref()
            .is_ok_and(|r| !r.pending_approvals.is_empty() || !r.pending_tool_calls.is_empty());
        self.writer.push(END, json!({ "paused": paused }));
        for attempt in 0..5u64 {
            match self.writer.flush().await {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(chat = %self.names.journal, "cannot write the run's events (attempt {}): {e}", attempt + 1);
                    tokio::time::sleep(Duration::from_millis(200 * (attempt + 1))).await;
                }
            }
        }
        if let Err(e) = self.shared.store.release(&self.lease).await {
            tracing::warn!(chat = %self.names.journal, "cannot release the chat's lease: {e}");
        }
        self.live.end();
        self.shared.runs.map().remove(&self.names.events);
        let _ = end_tx.send(end);
    }

    /// Steering messages other processes left in the chat's inbox since the last look.
    async fn take_inbox(&mut self) -> Vec<String> {
        let events = match self.shared.store.load(&self.names.inbox).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(chat = %self.names.journal, "cannot read the chat's inbox: {e}");
                return Vec::new();
            }
        };
        let seen = std::mem::replace(&mut self.inbox_seen, events.len() as u64);
        events
            .iter()
            .skip(seen as usize)
            .filter_map(|e| match e {
                JournalEvent::Custom { kind, data, .. } if kind == super::STEER => {
                    data.get("text").and_then(Value::as_str).map(str::to_owned)
                }
                _ => None,
            })
            .collect()
    }
}
