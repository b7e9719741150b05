//! Prompt zones: the system text built from three zones, in
//! order of how often they change.
//!
//! - **static**: the role and the instructions, fixed in the code;
//! - **semi-static**: the rules files, the skill catalog and the memory snapshot, read once
//!   when the session starts and frozen for it ([`ZoneSection`]s; the catalog is the
//!   prefix's own `<available_skills>` block);
//! - **volatile**: the date, to the day, after [`VOLATILE_MARKER`] at the very end.
//!
//! Nothing per turn enters (no time of day, no git status), so the bytes change at most once
//! a day and otherwise only on an explicit refresh
//! ([`HaloAgent::refresh_prefix`](crate::HaloAgent::refresh_prefix)), which is one expected
//! miss in the [`CacheLedger`](crate::CacheLedger). A section that comes from a file names
//! its path, so the model can read the live version with a tool. Rendering is a pure
//! function of the zones and the day: the same inputs give the same bytes.
//!
//! ```
//! use halo_core::zones::{PromptZones, ZoneSection};
//!
//! let zones = PromptZones::new("You are a coding agent.")
//!     .section(ZoneSection::file("AGENTS.md", "Run `cargo test` before you answer."));
//! let prefix = zones.to_prefix(1_764_547_200_000); // 2025-12-01T00:00:00Z
//! let text = prefix.system_text();
//! assert!(text.starts_with("You are a coding agent.\n\n"));
//! assert!(text.contains("## AGENTS.md (file `AGENTS.md`)\nRun `cargo test`"));
//! assert!(text.ends_with("Today's date: 2025-12-01."));
//! ```

use serde::{Deserialize, Serialize};

use crate::prefix::{SkillMeta, StablePrefix};

/// The line that opens the volatile zone, at the very end of the system text. Everything
/// before it is stable for the session.
pub const VOLATILE_MARKER: &str = "<!-- volatile: below this line changes between sessions -->";

/// The heading of the semi-static zone, telling the model the snapshot is from the session's
/// start.
pub const SEMI_STATIC_HEADING: &str = "# Project context\n\nRead when this session started; a file may have changed since: read its path for the live version.";

/// One part of the semi-static zone: a heading and its text, with the file it was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneSection {
    /// The heading (a rules file's path, `Memory`).
    pub title: String,
    /// The sandbox-relative path of the file the text was read from, named in the heading.
    pub path: Option<String>,
    /// The text, as read (trailing newlines trimmed when rendered).
    pub body: String,
}

impl ZoneSection {
    /// A section read from the file at `path` (also its heading).
    pub fn file(path: impl Into<String>, body: impl Into<String>) -> Self {
        let path = path.into();
        ZoneSection {
            title: path.clone(),
            path: Some(path),
            body: body.into(),
        }
    }

    /// A section with a heading of its own, from a file or not.
    pub fn new(title: impl Into<String>, path: Option<String>, body: impl Into<String>) -> Self {
        ZoneSection {
            title: title.into(),
            path,
            body: body.into(),
        }
    }

    fn render(&self, out: &mut String) {
        out.push_str("## ");
        out.push_str(&self.title);
        if let Some(path) = &self.path {
            out.push_str(" (file `");
            out.push_str(path);
            out.push_str("`)");
        }
        out.push('\n');
        out.push_str(normalize_text(&self.body).trim_end_matches('\n'));
    }
}

/// A file's text as it enters the prefix: a leading byte-order mark (U+FEFF) dropped, and
/// every line ending (`\r\n`, a lone `\r`) written `\n`. A checkout with Windows line
/// endings or a BOM thus sends the same prefix bytes as one without. Borrowed when there is
/// nothing to change.
///
/// ```
/// use halo_core::zones::normalize_text;
///
/// assert_eq!(normalize_text("\u{feff}a\r\nb\rc\n"), "a\nb\nc\n");
/// assert!(matches!(normalize_text("a\nb"), std::borrow::Cow::Borrowed(_)));
/// ```
pub fn normalize_text(text: &str) -> std::borrow::Cow<'_, str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if !text.contains('\r') {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// The three zones of the system text (see the [module docs](self)).
///
/// [`apply`](Self::apply) writes them into a [`StablePrefix`]: the static and semi-static
/// text as its system prompt, the skills as its catalog (rendered after the sections) and
/// the date as its volatile zone (rendered last).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PromptZones {
    static_text: String,
    sections: Vec<ZoneSection>,
    skills: Vec<SkillMeta>,
    no_date: bool,
}

