//! The memory file: one timestamped line per finished task,
//! appended atomically; at session start its last lines go into the semi-static zone.

use halo_core::sandbox::{SandboxError, SandboxPath};
use halo_core::zones::iso_date;
use halo_core::{SharedSandbox, ZoneSection};

use super::Diagnostic;

/// The memory file's default path: `.agent/memory.md`.
pub const DEFAULT_MEMORY_PATH: &str = ".agent/memory.md";

/// How many of its last lines are loaded by default: 50.
pub const DEFAULT_MEMORY_LINES: usize = 50;

/// The most characters kept of an entry's task and of its result each; more is cut with
/// `...`.
pub const MAX_ENTRY_CHARS: usize = 400;

/// Where the memory file is, how much of it is loaded, and whether it is used at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryConfig {
    /// The file, relative to the sandbox root.
    pub path: SandboxPath,
    /// How many of its last lines the snapshot holds.
    pub lines: usize,
    /// `false`: no snapshot, no appends.
    pub enabled: bool,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            path: SandboxPath::parse(DEFAULT_MEMORY_PATH).unwrap_or_default(),
            lines: DEFAULT_MEMORY_LINES,
            enabled: true,
        }
    }
}

impl MemoryConfig {
    /// Memory turned off.
    pub fn off() -> Self {
        MemoryConfig {
            enabled: false,
            ..MemoryConfig::default()
        }
    }
}

/// What [`Memory::snapshot`] read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemorySnapshot {
    /// The section for the semi-static zone; `None` when off, missing or empty.
    pub section: Option<ZoneSection>,
    /// How many lines it holds.
    pub lines: usize,
    /// Why the file could not be read, when it exists and could not.
    pub diagnostic: Option<Diagnostic>,
}

/// The memory file of one sandbox.
///
/// ```
/// use std::sync::Arc;
/// use halo_core::SharedSandbox;
/// use halo_sandbox::{VirtualSandbox, harness::{Memory, MemoryConfig}};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let sandbox: SharedSandbox = Arc::new(VirtualSandbox::new());
/// let memory = Memory::new(sandbox, MemoryConfig::default());
/// memory.append("fix the parser", "fixed, tests pass", 1_764_547_200_000).await.unwrap();
/// let snap = memory.snapshot().await;
/// assert_eq!(snap.lines, 1);
/// assert_eq!(
///     snap.section.unwrap().body,
///     "- 2025-12-01T00:00:00Z task: fix the parser | result: fixed, tests pass"
/// );
/// # });
/// ```
#[derive(Clone)]
pub struct Memory {
    sandbox: SharedSandbox,
    config: MemoryConfig,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Memory {
    /// The memory file of `sandbox` as `config` says.
    pub fn new(sandbox: SharedSandbox, config: MemoryConfig) -> Self {
        Memory { sandbox, config }
    }

    /// The configuration.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    /// The last [`MemoryConfig::lines`] lines, as a section headed `Memory` naming the
    /// file. Never fails: a file that cannot be read is a diagnostic.
    pub async fn snapshot(&self) -> MemorySnapshot {
        if !self.config.enabled || self.config.lines == 0 {
            return MemorySnapshot::default();
        }
        let path = &self.config.path;
        let text = match super::read_harness_file(&self.sandbox, path).await {
            Ok(Some(text)) => text,
            Ok(None) => return MemorySnapshot::default(),
            Err(diagnostic) => {
                return MemorySnapshot {
                    diagnostic: Some(diagnostic),
                    ..MemorySnapshot::default()
                };
            }
        };
        let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let keep = &all[all.len().saturating_sub(self.config.lines)..];
        if keep.is_empty() {
            return MemorySnapshot::default();
        }
        MemorySnapshot {
            section: Some(ZoneSection::new(
                format!("Memory: the last {} entries", keep.len()),
                Some(path.as_str().to_string()),
                keep.join("\n"),
            )),
            lines: keep.len(),
            diagnostic: None,
        }
    }

    /// Appends one entry for a finished task ([`entry`](Self::entry)) in one atomic
    /// [`Sandbox::append`](halo_core::Sandbox::append): a concurrent writer's entry lands
    /// before or after it, never inside. Returns `false` (writing nothing) when memory is
    /// off.
    ///
    /// # Errors
    /// The sandbox's error when the file cannot be written.
    pub async fn append(
        &self,
        task: &str,
        result: &str,
        now_ms: u64,
    ) -> Result<bool, SandboxError> {
        if !self.config.enabled {
            return Ok(false);
        }
        self.sandbox
            .append(
                &self.config.path,
                Self::entry(task, result, now_ms).into_bytes(),
            )
            .await?;
        Ok(true)
    }

    /// One entry: a line `- YYYY-MM-DDTHH:MM:SSZ task: ... | result: ...` and a newline;
    /// the task and the result on one line each (whitespace runs collapsed), at most
    /// [`MAX_ENTRY_CHARS`] characters each.
    pub fn entry(task: &str, result: &str, now_ms: u64) -> String {
        let secs = (now_ms / 1000) % 86_400;
        format!(
            "- {}T{:02}:{:02}:{:02}Z task: {} | result: {}\n",
            iso_date(now_ms),
            secs / 3600,
            secs / 60 % 60,
            secs % 60,
            one_line(task),
            one_line(result)
        )
    }
}

fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= MAX_ENTRY_CHARS {
        return joined;
    }
    let cut: String = joined.chars().take(MAX_ENTRY_CHARS - 3).collect();
    format!("{cut}...")
}
