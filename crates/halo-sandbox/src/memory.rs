//! [`VirtualSandbox`]: an in-memory tree of files, folders and symbolic links behind the
//! [`Sandbox`] contract, with no IO at all.
//!
//! The tree answers as a Linux folder seen through [`ContainerSandbox`](crate::ContainerSandbox)
//! does, and the conformance suite (`tests/it/conformance.rs`) runs the same checks on both.
//! To get there it models the few system calls the container makes, then composes them the
//! way the container does:
//!
//! - path resolution as `openat2(RESOLVE_BENEATH)` does it: symbolic links are resolved at
//!   open time, relative to the link's folder; an absolute target or a `..` that climbs
//!   above the root is an escape ([`SandboxError::OutsideRoot`]); more than
//!   [`MAX_SYMLINK_FOLLOWS`] links in one resolution is `ELOOP`;
//! - `open` (with `O_CREAT` for writes, which creates the target of a dangling link),
//!   `mkdir` (which never follows a final link), `unlink`, `rmdir`, `stat`, `lstat`,
//!   `realpath`;
//! - `create_dir_all` as `std` and cap-std write it (deepest folder first).
//!
//! `glob` and `grep` walk the tree as the container's walker walks a folder (links never
//! followed, regular files only, hidden names and `.gitignore` rules skipped unless asked);
//! the patterns, `.gitignore` rules, searcher and result collectors are the container's own
//! ([`crate::search`]), and a file's bytes are searched through the reader path a real file
//! takes, so both give the same lines in the same order.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;
use halo_core::DynTool;
use halo_core::sandbox::{
    Capabilities, DirEntry, ExecOutput, ExecRequest, FileKind, GlobOutput, GlobRequest, GrepOutput,
    GrepRequest, Metadata, Sandbox, SandboxError, SandboxPath,
};
use ignore::gitignore::Gitignore;

use crate::container::{link_loop, parse_protected};
use crate::protect::{Look, Protection};
use crate::search::{
    GrepQuery, MAX_GITIGNORE_BYTES, Smallest, compile_glob, gitignore_rules, is_ignored, join,
};
use crate::tools::{self, ToolOptions};

/// The most symbolic links one path resolution follows before failing with "too many
/// levels of symbolic links", as Linux does (`MAXSYMLINKS`, 40).
pub const MAX_SYMLINK_FOLLOWS: usize = 40;

/// An in-memory sandbox: files (bytes), folders and symbolic links under a root, with no
/// IO and no processes ([`Capabilities::FILES_ONLY`]; [`exec`](Sandbox::exec) fails with
/// [`SandboxError::Unsupported`], and [`tools`](Self::tools) has no `bash`).
///
/// Paths behave as in a real Linux folder behind
/// [`ContainerSandbox`](crate::ContainerSandbox): links are resolved when a path is
/// opened, relative to the link's folder, and refused when they lead out of the root.
///
/// Clones share one tree: give a clone to an agent's tools and inspect the files through
/// another. The tree is behind a [`RwLock`]; every operation runs to completion inside the
/// future's first poll (there is nothing to wait for), so a large `grep` holds its thread
/// for as long as it searches.
///
/// ```
/// use halo_core::sandbox::{Sandbox, SandboxPath};
/// use halo_sandbox::VirtualSandbox;
///
/// # futures::executor::block_on(async {
/// let sandbox = VirtualSandbox::new()
///     .with_file("src/lib.rs", "pub fn answer() -> u32 { 42 }\n")?
///     .with_symlink("lib.rs", "src/lib.rs")?
///     .with_protected_paths([".git"])?;
/// let text = sandbox.read(&SandboxPath::parse("lib.rs")?).await?;
/// assert_eq!(text, b"pub fn answer() -> u32 { 42 }\n");
/// let refused = sandbox.write(&SandboxPath::parse(".git/config")?, b"x".to_vec()).await;
/// assert_eq!(
///     refused.unwrap_err().to_string(),
///     "`.git/config` is read-only in this sandbox (protected path `.git`)"
/// );
/// # Ok::<(), halo_core::sandbox::SandboxError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct VirtualSandbox {
    tree: Arc<RwLock<Tree>>,
    protection: Arc<Protection>,
    tool_options: ToolOptions,
}

impl VirtualSandbox {
    /// An empty sandbox: the root folder and nothing in it.
    pub fn new() -> Self {
        VirtualSandbox::default()
    }

