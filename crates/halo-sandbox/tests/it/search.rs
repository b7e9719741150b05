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

#[tokio::test]
async fn grep_shows_context_lines_and_separates_groups() {
    let f = Fixture::new();
    let text: String = (1..=10)
        .map(|i| {
            if i == 3 || i == 8 {
                format!("match {i}\n")
            } else {
                format!("line {i}\n")
            }
        })
        .collect();
    f.file("ctx.txt", &text);
    f.file("other.txt", "match here\n");
    assert_eq!(
        f.ok("grep", json!({"pattern": "match", "context": 1}))
            .await,
        "ctx.txt-2-line 2\nctx.txt:3:match 3\nctx.txt-4-line 4\n--\nctx.txt-7-line 7\n\
         ctx.txt:8:match 8\nctx.txt-9-line 9\n--\nother.txt:1:match here"
    );
    // Groups that touch are one group.
    assert_eq!(
        f.ok(
            "grep",
            json!({"pattern": "match", "context": 2, "path": "ctx.txt"})
        )
        .await,
        "ctx.txt-1-line 1\nctx.txt-2-line 2\nctx.txt:3:match 3\nctx.txt-4-line 4\n\
         ctx.txt-5-line 5\nctx.txt-6-line 6\nctx.txt-7-line 7\nctx.txt:8:match 8\n\
         ctx.txt-9-line 9\nctx.txt-10-line 10"
    );
    // More than 10 lines of context (the schema's maximum, which an agent's registry
    // enforces) is shown as 10.
    let long: String = (1..=30).map(|i| format!("row {i}\n")).collect();
    f.file("long.txt", long);
    let wide = f
        .ok(
            "grep",
            json!({"pattern": "^row 15$", "context": 50, "path": "long.txt"}),
        )
        .await;
    let numbers: Vec<&str> = wide.lines().map(|l| &l[9..11]).collect();
    assert_eq!(wide.lines().count(), 21, "{wide}");
    assert_eq!((numbers[0], numbers[20]), ("5-", "25"), "{wide}");
    let grep = f.tools.iter().find(|t| t.spec().name == "grep").unwrap();
    assert_eq!(
        grep.spec().parameters["properties"]["context"]["maximum"],
        10
    );
}

#[tokio::test]
async fn glob_can_include_hidden_and_ignored_files() {
    let f = tree();
    assert_eq!(
        f.ok(
            "glob",
            json!({"pattern": "**/*.rs", "include_ignored": true})
        )
        .await,
        ".hidden/x.rs\nsrc/a/b.rs\nsrc/lib.rs\ntarget/out.rs"
    );
}

#[tokio::test]
async fn only_gitignore_files_inside_the_root_apply_deepest_first() {
    let f = tree();
    // `.ignore` files are not honoured, only `.gitignore`.
    f.file(".ignore", "*.md\n");
    assert_eq!(f.ok("glob", json!({"pattern": "*.md"})).await, "README.md");
    // A deeper `.gitignore` overrides the root's: `!` brings the log back, in src only.
    f.file("src/.gitignore", "!debug.log\n");
    f.file("other/x.log", "");
    assert_eq!(
        f.ok("glob", json!({"pattern": "**/*.log"})).await,
        "src/debug.log"
    );
    // A `.gitignore` in a folder applies to that folder and below, not to its siblings.
    f.file("docs/.gitignore", "*.txt\n");
    f.file("docs/a.txt", "");
    f.file("docs/deep/b.txt", "");
    f.file("notes.txt", "");
    assert_eq!(
        f.ok("glob", json!({"pattern": "**/*.txt"})).await,
        "notes.txt\nsrc/a/c.txt"
    );
}

#[tokio::test]
async fn a_gitignore_link_is_read_when_it_resolves_inside_the_root() {
    let f = Fixture::new();
    f.file("rules/ignore-these", "*.md\n");
    f.file("README.md", "");
    f.file("main.rs", "");
    f.symlink("rules/ignore-these", ".gitignore");
    assert_eq!(f.ok("glob", json!({"pattern": "*"})).await, "main.rs");
}

