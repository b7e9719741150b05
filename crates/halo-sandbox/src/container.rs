//! [`ContainerSandbox`]: a real root folder behind the [`Sandbox`] trait, every file
//! operation confined to it by a capability.
//!
//! The root is opened once as a [`cap_std::fs::Dir`], and every file operation goes through
//! that handle. cap-std resolves each path beneath the handle (with
//! `openat2(RESOLVE_BENEATH)` on Linux) and refuses absolute paths, `..` above the root and
//! symbolic links that lead outside it, at open time, whoever made the link and whenever.
//! Paths arrive already cleaned lexically ([`SandboxPath`]), so the model gets a precise
//! message for `..` before any IO. The security model is in [`docs/sandbox.md`].
//!
//! [`docs/sandbox.md`]: https://github.com/halo-rs/halo/blob/main/docs/sandbox.md

use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cap_fs_ext::OpenOptionsSyncExt;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, FileType, OpenOptions};
use halo_core::DynTool;
use halo_core::sandbox::{
    Capabilities, DirEntry, ExecOutput, ExecRequest, FileKind, GlobOutput, GlobRequest, GrepOutput,
    GrepRequest, Metadata, Sandbox, SandboxError, SandboxPath,
};

use crate::protect::{Look, Protection};
use crate::tools::{self, ToolOptions};

mod cgroup;
mod exec;
mod guard;
pub(crate) mod limits;
pub(crate) mod os;
mod search;
#[cfg(target_os = "linux")]
mod seccomp;

pub use limits::{ExecLimits, Limit};
pub use os::SandboxMode;

/// The environment variables commands inherit by default: `PATH`, `HOME`, `USER`,
/// `LOGNAME`, `SHELL`, `LANG`, `LC_ALL`, `LC_CTYPE`, `TERM`, `TZ`, `TMPDIR`, and the Rust
/// toolchain's `CARGO_HOME` and `RUSTUP_HOME` (paths, not secrets: without them `cargo` in a
/// command finds no toolchain where it is installed outside `~/.cargo`). Every other variable
/// (API keys included) is removed.
pub const DEFAULT_ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "TMPDIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
];

/// A sandbox over a real root folder: files through a cap-std capability, commands with
/// `bash -c` in the root ([`Sandbox::exec`]). Its [`tools`](Self::tools) are the coding tool
/// set of [`crate::tools()`].
///
/// # Security
///
/// The **file operations** (read, write, list, stat, remove, glob, grep, and so every file
/// tool) never touch a file outside the root: `..`, absolute paths, and symbolic links
/// leading out of the root — made before or during the run — are refused with
/// [`SandboxError::OutsideRoot`]; walks never follow links. Protected paths
/// ([`with_protected_paths`](Self::with_protected_paths)) and names at any depth
/// ([`with_protected_names`](Self::with_protected_names)) stay read-only, also through
/// links inside the root that lead into them; [`with_default_protection`](Self::with_default_protection)
/// protects what programs outside the sandbox start processes from (`.git`, `.mcp.json`).
/// Commands cannot change the existing ones, and what they make of them is renamed when
/// they end.
///
/// **exec** runs each command in an OS sandbox (bubblewrap, on Linux) chosen by
/// [`with_mode`](Self::with_mode): by default ([`SandboxMode::WorkspaceWrite`]) it may write
/// only in the root, not in its protected paths, has a private `/tmp`, no network
/// ([`with_network`](Self::with_network) opts in) and sees only its own processes, which all
/// die when it ends or times out. Its environment is scrubbed and stdin closed. Where no OS
/// sandbox can be had, exec refuses with [`SandboxError::NoOsSandbox`] unless
/// [`SandboxMode::FullAccess`] was chosen. What the OS sandbox does not confine (reads of
/// the machine's files, for one) is in [`docs/sandbox.md`].
///
/// [`docs/sandbox.md`]: https://github.com/halo-rs/halo/blob/main/docs/sandbox.md
///
/// ```
/// use halo_core::Sandbox;
/// use halo_core::sandbox::{SandboxError, SandboxPath};
/// use halo_sandbox::ContainerSandbox;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let sandbox = ContainerSandbox::new(dir.path())
///     .unwrap()
///     .with_protected_paths([".git"])
///     .unwrap();
/// let path = |s: &str| SandboxPath::parse(s).unwrap();
///
/// sandbox.write(&path("src/a.txt"), b"hi".to_vec()).await.unwrap();
/// assert_eq!(sandbox.read(&path("src/a.txt")).await.unwrap(), b"hi");
/// let refused = sandbox.write(&path(".git/config"), vec![]).await.unwrap_err();
/// assert!(matches!(refused, SandboxError::ReadOnly { .. }), "{refused}");
/// # });
/// ```
#[derive(Clone)]
pub struct ContainerSandbox {
    inner: Arc<Inner>,
    tool_options: ToolOptions,
}

