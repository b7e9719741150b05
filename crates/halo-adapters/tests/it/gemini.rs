//! Gemini adapter: request bodies pinned in `tests/data/gemini/*.json` (blessed with
//! `UPDATE_EXPECT=1`), the schema sanitizer on real tool schemas, streaming and errors over
//! wiremock fakes of the real wire shapes, and the `cachedContents` lifecycle and agent
//! runs over [`GeminiSim`](halo_adapters::sim::gemini::GeminiSim).

mod cache;
mod errors;
mod request;
mod stream;

use std::path::PathBuf;

use halo_adapters::gemini::{GeminiAdapter, GeminiBuilder};
use halo_core::tool::{NoArgs, Tool, ToolError, ToolOutput, schema_for};
use halo_core::{GenerationOptions, Message, ModelRequest, StablePrefix, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// A fake API key; every test checks it never shows up where it should not.
pub const KEY: &str = "AIzaSy-test-0123456789-SECRET";

/// A builder on `base_url` with the test key and no retries.
pub fn builder(base_url: &str) -> GeminiBuilder {
    GeminiAdapter::builder()
        .api_key(KEY)
        .base_url(base_url)
        .max_retries(0)
}

/// Lines a range of a file.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadArgs {
    /// The file's path, relative to the workspace.
    pub path: String,
    /// The first line (1-based); the whole file when absent.
    pub start: Option<u32>,
    /// How to show the lines.
    pub mode: Mode,
}

/// How to show lines.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// As they are.
    Plain,
    /// With line numbers.
    Numbered,
}

/// `read_file`: returns a fixed text, sized by the path.
pub struct ReadFile;

impl Tool for ReadFile {
    type Args = ReadArgs;
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Reads a text file of the workspace."
    }
    async fn call(&self, args: ReadArgs) -> Result<ToolOutput, ToolError> {
        let numbered = matches!(args.mode, Mode::Numbered);
        let first = args.start.unwrap_or(1);
        let line = format!("fn main() {{ println!(\"{}\"); }}", args.path);
        Ok(if numbered {
            format!("{first} {line}")
        } else {
            line
        }
        .into())
    }
}

/// `list_dir`: no arguments.
pub struct ListDir;

impl Tool for ListDir {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "list_dir"
    }
    fn description(&self) -> &str {
        "Lists the workspace's top folder."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("README.md\nsrc/".into())
    }
}

pub fn read_file_spec() -> ToolSpec {
    ToolSpec::new(
        "read_file",
        "Reads a text file of the workspace.",
        schema_for::<ReadArgs>(),
    )
}

pub fn list_dir_spec() -> ToolSpec {
    ToolSpec::new(
        "list_dir",
        "Lists the workspace's top folder.",
        schema_for::<NoArgs>(),
    )
}

/// A system prompt of about 9 KB (some 2,000 `o200k_base` tokens): well above
/// Gemini 2.5 Flash's 1,024-token minimum by the adapter's estimate (bytes / 4) and the
/// simulator's count alike.
pub fn big_system() -> String {
    let mut s = String::from("You are a careful coding agent working in a small Rust workspace.\n");
    for n in 1..=90 {
        s.push_str(&format!(
            "Rule {n}: before editing file number {n}, read it, keep its style, and mention the path you changed.\n"
        ));
    }
    s
}

/// A request over `prefix` and `history` with `options`.
pub fn request<'a>(
    prefix: &'a StablePrefix,
    history: &'a [Message],
    options: &'a GenerationOptions,
) -> ModelRequest<'a> {
    ModelRequest::new(prefix, history, options)
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/gemini")
}

/// Compares `body` (compact JSON bytes) with `tests/data/gemini/<name>.json`, shown
/// indented with the key order kept; `UPDATE_EXPECT=1` rewrites the file.
pub fn assert_snapshot(name: &str, body: &[u8]) {
    let actual = pretty(body);
    let path = data_dir().join(format!("{name}.json"));
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::create_dir_all(data_dir()).expect("create the data dir");
        std::fs::write(&path, &actual).expect("write the snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with UPDATE_EXPECT=1", path.display()));
    assert!(
        actual == expected,
        "{name}: the body differs from {}\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

/// Indents compact JSON two spaces per level, keeping every byte of its keys and strings
/// (so the key order of the wire is what the snapshot shows).
pub fn pretty(compact: &[u8]) -> String {
    let text = std::str::from_utf8(compact).expect("JSON is UTF-8");
    let mut out = String::with_capacity(text.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = text.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                let close = if c == '{' { '}' } else { ']' };
                if chars.peek() == Some(&close) {
                    out.push(chars.next().expect("peeked"));
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c => out.push(c),
        }
    }
    out.push('\n');
    out
}

/// The body bytes parsed.
pub fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("the body is JSON")
}

#[test]
fn pretty_keeps_order_and_strings() {
    let s = pretty(br#"{"b":[1,{"a":"x,{y}:\"z\""}],"a":{},"c":[]}"#);
    assert_eq!(
        s,
        "{\n  \"b\": [\n    1,\n    {\n      \"a\": \"x,{y}:\\\"z\\\"\"\n    }\n  ],\n  \"a\": {},\n  \"c\": []\n}\n"
    );
}
