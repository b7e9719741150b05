//! `cargo xtask release`: everything a release checks, short of publishing.
//!
//! 1. The work tree is clean (`--allow-dirty` skips this), so what is packaged is a commit.
//! 2. Every publishable crate has the workspace version, a description, a license and a
//!    repository, and depends on the other Halo crates at exactly that version.
//! 3. `CHANGELOG.md` has a section for the version, with something in it.
//! 4. `cargo publish --dry-run` packages and builds every publishable crate, in dependency
//!    order (one invocation: cargo resolves the not-yet-published Halo crates against the ones
//!    it packaged just before, through a local registry overlay).
//! 5. It prints the crates.io package names, their library names, and the tag `vVERSION` that
//!    the release commit would get. Nothing is published and nothing is tagged.
//!
//! halo-core is published as `halo-agent-core` ([`crate::ci::CORE_PACKAGE`]): the name
//! `halo-core` on crates.io belongs to an unrelated crate. The other five names were free.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::{root, run_cmd};

/// One publishable workspace crate, from `cargo metadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crate {
    /// The package name on crates.io.
    pub name: String,
    /// The library name (`use` path).
    pub lib: String,
    pub version: String,
    /// Problems with its metadata.
    pub problems: Vec<String>,
    /// The other publishable workspace crates it depends on (normal and build dependencies).
    pub deps: BTreeSet<String>,
}

/// Runs the release checks.
///
/// # Errors
/// A check fails; the messages say which crate and what to fix.
pub fn run(allow_dirty: bool) -> anyhow::Result<()> {
    let root = root();
    if !allow_dirty {
        let out = Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(&root)
            .output()
            .context("cannot run git status")?;
        let dirty = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !dirty.trim().is_empty() {
            bail!(
                "the work tree has uncommitted changes; commit them first (or pass --allow-dirty \
                 to package them anyway):\n{}",
                dirty.trim_end()
            );
        }
    }
    let out = crate::cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(&root)
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&out.stdout)?;
    let crates = publishable(&meta);
    let manifest: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))?.parse()?;
    let version = manifest["workspace"]["package"]["version"]
        .as_str()
        .context("Cargo.toml has no [workspace.package] version")?
        .to_string();

    let mut problems: Vec<String> = Vec::new();
    for c in &crates {
        if c.version != version {
            problems.push(format!(
                "{} has version {}, the workspace {version}: use `version.workspace = true`",
                c.name, c.version
            ));
        }
        problems.extend(c.problems.iter().map(|p| format!("{}: {p}", c.name)));
    }
    let changelog = std::fs::read_to_string(root.join("CHANGELOG.md")).unwrap_or_default();
    if let Err(e) = changelog_section(&changelog, &version) {
        problems.push(format!("CHANGELOG.md: {e}"));
    }
    let order = match publish_order(&crates) {
        Ok(order) => order,
        Err(e) => {
            problems.push(e);
            Vec::new()
        }
    };
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("release: {p}");
        }
        bail!("{} problem(s) to fix before a release", problems.len());
    }
    eprintln!(
        "release: version {version}; CHANGELOG.md has its section; {} crates in dependency order: {}",
        order.len(),
        order.join(" → ")
    );

    let mut cmd = crate::cargo();
    cmd.args(["publish", "--dry-run", "--locked"]);
    for name in &order {
        cmd.args(["-p", name]);
    }
    if allow_dirty {
        cmd.arg("--allow-dirty");
    }
    run_cmd(&mut cmd)?;

    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "HEAD".into());
    println!("\nrelease {version}: packaged and built; nothing was published.");
    println!("{:<24} {:<18} version", "crates.io package", "library");
    for name in &order {
        let c = crates.iter().find(|c| &c.name == name).expect("listed");
        println!("{:<24} {:<18} {}", c.name, c.lib, c.version);
    }
    println!("would tag: v{version} at {head}");
    println!(
        "to publish: git tag v{version} {head} && cargo publish{} && git push origin v{version}",
        order.iter().map(|n| format!(" -p {n}")).collect::<String>()
    );
    Ok(())
}