/// What the sandbox's operations share.
#[derive(Clone)]
pub(crate) struct Inner {
    /// The absolute, canonical ambient path of the root (for the walkers and exec's working
    /// folder).
    pub(crate) root: PathBuf,
    /// The capability every file operation goes through.
    pub(crate) dir: Arc<Dir>,
    /// The protected paths and names.
    pub(crate) protection: Protection,
    env_allowlist: Vec<String>,
    /// How commands are confined.
    mode: SandboxMode,
    /// Whether commands in the OS sandbox may use the network.
    network: bool,
    /// What each command in the OS sandbox may use.
    limits: ExecLimits,
}

impl fmt::Debug for ContainerSandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContainerSandbox")
            .field("root", &self.inner.root)
            .field("protected", &self.inner.protection.paths)
            .field("protected_names", &self.inner.protection.names)
            .field("env_allowlist", &self.inner.env_allowlist)
            .field("mode", &self.inner.mode)
            .field("network", &self.inner.network)
            .field("limits", &self.inner.limits)
            .field("tool_options", &self.tool_options)
            .finish()
    }
}

impl ContainerSandbox {
    /// Opens a sandbox over `root`, an existing directory, with no protected paths, the
    /// environment allowlist [`DEFAULT_ENV_ALLOWLIST`] and default [`ToolOptions`].
    ///
    /// # Errors
    /// [`SandboxError::Root`] when `root` does not exist or cannot be opened,
    /// [`SandboxError::RootNotDirectory`] when it is not a directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let given = root.as_ref();
        let root_err = |error| SandboxError::Root {
            root: given.display().to_string(),
            error,
        };
        let meta = std::fs::metadata(given).map_err(root_err)?;
        if !meta.is_dir() {
            return Err(SandboxError::RootNotDirectory {
                root: given.display().to_string(),
            });
        }
        // The walkers and exec's working folder use the ambient path; make it absolute and
        // link-free once so a later change of the process's folder does not move the sandbox.
        let root = given.canonicalize().map_err(root_err)?;
        let dir = Dir::open_ambient_dir(&root, ambient_authority()).map_err(root_err)?;
        Ok(ContainerSandbox {
            inner: Arc::new(Inner {
                root,
                dir: Arc::new(dir),
                protection: Protection::default(),
                env_allowlist: DEFAULT_ENV_ALLOWLIST
                    .iter()
                    .map(|s| (*s).to_string())
                    .collect(),
                mode: SandboxMode::default(),
                network: false,
                limits: ExecLimits::default(),
            }),
            tool_options: ToolOptions::default(),
        })
    }

    /// Makes paths read-only inside the writable root, e.g. `[".git"]`: writes and removals
    /// at or under them (or removals of a folder that holds one) fail with
    /// [`SandboxError::ReadOnly`], also when reached through a symbolic link inside the root.
    /// Each path is relative to the root and parsed as a [`SandboxPath`] (`a/./b` is
    /// `a/b`); `""` protects the whole root. Adds to the paths protected before: calling
    /// it with `[".git"]` then `["secrets"]` protects both (a path already protected is
    /// kept once).
    ///
    /// # Errors
    /// What [`SandboxPath::parse`] refuses, for the first path that does not parse:
    /// [`SandboxError::OutsideRoot`] for an absolute path (`/.git`: write `.git`) or one
    /// whose `..` climbs above the root, [`SandboxError::InvalidPath`] for a NUL byte or a
    /// path too long. Nothing is protected by halves: the sandbox is not returned.
    pub fn with_protected_paths<I, S>(mut self, paths: I) -> Result<Self, SandboxError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let added = parse_protected(paths)?;
        Arc::make_mut(&mut self.inner).protection.add_paths(added);
        Ok(self)
    }

    /// Makes names read-only wherever they appear in the root, e.g. `[".git"]`, which
    /// protects `.git`, `sub/.git` and `a/b/.git` alike: what
    /// [`with_protected_paths`](Self::with_protected_paths) does for one path, for every path
    /// that goes through the name (as written or once links are resolved). With `.git`
    /// among the names, a folder git takes for a bare repository (`HEAD` with `objects`
    /// and `refs`, or with `commondir`) is protected too, and making one is refused. In
    /// [`SandboxMode::WorkspaceWrite`], the ones that exist are bound read-only for each
    /// command, and the ones a command makes are renamed when it ends, the command's
    /// result saying so (`docs/sandbox.md`). Adds to the names protected before.
    ///
    /// # Errors
    /// [`SandboxError::InvalidPath`] for the first name that is empty, `.` or `..`, or holds
    /// a `/` or a NUL byte; the sandbox is not returned.
    pub fn with_protected_names<I, S>(mut self, names: I) -> Result<Self, SandboxError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Arc::make_mut(&mut self.inner).protection.add_names(names)?;
        Ok(self)
    }

    /// Protects the files programs outside the sandbox start processes from:
    /// [`PROTECTED_NAMES`](crate::PROTECTED_NAMES) at any depth (`.git`) and
    /// [`PROTECTED_PATHS`](crate::PROTECTED_PATHS) (`.mcp.json`, `.agent/mcp.json`), adding
    /// to what was protected before. Add files of your own that a program runs from (a
    /// session journal inside the root) with [`with_protected_paths`](Self::with_protected_paths).
    ///
    /// ```
    /// use halo_core::Sandbox;
    /// use halo_core::sandbox::{SandboxError, SandboxPath};
    /// use halo_sandbox::ContainerSandbox;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let sandbox = ContainerSandbox::new(dir.path()).unwrap().with_default_protection();
    /// let path = |s: &str| SandboxPath::parse(s).unwrap();
    /// for refused in ["vendor/lib/.git/hooks/pre-commit", ".mcp.json", ".agent/mcp.json"] {
    ///     let e = sandbox.write(&path(refused), vec![]).await.unwrap_err();
    ///     assert!(matches!(e, SandboxError::ReadOnly { .. }), "{e}");
    /// }
    /// # });
    /// ```
    pub fn with_default_protection(mut self) -> Self {
        let set = Protection::default_set();
        let protection = &mut Arc::make_mut(&mut self.inner).protection;
        protection.add_paths(set.paths);
        protection
            .add_names(set.names)
            .expect("the default names are valid");
        self
    }

    /// Replaces the names of the environment variables commands inherit from this process.
    /// Every other variable is removed. When `PATH` is not inherited, commands get
    /// `PATH=/usr/local/bin:/usr/bin:/bin`.
    pub fn with_env_allowlist<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Arc::make_mut(&mut self.inner).env_allowlist = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets how commands are confined (default [`SandboxMode::WorkspaceWrite`]): in an OS
    /// sandbox that lets them write nothing (`ReadOnly`) or only the root but its protected
    /// paths (`WorkspaceWrite`), or unconfined (`FullAccess`, to be chosen explicitly). The
    /// file operations are confined to the root in every mode; `ReadOnly` does not make
    /// them read-only (the [`PermissionPolicy`](crate::policy::PermissionPolicy) hook does that).
    ///
    /// Where no OS sandbox can be had (not Linux, bubblewrap missing, namespaces disabled),
    /// [`exec`](Sandbox::exec) in `ReadOnly` and `WorkspaceWrite` fails with
    /// [`SandboxError::NoOsSandbox`] saying what to install, and
    /// [`capabilities`](Sandbox::capabilities) reports
    /// [`Isolation::Unavailable`](halo_core::sandbox::Isolation::Unavailable).
    pub fn with_mode(mut self, mode: SandboxMode) -> Self {
        Arc::make_mut(&mut self.inner).mode = mode;
        self
    }

    /// Lets commands in the OS sandbox use the network (default `false`: each command has a
    /// network namespace of its own, with only its own loopback). Unconfined commands
    /// (`FullAccess`) always have the machine's network.
    pub fn with_network(mut self, allowed: bool) -> Self {
        Arc::make_mut(&mut self.inner).network = allowed;
        self
    }

    /// How commands are confined.
    pub fn mode(&self) -> SandboxMode {
        self.inner.mode
    }

    /// Sets what each command in the OS sandbox may use: memory, processes, file size, CPU
    /// time, the size of its private `/tmp` (default [`ExecLimits::default`]; unconfined
    /// commands get no limits). A command over a limit fails, and its result names the
    /// limit ([`ExecOutput::limit`]).
    pub fn with_limits(mut self, limits: ExecLimits) -> Self {
        Arc::make_mut(&mut self.inner).limits = limits;
        self
    }

    /// What each command in the OS sandbox may use.
    pub fn limits(&self) -> &ExecLimits {
        &self.inner.limits
    }

    /// Sets the options of the tools [`tools`](Self::tools) builds.
    pub fn with_tool_options(mut self, options: ToolOptions) -> Self {
        self.tool_options = options;
        self
    }

    /// Shorthand for [`ToolOptions::with_exec_timeout`] on this sandbox's tool options.
    pub fn with_exec_timeout(mut self, timeout: Duration) -> Self {
        self.tool_options = self.tool_options.with_exec_timeout(timeout);
        self
    }

    /// Shorthand for [`ToolOptions::with_output_limit`] on this sandbox's tool options.
    pub fn with_output_limit(mut self, bytes: usize) -> Self {
        self.tool_options = self.tool_options.with_output_limit(bytes);
        self
    }

    /// The root folder, absolute and canonical.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The protected paths.
    pub fn protected_paths(&self) -> &[SandboxPath] {
        &self.inner.protection.paths
    }

    /// The protected names.
    pub fn protected_names(&self) -> &[String] {
        &self.inner.protection.names
    }

    /// The environment variables commands inherit.
    pub fn env_allowlist(&self) -> &[String] {
        &self.inner.env_allowlist
    }

    /// The options of the tools [`tools`](Self::tools) builds.
    pub fn tool_options(&self) -> &ToolOptions {
        &self.tool_options
    }

    /// The coding tool set over this sandbox with its [`tool_options`](Self::tool_options):
    /// `read`, `write`, `edit`, `ls`, `glob`, `grep`, `bash` (see [`crate::tools()`]).
    /// Give them to an agent with `HaloAgent::builder(model).tools(sandbox.tools())`.
    ///
    /// The file operations run on tokio's blocking pool when a tokio runtime is running, and
    /// in place otherwise. `bash` needs a tokio runtime with the IO and time drivers enabled
    /// (`enable_all`); without one it fails with an error result.
    ///
    /// Path arguments may also be absolute paths under the root's real path (as MCP
    /// clients send them, [`ToolOptions::with_absolute_root`]); any other absolute path is
    /// outside the root.
    ///
    /// ```
    /// use halo_sandbox::ContainerSandbox;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let sandbox = ContainerSandbox::new(dir.path()).unwrap();
    /// let names: Vec<String> = sandbox.tools().iter().map(|t| t.spec().name).collect();
    /// assert_eq!(names, ["read", "write", "edit", "ls", "glob", "grep", "bash"]);
    /// ```
    pub fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        let options = match self.inner.root.to_str() {
            Some(root) => self.tool_options.clone().with_absolute_root(root),
            None => self.tool_options.clone(),
        };
        tools::tools(Arc::new(self.clone()), options)
    }

    /// Runs blocking file work on tokio's blocking pool when a tokio runtime is running, and
    /// in place otherwise (so the file operations also work under other executors).
    async fn blocking<T, F>(&self, f: F) -> Result<T, SandboxError>
    where
        F: FnOnce(&Inner) -> Result<T, SandboxError> + Send + 'static,
        T: Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => match handle.spawn_blocking(move || f(&inner)).await {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => Err(SandboxError::Io {
                    op: "finish",
                    path: ".".into(),
                    error: io::Error::other(e),
                }),
            },
            Err(_) => f(&inner),
        }
    }
}

