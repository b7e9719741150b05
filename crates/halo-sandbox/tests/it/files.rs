//! `read`, `write` and `ls` on a real temporary root: exact outputs and clear refusals.

use serde_json::json;

use crate::common::Fixture;

#[tokio::test]
async fn read_numbers_lines_like_cat_n() {
    let f = Fixture::new();
    f.file("a.txt", "one\ntwo\r\nthree");
    assert_eq!(
        f.ok("read", json!({"path": "a.txt"})).await,
        "     1\tone\n     2\ttwo\n     3\tthree"
    );
}

#[tokio::test]
async fn read_offset_and_limit_select_lines_and_say_how_to_continue() {
    let f = Fixture::new();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    f.file("ten.txt", text);
    assert_eq!(
        f.ok("read", json!({"path": "ten.txt", "offset": 3, "limit": 2}))
            .await,
        "     3\tline 3\n     4\tline 4\n\n[showing lines 3-4; call read with offset=5 to read more]"
    );
    // The last lines: no note.
    assert_eq!(
        f.ok("read", json!({"path": "ten.txt", "offset": 9})).await,
        "     9\tline 9\n    10\tline 10"
    );
    assert_eq!(
        f.failed("read", json!({"path": "ten.txt", "offset": 11}))
            .await,
        "`ten.txt` has 10 lines; offset 11 is past the end"
    );
    // Huge numbers are data, not a panic.
    assert_eq!(
        f.failed("read", json!({"path": "ten.txt", "offset": u64::MAX}))
            .await,
        format!(
            "`ten.txt` has 10 lines; offset {} is past the end",
            u64::MAX
        )
    );
    let all = f
        .ok("read", json!({"path": "ten.txt", "limit": u64::MAX}))
        .await;
    assert_eq!(all.lines().count(), 10);
}

#[tokio::test]
async fn read_stops_at_the_default_line_limit() {
    let f = Fixture::new();
    let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    f.file("long.txt", text);
    let out = f.ok("read", json!({"path": "long.txt"})).await;
    let (lines, note) = out.split_once("\n\n").expect("a note");
    assert_eq!(lines.lines().count(), 2000);
    assert_eq!(lines.lines().last(), Some("  2000\t2000"));
    assert_eq!(
        note,
        "[showing lines 1-2000; call read with offset=2001 to read more]"
    );
}

#[tokio::test]
async fn read_stops_at_the_output_limit() {
    let f = Fixture::with(|s| s.with_output_limit(4096));
    let text: String = (0..1000)
        .map(|_| format!("{}\n", "x".repeat(100)))
        .collect();
    f.file("wide.txt", text);
    let out = f.ok("read", json!({"path": "wide.txt"})).await;
    // Each line is 6 + 1 + 100 bytes plus a newline: 37 lines fit in 4096 bytes.
    let (lines, note) = out.split_once("\n\n").expect("a note");
    assert_eq!(lines.lines().count(), 37);
    assert!(lines.len() <= 4096);
    assert_eq!(
        note,
        "[output limit reached: showing lines 1-37; call read with offset=38 to read more]"
    );
}

#[tokio::test]
async fn read_cuts_long_lines_and_reads_invalid_utf8_lossily_with_a_note() {
    let f = Fixture::new();
    f.file("wide.txt", format!("{}\nshort\n", "y".repeat(2500)));
    assert_eq!(
        f.ok("read", json!({"path": "wide.txt"})).await,
        format!(
            "     1\t{} [line truncated]\n     2\tshort",
            "y".repeat(2000)
        )
    );
    // Trigger: a Latin-1 file read as `caf\u{fffd}` with nothing saying why, or that write
    // would replace the byte the model never saw.
    f.file("latin1.txt", b"caf\xe9\n");
    assert_eq!(
        f.ok("read", json!({"path": "latin1.txt"})).await,
        "     1\tcaf\u{fffd}\n\n[the file is not valid UTF-8 (perhaps Latin-1 or another \
         encoding): invalid bytes are shown as U+FFFD (\u{fffd}); edit refuses this file, and \
         write would replace all of its original bytes with the UTF-8 text you give]"
    );
    f.file("empty.txt", "");
    assert_eq!(
        f.ok("read", json!({"path": "empty.txt"})).await,
        "(empty file)"
    );
}

