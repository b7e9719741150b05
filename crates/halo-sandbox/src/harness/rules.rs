//! Rules files: `AGENTS.md`, `CLAUDE.md` and `.agent/rules/*.md` (sorted by
//! file name) from the project root, each a section of the semi-static zone headed by its
//! path.

use halo_core::sandbox::{FileKind, SandboxError, SandboxPath};
use halo_core::{Sandbox, ZoneSection};

use super::Diagnostic;

/// The rules files at the root, in this order.
pub const RULES_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// The folder of further rules files (`*.md`, sorted by name).
pub const RULES_DIR: &str = ".agent/rules";

/// The largest rules file read, in bytes: 64 KiB; a larger one is cut with a note.
const MAX_RULES_BYTES: usize = 64 * 1024;

/// What [`load_rules`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rules {
    /// One section per file read, in order.
    pub sections: Vec<ZoneSection>,
    /// Warnings about files that exist but cannot be read (the file and why).
    pub diagnostics: Vec<Diagnostic>,
}

impl Rules {
    /// The paths of the files read, in order.
    pub fn files(&self) -> Vec<&str> {
        self.sections
            .iter()
            .filter_map(|s| s.path.as_deref())
            .collect()
    }
}

/// Reads the rules files under `root` (a sandbox-relative folder, usually the root). A
/// missing file is fine; one that cannot be read (not UTF-8, a folder, an IO error) is a
/// warning naming it and why. Never fails.
///
/// ```
/// use halo_core::{Sandbox, sandbox::SandboxPath};
/// use halo_sandbox::{VirtualSandbox, harness::load_rules};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let sandbox = VirtualSandbox::new();
/// let p = |s: &str| SandboxPath::parse(s).unwrap();
/// sandbox.write(&p("CLAUDE.md"), b"Use tabs.\n".to_vec()).await.unwrap();
/// sandbox.write(&p(".agent/rules/b.md"), b"B".to_vec()).await.unwrap();
/// sandbox.write(&p(".agent/rules/a.md"), b"A".to_vec()).await.unwrap();
/// let rules = load_rules(&sandbox, &SandboxPath::root()).await;
/// assert_eq!(rules.files(), ["CLAUDE.md", ".agent/rules/a.md", ".agent/rules/b.md"]);
/// assert!(rules.diagnostics.is_empty());
/// # });
/// ```
pub async fn load_rules(sandbox: &dyn Sandbox, root: &SandboxPath) -> Rules {
    let mut rules = Rules::default();
    let mut paths = Vec::new();
    for name in RULES_FILES {
        if let Ok(p) = root.join(name) {
            paths.push(p);
        }
    }
    if let Ok(dir) = root.join(RULES_DIR) {
        match sandbox.list(&dir).await {
            Ok(entries) => {
                // `list` sorts by name.
                for e in entries {
                    if e.name.ends_with(".md")
                        && matches!(e.kind, FileKind::File | FileKind::Symlink)
                        && let Ok(p) = dir.join(&e.name)
                    {
                        paths.push(p);
                    }
                }
            }
            Err(SandboxError::NotFound { .. }) => {}
            Err(e) => rules.diagnostics.push(Diagnostic::warning(
                dir.as_str(),
                format!("cannot be listed: {e}"),
            )),
        }
    }
    for path in paths {
        match sandbox.read(&path).await {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(mut text) => {
                    if text.len() > MAX_RULES_BYTES {
                        let mut end = MAX_RULES_BYTES;
                        while !text.is_char_boundary(end) {
                            end -= 1;
                        }
                        let total = text.len();
                        text.truncate(end);
                        text.push_str(&format!(
                            "\n[... cut at {end} of {total} bytes; read {path} for the rest ...]"
                        ));
                        rules.diagnostics.push(Diagnostic::warning(
                            path.as_str(),
                            format!("it is {total} bytes; only the first {end} are in the prompt"),
                        ));
                    }
                    rules.sections.push(ZoneSection::file(path.as_str(), text));
                }
                Err(_) => rules.diagnostics.push(Diagnostic::warning(
                    path.as_str(),
                    "cannot be used: it is not UTF-8 text",
                )),
            },
            Err(SandboxError::NotFound { .. }) => {}
            Err(e) => rules.diagnostics.push(Diagnostic::warning(
                path.as_str(),
                format!("cannot be read: {e}"),
            )),
        }
    }
    rules
}