#[async_trait]
impl Sandbox for ContainerSandbox {
    fn capabilities(&self) -> Capabilities {
        Capabilities::files_and_exec(self.inner.mode.isolation(self.inner.network))
    }

    fn kind(&self) -> &'static str {
        "container"
    }

    async fn read(&self, path: &SandboxPath) -> Result<Vec<u8>, SandboxError> {
        let path = path.clone();
        self.blocking(move |inner| inner.read(&path)).await
    }

    async fn write(&self, path: &SandboxPath, content: Vec<u8>) -> Result<(), SandboxError> {
        let path = path.clone();
        self.blocking(move |inner| inner.write(&path, &content, false))
            .await
    }

    async fn append(&self, path: &SandboxPath, content: Vec<u8>) -> Result<(), SandboxError> {
        let path = path.clone();
        self.blocking(move |inner| inner.write(&path, &content, true))
            .await
    }

    async fn list(&self, path: &SandboxPath) -> Result<Vec<DirEntry>, SandboxError> {
        let path = path.clone();
        self.blocking(move |inner| inner.list(&path)).await
    }

    async fn stat(&self, path: &SandboxPath) -> Result<Metadata, SandboxError> {
        let path = path.clone();
        self.blocking(move |inner| inner.stat(&path)).await
    }

    async fn remove(&self, path: &SandboxPath, recursive: bool) -> Result<(), SandboxError> {
        let path = path.clone();
        self.blocking(move |inner| inner.remove(&path, recursive))
            .await
    }

    async fn glob(&self, request: GlobRequest) -> Result<GlobOutput, SandboxError> {
        self.blocking(move |inner| search::glob(inner, &request))
            .await
    }

    async fn grep(&self, request: GrepRequest) -> Result<GrepOutput, SandboxError> {
        // Each search holds a buffer of up to MAX_SEARCH_LINE_BYTES per walker thread: the
        // searches of the whole process take turns, so many at once stay in bounded memory.
        let _turn = search::turn().await;
        self.blocking(move |inner| search::grep(inner, &request))
            .await
    }

    async fn exec(&self, request: ExecRequest) -> Result<ExecOutput, SandboxError> {
        let confinement = exec::Confinement {
            mode: self.inner.mode,
            network: self.inner.network,
            dir: Arc::clone(&self.inner.dir),
            protection: self.inner.protection.clone(),
            limits: &self.inner.limits,
        };
        exec::exec(
            &self.inner.root,
            &self.inner.env_allowlist,
            confinement,
            request,
        )
        .await
    }
}

