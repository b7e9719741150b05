//! `glob`: the files whose paths match a glob pattern, sorted.

use std::sync::Arc;

use globset::GlobBuilder;
use halo_core::{Tool, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::SandboxError;
use crate::sandbox::{MAX_RESULTS, SandboxPath, Shared, display_rel};
use crate::text::Lines;

// Arguments of `glob` (no doc comment: it would enter the schema the model reads).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GlobArgs {
    /// Glob pattern matched against file paths relative to `path`, like `**/*.rs` or `src/*.{js,ts}`. `*` does not cross `/`; `**` matches any number of folders.
    pattern: String,
    /// Folder to search in, relative to the sandbox root (default: the root).
    path: Option<String>,
}

pub(crate) struct GlobTool {
    shared: Arc<Shared>,
    description: String,
}

impl GlobTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let description = format!(
            "Finds files by glob pattern. Returns the matching file paths relative to the \
             sandbox root, one a line, sorted; at most {MAX_RESULTS}. Hidden files and paths \
             ignored by .gitignore or .ignore files are skipped, and symbolic links are not \
             followed."
        );
        GlobTool {
            shared,
            description,
        }
    }
}

impl Tool for GlobTool {
    type Args = GlobArgs;

    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn call(&self, args: GlobArgs) -> Result<ToolOutput, ToolError> {
        let shared = Arc::clone(&self.shared);
        let text = super::blocking(move || glob(&shared, &args)).await??;
        Ok(ToolOutput::text(text))
    }
}

/// Refuses a pattern that is absolute or has a `..` segment: it could never match a path
/// under the search folder, and the model should hear why.
pub(crate) fn check_pattern(pattern: &str) -> Result<(), SandboxError> {
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

/// Compiles a glob whose `*` does not cross `/`.
pub(crate) fn compile(pattern: &str) -> Result<globset::GlobMatcher, SandboxError> {
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

fn glob(shared: &Shared, args: &GlobArgs) -> Result<String, SandboxError> {
    let matcher = compile(&args.pattern)?;
    let base = SandboxPath::parse(args.path.as_deref())?;
    let meta = shared
        .dir
        .metadata(base.cap())
        .map_err(|e| base.io_error("search", e))?;
    if !meta.is_dir() {
        return Err(SandboxError::NotDirectory { path: base.arg });
    }
    let (walk, start) = super::walk::walk(shared, &base);
    let mut out = Lines::new(shared.config.output_limit);
    let mut total = 0usize;
    let mut full = false;
    for entry in walk.flatten() {
        if entry.depth() == 0 || entry.file_type().is_none_or(|t| t.is_dir()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(&start) else {
            continue;
        };
        if !matcher.is_match(rel) {
            continue;
        }
        total += 1;
        if !full && (out.count() >= MAX_RESULTS || !out.push(&display_rel(&base.rel.join(rel)))) {
            full = true;
        }
    }
    if total == 0 {
        return Ok(format!(
            "no files match `{}` in `{}`",
            args.pattern,
            base.display()
        ));
    }
    let note = full.then(|| {
        format!(
            "[showing the first {} of {total} matching files; narrow the pattern or path]",
            out.count()
        )
    });
    Ok(out.finish(note))
}
