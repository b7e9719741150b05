//! Sessions: a journal of a conversation's committed steps, and the [`SessionStore`] that
//! keeps it.
//!
//! The run engine appends a [`JournalEvent`] for everything that enters the history: each
//! user message (marked when steering injected it), each step (the assistant turn together
//! with all its tool results, its finish reason and usage), each run's outcome, and the
//! prefix fingerprint whenever it changes. The log takes a step only when it is committed,
//! whole; while it is open the journal keeps what is known of it, so a process killed at
//! any moment, or a run paused for the caller, continues elsewhere: the model's turn when
//! its tool calls are about to run ([`JournalEvent::StepOpened`]), each call that starts
//! (when it is not safe to run twice), asks for approval or is approved
//! ([`JournalEvent::Call`]), and each result that does not yet complete the step
//! ([`JournalEvent::ToolResult`]). [`RunState::from_journal`](crate::engine::RunState::from_journal)
//! rebuilds the log and the open step from the events.
//! [`HaloAgentBuilder::session`](crate::HaloAgentBuilder::session) wires a store to an agent:
//! the agent restores the session when built and appends as it runs.
//!
//! A [`SessionStore`] holds many sessions, each named by an id and each a journal whose
//! entries are numbered from 0 (the sequence number). Its contract, which the public
//! conformance suite (`halo_core::conformance`, feature `testing`) checks on any store:
//! - an [`Append`] names the number of entries its writer expects the session to hold; a
//!   store that holds another number writes nothing and answers
//!   [`SessionError::Conflict`], so a second writer is detected, never merged;
//! - [`load`](SessionStore::load) returns a session's entries in order,
//!   [`list`](SessionStore::list) every session ([`SessionInfo`]: id, last update, step
//!   count), [`delete`](SessionStore::delete) removes one;
//! - a session has at most one holder: [`acquire`](SessionStore::acquire) gives an exclusive
//!   [`Lease`] for a time, with a fence token that grows with each new holder;
//!   [`renew`](SessionStore::renew) extends it, [`release`](SessionStore::release) ends it,
//!   and an append under a fence that is no longer the session's current one fails with
//!   [`SessionError::Fenced`], which names the holder. Times are milliseconds since the Unix
//!   epoch from the caller's clock: this crate reads no clock of its own.
//!
//! Stores: [`MemoryStore`] here; in halo-stream, a JSONL file (`halo_stream::journal`, the
//! embedded default) and, behind features, PostgreSQL and Redis. `docs/sessions.md` says how
//! to pick one.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::message::{AssistantMessage, Message, ToolResult};
use crate::model::{FinishReason, Usage};
use crate::prefix::Fingerprint;

mod lease;
mod memory;

pub use lease::LeaseTable;
pub use memory::MemoryStore;

/// The journal format this version writes and reads. A store that finds a newer one answers
/// [`SessionError::NewerFormat`].
///
/// - 1: one session per journal (a JSONL file of bare events), still read;
/// - 2: many sessions per store, each entry numbered by its sequence number in its session.
pub const JOURNAL_FORMAT_VERSION: u32 = 2;