/// Parses protected paths, all or none.
///
/// # Errors
/// What [`SandboxPath::parse`] refuses, for the first path that does not parse.
pub(crate) fn parse_protected<I, S>(paths: I) -> Result<Vec<SandboxPath>, SandboxError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    paths
        .into_iter()
        .map(|p| SandboxPath::parse(p.as_ref()))
        .collect()
}

/// The most symbolic links one write resolution follows: 40, as Linux (`MAXSYMLINKS`).
const MAX_LINK_FOLLOWS: usize = 40;

/// Linux's "too many levels of symbolic links".
const ELOOP: i32 = 40;

/// What the model reads for `ELOOP` (after `cannot OP `PATH`: `), in both sandboxes.
const LINK_LOOP: &str = "the path leads into a symbolic-link loop (too many levels of \
     symbolic links); fix or remove the link that loops (ls marks links with `@`), or use \
     another path";

/// The error for operation `op` on `path` (as shown) when resolving it meets a loop of
/// symbolic links (`ELOOP`, or more than 40 links in one resolution).
pub(crate) fn link_loop(op: &'static str, path: String) -> SandboxError {
    SandboxError::Io {
        op,
        path,
        error: io::Error::other(LINK_LOOP),
    }
}

/// A relative path with only normal components (cap-std gives `.` or `` for the root).
pub(crate) fn normal(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect()
}

