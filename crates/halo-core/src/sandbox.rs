//! The [`Sandbox`] trait: the files and (optionally) the processes an agent's tools work
//! on, behind sandbox-relative paths.
//!
//! halo-core only defines the contract; `halo-sandbox` implements it twice
//! (`VirtualSandbox`, an in-memory tree, and `ContainerSandbox`, a real root folder) and
//! builds the coding tool set (`read`, `write`, `edit`, `ls`, `glob`, `grep`, `bash`) on any
//! implementation. One conformance suite runs against both, so path semantics are the same
//! everywhere.
//!
//! Paths are validated once, on the way in, by [`SandboxPath::parse`]: relative, `/`
//! separated, `.` and `..` resolved lexically, never above the root, no NUL bytes, bounded
//! length. An implementation still checks at open time that what a path *resolves to*
//! (through symbolic links) stays inside the root.

use std::fmt;
use std::io;
use std::time::Duration;

use async_trait::async_trait;

/// The longest path a sandbox accepts, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// The longest single path component a sandbox accepts, in bytes (Linux's `NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;

/// A validated sandbox-relative path: `/`-separated normal components, no `.` or `..`, no
/// leading `/`, no NUL byte, at most [`MAX_PATH_BYTES`] bytes with components of at most
/// [`MAX_NAME_BYTES`]. The empty path is the root.
///
/// ```
/// use halo_core::sandbox::SandboxPath;
///
/// assert_eq!(SandboxPath::parse("src/./a/../lib.rs").unwrap().as_str(), "src/lib.rs");
/// assert_eq!(SandboxPath::parse("./").unwrap().display(), ".");
/// assert!(SandboxPath::parse("../etc/passwd").is_err());
/// assert!(SandboxPath::parse("/etc/passwd").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SandboxPath {
    rel: String,
}

impl SandboxPath {
    /// The root.
    pub fn root() -> Self {
        SandboxPath::default()
    }

    /// Validates a path argument. `""`, `"."` and `"./"` name the root; `a/../b` is `b`.
    ///
    /// # Errors
    /// [`SandboxError::OutsideRoot`] for an absolute path or `..` above the root;
    /// [`SandboxError::InvalidPath`] for a NUL byte or a path or component that is too long.
    pub fn parse(arg: &str) -> Result<Self, SandboxError> {
        if arg.contains('\0') {
            return Err(SandboxError::InvalidPath {
                path: arg.escape_debug().to_string(),
                reason: "it contains a NUL byte".into(),
            });
        }
        if arg.len() > MAX_PATH_BYTES {
            return Err(SandboxError::InvalidPath {
                path: format!("{}...", truncate_str(arg, 64)),
                reason: format!(
                    "it is {} bytes long, over the {MAX_PATH_BYTES}-byte limit",
                    arg.len()
                ),
            });
        }
        if arg.starts_with('/') {
            return Err(SandboxError::OutsideRoot { path: arg.into() });
        }
        let mut parts: Vec<&str> = Vec::new();
        for part in arg.split('/') {
            match part {
                "" | "." => {}
                // `..` is resolved lexically, so `link/..` is the parent of `link` even when
                // `link` is a symbolic link; what remains is resolved beneath the root.
                ".." => {
                    if parts.pop().is_none() {
                        return Err(SandboxError::OutsideRoot { path: arg.into() });
                    }
                }
                name => {
                    if name.len() > MAX_NAME_BYTES {
                        return Err(SandboxError::InvalidPath {
                            path: format!("{}...", truncate_str(arg, 64)),
                            reason: format!(
                                "a component is {} bytes long, over the {MAX_NAME_BYTES}-byte limit",
                                name.len()
                            ),
                        });
                    }
                    parts.push(name);
                }
            }
        }
        Ok(SandboxPath {
            rel: parts.join("/"),
        })
    }

    /// The path, `""` for the root.
    pub fn as_str(&self) -> &str {
        &self.rel
    }

    /// The path for messages: `.` for the root.
    pub fn display(&self) -> &str {
        if self.rel.is_empty() { "." } else { &self.rel }
    }

    /// Whether this is the root.
    pub fn is_root(&self) -> bool {
        self.rel.is_empty()
    }