/// One entry of a session journal. Times are milliseconds since the Unix epoch, from the
/// agent's clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum JournalEvent {
    /// The stable prefix the following calls are made with (written when it changes).
    Prefix {
        /// Its fingerprint.
        fingerprint: Fingerprint,
        /// The length of its canonical bytes.
        prefix_bytes: u64,
        /// When.
        at_ms: u64,
    },
    /// A user message entered the log.
    User {
        /// The message.
        message: Message,
        /// Whether steering (or an output guardrail's feedback) injected it at a step
        /// boundary, rather than the caller starting a run with it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        injected: bool,
        /// When.
        at_ms: u64,
    },
    /// A committed step: the assistant turn with every result of its tool calls, in call
    /// order.
    Step {
        /// The turn.
        assistant: AssistantMessage,
        /// Its tool results.
        results: Vec<ToolResult>,
        /// Why the model stopped.
        finish_reason: FinishReason,
        /// The call's token counts.
        usage: Usage,
        /// When.
        at_ms: u64,
    },
    /// The model's turn asked for tool calls: the step is open until its `Step` (or an
    /// `Outcome`, which drops it). Written before any of its calls runs.
    StepOpened {
        /// The turn, as the log will hold it (repaired).
        assistant: AssistantMessage,
        /// Why the model stopped.
        finish_reason: FinishReason,
        /// The call's token counts.
        usage: Usage,
        /// When.
        at_ms: u64,
    },
    /// A call of the open step started, asked for approval, or was approved.
    Call {
        /// The call's id.
        call_id: String,
        /// What happened to it.
        status: CallStatus,
        /// When.
        at_ms: u64,
    },
    /// A result of the open step that did not complete it (the result that completes a
    /// step is in its `Step`).
    ToolResult {
        /// The result.
        result: ToolResult,
        /// When.
        at_ms: u64,
    },
    /// A run ended.
    Outcome {
        /// How.
        outcome: JournalOutcome,
        /// When.
        at_ms: u64,
    },
    /// A context strategy rewrote the history (truncated, evicted or compacted it) before a
    /// model call: from here on the history is `history`, and what the journal held before
    /// is not needed to restore the session.
    CompactBoundary {
        /// The history after the rewrite.
        #[serde(default)]
        history: Vec<Message>,
        /// Indices in `history` of messages injected by steering.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        injected: Vec<usize>,
        /// Indices in `history` of discardable messages.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        discardable: Vec<usize>,
        /// What the rewrite did, for a reader of the journal (what was evicted, summarized
        /// or dropped, and why).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// When.
        at_ms: u64,
    },
    /// The conversation was handed to another agent ([`crate::handoff`]): the steps after
    /// this are `to`'s.
    Handoff {
        /// The agent that handed it over (`None`: an agent without a name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// The agent that continues.
        to: String,
        /// When.
        at_ms: u64,
    },
    /// A workflow's progress ([`crate::workflow`]): its start, a finished step's output.
    /// Agent runs ignore it.
    Workflow {
        /// What happened.
        record: crate::workflow::WorkflowRecord,
        /// When.
        at_ms: u64,
    },
    /// An application's own record, kept in order with a session: what a server streamed
    /// to its clients, who may log in, a message waiting for a run. The run engine never
    /// writes one and skips it when it restores a session, so a journal may hold these
    /// between its own events, or a session may hold nothing else.
    Custom {
        /// What the record is, named by the application (`"halo.part"`, `"acme.audit"`):
        /// a namespace, a dot, a name.
        kind: String,
        /// The record, any JSON value.
        data: serde_json::Value,
        /// When.
        at_ms: u64,
    },
}

/// What happened to a call of an open step ([`JournalEvent::Call`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallStatus {
    /// It was handed to its tool. Journaled for calls not safe to run twice: one found
    /// started without a result is closed as
    /// [`MAY_HAVE_RUN`](crate::request::MAY_HAVE_RUN), never run again.
    Started,
    /// It waits for someone's approval.
    AwaitingApproval {
        /// Why it needs one.
        reason: String,
    },
    /// Someone approved it; it runs when the run continues.
    Approved,
}

/// How a run ended, as journaled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum JournalOutcome {
    /// The model answered.
    Answered,
    /// The run used its `max_steps`.
    MaxStepsReached,
    /// The open step was dropped by the caller
    /// ([`HaloAgent::discard_pending`](crate::HaloAgent::discard_pending)).
    Discarded,
    /// The run failed (the message of its error); `resume` can continue after a retryable
    /// model error.
    Error {
        /// The error's message.
        message: String,
    },
}

