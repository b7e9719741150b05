//! The sandbox's tools, each a typed [`halo_core::Tool`] whose arguments struct derives its
//! JSON Schema with schemars (the doc comments of the fields become the parameter
//! descriptions the model reads).
//!
//! Tool names, descriptions and schemas are built only from constants and the sandbox's
//! options, so they are byte-stable across runs and machines: they live in the agent's
//! cached stable prefix.

use std::sync::Arc;

use halo_core::{DynTool, ToolError};

use crate::sandbox::Shared;

mod bash;
mod glob;
mod grep;
mod ls;
mod read;
mod walk;
mod write;

/// The tools over one sandbox, in the order `read`, `write`, `ls`, `glob`, `grep`, `bash`.
pub(crate) fn all(shared: Arc<Shared>) -> Vec<Arc<dyn DynTool>> {
    vec![
        Arc::new(read::ReadTool::new(Arc::clone(&shared))),
        Arc::new(write::WriteTool::new(Arc::clone(&shared))),
        Arc::new(ls::LsTool::new(Arc::clone(&shared))),
        Arc::new(glob::GlobTool::new(Arc::clone(&shared))),
        Arc::new(grep::GrepTool::new(Arc::clone(&shared))),
        Arc::new(bash::BashTool::new(shared)),
    ]
}

/// Runs blocking file work on tokio's blocking pool when a tokio runtime is running, and in
/// place otherwise (so the file tools also work under other executors).
async fn blocking<T, F>(f: F) -> Result<T, ToolError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle
            .spawn_blocking(f)
            .await
            .map_err(|e| ToolError::Failed(format!("internal error in the sandbox: {e}"))),
        Err(_) => Ok(f()),
    }
}
