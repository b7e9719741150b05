//! [`JsonlStore`]: session journals in a JSON Lines file, the sessions' way to disk (the UI
//! stream is their way to a browser).
//!
//! The file is a header line, then one entry per line, each a compact JSON object ending in
//! `\n`: the session's id, the entry's sequence number in its session (from 0), the append's
//! time (ms since the Unix epoch) and the [`JournalEvent`]:
//!
//! ```text
//! {"type":"halo_journal","version":2}
//! {"session":"default","seq":0,"at_ms":1796128137847,"event":{"type":"user","message":{"role":"user","content":[{"type":"text","text":"What do the notes say?"}]},"at_ms":1796128137847}}
//! {"session":"default","seq":1,"at_ms":1796128137861,"event":{"type":"prefix","fingerprint":"c47c8c3b…","prefix_bytes":5928,"at_ms":1796128137861}}
//! {"session":"default","seq":2,"at_ms":1796128137876,"event":{"type":"step","assistant":{"text":"","tool_calls":[…]},"results":[…],"finish_reason":"tool_calls","usage":{…},"at_ms":1796128137876}}
//! {"session":"default","seq":3,"at_ms":1796128137876,"event":{"type":"outcome","outcome":{"outcome":"max_steps_reached"},"at_ms":1796128137876}}
//! ```
//!
//! A journal of format 1 (one session, a bare event per line, as earlier versions wrote) is
//! read as the session `default`, and rewritten in format 2 before the first append.
//!
//! **One owner.** [`JsonlStore::open`] locks `FILE.lock` beside the journal (`flock`) for
//! the store's lifetime, and writes its process id into it; a second opener, in this process
//! or another, gets [`SessionError::InUse`]: "session FILE is in use by process PID". The
//! lock goes with the process, so a killed owner leaves nothing to clean up. Leases
//! ([`SessionStore::acquire`]) are kept in memory: no other process can hold one.
//!
//! Durability: [`append`](SessionStore::append) writes all events of the call as complete
//! lines in one `write` to a file opened for appending, then `fsync`s its data
//! (`File::sync_data`) before it returns; a file it creates gets its folder synced too. A
//! process killed with `kill -9` at any moment therefore loses no event whose append
//! returned, and leaves at most one incomplete line at the end (after a power loss or a full
//! disk, a batch may be cut anywhere). Each append still holds an exclusive `flock` on the
//! journal itself while it checks the file's end, writes and syncs, and a load a shared one
//! while it reads, so a load never sees half of an append.
//!
//! Reading ([`load`](SessionStore::load)):
//! - a missing or empty file holds no session;
//! - the last line is **torn** when it has no `\n` at its end or is not JSON: it is skipped
//!   with a `tracing` warning, and the next append truncates it away first, so new lines
//!   never glue onto it. A journal whose first write was cut (a torn header) is empty;
//! - a header with a newer `version` than [`JOURNAL_FORMAT_VERSION`] is
//!   [`SessionError::NewerFormat`] (nothing else is read, and appends are refused);
//! - any other line that is not a journal entry — before the end, a last line that is JSON
//!   but no entry this version knows, or an entry out of its session's order — is
//!   [`SessionError::Corrupt`], whose `entry` is the line number (the header is line 1).
//!   Nothing is truncated then: the file is left as it is for a person to look at. Blank
//!   lines are ignored.
//!
//! [`delete`](SessionStore::delete) rewrites the file without the session (a new file,
//! synced, renamed over the old one). [`list`](SessionStore::list) reads the whole file.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use fs4::FileExt;

use halo_core::async_trait;
use halo_core::session::{
    Append, JOURNAL_FORMAT_VERSION, JournalEvent, Lease, LeaseTable, SessionError, SessionInfo,
    SessionStore,
};

mod file;
mod owner;
#[cfg(test)]
mod tests;

use file::{Entry, Reader, entry_line, header_line};

/// The `type` of the header line.
pub const HEADER_TYPE: &str = "halo_journal";