/// Why a session store failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Reading or writing the store failed.
    #[error("session store {location}: {message}")]
    Io {
        /// The file or store.
        location: String,
        /// What went wrong.
        message: String,
    },
    /// A complete entry of the journal could not be read (a torn *last* line is not this:
    /// stores skip it with a warning).
    #[error(
        "session journal {location}, entry {entry}: {message}; the journal is damaged before its end, so it was not loaded"
    )]
    Corrupt {
        /// The file or store.
        location: String,
        /// The entry's number, from 1.
        entry: usize,
        /// What was wrong with it.
        message: String,
    },
    /// The journal was written by a newer Halo.
    #[error(
        "session journal {location} has format {found}, newer than the {supported} this version reads; open it with a newer Halo"
    )]
    NewerFormat {
        /// The file or store.
        location: String,
        /// The format found.
        found: u32,
        /// [`JOURNAL_FORMAT_VERSION`].
        supported: u32,
    },
    /// The session does not hold the number of entries the append expected: another writer
    /// appended to it (or deleted it) since this one loaded it. Nothing was written.
    #[error(
        "session {} holds {found} entries, not the {expected} this writer expected: another writer changed it; nothing was written — load the session again before appending",
        name(.location, .session)
    )]
    Conflict {
        /// The store.
        location: String,
        /// The session's id.
        session: String,
        /// The number of entries the append expected.
        expected: u64,
        /// The number the session holds.
        found: u64,
    },
    /// Someone else holds the session: its lease has not expired, or (for a store that one
    /// process owns, such as a JSONL file) another process has it open.
    #[error(
        "session {} is in use by {holder}; wait until it finishes, or use another session",
        name(.location, .session)
    )]
    InUse {
        /// The store.
        location: String,
        /// The session's id (empty when the whole store is in use).
        session: String,
        /// Who holds it: the lease's owner, or `process PID`.
        holder: String,
        /// When its lease ends unless renewed, in ms since the Unix epoch (`None`: while
        /// the holder lives).
        expires_at_ms: Option<u64>,
    },
    /// The writer's lease is no longer the session's current one: it was taken over (after
    /// it expired) or released. Nothing was written; the writer must stop.
    #[error(
        "the lease on session {} with fence {fence} is stale: {}; nothing was written — this writer must stop and load the session again",
        name(.location, .session),
        holder.as_ref().map_or_else(|| "it was released".to_string(), |h| format!("the session is held by {h} with fence {current}"))
    )]
    Fenced {
        /// The store.
        location: String,
        /// The session's id.
        session: String,
        /// The writer's fence token.
        fence: u64,
        /// Who holds the session now (`None`: nobody; the lease was released).
        holder: Option<String>,
        /// The session's current fence token.
        current: u64,
    },
}

/// How an error names a session: the store alone for its default session (or when the whole
/// store is meant), else the id and the store.
fn name(location: &str, session: &str) -> String {
    if session.is_empty() || session == DEFAULT_SESSION {
        location.to_string()
    } else {
        format!("{session} in {location}")
    }
}

/// The session an agent journals into when none is named.
pub const DEFAULT_SESSION: &str = "default";

/// One append: the events, the session they go to, and the checks the store makes first.
///
/// ```
/// use halo_core::session::{Append, JournalEvent, JournalOutcome};
///
/// let events = [JournalEvent::Outcome { outcome: JournalOutcome::Answered, at_ms: 5 }];
/// let append = Append::new("s-1", 3, &events, 1_700_000_000_000).fenced(2);
/// assert_eq!((append.expected, append.fence), (3, Some(2)));
/// assert_eq!(append.steps(), 0);
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Append<'a> {
    /// The session's id.
    pub session: &'a str,
    /// How many entries the writer expects the session to hold now: the sequence number the
    /// first event gets. A session that holds another number is a
    /// [`SessionError::Conflict`].
    pub expected: u64,
    /// The events, in order. An empty append writes nothing but still checks `expected`.
    pub events: &'a [JournalEvent],
    /// The writer's lease fence token ([`Lease::fence`]), when it holds one: the store
    /// refuses the append with [`SessionError::Fenced`] unless it is the session's current
    /// lease. `None`: no lease check (the sequence check still applies).
    pub fence: Option<u64>,
    /// When, in ms since the Unix epoch (the caller's clock): the session's last update.
    pub at_ms: u64,
}

impl<'a> Append<'a> {
    /// `events` for `session` at sequence number `expected`, written at `at_ms`.
    pub fn new(session: &'a str, expected: u64, events: &'a [JournalEvent], at_ms: u64) -> Self {
        Append {
            session,
            expected,
            events,
            fence: None,
            at_ms,
        }
    }

    /// Fences the append with a lease's token.
    pub fn fenced(mut self, fence: u64) -> Self {
        self.fence = Some(fence);
        self
    }

