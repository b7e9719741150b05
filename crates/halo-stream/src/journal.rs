//! [`JsonlStore`]: a session journal in a JSON Lines file, the session's way to disk (the UI
//! stream is its way to a browser).
//!
//! The file is a header line, then one [`JournalEvent`] per line, each a compact JSON object
//! ending in `\n`:
//!
//! ```text
//! {"type":"halo_journal","version":1}
//! {"type":"user","message":{"role":"user","content":[{"type":"text","text":"What do the notes say?"}]},"at_ms":1796128137847}
//! {"type":"prefix","fingerprint":"c47c8c3b…","prefix_bytes":5928,"at_ms":1796128137861}
//! {"type":"step","assistant":{"text":"","tool_calls":[{"id":"call_0001","name":"read","raw_arguments":"{\"path\":\"notes.txt\"}"}]},"results":[{"tool_call_id":"call_0001","tool_name":"read","content":"     1\tMeeting notes","is_error":false}],"finish_reason":"tool_calls","usage":{…},"at_ms":1796128137876}
//! {"type":"outcome","outcome":{"outcome":"max_steps_reached"},"at_ms":1796128137876}
//! {"type":"step","assistant":{"text":"The notes are meeting notes."},"results":[],"finish_reason":"stop","usage":{…},"at_ms":1796128137951}
//! {"type":"outcome","outcome":{"outcome":"answered"},"at_ms":1796128137951}
//! ```
//!
//! (A run stopped by `max_steps`, then resumed: the resumed run adds no user line.)
//!
//! Durability: [`append`](SessionStore::append) writes all events of the call as complete
//! lines in one `write` to a file opened for appending, then `fsync`s its data
//! (`File::sync_data`) before it returns; a file it creates gets its folder synced too. A
//! process killed with `kill -9` at any moment therefore loses no event whose append
//! returned, and leaves at most one incomplete line at the end (after a power loss or a full
//! disk, a batch may be cut anywhere).
//!
//! Reading ([`load`](SessionStore::load)):
//! - a missing or empty file is an empty session;
//! - the last line is **torn** when it has no `\n` at its end or is not JSON: it is skipped
//!   with a `tracing` warning, and the next append truncates it away first, so new lines
//!   never glue onto it. A journal whose first write was cut (a torn header) is empty;
//! - a header with a newer `version` than [`JOURNAL_FORMAT_VERSION`] is
//!   [`SessionError::NewerFormat`] (nothing else is read, and appends are refused);
//! - any other line that is not a journal event — before the end, or a last line that is
//!   JSON but no event this version knows — is [`SessionError::Corrupt`], whose `entry` is
//!   the line number (the header is line 1). Nothing is truncated then: the file is left as
//!   it is for a person to look at. Blank lines are ignored.
//!
//! Several writers (two stores, two processes) may share a journal: each append holds an
//! exclusive advisory lock on the file (`flock`, through fs4) while it checks the file's end,
//! writes and syncs, and a load holds a shared one while it reads, so a header is written
//! once, a torn line is repaired by one writer only, and a load never sees half of an append.
//! The events of two agents appending to one journal still alternate in it: give each
//! conversation a journal of its own.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use fs4::FileExt;

use halo_core::async_trait;
use halo_core::session::{JOURNAL_FORMAT_VERSION, JournalEvent, SessionError, SessionStore};
use serde::{Deserialize, Serialize};

/// The `type` of the header line.
pub const HEADER_TYPE: &str = "halo_journal";

/// The first line of a journal file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Header {
    /// Always [`HEADER_TYPE`].
    #[serde(rename = "type")]
    kind: String,
    /// The format version.
    version: u32,
}

impl Header {
    /// The header line this version writes, with its `\n`.
    fn line() -> Vec<u8> {
        let mut line = serde_json::to_vec(&Header {
            kind: HEADER_TYPE.to_string(),
            version: JOURNAL_FORMAT_VERSION,
        })
        .unwrap_or_default();
        line.push(b'\n');
        line
    }
}

