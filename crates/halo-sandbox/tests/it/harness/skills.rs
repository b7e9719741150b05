//! Agent Skills: discovery of sloppy, broken and clashing skills, the
//! catalog, `load_skill`, `read_skill_file` confinement and `skill_run` staging.

use std::sync::Arc;

use halo_core::testing::ScriptedModel;
use halo_core::zones::PromptZones;
use halo_core::{HaloAgent, Message, Sandbox, SharedSandbox};
use halo_sandbox::harness::{SkillDiscovery, SkillRunOptions, SkillSet, catalog, skill_tools};
use halo_sandbox::{ContainerSandbox, VirtualSandbox};
use serde_json::json;

use super::{p, put};

const PDF: &str = "---\nname: pdf\ndescription: Fill and read PDF forms.\nlicense: MIT\n---\n# PDF\nRun scripts/fill.sh, see references/FORMS.md.\n";

/// The sloppy, broken and clashing skills of a fixture project.
async fn fixture(s: &dyn Sandbox) {
    put(s, ".agents/skills/pdf/SKILL.md", PDF).await;
    put(s, ".agents/skills/pdf/references/FORMS.md", "Form fields.").await;
    put(
        s,
        ".agents/skills/pdf/scripts/fill.sh",
        "echo filled \"$1\"\n",
    )
    .await;
    put(s, ".agents/skills/sloppy/SKILL.md", "\u{feff}---\r\nname: sloppy\r\ndescription: Does x. Use when: y\r\nmetadata: {author: me}\r\n---\r\nBody.\r\n").await;
    put(
        s,
        ".agents/skills/no-frontmatter/SKILL.md",
        "# just markdown\n",
    )
    .await;
    put(
        s,
        ".agents/skills/folder-a/SKILL.md",
        "---\nname: folder-b\ndescription: x\n---\n",
    )
    .await;
    put(s, ".agents/skills/notes.md", "a file, not a skill folder").await;

    put(
        s,
        ".agents/skills/empty-folder/README.md",
        "no SKILL.md here",
    )
    .await;
    put(
        s,
        ".agent/skills/Upper/SKILL.md",
        "---\nname: Upper\ndescription: x\n---\n",
    )
    .await;
    put(
        s,
        ".claude/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Another pdf.\n---\n",
    )
    .await;
    put(
        s,
        "tools/skills/extra/SKILL.md",
        "---\nname: extra\ndescription: Added by the caller.\n---\nExtra body.\n",
    )
    .await;
}

async fn discover(s: &dyn Sandbox) -> SkillSet {
    SkillDiscovery::new()
        .with_dir(p("tools/skills"))
        .discover(s)
        .await
}

#[tokio::test]
async fn discovery_loads_the_usable_skills_and_names_every_file_it_skips_or_forgave() {
    let s = VirtualSandbox::new();
    fixture(&s).await;
    let set = discover(&s).await;
    assert_eq!(set.names(), ["extra", "pdf", "sloppy"]);
    assert_eq!(
        set.get("pdf").unwrap().location.as_str(),
        ".agents/skills/pdf/SKILL.md"
    );
    assert_eq!(set.get("pdf").unwrap().file.license.as_deref(), Some("MIT"));
    assert_eq!(
        set.get("sloppy").unwrap().file.description,
        "Does x. Use when: y"
    );
    let d: Vec<String> = set.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        d,
        [
            "skipped .agents/skills/folder-a/SKILL.md: `name` `folder-b` does not match its folder `folder-a`; rename one of them",
            "skipped .agents/skills/no-frontmatter/SKILL.md: it does not start with YAML frontmatter: the first line must be `---`",
            "warning: .agents/skills/sloppy/SKILL.md: it starts with a byte order mark, which was ignored",
            "warning: .agents/skills/sloppy/SKILL.md: it has CRLF line endings, read as LF",
            "warning: .agents/skills/sloppy/SKILL.md: the value of `description` has an unquoted `: `; it was read as a quoted string",
            "warning: .agents/skills/sloppy/SKILL.md: `metadata` is written in flow style `{...}`; it was read as a mapping",
            "skipped .agent/skills/Upper/SKILL.md: `name` `Upper` must be lowercase",
            "skipped .claude/skills/pdf/SKILL.md: a skill named `pdf` was already found at .agents/skills/pdf/SKILL.md",
        ]
    );
}

