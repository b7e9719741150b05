//! A sandbox over a fresh temporary folder, and helpers to call its tools.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use halo_core::{DynTool, ToolError, ToolOutput};
use halo_sandbox::ContainerSandbox;
use serde_json::Value;
use tempfile::TempDir;

pub struct Fixture {
    pub dir: TempDir,
    pub sandbox: ContainerSandbox,
    pub tools: Vec<Arc<dyn DynTool>>,
}

impl Fixture {
    pub fn new() -> Self {
        Self::with(|s| s)
    }

    pub fn with(configure: impl FnOnce(ContainerSandbox) -> ContainerSandbox) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let sandbox = configure(ContainerSandbox::new(dir.path()).expect("sandbox"));
        let tools = sandbox.tools();
        Fixture {
            dir,
            sandbox,
            tools,
        }
    }

    /// The ambient path of `rel` in the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Creates a file (and its folders) directly on disk.
    pub fn file(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
    }

    pub fn symlink(&self, target: impl AsRef<Path>, rel: &str) {
        std::os::unix::fs::symlink(target, self.path(rel)).expect("symlink");
    }

    pub async fn call(&self, name: &str, args: Value) -> Result<ToolOutput, ToolError> {
        let tool = self
            .tools
            .iter()
            .find(|t| t.spec().name == name)
            .unwrap_or_else(|| panic!("no tool {name}"));
        tool.call_json(args).await
    }

    /// Calls a tool that must succeed with a non-error output; returns its text.
    pub async fn ok(&self, name: &str, args: Value) -> String {
        match self.call(name, args.clone()).await {
            Ok(out) => {
                assert!(!out.is_error, "{name} {args}: error output {}", out.content);
                out.content
            }
            Err(e) => panic!("{name} {args}: {e}"),
        }
    }

    /// Calls a tool that must fail with an error the model reads; returns the message.
    pub async fn failed(&self, name: &str, args: Value) -> String {
        match self.call(name, args.clone()).await {
            Err(ToolError::Failed(msg)) => msg,
            other => panic!("{name} {args}: expected a failure, got {other:?}"),
        }
    }
}

pub fn outside_message(path: &str) -> String {
    format!("path `{path}` is outside the sandbox root; use a path relative to the root")
}
