//! The quickstart as README.md shows it: the README's code is `src/main.rs`, and the binary
//! prints the run the README promises (tool call, tool result, streamed answer, stats line).

use std::process::Command;

/// The heading of the README section that shows `src/main.rs`.
const SECTION: &str = "## Use Halo in your crate";

/// The first ```rust block after `SECTION` in README.md.
fn readme_code() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md at the workspace root is readable");
    let section = readme
        .find(SECTION)
        .map(|i| &readme[i..])
        .unwrap_or_else(|| panic!("README.md has no `{SECTION}` section"));
    let start = section
        .find("```rust\n")
        .unwrap_or_else(|| panic!("README.md's `{SECTION}` section has no ```rust block"));
    let code = &section[start + "```rust\n".len()..];
    let end = code.find("```").expect("the ```rust block is closed");
    code[..end].to_string()
}

#[test]
fn readme_shows_exactly_src_main_rs() {
    let main = include_str!("../src/main.rs");
    let shown: Vec<&str> = main
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .collect();
    assert_eq!(
        readme_code().trim_end(),
        shown.join("\n").trim_end(),
        "README.md's quickstart differs from examples/quickstart/src/main.rs (less its //! \
         header); make them equal"
    );
}

#[test]
fn the_run_prints_the_tool_round_the_answer_and_the_stats() {
    let out = Command::new(env!("CARGO_BIN_EXE_quickstart"))
        .output()
        .expect("the quickstart binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "quickstart failed: {stderr}");
    let stdout = String::from_utf8(out.stdout).expect("the output is UTF-8");
    // The simulator's port is picked at run time.
    let (first, rest) = stdout.split_once('\n').expect("more than one line");
    let port = first
        .strip_prefix("model: http://127.0.0.1:")
        .and_then(|r| r.strip_suffix("/v1/chat/completions"))
        .unwrap_or_else(|| panic!("unexpected first line `{first}`"));
    assert!(port.parse::<u16>().is_ok(), "not a port: `{port}`");
    // Token counts are o200k_base tokens of the fixed requests, so they are exact.
    assert_eq!(
        rest,
        "user: What is the weather in Oslo?\n\
         tool call: weather {\"city\":\"Oslo\"}\n\
         tool result: Oslo: snow, -3 °C\n\
         assistant: It is snowing in Oslo, at -3 °C.\n\
         stats: 2 steps, 1 tool call, 256 input tokens, 131 cached (51.2 % hit), 29 output tokens\n"
    );
}