/// The path to hand to cap-std: `.` for the root.
pub(crate) fn cap(path: &SandboxPath) -> &Path {
    if path.is_root() {
        Path::new(".")
    } else {
        Path::new(path.as_str())
    }
}

/// Maps an IO error of an operation on `path` to the error the model reads.
pub(crate) fn io_error(path: &SandboxPath, op: &'static str, e: io::Error) -> SandboxError {
    let path = path.display().to_string();
    if is_escape(&e) {
        return SandboxError::OutsideRoot { path };
    }
    if e.raw_os_error() == Some(ELOOP) {
        return link_loop(op, path);
    }
    match e.kind() {
        io::ErrorKind::NotFound => SandboxError::NotFound { path },
        io::ErrorKind::IsADirectory => SandboxError::IsDirectory { path },
        io::ErrorKind::NotADirectory => SandboxError::NotDirectory { path },
        io::ErrorKind::DirectoryNotEmpty => SandboxError::DirectoryNotEmpty { path },
        _ => SandboxError::Io { op, path, error: e },
    }
}

/// Whether cap-std refused a path because it leads outside the root. cap-std reports an
/// escape as `PermissionDenied` built by itself, without an OS error code (see
/// `cap_primitives::fs::errors::escape_attempt`), while a real `EACCES` from the kernel
/// carries its code.
pub(crate) fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.raw_os_error().is_none()
}