    /// The number of [`JournalEvent::Step`]s among the events (what [`SessionInfo::steps`]
    /// counts).
    pub fn steps(&self) -> u64 {
        self.events
            .iter()
            .filter(|e| matches!(e, JournalEvent::Step { .. }))
            .count() as u64
    }
}

/// One session of a store, as [`SessionStore::list`] gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The session's id.
    pub id: String,
    /// The `at_ms` of its last append, in ms since the Unix epoch.
    pub updated_ms: u64,
    /// How many steps ([`JournalEvent::Step`]) its journal holds.
    pub steps: u64,
    /// How many entries its journal holds: the sequence number of the next one.
    pub entries: u64,
}

/// An exclusive hold on one session, given by [`SessionStore::acquire`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The session's id.
    pub session: String,
    /// Who holds it (for example `process 4242 on build-7`): what
    /// [`SessionError::InUse`] and [`SessionError::Fenced`] tell others.
    pub owner: String,
    /// The fence token: greater than that of every earlier lease on the session. Appends
    /// carry it ([`Append::fenced`]).
    pub fence: u64,
    /// When the lease ends unless renewed, in ms since the Unix epoch (the caller's clock).
    pub expires_at_ms: u64,
}

/// Where sessions' journals are kept. Object-safe: agents hold an `Arc<dyn SessionStore>`.
/// The contract is in the [module docs](self); `halo_core::conformance` (feature `testing`)
/// checks a store against it.
///
/// # Cancel safety
/// `append` must either write every event or none that a later `load` returns as complete
/// (a torn last entry is skipped on load).
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Appends events to a session at the sequence number [`Append::expected`], durably:
    /// when this returns `Ok`, a crash loses none of them. Returns the number of entries the
    /// session holds after it (the next append's `expected`).
    ///
    /// # Errors
    /// [`SessionError::Conflict`] when the session holds another number of entries,
    /// [`SessionError::Fenced`] when `fence` is not the session's current lease, and then
    /// nothing is written; [`SessionError::NewerFormat`] for a journal of a newer format,
    /// [`SessionError::Corrupt`] for a store that will not write after damage,
    /// [`SessionError::Io`].
    async fn append(&self, append: Append<'_>) -> Result<u64, SessionError>;

    /// Every event of a session, in order; empty for a session that does not exist.
    ///
    /// # Errors
    /// [`SessionError::Corrupt`] for a damaged entry before the end,
    /// [`SessionError::NewerFormat`] for a journal of a newer format, [`SessionError::Io`].
    async fn load(&self, session: &str) -> Result<Vec<JournalEvent>, SessionError>;

    /// Every session that holds at least one entry, in no particular order.
    ///
    /// # Errors
    /// [`SessionError::Io`], [`SessionError::Corrupt`].
    async fn list(&self) -> Result<Vec<SessionInfo>, SessionError>;

    /// Removes a session's journal (nothing for one that does not exist). Its lease, if
    /// any, stays, so fence tokens never go back.
    ///
    /// # Errors
    /// [`SessionError::Io`].
    async fn delete(&self, session: &str) -> Result<(), SessionError>;

    /// Takes the session's lease for `owner` until `now_ms + ttl_ms`, with a new fence
    /// token. Succeeds when nobody holds it, its lease expired (`expires_at_ms <= now_ms`),
    /// or `owner` holds it already.
    ///
    /// # Errors
    /// [`SessionError::InUse`] naming the holder, [`SessionError::Io`].
    async fn acquire(
        &self,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Lease, SessionError>;

    /// Extends a lease to `now_ms + ttl_ms`, keeping its fence token. A lease that expired
    /// but that nobody took over can still be renewed.
    ///
    /// # Errors
    /// [`SessionError::Fenced`] when the lease is no longer current, [`SessionError::Io`].
    async fn renew(&self, lease: &Lease, ttl_ms: u64, now_ms: u64) -> Result<Lease, SessionError>;

    /// Ends a lease, so another owner can acquire the session at once. Releasing a lease
    /// that is no longer current does nothing.
    ///
    /// # Errors
    /// [`SessionError::Io`].
    async fn release(&self, lease: &Lease) -> Result<(), SessionError>;
}
