//! The fake coding tools, answering from this repository's real files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use halo_core::{DynTool, ToolContext, ToolError, ToolOutput, ToolSpec};
use serde_json::{Value, json};

use crate::session::MAX_OUTPUT_BYTES;

/// The repository the fake tools answer from.
pub(crate) struct Workspace {
    pub(crate) root: PathBuf,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Read,
    Grep,
    Bash,
    Edit,
}

/// A local fake of a coding agent's tool, answering from the repository's files.
pub(crate) struct FakeTool {
    pub(crate) kind: Kind,
    pub(crate) workspace: Arc<Workspace>,
}

#[async_trait]
impl DynTool for FakeTool {
    fn spec(&self) -> ToolSpec {
        match self.kind {
            Kind::Read => ToolSpec::new("read", READ_DESCRIPTION, read_schema()),
            Kind::Grep => ToolSpec::new("grep", GREP_DESCRIPTION, grep_schema()),
            Kind::Bash => ToolSpec::new("bash", BASH_DESCRIPTION, bash_schema()),
            Kind::Edit => ToolSpec::new("edit", EDIT_DESCRIPTION, edit_schema()),
        }
    }

    async fn call_json(
        &self,
        arguments: Value,
        _cx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let ws = &self.workspace;
        let out = match self.kind {
            Kind::Read => ws.read(&arguments),
            Kind::Grep => ws.grep(&arguments),
            Kind::Bash => ws.bash(&arguments),
            Kind::Edit => ToolOutput::error(
                "this session is read-only: describe the change in your answer instead",
            ),
        };
        Ok(out)
    }
}

/// `s` cut to at most `max` bytes on a character boundary, with a note when cut.
pub(crate) fn cap(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    pub(crate) const NOTE: &str = "\n[output truncated]";
    let mut end = max - NOTE.len();
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str(NOTE);
    s
}

pub(crate) fn str_arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

impl Workspace {
    /// `read`: lines `offset..offset+limit` (1-based) numbered like `cat -n`.
    pub(crate) fn read(&self, args: &Value) -> ToolOutput {
        let path = str_arg(args, "path");
        let offset = args
            .get("offset")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .max(1) as usize;
        let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(2000) as usize;
        let Ok(text) = std::fs::read_to_string(self.root.join(path)) else {
            return ToolOutput::error(format!(
                "no such file: {path}; use grep or `bash ls -l DIR` to find files"
            ));
        };
        let mut out = String::new();
        for (i, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
            let _ = writeln!(out, "{:>6}\t{line}", i + 1);
        }
        if out.is_empty() {
            out = format!(
                "{path} has {} lines; offset {offset} is past the end",
                text.lines().count()
            );
        }
        ToolOutput::text(cap(out, MAX_OUTPUT_BYTES))
    }

