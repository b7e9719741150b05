//! # halo-sandbox
//!
//! Sandboxes for Halo agents, and the coding tool set built on any of them.
//!
//! | item                 | what it is                                                                 |
//! |----------------------|----------------------------------------------------------------------------|
//! | [`ContainerSandbox`] | a real root folder; file operations confined by cap-std, commands by bubblewrap ([`SandboxMode`]) |
//! | [`VirtualSandbox`]   | an in-memory tree with the same path semantics; no commands                 |
//! | [`tools()`]          | the coding tools over any [`Sandbox`](halo_core::Sandbox), with [`ToolOptions`] |
//! | [`policy`]           | safety hooks: a command denylist, approval, permission presets, truncation |
//! | [`harness`]          | rules files, the memory file, Agent Skills (discovery, catalog, `load_skill`, `read_skill_file`, `skill_run`) |
//!
//! The tools, in order (`bash` only where the sandbox runs commands):
//!
//! | tool    | arguments                                                      | returns                                        |
//! |---------|----------------------------------------------------------------|------------------------------------------------|
//! | `read`  | `path`, `offset?` (1-based line), `limit?`                     | lines numbered like `cat -n`                   |
//! | `write` | `path`, `content`                                              | `wrote N bytes to `path``                      |
//! | `edit`  | `path`, `old_string`, `new_string`, `replace_all?`             | a unified diff of the change                   |
//! | `ls`    | `path?`                                                        | sorted entries, folders end with `/`           |
//! | `glob`  | `pattern`, `path?`, `include_ignored?`                         | sorted matching file paths                     |
//! | `grep`  | `pattern`, `path?`, `glob?`, `ignore_case?`, `context?`        | `path:line:text` a matching line               |
//! | `bash`  | `command`, `timeout_secs?`                                     | exit code (or timeout), stdout, stderr         |
//!
//! Every path argument is relative to the sandbox root and validated once
//! ([`SandboxPath`](halo_core::sandbox::SandboxPath)). Refusals, missing files and bad
//! patterns become error tool results the model reads ([`SandboxError`] messages); a failing
//! or timed-out command is reported as data. Every result is bounded (see
//! [`DEFAULT_OUTPUT_LIMIT`] and [`NOTES_MARGIN`]). The security model — what is confined and what is not — is in
//! [`docs/sandbox.md`].
//!
//! [`docs/sandbox.md`]: https://github.com/halo-rs/halo/blob/main/docs/sandbox.md
//!
//! The tools' names, descriptions and JSON Schemas depend only on the [`ToolOptions`] and
//! on whether the sandbox runs commands, never on where the root is or when it runs: they
//! sit in the agent's cached [`StablePrefix`](halo_core::StablePrefix) unchanged across runs
//! and machines.
//!
//! ```
//! use halo_core::{ToolCall, ToolContext, tool::DynTool};
//! use halo_sandbox::ContainerSandbox;
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let tools = ContainerSandbox::new(dir.path()).unwrap().tools();
//! let tool = |name: &str| tools.iter().find(|t| t.spec().name == name).unwrap().clone();
//! // Outside an agent, a call runs with a context of its own.
//! let cx = ToolContext::detached(ToolCall::new("c1", "read", "{}"));
//!
//! let wrote = tool("write").call_json(json!({"path": "notes/a.txt", "content": "hi\nthere\n"}), &cx).await.unwrap();
//! assert_eq!(wrote.content, "wrote 9 bytes to `notes/a.txt`");
//! let read = tool("read").call_json(json!({"path": "notes/a.txt"}), &cx).await.unwrap();
//! assert_eq!(read.content, "     1\thi\n     2\tthere");
//! let edited = tool("edit")
//!     .call_json(json!({"path": "notes/a.txt", "old_string": "there", "new_string": "you"}), &cx)
//!     .await
//!     .unwrap();
//! assert_eq!(
//!     edited.content,
//!     "replaced 1 occurrence in `notes/a.txt`\n--- a/notes/a.txt\n+++ b/notes/a.txt\n\
//!      @@ -1,2 +1,2 @@\n hi\n-there\n+you"
//! );
//! let refused = tool("read").call_json(json!({"path": "../secret"}), &cx).await.unwrap_err();
//! assert_eq!(
//!     refused.to_string(),
//!     "path `../secret` is outside the sandbox root; use a path relative to the root"
//! );
//! # });
//! ```

mod container;
pub mod harness;
mod memory;
pub mod policy;
mod protect;
mod search;
mod text;
mod tools;

pub use container::{ContainerSandbox, DEFAULT_ENV_ALLOWLIST, ExecLimits, Limit, SandboxMode};
pub use halo_core::sandbox::SandboxError;
pub use memory::{MAX_SYMLINK_FOLLOWS, VirtualSandbox};
pub use protect::{PROTECTED_NAMES, PROTECTED_PATHS};
pub use tools::{
    DEFAULT_EXEC_TIMEOUT, DEFAULT_OUTPUT_LIMIT, DEFAULT_READ_LINES, MAX_EXEC_TIMEOUT,
    MAX_GREP_CONTEXT, MAX_LINE_BYTES, MAX_OPEN_FILE_BYTES, MAX_READ_FILE_BYTES, MAX_RESULTS,
    MAX_SEARCH_LINE_BYTES, MIN_OUTPUT_LIMIT, NOTES_MARGIN, ToolOptions, tools,
};
