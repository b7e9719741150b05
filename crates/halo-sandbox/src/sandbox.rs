//! [`ContainerSandbox`]: a real root folder, and the confinement of path arguments to it.
//!
//! Confinement is capability-based: the root is opened once as a [`cap_std::fs::Dir`], and
//! every file operation goes through that handle. cap-std resolves each path beneath the
//! handle (with `openat2(RESOLVE_BENEATH)` on Linux) and refuses absolute paths, `..`
//! above the root and symbolic links that lead outside it, at open time. Path arguments
//! are also cleaned lexically first (absolute paths and `..` above the root are refused
//! before any IO) so that the model gets a precise message, and so that the walkers of
//! `glob` and `grep` start from a path with no `..` in it.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use halo_core::DynTool;

use crate::error::SandboxError;
use crate::tools;

/// The exec timeout of `bash` when the model gives none: 30 s.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest timeout the model may ask `bash` for: 600 s. Longer requests are clamped.
pub const MAX_EXEC_TIMEOUT: Duration = Duration::from_secs(600);

/// The default bound on a tool result, in bytes: 32 KiB.
///
/// Every tool stops adding lines (file lines, paths, matches) before its result passes the
/// bound and says so in a closing note; `bash` keeps the head and the tail of each of
/// stdout and stderr within half the bound each. A result is at most the bound plus a note
/// of under 200 bytes.
pub const DEFAULT_OUTPUT_LIMIT: usize = 32 * 1024;

/// The smallest output limit [`ContainerSandbox::with_output_limit`] accepts: 4 KiB, room for one line cut at [`MAX_LINE_BYTES`].
pub const MIN_OUTPUT_LIMIT: usize = 4 * 1024;

/// The number of lines `read` returns when the model gives no `limit`: 2000.
pub const DEFAULT_READ_LINES: u64 = 2000;

/// The longest line `read` and `grep` show, in bytes; longer lines are cut: 2000.
pub const MAX_LINE_BYTES: usize = 2000;

/// The largest file `read` returns whole (without `offset` or `limit`), in bytes: 256 KiB.
pub const MAX_READ_FILE_BYTES: u64 = 256 * 1024;

/// The most entries `ls` and paths `glob` list, and matches `grep` shows: 1000.
pub const MAX_RESULTS: usize = 1000;

/// The environment variables `bash` inherits by default; every other variable (API keys
/// included) is removed.
pub const DEFAULT_ENV_ALLOWLIST: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
    "TMPDIR",
];

/// A sandbox over a real root folder. Its [`tools`](Self::tools) — `read`, `write`, `ls`,
/// `glob`, `grep` and `bash` — take paths relative to the root and never touch a file
/// outside it.
///
/// The tools' names, descriptions and parameter schemas depend only on the options below,
/// never on the root's location or the time, so two sandboxes with the same options give
/// byte-identical tool specs and an agent's stable prefix stays cached across runs.
///
/// # Security
///
/// This first version confines the **file tools** (`read`, `write`, `ls`, `glob`, `grep`)
/// to the root. `bash` runs with the root as its working folder, a scrubbed environment,
/// stdin closed, a timeout and its own process group, but it is not isolated from the rest
/// of the machine: a command can still name absolute paths. Run it on machines and
/// folders you would let the model's author use.
///
/// ```
/// use halo_sandbox::ContainerSandbox;
///
/// let dir = tempfile::tempdir().unwrap();
/// let sandbox = ContainerSandbox::new(dir.path()).unwrap();
/// let names: Vec<String> = sandbox.tools().iter().map(|t| t.spec().name).collect();
/// assert_eq!(names, ["read", "write", "ls", "glob", "grep", "bash"]);
/// ```
#[derive(Clone)]
pub struct ContainerSandbox {
    root: PathBuf,
    dir: Arc<Dir>,
    config: Config,
}

/// The options a sandbox's tools share.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) exec_timeout: Duration,
    pub(crate) output_limit: usize,
    pub(crate) env_allowlist: Vec<String>,
}

impl fmt::Debug for ContainerSandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContainerSandbox")
            .field("root", &self.root)
            .field("exec_timeout", &self.config.exec_timeout)
            .field("output_limit", &self.config.output_limit)
            .field("env_allowlist", &self.config.env_allowlist)
            .finish()
    }
}

