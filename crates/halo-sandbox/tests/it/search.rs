//! `glob` and `grep`: sorted results, gitignore-awareness, filters and caps.

use serde_json::json;

use crate::common::Fixture;

fn tree() -> Fixture {
    let f = Fixture::new();
    f.file(".gitignore", "target/\n*.log\n");
    f.file("README.md", "TODO in readme\n");
    f.file("src/lib.rs", "fn main() {}\n// TODO: x\n");
    f.file("src/a/b.rs", "todo lower\nTODO upper\n");
    f.file("src/a/c.txt", "nothing\n");
    f.file("src/debug.log", "TODO ignored\n");
    f.file(".hidden/x.rs", "TODO hidden\n");
    f.file("target/out.rs", "TODO ignored\n");
    f.file("bin.dat", b"TODO\0binary");
    f
}

#[tokio::test]
async fn glob_matches_recursively_sorted_and_skips_ignored_and_hidden() {
    let f = tree();
    assert_eq!(
        f.ok("glob", json!({"pattern": "**/*.rs"})).await,
        "src/a/b.rs\nsrc/lib.rs"
    );
    // `*` does not cross `/`.
    assert_eq!(f.ok("glob", json!({"pattern": "*.md"})).await, "README.md");
    assert_eq!(
        f.ok("glob", json!({"pattern": "*.rs", "path": "src"}))
            .await,
        "src/lib.rs"
    );
    assert_eq!(
        f.ok("glob", json!({"pattern": "**/*.{rs,txt}", "path": "src/a"}))
            .await,
        "src/a/b.rs\nsrc/a/c.txt"
    );
    assert_eq!(
        f.ok("glob", json!({"pattern": "*.zig"})).await,
        "no files match `*.zig` in `.`"
    );
}

// Regression: a walk that starts below the root must still honour the root's .gitignore.
#[tokio::test]
async fn glob_below_the_root_honours_the_roots_gitignore() {
    let f = tree();
    assert_eq!(
        f.ok("glob", json!({"pattern": "*.log", "path": "src"}))
            .await,
        "no files match `*.log` in `src`"
    );
    // Without the rule the file is found.
    std::fs::remove_file(f.path(".gitignore")).unwrap();
    assert_eq!(
        f.ok("glob", json!({"pattern": "*.log", "path": "src"}))
            .await,
        "src/debug.log"
    );
}

#[tokio::test]
async fn glob_refuses_bad_patterns_and_caps_results() {
    let f = tree();
    let bad = f.failed("glob", json!({"pattern": "a["})).await;
    assert!(bad.starts_with("invalid glob `a[`: "), "{bad}");
    assert_eq!(
        f.failed("glob", json!({"pattern": "*", "path": "README.md"}))
            .await,
        "`README.md` is not a directory"
    );

    for i in 0..1001 {
        f.file(&format!("many/f{i:04}.txt"), "");
    }
    let out = f.ok("glob", json!({"pattern": "many/*.txt"})).await;
    let (paths, note) = out.split_once("\n\n").expect("a note");
    assert_eq!(paths.lines().count(), 1000);
    assert_eq!(paths.lines().next(), Some("many/f0000.txt"));
    assert_eq!(
        note,
        "[showing the first 1000 matching files; more match: narrow the pattern or path]"
    );
}

#[tokio::test]
async fn grep_reports_path_line_text_in_sorted_order() {
    let f = tree();
    assert_eq!(
        f.ok("grep", json!({"pattern": "TODO"})).await,
        "README.md:1:TODO in readme\nsrc/a/b.rs:2:TODO upper\nsrc/lib.rs:2:// TODO: x"
    );
    assert_eq!(
        f.ok(
            "grep",
            json!({"pattern": "todo", "ignore_case": true, "path": "src"})
        )
        .await,
        "src/a/b.rs:1:todo lower\nsrc/a/b.rs:2:TODO upper\nsrc/lib.rs:2:// TODO: x"
    );
    assert_eq!(
        f.ok("grep", json!({"pattern": "TODO", "glob": "*.rs"}))
            .await,
        "src/a/b.rs:2:TODO upper\nsrc/lib.rs:2:// TODO: x"
    );
    assert_eq!(
        f.ok("grep", json!({"pattern": "TODO", "glob": "src/*.rs"}))
            .await,
        "src/lib.rs:2:// TODO: x"
    );
    assert_eq!(
        f.ok("grep", json!({"pattern": "T.DO", "path": "src/a/b.rs"}))
            .await,
        "src/a/b.rs:2:TODO upper"
    );
    assert_eq!(
        f.ok("grep", json!({"pattern": "zzz"})).await,
        "no matches for `zzz` in `.`"
    );
    // Explicitly naming an ignored file searches it.
    assert_eq!(
        f.ok("grep", json!({"pattern": "TODO", "path": "src/debug.log"}))
            .await,
        "src/debug.log:1:TODO ignored"
    );
}

#[tokio::test]
async fn grep_refuses_bad_patterns_and_missing_paths() {
    let f = tree();
    let bad = f.failed("grep", json!({"pattern": "("})).await;
    assert!(bad.starts_with("invalid regex `(`: "), "{bad}");
    let bad_glob = f.failed("grep", json!({"pattern": "x", "glob": "{"})).await;
    assert!(bad_glob.starts_with("invalid glob `{`: "), "{bad_glob}");
    assert_eq!(
        f.failed("grep", json!({"pattern": "x", "path": "nope"}))
            .await,
        "`nope` does not exist; use ls or glob to find the right path"
    );
}

#[tokio::test]
async fn grep_caps_matches_and_output_with_a_note() {
    let f = Fixture::new();
    f.file("many.txt", "hit\n".repeat(1001));
    let out = f.ok("grep", json!({"pattern": "hit"})).await;
    let (lines, note) = out.split_once("\n\n").expect("a note");
    assert_eq!(lines.lines().count(), 1000);
    assert_eq!(lines.lines().last(), Some("many.txt:1000:hit"));
    assert_eq!(
        note,
        "[stopped after 1000 matches; narrow the pattern, path or glob]"
    );

    let small = Fixture::with(|s| s.with_output_limit(4096));
    small.file("wide.txt", format!("{}\n", "hit".repeat(100)).repeat(100));
    let out = small.ok("grep", json!({"pattern": "hit"})).await;
    let (lines, note) = out.split_once("\n\n").expect("a note");
    // Each line is `wide.txt:N:` plus 300 bytes, and a newline: 13 fit in 4096 bytes.
    assert!(lines.len() <= 4096);
    assert_eq!(lines.lines().count(), 13);
    assert_eq!(
        note,
        "[output limit reached after 13 matches; narrow the pattern, path or glob]"
    );
}