impl PromptZones {
    /// Zones with this static text (the role and the instructions) and nothing else yet.
    pub fn new(static_text: impl Into<String>) -> Self {
        PromptZones {
            static_text: static_text.into(),
            ..PromptZones::default()
        }
    }

    /// Appends a semi-static section (rules files first, then the memory snapshot, in the
    /// order given).
    #[must_use]
    pub fn section(mut self, section: ZoneSection) -> Self {
        self.sections.push(section);
        self
    }

    /// Appends semi-static sections.
    #[must_use]
    pub fn sections(mut self, sections: impl IntoIterator<Item = ZoneSection>) -> Self {
        self.sections.extend(sections);
        self
    }

    /// Sets the skill catalog (sorted by name in the prefix).
    #[must_use]
    pub fn skills(mut self, skills: impl IntoIterator<Item = SkillMeta>) -> Self {
        self.skills = skills.into_iter().collect();
        self
    }

    /// Leaves out the volatile zone (no date at all).
    #[must_use]
    pub fn without_date(mut self) -> Self {
        self.no_date = true;
        self
    }

    /// The static text.
    pub fn static_text(&self) -> &str {
        &self.static_text
    }

    /// The semi-static sections, in order.
    pub fn semi_static(&self) -> &[ZoneSection] {
        &self.sections
    }

    /// The skill catalog as given.
    pub fn skill_catalog(&self) -> &[SkillMeta] {
        &self.skills
    }

