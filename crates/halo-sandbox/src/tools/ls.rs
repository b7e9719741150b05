//! `ls`: the entries of a folder, sorted, folders marked with `/` and links with `@`.

use std::sync::Arc;

use halo_core::sandbox::FileKind;
use halo_core::{Tool, ToolAnnotations, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Ctx, MAX_RESULTS, failed};
use crate::text::Lines;

// Arguments of `ls` (no doc comment: it would enter the schema the model reads).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LsArgs {
    /// Folder to list, relative to the sandbox root (default: the root).
    path: Option<String>,
}

pub(super) struct LsTool {
    ctx: Arc<Ctx>,
    description: String,
}

impl LsTool {
    pub(super) fn new(ctx: Arc<Ctx>) -> Self {
        let description = format!(
            "Lists a folder of the sandbox, one entry a line, sorted by name. Folders end \
             with `/`, symbolic links with `@`. Hidden entries are included. At most \
             {MAX_RESULTS} entries are listed."
        );
        LsTool { ctx, description }
    }
}

impl Tool for LsTool {
    type Args = LsArgs;

    /// Reads only: runs concurrently with the step's other read-only calls, and again on
    /// resume when interrupted.
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }

    fn name(&self) -> &str {
        "ls"
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn call(&self, args: LsArgs) -> Result<ToolOutput, ToolError> {
        let path = self.ctx.path(args.path.as_deref())?;
        let mut entries = self.ctx.sandbox.list(&path).await.map_err(failed)?;
        if entries.is_empty() {
            return Ok(ToolOutput::text("(empty directory)"));
        }
        // Sorted by name before marking, so `a/` and `a.txt` keep the order of `a` and `a.txt`.
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut out = Lines::new(self.ctx.options.output_limit());
        for entry in entries.iter().take(MAX_RESULTS) {
            let mark = match entry.kind {
                FileKind::Dir => "/",
                FileKind::Symlink => "@",
                FileKind::File | FileKind::Other => "",
            };
            if !out.push(&format!("{}{mark}", entry.name)) {
                break;
            }
        }
        let note = (out.count() < entries.len()).then(|| {
            format!(
                "[showing the first {} of {} entries; use glob to narrow the listing]",
                out.count(),
                entries.len()
            )
        });
        Ok(ToolOutput::text(out.finish(note)))
    }
}
