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

// MCP clients and IDEs send absolute paths: one under the root's real path names the file
// it points at; the rest is checked as a relative path, so climbing out is still refused
// and the message names the path as given (found by a new-user trial of `coder mcp-serve`).
#[tokio::test]
async fn an_absolute_path_under_the_root_names_the_file_and_climbing_out_is_still_refused() {
    let f = Fixture::new();
    f.file("a/x.txt", "inside\n");
    let root = f.dir.path().canonicalize().unwrap();
    let root = root.to_str().unwrap();
    assert!(
        f.ok("read", json!({"path": format!("{root}/a/x.txt")}))
            .await
            .contains("inside")
    );
    assert!(f.ok("ls", json!({"path": root})).await.contains("a/"));
    f.ok(
        "write",
        json!({"path": format!("{root}/a/y.txt"), "content": "new"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(f.dir.path().join("a/y.txt")).unwrap(),
        "new"
    );
    let out = outside();
    for path in [
        format!(
            "{root}/../{}",
            out.path().file_name().unwrap().to_str().unwrap()
        ),
        format!("{root}/a/../../x"),
        format!("{root}x/a.txt"),
        out.path().join("secret.txt").to_str().unwrap().to_string(),
    ] {
        assert_eq!(
            f.failed("read", json!({"path": path})).await,
            outside_message(&path),
            "{path}"
        );
    }
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

mod protected {
    use halo_core::Sandbox;
    use halo_core::sandbox::{SandboxError, SandboxPath};
    use serde_json::json;

    use crate::common::Fixture;

    fn path(s: &str) -> SandboxPath {
        SandboxPath::parse(s).unwrap()
    }

    fn git_fixture(protected: &[&str]) -> Fixture {
        let protected: Vec<String> = protected.iter().map(|s| s.to_string()).collect();
        let f = Fixture::with(move |s| s.with_protected_paths(protected).unwrap());
        f.file(".git/config", "[core]\n");
        f.file("src/lib.rs", "fn a() {}\n");
        f
    }

    #[tokio::test]
    async fn protected_paths_are_readable_but_not_writable() {
        let f = git_fixture(&[".git"]);
        assert_eq!(
            f.ok("read", json!({"path": ".git/config"})).await,
            "     1\t[core]"
        );
        assert_eq!(
            f.failed("write", json!({"path": ".git/config", "content": "x"}))
                .await,
            "`.git/config` is read-only in this sandbox (protected path `.git`)"
        );
        assert_eq!(
            f.failed("write", json!({"path": ".git/new/file", "content": "x"}))
                .await,
            "`.git/new/file` is read-only in this sandbox (protected path `.git`)"
        );
        assert!(!f.path(".git/new").exists());
        let s = &f.sandbox;
        assert!(s.stat(&path(".git/config")).await.unwrap().read_only);
        assert!(s.stat(&path(".git")).await.unwrap().read_only);
        assert!(!s.stat(&path("src/lib.rs")).await.unwrap().read_only);
        // `.gitx` is not under `.git`.
        s.write(&path(".gitx"), b"ok".to_vec()).await.unwrap();
        for (p, recursive) in [(".git/config", false), (".git", true)] {
            let err = s.remove(&path(p), recursive).await.unwrap_err();
            assert!(matches!(err, SandboxError::ReadOnly { .. }), "{err}");
        }
        assert!(f.path(".git/config").exists());
        let root = s.remove(&SandboxPath::root(), true).await.unwrap_err();
        assert!(matches!(root, SandboxError::OutsideRoot { .. }), "{root}");
    }

    #[tokio::test]
    async fn removing_a_folder_that_holds_a_protected_path_is_refused() {
        let f = Fixture::with(|s| s.with_protected_paths(["vendor/lib/.git"]).unwrap());
        f.file("vendor/lib/.git/HEAD", "ref\n");
        f.file("vendor/other.txt", "x");
        let err = f.sandbox.remove(&path("vendor"), true).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "`vendor` is read-only in this sandbox (protected path `vendor/lib/.git`)"
        );
        f.sandbox
            .remove(&path("vendor/other.txt"), false)
            .await
            .unwrap();
        assert!(f.path("vendor/lib/.git/HEAD").exists());
    }

    #[tokio::test]
    async fn links_into_a_protected_path_cannot_write_there() {
        let f = git_fixture(&[".git"]);
        f.symlink(".git/config", "cfg");
        f.symlink(".git", "g");
        f.symlink("g/hooks/pre-commit", "hook");
        f.file("deep/dir/x", "");
        f.symlink("../.git", "deep/up");
        for p in ["cfg", "g/config", "g/hooks/new", "hook", "deep/up/config"] {
            assert_eq!(
                f.failed("write", json!({"path": p, "content": "x"})).await,
                format!("`{p}` is read-only in this sandbox (protected path `.git`)"),
                "{p}"
            );
        }
        // Through a link made of `..` after another link: `deep/dir/../..` is the root
        // once `dir` is a link to `deep/dir`'s parent... resolved by the kernel's rules.
        f.symlink("deep/dir", "d");
        f.symlink("d/../../.git/dangling", "tricky");
        assert_eq!(
            f.failed("write", json!({"path": "tricky", "content": "x"}))
                .await,
            "`tricky` is read-only in this sandbox (protected path `.git`)"
        );
        assert!(!f.path(".git/hooks").exists());
        assert!(!f.path(".git/dangling").exists());
        assert_eq!(
            std::fs::read_to_string(f.path(".git/config")).unwrap(),
            "[core]\n"
        );
        // Removing the link itself is fine: the protected folder stays.
        f.sandbox.remove(&path("cfg"), false).await.unwrap();
        assert!(f.path(".git/config").exists());
    }

    #[tokio::test]
    async fn a_protected_path_that_is_a_link_protects_its_target() {
        let f = Fixture::with(|s| s.with_protected_paths([".git"]).unwrap());
        f.file("store/gitdir/config", "[core]\n");
        f.symlink("store/gitdir", ".git");
        assert_eq!(
            f.failed(
                "write",
                json!({"path": "store/gitdir/config", "content": "x"})
            )
            .await,
            "`store/gitdir/config` is read-only in this sandbox (protected path `.git`)"
        );
        let err = f.sandbox.remove(&path("store"), true).await.unwrap_err();
        assert!(matches!(err, SandboxError::ReadOnly { .. }), "{err}");
        f.file("store/free.txt", "");
        f.sandbox
            .write(&path("store/free.txt"), b"ok".to_vec())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn writing_through_a_dangling_link_inside_creates_its_target() {
        let f = Fixture::new();
        f.file("dir/keep", "");
        f.symlink("dir/target.txt", "link");
        assert_eq!(
            f.ok("write", json!({"path": "link", "content": "made"}))
                .await,
            "wrote 4 bytes to `link`"
        );
        assert_eq!(
            std::fs::read_to_string(f.path("dir/target.txt")).unwrap(),
            "made"
        );
    }

    #[tokio::test]
    async fn removing_a_link_out_of_the_root_removes_only_the_link() {
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("keep.txt"), "keep").unwrap();
        let f = Fixture::new();
        f.symlink(out.path(), "outdir");
        f.sandbox.remove(&path("outdir"), true).await.unwrap();
        assert!(!f.path("outdir").exists());
        assert_eq!(
            std::fs::read_to_string(out.path().join("keep.txt")).unwrap(),
            "keep"
        );
        let err = f
            .sandbox
            .remove(&path("outdir/keep.txt"), false)
            .await
            .unwrap_err();
        assert!(matches!(err, SandboxError::NotFound { .. }), "{err}");
    }
}

// Documented limitation: cap-std treats every absolute link target as leading out of the
// root, even one that names a file inside it. Relative links inside work.
#[tokio::test]
async fn absolute_link_targets_are_refused_even_inside_the_root() {
    let f = Fixture::new();
    f.file("real.txt", "inside\n");
    f.symlink(f.sandbox.root().join("real.txt"), "absolute");
    f.symlink("real.txt", "relative");
    assert_eq!(
        f.failed("read", json!({"path": "absolute"})).await,
        outside_message("absolute")
    );
    assert_eq!(
        f.ok("read", json!({"path": "relative"})).await,
        "     1\tinside"
    );
}
