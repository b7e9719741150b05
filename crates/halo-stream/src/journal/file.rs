//! The bytes of a journal file: the header, the entry lines, a torn end; parsing and
//! writing them, and replacing a whole file.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write as _;
use std::ops::Range;
use std::path::Path;

use halo_core::session::{
    DEFAULT_SESSION, JOURNAL_FORMAT_VERSION, JournalEvent, SessionError, SessionInfo,
};
use serde::{Deserialize, Serialize};

use super::HEADER_TYPE;

/// The first line of a journal file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Header {
    /// Always [`HEADER_TYPE`].
    #[serde(rename = "type")]
    kind: String,
    /// The format version.
    version: u32,
}

/// The header line this version writes, with its `\n`.
pub(super) fn header_line() -> Vec<u8> {
    let mut line = serde_json::to_vec(&Header {
        kind: HEADER_TYPE.to_string(),
        version: JOURNAL_FORMAT_VERSION,
    })
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// An entry line of a format-2 journal, as read.
#[derive(Deserialize)]
struct LineIn {
    session: String,
    seq: u64,
    at_ms: u64,
    event: JournalEvent,
}

/// One entry of a journal.
pub(super) struct Entry {
    /// Its bytes in the file, without the `\n`.
    pub range: Range<usize>,
    pub session: String,
    pub seq: u64,
    pub at_ms: u64,
    pub event: JournalEvent,
}

/// A whole journal, read.
pub(super) struct Parsed {
    /// The header's version (`None` for an empty file or a torn header).
    pub version: Option<u32>,
    /// Bytes to keep: everything up to the end of the last complete line; 0 without a
    /// complete header.
    pub keep: usize,
    /// The line number and a description of a torn last line.
    pub torn: Option<(usize, &'static str)>,
    /// The entries, in file order.
    pub entries: Vec<Entry>,
}

/// One entry line of a format-2 journal, with its `\n`: `event` is the event's JSON.
pub(super) fn entry_line(session: &str, seq: u64, at_ms: u64, event: &[u8]) -> Vec<u8> {
    let session = serde_json::to_string(session).unwrap_or_default();
    let mut line = Vec::with_capacity(event.len() + session.len() + 64);
    line.extend_from_slice(b"{\"session\":");
    line.extend_from_slice(session.as_bytes());
    line.extend_from_slice(format!(",\"seq\":{seq},\"at_ms\":{at_ms},\"event\":").as_bytes());
    line.extend_from_slice(event);
    line.extend_from_slice(b"}\n");
    line
}

/// The sessions of `entries`, as [`SessionInfo`]s by id.
pub(super) fn summaries(entries: &[Entry]) -> HashMap<String, SessionInfo> {
    let mut sessions: HashMap<String, SessionInfo> = HashMap::new();
    for entry in entries {
        let info = sessions
            .entry(entry.session.clone())
            .or_insert_with(|| SessionInfo {
                id: entry.session.clone(),
                updated_ms: 0,
                steps: 0,
                entries: 0,
            });
        info.entries += 1;
        info.steps += u64::from(matches!(entry.event, JournalEvent::Step { .. }));
        info.updated_ms = info.updated_ms.max(entry.at_ms);
    }
    sessions
}

/// Reads a journal's bytes: the header, complete lines and a torn end.
pub(super) struct Reader<'a> {
    pub location: &'a str,
}

impl Reader<'_> {
    fn corrupt(&self, entry: usize, message: String) -> SessionError {
        SessionError::Corrupt {
            location: self.location.to_string(),
            entry,
            message,
        }
    }

    fn not_a_journal(&self, number: usize) -> SessionError {
        self.corrupt(
            number,
            format!(
                "this is not a Halo session journal: its first line is not the header {}; pass a new file or a journal a Halo session store wrote",
                String::from_utf8_lossy(header_line().trim_ascii_end())
            ),
        )
    }

    /// Splits and parses `bytes`, checking the header, every entry and the order of each
    /// session's sequence numbers.
    pub(super) fn parse(&self, bytes: &[u8]) -> Result<Parsed, SessionError> {
        let mut parsed = Parsed {
            version: None,
            keep: 0,
            torn: None,
            entries: Vec::new(),
        };
        let mut next_seq: HashMap<String, u64> = HashMap::new();
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
            let blank = line.iter().all(u8::is_ascii_whitespace);
            if !terminated {
                // A torn first line is a cut header: only a prefix of ours is that.
                if parsed.version.is_none() && !blank && !is_header_prefix(line) {
                    return Err(self.not_a_journal(number));
                }
                parsed.torn = Some((number, "it has no newline at its end"));
                break;
            }
            if blank {
                start = next;
                parsed.keep = next;
                continue;
            }
            let Some(version) = parsed.version else {
                match self.header(line, number, next == bytes.len())? {
                    Some(v) => parsed.version = Some(v),
                    // The only line, cut inside the header and not JSON: torn.
                    None => {
                        parsed.torn = Some((number, "it is not JSON"));
                        break;
                    }
                }
                start = next;
                parsed.keep = next;
                continue;
            };
            if next == bytes.len() && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err()
            {
                parsed.torn = Some((number, "it is not JSON"));
                break;
            }
            let entry = self.entry(version, line, number, start..end, &mut next_seq)?;
            parsed.entries.push(entry);
            start = next;
            parsed.keep = next;
        }
        if parsed.version.is_none() {
            // Blank lines and perhaps a torn header: nothing to keep, the header comes anew.
            parsed.keep = 0;
        }
        Ok(parsed)
    }

    /// The entry on line `number`: in format 1 a bare event of the default session, in
    /// format 2 an entry line.
    fn entry(
        &self,
        version: u32,
        line: &[u8],
        number: usize,
        range: Range<usize>,
        next_seq: &mut HashMap<String, u64>,
    ) -> Result<Entry, SessionError> {
        let unreadable = |e: serde_json::Error| {
            self.corrupt(
                number,
                format!(
                    "line {number} is not a journal entry this version reads ({e}); fix or remove the line, or open the journal with a newer Halo"
                ),
            )
        };
        let (session, seq, at_ms, event) = if version == 1 {
            let event: JournalEvent = serde_json::from_slice(line).map_err(unreadable)?;
            let at_ms = serde_json::from_slice::<AtMs>(line).map_or(0, |a| a.at_ms);
            let seq = next_seq.get(DEFAULT_SESSION).copied().unwrap_or(0);
            (DEFAULT_SESSION.to_string(), seq, at_ms, event)
        } else {
            let l: LineIn = serde_json::from_slice(line).map_err(unreadable)?;
            (l.session, l.seq, l.at_ms, l.event)
        };
        let expected = next_seq.entry(session.clone()).or_insert(0);
        if seq != *expected {
            return Err(self.corrupt(
                number,
                format!(
                    "line {number} is entry {seq} of session {session:?}, which has {expected} entries before it: a line is missing or repeated"
                ),
            ));
        }
        *expected += 1;
        Ok(Entry {
            range,
            session,
            seq,
            at_ms,
            event,
        })
    }

    /// The version of the header `line` (line `number`); `None` when it is the last line
    /// and not JSON (torn). Errors for a newer version or a line that is no header.
    fn header(&self, line: &[u8], number: usize, last: bool) -> Result<Option<u32>, SessionError> {
        let value: serde_json::Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(_) if last && is_header_prefix(line) => return Ok(None),
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
                location: self.location.to_string(),
                found: header.version,
                supported: JOURNAL_FORMAT_VERSION,
            });
        }
        if header.version == 0 {
            return Err(self.corrupt(
                number,
                "the header names format version 0, which no Halo writes".into(),
            ));
        }
        Ok(Some(header.version))
    }
}

/// Whether `line` is the start of a header of any version this Halo reads.
fn is_header_prefix(line: &[u8]) -> bool {
    (1..=JOURNAL_FORMAT_VERSION).any(|v| {
        let mut header = format!("{{\"type\":\"{HEADER_TYPE}\",\"version\":{v}}}").into_bytes();
        header.push(b'\n');
        header.starts_with(line)
    })
}

/// The time of a format-1 line's event.
#[derive(Deserialize)]
struct AtMs {
    at_ms: u64,
}

/// Replaces the file at `path` with `bytes`, atomically: a new file beside it, synced, then
/// renamed over it, and the folder synced.
pub(super) fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".halo-rewrite");
    let temp = path.with_file_name(name);
    let mut file = File::create(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, path)?;
    sync_folder(path);
    Ok(())
}

/// Syncs the folder of `path`, so a file just created or renamed survives a crash.
pub(super) fn sync_folder(path: &Path) {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // Opening a folder to sync it works on Unix; elsewhere a failure is no error.
    if let Ok(dir) = File::open(folder) {
        let _ = dir.sync_all();
    }
}