/// The workspace members that may be published (`publish` not `false`), with their metadata
/// problems and their dependencies on each other.
pub fn publishable(meta: &Value) -> Vec<Crate> {
    let empty = Vec::new();
    let packages = meta["packages"].as_array().unwrap_or(&empty);
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let is_published = |p: &Value| !p["publish"].as_array().is_some_and(Vec::is_empty);
    let ours: Vec<&Value> = packages
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(id)))
        .filter(|p| is_published(p))
        .collect();
    let names: BTreeSet<&str> = ours.iter().filter_map(|p| p["name"].as_str()).collect();
    ours.iter()
        .map(|p| {
            let name = p["name"].as_str().unwrap_or_default().to_string();
            let version = p["version"].as_str().unwrap_or_default().to_string();
            let lib = p["targets"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .find(|t| {
                    t["kind"]
                        .as_array()
                        .is_some_and(|k| k.iter().any(|k| k == "lib"))
                })
                .and_then(|t| t["name"].as_str())
                .unwrap_or_default()
                .to_string();
            let mut problems = Vec::new();
            for field in ["description", "license", "repository"] {
                if p[field].as_str().is_none_or(|v| v.trim().is_empty()) {
                    problems.push(format!("no `{field}` in its Cargo.toml"));
                }
            }
            if lib.is_empty() {
                problems.push("no library target".into());
            }
            let mut deps = BTreeSet::new();
            for d in p["dependencies"].as_array().unwrap_or(&empty) {
                let dn = d["name"].as_str().unwrap_or_default();
                let dev = d["kind"].as_str() == Some("dev");
                if !names.contains(dn) || dev || dn == name {
                    continue;
                }
                deps.insert(dn.to_string());
                let req = d["req"].as_str().unwrap_or("*");
                if req == "*" {
                    problems.push(format!(
                        "depends on {dn} without a version; give it `version` in \
                         [workspace.dependencies]"
                    ));
                } else if req.trim_start_matches(['^', '=']) != version {
                    problems.push(format!(
                        "depends on {dn} {req}, not on this release's version {version}"
                    ));
                }
            }
            Crate {
                name,
                lib,
                version,
                problems,
                deps,
            }
        })
        .collect()
}

/// The crates in an order where each comes after the crates it depends on (ties by name).
///
/// # Errors
/// The dependencies form a cycle (names the crates on it).
pub fn publish_order(crates: &[Crate]) -> Result<Vec<String>, String> {
    let mut left: BTreeMap<&str, BTreeSet<&str>> = crates
        .iter()
        .map(|c| (c.name.as_str(), c.deps.iter().map(String::as_str).collect()))
        .collect();
    let mut order = Vec::new();
    while !left.is_empty() {
        let ready: Vec<&str> = left
            .iter()
            .filter(|(_, deps)| deps.is_empty())
            .map(|(n, _)| *n)
            .collect();
        if ready.is_empty() {
            let cycle: Vec<&str> = left.keys().copied().collect();
            return Err(format!(
                "the crates {} depend on each other in a cycle",
                cycle.join(", ")
            ));
        }
        for n in ready {
            left.remove(n);
            for deps in left.values_mut() {
                deps.remove(n);
            }
            order.push(n.to_string());
        }
    }
    Ok(order)
}

/// The body of the `## [VERSION]` (or `## VERSION`) section of a Keep a Changelog file.
///
/// # Errors
/// No section for the version, or an empty one.
pub fn changelog_section<'a>(changelog: &'a str, version: &str) -> Result<&'a str, String> {
    let heading = |line: &str| {
        let Some(rest) = line.strip_prefix("## ") else {
            return false;
        };
        let rest = rest.trim_start_matches('[');
        rest.strip_prefix(version)
            .is_some_and(|after| after.is_empty() || after.starts_with([']', ' ']))
    };
    let mut start = None;
    let mut offset = 0;
    for line in changelog.split_inclusive('\n') {
        if let Some(s) = start {
            if line.starts_with("## ") {
                return non_empty(&changelog[s..offset], version);
            }
        } else if heading(line.trim_end()) {
            start = Some(offset + line.len());
        }
        offset += line.len();
    }
    match start {
        Some(s) => non_empty(&changelog[s..], version),
        None => Err(format!(
            "no `## [{version}]` section; add one saying what this release changes"
        )),
    }
}