/// What a file type is for the sandbox.
pub(crate) fn kind_of(t: FileType) -> FileKind {
    if t.is_file() {
        FileKind::File
    } else if t.is_dir() {
        FileKind::Dir
    } else if t.is_symlink() {
        FileKind::Symlink
    } else {
        FileKind::Other
    }
}

/// Opens `path` for reading without blocking on a FIFO (`O_NONBLOCK`), following links
/// beneath the root. The caller checks what was opened.
pub(crate) fn open_nonblocking(dir: &Dir, path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).nonblock(true);
    dir.open_with(path, &options)
}

impl Inner {
    fn read(&self, path: &SandboxPath) -> Result<Vec<u8>, SandboxError> {
        if path.is_root() {
            return Err(SandboxError::IsDirectory { path: ".".into() });
        }
        let mut file =
            open_nonblocking(&self.dir, cap(path)).map_err(|e| io_error(path, "read", e))?;
        let meta = file.metadata().map_err(|e| io_error(path, "read", e))?;
        match kind_of(meta.file_type()) {
            FileKind::File => {}
            FileKind::Dir => {
                return Err(SandboxError::IsDirectory {
                    path: path.display().into(),
                });
            }
            FileKind::Symlink | FileKind::Other => {
                return Err(SandboxError::NotRegularFile {
                    path: path.display().into(),
                });
            }
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.read_to_end(&mut bytes)
            .map_err(|e| io_error(path, "read", e))?;
        Ok(bytes)
    }

    /// Writes `content` to `path`, replacing the file, or with `append` adding it at the
    /// end: the file is opened `O_APPEND` and the bytes go in one `write` call (POSIX makes
    /// the seek to the end and the write one atomic step, so a concurrent appender's bytes
    /// land before or after, never inside; a regular file on a local filesystem takes the
    /// whole buffer in one call).
    fn write(&self, path: &SandboxPath, content: &[u8], append: bool) -> Result<(), SandboxError> {
        if path.is_root() {
            return Err(SandboxError::IsDirectory { path: ".".into() });
        }
        if let Some(parent) = path.parent() {
            self.check_parents(path, &parent)?;
        }
        let real = self.resolve_for_write(path)?;
        self.check_writable(path, &real, false)?;
        // Look first so a directory, FIFO or device is refused before anything is created.
        match self.dir.metadata(cap(path)) {
            Ok(m) if m.is_dir() => {
                return Err(SandboxError::IsDirectory {
                    path: path.display().into(),
                });
            }
            Ok(m) if !m.is_file() => {
                return Err(SandboxError::NotRegularFile {
                    path: path.display().into(),
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(path, "write", e)),
        }
        if let Some(parent) = path.parent()
            && !parent.is_root()
        {
            self.dir
                .create_dir_all(cap(&parent))
                .map_err(|e| io_error(path, "create the parent folders of", e))?;
        }
        let mut options = OpenOptions::new();
        if append {
            options.append(true);
        } else {
            options.write(true).truncate(true);
        }
        options.create(true).nonblock(true);
        let mut file = self
            .dir
            .open_with(cap(path), &options)
            .map_err(|e| io_error(path, "write", e))?;
        if append {
            // One write call: a short write would let another appender in, so it is an
            // error rather than a second call.
            return match file.write(content) {
                Ok(n) if n == content.len() => Ok(()),
                Ok(n) => Err(io_error(
                    path,
                    "append to",
                    io::Error::other(format!("only {n} of {} bytes were written", content.len())),
                )),
                Err(e) => Err(io_error(path, "append to", e)),
            };
        }
        file.write_all(content)
            .map_err(|e| io_error(path, "write", e))
    }

    /// Refuses a write to `path` whose parent chain has a file where a folder should be,
    /// naming that file.
    fn check_parents(&self, path: &SandboxPath, parent: &SandboxPath) -> Result<(), SandboxError> {
        let mut acc = SandboxPath::root();
        for part in parent.components() {
            acc = acc.join(part)?;
            match self.dir.metadata(cap(&acc)) {
                Ok(m) if !m.is_dir() => {
                    return Err(SandboxError::NotDirectory {
                        path: acc.display().into(),
                    });
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(io_error(path, "write", e)),
            }
        }
        Ok(())
    }

    /// Refuses `path` for operation `op` unless it leads (links followed beneath the root)
    /// to a folder.
    pub(crate) fn check_dir(
        &self,
        path: &SandboxPath,
        op: &'static str,
    ) -> Result<(), SandboxError> {
        let meta = self
            .dir
            .metadata(cap(path))
            .map_err(|e| io_error(path, op, e))?;
        if !meta.is_dir() {
            return Err(SandboxError::NotDirectory {
                path: path.display().into(),
            });
        }
        Ok(())
    }

    fn list(&self, path: &SandboxPath) -> Result<Vec<DirEntry>, SandboxError> {
        self.check_dir(path, "list")?;
        let entries = self
            .dir
            .read_dir(cap(path))
            .map_err(|e| io_error(path, "list", e))?;
        let mut out: Vec<DirEntry> = entries
            .filter_map(Result::ok)
            .map(|e| {
                let kind = e.file_type().map(kind_of).unwrap_or(FileKind::Other);
                let len = match kind {
                    FileKind::File => e.metadata().map(|m| m.len()).unwrap_or(0),
                    _ => 0,
                };
                DirEntry {
                    name: e.file_name().to_string_lossy().into_owned(),
                    kind,
                    len,
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn stat(&self, path: &SandboxPath) -> Result<Metadata, SandboxError> {
        let meta = self
            .dir
            .metadata(cap(path))
            .map_err(|e| io_error(path, "stat", e))?;
        let kind = kind_of(meta.file_type());
        let read_only = match self.dir.canonicalize(cap(path)) {
            Ok(real) => self.check_writable(path, &normal(&real), false).is_err(),
            Err(_) => {
                self.protected_lexically(path, false).is_some()
                    || self
                        .protection
                        .check_names(path, &written(path), &written(path), false, self)
                        .is_err()
            }
        };
        Ok(Metadata {
            kind,
            len: if kind == FileKind::File {
                meta.len()
            } else {
                0
            },
            read_only,
        })
    }

    fn remove(&self, path: &SandboxPath, recursive: bool) -> Result<(), SandboxError> {
        if path.is_root() {
            return Err(SandboxError::OutsideRoot { path: ".".into() });
        }
        // The entry itself is removed, not what a link at it points to: resolve its parent.
        let parent = path.parent().unwrap_or_default();
        let name = path.file_name().unwrap_or_default();
        let real_parent = self
            .dir
            .canonicalize(cap(&parent))
            .map_err(|e| io_error(path, "remove", e))?;
        self.check_writable(path, &normal(&real_parent).join(name), true)?;
        let meta = self
            .dir
            .symlink_metadata(cap(path))
            .map_err(|e| io_error(path, "remove", e))?;
        let result = if !meta.is_dir() {
            self.dir.remove_file(cap(path))
        } else if recursive {
            self.dir.remove_dir_all(cap(path))
        } else {
            self.dir.remove_dir(cap(path))
        };
        result.map_err(|e| io_error(path, "remove", e))
    }

    /// Where a write to `path` lands, relative to the root, with links resolved beneath the
    /// root: the file itself when it exists (cap-std's `canonicalize`), the target of a
    /// dangling link (a write creates it), else the deepest existing folder joined with the
    /// rest of the path. Used to decide about protected paths; the write itself goes through
    /// cap-std, which confines it whatever this says.
    ///
    /// # Errors
    /// `OutsideRoot` when a link leads out of the root; `Io` for a loop of links.
    fn resolve_for_write(&self, path: &SandboxPath) -> Result<PathBuf, SandboxError> {
        self.resolve_from(path, Path::new(path.as_str()), 0)
    }

    fn resolve_from(
        &self,
        shown: &SandboxPath,
        path: &Path,
        links: usize,
    ) -> Result<PathBuf, SandboxError> {
        let at = if path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            path
        };
        match self.dir.canonicalize(at) {
            Ok(real) => return Ok(normal(&real)),
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io_error(shown, "write", e));
            }
            Err(_) => {}
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            // The root always resolves.
            return Ok(PathBuf::new());
        };
        let real_parent = self.resolve_from(shown, parent, links)?;
        let here = real_parent.join(name);
        if !self
            .dir
            .symlink_metadata(&here)
            .is_ok_and(|m| m.is_symlink())
        {
            return Ok(here);
        }
        // A dangling link: the write would create its target.
        if links >= MAX_LINK_FOLLOWS {
            return Err(link_loop("write", shown.display().into()));
        }
        let target = self
            .dir
            .read_link(&here)
            .map_err(|e| io_error(shown, "write", e))?;
        let mut next = real_parent;
        for part in target.components() {
            match part {
                Component::Normal(p) => {
                    next.push(p);
                    // Resolve links as they come, so a later `..` climbs from the real place.
                    if let Ok(real) = self.dir.canonicalize(&next) {
                        next = normal(&real);
                    }
                }
                Component::CurDir => {}
                Component::ParentDir => {
                    if !next.pop() {
                        return Err(SandboxError::OutsideRoot {
                            path: shown.display().into(),
                        });
                    }
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(SandboxError::OutsideRoot {
                        path: shown.display().into(),
                    });
                }
            }
        }
        self.resolve_from(shown, &next, links + 1)
    }

    /// The protected path `path` lies under (or, with `holds`, one that lies under `path`),
    /// compared as written.
    fn protected_lexically(&self, path: &SandboxPath, holds: bool) -> Option<&SandboxPath> {
        self.protection
            .paths
            .iter()
            .find(|p| path.starts_with(p) || (holds && p.starts_with(path)))
    }

    /// Refuses a change at `path`, which resolves to `real` (relative to the root), when
    /// either lies under a protected path, as written or as the protected path resolves
    /// (`holds`: also when a protected path lies under it, for removals).
    fn check_writable(
        &self,
        path: &SandboxPath,
        real: &Path,
        holds: bool,
    ) -> Result<(), SandboxError> {
        let refuse = |p: &SandboxPath| SandboxError::ReadOnly {
            path: path.display().into(),
            protected: p.display().into(),
        };
        if let Some(p) = self.protected_lexically(path, holds) {
            return Err(refuse(p));
        }
        for p in &self.protection.paths {
            let mut forms = vec![PathBuf::from(p.as_str())];
            if let Ok(resolved) = self.dir.canonicalize(cap(p)) {
                forms.push(normal(&resolved));
            }
            if forms
                .iter()
                .any(|form| real.starts_with(form) || (holds && form.starts_with(real)))
            {
                return Err(refuse(p));
            }
        }
        let real: Vec<String> = real
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let real: Vec<&str> = real.iter().map(String::as_str).collect();
        self.protection
            .check_names(path, &written(path), &real, holds, self)
    }
}

/// The components of `path` as written.
fn written(path: &SandboxPath) -> Vec<&str> {
    path.components().collect()
}

/// `at` as a path relative to the root, `.` for the root.
fn rel(at: &[&str]) -> PathBuf {
    if at.is_empty() {
        PathBuf::from(".")
    } else {
        at.iter().collect()
    }
}

impl Look for Inner {
    fn exists(&self, at: &[&str]) -> bool {
        self.dir.symlink_metadata(rel(at)).is_ok()
    }

    fn entries(&self, at: &[&str]) -> Vec<(String, bool)> {
        // Only a real folder is listed (a link to one is an entry, not a folder to enter).
        if !at.is_empty() && !self.dir.symlink_metadata(rel(at)).is_ok_and(|m| m.is_dir()) {
            return Vec::new();
        }
        match self.dir.read_dir(rel(at)) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| {
                    let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                    (e.file_name().to_string_lossy().into_owned(), is_dir)
                })
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}