impl ContainerSandbox {
    /// Opens a sandbox over `root`, an existing directory, with the default options: exec
    /// timeout [`DEFAULT_EXEC_TIMEOUT`], output limit [`DEFAULT_OUTPUT_LIMIT`] bytes,
    /// environment allowlist [`DEFAULT_ENV_ALLOWLIST`].
    ///
    /// # Errors
    /// [`SandboxError::Root`] when `root` does not exist or cannot be opened,
    /// [`SandboxError::RootNotDirectory`] when it is not a directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let given = root.as_ref();
        let root_err = |source| SandboxError::Root {
            root: given.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(given).map_err(root_err)?;
        if !meta.is_dir() {
            return Err(SandboxError::RootNotDirectory {
                root: given.to_path_buf(),
            });
        }
        // The walkers of glob and grep and the working folder of bash use the ambient
        // path; make it absolute once so a later change of the process's folder does not
        // move the sandbox.
        let root = given.canonicalize().map_err(root_err)?;
        let dir = Dir::open_ambient_dir(&root, ambient_authority()).map_err(root_err)?;
        Ok(ContainerSandbox {
            root,
            dir: Arc::new(dir),
            config: Config {
                exec_timeout: DEFAULT_EXEC_TIMEOUT,
                output_limit: DEFAULT_OUTPUT_LIMIT,
                env_allowlist: DEFAULT_ENV_ALLOWLIST
                    .iter()
                    .map(|s| (*s).to_string())
                    .collect(),
            },
        })
    }

    /// Sets the timeout `bash` uses when the model gives none (clamped to
    /// [`MAX_EXEC_TIMEOUT`], at least 1 ms). It appears in the `bash` tool's description.
    pub fn with_exec_timeout(mut self, timeout: Duration) -> Self {
        self.config.exec_timeout = timeout.clamp(Duration::from_millis(1), MAX_EXEC_TIMEOUT);
        self
    }

    /// Sets the bound on each tool result, in bytes (at least [`MIN_OUTPUT_LIMIT`]; smaller
    /// values are raised to it). See [`DEFAULT_OUTPUT_LIMIT`].
    pub fn with_output_limit(mut self, bytes: usize) -> Self {
        self.config.output_limit = bytes.max(MIN_OUTPUT_LIMIT);
        self
    }

    /// Replaces the names of the environment variables `bash` inherits from this process.
    /// Every other variable is removed. When `PATH` is not inherited, commands get
    /// `PATH=/usr/local/bin:/usr/bin:/bin`.
    pub fn with_env_allowlist<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.config.env_allowlist = names.into_iter().map(Into::into).collect();
        self
    }

    /// The root folder, absolute.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The exec timeout `bash` uses when the model gives none.
    pub fn exec_timeout(&self) -> Duration {
        self.config.exec_timeout
    }

    /// The bound on each tool result, in bytes.
    pub fn output_limit(&self) -> usize {
        self.config.output_limit
    }

    /// The environment variables `bash` inherits.
    pub fn env_allowlist(&self) -> &[String] {
        &self.config.env_allowlist
    }

    /// The sandbox's tools, in this order: `read`, `write`, `ls`, `glob`, `grep`, `bash`.
    /// Give them to an agent with `HaloAgent::builder(model).tools(sandbox.tools())`.
    ///
    /// The file tools run on tokio's blocking pool when a tokio runtime is running, and in
    /// place otherwise. `bash` needs a tokio runtime with the IO and time drivers enabled
    /// (`enable_all`); with no tokio runtime at all it fails with
    /// [`ToolError::Fatal`](halo_core::ToolError::Fatal).
    ///
    /// # Cancel safety
    /// Dropping a `bash` call's future kills the command's whole process group.
    pub fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        let shared = Arc::new(Shared {
            root: self.root.clone(),
            dir: Arc::clone(&self.dir),
            config: self.config.clone(),
        });
        tools::all(shared)
    }
}

/// What every tool of one sandbox holds.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The absolute ambient path of the root (for walkers and bash's working folder).
    pub(crate) root: PathBuf,
    /// The capability every file operation goes through.
    pub(crate) dir: Arc<Dir>,
    pub(crate) config: Config,
}