    /// The components, in order (none for the root).
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.rel.split('/').filter(|s| !s.is_empty())
    }

    /// The last component; `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        self.components().last()
    }

    /// The parent; `None` for the root.
    pub fn parent(&self) -> Option<SandboxPath> {
        if self.rel.is_empty() {
            return None;
        }
        Some(SandboxPath {
            rel: self
                .rel
                .rsplit_once('/')
                .map(|(p, _)| p.to_string())
                .unwrap_or_default(),
        })
    }

    /// This path joined with a relative path (validated like [`parse`](Self::parse)).
    ///
    /// # Errors
    /// As [`parse`](Self::parse) on the joined string.
    pub fn join(&self, rel: &str) -> Result<SandboxPath, SandboxError> {
        if self.rel.is_empty() {
            SandboxPath::parse(rel)
        } else if rel.starts_with('/') {
            Err(SandboxError::OutsideRoot { path: rel.into() })
        } else {
            SandboxPath::parse(&format!("{}/{rel}", self.rel))
        }
    }

    /// Whether `self` is `other` or lies beneath it.
    pub fn starts_with(&self, other: &SandboxPath) -> bool {
        other.rel.is_empty()
            || self.rel == other.rel
            || (self.rel.starts_with(&other.rel) && self.rel.as_bytes()[other.rel.len()] == b'/')
    }
}

impl fmt::Display for SandboxPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.display())
    }
}

fn truncate_str(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (reported by [`Sandbox::list`]; [`Sandbox::stat`] follows links).
    Symlink,
    /// A FIFO, socket or device: the file tools do not open these.
    Other,
}

/// What [`Sandbox::stat`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// What the path names (after following symbolic links inside the root).
    pub kind: FileKind,
    /// Size in bytes of a file; 0 for anything else.
    pub len: u64,
    /// Whether writes to this path are refused (a protected path such as `.git`).
    pub read_only: bool,
}

/// One entry of [`Sandbox::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name (one component).
    pub name: String,
    /// What it is; symbolic links are reported as [`FileKind::Symlink`], not followed.
    pub kind: FileKind,
    /// Size in bytes (files), 0 otherwise.
    pub len: u64,
}

/// What a sandbox can do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Whether [`Sandbox::exec`] runs commands.
    pub exec: bool,
    /// How those commands are isolated from the machine.
    pub isolation: Isolation,
}

impl Capabilities {
    /// A sandbox of files only: `exec: false`, [`Isolation::NoCommands`].
    pub const FILES_ONLY: Capabilities = Capabilities {
        exec: false,
        isolation: Isolation::NoCommands,
    };

    /// A sandbox of files and commands isolated as `isolation`.
    pub fn files_and_exec(isolation: Isolation) -> Capabilities {
        Capabilities {
            exec: true,
            isolation,
        }
    }
}

/// How a sandbox's commands are isolated from the machine, as [`Capabilities::isolation`]
/// reports it. Its `Display` is one line for a startup banner.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Isolation {
    /// The sandbox runs no commands.
    NoCommands,
    /// Commands run in an OS sandbox.
    Os(OsIsolation),
    /// Commands run as ordinary processes of this user, able to reach anything the user
    /// can: chosen explicitly (a "full access" mode).
    Unconfined,
    /// An OS sandbox was asked for but cannot be had on this machine, so
    /// [`Sandbox::exec`] refuses with [`SandboxError::NoOsSandbox`] carrying `reason`.
    Unavailable {
        /// Why, and what to install (the same text as the error).
        reason: String,
    },
}

/// What an OS sandbox confines ([`Isolation::Os`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OsIsolation {
    /// What enforces it, such as `"bubblewrap"`.
    pub mechanism: &'static str,
    /// What the command may write.
    pub filesystem: FilesystemAccess,
    /// Whether the command may use the network (its own network namespace otherwise, with
    /// only a loopback interface of its own).
    pub network: bool,
    /// Whether the command sees only its own processes (a private PID namespace), and all of
    /// them die when it ends or times out.
    pub private_processes: bool,
}

impl OsIsolation {
    /// An OS sandbox of `mechanism` with these limits.
    pub const fn new(
        mechanism: &'static str,
        filesystem: FilesystemAccess,
        network: bool,
        private_processes: bool,
    ) -> OsIsolation {
        OsIsolation {
            mechanism,
            filesystem,
            network,
            private_processes,
        }
    }
}