    /// Adds a file (replacing one), creating its parent folders, as [`Sandbox::write`]
    /// does but ignoring protected paths (this builds the tree).
    ///
    /// # Errors
    /// What [`SandboxPath::parse`] refuses; otherwise as [`Sandbox::write`]
    /// (`IsDirectory`, `NotDirectory` for a parent that is a file, `OutsideRoot` for a
    /// parent link out of the root).
    pub fn with_file(self, path: &str, content: impl Into<Vec<u8>>) -> Result<Self, SandboxError> {
        let path = SandboxPath::parse(path)?;
        let mut tree = self.write_tree();
        let comps: Vec<&str> = path.components().collect();
        if let Some((_, parent)) = comps.split_last() {
            tree.check_parents(&path, parent)?;
        }
        tree.write_file(&path, content.into())?;
        drop(tree);
        Ok(self)
    }

    /// Adds a folder and its missing parents (`mkdir -p`).
    ///
    /// # Errors
    /// What [`SandboxPath::parse`] refuses; `Io` (`File exists`) when a file or a link that
    /// leads to no folder is at the path; `NotDirectory` when a parent is a file;
    /// `OutsideRoot` when a parent is a link out of the root.
    pub fn with_dir(self, path: &str) -> Result<Self, SandboxError> {
        let path = SandboxPath::parse(path)?;
        self.write_tree()
            .create_dir_all(&path.components().collect::<Vec<_>>())
            .map_err(|e| e.at("create", &path))?;
        Ok(self)
    }

    /// [`symlink`](Self::symlink) in builder form.
    ///
    /// # Errors
    /// As [`symlink`](Self::symlink).
    pub fn with_symlink(self, path: &str, target: &str) -> Result<Self, SandboxError> {
        self.symlink(path, target)?;
        Ok(self)
    }

    /// Makes `path` a symbolic link to `target` (`ln -s target path`), creating the link's
    /// parent folders. The target is kept as given, like a real link's: it is resolved each
    /// time the link is opened, relative to the link's folder. An absolute target, or one
    /// that climbs out of the root, makes a link that leads outside
    /// ([`SandboxError::OutsideRoot`] when opened); a missing target makes it dangle
    /// ([`SandboxError::NotFound`]).
    ///
    /// # Errors
    /// What [`SandboxPath::parse`] refuses for `path`; [`SandboxError::InvalidPath`] for an
    /// empty target or one with a NUL byte; `Io` (`File exists`) when something exists at
    /// `path` (the root included); as [`with_dir`](Self::with_dir) for the parents.
    pub fn symlink(&self, path: &str, target: &str) -> Result<(), SandboxError> {
        let path = SandboxPath::parse(path)?;
        if target.is_empty() || target.contains('\0') {
            return Err(SandboxError::InvalidPath {
                path: target.escape_debug().to_string(),
                reason: "a symbolic link target must be non-empty and have no NUL byte".into(),
            });
        }
        let comps: Vec<&str> = path.components().collect();
        let mut tree = self.write_tree();
        if let Some((_, parent)) = comps.split_last() {
            tree.create_dir_all(parent)
                .map_err(|e| e.at("create", &path))?;
        }
        tree.insert(&comps, Node::Link(target.to_string()))
            .map_err(|e| e.at("symlink", &path))
    }

