//! Halo's `SKILL.md` verdicts against the reference validator (`skills-ref`'s `agentskills
//! validate`), on the real skills of npm `@elizaos/skills` and the hand-made cases in
//! `tests/data/skills`. `cargo xtask interop` installs both and sets `HALO_SKILLS_INTEROP`
//! to its verdicts file; without the variable this test does nothing, and with it set but
//! the corpus missing it fails.

use std::path::PathBuf;

use halo_sandbox::harness::parse_skill;
use serde_json::Value;

/// Where Halo loads a skill the validator refuses, and why: (leniency, what Halo's warning
/// says, what the validator's message says, the reason).
const LENIENCIES: [(&str, &str, &str, &str); 4] = [
    (
        "flow-style metadata",
        "flow style",
        "flow mapping",
        "most of @elizaos/skills writes `metadata` as inline JSON; that is valid YAML, which only strictyaml refuses",
    ),
    (
        "unquoted colon",
        "unquoted `: `",
        "mapping values are not allowed",
        "the agentskills.io client guide says to retry such a value quoted",
    ),
    (
        "byte order mark",
        "byte order mark",
        "must start with YAML frontmatter",
        "editors on Windows write one; it is not content",
    ),
    (
        "unknown field",
        "unknown field",
        "Unexpected fields",
        "extras such as `version` are common in real skills; they are ignored with a warning",
    ),
];

/// The hand-made cases where Halo must be the more lenient one, with the leniency each shows.
const LENIENT_CASES: [(&str, &str); 4] = [
    ("bom-crlf", "byte order mark"),
    ("flow-metadata", "flow-style metadata"),
    ("unquoted-colon", "unquoted colon"),
    ("unknown-field", "unknown field"),
];

#[test]
fn halo_agrees_with_skills_ref_but_for_the_named_leniencies() {
    let Some(file) = std::env::var_os("HALO_SKILLS_INTEROP") else {
        eprintln!("skip: HALO_SKILLS_INTEROP is not set (cargo xtask interop sets it)");
        return;
    };
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("HALO_SKILLS_INTEROP is set but {file:?} cannot be read: {e}"));
    let verdicts: Vec<Value> = serde_json::from_str(&text).expect("a JSON array of verdicts");
    let real = verdicts
        .iter()
        .filter(|v| {
            v["dir"]
                .as_str()
                .is_some_and(|d| d.contains("node_modules/@elizaos/skills"))
        })
        .count();
    assert!(
        real >= 20,
        "the @elizaos/skills corpus is missing: {real} of its skills judged"
    );
    let mut agreed = 0;
    let mut lenient: Vec<(String, &str)> = Vec::new();
    let mut problems = Vec::new();
    for v in &verdicts {
        let dir = PathBuf::from(v["dir"].as_str().expect("dir"));
        let folder = dir.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(dir.join("SKILL.md")).unwrap_or_else(|e| {
            panic!("the corpus file {}/SKILL.md is missing: {e}", dir.display())
        });
        let reference = v["valid"].as_bool().expect("valid");
        let message = v["message"].as_str().unwrap_or_default();
        let halo = parse_skill(&bytes, &folder);
        match (&halo, reference) {
            (Ok(_), true) | (Err(_), false) => agreed += 1,
            (Ok(parsed), false) => {
                let warnings = parsed.warnings.join("\n");
                match LENIENCIES.iter().find(|(_, ours, theirs, _)| {
                    warnings.contains(ours) && message.contains(theirs)
                }) {
                    Some((name, ..)) => lenient.push((folder, name)),
                    None => problems.push(format!(
                        "{}: Halo loads it (warnings: {warnings:?}) but skills-ref says: {message}",
                        dir.display()
                    )),
                }
            }
            (Err(problem), true) => problems.push(format!(
                "{}: skills-ref accepts it but Halo skips it: {problem}",
                dir.display()
            )),
        }
    }
    assert!(
        problems.is_empty(),
        "disagreements no leniency explains:\n{}",
        problems.join("\n")
    );
    for (case, leniency) in LENIENT_CASES {
        assert!(
            lenient.iter().any(|(f, l)| f == case && l == &leniency),
            "the case {case} shows the leniency {leniency}: {lenient:?}"
        );
    }
    for (name, _, _, reason) in LENIENCIES {
        let n = lenient.iter().filter(|(_, l)| *l == name).count();
        eprintln!("more lenient than skills-ref ({name}: {reason}): {n} skills");
    }
    eprintln!("agreed on {agreed} of {} skills", verdicts.len());
    assert!(agreed >= 20, "{agreed}");
}
