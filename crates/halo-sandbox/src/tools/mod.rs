//! The coding tool set over any [`Sandbox`](halo_core::Sandbox): `read`, `write`, `edit`,
//! `ls`, `glob`, `grep` and, where the sandbox runs commands, `bash`.
//!
//! Each tool is a typed [`halo_core::Tool`] whose arguments struct derives its JSON Schema
//! with schemars (the doc comments of the fields become the parameter descriptions the model
//! reads). The tools only call the [`Sandbox`](halo_core::Sandbox) methods, through a
//! [`SharedSandbox`], so the same tools work on a `ContainerSandbox` and a `VirtualSandbox`:
//! the walking and searching happen inside each sandbox's `glob` and `grep`.
//!
//! Tool names, descriptions and schemas are built only from constants and the
//! [`ToolOptions`], so they are byte-stable across runs and machines: they live in the
//! agent's cached stable prefix.

use std::sync::Arc;
use std::time::Duration;

use halo_core::sandbox::{SandboxError, SandboxPath};
use halo_core::{DynTool, SharedSandbox, ToolError};

mod bash;
mod edit;
mod glob;
mod grep;
mod ls;
mod read;
mod write;

/// The exec timeout of `bash` when the model gives none: 30 s.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest timeout the model may ask `bash` for: 600 s. Longer requests are clamped.
pub const MAX_EXEC_TIMEOUT: Duration = Duration::from_secs(600);

/// The default bound on a tool result, in bytes: 32 KiB.
///
/// Every tool stops adding lines (file lines, paths, matches, diff lines) before its result
/// passes the bound and says so in a closing note; `bash` keeps the head and the tail of
/// each of stdout and stderr within half the bound per stream. A result is at most the
/// bound plus [`NOTES_MARGIN`] bytes of notes.
pub const DEFAULT_OUTPUT_LIMIT: usize = 32 * 1024;

/// The most bytes a tool adds to a result beyond its output limit, in bytes: 1 KiB.
///
/// That is room for every note a tool puts next to the bounded text: `read`'s closing notes
/// (where to read on, a file that is not UTF-8), the closing note of `ls`, `glob`, `grep`
/// and `edit`'s diff, and `bash`'s status line, stream headers, `[... N bytes omitted ...]`
/// markers and the note about held pipes (about 400 bytes in the worst case). So a result
/// of a tool set with output limit `L` is at most `L + NOTES_MARGIN` bytes, and
/// [`OutputTruncation::for_tools`](crate::policy::OutputTruncation::for_tools) (or its
/// default, for the default limit) passes every such result unchanged. Error messages and
/// "no match" results are short but quote the paths (at most 4096 bytes each) and the
/// pattern the model gave, so only a pattern of many kilobytes makes one longer.
pub const NOTES_MARGIN: usize = 1024;

/// The smallest output limit [`ToolOptions::with_output_limit`] accepts: 4 KiB, room for
/// one line cut at [`MAX_LINE_BYTES`].
pub const MIN_OUTPUT_LIMIT: usize = 4 * 1024;

/// The number of lines `read` returns when the model gives no `limit`: 2000.
pub const DEFAULT_READ_LINES: u64 = 2000;

/// The longest line `read` and `grep` show, in bytes; longer lines are cut: 2000.
pub const MAX_LINE_BYTES: usize = 2000;

/// The largest file `read` returns whole (without `offset` or `limit`), in bytes: 256 KiB.
pub const MAX_READ_FILE_BYTES: u64 = 256 * 1024;

/// The largest file `read` (in parts) and `edit` open at all, in bytes: 16 MiB. The
/// sandbox reads files whole, so this bounds the memory one call takes.
pub const MAX_OPEN_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The longest line `grep` searches, in bytes: 8 MiB. The searcher's buffer holds a whole
/// line, so this bounds its memory; a file with a longer line is searched up to that line
/// and the result names it.
pub const MAX_SEARCH_LINE_BYTES: usize = 8 * 1024 * 1024;

/// The most entries `ls` and paths `glob` list, and matching lines `grep` shows: 1000.
pub const MAX_RESULTS: usize = 1000;

/// The most lines of context `grep` shows before and after each match: 10.
pub const MAX_GREP_CONTEXT: usize = 10;

/// The options of a tool set. They appear in the tools' descriptions, so two tool sets with
/// the same options have byte-identical specs.
///
/// ```
/// use std::time::Duration;
/// use halo_sandbox::{ToolOptions, DEFAULT_OUTPUT_LIMIT};
///
/// let options = ToolOptions::default().with_exec_timeout(Duration::from_secs(5));
/// assert_eq!(options.exec_timeout(), Duration::from_secs(5));
/// assert_eq!(options.output_limit(), DEFAULT_OUTPUT_LIMIT);
/// assert_eq!(ToolOptions::default().with_output_limit(10).output_limit(), 4096);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOptions {
    output_limit: usize,
    exec_timeout: Duration,
    /// The root's absolute path on the machine, when there is one: an absolute path under it
    /// is taken as the relative path it names.
    absolute_root: Option<String>,
}

impl Default for ToolOptions {
    /// Output limit [`DEFAULT_OUTPUT_LIMIT`] bytes, exec timeout [`DEFAULT_EXEC_TIMEOUT`].
    fn default() -> Self {
        ToolOptions {
            output_limit: DEFAULT_OUTPUT_LIMIT,
            exec_timeout: DEFAULT_EXEC_TIMEOUT,
            absolute_root: None,
        }
    }
}

