//! `cargo xtask model`: fetch the default GGUF model (work in progress).

use std::path::PathBuf;

/// Returns the path of the default model, fetching it first if needed.
pub fn ensure_model() -> anyhow::Result<PathBuf> {
    anyhow::bail!("not yet written")
}