/// Session journals in a JSON Lines file (see the [module docs](self) for the format), owned
/// by this store for its lifetime. Clones share the file, its owner lock and the leases.
///
/// ```
/// use halo_core::session::{Append, JournalEvent, JournalOutcome, SessionError, SessionStore};
/// use halo_stream::journal::JsonlStore;
///
/// # futures::executor::block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = JsonlStore::open(dir.path().join("session.jsonl")).unwrap();
/// assert!(store.load("default").await.unwrap().is_empty()); // no file yet: no session
/// let done = JournalEvent::Outcome { outcome: JournalOutcome::Answered, at_ms: 1 };
/// store.append(Append::new("default", 0, std::slice::from_ref(&done), 7)).await.unwrap();
/// assert_eq!(store.load("default").await.unwrap(), vec![done]);
/// let text = std::fs::read_to_string(store.path()).unwrap();
/// assert_eq!(
///     text,
///     "{\"type\":\"halo_journal\",\"version\":2}\n\
///      {\"session\":\"default\",\"seq\":0,\"at_ms\":7,\"event\":{\"type\":\"outcome\",\"outcome\":{\"outcome\":\"answered\"},\"at_ms\":1}}\n"
/// );
/// // One owner at a time.
/// let second = JsonlStore::open(store.path()).unwrap_err();
/// assert!(matches!(second, SessionError::InUse { .. }));
/// assert!(second.to_string().contains(&format!("is in use by process {}", std::process::id())));
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct JsonlStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    location: String,
    _owner: owner::Owner,
    /// Held while writing.
    state: Mutex<State>,
    leases: LeaseTable,
}

/// What the store knows of the file it wrote.
#[derive(Debug, Default)]
struct State {
    /// The file's length after this store last read or wrote it: while the file still has
    /// that length, `sessions` is up to date and the file ends with a complete line. Any
    /// other length (someone else wrote, or a write failed half-way) is read again.
    checked: Option<u64>,
    /// The sessions the file holds.
    sessions: HashMap<String, SessionInfo>,
}

impl JsonlStore {
    /// Opens the journal at `path` and takes its owner lock (`FILE.lock` beside it) for the
    /// store's lifetime. The journal itself is created by the first append.
    ///
    /// # Errors
    /// [`SessionError::InUse`] ("session FILE is in use by process PID") when another store
    /// has it open; [`SessionError::Io`] when the lock file cannot be made (its folder is
    /// missing, say).
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, SessionError> {
        let path = path.into();
        let owner = owner::Owner::take(&path)?;
        Ok(JsonlStore {
            inner: Arc::new(Inner {
                location: path.display().to_string(),
                path,
                _owner: owner,
                state: Mutex::new(State::default()),
                leases: LeaseTable::default(),
            }),
        })
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The owner lock file beside the journal (`FILE.lock`), removed when the store closes.
    pub fn lock_path(&self) -> PathBuf {
        owner::lock_path(&self.inner.path)
    }
}

#[async_trait]
impl SessionStore for JsonlStore {
    /// # Cancel safety
    /// The write runs on tokio's blocking pool when called inside a tokio runtime (on the
    /// calling thread otherwise); dropping the future does not stop it, so the events are
    /// written whole or, after a crash, as a torn last line that `load` skips.
    async fn append(&self, append: Append<'_>) -> Result<u64, SessionError> {
        let mut events = Vec::with_capacity(append.events.len());
        for event in append.events {
            events.push(serde_json::to_vec(event).map_err(|e| SessionError::Io {
                location: self.inner.location.clone(),
                message: format!("cannot serialize a journal event: {e}"),
            })?);
        }
        let write = Write {
            session: append.session.to_string(),
            expected: append.expected,
            fence: append.fence,
            at_ms: append.at_ms,
            steps: append.steps(),
            events,
        };
        let inner = Arc::clone(&self.inner);
        blocking(move || inner.append(write)).await
    }