/// A path argument after lexical cleaning: relative, without `.` or `..` components.
#[derive(Debug, Clone)]
pub(crate) struct SandboxPath {
    /// The argument as the model gave it (for error messages).
    pub(crate) arg: String,
    /// The cleaned relative path; empty for the root itself.
    pub(crate) rel: PathBuf,
}

impl SandboxPath {
    /// Cleans a path argument. `None` and `""` mean the root.
    ///
    /// # Errors
    /// [`SandboxError::InvalidPath`] for a NUL byte, [`SandboxError::OutsideRoot`] for an
    /// absolute path or `..` above the root.
    pub(crate) fn parse(arg: Option<&str>) -> Result<Self, SandboxError> {
        let arg = arg.unwrap_or("");
        if arg.contains('\0') {
            return Err(SandboxError::InvalidPath {
                path: arg.escape_debug().to_string(),
                reason: "it contains a NUL byte",
            });
        }
        let outside = || SandboxError::OutsideRoot {
            path: arg.to_string(),
        };
        let mut rel = PathBuf::new();
        for c in Path::new(arg).components() {
            match c {
                Component::Normal(s) => rel.push(s),
                Component::CurDir => {}
                // `..` is cleaned lexically, so `link/..` is the root even when `link` is a
                // symbolic link; cap-std still resolves what remains beneath the root.
                Component::ParentDir => {
                    if !rel.pop() {
                        return Err(outside());
                    }
                }
                Component::RootDir | Component::Prefix(_) => return Err(outside()),
            }
        }
        Ok(SandboxPath {
            // An empty argument names the root; say so in messages.
            arg: if arg.is_empty() { "." } else { arg }.to_string(),
            rel,
        })
    }

    /// The path to hand to cap-std: `.` for the root.
    pub(crate) fn cap(&self) -> &Path {
        if self.rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.rel
        }
    }

    /// The cleaned path for display, with `/` separators: `.` for the root.
    pub(crate) fn display(&self) -> String {
        display_rel(self.cap())
    }

    /// Maps an IO error of an operation on this path to the error the model reads.
    pub(crate) fn io_error(&self, op: &'static str, e: io::Error) -> SandboxError {
        let path = self.arg.clone();
        if is_escape(&e) {
            return SandboxError::OutsideRoot { path };
        }
        match e.kind() {
            io::ErrorKind::NotFound => SandboxError::NotFound { path },
            io::ErrorKind::IsADirectory => SandboxError::IsDirectory { path },
            _ => SandboxError::Io {
                op,
                path,
                source: e,
            },
        }
    }
}

/// Whether cap-std refused a path because it leads outside the root. cap-std reports an
/// escape as `PermissionDenied` built by itself, without an OS error code (see
/// `cap_primitives::fs::errors::escape_attempt`), while a real `EACCES` from the kernel
/// carries its code.
pub(crate) fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.raw_os_error().is_none()
}

/// A relative path for the model, with `/` separators (lossy for non-UTF-8 names).
pub(crate) fn display_rel(p: &Path) -> String {
    let parts: Vec<String> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned_lexically() {
        let rel = |s: &str| SandboxPath::parse(Some(s)).map(|p| p.display());
        assert_eq!(rel("a/./b/../c").unwrap(), "a/c");
        assert_eq!(rel("./").unwrap(), ".");
        assert_eq!(rel("").unwrap(), ".");
        assert_eq!(SandboxPath::parse(None).unwrap().display(), ".");
        assert_eq!(SandboxPath::parse(Some("")).unwrap().arg, ".");
        assert!(matches!(rel("../x"), Err(SandboxError::OutsideRoot { .. })));
        assert!(matches!(
            rel("a/../../x"),
            Err(SandboxError::OutsideRoot { .. })
        ));
        assert!(matches!(
            rel("/etc/passwd"),
            Err(SandboxError::OutsideRoot { .. })
        ));
        let nul = rel("a\0b").unwrap_err();
        assert_eq!(
            nul.to_string(),
            "path `a\\0b` is not valid: it contains a NUL byte"
        );
    }

    #[test]
    fn only_self_made_permission_errors_are_escapes() {
        let kernel = io::Error::from_raw_os_error(13);
        assert_eq!(kernel.kind(), io::ErrorKind::PermissionDenied);
        assert!(!is_escape(&kernel));
        assert!(is_escape(&io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a path led outside of the filesystem"
        )));
    }
}
