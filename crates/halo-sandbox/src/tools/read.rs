//! `read`: a text file's lines, numbered like `cat -n`.

use std::sync::Arc;

use halo_core::sandbox::{FileKind, SandboxError, SandboxPath};
use halo_core::{Tool, ToolAnnotations, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    Ctx, DEFAULT_READ_LINES, MAX_LINE_BYTES, MAX_OPEN_FILE_BYTES, MAX_READ_FILE_BYTES, failed,
};
use crate::text::{Lines, show_line};

/// How many leading bytes are checked for NUL to tell a binary file: 8 KiB (as git does).
pub(super) const BINARY_CHECK_BYTES: usize = 8 * 1024;

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

pub(super) struct ReadTool {
    ctx: Arc<Ctx>,
    description: String,
}

impl ReadTool {
    pub(super) fn new(ctx: Arc<Ctx>) -> Self {
        let description = format!(
            "Reads a text file in the sandbox. Returns its lines numbered like `cat -n`: the \
             line number right-aligned in 6 columns, a tab, then the line. Returns up to \
             {DEFAULT_READ_LINES} lines from `offset` (or `limit` lines); lines longer than \
             {MAX_LINE_BYTES} bytes are cut. Binary files are refused. Files over \
             {MAX_READ_FILE_BYTES} bytes must be read in parts with `offset` and `limit`, or \
             searched with grep; files over {MAX_OPEN_FILE_BYTES} bytes can only be searched."
        );
        ReadTool { ctx, description }
    }
}

impl Tool for ReadTool {
    type Args = ReadArgs;

    /// Reads only: runs concurrently with the step's other read-only calls, and again on
    /// resume when interrupted.
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }

    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn call(&self, args: ReadArgs) -> Result<ToolOutput, ToolError> {
        let path = self.ctx.path(Some(&args.path))?;
        let whole = args.offset.is_none() && args.limit.is_none();
        let limit = if whole {
            MAX_READ_FILE_BYTES
        } else {
            MAX_OPEN_FILE_BYTES
        };
        let bytes = read_text_file(&self.ctx, &path, limit, "read").await?;
        let text = number_lines(
            &path,
            &bytes,
            args.offset.unwrap_or(1).max(1),
            args.limit.unwrap_or(DEFAULT_READ_LINES).max(1),
            self.ctx.options.output_limit(),
        )?;
        Ok(ToolOutput::text(text))
    }
}

/// The bytes of a regular text file of at most `limit` bytes, for the tool that will
/// `verb` it (`read`, `edited`); refuses folders, FIFOs, larger files and binary files (a
/// NUL byte in the first [`BINARY_CHECK_BYTES`]) with a message that says what to do.
pub(super) async fn read_text_file(
    ctx: &Ctx,
    path: &SandboxPath,
    limit: u64,
    verb: &str,
) -> Result<Vec<u8>, ToolError> {
    let meta = ctx.sandbox.stat(path).await.map_err(|e| match e {
        // `a.txt/b`: a component before the last is not a folder.
        SandboxError::NotDirectory { .. } => ToolError::Failed(format!(
            "`{path}` does not exist: a folder in its path is a file; use ls or glob to find \
             the right path"
        )),
        e => failed(e),
    })?;
    match meta.kind {
        FileKind::File => {}
        FileKind::Dir => {
            return Err(failed(SandboxError::IsDirectory {
                path: path.display().into(),
            }));
        }
        FileKind::Symlink | FileKind::Other => {
            return Err(failed(SandboxError::NotRegularFile {
                path: path.display().into(),
            }));
        }
    }
    let too_large = |size: u64| {
        let advice = if limit == MAX_READ_FILE_BYTES {
            "read part of it with offset and limit, or search it with grep"
        } else {
            "search it with grep instead"
        };
        ToolError::Failed(format!(
            "`{path}` is {size} bytes, over the {limit}-byte limit for {}; {advice}",
            if limit == MAX_READ_FILE_BYTES {
                "reading a whole file"
            } else {
                "opening a file"
            }
        ))
    };
    if meta.len > limit {
        return Err(too_large(meta.len));
    }
    let bytes = ctx.sandbox.read(path).await.map_err(failed)?;
    // The file may have grown since it was looked at.
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    if bytes[..bytes.len().min(BINARY_CHECK_BYTES)].contains(&0) {
        return Err(ToolError::Failed(format!(
            "`{path}` looks like a binary file (it contains NUL bytes); only text files can \
             be {verb}"
        )));
    }
    Ok(bytes)
}

/// Lines `start..start + limit` of `bytes`, numbered, within `output_limit` bytes, with a
/// note on how to read on.
fn number_lines(
    path: &SandboxPath,
    bytes: &[u8],
    start: u64,
    limit: u64,
    output_limit: usize,
) -> Result<String, ToolError> {
    if bytes.is_empty() {
        return Ok("(empty file)".to_string());
    }
    let mut out = Lines::new(output_limit);
    let mut lineno: u64 = 0;
    let mut shown: u64 = 0;
    let mut more = false;
    let mut full = false;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        lineno += 1;
        if lineno < start {
            continue;
        }
        if shown == limit {
            more = true;
            break;
        }
        if !out.push(&format!("{lineno:>6}\t{}", show_line(line))) {
            full = true;
            break;
        }
        shown += 1;
    }
    if shown == 0 && !full {
        return Err(ToolError::Failed(format!(
            "`{path}` has {lineno} lines; offset {start} is past the end"
        )));
    }
    let last = start + shown.saturating_sub(1);
    let read_on = if full {
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
    let encoding = std::str::from_utf8(bytes)
        .is_err()
        .then(|| NOT_UTF8_NOTE.to_string());
    let note = match (encoding, read_on) {
        (Some(a), Some(b)) => Some(format!("{a}\n{b}")),
        (a, b) => a.or(b),
    };
    Ok(out.finish(note))
}

/// The note `read` adds for a file that is not valid UTF-8.
const NOT_UTF8_NOTE: &str = "[the file is not valid UTF-8 (perhaps Latin-1 or another \
     encoding): invalid bytes are shown as U+FFFD (\u{FFFD}); edit refuses this file, and write \
     would replace all of its original bytes with the UTF-8 text you give]";
