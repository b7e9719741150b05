//! `glob` and `grep` of [`ContainerSandbox`](super::ContainerSandbox): ripgrep's `ignore`
//! walker (in parallel), `globset`, and `grep-regex`/`grep-searcher`, confined to the root.
//!
//! - The start folder is resolved beneath the root by cap-std first (a link out of the root
//!   is refused), and the walk starts from its real, link-free location.
//! - The walk never follows symbolic links, and only regular files are matched or searched
//!   (no links, FIFOs, sockets or devices).
//! - Every file searched is opened through cap-std, beneath the root.
//! - Gitignore semantics, the same as the `VirtualSandbox`'s: only `.gitignore` files inside
//!   the root apply, each to its own folder and below, deeper files taking precedence; hidden
//!   names (starting with `.`) are skipped below the start folder. No global gitignore, no
//!   `.git/info/exclude`, no `.ignore` files, no folders above the root, no need for a git
//!   repository. The walker's own ignore-file reading is off (it would read through links out
//!   of the root); `.gitignore` files are read through cap-std instead, so one that is a link
//!   is read only when it resolves inside the root. `include_ignored` turns all of this off.
//! - Results are sorted by path (byte order of the `/`-separated path) and cut at the
//!   request's limit; only the smallest `limit` paths are ever held in memory. Patterns,
//!   `.gitignore` rules, the searcher and the result collectors are the ones
//!   [`VirtualSandbox`](crate::VirtualSandbox) uses ([`crate::search`]); each worker
//!   collects its own and merges them when it ends.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use cap_std::fs::Dir;
use grep_searcher::Searcher;
use halo_core::sandbox::{
    FileKind, GlobOutput, GlobRequest, GrepOutput, GrepRequest, SandboxError, SandboxPath,
};
use ignore::gitignore::Gitignore;
use ignore::{WalkBuilder, WalkState};

use super::{Inner, cap, io_error, kind_of, normal, open_nonblocking};
use crate::search::{
    FileLines, GrepQuery, MAX_GITIGNORE_BYTES, Matches, Smallest, compile_glob, gitignore_rules,
    is_ignored, join,
};

pub(super) fn glob(inner: &Inner, req: &GlobRequest) -> Result<GlobOutput, SandboxError> {
    let matcher = compile_glob(&req.pattern)?;
    let start = start_folder(inner, &req.base)?;
    let found = Mutex::new(Smallest::new(req.limit));
    walk(inner, &start, req.include_ignored, || {
        // Each worker keeps its own smallest paths and merges them when it ends.
        let mut local = Merge::new(&found, Smallest::new(req.limit), Smallest::merge);
        let matcher = &matcher;
        move |rel: &Path, _real: &Path| {
            if matcher.is_match(rel)
                && let Some(rel) = rel.to_str()
            {
                local.get().insert(join(req.base.as_str(), rel), ());
            }
        }
    });
    let found = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    Ok(found.into_glob_output())
}

/// How many greps of this process search at once: 2. Each holds at most
/// [`WALK_THREADS`] searchers, each with a buffer of at most
/// [`MAX_SEARCH_LINE_BYTES`](crate::MAX_SEARCH_LINE_BYTES), so all the greps of a process
/// together hold at most 2 × 4 × 8 MiB of line buffers, however many run at once.
pub(crate) const CONCURRENT_SEARCHES: usize = 2;

/// The most threads one walk uses: 4 (fewer on a machine with fewer cores).
const WALK_THREADS: usize = 4;

/// Waits for a turn to search (one of [`CONCURRENT_SEARCHES`]), shared by every
/// `ContainerSandbox` of the process; the turn ends when the guard is dropped.
pub(super) async fn turn() -> tokio::sync::SemaphorePermit<'static> {
    static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(CONCURRENT_SEARCHES);
    // The semaphore is never closed.
    TURNS
        .acquire()
        .await
        .expect("the search semaphore is never closed")
}