#[tokio::test]
async fn read_refuses_binary_large_missing_and_directories_with_advice() {
    let f = Fixture::new();
    f.file("bin.dat", b"abc\0def");
    assert_eq!(
        f.failed("read", json!({"path": "bin.dat"})).await,
        "`bin.dat` looks like a binary file (it contains NUL bytes); only text files can be read"
    );
    f.file("big.txt", "z\n".repeat(150_000));
    assert_eq!(
        f.failed("read", json!({"path": "big.txt"})).await,
        "`big.txt` is 300000 bytes, over the 262144-byte limit for reading a whole file; \
         read part of it with offset and limit, or search it with grep"
    );
    // In parts it reads.
    assert_eq!(
        f.ok(
            "read",
            json!({"path": "big.txt", "offset": 149_999, "limit": 5})
        )
        .await,
        "149999\tz\n150000\tz"
    );
    assert_eq!(
        f.failed("read", json!({"path": "nope.txt"})).await,
        "`nope.txt` does not exist; use ls or glob to find the right path"
    );
    std::fs::create_dir(f.path("sub")).unwrap();
    assert_eq!(
        f.failed("read", json!({"path": "sub"})).await,
        "`sub` is a directory; use ls to list it"
    );
}

// Regression: opening a FIFO for reading blocks until a writer comes; read must refuse it.
#[tokio::test]
async fn read_refuses_a_fifo_instead_of_hanging() {
    let f = Fixture::new();
    let status = std::process::Command::new("mkfifo")
        .arg(f.path("pipe"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    assert_eq!(
        f.failed("read", json!({"path": "pipe"})).await,
        "`pipe` is not a regular file"
    );
    assert_eq!(
        f.failed("write", json!({"path": "pipe", "content": "x"}))
            .await,
        "`pipe` is not a regular file"
    );
}

#[tokio::test]
async fn write_creates_parent_folders_and_reports_bytes() {
    let f = Fixture::new();
    assert_eq!(
        f.ok("write", json!({"path": "d/e/f.txt", "content": "héllo\n"}))
            .await,
        "wrote 7 bytes to `d/e/f.txt`"
    );
    assert_eq!(
        std::fs::read_to_string(f.path("d/e/f.txt")).unwrap(),
        "héllo\n"
    );
    // Replaces, and cleans the path it reports.
    assert_eq!(
        f.ok(
            "write",
            json!({"path": "./d/x/../e/f.txt", "content": "new"})
        )
        .await,
        "wrote 3 bytes to `d/e/f.txt`"
    );
    assert_eq!(std::fs::read_to_string(f.path("d/e/f.txt")).unwrap(), "new");
    assert!(!f.path("d/x").exists());
}

#[tokio::test]
async fn write_refuses_directories() {
    let f = Fixture::new();
    std::fs::create_dir(f.path("sub")).unwrap();
    assert_eq!(
        f.failed("write", json!({"path": "sub", "content": "x"}))
            .await,
        "`sub` is a directory; use ls to list it"
    );
    assert_eq!(
        f.failed("write", json!({"path": ".", "content": "x"}))
            .await,
        "`.` is a directory; use ls to list it"
    );
    // Trigger: the message was only "`file.txt` is not a directory", with nothing to do.
    f.file("file.txt", "x");
    let under_file = f
        .failed("write", json!({"path": "file.txt/y", "content": "x"}))
        .await;
    assert_eq!(
        under_file,
        "cannot write `file.txt/y`: `file.txt` is a file, not a folder; choose another path, \
         or remove that file first"
    );
}

#[tokio::test]
async fn ls_sorts_entries_and_marks_folders_and_links() {
    let f = Fixture::new();
    f.file("b.txt", "");
    f.file("a/inner.txt", "");
    f.file("a.txt", "");
    f.file(".hidden", "");
    f.symlink("b.txt", "link");
    assert_eq!(
        f.ok("ls", json!({})).await,
        ".hidden\na/\na.txt\nb.txt\nlink@"
    );
    assert_eq!(f.ok("ls", json!({"path": "a"})).await, "inner.txt");
    assert_eq!(
        f.ok("ls", json!({"path": null})).await,
        f.ok("ls", json!({"path": "."})).await
    );
    std::fs::create_dir(f.path("empty")).unwrap();
    assert_eq!(
        f.ok("ls", json!({"path": "empty"})).await,
        "(empty directory)"
    );
    assert_eq!(
        f.failed("ls", json!({"path": "b.txt"})).await,
        "`b.txt` is not a directory"
    );
    assert_eq!(
        f.failed("ls", json!({"path": "nope"})).await,
        "`nope` does not exist; use ls or glob to find the right path"
    );
}

#[tokio::test]
async fn ls_caps_long_listings_with_a_note() {
    let f = Fixture::new();
    for i in 0..1001 {
        f.file(&format!("many/f{i:04}"), "");
    }
    let out = f.ok("ls", json!({"path": "many"})).await;
    let (names, note) = out.split_once("\n\n").expect("a note");
    assert_eq!(names.lines().count(), 1000);
    assert_eq!(names.lines().last(), Some("f0999"));
    assert_eq!(
        note,
        "[showing the first 1000 of 1001 entries; use glob to narrow the listing]"
    );
}

#[tokio::test]
async fn edit_replaces_one_occurrence_and_shows_a_unified_diff() {
    let f = Fixture::new();
    f.file("src/lib.rs", "fn a() {}\n\nfn b() {\n    1\n}\n");
    assert_eq!(
        f.ok(
            "edit",
            json!({"path": "src/lib.rs", "old_string": "    1\n", "new_string": "    2\n    3\n"})
        )
        .await,
        "replaced 1 occurrence in `src/lib.rs`\n--- a/src/lib.rs\n+++ b/src/lib.rs\n\
         @@ -1,5 +1,6 @@\n fn a() {}\n \n fn b() {\n-    1\n+    2\n+    3\n }"
    );
    assert_eq!(
        std::fs::read_to_string(f.path("src/lib.rs")).unwrap(),
        "fn a() {}\n\nfn b() {\n    2\n    3\n}\n"
    );
}

#[tokio::test]
async fn edit_needs_a_unique_old_string_unless_replace_all() {
    let f = Fixture::new();
    f.file("a.txt", "x = 1\nx = 1\nx = 1\n");
    assert_eq!(
        f.failed(
            "edit",
            json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"})
        )
        .await,
        "old_string occurs 3 times in `a.txt`; include more surrounding lines to make it \
         unique, or set replace_all to replace every occurrence"
    );
    assert_eq!(
        f.failed(
            "edit",
            json!({"path": "a.txt", "old_string": "y = 1", "new_string": "y = 2"})
        )
        .await,
        "old_string was not found in `a.txt`; read the file first and copy the text to \
         replace exactly, with its whitespace and indentation"
    );
    // Nothing changed so far.
    assert_eq!(
        std::fs::read_to_string(f.path("a.txt")).unwrap(),
        "x = 1\nx = 1\nx = 1\n"
    );
    assert_eq!(
        f.ok(
            "edit",
            json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true})
        )
        .await,
        "replaced 3 occurrences in `a.txt`\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n\
         -x = 1\n-x = 1\n-x = 1\n+x = 2\n+x = 2\n+x = 2"
    );
    assert_eq!(
        std::fs::read_to_string(f.path("a.txt")).unwrap(),
        "x = 2\nx = 2\nx = 2\n"
    );
}

