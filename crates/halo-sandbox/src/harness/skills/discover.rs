//! Skill discovery (agentskills.io client guide, "Discovery"): every folder holding a file
//! named exactly `SKILL.md` directly under a skills directory.

use halo_core::Sandbox;
use halo_core::sandbox::{FileKind, SandboxError, SandboxPath};

use super::parse::parse_skill;
use super::{Skill, SkillSet};
use crate::harness::Diagnostic;

/// The skills directories under the project root, in precedence order: the spec's
/// cross-client `.agents/skills`, then `.agent/skills` and `.claude/skills`.
pub const DEFAULT_SKILL_DIRS: [&str; 3] = [".agents/skills", ".agent/skills", ".claude/skills"];

/// The largest `SKILL.md` read, in bytes: 256 KiB (the spec recommends under 5000 tokens).
pub const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;

/// The most skill folders looked at per skills directory: 2000 (the client guide's bound).
const MAX_FOLDERS: usize = 2000;

/// Where to look for skills: [`DEFAULT_SKILL_DIRS`] plus directories the caller adds.
///
/// ```
/// use halo_core::{Sandbox, sandbox::SandboxPath};
/// use halo_sandbox::{VirtualSandbox, harness::SkillDiscovery};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let sandbox = VirtualSandbox::new();
/// let p = |s: &str| SandboxPath::parse(s).unwrap();
/// sandbox.write(&p(".agents/skills/pdf/SKILL.md"), b"---\nname: pdf\ndescription: PDFs.\n---\nUse pdftotext.\n".to_vec()).await.unwrap();
/// sandbox.write(&p(".claude/skills/Bad/SKILL.md"), b"---\nname: Bad\ndescription: x\n---\n".to_vec()).await.unwrap();
/// let set = SkillDiscovery::new().discover(&sandbox).await;
/// assert_eq!(set.names(), ["pdf"]);
/// assert_eq!(set.diagnostics[0].to_string(), "skipped .claude/skills/Bad/SKILL.md: `name` `Bad` must be lowercase");
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDiscovery {
    dirs: Vec<SandboxPath>,
}

impl Default for SkillDiscovery {
    fn default() -> Self {
        Self::new()
    }
}

impl SkillDiscovery {
    /// The default directories.
    pub fn new() -> Self {
        SkillDiscovery {
            dirs: DEFAULT_SKILL_DIRS
                .iter()
                .filter_map(|d| SandboxPath::parse(d).ok())
                .collect(),
        }
    }

    /// Also looks in `dir` (after the default ones: on a name collision the earlier
    /// directory wins).
    #[must_use]
    pub fn with_dir(mut self, dir: SandboxPath) -> Self {
        if !self.dirs.contains(&dir) {
            self.dirs.push(dir);
        }
        self
    }

    /// The directories, in precedence order.
    pub fn dirs(&self) -> &[SandboxPath] {
        &self.dirs
    }

    /// Finds and parses the skills. A missing skills directory is no skill; every skipped
    /// skill and every leniency is a [`Diagnostic`] naming the file. Never fails.
    pub async fn discover(&self, sandbox: &dyn Sandbox) -> SkillSet {
        let mut set = SkillSet::default();
        for dir in &self.dirs {
            let entries = match sandbox.list(dir).await {
                Ok(entries) => entries,
                Err(SandboxError::NotFound { .. } | SandboxError::NotDirectory { .. }) => continue,
                Err(e) => {
                    set.diagnostics.push(Diagnostic::warning(
                        dir.as_str(),
                        format!("cannot be listed: {e}"),
                    ));
                    continue;
                }
            };
            for entry in entries.into_iter().take(MAX_FOLDERS) {
                if entry.name.starts_with('.') || entry.name == "node_modules" {
                    continue;
                }
                let Ok(folder) = dir.join(&entry.name) else {
                    continue;
                };
                let is_dir = match entry.kind {
                    FileKind::Dir => true,
                    FileKind::Symlink => sandbox
                        .stat(&folder)
                        .await
                        .is_ok_and(|m| m.kind == FileKind::Dir),
                    _ => false,
                };
                if !is_dir {
                    continue;
                }
                let Ok(location) = folder.join("SKILL.md") else {
                    continue;
                };
                if let Some(skill) = load(sandbox, &folder, &location, &entry.name, &mut set).await
                {
                    match set.skills.binary_search_by(|s| s.name().cmp(skill.name())) {
                        Ok(at) => set.diagnostics.push(Diagnostic::skipped(
                            location.as_str(),
                            format!(
                                "a skill named `{}` was already found at {}",
                                skill.name(),
                                set.skills[at].location
                            ),
                        )),
                        Err(at) => set.skills.insert(at, skill),
                    }
                }
            }
        }
        set
    }
}

/// Reads and parses one skill folder's `SKILL.md`; `None` (with a diagnostic when it is
/// not simply absent) when it cannot be used.
async fn load(
    sandbox: &dyn Sandbox,
    folder: &SandboxPath,
    location: &SandboxPath,
    folder_name: &str,
    set: &mut SkillSet,
) -> Option<Skill> {
    let path = location.as_str();
    match sandbox.stat(location).await {
        Ok(m) if m.kind != FileKind::File => {
            set.diagnostics
                .push(Diagnostic::skipped(path, "it is not a regular file"));
            return None;
        }
        Ok(m) if m.len > MAX_SKILL_FILE_BYTES => {
            set.diagnostics.push(Diagnostic::skipped(
                path,
                format!(
                    "it is {} bytes, over the {MAX_SKILL_FILE_BYTES}-byte limit",
                    m.len
                ),
            ));
            return None;
        }
        Ok(_) => {}
        Err(SandboxError::NotFound { .. }) => {
            // A folder with a lower-case `skill.md` is a skill someone meant: say why it is
            // not loaded rather than pass over it.
            if let Ok(lower) = folder.join("skill.md")
                && sandbox
                    .stat(&lower)
                    .await
                    .is_ok_and(|m| m.kind == FileKind::File)
            {
                set.diagnostics.push(Diagnostic::skipped(
                    lower.as_str(),
                    "the file must be named `SKILL.md` (upper case, as the agentskills.io spec names it); rename it",
                ));
            }
            return None;
        }
        Err(e) => {
            set.diagnostics
                .push(Diagnostic::skipped(path, format!("cannot be read: {e}")));
            return None;
        }
    }
    let bytes = match sandbox.read(location).await {
        Ok(b) => b,
        Err(e) => {
            set.diagnostics
                .push(Diagnostic::skipped(path, format!("cannot be read: {e}")));
            return None;
        }
    };
    match parse_skill(&bytes, folder_name) {
        Ok(parsed) => {
            for w in parsed.warnings {
                set.diagnostics.push(Diagnostic::warning(path, w));
            }
            Some(Skill {
                file: parsed.file,
                dir: folder.clone(),
                location: location.clone(),
            })
        }
        Err(problem) => {
            set.diagnostics.push(Diagnostic::skipped(path, problem.0));
            None
        }
    }
}