/// What a command in an OS sandbox may write ([`OsIsolation::filesystem`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FilesystemAccess {
    /// Nothing: the whole filesystem is read-only, the root included.
    ReadOnly,
    /// The root, except its protected paths; everything else is read-only and `/tmp` is
    /// private to the command.
    WorkspaceWrite,
}

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Isolation::NoCommands => f.write_str("no commands"),
            Isolation::Os(os) => {
                let writes = match os.filesystem {
                    FilesystemAccess::ReadOnly => "filesystem read-only",
                    FilesystemAccess::WorkspaceWrite => {
                        "writes only in the root (protected paths read-only, private /tmp)"
                    }
                };
                let network = if os.network {
                    "network on"
                } else {
                    "network off"
                };
                let processes = if os.private_processes {
                    ", own processes only"
                } else {
                    ""
                };
                write!(
                    f,
                    "OS sandbox ({}): {writes}, {network}{processes}",
                    os.mechanism
                )
            }
            Isolation::Unconfined => {
                f.write_str("no OS sandbox: commands run unconfined, as this user (full access)")
            }
            Isolation::Unavailable { reason } => write!(f, "commands refused: {reason}"),
        }
    }
}

/// A [`Sandbox::glob`] query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobRequest {
    /// A glob (`*`, `?`, `[...]`, `{a,b}`, `**`), relative to `base`.
    pub pattern: String,
    /// Where to search from.
    pub base: SandboxPath,
    /// Whether to include hidden files (names starting with `.`) and paths `.gitignore`
    /// files ignore. Default `false`: the walk is gitignore-aware.
    pub include_ignored: bool,
    /// The most paths to return.
    pub limit: usize,
}

/// What [`Sandbox::glob`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GlobOutput {
    /// Matching regular files, sorted by path, at most `limit`.
    pub paths: Vec<SandboxPath>,
    /// Whether more paths matched than `limit`.
    pub truncated: bool,
}

/// A [`Sandbox::grep`] query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepRequest {
    /// A regular expression (Rust `regex` syntax, as ripgrep).
    pub pattern: String,
    /// The file or folder to search.
    pub base: SandboxPath,
    /// Only search files whose path (relative to `base`) matches this glob.
    pub glob: Option<String>,
    /// Case-insensitive matching.
    pub ignore_case: bool,
    /// Lines of context before and after each match.
    pub context: usize,
    /// As [`GlobRequest::include_ignored`].
    pub include_ignored: bool,
    /// The most matching lines to return.
    pub limit: usize,
}

/// One line of [`GrepOutput`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepLine {
    /// The file.
    pub path: SandboxPath,
    /// 1-based line number.
    pub line_number: u64,
    /// The line, without its line terminator (invalid UTF-8 replaced); a sandbox may cut a
    /// very long line, and then says so at its end.
    pub text: String,
    /// Whether this is a context line rather than a match.
    pub is_context: bool,
}

/// What [`Sandbox::grep`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GrepOutput {
    /// Matching lines (and context lines), sorted by path then line number.
    pub lines: Vec<GrepLine>,
    /// Whether more lines matched than `limit`.
    pub truncated: bool,
    /// Files not searched to their end (a line longer than the sandbox searches, a read
    /// that failed), sorted by path; what was found before the cut is in `lines`.
    pub skipped: Vec<GrepSkip>,
}

/// A file [`Sandbox::grep`] did not search to its end, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepSkip {
    /// The file.
    pub path: SandboxPath,
    /// Why it was cut, for the model: `a line is longer than 8 MiB`.
    pub reason: String,
}

/// A [`Sandbox::exec`] request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// A shell command line, run by `bash -c` in the sandbox root.
    pub command: String,
    /// When to kill the command's whole process group.
    pub timeout: Duration,
    /// The most bytes kept of each of stdout and stderr; the head and the tail are kept.
    pub output_limit: usize,
}

