//! `glob`: the files whose paths match a glob pattern, sorted, through [`Sandbox::glob`].
//!
//! [`Sandbox::glob`]: halo_core::Sandbox::glob

use std::sync::Arc;

use halo_core::sandbox::GlobRequest;
use halo_core::{Tool, ToolAnnotations, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Ctx, MAX_RESULTS, failed};
use crate::search::check_pattern;
use crate::text::Lines;

// Arguments of `glob` (no doc comment: it would enter the schema the model reads).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GlobArgs {
    /// Glob pattern matched against file paths relative to `path`, like `**/*.rs` or `src/*.{js,ts}`. `*` does not cross `/`; `**` matches any number of folders.
    pattern: String,
    /// Folder to search in, relative to the sandbox root (default: the root).
    path: Option<String>,
    /// Also list hidden files and files ignored by .gitignore (default false).
    #[serde(default)]
    include_ignored: bool,
}

pub(super) struct GlobTool {
    ctx: Arc<Ctx>,
    description: String,
}

impl GlobTool {
    pub(super) fn new(ctx: Arc<Ctx>) -> Self {
        let description = format!(
            "Finds files by glob pattern. Returns the matching file paths relative to the \
             sandbox root, one a line, sorted; at most {MAX_RESULTS}. Hidden files and paths \
             ignored by .gitignore files are skipped unless include_ignored is true; symbolic \
             links are not followed."
        );
        GlobTool { ctx, description }
    }
}

impl Tool for GlobTool {
    type Args = GlobArgs;

    /// Reads only: runs concurrently with the step's other read-only calls, and again on
    /// resume when interrupted.
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }

    fn name(&self) -> &str {
        "glob"
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn call(&self, args: GlobArgs) -> Result<ToolOutput, ToolError> {
        check_pattern(&args.pattern).map_err(failed)?;
        let base = self.ctx.path(args.path.as_deref())?;
        let found = self
            .ctx
            .sandbox
            .glob(GlobRequest {
                pattern: args.pattern.clone(),
                base: base.clone(),
                include_ignored: args.include_ignored,
                limit: MAX_RESULTS,
            })
            .await
            .map_err(failed)?;
        if found.paths.is_empty() {
            return Ok(ToolOutput::text(format!(
                "no files match `{}` in `{base}`",
                args.pattern
            )));
        }
        let mut out = Lines::new(self.ctx.options.output_limit());
        for path in &found.paths {
            if !out.push(path.as_str()) {
                break;
            }
        }
        let shown = out.count();
        let note = if shown < found.paths.len() {
            Some(format!(
                "[output limit reached after {shown} files; narrow the pattern or path]"
            ))
        } else if found.truncated {
            Some(format!(
                "[showing the first {shown} matching files; more match: narrow the pattern or path]"
            ))
        } else {
            None
        };
        Ok(ToolOutput::text(out.finish(note)))
    }
}
