//! `cargo xtask interop`, the Agent Skills part (issue 14 §4): Halo's `SKILL.md` verdicts
//! against the reference validator, PyPI `skills-ref` (its `agentskills validate` command).
//!
//! 1. A virtualenv under the target dir (`skills-interop/venv`) with `skills-ref` pinned
//!    (`crates/halo-sandbox/tests/skills-interop/requirements.txt`).
//! 2. The real skills of npm `@elizaos/skills`, from the npm project with its lock file in
//!    `crates/halo-sandbox/tests/skills-interop` (`npm ci` when `node_modules` is missing or
//!    older than the lock), and the hand-made edge cases in
//!    `crates/halo-sandbox/tests/data/skills`.
//! 3. `agentskills validate` on each skill folder; the verdicts go to
//!    `skills-interop/verdicts.json` (`[{"dir", "valid", "message"}]`).
//! 4. The file's path is returned: halo-sandbox's `harness::interop` tests run with
//!    `HALO_SKILLS_INTEROP` naming it, and fail when Halo disagrees where no named leniency
//!    explains it, and when the variable is set but the corpus is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::interop::{npm_ci_if_missing, target_dir};

/// The npm project of the corpus, relative to the workspace root.
const CORPUS_PROJECT: &str = "crates/halo-sandbox/tests/skills-interop";

/// The hand-made edge cases, relative to the workspace root.
const FIXTURES: &str = "crates/halo-sandbox/tests/data/skills";

pub fn run(root: &Path) -> anyhow::Result<PathBuf> {
    let work = target_dir(root).join("skills-interop");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let python = crate::interop::python_venv(
        &work.join("venv"),
        &root.join(CORPUS_PROJECT).join("requirements.txt"),
    )?;
    let validator = python.with_file_name("agentskills");
    let project = root.join(CORPUS_PROJECT);
    npm_ci_if_missing(&project)?;

    let mut dirs = skill_dirs(&project.join("node_modules/@elizaos/skills"))?;
    let real = dirs.len();
    if real == 0 {
        bail!(
            "no SKILL.md under {}/node_modules/@elizaos/skills",
            project.display()
        );
    }
    dirs.extend(skill_dirs(&root.join(FIXTURES))?);
    let mut verdicts = Vec::new();
    for dir in &dirs {
        let out = Command::new(&validator)
            .arg("validate")
            .arg(dir)
            .output()
            .with_context(|| format!("cannot run {}", validator.display()))?;
        verdicts.push(serde_json::json!({
            "dir": dir,
            "valid": out.status.success(),
            "message": String::from_utf8_lossy(&out.stderr).trim(),
        }));
    }
    let file = work.join("verdicts.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&verdicts)?)
        .with_context(|| format!("cannot write {}", file.display()))?;
    let valid = verdicts.iter().filter(|v| v["valid"] == true).count();
    eprintln!(
        "xtask interop: skills-ref judged {} skills ({real} from @elizaos/skills), {valid} valid",
        verdicts.len()
    );
    Ok(file)
}

/// The folders directly holding a `SKILL.md` under `base` (any depth), sorted.
fn skill_dirs(base: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![base.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?;
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "SKILL.md")
                && let Some(parent) = path.parent()
            {
                out.push(parent.to_path_buf());
            }
        }
    }
    out.sort();
    Ok(out)
}
