//! The folder walk shared by `glob` and `grep`: ripgrep's `ignore` walker, confined.
//!
//! - It never follows symbolic links (`follow_links(false)`), so it cannot walk out of the
//!   root through one; the start folder itself was resolved by cap-std first.
//! - It reads no ignore file outside the root: the standard filters are off (they read
//!   `.gitignore` files of every parent folder up to `/` and the user's global gitignore),
//!   and `.gitignore` and `.ignore` are read as custom ignore files of the walked folders.
//!   Those of the folders between the root and the start folder are read through cap-std
//!   and applied in [`WalkBuilder::filter_entry`].
//! - Hidden entries are skipped, and entries are sorted by name, so results are stable.

use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{Walk, WalkBuilder};

use crate::sandbox::{SandboxPath, Shared};

/// The ignore files honoured in every folder, in increasing precedence.
const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];

/// A sorted, gitignore-aware walk of `base` (a folder already checked through cap-std).
/// Entry paths start with the returned ambient path of `base`.
pub(crate) fn walk(shared: &Shared, base: &SandboxPath) -> (Walk, PathBuf) {
    let start = shared.root.join(&base.rel);
    let mut builder = WalkBuilder::new(&start);
    builder
        .standard_filters(false)
        .hidden(true)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b));
    for name in IGNORE_FILES {
        builder.add_custom_ignore_filename(name);
    }
    let outer = outer_ignores(shared, base);
    if !outer.is_empty() {
        builder.filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            !ignored_by(&outer, entry.path(), is_dir)
        });
    }
    (builder.build(), start)
}

/// The ignore rules of the root and of each folder between it and `base` (not `base`
/// itself, which the walker reads), deepest first. Read through cap-std, so an ignore file
/// that is a link out of the root is not read.
fn outer_ignores(shared: &Shared, base: &SandboxPath) -> Vec<Gitignore> {
    let mut folders = vec![PathBuf::new()];
    let mut acc = PathBuf::new();
    let parts: Vec<_> = base.rel.components().collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        acc.push(part);
        folders.push(acc.clone());
    }
    if parts.is_empty() {
        // The walk starts at the root: the walker reads the root's own ignore files.
        return Vec::new();
    }
    let mut out = Vec::new();
    for folder in folders.iter().rev() {
        let mut builder = GitignoreBuilder::new(shared.root.join(folder));
        let mut any = false;
        for name in IGNORE_FILES {
            let rel = folder.join(name);
            let Ok(text) = shared.dir.read_to_string(&rel) else {
                continue;
            };
            for line in text.lines() {
                // A bad line is skipped, as git does.
                if builder.add_line(None, line).is_ok() {
                    any = true;
                }
            }
        }
        if any && let Ok(gi) = builder.build() {
            out.push(gi);
        }
    }
    out
}

/// Whether the deepest rule about `path` in `rules` (deepest folder first) ignores it.
fn ignored_by(rules: &[Gitignore], path: &Path, is_dir: bool) -> bool {
    for gi in rules {
        // `matched_path_or_any_parents` panics on a path outside the matcher's folder.
        if !path.starts_with(gi.path()) {
            continue;
        }
        let m = gi.matched_path_or_any_parents(path, is_dir);
        if m.is_ignore() {
            return true;
        }
        if m.is_whitelist() {
            return false;
        }
    }
    false
}
