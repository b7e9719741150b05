//! The experience file: lessons the agent records after a task (experience cards), read at
//! the next session's start into the semi-static zone and frozen for that session.
//!
//! Where the memory file ([`Memory`](super::Memory)) says *what* was done, one line per task,
//! an experience card says what was *learned*: a build quirk, a convention, a pitfall that
//! would have saved time. The model writes one with the `record_experience` tool
//! ([`ExperienceTool`]); the card is appended to the file at once, and reaches the prompt
//! only at the next session (or an explicit
//! [`refresh_prefix`](halo_core::HaloAgent::refresh_prefix)), so recording one costs no
//! cache miss.
//!
//! The file is plain Markdown, one card per `## ` heading:
//!
//! ```text
//! ## 2026-12-01: the integration tests need the fixtures built first
//! Run `make fixtures` before `cargo test -p app`; without them 12 tests fail with ENOENT.
//! ```

use halo_core::sandbox::{SandboxError, SandboxPath};
use halo_core::zones::iso_date;
use halo_core::{SharedSandbox, Tool, ToolAnnotations, ToolError, ToolOutput, ZoneSection};
use schemars::JsonSchema;
use serde::Deserialize;

use super::Diagnostic;

/// The experience file's default path: `.agent/experience.md`.
pub const DEFAULT_EXPERIENCE_PATH: &str = ".agent/experience.md";

/// How many of the newest cards are loaded by default: 20.
pub const DEFAULT_EXPERIENCE_CARDS: usize = 20;

/// The most bytes of cards loaded by default: 8 KiB (about 2,000 tokens). Older cards that
/// do not fit are left out, whole.
pub const DEFAULT_EXPERIENCE_BYTES: usize = 8 * 1024;

/// The most characters of a card's title; more is cut with `...`.
pub const MAX_TITLE_CHARS: usize = 120;

/// The most characters of a card's lesson; more is cut with `...`.
pub const MAX_LESSON_CHARS: usize = 1_000;

/// Where the experience file is, how much of it is loaded, and whether it is used at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperienceConfig {
    /// The file, relative to the sandbox root.
    pub path: SandboxPath,
    /// How many of the newest cards the snapshot holds at most.
    pub cards: usize,
    /// How many bytes of cards the snapshot holds at most.
    pub max_bytes: usize,
    /// `false`: no snapshot, no tool, no appends.
    pub enabled: bool,
}

impl Default for ExperienceConfig {
    fn default() -> Self {
        ExperienceConfig {
            path: SandboxPath::parse(DEFAULT_EXPERIENCE_PATH).unwrap_or_default(),
            cards: DEFAULT_EXPERIENCE_CARDS,
            max_bytes: DEFAULT_EXPERIENCE_BYTES,
            enabled: true,
        }
    }
}

impl ExperienceConfig {
    /// Experience turned off.
    pub fn off() -> Self {
        ExperienceConfig {
            enabled: false,
            ..ExperienceConfig::default()
        }
    }
}

/// What [`Experience::snapshot`] read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExperienceSnapshot {
    /// The section for the semi-static zone; `None` when off, missing or empty.
    pub section: Option<ZoneSection>,
    /// How many cards it holds.
    pub cards: usize,
    /// How many older cards were left out (over [`ExperienceConfig::cards`] or
    /// [`ExperienceConfig::max_bytes`]).
    pub left_out: usize,
    /// Why the file could not be read, when it exists and could not.
    pub diagnostic: Option<Diagnostic>,
}

/// The experience file of one sandbox.
///
/// ```
/// use std::sync::Arc;
/// use halo_core::SharedSandbox;
/// use halo_sandbox::{VirtualSandbox, harness::{Experience, ExperienceConfig}};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let sandbox: SharedSandbox = Arc::new(VirtualSandbox::new());
/// let experience = Experience::new(sandbox, ExperienceConfig::default());
/// experience
///     .append("fixtures first", "Run `make fixtures` before the tests.", 1_764_547_200_000)
///     .await
///     .unwrap();
/// let snap = experience.snapshot().await;
/// assert_eq!(snap.cards, 1);
/// assert_eq!(
///     snap.section.unwrap().body,
///     "## 2025-12-01: fixtures first\nRun `make fixtures` before the tests."
/// );
/// # });
/// ```
#[derive(Clone)]
pub struct Experience {
    sandbox: SharedSandbox,
    config: ExperienceConfig,
}

