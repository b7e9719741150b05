//! `write`: creates or replaces a file, creating its parent folders.

use std::sync::Arc;

use halo_core::sandbox::SandboxError;
use halo_core::{Tool, ToolAnnotations, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Ctx, failed};

// Arguments of `write` (no doc comment: it would enter the schema the model reads).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// Path of the file, relative to the sandbox root. Missing parent folders are created.
    path: String,
    /// The file's full new content (UTF-8 text).
    content: String,
}

pub(super) struct WriteTool {
    ctx: Arc<Ctx>,
}

impl WriteTool {
    pub(super) fn new(ctx: Arc<Ctx>) -> Self {
        WriteTool { ctx }
    }
}

impl Tool for WriteTool {
    type Args = WriteArgs;

    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> &str {
        "Writes a text file in the sandbox, replacing it if it exists and creating missing \
         parent folders. Returns the number of bytes written. To change part of a file, use \
         edit."
    }

    /// Changes only files in the workspace; writing the same content twice does what writing
    /// it once does.
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default()
            .with_open_world(false)
            .with_idempotent(true)
    }

    async fn call(&self, args: WriteArgs) -> Result<ToolOutput, ToolError> {
        let path = self.ctx.path(Some(&args.path))?;
        let len = args.content.len();
        self.ctx
            .sandbox
            .write(&path, args.content.into_bytes())
            .await
            .map_err(|e| match e {
                // The sandbox names the file that stands where a folder should be.
                SandboxError::NotDirectory { path: file } if file != path.display() => {
                    ToolError::Failed(format!(
                        "cannot write `{path}`: `{file}` is a file, not a folder; choose another \
                         path, or remove that file first"
                    ))
                }
                e => failed(e),
            })?;
        Ok(ToolOutput::text(format!("wrote {len} bytes to `{path}`")))
    }
}
