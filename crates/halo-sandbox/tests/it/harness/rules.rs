//! Rules files on `VirtualSandbox` fixtures: order, headings, warnings.

use halo_core::ZoneSection;
use halo_core::sandbox::SandboxPath;
use halo_core::zones::PromptZones;
use halo_sandbox::VirtualSandbox;
use halo_sandbox::harness::load_rules;

use super::put;

#[tokio::test]
async fn rules_files_are_read_in_order_under_headings_with_their_paths() {
    let s = VirtualSandbox::new();
    put(&s, "AGENTS.md", "Run cargo test.\n").await;
    put(&s, ".agent/rules/20-style.md", "No unwrap.").await;
    put(&s, ".agent/rules/10-commits.md", "Small commits.").await;
    put(&s, ".agent/rules/notes.txt", "not a rules file").await;
    let rules = load_rules(&s, &SandboxPath::root()).await;
    // CLAUDE.md is missing, which is fine.
    assert_eq!(
        rules.files(),
        [
            "AGENTS.md",
            ".agent/rules/10-commits.md",
            ".agent/rules/20-style.md"
        ]
    );
    assert!(rules.diagnostics.is_empty(), "{:?}", rules.diagnostics);
    assert_eq!(
        rules.sections[0],
        ZoneSection::file("AGENTS.md", "Run cargo test.\n")
    );
    let text = PromptZones::new("Role.")
        .sections(rules.sections)
        .without_date()
        .system();
    assert!(text.contains(
        "## AGENTS.md (file `AGENTS.md`)\nRun cargo test.\n\n## .agent/rules/10-commits.md (file `.agent/rules/10-commits.md`)\nSmall commits."
    ), "{text}");
}

#[tokio::test]
async fn an_unreadable_rules_file_is_a_warning_naming_it_and_why() {
    let s = VirtualSandbox::new();
    put(&s, "CLAUDE.md", b"\xff\xfe not text").await;
    put(&s, "AGENTS.md/inner", "a folder where a file should be").await;
    put(&s, ".agent/rules/a.md", "kept").await;
    let rules = load_rules(&s, &SandboxPath::root()).await;
    assert_eq!(rules.files(), [".agent/rules/a.md"]);
    let warnings: Vec<String> = rules.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        warnings,
        [
            "warning: AGENTS.md: cannot be read: `AGENTS.md` is a directory; use ls to list it",
            "warning: CLAUDE.md: cannot be used: it is not UTF-8 text",
        ]
    );
}

#[tokio::test]
async fn a_huge_rules_file_is_cut_with_a_note_naming_its_path() {
    let s = VirtualSandbox::new();
    put(&s, "AGENTS.md", "x".repeat(100_000)).await;
    let rules = load_rules(&s, &SandboxPath::root()).await;
    assert!(rules.sections[0].body.len() < 66_000);
    assert!(
        rules.sections[0]
            .body
            .ends_with("read AGENTS.md for the rest ...]")
    );
    assert_eq!(rules.diagnostics.len(), 1);
}
