//! The tool specs enter the agent's cached stable prefix: they must not depend on where
//! the root is, and must be byte-identical across sandboxes with the same options.

use std::time::Duration;

use halo_core::HaloAgent;
use halo_core::testing::ScriptedModel;
use halo_sandbox::{ContainerSandbox, SandboxError};

fn spec_bytes(sandbox: &ContainerSandbox) -> Vec<u8> {
    let specs: Vec<_> = sandbox.tools().iter().map(|t| t.spec()).collect();
    serde_json::to_vec(&specs).expect("specs serialize")
}

#[test]
fn specs_are_byte_identical_across_roots() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    std::fs::create_dir(b.path().join("nested")).unwrap();
    let sa = ContainerSandbox::new(a.path()).unwrap();
    let sb = ContainerSandbox::new(b.path().join("nested")).unwrap();
    let (bytes_a, bytes_b) = (spec_bytes(&sa), spec_bytes(&sb));
    assert_eq!(bytes_a, bytes_b);
    let text = String::from_utf8(bytes_a).unwrap();
    assert!(!text.contains(&*a.path().to_string_lossy()), "{text}");
    assert!(!text.contains("/tmp"), "{text}");

    // The same through an agent's stable prefix.
    let prefix = |s: &ContainerSandbox| {
        HaloAgent::builder(ScriptedModel::new())
            .system("sys")
            .tools(s.tools())
            .unwrap()
            .build()
            .prefix()
            .canonical_bytes()
            .to_vec()
    };
    assert_eq!(prefix(&sa), prefix(&sb));
}

#[test]
fn tool_names_and_required_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let specs: Vec<_> = ContainerSandbox::new(dir.path())
        .unwrap()
        .tools()
        .iter()
        .map(|t| t.spec())
        .collect();
    let summary: Vec<(String, serde_json::Value, Vec<String>)> = specs
        .iter()
        .map(|s| {
            let mut props: Vec<String> = s.parameters["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            props.sort();
            (
                s.name.clone(),
                s.parameters.get("required").cloned().unwrap_or_default(),
                props,
            )
        })
        .collect();
    let expected = [
        (
            "read",
            serde_json::json!(["path"]),
            vec!["limit", "offset", "path"],
        ),
        (
            "write",
            serde_json::json!(["path", "content"]),
            vec!["content", "path"],
        ),
        (
            "edit",
            serde_json::json!(["path", "old_string", "new_string"]),
            vec!["new_string", "old_string", "path", "replace_all"],
        ),
        ("ls", serde_json::Value::Null, vec!["path"]),
        (
            "glob",
            serde_json::json!(["pattern"]),
            vec!["include_ignored", "path", "pattern"],
        ),
        (
            "grep",
            serde_json::json!(["pattern"]),
            vec!["context", "glob", "ignore_case", "path", "pattern"],
        ),
        (
            "bash",
            serde_json::json!(["command"]),
            vec!["command", "timeout_secs"],
        ),
    ];
    assert_eq!(summary.len(), expected.len());
    for ((name, required, props), (en, er, ep)) in summary.iter().zip(expected) {
        assert_eq!(
            (name.as_str(), required, props),
            (
                en,
                &er,
                &ep.iter().map(|s| s.to_string()).collect::<Vec<_>>()
            )
        );
    }
    // Every parameter is described for the model.
    for s in &specs {
        for (name, p) in s.parameters["properties"].as_object().unwrap() {
            assert!(
                p["description"].is_string(),
                "{}.{name} has no description",
                s.name
            );
        }
    }
}

#[test]
fn options_show_in_the_bash_description() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = ContainerSandbox::new(dir.path())
        .unwrap()
        .with_exec_timeout(Duration::from_secs(5))
        .with_output_limit(8192);
    let bash = sandbox
        .tools()
        .iter()
        .map(|t| t.spec())
        .find(|s| s.name == "bash")
        .unwrap();
    assert!(
        bash.description.contains("timeout (5 s unless"),
        "{}",
        bash.description
    );
    assert!(
        bash.description.contains("kept to 4096 bytes"),
        "{}",
        bash.description
    );
}

