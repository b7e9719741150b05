//! `write`: creates or replaces a file, creating its parent folders.

use std::io;
use std::sync::Arc;

use halo_core::{Tool, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::SandboxError;
use crate::sandbox::{SandboxPath, Shared};

// Arguments of `write` (no doc comment: it would enter the schema the model reads).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// Path of the file, relative to the sandbox root. Missing parent folders are created.
    path: String,
    /// The file's full new content (UTF-8 text).
    content: String,
}

pub(crate) struct WriteTool {
    shared: Arc<Shared>,
}

impl WriteTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        WriteTool { shared }
    }
}

impl Tool for WriteTool {
    type Args = WriteArgs;

    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> &str {
        "Writes a text file in the sandbox, replacing it if it exists and creating missing \
         parent folders. Returns the number of bytes written."
    }

    async fn call(&self, args: WriteArgs) -> Result<ToolOutput, ToolError> {
        let shared = Arc::clone(&self.shared);
        let text = super::blocking(move || write(&shared, &args)).await??;
        Ok(ToolOutput::text(text))
    }
}

fn write(shared: &Shared, args: &WriteArgs) -> Result<String, SandboxError> {
    let path = SandboxPath::parse(Some(&args.path))?;
    if path.rel.as_os_str().is_empty() {
        return Err(SandboxError::IsDirectory { path: path.arg });
    }
    // Look first so a directory, FIFO or device is refused before anything is created
    // (opening a FIFO for writing would block).
    match shared.dir.metadata(path.cap()) {
        Ok(m) if m.is_dir() => return Err(SandboxError::IsDirectory { path: path.arg }),
        Ok(m) if !m.is_file() => return Err(SandboxError::NotRegularFile { path: path.arg }),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(path.io_error("write", e)),
    }
    if let Some(parent) = path.rel.parent()
        && !parent.as_os_str().is_empty()
    {
        shared
            .dir
            .create_dir_all(parent)
            .map_err(|e| path.io_error("create the parent folders of", e))?;
    }
    shared
        .dir
        .write(path.cap(), args.content.as_bytes())
        .map_err(|e| path.io_error("write", e))?;
    Ok(format!(
        "wrote {} bytes to `{}`",
        args.content.len(),
        path.display()
    ))
}
