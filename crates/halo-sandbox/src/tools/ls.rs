//! `ls`: the entries of a folder, sorted, folders marked with `/`.

use std::sync::Arc;

use halo_core::{Tool, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::SandboxError;
use crate::sandbox::{MAX_RESULTS, SandboxPath, Shared};
use crate::text::Lines;

// Arguments of `ls` (no doc comment: it would enter the schema the model reads).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LsArgs {
    /// Folder to list, relative to the sandbox root (default: the root).
    path: Option<String>,
}

pub(crate) struct LsTool {
    shared: Arc<Shared>,
    description: String,
}

impl LsTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let description = format!(
            "Lists a folder of the sandbox, one entry a line, sorted by name. Folders end \
             with `/`, symbolic links with `@`. Hidden entries are included. At most \
             {MAX_RESULTS} entries are listed."
        );
        LsTool {
            shared,
            description,
        }
    }
}

impl Tool for LsTool {
    type Args = LsArgs;

    fn name(&self) -> &str {
        "ls"
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn call(&self, args: LsArgs) -> Result<ToolOutput, ToolError> {
        let shared = Arc::clone(&self.shared);
        let text = super::blocking(move || ls(&shared, &args)).await??;
        Ok(ToolOutput::text(text))
    }
}

fn ls(shared: &Shared, args: &LsArgs) -> Result<String, SandboxError> {
    let path = SandboxPath::parse(args.path.as_deref())?;
    let meta = shared
        .dir
        .metadata(path.cap())
        .map_err(|e| path.io_error("list", e))?;
    if !meta.is_dir() {
        return Err(SandboxError::NotDirectory { path: path.arg });
    }
    let entries = shared
        .dir
        .read_dir(path.cap())
        .map_err(|e| path.io_error("list", e))?;
    // Sorted by name first, then marked, so `a/` and `a.txt` keep the order of `a` and `a.txt`.
    let mut entries: Vec<(String, &str)> = entries
        .filter_map(Result::ok)
        .map(|e| {
            let mark = match e.file_type() {
                Ok(t) if t.is_dir() => "/",
                Ok(t) if t.is_symlink() => "@",
                _ => "",
            };
            (e.file_name().to_string_lossy().into_owned(), mark)
        })
        .collect();
    if entries.is_empty() {
        return Ok("(empty directory)".to_string());
    }
    entries.sort();
    let names: Vec<String> = entries
        .into_iter()
        .map(|(name, mark)| name + mark)
        .collect();
    let mut out = Lines::new(shared.config.output_limit);
    for name in names.iter().take(MAX_RESULTS) {
        if !out.push(name) {
            break;
        }
    }
    let note = (out.count() < names.len()).then(|| {
        format!(
            "[showing the first {} of {} entries; use glob to narrow the listing]",
            out.count(),
            names.len()
        )
    });
    Ok(out.finish(note))
}