fn non_empty<'a>(body: &'a str, version: &str) -> Result<&'a str, String> {
    // Link reference definitions (`[0.1.0]: https://…`) at the end are not content.
    let content = body
        .lines()
        .any(|l| !(l.trim().is_empty() || l.starts_with('[') && l.contains("]: ")));
    if content {
        Ok(body)
    } else {
        Err(format!("the `## [{version}]` section is empty"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn krate(name: &str, deps: &[&str]) -> Crate {
        Crate {
            name: name.into(),
            lib: name.replace('-', "_"),
            version: "0.1.0".into(),
            problems: Vec::new(),
            deps: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn crates_come_after_what_they_depend_on() {
        let crates = [
            krate("halo-stream", &["halo-agent-core"]),
            krate("halo-adapters", &["halo-agent-core"]),
            krate("halo-agent-core", &[]),
            krate("top", &["halo-stream", "halo-adapters"]),
        ];
        assert_eq!(
            publish_order(&crates).unwrap(),
            ["halo-agent-core", "halo-adapters", "halo-stream", "top"]
        );
        let cycle = [krate("a", &["b"]), krate("b", &["a"]), krate("c", &[])];
        assert_eq!(
            publish_order(&cycle).unwrap_err(),
            "the crates a, b depend on each other in a cycle"
        );
    }

    #[test]
    fn the_changelog_needs_a_non_empty_section_for_the_version() {
        let log = "# Changelog\n\n## [Unreleased]\n\n## [0.1.0] - 2026-12-01\n\n### Added\n- the agent\n\n## [0.0.9]\n- old\n\n[0.1.0]: https://x/0.1.0\n";
        assert_eq!(
            changelog_section(log, "0.1.0").unwrap(),
            "\n### Added\n- the agent\n\n"
        );
        assert_eq!(
            changelog_section(log, "0.0.9").unwrap(),
            "- old\n\n[0.1.0]: https://x/0.1.0\n"
        );
        assert!(
            changelog_section(log, "0.2.0")
                .unwrap_err()
                .contains("no `## [0.2.0]` section")
        );
        // 0.1.0 must not match the heading of 0.1.01 or 0.1.0-rc.1.
        assert!(changelog_section("## [0.1.01]\n- x\n", "0.1.0").is_err());
        assert!(changelog_section("## 0.1.0-rc.1\n- x\n", "0.1.0").is_err());
        assert_eq!(
            changelog_section(
                "## [0.1.0]\n\n[0.1.0]: https://x\n## [0.0.1]\n- y\n",
                "0.1.0"
            )
            .unwrap_err(),
            "the `## [0.1.0]` section is empty"
        );
    }

    #[test]
    fn metadata_problems_and_internal_deps_are_read_from_cargo_metadata() {
        let meta = json!({
            "workspace_members": ["core-id", "ad-id", "xtask-id"],
            "packages": [
                {"id": "core-id", "name": "halo-agent-core", "version": "0.1.0",
                 "description": "d", "license": "MIT", "repository": "https://r", "publish": null,
                 "targets": [{"kind": ["lib"], "name": "halo_core"}],
                 "dependencies": [{"name": "halo-agent-core", "kind": "dev", "req": "*"}]},
                {"id": "ad-id", "name": "halo-adapters", "version": "0.1.0",
                 "description": null, "license": "MIT", "repository": "https://r", "publish": null,
                 "targets": [{"kind": ["lib"], "name": "halo_adapters"}],
                 "dependencies": [
                    {"name": "halo-agent-core", "kind": null, "req": "^0.1.0"},
                    {"name": "serde", "kind": null, "req": "^1"}]},
                {"id": "xtask-id", "name": "xtask", "version": "0.1.0", "publish": [],
                 "targets": [{"kind": ["bin"], "name": "xtask"}], "dependencies": []}
            ]
        });
        let crates = publishable(&meta);
        assert_eq!(crates.len(), 2, "xtask has publish = false");
        assert_eq!(crates[0].lib, "halo_core");
        assert!(crates[0].problems.is_empty(), "{:?}", crates[0].problems);
        assert!(
            crates[0].deps.is_empty(),
            "a dev-dependency on itself is not an edge"
        );
        assert_eq!(crates[1].problems, ["no `description` in its Cargo.toml"]);
        assert_eq!(
            crates[1].deps.iter().collect::<Vec<_>>(),
            ["halo-agent-core"]
        );
    }
}