#[test]
fn a_missing_or_file_root_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let err = ContainerSandbox::new(&missing).unwrap_err();
    assert!(matches!(err, SandboxError::Root { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with(&format!(
            "sandbox root `{}` cannot be opened: ",
            missing.display()
        )),
        "{err}"
    );
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    assert_eq!(
        ContainerSandbox::new(&file).unwrap_err().to_string(),
        format!("sandbox root `{}` is not a directory", file.display())
    );
}

#[test]
fn a_missing_root_prints_its_cause_once_in_a_source_chain() {
    // Trigger: anyhow's `{:#}` of this error printed "No such file or directory" twice,
    // once from the message and once from `source()`.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let cause = std::fs::metadata(&missing).unwrap_err().to_string();
    let err = ContainerSandbox::new(&missing).unwrap_err();
    let mut chain = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        source = s.source();
    }
    assert_eq!(
        chain,
        format!(
            "sandbox root `{}` cannot be opened: {cause}",
            missing.display()
        )
    );
    assert_eq!(chain.matches(&cause).count(), 1, "{chain}");
}

/// The snapshot of the default tool specs; `UPDATE_EXPECT=1` rewrites it.
const SPEC_SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tool_specs.json");

// The specs are in every request's cached prefix: any change to a name, description or
// schema must be deliberate, seen in review as a diff of this file.
#[test]
fn specs_match_the_snapshot_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let specs: Vec<_> = ContainerSandbox::new(dir.path())
        .unwrap()
        .tools()
        .iter()
        .map(|t| t.spec())
        .collect();
    let mut text = serde_json::to_string_pretty(&specs).unwrap();
    text.push('\n');
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(SPEC_SNAPSHOT, &text).unwrap();
    }
    let expected = std::fs::read_to_string(SPEC_SNAPSHOT)
        .expect("tests/data/tool_specs.json (run with UPDATE_EXPECT=1 to write it)");
    assert!(
        text == expected,
        "tool specs changed; if that is intended, run with UPDATE_EXPECT=1 and review the \
         diff of tests/data/tool_specs.json\n{text}"
    );
}

#[test]
fn a_virtual_sandbox_has_the_same_specs_without_bash() {
    let dir = tempfile::tempdir().unwrap();
    let container: Vec<_> = ContainerSandbox::new(dir.path())
        .unwrap()
        .tools()
        .iter()
        .map(|t| t.spec())
        .collect();
    let virtual_: Vec<_> = halo_sandbox::VirtualSandbox::new()
        .tools()
        .iter()
        .map(|t| t.spec())
        .collect();
    assert_eq!(container.last().map(|s| s.name.as_str()), Some("bash"));
    assert_eq!(
        serde_json::to_vec(&virtual_).unwrap(),
        serde_json::to_vec(&container[..6]).unwrap()
    );
}

// The engine runs read-only calls of a step concurrently and re-runs them on resume; the
// tools that write or run commands must never be marked so.
#[test]
fn the_annotations_say_which_tools_only_read_stay_in_the_workspace_or_may_run_twice() {
    let dir = tempfile::tempdir().unwrap();
    // (name, read-only, idempotent, open world): what a permission policy classes them by.
    let marks: Vec<(String, bool, bool, bool)> = ContainerSandbox::new(dir.path())
        .unwrap()
        .tools()
        .iter()
        .map(|t| {
            let a = t.annotations();
            (t.spec().name, a.read_only, a.idempotent, a.open_world)
        })
        .collect();
    let expected: Vec<(String, bool, bool, bool)> = [
        ("read", true, true, false),
        ("write", false, true, false),
        ("edit", false, false, false),
        ("ls", true, true, false),
        ("glob", true, true, false),
        ("grep", true, true, false),
        ("bash", false, false, true),
    ]
    .iter()
    .map(|(n, r, i, o)| (n.to_string(), *r, *i, *o))
    .collect();
    let mut got = marks.clone();
    got.sort();
    let mut want = expected;
    want.sort();
    assert_eq!(got, want);
}