#[tokio::test]
async fn results_are_sorted_by_path_bytes_and_fifos_are_not_files() {
    let f = Fixture::new();
    f.file("a/x", "hit\n");
    f.file("a.txt", "hit\n");
    f.file("a-b", "hit\n");
    let status = std::process::Command::new("mkfifo")
        .arg(f.path("a/pipe"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    assert_eq!(
        f.ok("glob", json!({"pattern": "**"})).await,
        "a-b\na.txt\na/x"
    );
    // The FIFO is neither listed nor opened (opening it would block).
    assert_eq!(
        f.ok("grep", json!({"pattern": "hit"})).await,
        "a-b:1:hit\na.txt:1:hit\na/x:1:hit"
    );
}

#[tokio::test]
async fn grep_keeps_the_first_matches_in_path_order_whatever_the_walk_order() {
    let f = Fixture::new();
    // Many files so the parallel walk finishes them in any order.
    for i in 0..300 {
        f.file(&format!("d{}/f{i:03}.txt", i % 7), "hit\nhit\nhit\nhit\n");
    }
    let out = f.ok("grep", json!({"pattern": "hit"})).await;
    let (lines, note) = out.split_once("\n\n").expect("a note");
    assert_eq!(
        note,
        "[stopped after 1000 matches; narrow the pattern, path or glob]"
    );
    let got: Vec<&str> = lines.lines().collect();
    let mut all: Vec<String> = (0..300)
        .flat_map(|i| (1..=4).map(move |n| format!("d{}/f{i:03}.txt:{n}:hit", i % 7)))
        .collect();
    all.sort_by(|a, b| {
        let key = |s: &str| {
            let (path, rest) = s.split_once(':').unwrap();
            (
                path.to_string(),
                rest.split(':').next().unwrap().parse::<u32>().unwrap(),
            )
        };
        key(a).cmp(&key(b))
    });
    assert_eq!(
        got,
        all[..1000].iter().map(String::as_str).collect::<Vec<_>>()
    );
}

// A line longer than the searcher holds (8 MiB) is not read into memory whole: the file is
// searched up to it, what matched before is kept, and the result says which file was cut.
#[tokio::test]
async fn grep_cuts_a_file_at_a_line_longer_than_it_searches_and_says_so() {
    let f = Fixture::new();
    let mut long = b"TODO before\n".to_vec();
    long.extend(std::iter::repeat_n(b'a', 9 << 20));
    long.extend_from_slice(b"\nTODO after\n");
    f.file("long.txt", &long);
    f.file("short.txt", "TODO short\n");
    let out = f.ok("grep", json!({"pattern": "TODO"})).await;
    assert_eq!(
        out,
        "long.txt:1:TODO before\nshort.txt:1:TODO short\n\n\
         [not searched to the end: `long.txt` (a line is longer than 8 MiB; searched up to it)]"
    );
    let out = f.ok("grep", json!({"pattern": "nothing"})).await;
    assert_eq!(
        out,
        "no matches for `nothing` in `.`\n\n\
         [not searched to the end: `long.txt` (a line is longer than 8 MiB; searched up to it)]"
    );
}

// A long line that fits is kept, cut to what the tool shows, not held whole per match.
#[tokio::test]
async fn grep_keeps_a_long_matching_line_cut() {
    let f = Fixture::new();
    let line = format!("TODO {}", "b".repeat(1 << 20));
    f.file("wide.txt", format!("{line}\n{line}\n"));
    let out = f.ok("grep", json!({"pattern": "TODO"})).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{}", &out[..out.len().min(300)]);
    for l in lines {
        assert!(l.ends_with(" [line truncated]"), "{}", &l[..80]);
        assert!(l.len() < 2100, "{}", l.len());
    }
}
