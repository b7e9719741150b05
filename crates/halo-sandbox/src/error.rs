//! [`SandboxError`]: why opening a sandbox or one of its tool operations failed.
//!
//! Every message is written for the model that called the tool: it says what went wrong
//! and, where it can, what to do instead. Inside a tool an error becomes
//! [`ToolError::Failed`], which the agent turns into a tool result with `is_error: true`.

use std::io;
use std::path::PathBuf;

use halo_core::ToolError;

/// Why a sandbox operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The root folder given to [`ContainerSandbox::new`](crate::ContainerSandbox::new)
    /// could not be opened (it does not exist, or it cannot be read).
    #[error("sandbox root `{}` cannot be opened: {source}", root.display())]
    Root {
        /// The root as given.
        root: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The root given to [`ContainerSandbox::new`](crate::ContainerSandbox::new) is not a
    /// directory.
    #[error("sandbox root `{}` is not a directory", root.display())]
    RootNotDirectory {
        /// The root as given.
        root: PathBuf,
    },
    /// A path argument is absolute, climbs above the root with `..`, or resolves through a
    /// symbolic link to a place outside the root.
    #[error("path `{path}` is outside the sandbox root; use a path relative to the root")]
    OutsideRoot {
        /// The path as the model gave it.
        path: String,
    },
    /// A path argument cannot name a file at all (it contains a NUL byte).
    #[error("path `{path}` is not valid: {reason}")]
    InvalidPath {
        /// The path as the model gave it, with control characters escaped.
        path: String,
        /// Why it is not valid.
        reason: &'static str,
    },
    /// Nothing exists at the path.
    #[error("`{path}` does not exist; use ls or glob to find the right path")]
    NotFound {
        /// The path as the model gave it.
        path: String,
    },
    /// A file operation was given a directory.
    #[error("`{path}` is a directory; use ls to list it")]
    IsDirectory {
        /// The path as the model gave it.
        path: String,
    },
    /// A directory operation was given something else.
    #[error("`{path}` is not a directory; use read to see a file")]
    NotDirectory {
        /// The path as the model gave it.
        path: String,
    },
    /// The path names a FIFO, socket or device, which the file tools do not open.
    #[error("`{path}` is not a regular file")]
    NotRegularFile {
        /// The path as the model gave it.
        path: String,
    },
    /// The file contains NUL bytes in its first 8 KiB.
    #[error(
        "`{path}` looks like a binary file (it contains NUL bytes); only text files can be read"
    )]
    Binary {
        /// The path as the model gave it.
        path: String,
    },
    /// A whole-file read of a file over [`MAX_READ_FILE_BYTES`](crate::MAX_READ_FILE_BYTES).
    #[error(
        "`{path}` is {size} bytes, over the {limit}-byte limit for reading a whole file; \
         read part of it with offset and limit, or search it with grep"
    )]
    TooLarge {
        /// The path as the model gave it.
        path: String,
        /// The file's size, in bytes.
        size: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// `read` was given an offset past the last line.
    #[error("`{path}` has {lines} lines; offset {offset} is past the end")]
    OffsetPastEnd {
        /// The path as the model gave it.
        path: String,
        /// The file's line count.
        lines: u64,
        /// The requested 1-based offset.
        offset: u64,
    },
    /// A glob or regular expression does not compile, or reaches outside the root.
    #[error("invalid {kind} `{pattern}`: {message}")]
    InvalidPattern {
        /// `glob` or `regex`.
        kind: &'static str,
        /// The pattern as the model gave it.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
    /// `bash` could not be started.
    #[error("cannot start `bash`: {source}")]
    Spawn {
        /// The underlying error.
        source: io::Error,
    },
    /// Any other IO failure.
    #[error("cannot {op} `{path}`: {source}")]
    Io {
        /// What was being done (`read`, `write`, `list`...).
        op: &'static str,
        /// The path as the model gave it.
        path: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl From<SandboxError> for ToolError {
    fn from(e: SandboxError) -> Self {
        ToolError::Failed(e.to_string())
    }
}
