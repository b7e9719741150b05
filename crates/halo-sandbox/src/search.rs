//! What `glob` and `grep` mean, shared by both sandboxes so they cannot drift apart: the
//! pattern rules, how `.gitignore` text becomes rules and which rule decides, the
//! `grep-searcher` settings and sink, and how results are sorted and capped.
//!
//! Each sandbox brings only what differs: its walk (ripgrep's parallel walker beneath a
//! cap-std root in [`ContainerSandbox`](crate::ContainerSandbox), a recursive walk of the
//! tree in [`VirtualSandbox`](crate::VirtualSandbox)) and how it gets a file's bytes. The
//! conformance suite (`tests/it/conformance.rs`) checks that both give the same results.
//!
//! - Globs: `*` does not cross `/` (`**` does); absolute patterns and `..` segments are
//!   refused, as they could never match a path under the search folder.
//! - `.gitignore`: a byte-order mark is skipped, a bad line is skipped (as git does), and
//!   for a path the deepest file with a rule about it decides.
//! - Results: paths sorted by bytes and cut at the request's limit; grep keeps whole files
//!   up to the limit-th matching line (and the context lines after it), and only the
//!   smallest paths are ever held in memory.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use halo_core::sandbox::{
    GlobOutput, GrepLine, GrepOutput, GrepRequest, GrepSkip, SandboxError, SandboxPath,
};
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::container::limits::format_bytes;
use crate::text::show_line;
use crate::tools::MAX_SEARCH_LINE_BYTES;

/// The most files a grep result lists as not searched to their end.
const MAX_SKIPPED: usize = 100;

/// The largest `.gitignore` file whose rules apply, in bytes: 1 MiB; a larger one is
/// ignored whole.
pub(crate) const MAX_GITIGNORE_BYTES: u64 = 1024 * 1024;

/// Refuses a glob pattern that is empty, absolute or has a `..` segment: it could never
/// match a path under the search folder, and the model should hear why.
///
/// # Errors
/// [`SandboxError::InvalidPattern`] for an empty pattern, [`SandboxError::OutsideRoot`]
/// naming the pattern for the others.
pub(crate) fn check_pattern(pattern: &str) -> Result<(), SandboxError> {
    if pattern.is_empty() {
        return Err(SandboxError::InvalidPattern {
            kind: "glob",
            pattern: String::new(),
            message: "the pattern is empty; give one such as `**/*.rs` (every .rs file) or \
                      `*` (the files in the folder)"
                .into(),
        });
    }
    let climbs = pattern
        .split(['/', '{', '}', ','])
        .any(|segment| segment == "..");
    if pattern.starts_with('/') || climbs {
        return Err(SandboxError::OutsideRoot {
            path: pattern.to_string(),
        });
    }
    Ok(())
}

/// Compiles a glob whose `*` does not cross `/` (`**` does), after [`check_pattern`].
///
/// # Errors
/// As [`check_pattern`]; [`SandboxError::InvalidPattern`] for a pattern `globset` refuses.
pub(crate) fn compile_glob(pattern: &str) -> Result<GlobMatcher, SandboxError> {
    check_pattern(pattern)?;
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

/// The rules of one `.gitignore` whose text is `text`, for the folder at `folder` (the
/// path the walk's paths start with); `None` when it has none.
pub(crate) fn gitignore_rules(folder: PathBuf, text: &str) -> Option<Gitignore> {
    // git and ripgrep skip a byte-order mark an editor may have written.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut builder = GitignoreBuilder::new(folder);
    for line in text.lines() {
        // A bad line is skipped, as git does.
        let _ = builder.add_line(None, line);
    }
    builder.build().ok().filter(|g| !g.is_empty())
}

/// Whether `path` is ignored by the rules that apply in its folder, given deepest folder
/// first: the first with a rule about it decides (an ignore or a `!` whitelist).
pub(crate) fn is_ignored<'a>(
    deepest_first: impl IntoIterator<Item = &'a Gitignore>,
    path: &Path,
    is_dir: bool,
) -> bool {
    deepest_first
        .into_iter()
        .map(|rules| rules.matched(path, is_dir))
        .find(|m| !m.is_none())
        .is_some_and(|m| m.is_ignore())
}

/// `a/b` from two `/`-separated relative paths, either of which may be empty (the root).
pub(crate) fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}/{b}"),
    }
}

/// The smallest `limit` keys inserted, in byte order, and whether more were inserted.
#[derive(Default)]
pub(crate) struct Smallest<V> {
    kept: BTreeMap<String, V>,
    limit: usize,
    dropped: bool,
}

impl<V> Smallest<V> {
    pub(crate) fn new(limit: usize) -> Self {
        Smallest {
            kept: BTreeMap::new(),
            limit,
            dropped: false,
        }
    }

    pub(crate) fn insert(&mut self, key: String, value: V) {
        self.kept.insert(key, value);
        if self.kept.len() > self.limit {
            self.kept.pop_last();
            self.dropped = true;
        }
    }

