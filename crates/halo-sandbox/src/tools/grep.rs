//! `grep`: regular-expression search with ripgrep's own crates (`grep-regex`,
//! `grep-searcher`) over the confined walk of [`super::walk`].

use std::io;
use std::path::Path;
use std::sync::Arc;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use halo_core::{Tool, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::SandboxError;
use crate::sandbox::{MAX_RESULTS, SandboxPath, Shared, display_rel};
use crate::text::{Lines, cut_line, strip_eol};

// Arguments of `grep` (no doc comment: it would enter the schema the model reads).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrepArgs {
    /// Regular expression (Rust regex syntax, like ripgrep) searched for in each line.
    pattern: String,
    /// File or folder to search, relative to the sandbox root (default: the root).
    path: Option<String>,
    /// Only search files matching this glob: `*.rs` matches file names; a glob with a `/`, like `src/**/*.rs`, matches paths relative to `path`.
    glob: Option<String>,
    /// Match without regard to case (default false).
    #[serde(default)]
    ignore_case: bool,
}

pub(crate) struct GrepTool {
    shared: Arc<Shared>,
    description: String,
}

impl GrepTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let description = format!(
            "Searches file contents with a regular expression, like ripgrep. Returns one \
             `path:line:text` a match, paths relative to the sandbox root, files in sorted \
             order; at most {MAX_RESULTS} matches. Binary files, hidden files and paths \
             ignored by .gitignore or .ignore files are skipped, and symbolic links are not \
             followed."
        );
        GrepTool {
            shared,
            description,
        }
    }
}

impl Tool for GrepTool {
    type Args = GrepArgs;

    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn call(&self, args: GrepArgs) -> Result<ToolOutput, ToolError> {
        let shared = Arc::clone(&self.shared);
        let text = super::blocking(move || grep(&shared, &args)).await??;
        Ok(ToolOutput::text(text))
    }
}

/// Why the search stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Matches,
    Bytes,
}

struct Search<'a> {
    shared: &'a Shared,
    matcher: RegexMatcher,
    searcher: Searcher,
    out: Lines,
    stop: Option<Stop>,
}

impl Search<'_> {
    /// Searches one file, opened through cap-std (so a path that resolves outside the root
    /// is never read). Files that cannot be opened or read are skipped.
    fn file(&mut self, rel: &Path) {
        let Ok(file) = self.shared.dir.open(rel) else {
            return;
        };
        let file = file.into_std();
        let shown = display_rel(rel);
        let out = &mut self.out;
        let stop = &mut self.stop;
        let sink = Lossy(|lnum: u64, line: &str| -> Result<bool, io::Error> {
            if out.count() >= MAX_RESULTS {
                *stop = Some(Stop::Matches);
                return Ok(false);
            }
            let text = String::from_utf8_lossy(strip_eol(line.as_bytes()));
            if !out.push(&format!("{shown}:{lnum}:{}", cut_line(&text))) {
                *stop = Some(Stop::Bytes);
                return Ok(false);
            }
            Ok(true)
        });
        // A read error ends this file's search; what was found is kept.
        let _ = self.searcher.search_file(&self.matcher, &file, sink);
    }
}

fn grep(shared: &Shared, args: &GrepArgs) -> Result<String, SandboxError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.ignore_case)
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
        .map_err(|e| SandboxError::InvalidPattern {
            kind: "regex",
            pattern: args.pattern.clone(),
            message: e.to_string(),
        })?;
    let file_glob = match &args.glob {
        Some(g) => Some((super::glob::compile(g)?, g.contains('/'))),
        None => None,
    };
    let base = SandboxPath::parse(args.path.as_deref())?;
    let meta = shared
        .dir
        .metadata(base.cap())
        .map_err(|e| base.io_error("search", e))?;
    let mut search = Search {
        shared,
        matcher,
        searcher: SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build(),
        out: Lines::new(shared.config.output_limit),
        stop: None,
    };
    if meta.is_file() {
        search.file(&base.rel);
    } else if meta.is_dir() {
        let (walk, start) = super::walk::walk(shared, &base);
        for entry in walk.flatten() {
            // Regular files only: links are not followed, FIFOs could block.
            if entry.depth() == 0 || !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&start) else {
                continue;
            };
            if let Some((glob, with_slash)) = &file_glob {
                let subject = if *with_slash {
                    Some(rel)
                } else {
                    rel.file_name().map(Path::new)
                };
                if !subject.is_some_and(|s| glob.is_match(s)) {
                    continue;
                }
            }
            search.file(&base.rel.join(rel));
            if search.stop.is_some() {
                break;
            }
        }
    } else {
        return Err(SandboxError::NotRegularFile { path: base.arg });
    }
    let count = search.out.count();
    if count == 0 {
        return Ok(format!(
            "no matches for `{}` in `{}`",
            args.pattern,
            base.display()
        ));
    }
    let note = search.stop.map(|stop| match stop {
        Stop::Matches => {
            format!("[stopped after {count} matches; narrow the pattern, path or glob]")
        }
        Stop::Bytes => format!(
            "[output limit reached after {count} matches; narrow the pattern, path or glob]"
        ),
    });
    Ok(search.out.finish(note))
}