    async fn load(&self, session: &str) -> Result<Vec<JournalEvent>, SessionError> {
        let inner = Arc::clone(&self.inner);
        let session = session.to_string();
        blocking(move || {
            Ok(inner
                .read_entries()?
                .into_iter()
                .filter(|e| e.session == session)
                .map(|e| e.event)
                .collect())
        })
        .await
    }

    async fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let inner = Arc::clone(&self.inner);
        blocking(move || {
            Ok(file::summaries(&inner.read_entries()?)
                .into_values()
                .collect())
        })
        .await
    }

    async fn delete(&self, session: &str) -> Result<(), SessionError> {
        let inner = Arc::clone(&self.inner);
        let session = session.to_string();
        blocking(move || inner.delete(&session)).await
    }

    async fn acquire(
        &self,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Lease, SessionError> {
        self.inner
            .leases
            .acquire(&self.inner.location, session, owner, ttl_ms, now_ms)
    }

    async fn renew(&self, lease: &Lease, ttl_ms: u64, now_ms: u64) -> Result<Lease, SessionError> {
        self.inner
            .leases
            .renew(&self.inner.location, lease, ttl_ms, now_ms)
    }

    async fn release(&self, lease: &Lease) -> Result<(), SessionError> {
        self.inner.leases.release(lease);
        Ok(())
    }
}

/// An append, owned for the blocking pool: the events already serialized.
struct Write {
    session: String,
    expected: u64,
    fence: Option<u64>,
    at_ms: u64,
    steps: u64,
    events: Vec<Vec<u8>>,
}

/// Runs `f` on tokio's blocking pool when inside a tokio runtime, else right here.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SessionError> + Send + 'static,
) -> Result<T, SessionError> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.spawn_blocking(f).await.unwrap_or_else(|e| {
            Err(SessionError::Io {
                location: "journal writer".into(),
                message: format!("the blocking task failed: {e}"),
            })
        }),
        Err(_) => f(),
    }
}

impl Inner {
    fn io(&self, what: &str, e: std::io::Error) -> SessionError {
        SessionError::Io {
            location: self.location.clone(),
            message: format!("{what}: {e}"),
        }
    }