    /// Makes paths read-only, e.g. `[".git"]`: [`Sandbox::write`] and [`Sandbox::remove`]
    /// at or under them, or a removal of a folder that holds one, fail with
    /// [`SandboxError::ReadOnly`], also when reached through a symbolic link. Each path is
    /// relative to the root and parsed as a [`SandboxPath`] (`a/./b` is `a/b`); `""`
    /// protects the whole root. [`Sandbox::stat`] reports them `read_only`. Adds to the
    /// paths protected before: `[".git"]` then `["secrets"]` protects both (a path already
    /// protected is kept once).
    ///
    /// # Errors
    /// As [`ContainerSandbox::with_protected_paths`](crate::ContainerSandbox::with_protected_paths):
    /// what [`SandboxPath::parse`] refuses ([`SandboxError::OutsideRoot`] for `/.git` or
    /// `../x`, [`SandboxError::InvalidPath`] for a NUL byte), and the sandbox is not
    /// returned.
    pub fn with_protected_paths<I, S>(mut self, paths: I) -> Result<Self, SandboxError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let added = parse_protected(paths)?;
        Arc::make_mut(&mut self.protection).add_paths(added);
        Ok(self)
    }

    /// Makes names read-only wherever they appear, e.g. `[".git"]` (`sub/.git` as well as
    /// `.git`); with `.git`, bare repositories too. As
    /// [`ContainerSandbox::with_protected_names`](crate::ContainerSandbox::with_protected_names).
    ///
    /// # Errors
    /// [`SandboxError::InvalidPath`] for the first name that is empty, `.` or `..`, or holds
    /// a `/` or a NUL byte; the sandbox is not returned.
    pub fn with_protected_names<I, S>(mut self, names: I) -> Result<Self, SandboxError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Arc::make_mut(&mut self.protection).add_names(names)?;
        Ok(self)
    }

    /// Protects [`PROTECTED_NAMES`](crate::PROTECTED_NAMES) at any depth and
    /// [`PROTECTED_PATHS`](crate::PROTECTED_PATHS), as
    /// [`ContainerSandbox::with_default_protection`](crate::ContainerSandbox::with_default_protection).
    pub fn with_default_protection(mut self) -> Self {
        let set = Protection::default_set();
        let protection = Arc::make_mut(&mut self.protection);
        protection.add_paths(set.paths);
        protection
            .add_names(set.names)
            .expect("the default names are valid");
        self
    }

    /// The protected paths.
    pub fn protected_paths(&self) -> &[SandboxPath] {
        &self.protection.paths
    }

    /// The protected names.
    pub fn protected_names(&self) -> &[String] {
        &self.protection.names
    }

    /// Sets the options of the tools [`tools`](Self::tools) builds.
    pub fn with_tool_options(mut self, options: ToolOptions) -> Self {
        self.tool_options = options;
        self
    }

    /// The options of the tools [`tools`](Self::tools) builds.
    pub fn tool_options(&self) -> &ToolOptions {
        &self.tool_options
    }

    /// The coding tool set over this sandbox (a clone sharing its tree) with its
    /// [`tool_options`](Self::tool_options): `read`, `write`, `edit`, `ls`, `glob`, `grep`;
    /// no `bash`, as the sandbox runs no commands (see [`crate::tools()`]).
    ///
    /// ```
    /// use halo_sandbox::VirtualSandbox;
    ///
    /// let names: Vec<String> = VirtualSandbox::new().tools().iter().map(|t| t.spec().name).collect();
    /// assert_eq!(names, ["read", "write", "edit", "ls", "glob", "grep"]);
    /// ```
    pub fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        tools::tools(Arc::new(self.clone()), self.tool_options.clone())
    }

    fn read_tree(&self) -> RwLockReadGuard<'_, Tree> {
        // No code panics while holding the lock; should one, the tree is still whole.
        self.tree.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_tree(&self) -> RwLockWriteGuard<'_, Tree> {
        self.tree.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// [`Sandbox::write`] with the tree's write lock held.
    fn write_locked(
        &self,
        tree: &mut Tree,
        path: &SandboxPath,
        content: Vec<u8>,
    ) -> Result<(), SandboxError> {
        if path.is_root() {
            return Err(Errno::IsDir.at("write", path));
        }
        let comps: Vec<&str> = path.components().collect();
        let (_, parent) = comps.split_last().unwrap_or((&"", &[]));
        tree.check_parents(path, parent)?;
        let real = match tree.resolve(&comps, true, true) {
            Ok(Resolved::Found(at)) => at,
            Ok(Resolved::Missing { mut parent, name }) => {
                parent.push(name);
                parent
            }
            Err(e) => return Err(e.at("write", path)),
        };
        self.check_writable(tree, path, &real, false)?;
        tree.write_file(path, content)
    }

    /// Refuses a change at `path`, which lands at `real`, when either lies under a
    /// protected path, as written or as the protected path itself resolves (`holds`: also
    /// when a protected path lies under it, for removals).
    fn check_writable(
        &self,
        tree: &Tree,
        path: &SandboxPath,
        real: &[String],
        holds: bool,
    ) -> Result<(), SandboxError> {
        let given: Vec<&str> = path.components().collect();
        let refuse = |p: &SandboxPath| SandboxError::ReadOnly {
            path: path.display().into(),
            protected: p.display().into(),
        };
        for p in self.protection.paths.iter() {
            let lexical: Vec<&str> = p.components().collect();
            if under(&given, &lexical) || (holds && under(&lexical, &given)) {
                return Err(refuse(p));
            }
        }
        let real: Vec<&str> = real.iter().map(String::as_str).collect();
        for p in self.protection.paths.iter() {
            let lexical: Vec<&str> = p.components().collect();
            let mut forms = vec![lexical.iter().map(|s| (*s).to_string()).collect()];
            if let Ok(Resolved::Found(at)) = tree.resolve(&lexical, true, false) {
                forms.push(at);
            }
            let hit = forms.iter().any(|form| {
                let form: Vec<&str> = form.iter().map(String::as_str).collect();
                under(&real, &form) || (holds && under(&form, &real))
            });
            if hit {
                return Err(refuse(p));
            }
        }
        self.protection
            .check_names(path, &given, &real, holds, tree)
    }
}

impl Look for Tree {
    fn exists(&self, at: &[&str]) -> bool {
        self.node(at).is_some()
    }

