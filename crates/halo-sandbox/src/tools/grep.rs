//! `grep`: regular-expression search through [`Sandbox::grep`] (in a `ContainerSandbox`,
//! ripgrep's own crates over a confined walk).
//!
//! [`Sandbox::grep`]: halo_core::Sandbox::grep

use std::sync::Arc;

use halo_core::sandbox::{GrepRequest, GrepSkip};
use halo_core::{Tool, ToolAnnotations, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Ctx, MAX_GREP_CONTEXT, MAX_RESULTS, failed};
use crate::search::check_pattern;
use crate::text::{Lines, cut_line};

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
    /// Lines of context to show before and after each match (default 0, at most 10).
    #[schemars(range(max = 10))]
    context: Option<u64>,
}

pub(super) struct GrepTool {
    ctx: Arc<Ctx>,
    description: String,
}

impl GrepTool {
    pub(super) fn new(ctx: Arc<Ctx>) -> Self {
        let description = format!(
            "Searches file contents with a regular expression, like ripgrep. Returns one \
             `path:line:text` a matching line (context lines as `path-line-text`, \
             non-adjacent groups separated by `--`), paths relative to the sandbox root, files in sorted \
             order; at most {MAX_RESULTS} matching lines. Binary files, hidden files and \
             paths ignored by .gitignore files are skipped, and symbolic links are not \
             followed."
        );
        GrepTool { ctx, description }
    }
}

impl Tool for GrepTool {
    type Args = GrepArgs;

    /// Reads only: runs concurrently with the step's other read-only calls, and again on
    /// resume when interrupted.
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }

    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn call(&self, args: GrepArgs) -> Result<ToolOutput, ToolError> {
        if let Some(glob) = &args.glob {
            check_pattern(glob).map_err(failed)?;
        }
        let base = self.ctx.path(args.path.as_deref())?;
        let context = args.context.unwrap_or(0).min(MAX_GREP_CONTEXT as u64) as usize;
        let found = self
            .ctx
            .sandbox
            .grep(GrepRequest {
                pattern: args.pattern.clone(),
                base: base.clone(),
                glob: args.glob.clone(),
                ignore_case: args.ignore_case,
                context,
                include_ignored: false,
                limit: MAX_RESULTS,
            })
            .await
            .map_err(failed)?;
        let skipped = skipped_note(&found.skipped);
        if found.lines.is_empty() {
            let none = format!("no matches for `{}` in `{base}`", args.pattern);
            return Ok(ToolOutput::text(match skipped {
                Some(note) => format!("{none}\n\n{note}"),
                None => none,
            }));
        }
        let mut out = Lines::new(self.ctx.options.output_limit());
        let mut matches = 0usize;
        let mut full = false;
        let mut previous: Option<(&str, u64)> = None;
        for line in &found.lines {
            let adjacent = previous.is_some_and(|(path, number)| {
                path == line.path.as_str() && number + 1 == line.line_number
            });
            if context > 0 && previous.is_some() && !adjacent && !out.push("--") {
                full = true;
                break;
            }
            let sep = if line.is_context { '-' } else { ':' };
            let text = format!(
                "{}{sep}{}{sep}{}",
                line.path,
                line.line_number,
                cut_line(&line.text)
            );
            if !out.push(&text) {
                full = true;
                break;
            }
            matches += usize::from(!line.is_context);
            previous = Some((line.path.as_str(), line.line_number));
        }
        let note = if full {
            Some(format!(
                "[output limit reached after {matches} matches; narrow the pattern, path or glob]"
            ))
        } else if found.truncated {
            Some(format!(
                "[stopped after {matches} matches; narrow the pattern, path or glob]"
            ))
        } else {
            None
        };
        let note = match (note, skipped) {
            (Some(a), Some(b)) => Some(format!("{a}\n{b}")),
            (a, b) => a.or(b),
        };
        Ok(ToolOutput::text(out.finish(note)))
    }
}

/// The note naming the files not searched to their end, each with why (the first few).
fn skipped_note(skipped: &[GrepSkip]) -> Option<String> {
    const SHOWN: usize = 5;
    let (first, _) = skipped.split_first()?;
    let mut note = format!(
        "[not searched to the end: `{}` ({})",
        first.path, first.reason
    );
    for skip in skipped.iter().skip(1).take(SHOWN - 1) {
        note.push_str(&format!(", `{}` ({})", skip.path, skip.reason));
    }
    if skipped.len() > SHOWN {
        note.push_str(&format!(" and {} more files", skipped.len() - SHOWN));
    }
    note.push(']');
    Some(note)
}