    /// Adds what another collector (of the same limit) kept and whether it dropped any.
    pub(crate) fn merge(&mut self, other: Self) {
        self.dropped |= other.dropped;
        for (key, value) in other.kept {
            self.insert(key, value);
        }
    }
}

impl Smallest<()> {
    /// The kept paths, sorted, as the glob's result.
    pub(crate) fn into_glob_output(self) -> GlobOutput {
        GlobOutput {
            truncated: self.dropped,
            paths: self
                .kept
                .into_keys()
                .filter_map(|p| SandboxPath::parse(&p).ok())
                .collect(),
        }
    }
}

/// A grep request compiled once: the regex, the file filter and the searcher's settings.
pub(crate) struct GrepQuery {
    matcher: RegexMatcher,
    /// The `glob` filter, and whether it has a `/` (then it is matched against the path
    /// relative to the search folder, else against the file name, as ripgrep's `-g`).
    filter: Option<(GlobMatcher, bool)>,
    context: usize,
    limit: usize,
}

impl GrepQuery {
    /// # Errors
    /// [`SandboxError::InvalidPattern`] for a bad regex; as [`compile_glob`] for the filter.
    pub(crate) fn new(req: &GrepRequest) -> Result<Self, SandboxError> {
        let invalid = |message: String| SandboxError::InvalidPattern {
            kind: "regex",
            pattern: req.pattern.clone(),
            message,
        };
        // grep-regex reports errors in the pattern it wraps (`(?:…)`), at shifted
        // positions; parse the pattern as given first.
        regex_syntax::ParserBuilder::new()
            .case_insensitive(req.ignore_case)
            .build()
            .parse(&req.pattern)
            .map_err(|e| invalid(regex_error(&req.pattern, &e)))?;
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(req.ignore_case)
            .line_terminator(Some(b'\n'))
            .build(&req.pattern)
            .map_err(|e| invalid(e.to_string()))?;
        let filter = match &req.glob {
            Some(g) => Some((compile_glob(g)?, g.contains('/'))),
            None => None,
        };
        Ok(GrepQuery {
            matcher,
            filter,
            context: req.context,
            limit: req.limit,
        })
    }

    /// A searcher with the query's settings. It holds buffers: make one per thread and
    /// reuse it for every file. Its buffer holds at most [`MAX_SEARCH_LINE_BYTES`] (a line
    /// and its context): a file with a longer line is searched up to it.
    pub(crate) fn searcher(&self) -> Searcher {
        SearcherBuilder::new()
            .heap_limit(Some(MAX_SEARCH_LINE_BYTES))
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .before_context(self.context)
            .after_context(self.context)
            .build()
    }

    /// Whether the file at `rel` (relative to the search folder) passes the `glob` filter.
    pub(crate) fn wants(&self, rel: &Path) -> bool {
        let Some((glob, with_slash)) = &self.filter else {
            return true;
        };
        let subject = if *with_slash {
            Some(rel)
        } else {
            rel.file_name().map(Path::new)
        };
        subject.is_some_and(|s| glob.is_match(s))
    }

    /// An empty collector of this query's matches.
    pub(crate) fn matches(&self) -> Matches {
        Matches {
            files: BTreeMap::new(),
            kept_matches: 0,
            total_matches: 0,
            limit: self.limit,
            context: self.context,
            skipped: BTreeMap::new(),
        }
    }

    /// Searches a real file, shown as `shown`, for at most `limit + 1` matching lines. A
    /// file that fails to read gives what was found before.
    pub(crate) fn search_file(
        &self,
        searcher: &mut Searcher,
        shown: &SandboxPath,
        file: &std::fs::File,
    ) -> FileLines {
        let mut sink = FileSink::new(shown, self.limit);
        if let Err(e) = searcher.search_file(&self.matcher, file, &mut sink) {
            sink.lines.cut = Some(cut_reason(&e));
        }
        sink.lines
    }

    /// Searches bytes held in memory, shown as `shown`, for at most `limit + 1` matching
    /// lines. It goes through `search_reader`, the path [`search_file`](Self::search_file)
    /// takes for a real file, so binary detection (stop at the first buffer that holds a
    /// NUL byte) behaves as on disk.
    pub(crate) fn search_bytes(
        &self,
        searcher: &mut Searcher,
        shown: &SandboxPath,
        bytes: &[u8],
    ) -> FileLines {
        let mut sink = FileSink::new(shown, self.limit);
        // The sink never fails and a slice cannot fail to read: only a line too long can.
        if let Err(e) = searcher.search_reader(&self.matcher, bytes, &mut sink) {
            sink.lines.cut = Some(cut_reason(&e));
        }
        sink.lines
    }
}

/// Why a search stopped before a file's end, for the model.
fn cut_reason(e: &io::Error) -> String {
    // grep-searcher's line buffer: "configured allocation limit (N) exceeded".
    if e.to_string().contains("allocation limit") {
        format!(
            "a line is longer than {}; searched up to it",
            format_bytes(MAX_SEARCH_LINE_BYTES as u64)
        )
    } else {
        format!("reading it failed: {e}")
    }
}

