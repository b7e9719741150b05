//! `skill_run`: a skill's command in an isolated workspace, through the sandbox's `exec`
//! (so the OS sandbox of `ContainerSandbox` applies).
//!
//! Under [`STAGING_DIR`]`/<name>/` the skill's folder is copied to `skill/` (made read-only
//! by `chmod -R a-w` before the command runs), next to an empty `work/` (the command's
//! working directory) and an empty `out/`. The copy is skipped when the SHA-256 of the
//! skill's files (paths and contents) equals that of the copy, so a changed skill and a
//! copy a command changed are both staged again.
//! `$SKILLS_DIR`, `$WORK_DIR` and `$OUTPUT_DIR` are their absolute paths.

use std::fmt::Write as _;
use std::time::Duration;

use globset::{Glob, GlobSetBuilder};
use halo_core::sandbox::{ExecRequest, GlobRequest, SandboxError, SandboxPath};
use halo_core::{ToolError, ToolOutput};
use sha2::{Digest, Sha256};

use super::Skill;
use super::tools::{Ctx, bounded};
use crate::tools::{DEFAULT_EXEC_TIMEOUT, DEFAULT_OUTPUT_LIMIT};

/// Where skills are staged, relative to the sandbox root.
pub const STAGING_DIR: &str = ".halo/skills";

/// The most files of one skill staged.
const MAX_STAGED_FILES: usize = 2000;

/// The limits of `skill_run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRunOptions {
    /// When the command's process group is killed (default [`DEFAULT_EXEC_TIMEOUT`]).
    pub timeout: Duration,
    /// The most bytes kept of each of stdout and stderr, head and tail (default
    /// [`DEFAULT_OUTPUT_LIMIT`] / 2).
    pub output_limit: usize,
    /// The most bytes shown of each output file (default 16 KiB).
    pub max_file_bytes: usize,
    /// The most output files returned (default 20).
    pub max_files: usize,
}

impl Default for SkillRunOptions {
    fn default() -> Self {
        SkillRunOptions {
            timeout: DEFAULT_EXEC_TIMEOUT,
            output_limit: DEFAULT_OUTPUT_LIMIT / 2,
            max_file_bytes: 16 * 1024,
            max_files: 20,
        }
    }
}

