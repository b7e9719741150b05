//! Protected paths and names: what the sandboxes keep read-only inside a writable root, and
//! the one list of files a program outside the sandbox starts processes from later.
//!
//! A command or a file tool that could write `.git/hooks/pre-commit`, `core.fsmonitor` in a
//! nested repository's `.git/config` or a project's `.mcp.json` would have its code run
//! outside the sandbox by the next `git status` or the next agent that starts in the folder.
//! [`PROTECTED_NAMES`] and [`PROTECTED_PATHS`] are those files; `with_default_protection`
//! (on both sandboxes) protects them, and `docs/sandbox.md` says how each wall holds them:
//! the file tools refuse to change them ([`Protection::check_names`] here, the protected
//! paths in each sandbox), the OS sandbox binds the existing ones read-only and renames the
//! ones a command makes (`container/guard.rs`).
//!
//! A protected **name** is protected wherever it appears: `.git` protects `sub/.git` and
//! `a/b/.git` as well as `.git`. With `.git` among the names, a folder git would take for a
//! repository of its own (a bare repository: `HEAD` with `objects` and `refs`, or `HEAD`
//! with `commondir`), and making one, are protected too: git runs what such a folder's
//! `config` names as soon as it is used inside it.

use halo_core::sandbox::{MAX_NAME_BYTES, SandboxError, SandboxPath};

/// Names protected at any depth: `.git` (a repository's hooks and settings, which git runs
/// on the next `git status` or `git commit` there). With `.git`, bare repositories are
/// protected too (see the module docs).
pub const PROTECTED_NAMES: [&str; 1] = [".git"];

/// Paths protected from the root: the MCP server configurations a coding agent starts
/// servers from, outside any sandbox, when it starts in the folder (`.mcp.json`, read by
/// Claude Code and Halo's agents; `.agent/mcp.json`, Halo's own). A Halo configuration file
/// that names programs to run belongs here.
pub const PROTECTED_PATHS: [&str; 2] = [".mcp.json", ".agent/mcp.json"];

/// The protected name that also protects bare repositories.
const GIT: &str = ".git";

/// What a sandbox keeps read-only: paths from the root and names at any depth.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Protection {
    /// Paths from the root, in the order added, each once.
    pub(crate) paths: Vec<SandboxPath>,
    /// Names at any depth, in the order added, each once.
    pub(crate) names: Vec<String>,
}

/// A look at a tree by real paths (relative to the root, no link on the way): what the
/// shared checks need from each sandbox.
pub(crate) trait Look {
    /// Whether anything (a link included, not followed) is at `at`.
    fn exists(&self, at: &[&str]) -> bool;
    /// The entries of the folder at `at`, links not followed: each name and whether it is
    /// a folder. Empty when `at` is no folder.
    fn entries(&self, at: &[&str]) -> Vec<(String, bool)>;
}

/// Whether a folder with entries `has` is a repository for git: `HEAD` with `objects` and
/// `refs`, or `HEAD` with `commondir` (git's `is_git_directory`, which also reads `HEAD`;
/// any entry of those names counts here).
pub(crate) fn is_repository(has: impl Fn(&str) -> bool) -> bool {
    has("HEAD") && ((has("objects") && has("refs")) || has("commondir"))
}

/// `at` as a path for messages: `.` for the root.
fn shown(at: &[&str]) -> String {
    if at.is_empty() {
        ".".into()
    } else {
        at.join("/")
    }
}

impl Protection {
    /// The protection of [`PROTECTED_NAMES`] and [`PROTECTED_PATHS`].
    pub(crate) fn default_set() -> Self {
        let mut p = Protection::default();
        p.add_paths(
            PROTECTED_PATHS
                .iter()
                .map(|s| SandboxPath::parse(s).expect("a protected path parses"))
                .collect(),
        );
        p.add_names(PROTECTED_NAMES)
            .expect("a protected name is valid");
        p
    }

    /// Adds `added`, in order, skipping those already there.
    pub(crate) fn add_paths(&mut self, added: Vec<SandboxPath>) {
        for path in added {
            if !self.paths.contains(&path) {
                self.paths.push(path);
            }
        }
    }