/// A session store in a JSON Lines file (see the [module docs](self) for the format).
/// Clones share the file and its writer lock.
///
/// ```
/// use halo_core::session::{JournalEvent, JournalOutcome, SessionStore};
/// use halo_stream::journal::JsonlStore;
///
/// # futures::executor::block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = JsonlStore::new(dir.path().join("session.jsonl"));
/// assert!(store.load().await.unwrap().is_empty()); // no file yet: an empty session
/// let done = JournalEvent::Outcome { outcome: JournalOutcome::Answered, at_ms: 1 };
/// store.append(std::slice::from_ref(&done)).await.unwrap();
/// assert_eq!(store.load().await.unwrap(), vec![done]);
/// let text = std::fs::read_to_string(store.path()).unwrap();
/// assert_eq!(
///     text,
///     "{\"type\":\"halo_journal\",\"version\":1}\n\
///      {\"type\":\"outcome\",\"outcome\":{\"outcome\":\"answered\"},\"at_ms\":1}\n"
/// );
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct JsonlStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    /// Held while writing. The file's length after this store's last append, once it has
    /// checked the file's end (and truncated a torn line): while the file still has that
    /// length it ends with a complete line of ours; any other length (another writer
    /// appended, or crashed mid-line) is checked again.
    checked: Mutex<Option<u64>>,
}

impl JsonlStore {
    /// A store for the journal at `path`. Nothing is opened until the first
    /// [`load`](SessionStore::load) or [`append`](SessionStore::append); the file is
    /// created by the first append (its folder must exist).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JsonlStore {
            inner: Arc::new(Inner {
                path: path.into(),
                checked: Mutex::new(None),
            }),
        }
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }
}

#[async_trait]
impl SessionStore for JsonlStore {
    /// # Cancel safety
    /// The write runs on tokio's blocking pool when called inside a tokio runtime (on the
    /// calling thread otherwise); dropping the future does not stop it, so the events are
    /// written whole or, after a crash, as a torn last line that `load` skips.
    async fn append(&self, events: &[JournalEvent]) -> Result<(), SessionError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut lines = Vec::new();
        for event in events {
            serde_json::to_writer(&mut lines, event).map_err(|e| SessionError::Io {
                location: self.inner.path.display().to_string(),
                message: format!("cannot serialize a journal event: {e}"),
            })?;
            lines.push(b'\n');
        }
        let inner = Arc::clone(&self.inner);
        blocking(move || inner.append(&lines)).await
    }

    async fn load(&self) -> Result<Vec<JournalEvent>, SessionError> {
        let inner = Arc::clone(&self.inner);
        blocking(move || inner.load()).await
    }
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

/// How a journal's bytes divide: the events' lines, and what is torn at the end.
struct Layout {
    /// The header's version (`None` for an empty file or a torn header).
    version: Option<u32>,
    /// Bytes to keep: everything up to the end of the last complete line; 0 without a
    /// complete header.
    keep: usize,
    /// The lines after the header within `keep`, with their line numbers (from 1).
    lines: Vec<(usize, std::ops::Range<usize>)>,
    /// The line number and a description of a torn last line.
    torn: Option<(usize, &'static str)>,
}

impl Inner {
    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn io(&self, what: &str, e: std::io::Error) -> SessionError {
        SessionError::Io {
            location: self.location(),
            message: format!("{what}: {e}"),
        }
    }

    /// The file's bytes; empty when it does not exist.
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

    fn load(&self) -> Result<Vec<JournalEvent>, SessionError> {
        let bytes = self.read()?;
        let layout = self.layout(&bytes)?;
        if let Some((line, why)) = layout.torn {
            tracing::warn!(
                journal = %self.location(),
                line,
                "skipping the torn last line of the session journal ({why}): an append that \
                 never finished; the next append removes it"
            );
        }
        self.events(&bytes, layout)
    }

    /// The events of `layout`'s complete lines.
    fn events(&self, bytes: &[u8], layout: Layout) -> Result<Vec<JournalEvent>, SessionError> {
        let mut events = Vec::with_capacity(layout.lines.len());
        for (line, range) in layout.lines {
            let event = serde_json::from_slice(&bytes[range]).map_err(|e| SessionError::Corrupt {
                location: self.location(),
                entry: line,
                message: format!(
                    "line {line} is not a journal event this version reads ({e}); fix or remove the line, or open the journal with a newer Halo"
                ),
            })?;
            events.push(event);
        }
        Ok(events)
    }