/// What [`Sandbox::exec`] returns. A non-zero exit code or a timeout is data, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// The exit code; `None` when the command was killed by a signal or timed out.
    pub exit_code: Option<i32>,
    /// The signal that ended the command (`9` for `SIGKILL`) when a signal did and the
    /// timeout did not; `None` otherwise.
    pub signal: Option<i32>,
    /// Whether the timeout killed the process group.
    pub timed_out: bool,
    /// Standard output, cut to the limit on UTF-8 character boundaries: when bytes were
    /// dropped, the kept head and tail (at most `output_limit / 2` bytes each) joined by a
    /// line `[... N bytes omitted ...]`.
    pub stdout: String,
    /// Standard error, cut likewise.
    pub stderr: String,
    /// Bytes of stdout dropped from the middle.
    pub stdout_dropped: u64,
    /// Bytes of stderr dropped from the middle.
    pub stderr_dropped: u64,
    /// The resource limit the command reached, in words, when the sandbox saw it reach one
    /// (`memory limit 4 GiB reached`): a command over a limit is killed or fails. `None`
    /// otherwise, and from a sandbox without limits.
    pub limit: Option<String>,
}

/// Why a sandbox operation failed. Messages are written for the model that called the tool:
/// they say what went wrong and what to do instead.
///
/// The variants that wrap an [`io::Error`] (`Root`, `Spawn`, `Io`) show it in their message
/// and keep it in their `error` field, but do not return it from
/// [`source`](std::error::Error::source): the model sees only the message, and a report
/// that walks the source chain (anyhow's `{:#}`) prints the cause once, not twice.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The sandbox could not be opened (a missing or unreadable root folder).
    #[error("sandbox root `{root}` cannot be opened: {error}")]
    Root {
        /// The root as given.
        root: String,
        /// The underlying error (shown in the message, not returned as the source).
        error: io::Error,
    },
    /// The sandbox root is not a directory.
    #[error("sandbox root `{root}` is not a directory")]
    RootNotDirectory {
        /// The root as given.
        root: String,
    },
    /// A path is absolute, climbs above the root with `..`, or resolves through a symbolic
    /// link to a place outside the root.
    #[error("path `{path}` is outside the sandbox root; use a path relative to the root")]
    OutsideRoot {
        /// The path as given.
        path: String,
    },
    /// A path cannot name a file (a NUL byte, too long).
    #[error("path `{path}` is not valid: {reason}")]
    InvalidPath {
        /// The path as given, escaped and shortened.
        path: String,
        /// Why it is not valid.
        reason: String,
    },
    /// Nothing exists at the path.
    #[error("`{path}` does not exist; use ls or glob to find the right path")]
    NotFound {
        /// The path.
        path: String,
    },
    /// A file operation was given a directory.
    #[error("`{path}` is a directory; use ls to list it")]
    IsDirectory {
        /// The path.
        path: String,
    },
    /// A directory operation was given something else (or a parent is a file).
    #[error("`{path}` is not a directory")]
    NotDirectory {
        /// The path.
        path: String,
    },
    /// The path names a FIFO, socket or device.
    #[error("`{path}` is not a regular file")]
    NotRegularFile {
        /// The path.
        path: String,
    },
    /// A write to a protected path (such as `.git`).
    #[error("`{path}` is read-only in this sandbox (protected path `{protected}`)")]
    ReadOnly {
        /// The path.
        path: String,
        /// The protected path it lies under.
        protected: String,
    },
    /// A directory to remove is not empty and `recursive` was not set.
    #[error("`{path}` is a directory that is not empty")]
    DirectoryNotEmpty {
        /// The path.
        path: String,
    },
    /// A glob or regular expression does not compile.
    #[error("invalid {kind} `{pattern}`: {message}")]
    InvalidPattern {
        /// `glob` or `regex`.
        kind: &'static str,
        /// The pattern.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
    /// The sandbox cannot do this (exec on a sandbox without processes).
    #[error("{operation} is not supported by this sandbox ({sandbox})")]
    Unsupported {
        /// The operation (`exec`).
        operation: &'static str,
        /// The sandbox kind.
        sandbox: &'static str,
    },
    /// Commands must run in an OS sandbox and none can be had here (not Linux, the sandbox
    /// program missing, namespaces disabled). `reason` says what to install or enable; the
    /// caller may instead choose explicitly to run commands unconfined.
    #[error("no OS sandbox for commands: {reason}")]
    NoOsSandbox {
        /// Why, and what to do about it.
        reason: String,
    },
    /// A command could not be started.
    #[error("cannot start the command: {error}")]
    Spawn {
        /// The underlying error (shown in the message, not returned as the source).
        error: io::Error,
    },
    /// Any other IO failure.
    #[error("cannot {op} `{path}`: {error}")]
    Io {
        /// What was being done (`read`, `write`, `list`...).
        op: &'static str,
        /// The path.
        path: String,
        /// The underlying error (shown in the message, not returned as the source).
        error: io::Error,
    },
}

