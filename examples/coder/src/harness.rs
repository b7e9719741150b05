//! The harness around a hosted model: the rules files, the memory snapshot, the experience
//! cards and the skill catalog of `--dir` in the prompt's semi-static zone, the skill tools
//! and `record_experience`, and a memory entry after each task. The small embedded model gets
//! none of this.

use std::sync::Arc;

use halo_core::sandbox::SandboxPath;
use halo_core::zones::PromptZones;
use halo_core::{Clock, DynTool, HaloAgent, Message, SharedSandbox, SystemClock, ToolHook};
use halo_sandbox::harness::{
    Experience, ExperienceConfig, ExperienceTool, Memory, MemoryConfig, SkillDiscovery,
    SkillRunOptions, catalog, catalog_budget, load_rules, skill_tools,
};
use halo_sandbox::policy::CommandDenylist;

/// What was loaded for one session.
pub struct Harness {
    /// The system text's zones: `SYSTEM`, then rules, memory and the skill catalog.
    pub zones: PromptZones,
    /// `load_skill`, `read_skill_file`, `skill_run` (none without skills), and
    /// `record_experience`.
    pub tools: Vec<Arc<dyn DynTool>>,
    /// The startup lines: what was loaded, and every warning and skipped file.
    pub lines: Vec<String>,
    memory: Memory,
}

/// Loads rules, memory and skills from the sandbox root; the catalog gets 2 % of a
/// `context_window`-token window.
pub async fn load(sandbox: SharedSandbox, system: &str, context_window: u64) -> Harness {
    let mut lines = Vec::new();
    let rules = load_rules(sandbox.as_ref(), &SandboxPath::root()).await;
    let files = rules.files();
    lines.push(if files.is_empty() {
        "rules: none (AGENTS.md, CLAUDE.md, .agent/rules/*.md)".to_string()
    } else {
        format!("rules: {}", files.join(", "))
    });
    lines.extend(rules.diagnostics.iter().map(ToString::to_string));

    let memory = Memory::new(Arc::clone(&sandbox), MemoryConfig::default());
    let snapshot = memory.snapshot().await;
    lines.push(match snapshot.lines {
        0 => format!("memory: none yet ({})", memory.config().path),
        1 => format!("memory: 1 line from {}", memory.config().path),
        n => format!("memory: {n} lines from {}", memory.config().path),
    });
    lines.extend(snapshot.diagnostic.iter().map(ToString::to_string));

    let experience = Experience::new(Arc::clone(&sandbox), ExperienceConfig::default());
    let lessons = experience.snapshot().await;
    let path = &experience.config().path;
    lines.push(match (lessons.cards, lessons.left_out) {
        (0, 0) => format!("experience: none yet ({path})"),
        (1, 0) => format!("experience: 1 card from {path}"),
        (n, 0) => format!("experience: {n} cards from {path}"),
        (n, out) => format!("experience: the newest {n} cards from {path} ({out} older left out)"),
    });
    lines.extend(lessons.diagnostic.iter().map(ToString::to_string));

    let set = SkillDiscovery::new().discover(sandbox.as_ref()).await;
    let catalog = catalog(&set, catalog_budget(context_window));
    lines.push(match set.skills.len() {
        0 => "skills: none".to_string(),
        n => format!(
            "skills: {n} ({}), catalog {} of {} tokens{}",
            set.names().join(", "),
            catalog.tokens,
            catalog.budget_tokens,
            if catalog.shortened > 0 {
                format!(", {} descriptions shortened", catalog.shortened)
            } else {
                String::new()
            }
        ),
    });
    lines.extend(set.diagnostics.iter().map(ToString::to_string));

    let mut zones = PromptZones::new(system).sections(rules.sections);
    if let Some(section) = snapshot.section {
        zones = zones.section(section);
    }
    if let Some(section) = lessons.section {
        zones = zones.section(section);
    }
    if let Some(note) = catalog.note() {
        zones = zones.section(note);
    }
    let zones = zones.skills(catalog.skills);
    let mut tools = skill_tools(sandbox, Arc::new(set), SkillRunOptions::default());
    tools.push(Arc::new(ExperienceTool::new(
        experience,
        Arc::new(SystemClock),
    )));
    Harness {
        zones,
        tools,
        lines,
        memory,
    }
}

impl Harness {
    /// The hooks the skill tools need ahead of the session's others: the command denylist
    /// on `skill_run`'s `command`, as on `bash`'s.
    pub fn hooks(&self) -> Vec<Arc<dyn ToolHook>> {
        vec![Arc::new(
            CommandDenylist::new().for_tool("skill_run", "command"),
        )]
    }

    /// Appends the memory entry of a run: its task (`None` when it resumed one: the log's
    /// last user message) and its answer, or why it stopped. A run that stopped where
    /// `--resume` can continue it (`resumable`) writes nothing: the resumed run then reads
    /// the memory the interrupted one read, sends the requests an uninterrupted run would
    /// have, and writes the entry when it finishes.
    pub async fn remember(
        &self,
        task: Option<&str>,
        agent: &HaloAgent,
        outcome: &anyhow::Result<()>,
        resumable: bool,
    ) -> Option<String> {
        let answer = match agent.log().last() {
            Some(Message::Assistant(turn)) if turn.tool_calls.is_empty() => Some(&turn.text),
            _ => None,
        };
        let result = match (outcome, answer) {
            (Ok(()), Some(text)) if text.is_empty() => "an empty answer".to_string(),
            (Ok(()), Some(text)) => text.clone(),
            _ if resumable => return None,
            (Err(e), _) => format!("failed: {e:#}"),
            (Ok(()), None) => "stopped before an answer".to_string(),
        };
        let log = agent.log();
        let from_log = || {
            let messages: Vec<&Message> = log.messages().collect();
            (0..messages.len()).rev().find_map(|i| match messages[i] {
                m @ Message::User { .. } if !log.is_injected(i) => Some(m.text()),
                _ => None,
            })
        };
        let task = task.map(str::to_string).or_else(from_log)?;
        match self
            .memory
            .append(&task, &result, SystemClock.now_ms())
            .await
        {
            Ok(_) => None,
            Err(e) => Some(format!(
                "warning: {}: the memory entry was not written: {e}",
                self.memory.config().path
            )),
        }
    }
}
