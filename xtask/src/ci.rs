//! `cargo xtask ci`: the single CI recipe, run by `.ci/run` and `.github/workflows/ci.yml`.
//!
//! tidy → fmt check → clippy `-D warnings` (all targets, all features) → doctests →
//! interop (the `ai` npm package, headless Chromium, MCP servers and clients, the skills
//! validator and an OTLP receiver read Halo's bytes) → the Restate server from npm (the
//! durable-run tests start it) → tests (nextest when present; last, so its summary is the
//! run's closing test line; the Rust tests that read what interop's peers left run here,
//! once) → `cargo doc` with `-D warnings`. The embedded-model tests need its build
//! prerequisites and the model file, so those are set up first.
//!
//! Everything after clippy builds with one feature set (`--workspace --all-features`), so
//! each crate is compiled once for the doctests, interop's binaries and the tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::{root, run_cmd};

/// halo-core's package name: `halo-core` on crates.io is an unrelated crate. Its directory,
/// its library (`halo_core`) and its workspace dependency key keep the design's name.
pub const CORE_PACKAGE: &str = "halo-agent-core";

/// Halo crates that may depend on halo-core and on no other Halo crate.
const LEAF_CRATES: &[&str] = &[
    "halo-adapters",
    "halo-sandbox",
    "halo-mcp",
    "halo-stream",
    "halo-strategies",
];

/// The only normal dependencies halo-core may have: none of them does IO.
const CORE_ALLOWED_DEPS: &[&str] = &[
    "serde",
    "serde_json",
    "thiserror",
    "schemars",
    "jsonschema",
    "sha2",
    "xxhash-rust",
    "smol_str",
    "tracing",
    "futures",
    "async-stream",
    "async-trait",
];

/// Crates that must never appear in halo-core's normal dependency graph.
const CORE_FORBIDDEN_TRANSITIVE: &[&str] = &[
    "tokio",
    "reqwest",
    "hyper",
    "rmcp",
    "llama-cpp-2",
    "llama-cpp-sys-2",
    "cap-std",
    "mio",
    "async-std",
];