impl std::fmt::Debug for Experience {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Experience")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Experience {
    /// The experience file of `sandbox` as `config` says.
    pub fn new(sandbox: SharedSandbox, config: ExperienceConfig) -> Self {
        Experience { sandbox, config }
    }

    /// The configuration.
    pub fn config(&self) -> &ExperienceConfig {
        &self.config
    }

    /// The newest cards within [`ExperienceConfig::cards`] and
    /// [`ExperienceConfig::max_bytes`], oldest first, as a section headed `Experience`
    /// naming the file. Text before the first card heading is not a card and is left out.
    /// Never fails: a file that cannot be read is a diagnostic.
    pub async fn snapshot(&self) -> ExperienceSnapshot {
        if !self.config.enabled || self.config.cards == 0 {
            return ExperienceSnapshot::default();
        }
        let path = &self.config.path;
        let text = match super::read_harness_file(&self.sandbox, path).await {
            Ok(Some(text)) => text,
            Ok(None) => return ExperienceSnapshot::default(),
            Err(diagnostic) => {
                return ExperienceSnapshot {
                    diagnostic: Some(diagnostic),
                    ..ExperienceSnapshot::default()
                };
            }
        };
        let text = halo_core::zones::normalize_text(&text);
        let all = cards(&text);
        let mut kept: Vec<&str> = Vec::new();
        let mut used = 0;
        for card in all.iter().rev() {
            if kept.len() == self.config.cards || used + card.len() > self.config.max_bytes {
                break;
            }
            used += card.len() + 2;
            kept.push(card);
        }
        kept.reverse();
        if kept.is_empty() {
            return ExperienceSnapshot {
                left_out: all.len(),
                ..ExperienceSnapshot::default()
            };
        }
        ExperienceSnapshot {
            section: Some(ZoneSection::new(
                "Experience: lessons recorded after earlier tasks",
                Some(path.as_str().to_string()),
                kept.join("\n\n"),
            )),
            cards: kept.len(),
            left_out: all.len() - kept.len(),
            diagnostic: None,
        }
    }

    /// Appends one card ([`card`](Self::card)) in one atomic
    /// [`Sandbox::append`](halo_core::Sandbox::append): a concurrent writer's card lands
    /// before or after it, never inside. Returns `false` (writing nothing) when experience
    /// is off.
    ///
    /// # Errors
    /// The sandbox's error when the file cannot be written.
    pub async fn append(
        &self,
        title: &str,
        lesson: &str,
        now_ms: u64,
    ) -> Result<bool, SandboxError> {
        if !self.config.enabled {
            return Ok(false);
        }
        self.sandbox
            .append(
                &self.config.path,
                Self::card(title, lesson, now_ms).into_bytes(),
            )
            .await?;
        Ok(true)
    }

    /// One card: a blank line, `## YYYY-MM-DD: TITLE` and the lesson. The title is one line
    /// of at most [`MAX_TITLE_CHARS`] characters; the lesson keeps its lines, at most
    /// [`MAX_LESSON_CHARS`] characters, with no line of it read as a heading (leading `#`s
    /// are dropped) and no blank lines inside.
    pub fn card(title: &str, lesson: &str, now_ms: u64) -> String {
        let title = cut(
            &title.split_whitespace().collect::<Vec<_>>().join(" "),
            MAX_TITLE_CHARS,
        );
        let lesson = halo_core::zones::normalize_text(lesson);
        let lines: Vec<&str> = lesson
            .lines()
            .map(|l| l.trim_start_matches('#').trim_end())
            .filter(|l| !l.trim().is_empty())
            .collect();
        let lesson = cut(&lines.join("\n"), MAX_LESSON_CHARS);
        format!("\n## {}: {title}\n{lesson}\n", iso_date(now_ms))
    }
}

