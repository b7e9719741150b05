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
        tool.call_json(
            args,
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
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

/// A process that is neither dead nor dying: gone, a zombie, already exiting (a non-zero
/// exit code in `stat`) or with a `SIGKILL` pending count as dead.
pub fn alive(pid: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`: the fields after the last `)`; the exit code is the last one.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let state = fields.first().copied().unwrap_or("X");
    let exiting = fields.last().is_some_and(|code| *code != "0");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kill_pending = status.lines().any(|l| {
        (l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
            && u64::from_str_radix(l.split_whitespace().nth(1).unwrap_or("0"), 16)
                .is_ok_and(|mask| mask & (1 << 8) != 0)
    });
    !matches!(state, "Z" | "X") && !exiting && !kill_pending
}

/// Live processes whose command line contains `marker` or whose process group is `pgid`.
pub fn survivors(marker: &str, pgid: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc") {
        let name = entry.expect("entry").file_name();
        let pid = name.to_string_lossy();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Field 5 of stat (3rd after the command name) is the process group.
        let group = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2).map(str::to_string))
            .unwrap_or_default();
        if (cmdline.contains(marker) || group == pgid) && alive(&pid) {
            found.push(format!("{pid}: {cmdline} (group {group})"));
        }
    }
    found
}

/// A new temporary folder that commands in the OS sandbox see (read-only): never under
/// `/tmp`, which the sandbox replaces by a private one. Under cargo's `CARGO_TARGET_TMPDIR`,
/// unless the target folder lies under `/tmp` (a checkout cloned there); then under
/// `/var/tmp`, or the home folder.
pub fn visible_tempdir(prefix: &str) -> TempDir {
    let target_tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let candidates = [Some(target_tmp), Some(PathBuf::from("/var/tmp")), home];
    for dir in candidates.into_iter().flatten() {
        if std::fs::create_dir_all(&dir).is_err() {
            continue;
        }
        let Ok(real) = dir.canonicalize() else {
            continue;
        };
        if real.starts_with("/tmp") {
            continue;
        }
        if let Ok(made) = tempfile::Builder::new().prefix(prefix).tempdir_in(&real) {
            return made;
        }
    }
    panic!("no folder outside /tmp to make a temporary folder the sandbox can see")
}