    /// The static text followed by the semi-static sections under
    /// [`SEMI_STATIC_HEADING`] (the prefix's system prompt; the catalog and the date follow
    /// it in [`StablePrefix::system_text`]).
    pub fn system(&self) -> String {
        let mut out = self.static_text.clone();
        if self.sections.is_empty() {
            return out;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(SEMI_STATIC_HEADING);
        for s in &self.sections {
            out.push_str("\n\n");
            s.render(&mut out);
        }
        out
    }

    /// The volatile zone at `now_ms` (milliseconds since the Unix epoch, UTC):
    /// [`VOLATILE_MARKER`], a newline and `Today's date: YYYY-MM-DD.`; empty
    /// [`without_date`](Self::without_date).
    pub fn volatile(&self, now_ms: u64) -> String {
        if self.no_date {
            return String::new();
        }
        format!("{VOLATILE_MARKER}\nToday's date: {}.", iso_date(now_ms))
    }

    /// Writes the zones into `prefix`: its system prompt, its whole skill catalog and its
    /// volatile zone (tools and few-shot turns are kept). Applying equal zones on the same
    /// day leaves the prefix's bytes unchanged.
    pub fn apply(&self, prefix: &mut StablePrefix, now_ms: u64) {
        let system = self.system();
        if prefix.system() != system {
            prefix.set_system(system);
        }
        if prefix.skills() != self.sorted_skills().as_slice() {
            prefix.set_skills(self.skills.iter().cloned());
        }
        let volatile = self.volatile(now_ms);
        if prefix.volatile() != volatile {
            prefix.set_volatile(volatile);
        }
    }

    /// A new prefix holding only these zones.
    pub fn to_prefix(&self, now_ms: u64) -> StablePrefix {
        let mut prefix = StablePrefix::default();
        self.apply(&mut prefix, now_ms);
        prefix
    }

    fn sorted_skills(&self) -> Vec<SkillMeta> {
        let mut p = StablePrefix::default();
        p.set_skills(self.skills.iter().cloned());
        p.skills().to_vec()
    }
}

/// The UTC calendar date of `ms` (milliseconds since the Unix epoch) as `YYYY-MM-DD`.
///
/// ```
/// assert_eq!(halo_core::zones::iso_date(0), "1970-01-01");
/// assert_eq!(halo_core::zones::iso_date(951_782_400_000), "2000-02-29");
/// ```
pub fn iso_date(ms: u64) -> String {
    // Howard Hinnant's civil_from_days, on days since 1970-01-01.
    let days = (ms / 86_400_000) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn skill(name: &str) -> SkillMeta {
        SkillMeta {
            name: name.into(),
            description: format!("{name} things"),
            location: Some(format!(".agents/skills/{name}/SKILL.md")),
        }
    }

    #[test]
    fn the_date_is_last_after_the_marker_and_the_catalog_before_it() {
        let zones = PromptZones::new("Role.")
            .section(ZoneSection::file("AGENTS.md", "rule one\n"))
            .section(ZoneSection::new(
                "Memory",
                Some(".agent/memory.md".into()),
                "- did x",
            ))
            .skills([skill("pdf")]);
        let text = zones.to_prefix(86_400_000 * 365).system_text();
        let marker = text.find(VOLATILE_MARKER).unwrap();
        assert!(text.find("<available_skills>").unwrap() < marker);
        assert!(
            text.find("## AGENTS.md (file `AGENTS.md`)\nrule one")
                .unwrap()
                < marker
        );
        assert!(text.contains("## Memory (file `.agent/memory.md`)\n- did x"));
        assert!(text.ends_with(&format!("{VOLATILE_MARKER}\nToday's date: 1971-01-01.")));
    }

    #[test]
    fn dates_are_the_utc_day() {
        assert_eq!(iso_date(1_764_547_199_999), "2025-11-30");
        assert_eq!(iso_date(1_764_547_200_000), "2025-12-01");
        assert_eq!(iso_date(4_107_542_400_000), "2100-03-01");
    }

    #[test]
    fn without_date_or_sections_the_prefix_is_the_plain_system_prompt() {
        let zones = PromptZones::new("Role.").without_date();
        let p = zones.to_prefix(5);
        assert_eq!(p.system_text(), "Role.");
        assert_eq!(
            p.fingerprint(),
            StablePrefix::new("Role.").fingerprint(),
            "no zone adds bytes of its own"
        );
    }

    fn arb_zones() -> impl Strategy<Value = PromptZones> {
        (
            ".{0,40}",
            proptest::collection::vec(
                (".{0,12}", proptest::option::of(".{0,12}"), ".{0,60}"),
                0..4,
            ),
            proptest::collection::vec("[a-z]{1,8}", 0..4),
        )
            .prop_map(|(s, sections, skills)| {
                PromptZones::new(s)
                    .sections(
                        sections
                            .into_iter()
                            .map(|(t, p, b)| ZoneSection::new(t, p, b)),
                    )
                    .skills(skills.iter().map(|n| skill(n)))
            })
    }

    proptest! {
        /// Same zones and same day give the same bytes, whatever the time of day and
        /// however the skills are ordered; another day changes only the tail.
        #[test]
        fn rendering_is_deterministic(zones in arb_zones(), day in 0u64..60_000, a in 0u64..86_400_000, b in 0u64..86_400_000) {
            let at = |ms| zones.to_prefix(day * 86_400_000 + ms).canonical_bytes().to_vec();
            prop_assert_eq!(at(a), at(b));
            let mut reversed = zones.clone();
            reversed.skills.reverse();
            prop_assert_eq!(
                reversed.to_prefix(day * 86_400_000 + a).canonical_bytes().to_vec(),
                at(a)
            );
            let at = |ms| zones.to_prefix(day * 86_400_000 + ms);
            let today = at(a).system_text();
            let tomorrow = zones.to_prefix((day + 1) * 86_400_000 + a).system_text();
            let cut = today.rfind(VOLATILE_MARKER).unwrap();
            prop_assert_eq!(&today[..cut], &tomorrow[..cut]);
            prop_assert_ne!(today, tomorrow);
        }
    }
}