pub fn run() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    step("tidy", tidy)?;
    step("fmt", || {
        run_cmd(Command::new("cargo").args(["fmt", "--all", "--", "--check"]))
    })?;
    step(
        "prerequisites of the embedded model, the OS sandbox of bash, the tests and the session stores",
        || {
            crate::prereqs::ensure()
                .and_then(|()| crate::prereqs::ensure_sandbox())
                .and_then(|()| crate::prereqs::ensure_tests())
                .and_then(|()| crate::prereqs::ensure_servers())
        },
    )?;
    step("clippy", || {
        run_cmd(Command::new("cargo").args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    step("model file for the embedded-model tests", || {
        let path = crate::model::ensure_model()?;
        eprintln!("model: {}", path.display());
        Ok(())
    })?;
    step("doctests", || {
        run_cmd(Command::new("cargo").args(["test", "--workspace", "--all-features", "--doc"]))
    })?;
    let mut peers = Vec::new();
    step(
        "interop: the ai npm client, headless Chromium, MCP peers, the skills validator and an OTLP receiver",
        || {
            peers = crate::interop::peers()?.env;
            Ok(())
        },
    )?;
    let mut restate = PathBuf::new();
    step("the Restate server for the durable-run tests (npm)", || {
        restate = crate::restate::ensure()?;
        eprintln!("restate-server: {}", restate.display());
        Ok(())
    })?;
    step("tests", || {
        // Named, the server is required: a durable-run test fails rather than skips.
        if has_nextest() {
            run_cmd(
                Command::new("cargo")
                    .args([
                        "nextest",
                        "run",
                        "--workspace",
                        "--all-features",
                        "--no-fail-fast",
                    ])
                    .envs(peers.iter().map(|(k, v)| (k, v)))
                    .env("HALO_RESTATE_SERVER", &restate),
            )
        } else {
            eprintln!("skip: cargo-nextest not installed; using cargo test");
            run_cmd(
                Command::new("cargo")
                    .args([
                        "test",
                        "--workspace",
                        "--all-features",
                        "--lib",
                        "--bins",
                        "--tests",
                    ])
                    .envs(peers.iter().map(|(k, v)| (k, v)))
                    .env("HALO_RESTATE_SERVER", &restate),
            )
        }
    })?;
    step("docs", || {
        run_cmd(
            Command::new("cargo")
                .args(["doc", "--workspace", "--all-features", "--no-deps"])
                .env("RUSTDOCFLAGS", "-D warnings"),
        )
    })?;
    eprintln!(
        "\nxtask ci: all checks passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn step(name: &str, f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    eprintln!("\n==> {name}");
    let t = std::time::Instant::now();
    f().with_context(|| format!("ci step `{name}` failed"))?;
    eprintln!("<== {name}: ok ({:.1} s)", t.elapsed().as_secs_f64());
    Ok(())
}

/// Whether `cargo nextest` runs here.
pub(crate) fn has_nextest() -> bool {
    Command::new("cargo")
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Checks the rules no compiler checks: file headers, no debugging leftovers, workspace
/// dependencies, and the dependency layering of the crates.
pub fn tidy() -> anyhow::Result<()> {
    let root = root();
    let mut problems = Vec::new();

    let mut rs_files = Vec::new();
    for dir in ["crates", "xtask", "examples"] {
        collect_rs(&root.join(dir), &mut rs_files);
    }
    if rs_files.len() < 10 {
        bail!(
            "tidy found only {} .rs files; is it running in the workspace root?",
            rs_files.len()
        );
    }
    for f in &rs_files {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let rel = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        if !text.trim_start().starts_with("//!") {
            problems.push(format!(
                "{rel}: file does not open with a `//!` doc comment"
            ));
        }
        let in_src = rel.contains("/src/");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            // Spelled in pieces so this file does not flag itself.
            for bad in [
                concat!("dbg", "!("),
                concat!("todo", "!("),
                concat!("unimplemented", "!("),
            ] {
                if in_src && code.contains(bad) {
                    problems.push(format!("{rel}:{}: `{bad}` left in source", i + 1));
                }
            }
        }
        if rel.starts_with("crates/halo-core/src/") {
            for (i, line) in text.lines().enumerate() {
                for io in [
                    "std::fs",
                    "std::net",
                    "std::process",
                    "tokio::",
                    "std::env::var",
                ] {
                    if line.contains(io) {
                        problems.push(format!(
                            "{rel}:{}: halo-core does no IO, but uses `{io}`",
                            i + 1
                        ));
                    }
                }
            }
        }
    }

    // Internal dependencies go through [workspace.dependencies].
    let mut manifests = Vec::new();
    for dir in ["crates", "examples"] {
        if let Ok(rd) = std::fs::read_dir(root.join(dir)) {
            for e in rd.flatten() {
                let m = e.path().join("Cargo.toml");
                if m.exists() {
                    manifests.push(m);
                }
            }
        }
    }
    manifests.push(root.join("xtask/Cargo.toml"));
    for m in &manifests {
        let text = std::fs::read_to_string(m)?;
        let doc: toml::Table = text
            .parse()
            .with_context(|| format!("parsing {}", m.display()))?;
        let rel = m.strip_prefix(&root).unwrap_or(m).display().to_string();
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = doc.get(section).and_then(|d| d.as_table()) else {
                continue;
            };
            for (name, spec) in deps {
                let via_workspace = spec.get("workspace").and_then(|w| w.as_bool()) == Some(true);
                let self_dep = spec.get("path").and_then(|p| p.as_str()) == Some(".");
                if name.starts_with("halo-") && !via_workspace && !self_dep {
                    problems.push(format!(
                        "{rel}: [{section}] {name} must use `workspace = true`"
                    ));
                }
            }
        }
    }

    problems.extend(check_readme_example(&root));

    // Layering, from cargo metadata (the resolved, feature-unified graph).
    let out = Command::new("cargo")
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(&root)
        .output()
        .or_else(|_| {
            Command::new("cargo")
                .args(["metadata", "--format-version", "1"])
                .current_dir(&root)
                .output()
        })?;
    let meta: Value = if out.status.success() {
        serde_json::from_slice(&out.stdout)?
    } else {
        let out = Command::new("cargo")
            .args(["metadata", "--format-version", "1"])
            .current_dir(&root)
            .output()?;
        if !out.status.success() {
            bail!(
                "cargo metadata failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        serde_json::from_slice(&out.stdout)?
    };
    problems.extend(check_layering(&meta));

    if problems.is_empty() {
        eprintln!(
            "tidy: {} source files and {} manifests checked; ok",
            rs_files.len(),
            manifests.len()
        );
        Ok(())
    } else {
        for p in &problems {
            eprintln!("tidy: {p}");
        }
        bail!("tidy found {} problem(s)", problems.len())
    }
}

fn check_layering(meta: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let empty = Vec::new();
    let packages = meta["packages"].as_array().unwrap_or(&empty);
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for p in packages
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(id)))
    {
        let name = p["name"].as_str().unwrap_or("");
        let deps = p["dependencies"].as_array().unwrap_or(&empty);
        let halo_deps: Vec<&str> = deps
            .iter()
            .filter_map(|d| d["name"].as_str())
            .filter(|d| d.starts_with("halo-") && *d != name)
            .collect();
        if LEAF_CRATES.contains(&name) {
            for d in &halo_deps {
                if *d != CORE_PACKAGE {
                    problems.push(format!(
                        "{name} depends on {d}; leaf crates depend only on halo-core"
                    ));
                }
            }
        }
        if name == "xtask" {
            for d in &halo_deps {
                problems.push(format!(
                    "xtask depends on {d}; it depends on no Halo crate (run what needs one as an \
                     example with `cargo run --example`), so a broken crate cannot break CI's \
                     entry point"
                ));
            }
        }
        if name == CORE_PACKAGE {
            for d in &halo_deps {
                problems.push(format!(
                    "halo-core depends on {d}; it must depend on no other Halo crate"
                ));
            }
            for d in deps.iter().filter(|d| d["kind"].is_null()) {
                let dn = d["name"].as_str().unwrap_or("");
                if !CORE_ALLOWED_DEPS.contains(&dn) {
                    problems.push(format!(
                        "halo-core depends on `{dn}`, which is not on its allowlist (no IO in core)"
                    ));
                }
            }
        }
    }

    // Transitive: walk halo-core's normal dependencies in the resolved graph.
    let nodes: BTreeMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter_map(|n| n["id"].as_str().map(|id| (id, n)))
        .collect();
    let name_of: BTreeMap<&str, &str> = packages
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
        .collect();
    let Some(core_id) = name_of
        .iter()
        .find(|(_, n)| **n == CORE_PACKAGE)
        .map(|(id, _)| *id)
    else {
        problems.push(format!(
            "{CORE_PACKAGE} (halo-core) not found in cargo metadata"
        ));
        return problems;
    };
    let mut seen = BTreeSet::new();
    let mut stack = vec![core_id];
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let Some(node) = nodes.get(id) else { continue };
        for dep in node["deps"].as_array().unwrap_or(&empty) {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .any(|k| k["kind"].is_null());
            if normal && let Some(pkg) = dep["pkg"].as_str() {
                stack.push(pkg);
            }
        }
    }
    for id in seen {
        let n = name_of.get(id).copied().unwrap_or("");
        if CORE_FORBIDDEN_TRANSITIVE.contains(&n) {
            problems.push(format!(
                "halo-core's dependency graph contains `{n}`, which does IO"
            ));
        }
    }
    problems
}

/// README.md's code examples, each exactly a file that clippy compiles (less its `//!`
/// header): the README cannot show code that does not build. Each is the first
/// ```` ```rust,ignore ```` block after its heading (`""` = from the top).
const README_EXAMPLES: &[(&str, &str)] = &[
    ("", "examples/coder/examples/readme.rs"),
    (
        "## Agents as a web service",
        "examples/web-chat/examples/readme_gateway.rs",
    ),
];

fn check_readme_example(root: &Path) -> Vec<String> {
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap_or_default();
    README_EXAMPLES
        .iter()
        .filter_map(|(heading, file)| {
            let example = std::fs::read_to_string(root.join(file)).unwrap_or_default();
            readme_example_differs(&readme, heading, &example, file)
        })
        .collect()
}

/// Why the block after `heading` in `readme` is not `example` (minus its header), if it is not.
fn readme_example_differs(
    readme: &str,
    heading: &str,
    example: &str,
    file: &str,
) -> Option<String> {
    let Some(after) = readme.find(heading).map(|at| &readme[at..]) else {
        return Some(format!(
            "README.md: no heading {heading:?} (the example of {file})"
        ));
    };
    let Some(start) = after.find("```rust,ignore\n") else {
        return Some(format!("README.md: no ```rust,ignore block for {file}"));
    };
    let body = &after[start + "```rust,ignore\n".len()..];
    let Some(end) = body.find("```") else {
        return Some(format!("README.md: the code block of {file} is not closed"));
    };
    let shown = body[..end].trim();
    let compiled: String = example
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    (shown != compiled.trim())
        .then(|| format!("README.md shows an example that differs from {file}; make them equal"))
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if p.is_dir() {
            if name != "target" && name != "node_modules" && !name.starts_with('.') {
                collect_rs(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::readme_example_differs;

    const README: &str =
        "# T\n```rust,ignore\nfn a() {}\n```\n## Web\ntext\n```rust,ignore\nfn b() {}\n```\n";

    #[test]
    fn each_readme_example_is_the_block_after_its_heading() {
        let a = "//! header\n\nfn a() {}\n";
        let b = "//! header\n\nfn b() {}\n";
        assert_eq!(readme_example_differs(README, "", a, "a.rs"), None);
        assert_eq!(readme_example_differs(README, "## Web", b, "b.rs"), None);
        assert!(
            readme_example_differs(README, "## Web", a, "a.rs")
                .is_some_and(|why| why.contains("differs from a.rs"))
        );
        assert!(
            readme_example_differs(README, "## Missing", b, "b.rs")
                .is_some_and(|why| why.contains("no heading"))
        );
    }
}
