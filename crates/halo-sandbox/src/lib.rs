//! # halo-sandbox
//!
//! Sandboxes whose tools join a Halo agent's stable prefix.
//!
//! [`ContainerSandbox`] wraps a real root folder and offers six tools to an agent:
//!
//! | tool    | arguments                                   | returns                                  |
//! |---------|---------------------------------------------|------------------------------------------|
//! | `read`  | `path`, `offset?` (1-based line), `limit?`  | lines numbered like `cat -n`             |
//! | `write` | `path`, `content`                           | `wrote N bytes to `path``                |
//! | `ls`    | `path?`                                     | sorted entries, folders end with `/`     |
//! | `glob`  | `pattern`, `path?`                          | sorted matching file paths               |
//! | `grep`  | `pattern`, `path?`, `glob?`, `ignore_case?` | `path:line:text` a match                 |
//! | `bash`  | `command`, `timeout_secs?`                  | exit code (or timeout), stdout, stderr   |
//!
//! Every path argument is relative to the root. The file tools go through a
//! [`cap_std::fs::Dir`] capability for the root, which refuses absolute paths, `..` above
//! the root and symbolic links leading out of it; the walks of `glob` and `grep` never
//! follow links. Refusals, missing files and bad patterns become error tool results the
//! model reads ([`SandboxError`] messages); a failing or timed-out command is reported as
//! data. Every result is bounded (see [`DEFAULT_OUTPUT_LIMIT`]).
//!
//! The tools' names, descriptions and JSON Schemas depend only on the sandbox's options,
//! never on where the root is or when it runs: they sit in the agent's cached
//! [`StablePrefix`](halo_core::StablePrefix) unchanged across runs and machines.
//!
//! ```
//! use halo_core::tool::DynTool;
//! use halo_sandbox::ContainerSandbox;
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let tools = ContainerSandbox::new(dir.path()).unwrap().tools();
//! let tool = |name: &str| tools.iter().find(|t| t.spec().name == name).unwrap().clone();
//!
//! let wrote = tool("write").call_json(json!({"path": "notes/a.txt", "content": "hi\nthere\n"})).await.unwrap();
//! assert_eq!(wrote.content, "wrote 9 bytes to `notes/a.txt`");
//! let read = tool("read").call_json(json!({"path": "notes/a.txt"})).await.unwrap();
//! assert_eq!(read.content, "     1\thi\n     2\tthere");
//! let refused = tool("read").call_json(json!({"path": "../secret"})).await.unwrap_err();
//! assert_eq!(
//!     refused.to_string(),
//!     "path `../secret` is outside the sandbox root; use a path relative to the root"
//! );
//! # });
//! ```

mod error;
pub mod policy;
mod sandbox;
mod text;
mod tools;

pub use error::SandboxError;
pub use sandbox::{
    ContainerSandbox, DEFAULT_ENV_ALLOWLIST, DEFAULT_EXEC_TIMEOUT, DEFAULT_OUTPUT_LIMIT,
    DEFAULT_READ_LINES, MAX_EXEC_TIMEOUT, MAX_LINE_BYTES, MAX_READ_FILE_BYTES, MAX_RESULTS,
    MIN_OUTPUT_LIMIT,
};
