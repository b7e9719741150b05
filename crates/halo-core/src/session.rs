//! Sessions: a journal of a conversation's committed steps, and the [`SessionStore`] that
//! keeps it.
//!
//! The run engine appends a [`JournalEvent`] for everything that enters the history: each
//! user message (marked when steering injected it), each step (the assistant turn together
//! with all its tool results, its finish reason and usage), each run's outcome, and the
//! prefix fingerprint whenever it changes. A step is journaled when it is committed, never
//! half: a process killed at any moment loses at most the step in flight, and
//! [`RunState::from_journal`](crate::engine::RunState::from_journal) rebuilds the log from
//! the events. [`HaloAgentBuilder::session`](crate::HaloAgentBuilder::session) wires a store
//! to an agent: the agent restores the session when built and appends as it runs.
//!
//! Stores: [`MemoryStore`] here; a JSONL file store (one event per line, fsynced per append,
//! a torn last line skipped with a warning) is `halo_stream::journal::JsonlStore`.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::message::{AssistantMessage, Message, ToolResult};
use crate::model::{FinishReason, Usage};
use crate::prefix::Fingerprint;

/// The journal format this version writes and reads. A store that finds a newer one answers
/// [`SessionError::NewerFormat`].
pub const JOURNAL_FORMAT_VERSION: u32 = 1;

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
        /// When.
        at_ms: u64,
    },
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
}

/// Where a session's journal is kept. Object-safe: agents hold an `Arc<dyn SessionStore>`.
///
/// # Cancel safety
/// `append` must either write every event or none that a later `load` returns as complete
/// (a torn last entry is skipped on load).
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Appends events, durably: when this returns `Ok`, a crash loses none of them.
    ///
    /// # Errors
    /// [`SessionError::Io`] when they could not be written.
    async fn append(&self, events: &[JournalEvent]) -> Result<(), SessionError>;

    /// Every event written so far, in order.
    ///
    /// # Errors
    /// [`SessionError::Corrupt`] for a damaged entry before the end,
    /// [`SessionError::NewerFormat`] for a journal of a newer format, [`SessionError::Io`].
    async fn load(&self) -> Result<Vec<JournalEvent>, SessionError>;
}

/// A session store in memory (tests, short-lived agents). Clones share the journal.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    events: Arc<Mutex<Vec<JournalEvent>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The events appended so far.
    pub fn events(&self) -> Vec<JournalEvent> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn append(&self, events: &[JournalEvent]) -> Result<(), SessionError> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(events);
        Ok(())
    }

    async fn load(&self) -> Result<Vec<JournalEvent>, SessionError> {
        Ok(self.events())
    }
}
