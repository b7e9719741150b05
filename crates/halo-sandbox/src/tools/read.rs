//! `read`: a text file's lines, numbered like `cat -n`.

use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::sync::Arc;

use halo_core::{Tool, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::SandboxError;
use crate::sandbox::{
    DEFAULT_READ_LINES, MAX_LINE_BYTES, MAX_READ_FILE_BYTES, SandboxPath, Shared,
};
use crate::text::{Lines, cut_line, strip_eol};

/// How many leading bytes are checked for NUL to tell a binary file: 8 KiB (as git does).
const BINARY_CHECK_BYTES: u64 = 8 * 1024;

// Arguments of `read` (no doc comment: it would enter the schema the model reads).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    /// Path of the file, relative to the sandbox root.
    path: String,
    /// Line number to start at, 1-based (default 1).
    #[schemars(range(min = 1))]
    offset: Option<u64>,
    /// Maximum number of lines to return (default 2000).
    #[schemars(range(min = 1))]
    limit: Option<u64>,
}

pub(crate) struct ReadTool {
    shared: Arc<Shared>,
    description: String,
}

impl ReadTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let description = format!(
            "Reads a text file in the sandbox. Returns its lines numbered like `cat -n`: the \
             line number right-aligned in 6 columns, a tab, then the line. Returns up to \
             {DEFAULT_READ_LINES} lines from `offset` (or `limit` lines); lines longer than \
             {MAX_LINE_BYTES} bytes are cut. Binary files are refused. Files over \
             {MAX_READ_FILE_BYTES} bytes must be read in parts with `offset` and `limit`, or \
             searched with grep."
        );
        ReadTool {
            shared,
            description,
        }
    }
}

impl Tool for ReadTool {
    type Args = ReadArgs;

    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn call(&self, args: ReadArgs) -> Result<ToolOutput, ToolError> {
        let shared = Arc::clone(&self.shared);
        let text = super::blocking(move || read(&shared, &args)).await??;
        Ok(ToolOutput::text(text))
    }
}

fn read(shared: &Shared, args: &ReadArgs) -> Result<String, SandboxError> {
    let path = SandboxPath::parse(Some(&args.path))?;
    let meta = shared
        .dir
        .metadata(path.cap())
        .map_err(|e| path.io_error("read", e))?;
    if meta.is_dir() {
        return Err(SandboxError::IsDirectory { path: path.arg });
    }
    // FIFOs and devices could block or never end: only regular files are opened.
    if !meta.is_file() {
        return Err(SandboxError::NotRegularFile { path: path.arg });
    }
    if args.offset.is_none() && args.limit.is_none() && meta.len() > MAX_READ_FILE_BYTES {
        return Err(SandboxError::TooLarge {
            path: path.arg,
            size: meta.len(),
            limit: MAX_READ_FILE_BYTES,
        });
    }
    let mut file = shared
        .dir
        .open(path.cap())
        .map_err(|e| path.io_error("read", e))?;
    let io_err = |e| path.io_error("read", e);

    let mut head = Vec::new();
    (&mut file)
        .take(BINARY_CHECK_BYTES)
        .read_to_end(&mut head)
        .map_err(io_err)?;
    if head.contains(&0) {
        return Err(SandboxError::Binary { path: path.arg });
    }
    let mut reader = BufReader::new(Cursor::new(head).chain(file));

    let start = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(DEFAULT_READ_LINES).max(1);
    let mut out = Lines::new(shared.config.output_limit);
    let mut line = Vec::new();
    let mut lineno: u64 = 0;
    let mut shown: u64 = 0;
    let mut more = false;
    let mut full = false;
    while read_line_capped(&mut reader, &mut line).map_err(io_err)? {
        lineno += 1;
        if lineno < start {
            continue;
        }
        if shown == limit {
            more = true;
            break;
        }
        let text = String::from_utf8_lossy(strip_eol(&line));
        if !out.push(&format!("{lineno:>6}\t{}", cut_line(&text))) {
            full = true;
            break;
        }
        shown += 1;
    }
    if lineno == 0 {
        return Ok("(empty file)".to_string());
    }
    if shown == 0 && !full {
        return Err(SandboxError::OffsetPastEnd {
            path: path.arg,
            lines: lineno,
            offset: start,
        });
    }
    let last = start + shown.saturating_sub(1);
    let note = if full {
        Some(format!(
            "[output limit reached: showing lines {start}-{last}; call read with offset={} to read more]",
            last + 1
        ))
    } else if more {
        Some(format!(
            "[showing lines {start}-{last}; call read with offset={} to read more]",
            last + 1
        ))
    } else {
        None
    };
    Ok(out.finish(note))
}

/// Reads one line (through `\n`) into `buf`, keeping at most a few bytes more than
/// [`MAX_LINE_BYTES`] so one huge line cannot fill memory; returns `false` at end of file.
fn read_line_capped(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<bool> {
    // Enough over the cut that `cut_line` sees the line is long and marks the cut.
    const KEEP: usize = MAX_LINE_BYTES + 4;
    buf.clear();
    let mut any = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(any);
        }
        any = true;
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..=i], true),
            None => (chunk, false),
        };
        let room = KEEP.saturating_sub(buf.len());
        buf.extend_from_slice(&part[..room.min(part.len())]);
        let n = part.len();
        reader.consume(n);
        if done {
            return Ok(true);
        }
    }
}