impl ToolOptions {
    /// Sets the bound on each tool result, in bytes (at least [`MIN_OUTPUT_LIMIT`]; smaller
    /// values are raised to it). See [`DEFAULT_OUTPUT_LIMIT`].
    pub fn with_output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes.max(MIN_OUTPUT_LIMIT);
        self
    }

    /// Lets path arguments name files by their absolute path under `root` (the sandbox
    /// root's real path, as MCP clients and IDEs send them): `/work/proj/src/a.rs` is then
    /// `src/a.rs` for a root `/work/proj`. The rest of the path is checked as any relative
    /// one (`..` above the root is still refused), and an absolute path elsewhere is still
    /// outside the root. [`ContainerSandbox::tools`](crate::ContainerSandbox::tools) sets it.
    pub fn with_absolute_root(mut self, root: impl Into<String>) -> Self {
        let root: String = root.into();
        let trimmed = root.trim_end_matches('/');
        self.absolute_root = (!trimmed.is_empty()).then(|| trimmed.to_string());
        self
    }

    /// Sets the timeout `bash` uses when the model gives none (clamped to
    /// [`MAX_EXEC_TIMEOUT`], at least 1 ms). It appears in the `bash` tool's description.
    pub fn with_exec_timeout(mut self, timeout: Duration) -> Self {
        self.exec_timeout = timeout.clamp(Duration::from_millis(1), MAX_EXEC_TIMEOUT);
        self
    }

    /// The bound on each tool result, in bytes.
    pub fn output_limit(&self) -> usize {
        self.output_limit
    }

    /// The timeout `bash` uses when the model gives none.
    pub fn exec_timeout(&self) -> Duration {
        self.exec_timeout
    }
}

/// The coding tools over `sandbox`, in this order: `read`, `write`, `edit`, `ls`, `glob`,
/// `grep`, and `bash` when [`capabilities().exec`](halo_core::sandbox::Capabilities::exec)
/// is true. Give them to an agent with `HaloAgent::builder(model).tools(...)`.
///
/// Failures the model can act on (a missing file, a path outside the root, an `old_string`
/// that is not unique) are [`ToolError::Failed`] with a message saying what to do; a
/// non-zero exit or a timeout of `bash` is a normal result.
///
/// # Cancel safety
/// Dropping a `bash` call's future kills the command's whole process group (when the
/// sandbox's `exec` is cancel safe, as `ContainerSandbox`'s is).
///
/// ```
/// use std::sync::Arc;
/// use halo_core::SharedSandbox;
/// use halo_sandbox::{ContainerSandbox, ToolOptions};
///
/// let dir = tempfile::tempdir().unwrap();
/// let sandbox: SharedSandbox = Arc::new(ContainerSandbox::new(dir.path()).unwrap());
/// let names: Vec<String> = halo_sandbox::tools(sandbox, ToolOptions::default())
///     .iter()
///     .map(|t| t.spec().name)
///     .collect();
/// assert_eq!(names, ["read", "write", "edit", "ls", "glob", "grep", "bash"]);
/// ```
pub fn tools(sandbox: SharedSandbox, options: ToolOptions) -> Vec<Arc<dyn DynTool>> {
    let ctx = Arc::new(Ctx { sandbox, options });
    let mut tools: Vec<Arc<dyn DynTool>> = vec![
        Arc::new(read::ReadTool::new(Arc::clone(&ctx))),
        Arc::new(write::WriteTool::new(Arc::clone(&ctx))),
        Arc::new(edit::EditTool::new(Arc::clone(&ctx))),
        Arc::new(ls::LsTool::new(Arc::clone(&ctx))),
        Arc::new(glob::GlobTool::new(Arc::clone(&ctx))),
        Arc::new(grep::GrepTool::new(Arc::clone(&ctx))),
    ];
    if ctx.sandbox.capabilities().exec {
        tools.push(Arc::new(bash::BashTool::new(ctx)));
    }
    tools
}

/// What every tool of one set holds.
struct Ctx {
    sandbox: SharedSandbox,
    options: ToolOptions,
}

/// A sandbox error as the failure the model reads (an `is_error` tool result).
fn failed(e: SandboxError) -> ToolError {
    ToolError::Failed(e.to_string())
}

impl Ctx {
    /// Parses a path argument; `None` is the root. An absolute path under
    /// [`ToolOptions::with_absolute_root`]'s root is taken relative to it.
    fn path(&self, arg: Option<&str>) -> Result<SandboxPath, ToolError> {
        let arg = arg.unwrap_or("");
        let relative = match &self.options.absolute_root {
            Some(root) if arg == root => "",
            Some(root) => arg
                .strip_prefix(root.as_str())
                .and_then(|rest| rest.strip_prefix('/'))
                .unwrap_or(arg),
            None => arg,
        };
        SandboxPath::parse(relative).map_err(|e| {
            // An error names the path as the model gave it: parse that one again (an
            // absolute path always fails, as it did before it was shortened).
            if relative == arg {
                failed(e)
            } else {
                failed(SandboxPath::parse(arg).err().unwrap_or(e))
            }
        })
    }
}