pub(super) fn grep(inner: &Inner, req: &GrepRequest) -> Result<GrepOutput, SandboxError> {
    let query = GrepQuery::new(req)?;
    let meta = inner
        .dir
        .metadata(cap(&req.base))
        .map_err(|e| io_error(&req.base, "search", e))?;
    let found = Mutex::new(query.matches());
    match kind_of(meta.file_type()) {
        // A file named explicitly is searched even when hidden or ignored, as ripgrep does.
        FileKind::File => {
            let lines = search_file(
                &inner.dir,
                Path::new(req.base.as_str()),
                &req.base,
                &query,
                &mut query.searcher(),
            );
            lock(&found).insert(req.base.as_str().to_string(), lines);
        }
        FileKind::Dir => {
            let start = start_folder(inner, &req.base)?;
            walk(inner, &start, req.include_ignored, || {
                // Each worker has its own searcher (it holds buffers) and its own first
                // matches, merged when it ends.
                let mut searcher = query.searcher();
                let mut local = Merge::new(&found, query.matches(), Matches::merge);
                let query = &query;
                move |rel: &Path, real: &Path| {
                    if !query.wants(rel) {
                        return;
                    }
                    let Some(path) = rel.to_str().map(|rel| join(req.base.as_str(), rel)) else {
                        return;
                    };
                    let Ok(shown) = SandboxPath::parse(&path) else {
                        return;
                    };
                    let lines = search_file(&inner.dir, real, &shown, query, &mut searcher);
                    if !lines.is_empty() {
                        local.get().insert(path, lines);
                    }
                }
            });
        }
        FileKind::Symlink | FileKind::Other => {
            return Err(SandboxError::NotRegularFile {
                path: req.base.display().into(),
            });
        }
    }
    Ok(found
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .finish())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The real location (relative to the root, links resolved beneath it) of a folder to walk.
fn start_folder(inner: &Inner, base: &SandboxPath) -> Result<PathBuf, SandboxError> {
    inner.check_dir(base, "search")?;
    let real = inner
        .dir
        .canonicalize(cap(base))
        .map_err(|e| io_error(base, "search", e))?;
    Ok(normal(&real))
}

/// Walks the regular files under `start` (real, relative to the root) with ripgrep's
/// parallel walker. Each worker thread gets its own visitor from `make` and calls it with
/// (path relative to `start`, path relative to the root) for each file not ignored.
fn walk<M, V>(inner: &Inner, start: &Path, include_ignored: bool, make: M)
where
    M: Fn() -> V + Sync,
    V: FnMut(&Path, &Path) + Send,
{
    let ambient_start = inner.root.join(start);
    let mut builder = WalkBuilder::new(&ambient_start);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(WALK_THREADS));
    builder
        .standard_filters(false)
        .hidden(!include_ignored)
        .follow_links(false)
        .threads(threads);
    builder.build_parallel().run(|| {
        let mut visit = make();
        // Each worker reads the `.gitignore` files it needs once (no lock on this path).
        let mut ignores = (!include_ignored).then(|| Ignores::new(inner));
        let ambient_start = &ambient_start;
        let root = &inner.root;
        Box::new(move |entry| {
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            let Some(file_type) = entry.file_type() else {
                return WalkState::Continue;
            };
            // The start folder itself is never ignored; below it, an ignored folder is not
            // entered.
            if entry.depth() > 0
                && let Some(ignores) = &mut ignores
                && ignores.is_ignored(entry.path(), file_type.is_dir())
            {
                return WalkState::Skip;
            }
            // Regular files only: links are not followed, FIFOs could block.
            if file_type.is_file()
                && let (Some(rel), Some(real)) = (
                    strip_dir(entry.path(), ambient_start),
                    strip_dir(entry.path(), root),
                )
            {
                visit(rel, real);
            }
            WalkState::Continue
        })
    });
}

/// `path` without the leading folder `dir` (compared as bytes: the walker builds its paths
/// by appending to the start folder, so `Path::strip_prefix`'s component parsing, costly on
/// every entry, is not needed).
fn strip_dir<'p>(path: &'p Path, dir: &Path) -> Option<&'p Path> {
    let dir = dir.as_os_str().as_bytes();
    let rest = path.as_os_str().as_bytes().strip_prefix(dir)?;
    let rest = match rest {
        [b'/', tail @ ..] => tail,
        [] => rest,
        _ if dir.ends_with(b"/") => rest,
        _ => return None,
    };
    Some(Path::new(OsStr::from_bytes(rest)))
}