/// A sandbox: files under a root and, where [`Capabilities::exec`] says so, commands.
///
/// Every path argument has been validated by [`SandboxPath::parse`]; implementations still
/// check at open time that symbolic links do not lead outside the root
/// ([`SandboxError::OutsideRoot`]). Implementations must give the same answers for the same
/// tree (the conformance suite in halo-sandbox checks it).
///
/// An object-safe `#[async_trait]` trait: hold any sandbox as a [`SharedSandbox`]
/// (`Arc<dyn Sandbox>`). Implementers write `async fn`s in an impl marked `#[async_trait]`
/// (re-exported as [`halo_core::async_trait`](crate::async_trait)); every future is boxed and
/// `Send`.
#[async_trait]
pub trait Sandbox: Send + Sync {
    /// What this sandbox can do.
    fn capabilities(&self) -> Capabilities;

    /// A short name of the implementation for messages (`virtual`, `container`).
    fn kind(&self) -> &'static str;

    /// The whole content of a regular file, in bytes.
    ///
    /// # Errors
    /// `NotFound`, `IsDirectory`, `NotRegularFile`, `OutsideRoot`, `Io`.
    async fn read(&self, path: &SandboxPath) -> Result<Vec<u8>, SandboxError>;

    /// Writes a file, replacing it, creating missing parent folders.
    ///
    /// # Errors
    /// `IsDirectory`, `NotDirectory` (a parent is a file), `ReadOnly`, `OutsideRoot`, `Io`.
    async fn write(&self, path: &SandboxPath, content: Vec<u8>) -> Result<(), SandboxError>;