/// The most characters of a regex an error message quotes.
const SHOWN_CHARS: usize = 40;

/// What is wrong with `pattern`, where, and what to do, in one line: `unclosed group at
/// character 1 (`(`); to match ...`.
fn regex_error(pattern: &str, e: &regex_syntax::Error) -> String {
    let (kind, span, syntax) = match e {
        regex_syntax::Error::Parse(e) => (e.kind().to_string(), *e.span(), true),
        regex_syntax::Error::Translate(e) => (e.kind().to_string(), *e.span(), false),
        other => return other.to_string().replace('\n', " "),
    };
    let (start, end) = (span.start.offset, span.end.offset.max(span.start.offset));
    let at = match pattern.get(start..end) {
        _ if start >= pattern.len() => "at the end of the pattern".to_string(),
        Some(text) if !text.is_empty() => {
            let shown: String = text.chars().take(SHOWN_CHARS).collect();
            let more = if shown.len() < text.len() { "…" } else { "" };
            format!("at character {} (`{shown}{more}`)", span.start.column)
        }
        // An empty span names the character that starts there.
        _ => {
            let c = pattern[start..].chars().next().unwrap_or_default();
            format!("at character {} (`{c}`)", span.start.column)
        }
    };
    let at = if span.start.line > 1 {
        at.replacen(
            "at character",
            &format!("at line {}, character", span.start.line),
            1,
        )
    } else {
        at
    };
    let advice = if syntax {
        "; to match a special character ( ) [ ] { } . * + ? | ^ $ \\ literally, escape it \
         with \\ (`\\(` matches `(`)"
    } else {
        ""
    };
    format!("{kind} {at}{advice}")
}

/// The lines of one file's search.
#[derive(Default)]
pub(crate) struct FileLines {
    lines: Vec<GrepLine>,
    matches: usize,
    /// Why the search stopped before the file's end.
    cut: Option<String>,
}

impl FileLines {
    /// Whether there is nothing to report: no line matched and the file was searched to
    /// its end.
    pub(crate) fn is_empty(&self) -> bool {
        self.matches == 0 && self.cut.is_none()
    }
}

/// Matching lines per file, holding only the files with the first `limit` matching lines
/// in path order (and one file more while deciding).
#[derive(Default)]
pub(crate) struct Matches {
    files: BTreeMap<String, FileLines>,
    kept_matches: usize,
    total_matches: usize,
    limit: usize,
    /// The context lines kept after the `limit`-th matching line.
    context: usize,
    /// The first [`MAX_SKIPPED`] files (in path order) not searched to their end, and why.
    skipped: BTreeMap<String, String>,
}

impl Matches {
    /// Adds what another collector (of the same limit) kept, counting the matches it
    /// dropped too.
    pub(crate) fn merge(&mut self, other: Self) {
        self.total_matches += other.total_matches - other.kept_matches;
        for (path, reason) in other.skipped {
            self.skip(path, reason);
        }
        for (path, lines) in other.files {
            self.insert(path, lines);
        }
    }

    fn skip(&mut self, path: String, reason: String) {
        self.skipped.insert(path, reason);
        if self.skipped.len() > MAX_SKIPPED {
            self.skipped.pop_last();
        }
    }

    pub(crate) fn insert(&mut self, path: String, mut lines: FileLines) {
        if let Some(reason) = lines.cut.take() {
            self.skip(path.clone(), reason);
        }
        if lines.matches == 0 {
            return;
        }
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
    pub(crate) fn finish(self) -> GrepOutput {
        let context = self.context as u64;
        let mut out = Vec::new();
        let mut matches = 0usize;
        let mut last_match: Option<(SandboxPath, u64)> = None;
        'files: for (_, file) in self.files {
            for line in file.lines {
                if matches == self.limit {
                    let trailing = line.is_context
                        && last_match.as_ref().is_some_and(|(path, number)| {
                            *path == line.path && line.line_number <= number.saturating_add(context)
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
            skipped: self
                .skipped
                .into_iter()
                .filter_map(|(path, reason)| {
                    Some(GrepSkip {
                        path: SandboxPath::parse(&path).ok()?,
                        reason,
                    })
                })
                .collect(),
        }
    }
}

/// Collects one file's lines, stopping after `limit + 1` matching lines (one more than
/// kept, so the collector knows more matched).
struct FileSink<'a> {
    path: &'a SandboxPath,
    lines: FileLines,
    stop_after: usize,
}

impl<'a> FileSink<'a> {
    fn new(path: &'a SandboxPath, limit: usize) -> Self {
        FileSink {
            path,
            lines: FileLines::default(),
            stop_after: limit.saturating_add(1),
        }
    }

    fn push(&mut self, number: Option<u64>, bytes: &[u8], is_context: bool) {
        self.lines.lines.push(GrepLine {
            path: self.path.clone(),
            line_number: number.unwrap_or(0),
            // Cut as the tools show it, so a long line is not held whole.
            text: show_line(bytes),
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