/// The folder part of a relative path's bytes (`a/b` of `a/b/c`, empty for `c`).
fn parent_bytes(rel: &[u8]) -> Option<&[u8]> {
    if rel.is_empty() {
        return None;
    }
    Some(match rel.iter().rposition(|&b| b == b'/') {
        Some(i) => &rel[..i],
        None => &[],
    })
}

/// A worker's own results, merged into the shared ones when the worker ends (when the
/// walker drops its visitor).
struct Merge<'a, T: Default> {
    local: T,
    shared: &'a Mutex<T>,
    merge: fn(&mut T, T),
}

impl<'a, T: Default> Merge<'a, T> {
    fn new(shared: &'a Mutex<T>, local: T, merge: fn(&mut T, T)) -> Self {
        Merge {
            local,
            shared,
            merge,
        }
    }

    fn get(&mut self) -> &mut T {
        &mut self.local
    }
}

impl<T: Default> Drop for Merge<'_, T> {
    fn drop(&mut self) {
        let local = std::mem::take(&mut self.local);
        (self.merge)(&mut lock(self.shared), local);
    }
}

/// The `.gitignore` rules of the folders one worker walked, read through cap-std once per
/// folder.
struct Ignores<'a> {
    dir: &'a Dir,
    /// The ambient root (the walker's paths start with it).
    root: &'a Path,
    /// Per folder relative to the root (as bytes): the rules that apply in it, deepest
    /// folder first.
    chains: HashMap<Vec<u8>, Arc<[Arc<Gitignore>]>>,
}

impl<'a> Ignores<'a> {
    fn new(inner: &'a Inner) -> Self {
        Ignores {
            dir: &inner.dir,
            root: &inner.root,
            chains: HashMap::new(),
        }
    }

    /// Whether the deepest `.gitignore` with a rule about `path` (ambient) ignores it.
    fn is_ignored(&mut self, path: &Path, is_dir: bool) -> bool {
        let Some(folder) =
            strip_dir(path, self.root).and_then(|rel| parent_bytes(rel.as_os_str().as_bytes()))
        else {
            return false;
        };
        is_ignored(
            self.chain(folder).iter().map(|rules| &**rules),
            path,
            is_dir,
        )
    }

    /// The rules that apply in `folder` (relative to the root), deepest first.
    fn chain(&mut self, folder: &[u8]) -> Arc<[Arc<Gitignore>]> {
        if let Some(chain) = self.chains.get(folder) {
            return Arc::clone(chain);
        }
        let mut chain: Vec<Arc<Gitignore>> = self
            .load(Path::new(OsStr::from_bytes(folder)))
            .map(Arc::new)
            .into_iter()
            .collect();
        if let Some(parent) = parent_bytes(folder) {
            chain.extend(self.chain(parent).iter().cloned());
        }
        let chain: Arc<[Arc<Gitignore>]> = chain.into();
        self.chains.insert(folder.to_vec(), Arc::clone(&chain));
        chain
    }

    /// `folder/.gitignore`, opened beneath the root (a link out of it is not read).
    fn load(&self, folder: &Path) -> Option<Gitignore> {
        let file = open_nonblocking(self.dir, &folder.join(".gitignore")).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MAX_GITIGNORE_BYTES {
            return None;
        }
        let mut text = String::new();
        file.take(MAX_GITIGNORE_BYTES)
            .read_to_string(&mut text)
            .ok()?;
        gitignore_rules(self.root.join(folder), &text)
    }
}

/// Searches one file, opened through cap-std beneath the root, for at most `limit + 1`
/// matching lines. A file that cannot be opened, is not a regular file or fails to read
/// gives what was found before.
fn search_file(
    dir: &Dir,
    real: &Path,
    shown: &SandboxPath,
    query: &GrepQuery,
    searcher: &mut Searcher,
) -> FileLines {
    let Ok(file) = open_nonblocking(dir, real) else {
        return FileLines::default();
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return FileLines::default();
    }
    query.search_file(searcher, shown, &file.into_std())
}