    fn entries(&self, at: &[&str]) -> Vec<(String, bool)> {
        match self.node(at) {
            Some(Node::Dir(entries)) => entries
                .iter()
                .map(|(name, node)| (name.clone(), matches!(node, Node::Dir(_))))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Whether `path` is `prefix` or lies beneath it (component-wise).
fn under(path: &[&str], prefix: &[&str]) -> bool {
    path.len() >= prefix.len() && path.iter().zip(prefix).all(|(a, b)| a == b)
}

#[async_trait]
impl Sandbox for VirtualSandbox {
    fn capabilities(&self) -> Capabilities {
        Capabilities::FILES_ONLY
    }

    fn kind(&self) -> &'static str {
        "virtual"
    }

    async fn read(&self, path: &SandboxPath) -> Result<Vec<u8>, SandboxError> {
        if path.is_root() {
            return Err(Errno::IsDir.at("read", path));
        }
        let tree = self.read_tree();
        match tree.open(path)? {
            Node::File(bytes) => Ok(bytes.clone()),
            _ => Err(Errno::IsDir.at("read", path)),
        }
    }

    async fn write(&self, path: &SandboxPath, content: Vec<u8>) -> Result<(), SandboxError> {
        let mut tree = self.write_tree();
        self.write_locked(&mut tree, path, content)
    }

    async fn append(&self, path: &SandboxPath, content: Vec<u8>) -> Result<(), SandboxError> {
        // Read and write under one write lock: no other append can land in between.
        let mut tree = self.write_tree();
        let mut data = match tree.open(path) {
            Ok(Node::File(bytes)) => bytes.clone(),
            Ok(_) => return Err(Errno::IsDir.at("append to", path)),
            Err(SandboxError::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
        data.extend_from_slice(&content);
        self.write_locked(&mut tree, path, data)
    }

    async fn list(&self, path: &SandboxPath) -> Result<Vec<DirEntry>, SandboxError> {
        let tree = self.read_tree();
        let at = tree.stat(path, "list")?;
        match tree.node(&at) {
            Some(Node::Dir(entries)) => Ok(entries
                .iter()
                .map(|(name, node)| DirEntry {
                    name: name.clone(),
                    kind: node.kind(),
                    len: node.len(),
                })
                .collect()),
            _ => Err(Errno::NotDir.at("list", path)),
        }
    }

    async fn stat(&self, path: &SandboxPath) -> Result<Metadata, SandboxError> {
        let tree = self.read_tree();
        let at = tree.stat(path, "stat")?;
        let node = tree
            .node(&at)
            .ok_or_else(|| Errno::NoEnt.at("stat", path))?;
        Ok(Metadata {
            kind: node.kind(),
            len: node.len(),
            read_only: self.check_writable(&tree, path, &at, false).is_err(),
        })
    }

    async fn remove(&self, path: &SandboxPath, recursive: bool) -> Result<(), SandboxError> {
        let comps: Vec<&str> = path.components().collect();
        let Some((name, parent)) = comps.split_last() else {
            return Err(Errno::Escape.at("remove", path));
        };
        let mut tree = self.write_tree();
        // The entry itself is removed, not what a link at it points to: resolve its parent.
        let real_parent = match tree.resolve(parent, true, false) {
            Ok(Resolved::Found(at)) => at,
            Ok(Resolved::Missing { .. }) => return Err(Errno::NoEnt.at("remove", path)),
            Err(e) => return Err(e.at("remove", path)),
        };
        let mut real = real_parent.clone();
        real.push((*name).to_string());
        self.check_writable(&tree, path, &real, true)?;
        let Some(Node::Dir(entries)) = tree.node_mut(&real_parent) else {
            return Err(Errno::NotDir.at("remove", path));
        };
        match entries.get(*name) {
            None => Err(Errno::NoEnt.at("remove", path)),
            Some(Node::Dir(children)) if !children.is_empty() && !recursive => {
                Err(Errno::NotEmpty.at("remove", path))
            }
            Some(_) => {
                entries.remove(*name);
                Ok(())
            }
        }
    }

    async fn glob(&self, request: GlobRequest) -> Result<GlobOutput, SandboxError> {
        let matcher = compile_glob(&request.pattern)?;
        let tree = self.read_tree();
        let start = tree.stat(&request.base, "search")?;
        if !matches!(tree.node(&start), Some(Node::Dir(_))) {
            return Err(Errno::NotDir.at("search", &request.base));
        }
        let mut found = Smallest::new(request.limit);
        walk(&tree, &start, request.include_ignored, &mut |rel, _| {
            if matcher.is_match(rel) {
                found.insert(join(request.base.as_str(), rel), ());
            }
        });
        Ok(found.into_glob_output())
    }

    async fn grep(&self, request: GrepRequest) -> Result<GrepOutput, SandboxError> {
        let query = GrepQuery::new(&request)?;
        let mut searcher = query.searcher();
        let tree = self.read_tree();
        let start = tree.stat(&request.base, "search")?;
        let mut found = query.matches();
        match tree.node(&start) {
            // A file named explicitly is searched even when hidden or ignored.
            Some(Node::File(bytes)) => {
                let lines = query.search_bytes(&mut searcher, &request.base, bytes);
                found.insert(request.base.as_str().to_string(), lines);
            }
            Some(Node::Dir(_)) => {
                walk(&tree, &start, request.include_ignored, &mut |rel, bytes| {
                    if !query.wants(Path::new(rel)) {
                        return;
                    }
                    let path = join(request.base.as_str(), rel);
                    let Ok(shown) = SandboxPath::parse(&path) else {
                        return;
                    };
                    let lines = query.search_bytes(&mut searcher, &shown, bytes);
                    if !lines.is_empty() {
                        found.insert(path, lines);
                    }
                });
            }
            _ => return Err(Errno::NoEnt.at("search", &request.base)),
        }
        Ok(found.finish())
    }

    async fn exec(&self, _request: ExecRequest) -> Result<ExecOutput, SandboxError> {
        Err(SandboxError::Unsupported {
            operation: "exec",
            sandbox: "virtual",
        })
    }
}

/// One node of the tree.
#[derive(Debug, Clone)]
enum Node {
    File(Vec<u8>),
    Dir(BTreeMap<String, Node>),
    /// A symbolic link and its target, as given.
    Link(String),
}

impl Node {
    fn kind(&self) -> FileKind {
        match self {
            Node::File(_) => FileKind::File,
            Node::Dir(_) => FileKind::Dir,
            Node::Link(_) => FileKind::Symlink,
        }
    }

    fn len(&self) -> u64 {
        match self {
            Node::File(bytes) => bytes.len() as u64,
            _ => 0,
        }
    }
}

/// The `errno` values the modelled system calls fail with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Errno {
    NoEnt,
    NotDir,
    IsDir,
    Exist,
    NotEmpty,
    /// What `RESOLVE_BENEATH` refuses (`EXDEV`), reported by cap-std as an escape.
    Escape,
    Loop,
}

impl Errno {
    /// The sandbox error for operation `op` on `path`, as the container maps the same
    /// `errno`. `EEXIST` stays [`SandboxError::Io`] with Linux's own message and `ELOOP`
    /// has the container's ([`link_loop`]), so both sandboxes print the same text on any
    /// platform.
    fn at(self, op: &'static str, path: &SandboxPath) -> SandboxError {
        let path = path.display().to_string();
        let io = |kind, message: &str| SandboxError::Io {
            op,
            path: path.clone(),
            error: io::Error::new(kind, message),
        };
        match self {
            Errno::NoEnt => SandboxError::NotFound { path },
            Errno::NotDir => SandboxError::NotDirectory { path },
            Errno::IsDir => SandboxError::IsDirectory { path },
            Errno::NotEmpty => SandboxError::DirectoryNotEmpty { path },
            Errno::Escape => SandboxError::OutsideRoot { path },
            Errno::Exist => io(io::ErrorKind::AlreadyExists, "File exists (os error 17)"),
            Errno::Loop => link_loop(op, path),
        }
    }
}

/// Where a path resolution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Resolved {
    /// At an existing node; its path from the root with every link resolved (but the
    /// last, when it was not followed).
    Found(Vec<String>),
    /// At a missing last component `name` in the existing folder `parent`.
    Missing { parent: Vec<String>, name: String },
}

#[derive(Debug)]
struct Tree {
    root: Node,
}

impl Default for Tree {
    fn default() -> Self {
        Tree {
            root: Node::Dir(BTreeMap::new()),
        }
    }
}

impl Tree {
    /// The node at a resolved path (no links on the way).
    fn node<S: AsRef<str>>(&self, at: &[S]) -> Option<&Node> {
        let mut node = &self.root;
        for name in at {
            match node {
                Node::Dir(entries) => node = entries.get(name.as_ref())?,
                _ => return None,
            }
        }
        Some(node)
    }

    fn node_mut<S: AsRef<str>>(&mut self, at: &[S]) -> Option<&mut Node> {
        let mut node = &mut self.root;
        for name in at {
            match node {
                Node::Dir(entries) => node = entries.get_mut(name.as_ref())?,
                _ => return None,
            }
        }
        Some(node)
    }

    /// Resolves `path` beneath the root, as `openat2(RESOLVE_BENEATH)` does: links are
    /// followed (the last one only when `follow_last`), relative to their folder; an
    /// absolute target or `..` above the root is an escape; a file before the last
    /// component is `ENOTDIR`; a missing component before the last is `ENOENT`, unless
    /// `lenient`, which goes on through missing folders by name (where a write would land
    /// once they are created).
    fn resolve(&self, path: &[&str], follow_last: bool, lenient: bool) -> Result<Resolved, Errno> {
        let mut queue: VecDeque<String> = path.iter().map(|s| (*s).to_string()).collect();
        let mut at: Vec<String> = Vec::new();
        let mut follows = 0usize;
        while let Some(name) = queue.pop_front() {
            match name.as_str() {
                "" | "." => continue,
                ".." => {
                    at.pop().ok_or(Errno::Escape)?;
                    continue;
                }
                _ => {}
            }
            let last = queue.is_empty();
            let entry = match self.node(&at) {
                Some(Node::Dir(entries)) => entries.get(&name),
                Some(_) => return Err(Errno::NotDir),
                // Beneath a missing folder (lenient only): nothing exists.
                None => None,
            };
            match entry {
                None if last => return Ok(Resolved::Missing { parent: at, name }),
                None if lenient => at.push(name),
                None => return Err(Errno::NoEnt),
                Some(Node::Link(target)) if !last || follow_last => {
                    follows += 1;
                    if follows > MAX_SYMLINK_FOLLOWS {
                        return Err(Errno::Loop);
                    }
                    if target.starts_with('/') {
                        return Err(Errno::Escape);
                    }
                    for part in target.split('/').rev() {
                        queue.push_front(part.to_string());
                    }
                }
                Some(Node::Dir(_)) => at.push(name),
                Some(_) if last => at.push(name),
                Some(_) => return Err(Errno::NotDir),
            }
        }
        Ok(Resolved::Found(at))
    }

    /// `stat(2)` (links followed) of `path`: its resolved location.
    fn stat(&self, path: &SandboxPath, op: &'static str) -> Result<Vec<String>, SandboxError> {
        let comps: Vec<&str> = path.components().collect();
        match self.resolve(&comps, true, false) {
            Ok(Resolved::Found(at)) => Ok(at),
            Ok(Resolved::Missing { .. }) => Err(Errno::NoEnt.at(op, path)),
            Err(e) => Err(e.at(op, path)),
        }
    }

    /// `open(2)` for reading: the node `path` leads to.
    fn open(&self, path: &SandboxPath) -> Result<&Node, SandboxError> {
        let at = self.stat(path, "read")?;
        self.node(&at).ok_or_else(|| Errno::NoEnt.at("read", path))
    }

    /// Puts `node` at `path` (whose parent exists), like `symlink(2)`: `EEXIST` when
    /// something is there.
    fn insert(&mut self, path: &[&str], node: Node) -> Result<(), Errno> {
        match self.resolve(path, false, false)? {
            Resolved::Found(_) => Err(Errno::Exist),
            Resolved::Missing { parent, name } => match self.node_mut(&parent) {
                Some(Node::Dir(entries)) => {
                    entries.insert(name, node);
                    Ok(())
                }
                _ => Err(Errno::NotDir),
            },
        }
    }

    /// Whether `path` resolves (following links) to a folder.
    fn is_dir(&self, path: &[&str]) -> bool {
        match self.resolve(path, true, false) {
            Ok(Resolved::Found(at)) => matches!(self.node(&at), Some(Node::Dir(_))),
            _ => false,
        }
    }

    /// `create_dir_all` as std and cap-std write it: try the deepest folder first, climb
    /// on `ENOENT`, accept any failure where a folder (or a link to one) already is.
    fn create_dir_all(&mut self, path: &[&str]) -> Result<(), Errno> {
        let Some((_, parent)) = path.split_last() else {
            return Ok(());
        };
        match self.insert(path, Node::Dir(BTreeMap::new())) {
            Ok(()) => return Ok(()),
            Err(Errno::NoEnt) => {}
            Err(_) if self.is_dir(path) => return Ok(()),
            Err(e) => return Err(e),
        }
        self.create_dir_all(parent)?;
        match self.insert(path, Node::Dir(BTreeMap::new())) {
            Ok(()) => Ok(()),
            Err(_) if self.is_dir(path) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Refuses a write whose parent chain has a file where a folder should be, naming
    /// that file, as the container does before creating anything. Stops at the first
    /// missing folder.
    fn check_parents(&self, path: &SandboxPath, parent: &[&str]) -> Result<(), SandboxError> {
        for n in 1..=parent.len() {
            match self.resolve(&parent[..n], true, false) {
                Ok(Resolved::Found(at)) => {
                    if !matches!(self.node(&at), Some(Node::Dir(_))) {
                        let shown = SandboxPath::parse(&parent[..n].join("/"))?;
                        return Err(Errno::NotDir.at("write", &shown));
                    }
                }
                Ok(Resolved::Missing { .. }) | Err(Errno::NoEnt) => return Ok(()),
                Err(e) => return Err(e.at("write", path)),
            }
        }
        Ok(())
    }

    /// Writes a file as the container does once the parents are checked: a folder (or a
    /// link to one) at `path` is refused, missing parent folders are created
    /// (`create_dir_all`), then `open(O_WRONLY | O_CREAT | O_TRUNC)` follows a final link
    /// and creates the missing target of a dangling one.
    fn write_file(&mut self, path: &SandboxPath, content: Vec<u8>) -> Result<(), SandboxError> {
        let comps: Vec<&str> = path.components().collect();
        let Some((_, parent)) = comps.split_last() else {
            return Err(Errno::IsDir.at("write", path));
        };
        match self.resolve(&comps, true, false) {
            Ok(Resolved::Found(at)) if matches!(self.node(&at), Some(Node::Dir(_))) => {
                return Err(Errno::IsDir.at("write", path));
            }
            Ok(_) | Err(Errno::NoEnt) => {}
            Err(e) => return Err(e.at("write", path)),
        }
        if !parent.is_empty() {
            self.create_dir_all(parent)
                .map_err(|e| e.at("create the parent folders of", path))?;
        }
        let resolved = self
            .resolve(&comps, true, false)
            .map_err(|e| e.at("write", path))?;
        let (at, name) = match resolved {
            Resolved::Found(mut at) => {
                let name = at.pop().unwrap_or_default();
                (at, name)
            }
            Resolved::Missing { parent, name } => (parent, name),
        };
        match self.node_mut(&at) {
            Some(Node::Dir(entries)) => match entries.get_mut(&name) {
                Some(Node::Dir(_)) => Err(Errno::IsDir.at("write", path)),
                _ => {
                    entries.insert(name, Node::File(content));
                    Ok(())
                }
            },
            _ => Err(Errno::NotDir.at("write", path)),
        }
    }

    /// The text of a `.gitignore` in the folder at `dir` (resolved), read as the container
    /// reads it: through links inside the root, regular files of at most 1 MiB of UTF-8.
    fn gitignore_text(&self, dir: &[String]) -> Option<&str> {
        let mut path: Vec<&str> = dir.iter().map(String::as_str).collect();
        path.push(".gitignore");
        let Ok(Resolved::Found(at)) = self.resolve(&path, true, false) else {
            return None;
        };
        match self.node(&at) {
            Some(Node::File(bytes)) if bytes.len() as u64 <= MAX_GITIGNORE_BYTES => {
                std::str::from_utf8(bytes).ok()
            }
            _ => None,
        }
    }

    /// The rules of the `.gitignore` in the folder at `at` (resolved); `None` when it has
    /// none.
    fn ignore_rules(&self, at: &[String]) -> Option<Gitignore> {
        gitignore_rules(rooted(at), self.gitignore_text(at)?)
    }
}

/// The path `ignore` matchers see for a resolved path: the tree stands at `/`, as a real
/// root folder stands at its absolute path.
fn rooted(at: &[String]) -> PathBuf {
    let mut p = PathBuf::from("/");
    p.extend(at);
    p
}

/// Calls `visit(path relative to start, content)` for every regular file under the folder
/// at `start` (resolved), as the container's walk does: links are never followed, and
/// unless `include_ignored`, hidden names (starting with `.`) are skipped, and so are paths
/// a `.gitignore` ignores. The `.gitignore` of every folder from the root down to an
/// entry's folder applies (above the start too); the deepest one with a rule that matches
/// decides. An ignored folder is not entered.
fn walk(tree: &Tree, start: &[String], include_ignored: bool, visit: &mut dyn FnMut(&str, &[u8])) {
    let mut rules = Vec::new();
    if !include_ignored {
        for n in 0..start.len() {
            rules.push(tree.ignore_rules(&start[..n]));
        }
    }
    walk_dir(tree, start, "", include_ignored, &mut rules, visit);
}

/// Walks the folder at `at` (resolved), `rel` below the start; `rules` holds the rules of
/// the folders above it, shallowest first.
fn walk_dir(
    tree: &Tree,
    at: &[String],
    rel: &str,
    include_ignored: bool,
    rules: &mut Vec<Option<Gitignore>>,
    visit: &mut dyn FnMut(&str, &[u8]),
) {
    let Some(Node::Dir(entries)) = tree.node(at) else {
        return;
    };
    if !include_ignored {
        rules.push(tree.ignore_rules(at));
    }
    for (name, node) in entries {
        let mut child = at.to_vec();
        child.push(name.clone());
        let is_dir = matches!(node, Node::Dir(_));
        if !include_ignored && (name.starts_with('.') || ignored(rules, &child, is_dir)) {
            continue;
        }
        let child_rel = join(rel, name);
        match node {
            Node::File(bytes) => visit(&child_rel, bytes),
            Node::Dir(_) => walk_dir(tree, &child, &child_rel, include_ignored, rules, visit),
            Node::Link(_) => {}
        }
    }
    if !include_ignored {
        rules.pop();
    }
}

/// Whether the deepest folder's rule that matches `at` ignores it.
fn ignored(rules: &[Option<Gitignore>], at: &[String], is_dir: bool) -> bool {
    is_ignored(rules.iter().rev().flatten(), &rooted(at), is_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> SandboxPath {
        SandboxPath::parse(s).unwrap()
    }

    #[test]
    fn links_resolve_relative_to_their_folder_and_never_above_the_root() {
        let sb = VirtualSandbox::new()
            .with_file("a/b/file", "x")
            .unwrap()
            .with_symlink("a/up", "..")
            .unwrap()
            .with_symlink("a/b/side", "../b/file")
            .unwrap()
            .with_symlink("a/out", "../..")
            .unwrap()
            .with_symlink("abs", "/etc")
            .unwrap()
            .with_symlink("l1", "l2")
            .unwrap()
            .with_symlink("l2", "l1")
            .unwrap();
        let tree = sb.read_tree();
        let r = |s: &str, follow, lenient| {
            tree.resolve(&s.split('/').collect::<Vec<_>>(), follow, lenient)
        };
        let found = |v: &[&str]| Ok(Resolved::Found(v.iter().map(|s| s.to_string()).collect()));
        assert_eq!(r("a/up/a/b/side", true, false), found(&["a", "b", "file"]));
        assert_eq!(r("a/b/side", false, false), found(&["a", "b", "side"]));
        assert_eq!(r("a/up", true, false), found(&[]));
        assert_eq!(r("a/out", true, false), Err(Errno::Escape));
        assert_eq!(r("a/out", false, false), found(&["a", "out"]));
        assert_eq!(r("abs/passwd", true, false), Err(Errno::Escape));
        assert_eq!(r("l1", true, false), Err(Errno::Loop));
        assert_eq!(r("a/b/file/x", true, false), Err(Errno::NotDir));
        assert_eq!(r("a/nope/x", true, false), Err(Errno::NoEnt));
        assert_eq!(
            r("a/nope/x", true, true),
            Ok(Resolved::Missing {
                parent: vec!["a".into(), "nope".into()],
                name: "x".into()
            })
        );
        assert_eq!(
            r("a/b/new", true, false),
            Ok(Resolved::Missing {
                parent: vec!["a".into(), "b".into()],
                name: "new".into()
            })
        );
    }

    #[test]
    fn builder_refuses_bad_paths_and_targets() {
        let sb = VirtualSandbox::new();
        assert!(matches!(
            sb.clone().with_file("../x", "y"),
            Err(SandboxError::OutsideRoot { .. })
        ));
        assert!(matches!(
            sb.symlink("l", ""),
            Err(SandboxError::InvalidPath { .. })
        ));
        assert_eq!(
            sb.symlink("", "x").unwrap_err().to_string(),
            "cannot symlink `.`: File exists (os error 17)"
        );
        sb.symlink("l", "x").unwrap();
        assert_eq!(
            sb.symlink("l", "y").unwrap_err().to_string(),
            "cannot symlink `l`: File exists (os error 17)"
        );
        let file = sb.clone().with_file("f", "x").unwrap();
        assert_eq!(
            file.clone().with_dir("f").unwrap_err().to_string(),
            "cannot create `f`: File exists (os error 17)"
        );
        assert_eq!(
            file.with_dir("f/sub").unwrap_err().to_string(),
            "`f/sub` is not a directory"
        );
    }

    #[test]
    fn clones_share_one_tree() {
        let a = VirtualSandbox::new();
        let b = a.clone().with_file("x", "1").unwrap();
        let read = futures::executor::block_on(a.read(&p("x"))).unwrap();
        assert_eq!(read, b"1");
        assert_eq!(b.kind(), "virtual");
    }

    #[test]
    fn protected_paths_are_parsed_and_a_bad_one_is_refused() {
        let sb = VirtualSandbox::new()
            .with_protected_paths([".git", "a/./b", ""])
            .unwrap();
        assert_eq!(sb.protected_paths(), [p(".git"), p("a/b"), p("")]);
        let refused = VirtualSandbox::new()
            .with_protected_paths([".git", "../x"])
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "path `../x` is outside the sandbox root; use a path relative to the root"
        );
    }
}
