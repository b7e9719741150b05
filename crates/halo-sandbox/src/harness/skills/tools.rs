//! The skill tools: `load_skill {"name"}`, `read_skill_file {"name", "path"}` and
//! `skill_run {"name", "command", "output_files"}` (their names are contracts).
//!
//! Their schemas constrain `name` to an enum of the skills found (the client guide's
//! advice), so they are byte-stable for one set of skills. `load_skill`'s result is marked
//! discardable: a context strategy drops it first, and the model can load it again.

use std::fmt::Write as _;
use std::sync::Arc;

use halo_core::sandbox::{FileKind, GlobRequest, SandboxPath};
use halo_core::{
    DynTool, SharedSandbox, ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::run::{SkillRunOptions, run_skill};
use super::{Skill, SkillSet};

/// The most bytes of a skill body or a skill file returned: 64 KiB.
const MAX_CONTENT_BYTES: usize = 64 * 1024;

/// The most bundled files `load_skill` lists.
const MAX_RESOURCES: usize = 100;

/// The skill tools over `sandbox` for the skills in `set`: none when `set` is empty;
/// `load_skill` and `read_skill_file` otherwise, and `skill_run` when the sandbox runs
/// commands.
///
/// ```
/// use std::sync::Arc;
/// use halo_core::{Sandbox, SharedSandbox, sandbox::SandboxPath};
/// use halo_sandbox::{VirtualSandbox, harness::{SkillDiscovery, SkillRunOptions, skill_tools}};
/// use serde_json::json;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let sandbox: SharedSandbox = Arc::new(VirtualSandbox::new());
/// let p = |s: &str| SandboxPath::parse(s).unwrap();
/// sandbox.write(&p(".agents/skills/pdf/SKILL.md"), b"---\nname: pdf\ndescription: PDFs.\n---\nUse pdftotext.\n".to_vec()).await.unwrap();
/// let set = Arc::new(SkillDiscovery::new().discover(sandbox.as_ref()).await);
/// let tools = skill_tools(sandbox, set, SkillRunOptions::default());
/// let names: Vec<_> = tools.iter().map(|t| t.spec().name).collect();
/// assert_eq!(names, ["load_skill", "read_skill_file"]); // no commands in a VirtualSandbox
/// let out = tools[0].call_json(json!({"name": "pdf"}), &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "load_skill", "{}"))).await.unwrap();
/// assert!(out.discardable && out.content.contains("Use pdftotext."));
/// # });
/// ```
pub fn skill_tools(
    sandbox: SharedSandbox,
    set: Arc<SkillSet>,
    options: SkillRunOptions,
) -> Vec<Arc<dyn DynTool>> {
    if set.is_empty() {
        return Vec::new();
    }
    let ctx = Arc::new(Ctx {
        sandbox,
        set,
        options,
    });
    let mut tools: Vec<Arc<dyn DynTool>> = vec![
        Arc::new(LoadSkill(Arc::clone(&ctx))),
        Arc::new(ReadSkillFile(Arc::clone(&ctx))),
    ];
    if ctx.sandbox.capabilities().exec {
        tools.push(Arc::new(SkillRun(ctx)));
    }
    tools
}

pub(super) struct Ctx {
    pub(super) sandbox: SharedSandbox,
    pub(super) set: Arc<SkillSet>,
    pub(super) options: SkillRunOptions,
}

impl Ctx {
    /// The skill named `name`, or the failure listing the skills there are.
    pub(super) fn skill(&self, name: &str) -> Result<&Skill, ToolError> {
        self.set.get(name).ok_or_else(|| {
            ToolError::Failed(format!(
                "there is no skill `{name}`; the skills are: {}",
                self.set.names().join(", ")
            ))
        })
    }

    fn name_schema(&self) -> Value {
        json!({
            "type": "string",
            "enum": self.set.names(),
            "description": "The skill's name, as in <available_skills>.",
        })
    }
}

fn args<T: for<'de> Deserialize<'de>>(v: Value) -> Result<T, ToolError> {
    serde_json::from_value(v).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

/// `text` cut to `max` bytes on a character boundary, with a note of what was left out.
pub(super) fn bounded(text: &str, max: usize, hint: &str) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... {} more bytes not shown; {hint} ...]",
        &text[..end],
        text.len() - end
    )
}

struct LoadSkill(Arc<Ctx>);

#[derive(Deserialize)]
struct LoadArgs {
    name: String,
}

#[halo_core::async_trait]
impl DynTool for LoadSkill {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "load_skill",
            "Loads a skill from <available_skills>: its instructions (the SKILL.md body) and the list of its bundled files. Load a skill before doing a task its description matches, then follow it.",
            json!({
                "type": "object",
                "properties": {"name": self.0.name_schema()},
                "required": ["name"],
                "additionalProperties": false,
            }),
        )
    }

    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }

    async fn call_json(
        &self,
        arguments: Value,
        _cx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let a: LoadArgs = args(arguments)?;
        let skill = self.0.skill(&a.name)?;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<skill_content name=\"{}\">\nSkill folder: {} (relative paths in this skill resolve against it; read its files with read_skill_file{}).\n",
            skill.name(),
            skill.dir,
            if self.0.sandbox.capabilities().exec {
                ", run its scripts with skill_run"
            } else {
                ""
            }
        );
        out.push_str(&bounded(
            skill.file.body.trim_end(),
            MAX_CONTENT_BYTES,
            "read the rest with read_skill_file path SKILL.md",
        ));
        let resources = self
            .0
            .sandbox
            .glob(GlobRequest {
                pattern: "**".into(),
                base: skill.dir.clone(),
                include_ignored: true,
                limit: MAX_RESOURCES,
            })
            .await;
        if let Ok(found) = resources {
            let files: Vec<String> = found
                .paths
                .iter()
                .filter(|p| **p != skill.location)
                .filter_map(|p| p.as_str().strip_prefix(skill.dir.as_str()))
                .map(|p| p.trim_start_matches('/').to_string())
                .collect();
            if !files.is_empty() {
                out.push_str("\n\n<skill_resources>\n");
                for f in &files {
                    out.push_str(f);
                    out.push('\n');
                }
                if found.truncated {
                    let _ = writeln!(out, "[more than {MAX_RESOURCES} files; not all listed]");
                }
                out.push_str("</skill_resources>");
            }
        }
        out.push_str("\n</skill_content>");
        Ok(ToolOutput::text(out).discardable())
    }
}