// Found by a new-user trial: a lower-case `skill.md` was passed over in silence, and a
// folded description kept its trailing newline in the catalog.
#[tokio::test]
async fn a_lower_case_skill_md_is_named_and_a_folded_description_is_trimmed() {
    let s = VirtualSandbox::new();
    put(
        &s,
        ".agents/skills/lower/skill.md",
        "---\nname: lower\ndescription: x\n---\n",
    )
    .await;
    put(
        &s,
        ".agents/skills/folded/SKILL.md",
        "---\nname: folded\ndescription: >\n  Folded over\n  two lines.\n---\n",
    )
    .await;
    let set = discover(&s).await;
    assert_eq!(set.names(), ["folded"]);
    assert_eq!(
        set.get("folded").unwrap().file.description,
        "Folded over two lines."
    );
    let d: Vec<String> = set.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        d,
        [
            "skipped .agents/skills/lower/skill.md: the file must be named `SKILL.md` (upper case, as the agentskills.io spec names it); rename it"
        ]
    );
}

#[tokio::test]
async fn both_sandboxes_discover_the_same_skills() {
    let dir = tempfile::tempdir().unwrap();
    let c = ContainerSandbox::new(dir.path()).unwrap();
    let v = VirtualSandbox::new();
    fixture(&c).await;
    fixture(&v).await;
    assert_eq!(discover(&c).await, discover(&v).await);
}

#[tokio::test]
async fn the_catalog_is_in_the_prefix_sorted_with_locations_and_no_skill_means_no_tools() {
    let s = VirtualSandbox::new();
    fixture(&s).await;
    let set = discover(&s).await;
    let cat = catalog(&set, 4_000);
    let text = PromptZones::new("Role.")
        .skills(cat.skills)
        .without_date()
        .to_prefix(0)
        .system_text();
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle} in {text}"))
    };
    assert!(at("<name>extra</name>") < at("<name>pdf</name>"));
    assert!(at("<location>.agents/skills/pdf/SKILL.md</location>") < at("<name>sloppy</name>"));

    let empty: SharedSandbox = Arc::new(VirtualSandbox::new());
    let none = SkillDiscovery::new().discover(empty.as_ref()).await;
    assert!(skill_tools(empty, Arc::new(none), SkillRunOptions::default()).is_empty());
}

