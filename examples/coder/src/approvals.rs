//! The user's approval of a project's own MCP servers (`DIR/.mcp.json`, `DIR/.agent/mcp.json`),
//! remembered outside the project: a server is a command that runs on this machine outside
//! the sandbox, and a command in the sandbox, a cloned repository or a pull request can write
//! those files. So the project's servers start only from a configuration the user approved
//! at a terminal; approving records the configuration's SHA-256 (over its server entries,
//! canonical JSON) in `$XDG_STATE_HOME/halo/mcp-approvals/` (else
//! `~/.local/state/halo/mcp-approvals/`), one file per project keyed by the project's
//! canonical path. A configuration that changed since, or was never approved, does not start
//! without a terminal to ask, `--yes` or not; the startup line says what changed and how to
//! approve it. Servers of `--mcp-config FILE`, which the user named, are not concerned.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use halo_mcp::McpConfig;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// The project's configuration files, in the order they are merged (later wins per name).
pub const PROJECT_FILES: [&str; 2] = [".mcp.json", ".agent/mcp.json"];

/// A project's own MCP servers, read once: what is hashed is what starts.
#[derive(Debug, Clone)]
pub struct ProjectServers {
    /// Each server's entry as the files give it (later files win), by name.
    pub entries: BTreeMap<String, Value>,
    /// The same servers, parsed.
    pub config: McpConfig,
    /// The SHA-256 of the canonical JSON of `entries`, in hex.
    pub hash: String,
}

impl ProjectServers {
    /// Reads the project files of `dir` that exist; `None` when they name no server.
    ///
    /// # Errors
    /// A file that cannot be read or parsed (the message names the file, field and server).
    pub fn read(dir: &Path) -> anyhow::Result<Option<Self>> {
        let mut entries = BTreeMap::new();
        let mut config = McpConfig::default();
        for name in PROJECT_FILES {
            let path = dir.join(name);
            if !path.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            config.merge(
                McpConfig::parse(&text, &path).context("reading the MCP server configuration")?,
            );
            // It parsed above, so it is JSON.
            let value: Value = serde_json::from_str(&text).unwrap_or_default();
            if let Some(Value::Object(servers)) = value.get("mcpServers") {
                for (name, entry) in servers {
                    entries.insert(name.clone(), halo_core::prefix::canonicalize(entry.clone()));
                }
            }
        }
        if config.servers.is_empty() {
            return Ok(None);
        }
        let canonical = serde_json::to_vec(&entries).unwrap_or_default();
        Ok(Some(ProjectServers {
            hash: hex(&Sha256::digest(&canonical)),
            entries,
            config,
        }))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the remembered approval says of a project's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The user approved exactly this configuration.
    Approved,
    /// No approval is remembered for the project.
    Never,
    /// The configuration changed since the approval: `added `x``, `changed `y``,
    /// `removed `z``.
    Changed(Vec<String>),
}

impl Verdict {
    /// Why the servers do not start on their own, for the startup line; `None` when
    /// approved.
    pub fn reason(&self) -> Option<String> {
        match self {
            Verdict::Approved => None,
            Verdict::Never => Some("you have not approved this configuration".into()),
            Verdict::Changed(changes) => Some(format!(
                "the configuration changed since you approved it ({})",
                changes.join(", ")
            )),
        }
    }
}

/// Where approvals are remembered.
#[derive(Debug, Clone)]
pub struct Approvals {
    dir: PathBuf,
}

impl Approvals {
    /// `$XDG_STATE_HOME/halo/mcp-approvals` (an absolute `XDG_STATE_HOME`), else
    /// `$HOME/.local/state/halo/mcp-approvals`; `None` when neither is set.
    pub fn from_env() -> Option<Self> {
        let base = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .map(|h| h.join(".local/state"))
            })?;
        Some(Approvals::at(base.join("halo/mcp-approvals")))
    }

    /// Approvals kept in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Approvals { dir: dir.into() }
    }

    /// The folder the approvals are kept in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of the project at `project` (canonicalized when it exists): its path's
    /// SHA-256, 32 hex digits.
    pub fn file_for(&self, project: &Path) -> PathBuf {
        let key = project_key(project);
        let digest = hex(&Sha256::digest(key.as_os_str().as_encoded_bytes()));
        self.dir.join(format!("{}.json", &digest[..32]))
    }

    /// What the remembered approval says of `servers` in `project`.
    pub fn check(&self, project: &Path, servers: &ProjectServers) -> Verdict {
        let Ok(text) = std::fs::read_to_string(self.file_for(project)) else {
            return Verdict::Never;
        };
        let Ok(saved) = serde_json::from_str::<Value>(&text) else {
            return Verdict::Never;
        };
        if saved["project"].as_str() != project_key(project).to_str() {
            return Verdict::Never;
        }
        if saved["sha256"].as_str() == Some(servers.hash.as_str()) {
            return Verdict::Approved;
        }
        let old: BTreeMap<String, Value> = saved["servers"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let names: BTreeSet<&String> = old.keys().chain(servers.entries.keys()).collect();
        let mut changes = Vec::new();
        for name in names {
            match (old.get(name), servers.entries.get(name)) {
                (None, Some(_)) => changes.push(format!("added `{name}`")),
                (Some(_), None) => changes.push(format!("removed `{name}`")),
                (Some(a), Some(b)) if a != b => changes.push(format!("changed `{name}`")),
                _ => {}
            }
        }
        if changes.is_empty() {
            changes.push("its entries differ".into());
        }
        Verdict::Changed(changes)
    }

    /// Remembers that the user approved `servers` in `project`; returns the file written.
    ///
    /// # Errors
    /// The folder or file cannot be written.
    pub fn approve(&self, project: &Path, servers: &ProjectServers) -> anyhow::Result<PathBuf> {
        let file = self.file_for(project);
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        let body = json!({
            "project": project_key(project).to_string_lossy(),
            "sha256": servers.hash,
            "servers": servers.entries,
        });
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(&body)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &file).with_context(|| format!("cannot write {}", file.display()))?;
        Ok(file)
    }
}