struct ReadSkillFile(Arc<Ctx>);

#[derive(Deserialize)]
struct ReadArgs {
    name: String,
    path: String,
}

#[halo_core::async_trait]
impl DynTool for ReadSkillFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "read_skill_file",
            "Reads a file bundled with a skill (references, forms, scripts, assets), by its path relative to the skill's folder, as listed in <skill_resources>. Only files inside the skill's folder can be read.",
            json!({
                "type": "object",
                "properties": {
                    "name": self.0.name_schema(),
                    "path": {
                        "type": "string",
                        "description": "The file's path relative to the skill's folder, such as references/REFERENCE.md.",
                    },
                },
                "required": ["name", "path"],
                "additionalProperties": false,
            }),
        )
    }

    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }

    async fn call_json(
        &self,
        arguments: Value,
        _cx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let a: ReadArgs = args(arguments)?;
        let skill = self.0.skill(&a.name)?;
        let path = confined(self.0.sandbox.as_ref(), skill, &a.path).await?;
        let bytes = self
            .0
            .sandbox
            .read(&path)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        match String::from_utf8(bytes) {
            Ok(text) => Ok(ToolOutput::text(bounded(
                &text,
                MAX_CONTENT_BYTES,
                &format!("read the rest with read at path {path} and an offset"),
            ))),
            Err(e) => Ok(ToolOutput::text(format!(
                "`{}` is a binary file of {} bytes; use skill_run to work with it",
                a.path,
                e.as_bytes().len()
            ))),
        }
    }
}

/// `rel` inside the skill's folder, refusing anything that leaves it: `..` above the
/// folder, an absolute path, or a symbolic link on the way (which could point anywhere
/// in the root).
pub(super) async fn confined(
    sandbox: &dyn halo_core::Sandbox,
    skill: &Skill,
    rel: &str,
) -> Result<SandboxPath, ToolError> {
    let outside = || {
        ToolError::Failed(format!(
            "`{rel}` is outside the folder of skill `{}`; give a path relative to it, such as references/REFERENCE.md",
            skill.name()
        ))
    };
    let path = skill.dir.join(rel).map_err(|_| outside())?;
    if !path.starts_with(&skill.dir) || path == skill.dir {
        return Err(outside());
    }
    let mut at = skill.dir.clone();
    let inner = path.as_str()[skill.dir.as_str().len()..].trim_start_matches('/');
    for part in inner.split('/') {
        let entries = sandbox
            .list(&at)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        match entries.iter().find(|e| e.name == part) {
            Some(e) if e.kind == FileKind::Symlink => {
                return Err(ToolError::Failed(format!(
                    "`{rel}` goes through a symbolic link, which read_skill_file does not follow"
                )));
            }
            Some(_) => {}
            None => {
                return Err(ToolError::Failed(format!(
                    "skill `{}` has no file `{rel}`; load_skill lists its files",
                    skill.name()
                )));
            }
        }
        at = at.join(part).map_err(|_| outside())?;
    }
    Ok(path)
}

struct SkillRun(Arc<Ctx>);

#[derive(Deserialize)]
struct RunArgs {
    name: String,
    command: String,
    #[serde(default)]
    output_files: Vec<String>,
}

#[halo_core::async_trait]
impl DynTool for SkillRun {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "skill_run",
            format!(
                "Runs a shell command for a skill in an isolated workspace, in the OS sandbox: the skill's folder is staged read-only at $SKILLS_DIR, the command runs in an empty $WORK_DIR, and files it writes to $OUTPUT_DIR matching output_files (globs relative to $OUTPUT_DIR) are returned. Returns the exit code, stdout, stderr and those files (each at most {} bytes). Times out after {} s.",
                self.0.options.max_file_bytes,
                self.0.options.timeout.as_secs()
            ),
            json!({
                "type": "object",
                "properties": {
                    "name": self.0.name_schema(),
                    "command": {
                        "type": "string",
                        "description": "A bash command line, such as: python3 \"$SKILLS_DIR/scripts/extract.py\" in.pdf > \"$OUTPUT_DIR/out.txt\"",
                    },
                    "output_files": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Globs of files under $OUTPUT_DIR to return, such as [\"*.txt\"]; empty for none.",
                    },
                },
                "required": ["name", "command", "output_files"],
                "additionalProperties": false,
            }),
        )
    }

    async fn call_json(
        &self,
        arguments: Value,
        _cx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let a: RunArgs = args(arguments)?;
        let skill = self.0.skill(&a.name)?;
        run_skill(&self.0, skill, &a.command, &a.output_files).await
    }
}