    /// Appends `content` to a file, creating it (and missing parent folders) when absent.
    /// Implementations make the append atomic: a concurrent appender's bytes never land
    /// inside `content` (an append-only memory file relies on it). `VirtualSandbox`
    /// appends under its lock; `ContainerSandbox` writes once to a file opened `O_APPEND`.
    ///
    /// The default reads the file and writes it back whole: correct, but not atomic
    /// against a writer in another process; implementations should override it.
    ///
    /// # Errors
    /// As [`write`](Self::write), and [`read`](Self::read)'s errors other than `NotFound`.
    async fn append(&self, path: &SandboxPath, content: Vec<u8>) -> Result<(), SandboxError> {
        let mut data = match self.read(path).await {
            Ok(data) => data,
            Err(SandboxError::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
        data.extend_from_slice(&content);
        self.write(path, data).await
    }

    /// The entries of a folder, sorted by name (symbolic links not followed).
    ///
    /// # Errors
    /// `NotFound`, `NotDirectory`, `OutsideRoot`, `Io`.
    async fn list(&self, path: &SandboxPath) -> Result<Vec<DirEntry>, SandboxError>;

    /// What a path names (following symbolic links that stay inside the root).
    ///
    /// # Errors
    /// `NotFound`, `OutsideRoot`, `Io`.
    async fn stat(&self, path: &SandboxPath) -> Result<Metadata, SandboxError>;

    /// Removes a file, a symbolic link (not its target), or a folder (`recursive` for a
    /// folder that is not empty).
    ///
    /// # Errors
    /// `NotFound`, `DirectoryNotEmpty`, `ReadOnly`, `OutsideRoot` (also for the root itself), `Io`.
    async fn remove(&self, path: &SandboxPath, recursive: bool) -> Result<(), SandboxError>;

    /// Regular files matching a glob, gitignore-aware unless asked otherwise; symbolic
    /// links are not followed.
    ///
    /// # Errors
    /// `InvalidPattern`, `NotFound`, `OutsideRoot`, `Io`.
    async fn glob(&self, request: GlobRequest) -> Result<GlobOutput, SandboxError>;

    /// Lines matching a regular expression in regular files under a path.
    ///
    /// # Errors
    /// `InvalidPattern`, `NotFound`, `OutsideRoot`, `Io`.
    async fn grep(&self, request: GrepRequest) -> Result<GrepOutput, SandboxError>;

    /// Runs a command in the root. A non-zero exit or a timeout is an `Ok` [`ExecOutput`].
    ///
    /// # Errors
    /// `Unsupported` when [`Capabilities::exec`] is false; `Spawn` when it cannot start.
    ///
    /// # Cancel safety
    /// Dropping the future kills the command's whole process group.
    async fn exec(&self, request: ExecRequest) -> Result<ExecOutput, SandboxError>;
}

/// A shared, type-erased sandbox.
pub type SharedSandbox = std::sync::Arc<dyn Sandbox>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The error and its `source()` chain joined by `: `, as anyhow's `{:#}` prints it.
    fn report(err: &dyn std::error::Error) -> String {
        let mut text = err.to_string();
        let mut source = err.source();
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        text
    }

    #[test]
    fn an_io_cause_is_printed_once_in_a_source_chain() {
        // Trigger: `{:#}` of a missing root printed "No such file or directory" twice.
        let cause = || io::Error::from(io::ErrorKind::NotFound);
        let errors = [
            (
                SandboxError::Root {
                    root: "/nope".into(),
                    error: cause(),
                },
                "sandbox root `/nope` cannot be opened: entity not found",
            ),
            (
                SandboxError::Spawn { error: cause() },
                "cannot start the command: entity not found",
            ),
            (
                SandboxError::Io {
                    op: "read",
                    path: "a.txt".into(),
                    error: cause(),
                },
                "cannot read `a.txt`: entity not found",
            ),
        ];
        for (err, want) in errors {
            assert_eq!(report(&err), want);
            assert!(std::error::Error::source(&err).is_none(), "{err:?}");
        }
    }

    #[test]
    fn paths_are_cleaned_lexically_and_never_leave_the_root() {
        let p = |s: &str| SandboxPath::parse(s).map(|p| p.as_str().to_string());
        assert_eq!(p("a/./b/../c").unwrap(), "a/c");
        assert_eq!(p("a//b/").unwrap(), "a/b");
        assert_eq!(p("").unwrap(), "");
        assert_eq!(p("./").unwrap(), "");
        assert_eq!(p("a/..").unwrap(), "");
        assert!(matches!(p("../x"), Err(SandboxError::OutsideRoot { .. })));
        assert!(matches!(
            p("a/../../x"),
            Err(SandboxError::OutsideRoot { .. })
        ));
        assert!(matches!(p("/etc"), Err(SandboxError::OutsideRoot { .. })));
        assert_eq!(
            p("a\0b").unwrap_err().to_string(),
            "path `a\\0b` is not valid: it contains a NUL byte"
        );
        let long = "x/".repeat(MAX_PATH_BYTES);
        assert!(matches!(p(&long), Err(SandboxError::InvalidPath { .. })));
        let name = "é".repeat(200);
        let err = p(&name).unwrap_err().to_string();
        assert!(err.contains("400 bytes long"), "{err}");
    }

    #[test]
    fn path_helpers() {
        let a = SandboxPath::parse("src/lib.rs").unwrap();
        assert_eq!(a.file_name(), Some("lib.rs"));
        assert_eq!(a.parent().unwrap().as_str(), "src");
        assert_eq!(a.parent().unwrap().parent().unwrap(), SandboxPath::root());
        assert_eq!(SandboxPath::root().parent(), None);
        assert_eq!(SandboxPath::root().display(), ".");
        let src = SandboxPath::parse("src").unwrap();
        assert!(a.starts_with(&src));
        assert!(!SandboxPath::parse("srcx/a").unwrap().starts_with(&src));
        assert!(a.starts_with(&SandboxPath::root()));
        assert_eq!(src.join("../b").unwrap().as_str(), "b");
        assert!(src.join("../../b").is_err());
        assert!(src.join("/b").is_err());
    }
}