    /// `grep`: literal matches in `.rs`, `.md` and `.toml` files under `path`, as
    /// `path:line:text`, in path order.
    pub(crate) fn grep(&self, args: &Value) -> ToolOutput {
        let pattern = str_arg(args, "pattern");
        let under = match str_arg(args, "path") {
            "" => ".",
            p => p,
        };
        if pattern.is_empty() {
            return ToolOutput::error("pattern is empty; give the text to search for");
        }
        let mut files = Vec::new();
        collect_files(&self.root.join(under), &mut files);
        let mut out = String::new();
        let mut matches = 0;
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let rel = file
                .strip_prefix(&self.root)
                .unwrap_or(&file)
                .display()
                .to_string();
            for (i, line) in text.lines().enumerate() {
                if line.contains(pattern) && matches < 80 {
                    matches += 1;
                    let line: String = line.trim_end().chars().take(160).collect();
                    let _ = writeln!(out, "{rel}:{}:{line}", i + 1);
                }
            }
        }
        if matches == 0 {
            return ToolOutput::text(format!("No matches for `{pattern}` under {under}."));
        }
        ToolOutput::text(cap(out, MAX_OUTPUT_BYTES))
    }

    /// `bash`: the few commands the session runs, answered from the repository.
    pub(crate) fn bash(&self, args: &Value) -> ToolOutput {
        let command = str_arg(args, "command");
        let words: Vec<&str> = command.split_whitespace().collect();
        let out = match words.as_slice() {
            ["ls", "-l", dir] => self.ls(dir),
            ["wc", "-l", pattern] => self.wc(pattern),
            ["cargo", "test", "-p", krate, "--test", "it", rest @ ..] => {
                self.cargo_test(krate, rest.first().copied().unwrap_or(""))
            }
            ["cargo", "clippy", "-p", krate, ..] => format!(
                "    Checking halo-core v0.1.0 (/work/halo/crates/halo-core)\n    Checking {krate} v0.1.0 (/work/halo/crates/{krate})\n    Finished `dev` profile [unoptimized + debuginfo] target(s) in 7.31s\n"
            ),
            ["git", "log", ..] => GIT_LOG.to_string(),
            _ => {
                return ToolOutput::error(format!(
                    "`{command}` is not available in this session; use ls -l, wc -l, cargo test, cargo clippy or git log"
                ));
            }
        };
        ToolOutput::text(cap(out, MAX_OUTPUT_BYTES))
    }

    pub(crate) fn ls(&self, dir: &str) -> String {
        let mut entries: Vec<(String, u64, bool)> = std::fs::read_dir(self.root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((
                    e.file_name().to_string_lossy().into_owned(),
                    meta.len(),
                    meta.is_dir(),
                ))
            })
            .collect();
        entries.sort();
        let mut out = format!("total {}\n", entries.len());
        for (name, len, is_dir) in entries {
            let mode = if is_dir { "drwxr-xr-x" } else { "-rw-r--r--" };
            let _ = writeln!(out, "{mode} 1 dev dev {len:>8} Mar  2 09:00 {name}");
        }
        out
    }

    /// `wc -l DIR/*.EXT`.
    pub(crate) fn wc(&self, pattern: &str) -> String {
        let (dir, ext) = pattern.rsplit_once("/*.").unwrap_or((pattern, "rs"));
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        files.sort();
        let mut total = 0;
        let mut out = String::new();
        for file in files {
            let lines = std::fs::read_to_string(&file)
                .map(|t| t.lines().count())
                .unwrap_or(0);
            total += lines;
            let rel = file
                .strip_prefix(&self.root)
                .unwrap_or(&file)
                .display()
                .to_string();
            let _ = writeln!(out, "{lines:>6} {rel}");
        }
        let _ = writeln!(out, "{total:>6} total");
        out
    }

    /// `cargo test -p CRATE --test it FILTER`: the crate's integration tests whose path
    /// contains the filter, all passing.
    pub(crate) fn cargo_test(&self, krate: &str, filter: &str) -> String {
        let dir = self.root.join("crates").join(krate).join("tests/it");
        let mut files = Vec::new();
        collect_files(&dir, &mut files);
        let mut names = Vec::new();
        for file in files {
            let module = file
                .strip_prefix(&dir)
                .unwrap_or(&file)
                .with_extension("")
                .display()
                .to_string()
                .replace('/', "::");
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let mut is_test = false;
            for line in text.lines() {
                let line = line.trim();
                if line.starts_with("#[test]") || line.starts_with("#[tokio::test") {
                    is_test = true;
                } else if is_test
                    && let Some(rest) = line.strip_prefix("fn ").or(line.strip_prefix("async fn "))
                {
                    let name = rest.split('(').next().unwrap_or(rest);
                    let full = format!("{module}::{name}");
                    if full.contains(filter) {
                        names.push(full);
                    }
                    is_test = false;
                }
            }
        }
        let mut out = format!(
            "    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.41s\n     Running tests/it/main.rs (target/debug/deps/it-5f2c9a1e7b3d8c04)\n\nrunning {} tests\n",
            names.len()
        );
        for name in &names {
            let _ = writeln!(out, "test {name} ... ok");
        }
        let _ = writeln!(
            out,
            "\ntest result: ok. {} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.42s",
            names.len()
        );
        out
    }
}