#[tokio::test]
async fn load_skill_gives_a_discardable_body_never_changes_the_prefix_and_lists_skills_for_a_wrong_name()
 {
    let s: SharedSandbox = Arc::new(VirtualSandbox::new());
    fixture(s.as_ref()).await;
    let set = Arc::new(discover(s.as_ref()).await);
    let tools = skill_tools(Arc::clone(&s), Arc::clone(&set), SkillRunOptions::default());
    let spec = tools[0].spec();
    assert_eq!(spec.name, "load_skill");
    assert_eq!(
        spec.parameters["properties"]["name"]["enum"],
        json!(["extra", "pdf", "sloppy"])
    );
    let model = ScriptedModel::new()
        .tool_call("load_skill", json!({"name": "pdf"}))
        .tool_call("load_skill", json!({"name": "docx"}))
        .text("done");
    let mut agent = HaloAgent::builder(model.clone())
        .zones(PromptZones::new("Role.").skills(catalog(&set, 4_000).skills))
        .tools(tools)
        .unwrap()
        .build();
    agent.generate_text("fill the form").await.unwrap();
    let log = agent.log().to_vec();
    let Message::Tool(loaded) = &log[2] else {
        panic!("{log:?}")
    };
    assert!(agent.log().is_discardable(2));
    assert!(
        loaded
            .content
            .starts_with("<skill_content name=\"pdf\">\nSkill folder: .agents/skills/pdf")
    );
    assert!(loaded.content.contains("# PDF\nRun scripts/fill.sh"));
    assert!(
        loaded.content.contains(
            "<skill_resources>\nreferences/FORMS.md\nscripts/fill.sh\n</skill_resources>"
        )
    );
    let Message::Tool(wrong) = &log[4] else {
        panic!("{log:?}")
    };
    assert!(wrong.is_error);
    for name in ["extra", "pdf", "sloppy"] {
        assert!(wrong.content.contains(name), "{}", wrong.content);
    }
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests
            .iter()
            .all(|r| r.prefix_bytes == requests[0].prefix_bytes)
    );
    // Called directly (no schema check), an unknown name gets the list too.
    let direct = skill_tools(s, set, SkillRunOptions::default())[0]
        .call_json(
            json!({"name": "docx"}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap_err();
    assert_eq!(
        direct.to_string(),
        "there is no skill `docx`; the skills are: extra, pdf, sloppy"
    );
}

#[tokio::test]
async fn read_skill_file_is_confined_to_the_skill_folder() {
    let dir = tempfile::tempdir().unwrap();
    let s: SharedSandbox = Arc::new(ContainerSandbox::new(dir.path()).unwrap());
    fixture(s.as_ref()).await;
    put(s.as_ref(), "secret.txt", "root secret").await;
    std::os::unix::fs::symlink(
        dir.path().join("secret.txt"),
        dir.path().join(".agents/skills/pdf/link.txt"),
    )
    .unwrap();
    let set = Arc::new(discover(s.as_ref()).await);
    let tools = skill_tools(s, set, SkillRunOptions::default());
    let read = &tools[1];
    assert_eq!(read.spec().name, "read_skill_file");
    let ok = read
        .call_json(
            json!({"name": "pdf", "path": "references/FORMS.md"}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert_eq!(ok.content, "Form fields.");
    for (path, want) in [
        ("../sloppy/SKILL.md", "is outside the folder of skill `pdf`"),
        (
            "../../../secret.txt",
            "is outside the folder of skill `pdf`",
        ),
        ("/etc/passwd", "is outside the folder of skill `pdf`"),
        ("", "is outside the folder of skill `pdf`"),
        ("link.txt", "goes through a symbolic link"),
        (
            "missing.md",
            "has no file `missing.md`; load_skill lists its files",
        ),
    ] {
        let err = read
            .call_json(
                json!({"name": "pdf", "path": path}),
                &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains(want), "{path}: {err}");
        assert!(!err.to_string().contains("root secret"));
    }
}

#[tokio::test]
async fn skill_run_stages_the_skill_read_only_once_and_returns_the_output_files() {
    let dir = tempfile::tempdir().unwrap();
    let s: SharedSandbox = Arc::new(ContainerSandbox::new(dir.path()).unwrap());
    fixture(s.as_ref()).await;
    let set = Arc::new(discover(s.as_ref()).await);
    let tools = skill_tools(Arc::clone(&s), set, SkillRunOptions::default());
    let run = &tools[2];
    assert_eq!(run.spec().name, "skill_run");
    let command = "bash \"$SKILLS_DIR/scripts/fill.sh\" form > \"$OUTPUT_DIR/result.txt\"; echo work=$(pwd); echo oops >&2; mkdir -p \"$OUTPUT_DIR/sub\"; echo skip > \"$OUTPUT_DIR/sub/other.log\"";
    let args = json!({"name": "pdf", "command": command, "output_files": ["*.txt"]});
    let first = run
        .call_json(
            args.clone(),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap()
        .content;
    let work = dir.path().join(".halo/skills/pdf/work");
    assert!(
        first.starts_with("exit code: 0\nskill staged at .halo/skills/pdf/skill (copied, sha256 "),
        "{first}"
    );
    assert!(
        first.contains(&format!("<stdout>\nwork={}\n</stdout>", work.display())),
        "{first}"
    );
    assert!(first.contains("<stderr>\noops\n</stderr>"));
    assert!(
        first.contains(
            "<output_file path=\"result.txt\" bytes=\"12\">\nfilled form\n</output_file>"
        ),
        "{first}"
    );
    assert!(!first.contains("other.log"));
    // The copy is read-only.
    let mode = |rel: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(dir.path().join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o222
    };
    assert_eq!(mode(".halo/skills/pdf/skill/scripts/fill.sh"), 0);
    assert_eq!(mode(".halo/skills/pdf/skill"), 0);

    // Unchanged content: no copy. Changed: copied again, and the new script runs.
    let second = run
        .call_json(
            args.clone(),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap()
        .content;
    assert!(
        second.contains("(unchanged, not copied, sha256 "),
        "{second}"
    );
    put(
        s.as_ref(),
        ".agents/skills/pdf/scripts/fill.sh",
        "echo refilled \"$1\"\n",
    )
    .await;
    let third = run
        .call_json(
            args.clone(),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap()
        .content;
    assert!(third.contains("(copied, sha256 "), "{third}");
    assert!(third.contains("\nrefilled form\n"), "{third}");
    // A command that changed the copy (permission bits do not stop root) gets a new copy.
    let tamper = json!({"name": "pdf", "command": "chmod u+w \"$SKILLS_DIR/scripts/fill.sh\" && echo 'echo tampered' > \"$SKILLS_DIR/scripts/fill.sh\"; true", "output_files": []});
    run.call_json(
        tamper,
        &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
    )
    .await
    .unwrap();
    let fourth = run
        .call_json(
            args.clone(),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap()
        .content;
    assert!(fourth.contains("(copied, sha256 "), "{fourth}");
    assert!(fourth.contains("\nrefilled form\n"), "{fourth}");

    // A failing command is data; a bad glob is an error the model can fix.
    let failed = run
        .call_json(
            json!({"name": "pdf", "command": "exit 3", "output_files": []}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap()
        .content;
    assert!(failed.starts_with("exit code: 3\n"));
    let bad = run
        .call_json(
            json!({"name": "pdf", "command": "true", "output_files": ["a[" ]}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap_err();
    assert!(
        bad.to_string()
            .starts_with("invalid glob `a[` in output_files"),
        "{bad}"
    );
}

/// The snapshot of the skill tools' specs for the fixture's skills; `UPDATE_EXPECT=1`
/// rewrites it.
const SKILL_SPEC_SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/skill_tool_specs.json"
);

// The skill tools' specs are in the cached prefix: for one set of skills they are the same
// bytes whatever the root, and any change must be seen in review as a diff of the snapshot.
#[tokio::test]
async fn skill_tool_specs_are_byte_stable_and_match_the_snapshot() {
    let specs = |dir: &std::path::Path| {
        let dir = dir.to_path_buf();
        async move {
            let s: SharedSandbox = Arc::new(ContainerSandbox::new(&dir).unwrap());
            fixture(s.as_ref()).await;
            let set = Arc::new(discover(s.as_ref()).await);
            let specs: Vec<_> = skill_tools(s, set, SkillRunOptions::default())
                .iter()
                .map(|t| t.spec())
                .collect();
            let mut text = serde_json::to_string_pretty(&specs).unwrap();
            text.push('\n');
            text
        }
    };
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let text = specs(a.path()).await;
    assert_eq!(text, specs(b.path()).await);
    assert!(!text.contains(&*a.path().to_string_lossy()));
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(SKILL_SPEC_SNAPSHOT, &text).unwrap();
    }
    let expected = std::fs::read_to_string(SKILL_SPEC_SNAPSHOT)
        .expect("tests/data/skill_tool_specs.json (run with UPDATE_EXPECT=1 to write it)");
    assert!(
        text == expected,
        "skill tool specs changed; if that is intended, run with UPDATE_EXPECT=1 and review the diff of tests/data/skill_tool_specs.json\n{text}"
    );
}
