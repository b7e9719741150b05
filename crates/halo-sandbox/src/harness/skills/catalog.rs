//! The skill catalog for the prefix (progressive disclosure, tier 1): name, description and
//! location of every skill, sorted by name, within a token budget.

use halo_core::{SkillMeta, ZoneSection};

use super::SkillSet;

/// Bytes of the XML around one catalog entry (`<skill>`, `<name>`, ...), counted against
/// the budget.
const ENTRY_OVERHEAD_BYTES: usize = 80;

/// The shortest a description is cut to, in characters.
const MIN_DESCRIPTION_CHARS: usize = 40;

/// The catalog's budget for a context window of `context_window` tokens: 2 % of it (as
/// codex gives its skill list), in tokens.
///
/// ```
/// assert_eq!(halo_sandbox::harness::catalog_budget(200_000), 4_000);
/// ```
pub fn catalog_budget(context_window: u64) -> u64 {
    context_window / 50
}

/// The catalog entries and what fitting the budget did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// One entry per skill, sorted by name.
    pub skills: Vec<SkillMeta>,
    /// The budget, in tokens (bytes / 4).
    pub budget_tokens: u64,
    /// The estimated size of the entries, in tokens (bytes / 4).
    pub tokens: u64,
    /// How many descriptions were shortened to fit.
    pub shortened: usize,
}

impl Catalog {
    /// The note for the semi-static zone when descriptions were shortened, or when the
    /// catalog is still over its budget (descriptions are never cut under 40 characters);
    /// `None` otherwise.
    pub fn note(&self) -> Option<ZoneSection> {
        let over = self.tokens > self.budget_tokens;
        (self.shortened > 0 || over).then(|| {
            let mut text = if self.shortened > 0 {
                format!(
                    "{} of the {} skill descriptions in <available_skills> are shortened (ending in `...`) to fit the catalog's budget of {} tokens; load_skill gives a skill whole.",
                    self.shortened,
                    self.skills.len(),
                    self.budget_tokens
                )
            } else {
                String::new()
            };
            if over {
                if !text.is_empty() {
                    text.push(' ');
                }
                text.push_str(&format!(
                    "The catalog of {} skills is about {} tokens, over its budget of {} tokens.",
                    self.skills.len(),
                    self.tokens,
                    self.budget_tokens
                ));
            }
            ZoneSection::new("Skill catalog", None, text)
        })
    }
}

/// The catalog of `set` within `budget_tokens` (bytes / 4 tokens). Past the budget, the
/// longest descriptions are cut first, to one common length (never under 40 characters),
/// and [`Catalog::shortened`] counts them. Deterministic: equal sets give equal catalogs.
pub fn catalog(set: &SkillSet, budget_tokens: u64) -> Catalog {
    let mut skills: Vec<SkillMeta> = set.skills.iter().map(|s| s.meta()).collect();
    let size = |s: &SkillMeta| {
        s.name.len()
            + s.description.len()
            + s.location.as_ref().map_or(0, String::len)
            + ENTRY_OVERHEAD_BYTES
    };
    let budget_bytes = usize::try_from(budget_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
    let total: usize = skills.iter().map(size).sum();
    let mut shortened = 0;
    if total > budget_bytes && !skills.is_empty() {
        let fixed: usize = skills.iter().map(|s| size(s) - s.description.len()).sum();
        let room = budget_bytes.saturating_sub(fixed);
        // The largest common cap (in bytes) under which the descriptions fit the room.
        let mut lens: Vec<usize> = skills.iter().map(|s| s.description.len()).collect();
        lens.sort_unstable();
        let mut cap = 0;
        let mut used_below = 0;
        for (i, &len) in lens.iter().enumerate() {
            let remaining = lens.len() - i;
            let candidate = (room.saturating_sub(used_below)) / remaining;
            if candidate < len {
                cap = candidate;
                break;
            }
            used_below += len;
            cap = len;
        }
        let cap = cap.max(MIN_DESCRIPTION_CHARS);
        for s in &mut skills {
            if s.description.len() > cap {
                s.description = shorten(&s.description, cap);
                shortened += 1;
            }
        }
    }
    let tokens = (skills.iter().map(size).sum::<usize>() as u64).div_ceil(4);
    Catalog {
        skills,
        budget_tokens,
        tokens,
        shortened,
    }
}

/// `text` cut to at most `max` bytes on a character boundary, ending in `...`.
fn shorten(text: &str, max: usize) -> String {
    let mut end = max.saturating_sub(3).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", text[..end].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::skills::{Skill, SkillFile};
    use halo_core::sandbox::SandboxPath;

    fn set(descriptions: &[(&str, usize)]) -> SkillSet {
        SkillSet {
            skills: descriptions
                .iter()
                .map(|(name, len)| Skill {
                    file: SkillFile {
                        name: (*name).into(),
                        description: "é".repeat(*len / 2),
                        license: None,
                        compatibility: None,
                        metadata: Default::default(),
                        allowed_tools: None,
                        body: String::new(),
                    },
                    dir: SandboxPath::parse(&format!(".agents/skills/{name}")).unwrap(),
                    location: SandboxPath::parse(&format!(".agents/skills/{name}/SKILL.md"))
                        .unwrap(),
                })
                .collect(),
            diagnostics: vec![],
        }
    }

    #[test]
    fn within_the_budget_nothing_is_cut() {
        let c = catalog(&set(&[("a", 100), ("b", 200)]), 4_000);
        assert_eq!(c.shortened, 0);
        assert_eq!(c.skills[1].description.len(), 200);
        assert!(c.note().is_none());
    }

    #[test]
    fn past_the_budget_the_longest_descriptions_are_cut_and_the_note_says_so() {
        let s = set(&[("a", 100), ("b", 2000), ("c", 2000)]);
        let c = catalog(&s, 400);
        assert_eq!(c.shortened, 2);
        assert_eq!(c.skills[0].description.len(), 100, "the short one is kept");
        assert!(c.skills[1].description.ends_with("..."));
        assert!(c.tokens <= 400, "{} tokens", c.tokens);
        assert!(
            c.note()
                .unwrap()
                .body
                .contains("2 of the 3 skill descriptions")
        );
        assert_eq!(catalog(&s, 400), c, "deterministic");
    }

    #[test]
    fn a_catalog_over_its_budget_after_cutting_says_so() {
        // Descriptions under 40 characters are never cut: the budget cannot be met.
        let c = catalog(&set(&[("a", 30), ("b", 30), ("c", 30), ("d", 30)]), 10);
        assert_eq!(c.shortened, 0);
        assert!(c.tokens > 10, "{} tokens", c.tokens);
        let note = c.note().expect("a note").body;
        assert!(
            note.starts_with("The catalog of 4 skills is about ")
                && note.ends_with(" tokens, over its budget of 10 tokens."),
            "{note}"
        );
    }
}