/// The cards of a file: each from a line starting with `## ` to the next such line, blank
/// lines around it trimmed.
fn cards(text: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with("## ") {
            starts.push(offset);
        }
        offset += line.len();
    }
    let mut out = Vec::with_capacity(starts.len());
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        let card = text[start..end].trim();
        if !card.is_empty() {
            out.push(card);
        }
    }
    out
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max - 3).collect();
    format!("{head}...")
}

/// The arguments of `record_experience`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordExperienceArgs {
    /// A short title naming the lesson (one line).
    pub title: String,
    /// The lesson itself: what to do, or not do, and why, in a few sentences.
    pub lesson: String,
}

/// `record_experience {"title", "lesson"}`: appends a card to the experience file. The card
/// reaches the prompt at the next session, not this one, so a call costs no cache miss.
/// Idempotent it is not (two calls write two cards), so a resumed run does not repeat it.
#[derive(Debug, Clone)]
pub struct ExperienceTool {
    experience: Experience,
    clock: std::sync::Arc<dyn halo_core::Clock>,
}

impl ExperienceTool {
    /// The tool over `experience`, dating cards with `clock`.
    pub fn new(experience: Experience, clock: std::sync::Arc<dyn halo_core::Clock>) -> Self {
        ExperienceTool { experience, clock }
    }
}

/// The tool's name, a contract: `record_experience`.
pub const RECORD_EXPERIENCE: &str = "record_experience";

impl Tool for ExperienceTool {
    type Args = RecordExperienceArgs;

    fn name(&self) -> &str {
        RECORD_EXPERIENCE
    }

    fn description(&self) -> &str {
        "Record a lesson learned in this task for later sessions of this project: something \
         not obvious from the code that would have saved time (a build or test quirk, a \
         convention, a pitfall and its fix). Not for progress notes or what the rules files \
         already say. The lesson is read at the start of the next session, not in this one."
    }

    /// Writes one file in the workspace (closed world): a permission policy classes it as
    /// a write. Not idempotent: a second call appends a second card.
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default().with_open_world(false)
    }

    async fn call(&self, args: RecordExperienceArgs) -> Result<ToolOutput, ToolError> {
        if args.title.trim().is_empty() || args.lesson.trim().is_empty() {
            return Err(ToolError::InvalidArguments(
                "`title` and `lesson` must both be non-empty".into(),
            ));
        }
        match self
            .experience
            .append(&args.title, &args.lesson, self.clock.now_ms())
            .await
        {
            Ok(true) => Ok(ToolOutput::text(format!(
                "recorded in {}; it will be read at the start of the next session",
                self.experience.config().path
            ))),
            Ok(false) => Ok(ToolOutput::text(
                "experience is turned off for this session; nothing was recorded",
            )),
            Err(e) => Err(ToolError::Failed(format!(
                "the lesson was not recorded: {e}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_is_one_heading_and_a_lesson_that_cannot_start_another_card() {
        let card = Experience::card(
            "  tests\n need  fixtures ",
            "## not a heading\r\nrun make fixtures\n\n\nfirst",
            0,
        );
        assert_eq!(
            card,
            "\n## 1970-01-01: tests need fixtures\n not a heading\nrun make fixtures\nfirst\n"
        );
        assert_eq!(
            cards(&card),
            ["## 1970-01-01: tests need fixtures\n not a heading\nrun make fixtures\nfirst"]
        );
    }

    #[test]
    fn long_titles_and_lessons_are_cut_on_characters() {
        let card = Experience::card(&"é".repeat(500), &"ü".repeat(5_000), 0);
        let title = card.lines().nth(1).unwrap();
        assert_eq!(
            title.chars().count(),
            "## 1970-01-01: ".len() + MAX_TITLE_CHARS
        );
        assert!(title.ends_with("..."));
        assert_eq!(
            card.lines().nth(2).unwrap().chars().count(),
            MAX_LESSON_CHARS
        );
    }

    #[test]
    fn text_before_the_first_card_is_not_a_card() {
        let text = "# Lessons\nintro\n\n## a\none\n\n## b\ntwo\n";
        assert_eq!(cards(text), ["## a\none", "## b\ntwo"]);
    }
}
