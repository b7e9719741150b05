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
//!   request's limit; only the smallest `limit` paths are ever held in memory.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use cap_std::fs::Dir;
use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use halo_core::sandbox::{
    FileKind, GlobOutput, GlobRequest, GrepLine, GrepOutput, GrepRequest, SandboxError, SandboxPath,
};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{WalkBuilder, WalkState};

use super::{Inner, cap, io_error, kind_of, open_nonblocking};
use crate::text::strip_eol;

/// The largest `.gitignore` file read, in bytes: 1 MiB; a larger one is ignored whole.
const MAX_GITIGNORE_BYTES: u64 = 1024 * 1024;

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
                && let Some(path) = join(&req.base, rel)
            {
                local.get().insert(path, ());
            }
        }
    });
    let found = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    let truncated = found.truncated();
    Ok(GlobOutput {
        paths: found
            .into_keys()
            .filter_map(|p| SandboxPath::parse(&p).ok())
            .collect(),
        truncated,
    })
}

pub(super) fn grep(inner: &Inner, req: &GrepRequest) -> Result<GrepOutput, SandboxError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(req.ignore_case)
        .line_terminator(Some(b'\n'))
        .build(&req.pattern)
        .map_err(|e| SandboxError::InvalidPattern {
            kind: "regex",
            pattern: req.pattern.clone(),
            message: e.to_string(),
        })?;
    let filter = match &req.glob {
        Some(g) => Some((compile_glob(g)?, g.contains('/'))),
        None => None,
    };
    let searcher = || {
        SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .before_context(req.context)
            .after_context(req.context)
            .build()
    };
    let meta = inner
        .dir
        .metadata(cap(&req.base))
        .map_err(|e| io_error(&req.base, "search", e))?;
    let found = Mutex::new(Matches::new(req.limit));
    match kind_of(meta.file_type()) {
        // A file named explicitly is searched even when hidden or ignored, as ripgrep does.
        FileKind::File => {
            let lines = search_file(
                &inner.dir,
                Path::new(req.base.as_str()),
                &req.base,
                &matcher,
                &mut searcher(),
                req.limit,
            );
            lock(&found).insert(req.base.as_str().to_string(), lines);
        }
        FileKind::Dir => {
            let start = start_folder(inner, &req.base)?;
            walk(inner, &start, req.include_ignored, || {
                // Each worker has its own searcher (it holds buffers) and its own first
                // matches, merged when it ends.
                let mut searcher = searcher();
                let mut local = Merge::new(&found, Matches::new(req.limit), Matches::merge);
                let (filter, matcher) = (&filter, &matcher);
                move |rel: &Path, real: &Path| {
                    if let Some((glob, with_slash)) = filter {
                        let subject = if *with_slash {
                            Some(rel)
                        } else {
                            rel.file_name().map(Path::new)
                        };
                        if !subject.is_some_and(|s| glob.is_match(s)) {
                            return;
                        }
                    }
                    let Some(path) = join(&req.base, rel) else {
                        return;
                    };
                    let Ok(shown) = SandboxPath::parse(&path) else {
                        return;
                    };
                    let lines =
                        search_file(&inner.dir, real, &shown, matcher, &mut searcher, req.limit);
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
        .finish(req.context))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Compiles a glob whose `*` does not cross `/` (`**` does), refusing absolute patterns and
/// `..` segments, which could never match a path under the search folder.
fn compile_glob(pattern: &str) -> Result<GlobMatcher, SandboxError> {
    let climbs = pattern
        .split(['/', '{', '}', ','])
        .any(|segment| segment == "..");
    if pattern.starts_with('/') || climbs {
        return Err(SandboxError::OutsideRoot {
            path: pattern.to_string(),
        });
    }
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| SandboxError::InvalidPattern {
            kind: "glob",
            pattern: pattern.to_string(),
            message: e.kind().to_string(),
        })
}

/// The real location (relative to the root, links resolved beneath it) of a folder to walk.
fn start_folder(inner: &Inner, base: &SandboxPath) -> Result<PathBuf, SandboxError> {
    let meta = inner
        .dir
        .metadata(cap(base))
        .map_err(|e| io_error(base, "search", e))?;
    if !meta.is_dir() {
        return Err(SandboxError::NotDirectory {
            path: base.display().into(),
        });
    }
    let real = inner
        .dir
        .canonicalize(cap(base))
        .map_err(|e| io_error(base, "search", e))?;
    // cap-std gives `.` or `` for the root itself.
    Ok(real
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .collect())
}

/// `base` joined with a path relative to it, as a `/`-separated string; `None` for a
/// name that is not UTF-8 (no [`SandboxPath`] can name it).
fn join(base: &SandboxPath, rel: &Path) -> Option<String> {
    let mut out = base.as_str().to_string();
    for part in rel.components() {
        let std::path::Component::Normal(name) = part else {
            continue;
        };
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(name.to_str()?);
    }
    Some(out)
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
    builder
        .standard_filters(false)
        .hidden(!include_ignored)
        .follow_links(false);
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
        for rules in self.chain(folder).iter() {
            let m = rules.matched(path, is_dir);
            if m.is_ignore() {
                return true;
            }
            if m.is_whitelist() {
                return false;
            }
        }
        false
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
        // git and ripgrep skip a byte-order mark an editor may have written.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let mut builder = GitignoreBuilder::new(self.root.join(folder));
        for line in text.lines() {
            // A bad line is skipped, as git does.
            let _ = builder.add_line(None, line);
        }
        builder.build().ok().filter(|g| !g.is_empty())
    }
}

/// The smallest `limit` keys inserted, in order, and whether more were inserted.
#[derive(Default)]
struct Smallest<V> {
    kept: BTreeMap<String, V>,
    limit: usize,
    dropped: bool,
}

impl<V> Smallest<V> {
    fn new(limit: usize) -> Self {
        Smallest {
            kept: BTreeMap::new(),
            limit,
            dropped: false,
        }
    }

    fn insert(&mut self, key: String, value: V) {
        self.kept.insert(key, value);
        if self.kept.len() > self.limit {
            self.kept.pop_last();
            self.dropped = true;
        }
    }

    fn truncated(&self) -> bool {
        self.dropped
    }

    fn merge(&mut self, other: Self) {
        self.dropped |= other.dropped;
        for (key, value) in other.kept {
            self.insert(key, value);
        }
    }

    fn into_keys(self) -> impl Iterator<Item = String> {
        self.kept.into_keys()
    }
}

/// The lines of one file's search.
struct FileLines {
    lines: Vec<GrepLine>,
    matches: usize,
}

impl FileLines {
    fn is_empty(&self) -> bool {
        self.matches == 0
    }
}

/// Matching lines per file, holding only the files with the first `limit` matching lines
/// in path order (and one file more while deciding).
#[derive(Default)]
struct Matches {
    files: BTreeMap<String, FileLines>,
    kept_matches: usize,
    total_matches: usize,
    limit: usize,
}

impl Matches {
    fn new(limit: usize) -> Self {
        Matches {
            files: BTreeMap::new(),
            kept_matches: 0,
            total_matches: 0,
            limit,
        }
    }

    fn merge(&mut self, other: Self) {
        // The other's total counts files it dropped too.
        self.total_matches += other.total_matches - other.kept_matches;
        for (path, lines) in other.files {
            self.insert(path, lines);
        }
    }

    fn insert(&mut self, path: String, lines: FileLines) {
        self.total_matches += lines.matches;
        self.kept_matches += lines.matches;
        self.files.insert(path, lines);
        // Drop the last file while the others hold the limit without it.
        while let Some((_, last)) = self.files.last_key_value() {
            if self.kept_matches - last.matches < self.limit {
                break;
            }
            self.kept_matches -= last.matches;
            self.files.pop_last();
        }
    }

    /// The lines in path then line order, cut after the `limit`-th matching line and the
    /// context lines that follow it.
    fn finish(self, context: usize) -> GrepOutput {
        let mut out = Vec::new();
        let mut matches = 0usize;
        let mut last_match: Option<(SandboxPath, u64)> = None;
        'files: for (_, file) in self.files {
            for line in file.lines {
                if matches == self.limit {
                    let trailing = line.is_context
                        && last_match.as_ref().is_some_and(|(path, number)| {
                            *path == line.path && line.line_number <= number.saturating_add(context as u64)
                        });
                    if !trailing {
                        break 'files;
                    }
                }
                if !line.is_context {
                    matches += 1;
                    last_match = Some((line.path.clone(), line.line_number));
                }
                out.push(line);
            }
        }
        GrepOutput {
            lines: out,
            truncated: self.total_matches > self.limit,
        }
    }
}

/// Searches one file, opened through cap-std beneath the root, for at most `limit + 1`
/// matching lines. A file that cannot be opened, is not a regular file or fails to read
/// gives what was found before.
fn search_file(
    dir: &Dir,
    real: &Path,
    shown: &SandboxPath,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    limit: usize,
) -> FileLines {
    let mut sink = FileSink {
        path: shown,
        lines: FileLines {
            lines: Vec::new(),
            matches: 0,
        },
        stop_after: limit.saturating_add(1),
    };
    let Ok(file) = open_nonblocking(dir, real) else {
        return sink.lines;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return sink.lines;
    }
    let _ = searcher.search_file(matcher, &file.into_std(), &mut sink);
    sink.lines
}

struct FileSink<'a> {
    path: &'a SandboxPath,
    lines: FileLines,
    stop_after: usize,
}

impl FileSink<'_> {
    fn push(&mut self, number: Option<u64>, bytes: &[u8], is_context: bool) {
        self.lines.lines.push(GrepLine {
            path: self.path.clone(),
            line_number: number.unwrap_or(0),
            text: String::from_utf8_lossy(strip_eol(bytes)).into_owned(),
            is_context,
        });
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.push(m.line_number(), m.bytes(), false);
        self.lines.matches += 1;
        Ok(self.lines.matches < self.stop_after)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        self.push(c.line_number(), c.bytes(), true);
        Ok(true)
    }
}
