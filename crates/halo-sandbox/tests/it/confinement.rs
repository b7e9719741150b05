//! Every path stays under the root: `..`, absolute paths and symbolic links out of the root
//! are refused with a message the model can act on, and walks never follow links out.

use serde_json::json;

use crate::common::{Fixture, outside_message};

/// A folder outside the sandbox with a file the tests must never read or change.
fn outside() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.txt"), "secret content\n").unwrap();
    dir
}

#[tokio::test]
async fn dot_dot_and_absolute_paths_are_refused_by_every_tool() {
    let f = Fixture::new();
    f.file("a/x.txt", "x");
    for path in ["../x", "a/../../x", "/etc/passwd"] {
        let msg = outside_message(path);
        assert_eq!(f.failed("read", json!({"path": path})).await, msg);
        assert_eq!(
            f.failed("write", json!({"path": path, "content": "x"}))
                .await,
            msg
        );
        assert_eq!(f.failed("ls", json!({"path": path})).await, msg);
        assert_eq!(
            f.failed("glob", json!({"pattern": "*", "path": path}))
                .await,
            msg
        );
        assert_eq!(
            f.failed("grep", json!({"pattern": "x", "path": path}))
                .await,
            msg
        );
    }
    // `..` that stays inside is fine.
    assert_eq!(
        f.ok("read", json!({"path": "a/../a/x.txt"})).await,
        "     1\tx"
    );
}

#[tokio::test]
async fn a_symlink_to_etc_cannot_be_read_listed_or_searched() {
    let f = Fixture::new();
    f.symlink("/etc", "etc");
    f.symlink("/etc/passwd", "passwd");
    assert_eq!(
        f.failed("read", json!({"path": "etc/passwd"})).await,
        outside_message("etc/passwd")
    );
    assert_eq!(
        f.failed("read", json!({"path": "passwd"})).await,
        outside_message("passwd")
    );
    assert_eq!(
        f.failed("ls", json!({"path": "etc"})).await,
        outside_message("etc")
    );
    assert_eq!(
        f.failed("grep", json!({"pattern": "root", "path": "etc"}))
            .await,
        outside_message("etc")
    );
    // Walks from the root see the links but do not follow them.
    assert_eq!(
        f.ok("grep", json!({"pattern": "root"})).await,
        "no matches for `root` in `.`"
    );
    // Links are not listed as files either.
    assert_eq!(
        f.ok("glob", json!({"pattern": "**"})).await,
        "no files match `**` in `.`"
    );
}

#[tokio::test]
async fn writes_through_links_out_of_the_root_are_refused_and_change_nothing() {
    let out = outside();
    let f = Fixture::new();
    f.symlink(out.path().join("secret.txt"), "victim");
    f.symlink(out.path(), "outdir");
    assert_eq!(
        f.failed("write", json!({"path": "victim", "content": "pwned"}))
            .await,
        outside_message("victim")
    );
    assert_eq!(
        f.failed(
            "write",
            json!({"path": "outdir/new.txt", "content": "pwned"})
        )
        .await,
        outside_message("outdir/new.txt")
    );
    assert_eq!(
        f.failed(
            "write",
            json!({"path": "outdir/sub/new.txt", "content": "pwned"})
        )
        .await,
        outside_message("outdir/sub/new.txt")
    );
    assert_eq!(
        std::fs::read_to_string(out.path().join("secret.txt")).unwrap(),
        "secret content\n"
    );
    let names: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["secret.txt"]);
}

#[tokio::test]
async fn a_symlinked_folder_out_of_the_root_is_not_read_or_walked() {
    let out = outside();
    let f = Fixture::new();
    f.symlink(out.path(), "outdir");
    assert_eq!(
        f.failed("read", json!({"path": "outdir/secret.txt"})).await,
        outside_message("outdir/secret.txt")
    );
    assert_eq!(
        f.failed("glob", json!({"pattern": "*", "path": "outdir"}))
            .await,
        outside_message("outdir")
    );
    assert_eq!(
        f.ok("glob", json!({"pattern": "**/*.txt"})).await,
        "no files match `**/*.txt` in `.`"
    );
    assert_eq!(
        f.ok("grep", json!({"pattern": "secret"})).await,
        "no matches for `secret` in `.`"
    );
}

#[tokio::test]
async fn glob_patterns_that_climb_out_are_refused() {
    let f = Fixture::new();
    for pattern in ["../**", "a/../../*", "/etc/*", "{..,x}/*"] {
        assert_eq!(
            f.failed("glob", json!({"pattern": pattern})).await,
            outside_message(pattern)
        );
    }
    assert_eq!(
        f.failed("grep", json!({"pattern": "x", "glob": "../*"}))
            .await,
        outside_message("../*")
    );
}

#[tokio::test]
async fn links_inside_the_root_work() {
    let f = Fixture::new();
    f.file("real/file.txt", "inside\n");
    f.symlink("real/file.txt", "alias.txt");
    f.symlink("real", "alias_dir");
    assert_eq!(
        f.ok("read", json!({"path": "alias.txt"})).await,
        "     1\tinside"
    );
    assert_eq!(f.ok("ls", json!({"path": "alias_dir"})).await, "file.txt");
    assert_eq!(
        f.ok(
            "write",
            json!({"path": "alias_dir/new.txt", "content": "ok"})
        )
        .await,
        "wrote 2 bytes to `alias_dir/new.txt`"
    );
    assert_eq!(
        std::fs::read_to_string(f.path("real/new.txt")).unwrap(),
        "ok"
    );
}

#[tokio::test]
async fn nul_bytes_in_paths_are_refused_without_panicking() {
    let f = Fixture::new();
    let msg = "path `a\\0b` is not valid: it contains a NUL byte";
    assert_eq!(f.failed("read", json!({"path": "a\u{0}b"})).await, msg);
    assert_eq!(
        f.failed("write", json!({"path": "a\u{0}b", "content": ""}))
            .await,
        msg
    );
    assert_eq!(f.failed("ls", json!({"path": "a\u{0}b"})).await, msg);
}
