//! The harness around the model: what the semi-static prompt zone is read from, and the
//! skill and experience tools.
//!
//! | module | what it reads | what it gives |
//! |---|---|---|
//! | [`load_rules`] | `AGENTS.md`, `CLAUDE.md`, `.agent/rules/*.md` | [`ZoneSection`](halo_core::ZoneSection)s, one per file, headed by its path |
//! | [`Memory`] | `.agent/memory.md` (configurable) | its last lines as a section; an atomic append after each task |
//! | [`Experience`] | `.agent/experience.md` (configurable) | its newest cards as a section; `record_experience` ([`ExperienceTool`]) appends one |
//! | [`SkillDiscovery`] | `.agents/skills/*/SKILL.md`, `.agent/skills/`, `.claude/skills/`, added dirs | a [`SkillSet`], its [`catalog`] for the prefix, [`skill_tools`] |
//!
//! Everything goes through the [`Sandbox`](halo_core::Sandbox) trait, so it works on a
//! `VirtualSandbox` as on a `ContainerSandbox`. Loaders never fail: what cannot be read
//! is a [`Diagnostic`] naming the file and why. Every file's text enters the prefix
//! normalized ([`normalize_text`](halo_core::zones::normalize_text): no byte-order mark,
//! `\n` line endings), so a checkout with CRLF endings sends the same bytes. See
//! `docs/harness.md`.

mod experience;
mod memory;
mod rules;
pub mod skills;

use std::fmt;

use halo_core::SharedSandbox;
use halo_core::sandbox::{SandboxError, SandboxPath};

/// The text of a harness file that enters the prefix (memory, experience): `Ok(None)` when
/// it does not exist, a warning naming the file when it cannot be read, bytes that are not
/// UTF-8 replaced.
async fn read_harness_file(
    sandbox: &SharedSandbox,
    path: &SandboxPath,
) -> Result<Option<String>, Diagnostic> {
    match sandbox.read(path).await {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(SandboxError::NotFound { .. }) => Ok(None),
        Err(e) => Err(Diagnostic::warning(
            path.as_str(),
            format!("cannot be read: {e}"),
        )),
    }
}

pub use experience::{
    DEFAULT_EXPERIENCE_BYTES, DEFAULT_EXPERIENCE_CARDS, DEFAULT_EXPERIENCE_PATH, Experience,
    ExperienceConfig, ExperienceSnapshot, ExperienceTool, MAX_LESSON_CHARS, MAX_TITLE_CHARS,
    RECORD_EXPERIENCE, RecordExperienceArgs,
};
pub use memory::{
    DEFAULT_MEMORY_LINES, DEFAULT_MEMORY_PATH, MAX_ENTRY_CHARS, Memory, MemoryConfig,
    MemorySnapshot,
};
pub use rules::{RULES_DIR, RULES_FILES, Rules, load_rules};
pub use skills::{
    Catalog, DEFAULT_SKILL_DIRS, ParsedSkill, STAGING_DIR, Skill, SkillDiscovery, SkillFile,
    SkillProblem, SkillRunOptions, SkillSet, catalog, catalog_budget, parse_skill, skill_tools,
};

/// How serious a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Loaded anyway (a leniency, an unreadable optional file).
    Warning,
    /// Not loaded: a skill that cannot be used.
    Skipped,
}

/// A message about one file: a leniency, or why it was not loaded. `Display` is one line:
/// `warning: PATH: MESSAGE` or `skipped PATH: MESSAGE`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    /// Whether the file was loaded anyway.
    pub severity: Severity,
    /// The sandbox-relative path of the file.
    pub path: String,
    /// What is wrong (lowercase, no trailing period).
    pub message: String,
}

impl Diagnostic {
    /// A warning about `path`.
    pub fn warning(path: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            path: path.into(),
            message: message.into(),
        }
    }

    /// `path` was skipped.
    pub fn skipped(path: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Skipped,
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.severity {
            Severity::Warning => write!(f, "warning: {}: {}", self.path, self.message),
            Severity::Skipped => write!(f, "skipped {}: {}", self.path, self.message),
        }
    }
}