    /// Adds names, all or none.
    ///
    /// # Errors
    /// [`SandboxError::InvalidPath`] for the first name that is empty, `.` or `..`, holds a
    /// `/` or a NUL byte, or is longer than [`MAX_NAME_BYTES`].
    pub(crate) fn add_names<I, S>(&mut self, names: I) -> Result<(), SandboxError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut added = Vec::new();
        for name in names {
            let name = name.as_ref();
            let reason = if name.is_empty() || name == "." || name == ".." {
                Some("a protected name is one file or folder name, not empty, `.` or `..`")
            } else if name.contains('/') || name.contains('\0') {
                Some("a protected name holds no `/` and no NUL byte; protect a path instead")
            } else if name.len() > MAX_NAME_BYTES {
                Some("a protected name is at most 255 bytes")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(SandboxError::InvalidPath {
                    path: name.escape_debug().to_string(),
                    reason: reason.into(),
                });
            }
            added.push(name.to_string());
        }
        for name in added {
            if !self.names.contains(&name) {
                self.names.push(name);
            }
        }
        Ok(())
    }

    /// Whether bare repositories are protected (`.git` is a protected name).
    pub(crate) fn repositories(&self) -> bool {
        self.names.iter().any(|n| n == GIT)
    }

    /// Whether `name` is a protected name.
    pub(crate) fn is_name(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// The path up to the first protected name among `comps`.
    fn named(&self, comps: &[&str]) -> Option<String> {
        comps
            .iter()
            .position(|c| self.is_name(c))
            .map(|i| shown(&comps[..=i]))
    }

    /// Refuses a change at `path`, written as `written`, that lands at `real`, for the
    /// protected names and repositories (each sandbox checks its protected paths itself):
    /// when either path goes through a protected name; when a folder above `real` is a
    /// repository or the change would make it one (`HEAD`, `objects`, `refs` or
    /// `commondir` completing the set); with `holds` (removals), also when `real` holds a
    /// protected name or a repository at any depth.
    ///
    /// # Errors
    /// [`SandboxError::ReadOnly`] naming the protected path or repository.
    pub(crate) fn check_names(
        &self,
        path: &SandboxPath,
        written: &[&str],
        real: &[&str],
        holds: bool,
        look: &dyn Look,
    ) -> Result<(), SandboxError> {
        let refuse = |protected: String| SandboxError::ReadOnly {
            path: path.display().into(),
            protected,
        };
        if let Some(p) = self.named(written).or_else(|| self.named(real)) {
            return Err(refuse(p));
        }
        if self.repositories() {
            for i in 0..real.len() {
                let (at, next) = (&real[..i], real[i]);
                let has = |name: &str| {
                    name == next || {
                        let mut entry = at.to_vec();
                        entry.push(name);
                        look.exists(&entry)
                    }
                };
                if is_repository(has) {
                    return Err(refuse(shown(at)));
                }
            }
        }
        if holds && let Some(p) = self.held(real, look) {
            return Err(refuse(p));
        }
        Ok(())
    }

    /// The first protected name or repository at or under the folder `at`, links not
    /// followed.
    fn held(&self, at: &[&str], look: &dyn Look) -> Option<String> {
        let mut stack: Vec<Vec<String>> = vec![at.iter().map(|s| (*s).to_string()).collect()];
        while let Some(dir) = stack.pop() {
            let comps: Vec<&str> = dir.iter().map(String::as_str).collect();
            let entries = look.entries(&comps);
            if self.repositories()
                && !comps.is_empty()
                && is_repository(|n| entries.iter().any(|(name, _)| name == n))
            {
                return Some(shown(&comps));
            }
            for (name, is_dir) in entries {
                let mut child = dir.clone();
                child.push(name);
                if self.is_name(&child[child.len() - 1]) {
                    let comps: Vec<&str> = child.iter().map(String::as_str).collect();
                    return Some(shown(&comps));
                }
                if is_dir {
                    stack.push(child);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A tree of paths: folders end with `/`.
    struct Paths(BTreeMap<String, bool>);

    impl Paths {
        fn new(paths: &[&str]) -> Self {
            let mut map = BTreeMap::new();
            for p in paths {
                let is_dir = p.ends_with('/');
                let p = p.trim_end_matches('/');
                let parts: Vec<&str> = p.split('/').collect();
                for i in 1..parts.len() {
                    map.insert(parts[..i].join("/"), true);
                }
                map.insert(p.to_string(), is_dir);
            }
            Paths(map)
        }
    }

    impl Look for Paths {
        fn exists(&self, at: &[&str]) -> bool {
            self.0.contains_key(&at.join("/"))
        }
        fn entries(&self, at: &[&str]) -> Vec<(String, bool)> {
            let prefix = if at.is_empty() {
                String::new()
            } else {
                format!("{}/", at.join("/"))
            };
            self.0
                .iter()
                .filter_map(|(p, d)| {
                    let rest = p.strip_prefix(&prefix)?;
                    (!rest.contains('/') && !rest.is_empty()).then(|| (rest.to_string(), *d))
                })
                .collect()
        }
    }

    fn check(tree: &Paths, path: &str, holds: bool) -> Result<(), String> {
        let p = SandboxPath::parse(path).unwrap();
        let comps: Vec<&str> = p.components().collect();
        Protection::default_set()
            .check_names(&p, &comps, &comps, holds, tree)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn git_is_protected_at_any_depth_and_as_a_bare_repository() {
        let tree = Paths::new(&[
            "src/lib.rs",
            "sub/.git/config",
            "bare/HEAD",
            "bare/objects/",
            "bare/refs/",
            "half/HEAD",
            "half/refs/",
            "linked/HEAD",
        ]);
        assert_eq!(check(&tree, "src/lib.rs", false), Ok(()));
        assert_eq!(
            check(&tree, "sub/.git/hooks/pre-commit", false),
            Err("`sub/.git/hooks/pre-commit` is read-only in this sandbox (protected path `sub/.git`)".into())
        );
        assert_eq!(
            check(&tree, "new/deep/.git", false).unwrap_err(),
            "`new/deep/.git` is read-only in this sandbox (protected path `new/deep/.git`)"
        );
        assert!(check(&tree, "bare/config", false).is_err());
        // Completing a repository is making one.
        assert!(check(&tree, "half/objects/pack/x", false).is_err());
        assert!(check(&tree, "linked/commondir", false).is_err());
        assert_eq!(check(&tree, "half/notes.txt", false), Ok(()));
        assert_eq!(check(&tree, "HEAD", false), Ok(()), "no objects, no refs");
        // A removal of a folder that holds one.
        assert_eq!(
            check(&tree, "sub", true).unwrap_err(),
            "`sub` is read-only in this sandbox (protected path `sub/.git`)"
        );
        assert!(check(&tree, "bare", true).is_err());
        assert_eq!(check(&tree, "src", true), Ok(()));
    }

    #[test]
    fn names_are_validated_all_or_none() {
        let mut p = Protection::default();
        for bad in ["", ".", "..", "a/b", "a\0"] {
            assert!(
                matches!(
                    p.add_names([".git", bad]),
                    Err(SandboxError::InvalidPath { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(p.names.is_empty());
        p.add_names([".git", ".git", ".hg"]).unwrap();
        assert_eq!(p.names, [".git", ".hg"]);
        assert!(p.repositories());
    }
}
