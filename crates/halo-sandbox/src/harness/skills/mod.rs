//! Agent Skills (agentskills.io): discovery, parsing, the catalog for the
//! prefix, and the tools `load_skill`, `read_skill_file` and `skill_run`.
//!
//! Everything goes through the [`Sandbox`](halo_core::Sandbox) trait, so a
//! `VirtualSandbox` fixture works as a real folder does. See `docs/harness.md`.

mod catalog;
mod discover;
mod parse;
mod run;
mod tools;

pub use catalog::{Catalog, catalog, catalog_budget};
pub use discover::{DEFAULT_SKILL_DIRS, MAX_SKILL_FILE_BYTES, SkillDiscovery};
pub use parse::{
    MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, ParsedSkill, SkillFile,
    SkillProblem, parse_skill,
};
pub use run::{STAGING_DIR, SkillRunOptions};
pub use tools::skill_tools;

use halo_core::SkillMeta;
use halo_core::sandbox::SandboxPath;

use super::Diagnostic;

/// A usable skill: its `SKILL.md`, parsed, and where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The parsed frontmatter and body.
    pub file: SkillFile,
    /// The skill's folder, relative to the sandbox root (`.agents/skills/pdf`).
    pub dir: SandboxPath,
    /// Its `SKILL.md` (`.agents/skills/pdf/SKILL.md`).
    pub location: SandboxPath,
}

impl Skill {
    /// The skill's name.
    pub fn name(&self) -> &str {
        &self.file.name
    }

    /// The catalog entry: name, description, location.
    pub fn meta(&self) -> SkillMeta {
        SkillMeta {
            name: self.file.name.clone(),
            description: self.file.description.clone(),
            location: Some(self.location.as_str().to_string()),
        }
    }
}

/// What discovery found: the usable skills, sorted by name, and a diagnostic per skipped
/// skill and per leniency.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SkillSet {
    /// The skills, sorted by name, one per name.
    pub skills: Vec<Skill>,
    /// Warnings (loaded anyway) and skips (not loaded), each naming the file.
    pub diagnostics: Vec<Diagnostic>,
}

impl SkillSet {
    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills
            .binary_search_by(|s| s.name().cmp(name))
            .ok()
            .map(|i| &self.skills[i])
    }

    /// The skills' names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.skills.iter().map(|s| s.name().to_string()).collect()
    }

    /// Whether no skill was found.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }
}