fn failed(e: SandboxError) -> ToolError {
    ToolError::Failed(e.to_string())
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The files under `dir` (paths relative to it, contents) and the SHA-256 of them all, as
/// lowercase hex.
async fn tree(
    sandbox: &dyn halo_core::Sandbox,
    dir: &SandboxPath,
) -> Result<(String, Vec<(String, Vec<u8>)>), ToolError> {
    let found = sandbox
        .glob(GlobRequest {
            pattern: "**".into(),
            base: dir.clone(),
            include_ignored: true,
            limit: MAX_STAGED_FILES,
        })
        .await
        .map_err(failed)?;
    let mut files = Vec::with_capacity(found.paths.len());
    let mut hasher = Sha256::new();
    for path in &found.paths {
        let rel = path.as_str()[dir.as_str().len()..].trim_start_matches('/');
        let bytes = sandbox.read(path).await.map_err(failed)?;
        hasher.update(rel.as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
        files.push((rel.to_string(), bytes));
    }
    let hash = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((hash, files))
}

/// Stages `skill`, runs `command`, and reports the result and the matching output files.
pub(super) async fn run_skill(
    ctx: &Ctx,
    skill: &Skill,
    command: &str,
    output_files: &[String],
) -> Result<ToolOutput, ToolError> {
    let mut globs = GlobSetBuilder::new();
    for g in output_files {
        let glob = Glob::new(g)
            .map_err(|e| ToolError::Failed(format!("invalid glob `{g}` in output_files: {e}")))?;
        globs.add(glob);
    }
    let globs = globs
        .build()
        .map_err(|e| ToolError::Failed(format!("invalid output_files: {e}")))?;
    let sandbox = ctx.sandbox.as_ref();
    let stage = SandboxPath::parse(STAGING_DIR)
        .and_then(|s| s.join(skill.name()))
        .map_err(failed)?;
    let copy = stage.join("skill").map_err(failed)?;

    // The skill's files and their hash, against the copy's: a copy the last command
    // changed is staged again.
    let (hash, files) = tree(sandbox, &skill.dir).await?;
    let copy_there = sandbox.stat(&copy).await.is_ok();
    let unchanged = copy_there && tree(sandbox, &copy).await.is_ok_and(|(h, _)| h == hash);
    if !unchanged {
        if copy_there {
            // The last copy was made read-only: make it writable to remove it.
            let _ = sandbox
                .exec(ExecRequest {
                    command: format!("chmod -R u+w -- {}", quote(copy.as_str())),
                    timeout: Duration::from_secs(30),
                    output_limit: 1024,
                })
                .await;
            match sandbox.remove(&copy, true).await {
                Ok(()) | Err(SandboxError::NotFound { .. }) => {}
                Err(e) => return Err(failed(e)),
            }
        }
        for (rel, bytes) in files {
            let to = copy.join(&rel).map_err(failed)?;
            sandbox.write(&to, bytes).await.map_err(failed)?;
        }
    }
    for dir in ["work", "out"] {
        let at = stage.join(dir).map_err(failed)?;
        match sandbox.remove(&at, true).await {
            Ok(()) | Err(SandboxError::NotFound { .. }) => {}
            Err(e) => return Err(failed(e)),
        }
    }
    let stage_q = stage.as_str();
    let script = format!(
        "R=\"$PWD\"\nexport SKILLS_DIR=\"$R\"/{s} WORK_DIR=\"$R\"/{w} OUTPUT_DIR=\"$R\"/{o}\nmkdir -p \"$SKILLS_DIR\" \"$WORK_DIR\" \"$OUTPUT_DIR\" && chmod -R a-w \"$SKILLS_DIR\" && cd \"$WORK_DIR\" || exit 125\n{command}\n",
        s = quote(&format!("{stage_q}/skill")),
        w = quote(&format!("{stage_q}/work")),
        o = quote(&format!("{stage_q}/out")),
    );
    let out = sandbox
        .exec(ExecRequest {
            command: script,
            timeout: ctx.options.timeout,
            output_limit: ctx.options.output_limit,
        })
        .await
        .map_err(failed)?;

    let mut text = String::new();
    match (out.exit_code, out.timed_out, out.signal) {
        (_, true, _) => {
            let _ = write!(text, "timed out after {} s", ctx.options.timeout.as_secs());
        }
        (Some(code), _, _) => {
            let _ = write!(text, "exit code: {code}");
        }
        (None, _, Some(sig)) => {
            let _ = write!(text, "killed by signal {sig}");
        }
        (None, _, None) => text.push_str("ended without an exit code"),
    }
    let _ = write!(
        text,
        "\nskill staged at {stage_q}/skill ({}, sha256 {})",
        if unchanged {
            "unchanged, not copied"
        } else {
            "copied"
        },
        &hash[..12]
    );
    let _ = write!(
        text,
        "\n<stdout>\n{}\n</stdout>\n<stderr>\n{}\n</stderr>",
        out.stdout.trim_end(),
        out.stderr.trim_end()
    );

    if !output_files.is_empty() {
        let out_dir = stage.join("out").map_err(failed)?;
        let produced = sandbox
            .glob(GlobRequest {
                pattern: "**".into(),
                base: out_dir.clone(),
                include_ignored: true,
                limit: 1000,
            })
            .await
            .map(|g| g.paths)
            .unwrap_or_default();
        let matching: Vec<&SandboxPath> = produced
            .iter()
            .filter(|p| {
                let rel = p.as_str()[out_dir.as_str().len()..].trim_start_matches('/');
                globs.is_match(rel)
            })
            .collect();
        if matching.is_empty() {
            text.push_str("\nno file in $OUTPUT_DIR matches output_files");
        }
        for (i, path) in matching.iter().enumerate() {
            let rel = path.as_str()[out_dir.as_str().len()..].trim_start_matches('/');
            if i == ctx.options.max_files {
                let _ = write!(
                    text,
                    "\n[{} more matching files not shown; they are under {}]",
                    matching.len() - i,
                    out_dir
                );
                break;
            }
            let bytes = sandbox.read(path).await.map_err(failed)?;
            match std::str::from_utf8(&bytes) {
                Ok(content) => {
                    let _ = write!(
                        text,
                        "\n<output_file path=\"{rel}\" bytes=\"{}\">\n{}\n</output_file>",
                        bytes.len(),
                        bounded(
                            content.trim_end(),
                            ctx.options.max_file_bytes,
                            &format!("read it at {path}")
                        )
                    );
                }
                Err(_) => {
                    let _ = write!(
                        text,
                        "\n<output_file path=\"{rel}\" bytes=\"{}\" binary=\"true\">it is at {path}</output_file>",
                        bytes.len()
                    );
                }
            }
        }
    }
    Ok(ToolOutput::text(text))
}