/// Files under `dir` (`.rs`, `.md`, `.toml`), sorted, skipping `target`, `node_modules` and
/// hidden folders.
pub(crate) fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                collect_files(&path, out);
            }
        } else if path
            .extension()
            .is_some_and(|e| e == "rs" || e == "md" || e == "toml")
        {
            out.push(path);
        }
    }
}

pub(crate) const READ_DESCRIPTION: &str = "Reads a text file of the repository and returns its lines numbered like \
`cat -n` (line number, a tab, the line). Paths are relative to the repository root. By default up to 2000 \
lines from the start are returned; use `offset` (1-based first line) and `limit` (number of lines) to read a \
part of a large file. Output over 8,000 bytes is cut and marked `[output truncated]`. Reading a missing file \
returns an error that says how to find files.";

pub(crate) const GREP_DESCRIPTION: &str = "Searches the repository's `.rs`, `.md` and `.toml` files for a literal \
string (not a regular expression; case-sensitive) and returns matching lines as `path:line:text`, in path \
order, at most 80 matches. `path` limits the search to a folder or a single file (default: the whole \
repository). Lines longer than 160 characters are cut. Use it to find definitions and uses before reading.";

pub(crate) const BASH_DESCRIPTION: &str = "Runs a shell command in the repository root and returns its output. \
Available: `ls -l DIR`, `wc -l DIR/*.EXT`, `cargo test -p CRATE --test it [FILTER]`, `cargo clippy -p CRATE`, \
`git log --oneline -n N`. Other commands return an error. Output over 8,000 bytes is cut. There is no network \
and no write access.";

pub(crate) const EDIT_DESCRIPTION: &str = "Replaces exactly one occurrence of `old_string` with `new_string` in a file. \
`old_string` must match the file's text exactly, including whitespace, and must occur once; include enough \
context to make it unique. Use `replace_all` to change every occurrence. Refused in read-only sessions.";

pub(crate) fn read_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the repository root, e.g. `crates/halo-core/src/agent.rs`."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to return, 1-based (default 1)."},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to return (default 2000)."}
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

pub(crate) fn grep_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The literal text to find (case-sensitive)."},
            "path": {"type": "string", "description": "A folder or file to search, relative to the repository root (default: everything)."}
        },
        "required": ["pattern"],
        "additionalProperties": false
    })
}

pub(crate) fn bash_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run in the repository root."},
            "timeout_ms": {"type": "integer", "minimum": 1000, "maximum": 600000, "description": "Time limit in milliseconds (default 120000)."}
        },
        "required": ["command"],
        "additionalProperties": false
    })
}

pub(crate) fn edit_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path relative to the repository root."},
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The replacement text."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": false
    })
}

pub(crate) const GIT_LOG: &str = "\
bf30ef3 Fixes from a fresh-clone trial: redact the API key before cutting error excerpts
218089c halo-adapters openai: first_event_timeout bounds the wait for a stream's first event
3b33278 xtask ci runs interop (ai npm client and headless Chromium) before nextest
636ddee xtask interop: run npm ci again when a lock file is newer than what node_modules holds
1592c4b cargo xtask bench sse: decode throughput of the SSE layer + chunk assembly
3724d18 Enable reqwest's stream feature (bytes_stream for the SSE layer) and lock sseer
335bd4e halo-adapters: streaming for the OpenAI-compatible adapter over a shared SSE layer
c926ea3 halo-stream: agent runs as the AI SDK UI Message Stream (v1)
099e9d2 ARCHITECTURE: the streaming run loop and its invariants
bcb3207 examples/coder streams through stream_text
067cff1 LocalAdapter streams: answer text token by token through ModelStreamEvent
d293c0a halo-core streaming: ModelAdapter::stream (default from generate), ModelStreamEvent
385ae2d halo-core: test the GenAI tracing spans and attributes
52645aa docs: cache-first requests and the embedded model
60ad532 Demo on the embedded model: CallThenAnswer, read-only tools and two worked examples
";