    fn reader(&self) -> Reader<'_> {
        Reader {
            location: &self.location,
        }
    }

    /// The file's bytes, read under a shared lock; empty when it does not exist.
    fn read(&self) -> Result<Vec<u8>, SessionError> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io("cannot open the journal", e)),
        };
        FileExt::lock_shared(&file).map_err(|e| self.io("cannot lock the journal", e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| self.io("cannot read the journal", e))?;
        // Closing the file releases the lock.
        Ok(bytes)
    }

    /// Every complete entry of the file, a torn last line skipped with a warning.
    fn read_entries(&self) -> Result<Vec<Entry>, SessionError> {
        let bytes = self.read()?;
        let parsed = self.reader().parse(&bytes)?;
        if let Some((line, why)) = parsed.torn {
            tracing::warn!(
                journal = %self.location,
                line,
                "skipping the torn last line of the session journal ({why}): an append that \
                 never finished; the next append removes it"
            );
        }
        Ok(parsed.entries)
    }

    /// Opens the journal for writing under its exclusive `flock` with `state` up to date:
    /// a torn last line truncated, a format-1 journal rewritten in format 2.
    fn open_for_writing(&self, state: &mut State) -> Result<File, SessionError> {
        let open = || {
            let file = OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .open(&self.path)
                .map_err(|e| self.io("cannot open the journal for appending", e))?;
            // Held until the file is closed.
            FileExt::lock(&file).map_err(|e| self.io("cannot lock the journal", e))?;
            Ok::<_, SessionError>(file)
        };
        let mut file = open()?;
        let size = file
            .metadata()
            .map_err(|e| self.io("cannot read the journal's size", e))?
            .len();
        if state.checked == Some(size) {
            return Ok(file);
        }
        state.checked = None;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| self.io("cannot read the journal", e))?;
        // A journal that would not load is left as it is.
        let parsed = self.reader().parse(&bytes)?;
        state.sessions = file::summaries(&parsed.entries);
        if parsed.version.is_some_and(|v| v < JOURNAL_FORMAT_VERSION) {
            tracing::info!(journal = %self.location, "rewriting the session journal in format {JOURNAL_FORMAT_VERSION}");
            let mut upgraded = header_line();
            for entry in &parsed.entries {
                let event = serde_json::to_vec(&entry.event).unwrap_or_default();
                upgraded.extend(entry_line(&entry.session, entry.seq, entry.at_ms, &event));
            }
            file::replace(&self.path, &upgraded)
                .map_err(|e| self.io("cannot rewrite the journal in the new format", e))?;
            drop(file);
            state.checked = Some(upgraded.len() as u64);
            return open();
        }
        if let Some((line, why)) = parsed.torn {
            tracing::warn!(
                journal = %self.location,
                line,
                "removing the torn last line of the session journal ({why}) before appending"
            );
            file.set_len(parsed.keep as u64)
                .map_err(|e| self.io("cannot truncate the torn last line", e))?;
        }
        state.checked = Some(parsed.keep as u64);
        Ok(file)
    }

    fn append(&self, write: Write) -> Result<u64, SessionError> {
        self.leases
            .fenced(&self.location, &write.session, write.fence, || {
                let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                // An empty append makes no file.
                let mut file = if write.events.is_empty() && !self.path.exists() {
                    state.sessions.clear();
                    None
                } else {
                    Some(self.open_for_writing(&mut state)?)
                };
                let found = state.sessions.get(&write.session).map_or(0, |s| s.entries);
                if found != write.expected {
                    return Err(SessionError::Conflict {
                        location: self.location.clone(),
                        session: write.session.clone(),
                        expected: write.expected,
                        found,
                    });
                }
                let Some(file) = file.as_mut().filter(|_| !write.events.is_empty()) else {
                    return Ok(found);
                };
                let len = state.checked.unwrap_or_default();
                let mut buf = Vec::new();
                if len == 0 {
                    buf.extend_from_slice(&header_line());
                }
                for (i, event) in write.events.iter().enumerate() {
                    let seq = found + i as u64;
                    buf.extend(entry_line(&write.session, seq, write.at_ms, event));
                }
                // From here until the data is synced, a failure may leave a torn end: check
                // again next time.
                state.checked = None;
                file.write_all(&buf)
                    .map_err(|e| self.io("cannot append to the journal", e))?;
                file.sync_data()
                    .map_err(|e| self.io("cannot sync the journal to disk", e))?;
                if len == 0 {
                    file::sync_folder(&self.path);
                }
                state.checked = Some(len + buf.len() as u64);
                let info = state
                    .sessions
                    .entry(write.session.clone())
                    .or_insert_with(|| SessionInfo {
                        id: write.session.clone(),
                        updated_ms: 0,
                        steps: 0,
                        entries: 0,
                    });
                info.entries += write.events.len() as u64;
                info.steps += write.steps;
                info.updated_ms = info.updated_ms.max(write.at_ms);
                Ok(info.entries)
            })
    }

    fn delete(&self, session: &str) -> Result<(), SessionError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !self.path.exists() {
            return Ok(());
        }
        let mut file = self.open_for_writing(&mut state)?;
        if !state.sessions.contains_key(session) {
            return Ok(());
        }
        let mut bytes = Vec::new();
        file.seek(std::io::SeekFrom::Start(0))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|e| self.io("cannot read the journal", e))?;
        let parsed = self.reader().parse(&bytes)?;
        let mut kept = header_line();
        for entry in parsed.entries.iter().filter(|e| e.session != session) {
            kept.extend_from_slice(&bytes[entry.range.clone()]);
            kept.push(b'\n');
        }
        state.checked = None;
        file::replace(&self.path, &kept)
            .map_err(|e| self.io("cannot rewrite the journal without the session", e))?;
        state.sessions.remove(session);
        state.checked = Some(kept.len() as u64);
        Ok(())
    }
}