#[tokio::test]
async fn edit_refuses_what_it_cannot_change() {
    let f = Fixture::new();
    f.file("a.txt", "text\n");
    f.file("bin.dat", b"ab\0cd");
    f.file("latin1.txt", b"caf\xe9\n");
    std::fs::create_dir(f.path("dir")).unwrap();
    let edit = |path: &str, old: &str, new: &str| json!({"path": path, "old_string": old, "new_string": new});
    assert_eq!(
        f.failed("edit", edit("a.txt", "", "x")).await,
        "old_string is empty; give the exact text to replace (use write to create or replace \
         a whole file)"
    );
    assert_eq!(
        f.failed("edit", edit("a.txt", "text", "text")).await,
        "old_string and new_string are the same; there is nothing to change"
    );
    assert_eq!(
        f.failed("edit", edit("nope.txt", "a", "b")).await,
        "`nope.txt` does not exist; use ls or glob to find the right path"
    );
    assert_eq!(
        f.failed("edit", edit("dir", "a", "b")).await,
        "`dir` is a directory; use ls to list it"
    );
    assert_eq!(
        f.failed("edit", edit("bin.dat", "ab", "x")).await,
        "`bin.dat` looks like a binary file (it contains NUL bytes); only text files can be \
         edited"
    );
    assert_eq!(
        f.failed("edit", edit("latin1.txt", "caf", "x")).await,
        "`latin1.txt` is not valid UTF-8 text (perhaps Latin-1 or another encoding); edit only \
         changes UTF-8 files: to change it, write its whole new content"
    );
    assert_eq!(std::fs::read(f.path("latin1.txt")).unwrap(), b"caf\xe9\n");
}

#[tokio::test]
async fn edit_diffs_are_bounded_by_the_output_limit() {
    let f = Fixture::with(|s| s.with_output_limit(4096));
    let old: String = (0..1000).map(|i| format!("line {i}\n")).collect();
    f.file("big.txt", &old);
    let out = f
        .ok(
            "edit",
            json!({"path": "big.txt", "old_string": "line", "new_string": "row", "replace_all": true}),
        )
        .await;
    let (diff, note) = out.rsplit_once("\n\n").expect("a note");
    assert!(out.len() <= 4096 + 100, "{}", out.len());
    let shown = diff.lines().count() - 1; // the first line is the summary
    assert_eq!(
        note,
        format!("[diff cut after {shown} of 2003 lines; read the file to see the rest]")
    );
    assert!(diff.starts_with("replaced 1000 occurrences in `big.txt`\n--- a/big.txt\n"));
    assert_eq!(
        std::fs::read_to_string(f.path("big.txt")).unwrap(),
        old.replace("line", "row")
    );
}