/// The project's canonical path, or the path made absolute.
fn project_key(project: &Path) -> PathBuf {
    project
        .canonicalize()
        .or_else(|_| std::path::absolute(project))
        .unwrap_or_else(|_| project.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(dir: &Path, text: &str) -> ProjectServers {
        std::fs::write(dir.join(".mcp.json"), text).unwrap();
        ProjectServers::read(dir).unwrap().unwrap()
    }

    #[test]
    fn an_approval_holds_until_the_configuration_changes() {
        let project = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let approvals = Approvals::at(state.path().join("a"));
        let first = servers(
            project.path(),
            r#"{"mcpServers": {"x": {"command": "a", "args": ["1"]}, "y": {"command": "b"}}}"#,
        );
        assert_eq!(approvals.check(project.path(), &first), Verdict::Never);
        approvals.approve(project.path(), &first).unwrap();
        assert_eq!(approvals.check(project.path(), &first), Verdict::Approved);
        // Key order and spacing are not a change.
        let same = servers(
            project.path(),
            r#"{"mcpServers": {"y": {"command": "b"},   "x": {"args": ["1"], "command": "a"}}}"#,
        );
        assert_eq!(same.hash, first.hash);
        let changed = servers(
            project.path(),
            r#"{"mcpServers": {"x": {"command": "a", "args": ["2"]}, "z": {"command": "c"}}}"#,
        );
        assert_eq!(
            approvals.check(project.path(), &changed),
            Verdict::Changed(vec![
                "changed `x`".into(),
                "removed `y`".into(),
                "added `z`".into()
            ])
        );
        // Another project's approval is not this one's.
        let other = tempfile::tempdir().unwrap();
        let copy = servers(
            other.path(),
            r#"{"mcpServers": {"x": {"command": "a", "args": ["1"]}, "y": {"command": "b"}}}"#,
        );
        assert_eq!(approvals.check(other.path(), &copy), Verdict::Never);
    }
}