    fn append(&self, lines: &[u8]) -> Result<(), SessionError> {
        let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&self.path)
            .map_err(|e| self.io("cannot open the journal for appending", e))?;
        // Held until `file` is closed, at the end of this call.
        FileExt::lock(&file).map_err(|e| self.io("cannot lock the journal", e))?;
        let size = file
            .metadata()
            .map_err(|e| self.io("cannot read the journal's size", e))?
            .len();
        let len = if *checked == Some(size) {
            size
        } else {
            self.repair(&mut file)?
        };
        // From here until the data is synced, a failure may leave a torn end: check again
        // next time.
        *checked = None;
        let mut buf = Vec::with_capacity(lines.len() + 40);
        if len == 0 {
            buf.extend_from_slice(&Header::line());
        }
        buf.extend_from_slice(lines);
        file.write_all(&buf)
            .map_err(|e| self.io("cannot append to the journal", e))?;
        file.sync_data()
            .map_err(|e| self.io("cannot sync the journal to disk", e))?;
        if len == 0 {
            self.sync_folder()?;
        }
        *checked = Some(len + buf.len() as u64);
        Ok(())
    }

    /// Checks the whole journal as `load` does and truncates a torn last line; returns the
    /// length kept.
    fn repair(&self, file: &mut File) -> Result<u64, SessionError> {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| self.io("cannot read the journal", e))?;
        let layout = self.layout(&bytes)?;
        let (keep, torn) = (layout.keep, layout.torn);
        // A journal that would not load is left as it is.
        self.events(&bytes, layout)?;
        if let Some((line, why)) = torn {
            tracing::warn!(
                journal = %self.location(),
                line,
                "removing the torn last line of the session journal ({why}) before appending"
            );
            file.set_len(keep as u64)
                .map_err(|e| self.io("cannot truncate the torn last line", e))?;
        }
        Ok(keep as u64)
    }

    /// Syncs the journal's folder, so a file just created survives a crash.
    fn sync_folder(&self) -> Result<(), SessionError> {
        let folder = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        // Opening a folder to sync it works on Unix; elsewhere a failure is no error.
        match File::open(folder) {
            Ok(dir) => {
                let _ = dir.sync_all();
                Ok(())
            }
            Err(_) => Ok(()),
        }
    }

    /// Splits `bytes` into the header, complete lines and a torn end, checking the header.
    fn layout(&self, bytes: &[u8]) -> Result<Layout, SessionError> {
        let mut layout = Layout {
            version: None,
            keep: 0,
            lines: Vec::new(),
            torn: None,
        };
        let mut start = 0;
        let mut number = 0;
        while start < bytes.len() {
            number += 1;
            let (end, terminated) = match bytes[start..].iter().position(|&b| b == b'\n') {
                Some(i) => (start + i, true),
                None => (bytes.len(), false),
            };
            let line = &bytes[start..end];
            let next = end + usize::from(terminated);
            if !terminated {
                // A torn first line is a cut header: only a prefix of ours is that.
                let blank = line.iter().all(u8::is_ascii_whitespace);
                if layout.version.is_none() && !blank && !Header::line().starts_with(line) {
                    return Err(self.not_a_journal(number));
                }
                layout.torn = Some((number, "it has no newline at its end"));
                break;
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                start = next;
                layout.keep = next;
                continue;
            }
            if layout.version.is_none() {
                let version = self.header(line, number, next == bytes.len())?;
                match version {
                    Some(v) => layout.version = Some(v),
                    // The only line, cut inside the header and not JSON: torn.
                    None => {
                        layout.torn = Some((number, "it is not JSON"));
                        break;
                    }
                }
            } else if next == bytes.len()
                && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err()
            {
                layout.torn = Some((number, "it is not JSON"));
                break;
            } else {
                layout.lines.push((number, start..end));
            }
            start = next;
            layout.keep = next;
        }
        if layout.version.is_none() {
            // Blank lines and perhaps a torn header: nothing to keep, the header comes anew.
            layout.keep = 0;
        }
        Ok(layout)
    }

    /// The version of the header `line` (line `number`); `None` when it is the last line
    /// and not JSON (torn). Errors for a newer version or a line that is no header.
    fn header(&self, line: &[u8], number: usize, last: bool) -> Result<Option<u32>, SessionError> {
        let value: serde_json::Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(_) if last && Header::line().starts_with(line) => return Ok(None),
            Err(_) => return Err(self.not_a_journal(number)),
        };
        let header: Header = match serde_json::from_value(value) {
            Ok(h) => h,
            Err(_) => return Err(self.not_a_journal(number)),
        };
        if header.kind != HEADER_TYPE {
            return Err(self.not_a_journal(number));
        }
        if header.version > JOURNAL_FORMAT_VERSION {
            return Err(SessionError::NewerFormat {
                location: self.location(),
                found: header.version,
                supported: JOURNAL_FORMAT_VERSION,
            });
        }
        if header.version == 0 {
            return Err(SessionError::Corrupt {
                location: self.location(),
                entry: number,
                message: "the header names format version 0, which no Halo writes".into(),
            });
        }
        Ok(Some(header.version))
    }

    fn not_a_journal(&self, number: usize) -> SessionError {
        SessionError::Corrupt {
            location: self.location(),
            entry: number,
            message: format!(
                "this is not a Halo session journal: its first line is not the header {}; pass a new file or a journal the coder wrote",
                String::from_utf8_lossy(Header::line().trim_ascii_end())
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use halo_core::session::JournalOutcome;
    use halo_core::{
        AssistantMessage, Fingerprint, FinishReason, Message, ToolCall, ToolResult, Usage,
    };

    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        futures::executor::block_on(f)
    }

    fn every_variant() -> Vec<JournalEvent> {
        let call = ToolCall::new("call_1", "read", r#"{"path":"src/main.rs"}"#);
        vec![
            JournalEvent::Prefix {
                fingerprint: Fingerprint([7; 32]),
                prefix_bytes: 4210,
                at_ms: 1,
            },
            JournalEvent::User {
                message: Message::user("Fix the bug"),
                injected: false,
                at_ms: 2,
            },
            JournalEvent::Step {
                assistant: AssistantMessage {
                    text: "Looking.".into(),
                    tool_calls: vec![call.clone()],
                    ..Default::default()
                },
                results: vec![ToolResult::ok(&call, "fn main() {}\n")],
                finish_reason: FinishReason::ToolCalls,
                usage: Usage {
                    input_tokens: Some(1200),
                    cache_read_tokens: Some(1024),
                    output_tokens: Some(12),
                    ..Default::default()
                },
                at_ms: 3,
            },
            JournalEvent::User {
                message: Message::user("also the tests"),
                injected: true,
                at_ms: 4,
            },
            JournalEvent::CompactBoundary {
                history: vec![
                    Message::user("fix the bug"),
                    Message::user("also the tests"),
                ],
                injected: vec![1],
                discardable: vec![],
                at_ms: 5,
            },
            JournalEvent::Outcome {
                outcome: JournalOutcome::Error {
                    message: "rate limited".into(),
                },
                at_ms: 6,
            },
            JournalEvent::Outcome {
                outcome: JournalOutcome::MaxStepsReached,
                at_ms: 7,
            },
            JournalEvent::Outcome {
                outcome: JournalOutcome::Answered,
                at_ms: 8,
            },
        ]
    }

    fn store() -> (tempfile::TempDir, JsonlStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path().join("s.jsonl"));
        (dir, store)
    }

    fn line_of(event: &JournalEvent) -> String {
        format!("{}\n", serde_json::to_string(event).unwrap())
    }

    const HEADER: &str = "{\"type\":\"halo_journal\",\"version\":1}\n";

    #[test]
    fn every_event_round_trips_and_each_append_adds_whole_lines() {
        let (_dir, store) = store();
        let events = every_variant();
        block_on(store.append(&events[..3])).unwrap();
        block_on(store.append(&events[3..])).unwrap();
        block_on(store.append(&[])).unwrap();
        assert_eq!(block_on(store.load()).unwrap(), events);
        let text = std::fs::read_to_string(store.path()).unwrap();
        let expected: String = std::iter::once(HEADER.to_string())
            .chain(events.iter().map(line_of))
            .collect();
        assert_eq!(text, expected);
        assert_eq!(text.lines().count(), 1 + events.len());
    }

    #[test]
    fn a_missing_or_empty_file_is_an_empty_session() {
        let (_dir, store) = store();
        assert_eq!(block_on(store.load()).unwrap(), vec![]);
        std::fs::write(store.path(), "").unwrap();
        assert_eq!(block_on(store.load()).unwrap(), vec![]);
        std::fs::write(store.path(), HEADER).unwrap();
        assert_eq!(block_on(store.load()).unwrap(), vec![]);
        // An empty file gets its header with the first events.
        std::fs::write(store.path(), "").unwrap();
        let events = every_variant();
        block_on(store.append(&events[..1])).unwrap();
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert_eq!(text, format!("{HEADER}{}", line_of(&events[0])));
    }

    // A process killed in the middle of its write leaves a line without its newline.
    #[test]
    fn a_torn_last_line_is_skipped_and_removed_before_the_next_append() {
        let events = every_variant();
        for cut in [1, 10, line_of(&events[2]).len() - 1] {
            let (_dir, store) = store();
            block_on(store.append(&events[..2])).unwrap();
            let whole = std::fs::read(store.path()).unwrap();
            let mut torn = whole.clone();
            torn.extend_from_slice(&line_of(&events[2]).as_bytes()[..cut]);
            std::fs::write(store.path(), &torn).unwrap();

            assert_eq!(block_on(store.load()).unwrap(), events[..2], "cut at {cut}");
            // A new store (a new process) appends after truncating the torn line.
            let again = JsonlStore::new(store.path());
            block_on(again.append(&events[3..4])).unwrap();
            let mut expected = whole.clone();
            expected.extend_from_slice(line_of(&events[3]).as_bytes());
            assert_eq!(
                std::fs::read(store.path()).unwrap(),
                expected,
                "cut at {cut}"
            );
            assert_eq!(
                block_on(again.load()).unwrap(),
                [&events[..2], &events[3..4]].concat()
            );
        }
    }

    #[test]
    fn a_last_line_that_is_not_json_is_torn_too() {
        let (_dir, store) = store();
        let events = every_variant();
        block_on(store.append(&events[..1])).unwrap();
        let mut bytes = std::fs::read(store.path()).unwrap();
        bytes.extend_from_slice(b"\0\0\0\0\n");
        std::fs::write(store.path(), &bytes).unwrap();
        assert_eq!(block_on(store.load()).unwrap(), events[..1]);
        let again = JsonlStore::new(store.path());
        block_on(again.append(&events[1..2])).unwrap();
        assert_eq!(block_on(again.load()).unwrap(), events[..2]);
    }

    // A cut first write: the header itself is torn, so the journal holds nothing yet.
    #[test]
    fn a_torn_header_is_an_empty_session_and_is_rewritten() {
        let (_dir, store) = store();
        std::fs::write(store.path(), &HEADER.as_bytes()[..12]).unwrap();
        assert_eq!(block_on(store.load()).unwrap(), vec![]);
        let events = every_variant();
        block_on(store.append(&events[..1])).unwrap();
        assert_eq!(
            std::fs::read_to_string(store.path()).unwrap(),
            format!("{HEADER}{}", line_of(&events[0]))
        );
    }

    #[test]
    fn a_bad_line_before_the_end_is_corrupt_with_its_line_number() {
        let (_dir, store) = store();
        let events = every_variant();
        let text = format!(
            "{HEADER}{}{{\"type\":\"step\",\"oops\n{}",
            line_of(&events[0]),
            line_of(&events[1])
        );
        std::fs::write(store.path(), &text).unwrap();
        let err = block_on(store.load()).unwrap_err();
        let SessionError::Corrupt {
            entry, ref message, ..
        } = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(entry, 3);
        assert!(message.contains("line 3"), "{message}");
        assert!(err.to_string().contains("s.jsonl"), "{err}");
        // Appending does not touch a damaged journal either.
        assert!(matches!(
            block_on(store.append(&events[..1])),
            Err(SessionError::Corrupt { entry: 3, .. })
        ));
        assert_eq!(std::fs::read_to_string(store.path()).unwrap(), text);
    }

    // An event type this version does not know is kept for a person to look at.
    #[test]
    fn an_unknown_event_on_the_last_line_is_corrupt_not_torn() {
        let (_dir, store) = store();
        let text = format!("{HEADER}{{\"type\":\"hologram\",\"at_ms\":1}}\n");
        std::fs::write(store.path(), &text).unwrap();
        assert!(matches!(
            block_on(store.load()),
            Err(SessionError::Corrupt { entry: 2, .. })
        ));
    }

    #[test]
    fn a_newer_format_is_a_typed_error_and_is_not_appended_to() {
        let (_dir, store) = store();
        let text = "{\"type\":\"halo_journal\",\"version\":2}\n{\"type\":\"teleport\"}\n";
        std::fs::write(store.path(), text).unwrap();
        let err = block_on(store.load()).unwrap_err();
        assert_eq!(
            err,
            SessionError::NewerFormat {
                location: store.path().display().to_string(),
                found: 2,
                supported: 1,
            }
        );
        assert!(err.to_string().contains("newer Halo"), "{err}");
        assert!(matches!(
            block_on(store.append(&every_variant()[..1])),
            Err(SessionError::NewerFormat { found: 2, .. })
        ));
        assert_eq!(std::fs::read_to_string(store.path()).unwrap(), text);
    }

    // `--session README.md` must not append to (or truncate) a file that is no journal.
    #[test]
    fn a_file_that_is_no_journal_is_refused_and_left_alone() {
        for text in ["# notes\nsome text\n", "no newline at all", "{\"a\":1}\n"] {
            let (_dir, store) = store();
            std::fs::write(store.path(), text).unwrap();
            let err = block_on(store.load()).unwrap_err();
            assert!(
                matches!(&err, SessionError::Corrupt { entry: 1, message, .. } if message.contains("not a Halo session journal")),
                "{text:?}: {err:?}"
            );
            assert!(block_on(store.append(&every_variant()[..1])).is_err());
            assert_eq!(std::fs::read_to_string(store.path()).unwrap(), text);
        }
    }

    #[test]
    fn blank_lines_are_ignored() {
        let (_dir, store) = store();
        let events = every_variant();
        let text = format!("{HEADER}\n{}\n{}", line_of(&events[0]), line_of(&events[1]));
        std::fs::write(store.path(), text).unwrap();
        assert_eq!(block_on(store.load()).unwrap(), events[..2]);
    }

    #[test]
    fn a_missing_folder_is_an_io_error_that_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(dir.path().join("nope/s.jsonl"));
        let err = block_on(store.append(&every_variant()[..1])).unwrap_err();
        assert!(
            matches!(&err, SessionError::Io { location, message } if location.ends_with("nope/s.jsonl") && message.contains("cannot open")),
            "{err:?}"
        );
    }

    // Two stores on one file, as two processes would have: the lock makes the first appends
    // write one header between them, and every batch lands whole. Without it (checked by
    // removing the lock) two stores both see an empty file and both write a header, and the
    // next append finds the second header a corrupt line and fails.
    #[test]
    fn two_stores_on_one_file_write_one_header_and_whole_batches() {
        let events = every_variant();
        for round in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("shared.jsonl");
            let writers: Vec<_> = (0..4)
                .map(|_| {
                    let store = JsonlStore::new(&path);
                    let events = events.clone();
                    std::thread::spawn(move || {
                        for chunk in events.chunks(2) {
                            block_on(store.append(chunk)).unwrap();
                        }
                    })
                })
                .collect();
            for w in writers {
                w.join().unwrap();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                text.matches(HEADER_TYPE).count(),
                1,
                "round {round}: one header line\n{text}"
            );
            let loaded = block_on(JsonlStore::new(&path).load()).unwrap();
            assert_eq!(loaded.len(), 4 * events.len(), "round {round}");
            // Each batch of two is whole: every event is followed by its batch partner.
            for pair in events.chunks(2) {
                let starts = loaded.windows(pair.len()).filter(|w| *w == pair).count();
                assert_eq!(starts, 4, "round {round}: batch {pair:?} whole four times");
            }
        }
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn appends_inside_tokio_run_on_the_blocking_pool_and_clones_share_the_file() {
        let (_dir, store) = store();
        let events = every_variant();
        let clone = store.clone();
        let (a, b) = tokio::join!(store.append(&events[..4]), clone.append(&events[4..]));
        a.unwrap();
        b.unwrap();
        let loaded = store.load().await.unwrap();
        assert_eq!(loaded.len(), events.len());
        // The two batches are whole, in either order.
        assert!(
            loaded == events || loaded == [&events[4..], &events[..4]].concat(),
            "{loaded:?}"
        );
    }
}
