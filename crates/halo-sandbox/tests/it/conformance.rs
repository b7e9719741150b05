//! One suite, two sandboxes: every check runs on a `VirtualSandbox` and on a
//! `ContainerSandbox` built from the same tree, asserts that both give the same answer,
//! and asserts that answer against a literal (two sandboxes that agree can still both be
//! wrong).
//!
//! The container's tree is real: a temporary folder `outer/` holds the root `outer/root/`
//! and, beside it, `outer/secret.txt`, which links like `../secret.txt` point at and no
//! operation may read or change. Links are made with `std::os::unix::fs::symlink`.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use halo_core::sandbox::{
    Capabilities, DirEntry, ExecRequest, FileKind, FilesystemAccess, GlobRequest, GrepRequest,
    Isolation, Metadata, OsIsolation, SandboxError, SandboxPath, SharedSandbox,
};
use halo_sandbox::{ContainerSandbox, ToolOptions, VirtualSandbox};
use serde_json::{Value, json};
use tempfile::TempDir;

/// One entry of a test tree.
#[derive(Debug, Clone, Copy)]
enum E {
    File(&'static str, &'static [u8]),
    Dir(&'static str),
    /// A symbolic link at the first path with the second as its target, verbatim.
    Link(&'static str, &'static str),
}

/// The secret beside the container's root that links lead to.
const SECRET: &[u8] = b"secret content\n";

/// A sandbox under test.
struct Subject {
    name: &'static str,
    sandbox: SharedSandbox,
    /// The container's `outer/` folder, kept alive for the test.
    outer: Option<TempDir>,
}

impl Subject {
    /// Whether the secret beside the container's root is unchanged and alone there (always
    /// true for the virtual sandbox, which has no outside).
    fn outside_intact(&self) -> bool {
        let Some(outer) = &self.outer else {
            return true;
        };
        let mut beside: Vec<String> = std::fs::read_dir(outer.path())
            .expect("outer")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        beside.sort();
        beside == ["root", "secret.txt"]
            && std::fs::read(outer.path().join("secret.txt")).expect("secret") == SECRET
    }
}

fn virtual_subject(tree: &[E], protected: &[&str]) -> Subject {
    virtual_subject_with(tree, |sb| {
        sb.with_protected_paths(protected).expect("protected paths")
    })
}

fn virtual_subject_with(
    tree: &[E],
    protect: impl FnOnce(VirtualSandbox) -> VirtualSandbox,
) -> Subject {
    let mut sb = VirtualSandbox::new();
    for e in tree {
        sb = match *e {
            E::File(path, content) => sb.with_file(path, content),
            E::Dir(path) => sb.with_dir(path),
            E::Link(path, target) => sb.with_symlink(path, target),
        }
        .expect("virtual tree");
    }
    let sb = protect(sb);
    Subject {
        name: "virtual",
        sandbox: Arc::new(sb),
        outer: None,
    }
}

fn container_subject(tree: &[E], protected: &[&str]) -> Subject {
    container_subject_with(tree, |sb| {
        sb.with_protected_paths(protected).expect("protected paths")
    })
}

fn container_subject_with(
    tree: &[E],
    protect: impl FnOnce(ContainerSandbox) -> ContainerSandbox,
) -> Subject {
    let outer = tempfile::tempdir().expect("tempdir");
    std::fs::write(outer.path().join("secret.txt"), SECRET).expect("secret");
    let root = outer.path().join("root");
    std::fs::create_dir(&root).expect("root");
    for e in tree {
        match *e {
            E::File(path, content) => {
                let p = root.join(path);
                std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                std::fs::write(p, content).expect("write");
            }
            E::Dir(path) => std::fs::create_dir_all(root.join(path)).expect("mkdir"),
            E::Link(path, target) => {
                let p = root.join(path);
                std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                std::os::unix::fs::symlink(target, p).expect("symlink");
            }
        }
    }
    let sb = protect(ContainerSandbox::new(&root).expect("container"));
    Subject {
        name: "container",
        sandbox: Arc::new(sb),
        outer: Some(outer),
    }
}

/// Both sandboxes over `tree`.
fn subjects(tree: &[E], protected: &[&str]) -> [Subject; 2] {
    [
        virtual_subject(tree, protected),
        container_subject(tree, protected),
    ]
}

/// Runs `op` on both sandboxes built from `tree`, asserts that both give the same value,
/// and returns it.
async fn same<T: PartialEq + Debug>(
    tree: &[E],
    protected: &[&str],
    op: impl AsyncFn(&Subject) -> T,
) -> T {
    let [v, c] = subjects(tree, protected);
    let from_virtual = op(&v).await;
    let from_container = op(&c).await;
    assert_eq!(
        from_virtual, from_container,
        "{} (left) and {} (right) differ",
        v.name, c.name
    );
    from_virtual
}

/// An error reduced to what the suite compares: the variant's name and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    variant: String,
    message: String,
}

/// What an operation gave, comparable across sandboxes.
type Outcome<T> = Result<T, Failure>;

fn outcome<T>(r: Result<T, SandboxError>) -> Outcome<T> {
    r.map_err(|e| {
        let debug = format!("{e:?}");
        let variant = debug
            .split(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or_default()
            .to_string();
        Failure {
            variant,
            message: e.to_string(),
        }
    })
}

/// The variant of a failed outcome, or `"ok"`.
fn variant<T>(o: &Outcome<T>) -> &str {
    match o {
        Ok(_) => "ok",
        Err(f) => &f.variant,
    }
}

fn p(s: &str) -> SandboxPath {
    SandboxPath::parse(s).expect("valid path")
}

async fn read(s: &Subject, path: &str) -> Outcome<String> {
    outcome(s.sandbox.read(&p(path)).await).map(|b| String::from_utf8_lossy(&b).into_owned())
}

async fn write(s: &Subject, path: &str, content: &str) -> Outcome<()> {
    outcome(s.sandbox.write(&p(path), content.into()).await)
}

async fn list(s: &Subject, path: &str) -> Outcome<Vec<DirEntry>> {
    outcome(s.sandbox.list(&p(path)).await)
}

async fn stat(s: &Subject, path: &str) -> Outcome<Metadata> {
    outcome(s.sandbox.stat(&p(path)).await)
}

async fn remove(s: &Subject, path: &str, recursive: bool) -> Outcome<()> {
    outcome(s.sandbox.remove(&p(path), recursive).await)
}

/// Every entry under `path`, depth first, as `path kind len` (links not followed).
async fn snapshot(s: &Subject, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![path.to_string()];
    while let Some(dir) = todo.pop() {
        let entries = list(s, &dir).await.expect("list");
        for e in entries.iter().rev() {
            let full = if dir.is_empty() {
                e.name.clone()
            } else {
                format!("{dir}/{}", e.name)
            };
            if e.kind == FileKind::Dir {
                todo.push(full.clone());
            }
            out.push(format!("{full} {:?} {}", e.kind, e.len));
        }
    }
    out.sort();
    out
}

fn entry(name: &str, kind: FileKind, len: u64) -> DirEntry {
    DirEntry {
        name: name.into(),
        kind,
        len,
    }
}

fn meta(kind: FileKind, len: u64, read_only: bool) -> Metadata {
    Metadata {
        kind,
        len,
        read_only,
    }
}

/// The tree most checks use.
const TREE: &[E] = &[
    E::File("a.txt", b"alpha\n"),
    E::File("dir/b.txt", b"beta\n"),
    E::File("dir/sub/c.rs", b"fn c() {}\n"),
    E::Dir("empty"),
    E::Link("link_file", "a.txt"),
    E::Link("link_dir", "dir"),
    E::Link("dir/up_file", "../a.txt"),
    E::Link("dir/sub/up_dir", "../.."),
    E::Link("dangling", "nowhere.txt"),
    E::Link("dangling_deep", "nowhere/x.txt"),
    E::Link("out_rel", "../secret.txt"),
    E::Link("out_dir", ".."),
    E::Link("out_abs", "/etc/passwd"),
    E::Link("dir/out_deep", "../../secret.txt"),
    E::Link("loop_a", "loop_b"),
    E::Link("loop_b", "loop_a"),
    E::Link("self_loop", "self_loop"),
];

fn failure(variant: &str, message: &str) -> Failure {
    Failure {
        variant: variant.into(),
        message: message.into(),
    }
}

fn not_found(path: &str) -> Failure {
    failure(
        "NotFound",
        &format!("`{path}` does not exist; use ls or glob to find the right path"),
    )
}

fn outside(path: &str) -> Failure {
    failure(
        "OutsideRoot",
        &format!("path `{path}` is outside the sandbox root; use a path relative to the root"),
    )
}

fn is_dir(path: &str) -> Failure {
    failure(
        "IsDirectory",
        &format!("`{path}` is a directory; use ls to list it"),
    )
}

fn not_dir(path: &str) -> Failure {
    failure("NotDirectory", &format!("`{path}` is not a directory"))
}

fn symlink_loop(op: &str, path: &str) -> Failure {
    failure(
        "Io",
        &format!(
            "cannot {op} `{path}`: the path leads into a symbolic-link loop (too many levels \
             of symbolic links); fix or remove the link that loops (ls marks links with `@`), \
             or use another path"
        ),
    )
}

#[tokio::test]
async fn capabilities_and_kind_say_what_each_sandbox_can_do() {
    let [v, c] = subjects(&[], &[]);
    assert_eq!(v.sandbox.capabilities(), Capabilities::FILES_ONLY);
    assert_eq!(v.sandbox.kind(), "virtual");
    // The container runs commands in the OS sandbox of its default mode, workspace-write.
    assert_eq!(
        c.sandbox.capabilities(),
        Capabilities::files_and_exec(Isolation::Os(OsIsolation::new(
            "bubblewrap",
            FilesystemAccess::WorkspaceWrite,
            false,
            true
        )))
    );
    assert_eq!(c.sandbox.kind(), "container");
}

#[tokio::test]
async fn exec_runs_in_the_container_and_is_unsupported_in_the_virtual_sandbox() {
    let [v, c] = subjects(TREE, &[]);
    let request = ExecRequest {
        command: "echo hi; cat a.txt; echo oops >&2; exit 3".into(),
        timeout: Duration::from_secs(30),
        output_limit: 1024,
    };
    let ran = c.sandbox.exec(request.clone()).await.expect("exec");
    assert_eq!(ran.exit_code, Some(3));
    assert!(!ran.timed_out);
    assert_eq!(ran.stdout, "hi\nalpha\n");
    assert_eq!(ran.stderr, "oops\n");
    assert_eq!((ran.stdout_dropped, ran.stderr_dropped), (0, 0));
    assert_eq!(
        outcome(v.sandbox.exec(request).await).map(|_| ()),
        Err(failure(
            "Unsupported",
            "exec is not supported by this sandbox (virtual)"
        ))
    );
}

#[tokio::test]
async fn read_returns_the_bytes_of_regular_files_only() {
    let got = same(TREE, &[], async |s| {
        (
            read(s, "a.txt").await,
            read(s, "dir/sub/c.rs").await,
            read(s, "dir/./sub/../b.txt").await,
            read(s, "dir").await,
            read(s, "").await,
            read(s, "missing.txt").await,
            read(s, "missing/x.txt").await,
            read(s, "a.txt/x").await,
        )
    })
    .await;
    assert_eq!(got.0, Ok("alpha\n".into()));
    assert_eq!(got.1, Ok("fn c() {}\n".into()));
    assert_eq!(got.2, Ok("beta\n".into()));
    assert_eq!(got.3, Err(is_dir("dir")));
    assert_eq!(got.4, Err(is_dir(".")));
    assert_eq!(got.5, Err(not_found("missing.txt")));
    assert_eq!(got.6, Err(not_found("missing/x.txt")));
    assert_eq!(got.7, Err(not_dir("a.txt/x")));
}

#[tokio::test]
async fn write_creates_parent_folders_and_replaces_files() {
    let got = same(TREE, &[], async |s| {
        (
            write(s, "new/deep/f.txt", "made\n").await,
            read(s, "new/deep/f.txt").await,
            write(s, "a.txt", "replaced").await,
            read(s, "a.txt").await,
            write(s, "empty/e.txt", "").await,
            snapshot(s, "new").await,
            stat(s, "empty/e.txt").await,
        )
    })
    .await;
    assert_eq!(got.0, Ok(()));
    assert_eq!(got.1, Ok("made\n".into()));
    assert_eq!(got.2, Ok(()));
    assert_eq!(got.3, Ok("replaced".into()));
    assert_eq!(got.4, Ok(()));
    assert_eq!(got.5, ["new/deep Dir 0", "new/deep/f.txt File 5"]);
    assert_eq!(got.6, Ok(meta(FileKind::File, 0, false)));
}

async fn append(s: &Subject, path: &str, content: &str) -> Outcome<()> {
    outcome(s.sandbox.append(&p(path), content.into()).await)
}

// `append` (the memory file's atomic append): it creates the file and its folders, adds to
// the end, follows a link inside the root, and refuses what `write` refuses.
#[tokio::test]
async fn append_creates_adds_to_the_end_and_refuses_what_write_refuses() {
    let got = same(TREE, &[".git"], async |s| {
        (
            append(s, "new/log.md", "one\n").await,
            append(s, "new/log.md", "two\n").await,
            read(s, "new/log.md").await,
            append(s, "link_file", "more\n").await,
            read(s, "a.txt").await,
            variant(&append(s, "dir", "x").await).to_string(),
            variant(&append(s, "out_rel", "x").await).to_string(),
            variant(&append(s, ".git/x", "x").await).to_string(),
            s.outside_intact(),
        )
    })
    .await;
    assert_eq!(got.0, Ok(()));
    assert_eq!(got.1, Ok(()));
    assert_eq!(got.2, Ok("one\ntwo\n".into()));
    assert_eq!(got.3, Ok(()));
    assert_eq!(got.4, Ok("alpha\nmore\n".into()));
    assert_eq!(got.5, "IsDirectory");
    assert_eq!(got.6, "OutsideRoot");
    assert_eq!(got.7, "ReadOnly");
    assert!(got.8, "nothing outside the root changed");
}

#[tokio::test]
async fn write_refuses_folders_and_paths_through_files() {
    let got = same(TREE, &[], async |s| {
        (
            write(s, "dir", "x").await,
            write(s, "", "x").await,
            write(s, "a.txt/x", "x").await,
            write(s, "a.txt/x/y", "x").await,
            write(s, "link_dir", "x").await,
            snapshot(s, "").await,
        )
    })
    .await;
    assert_eq!(got.0, Err(is_dir("dir")));
    assert_eq!(got.1, Err(is_dir(".")));
    // The message names the file that stands where a folder should be.
    assert_eq!(got.2, Err(not_dir("a.txt")));
    assert_eq!(got.3, Err(not_dir("a.txt")));
    assert_eq!(got.4, Err(is_dir("link_dir")));
    // Nothing changed.
    let [v, _] = subjects(TREE, &[]);
    assert_eq!(got.5, snapshot(&v, "").await);
}

#[tokio::test]
async fn list_is_sorted_by_name_and_reports_links_without_following_them() {
    let got = same(TREE, &[], async |s| {
        (
            list(s, "").await,
            list(s, "dir").await,
            list(s, "link_dir").await,
            list(s, "empty").await,
            list(s, "a.txt").await,
            list(s, "missing").await,
            list(s, "out_dir").await,
            list(s, "dir/sub/up_dir").await.map(|e| e.len()),
        )
    })
    .await;
    use FileKind::{Dir, File, Symlink};
    assert_eq!(
        got.0,
        Ok(vec![
            entry("a.txt", File, 6),
            entry("dangling", Symlink, 0),
            entry("dangling_deep", Symlink, 0),
            entry("dir", Dir, 0),
            entry("empty", Dir, 0),
            entry("link_dir", Symlink, 0),
            entry("link_file", Symlink, 0),
            entry("loop_a", Symlink, 0),
            entry("loop_b", Symlink, 0),
            entry("out_abs", Symlink, 0),
            entry("out_dir", Symlink, 0),
            entry("out_rel", Symlink, 0),
            entry("self_loop", Symlink, 0),
        ])
    );
    let dir = vec![
        entry("b.txt", File, 5),
        entry("out_deep", Symlink, 0),
        entry("sub", Dir, 0),
        entry("up_file", Symlink, 0),
    ];
    assert_eq!(got.1, Ok(dir.clone()));
    assert_eq!(got.2, Ok(dir));
    assert_eq!(got.3, Ok(vec![]));
    assert_eq!(got.4, Err(not_dir("a.txt")));
    assert_eq!(got.5, Err(not_found("missing")));
    assert_eq!(got.6, Err(outside("out_dir")));
    assert_eq!(got.7, Ok(13));
}

#[tokio::test]
async fn stat_follows_links_that_stay_inside() {
    let got = same(TREE, &[], async |s| {
        let mut out = Vec::new();
        for path in [
            "",
            "a.txt",
            "dir",
            "link_file",
            "link_dir",
            "dir/up_file",
            "dir/sub/up_dir",
            "link_dir/sub/c.rs",
            "missing",
        ] {
            out.push(stat(s, path).await);
        }
        out
    })
    .await;
    use FileKind::{Dir, File};
    assert_eq!(
        got,
        [
            Ok(meta(Dir, 0, false)),
            Ok(meta(File, 6, false)),
            Ok(meta(Dir, 0, false)),
            Ok(meta(File, 6, false)),
            Ok(meta(Dir, 0, false)),
            Ok(meta(File, 6, false)),
            Ok(meta(Dir, 0, false)),
            Ok(meta(File, 10, false)),
            Err(not_found("missing")),
        ]
    );
}

#[tokio::test]
async fn links_out_of_the_root_dangling_links_and_loops_are_refused_by_every_operation() {
    let got = same(TREE, &[], async |s| {
        let mut out = Vec::new();
        for path in [
            "out_rel",
            "out_abs",
            "out_dir/secret.txt",
            "dir/out_deep",
            "link_dir/out_deep",
            "dangling",
            "dangling_deep",
            "loop_a",
            "self_loop",
            "loop_a/x",
        ] {
            out.push((
                path,
                variant(&read(s, path).await).to_string(),
                variant(&stat(s, path).await).to_string(),
                variant(&list(s, path).await).to_string(),
            ));
        }
        (out, s.outside_intact())
    })
    .await;
    let row = |path, v: &'static str| (path, v.to_string(), v.to_string(), v.to_string());
    assert_eq!(
        got.0,
        [
            row("out_rel", "OutsideRoot"),
            row("out_abs", "OutsideRoot"),
            row("out_dir/secret.txt", "OutsideRoot"),
            row("dir/out_deep", "OutsideRoot"),
            row("link_dir/out_deep", "OutsideRoot"),
            row("dangling", "NotFound"),
            row("dangling_deep", "NotFound"),
            row("loop_a", "Io"),
            row("self_loop", "Io"),
            row("loop_a/x", "Io"),
        ]
    );
    // The messages, once each.
    let msgs = same(TREE, &[], async |s| {
        (
            read(s, "out_rel").await,
            stat(s, "dangling").await,
            read(s, "loop_a").await,
            list(s, "self_loop").await,
        )
    })
    .await;
    assert_eq!(msgs.0, Err(outside("out_rel")));
    assert_eq!(msgs.1, Err(not_found("dangling")));
    assert_eq!(msgs.2, Err(symlink_loop("read", "loop_a")));
    assert_eq!(msgs.3, Err(symlink_loop("list", "self_loop")));
}

#[tokio::test]
async fn writes_follow_links_inside_and_never_leave_the_root() {
    let [v, c] = subjects(TREE, &[]);
    let mut results = Vec::new();
    for s in [&v, &c] {
        results.push((
            write(s, "link_file", "via link").await,
            read(s, "a.txt").await,
            write(s, "link_dir/new.txt", "in dir").await,
            read(s, "dir/new.txt").await,
            write(s, "out_rel", "pwned").await,
            write(s, "out_dir/secret.txt", "pwned").await,
            write(s, "out_dir/new/x.txt", "pwned").await,
            write(s, "dir/out_deep", "pwned").await,
            write(s, "out_abs", "pwned").await,
            write(s, "loop_a", "x").await,
            write(s, "loop_a/x", "x").await,
            snapshot(s, "").await,
        ));
    }
    assert_eq!(
        results[0], results[1],
        "virtual (left) and container (right) differ"
    );
    let got = &results[0];
    assert_eq!(got.0, Ok(()));
    assert_eq!(got.1, Ok("via link".into()));
    assert_eq!(got.2, Ok(()));
    assert_eq!(got.3, Ok("in dir".into()));
    assert_eq!(got.4, Err(outside("out_rel")));
    assert_eq!(got.5, Err(outside("out_dir/secret.txt")));
    assert_eq!(got.6, Err(outside("out_dir/new/x.txt")));
    assert_eq!(got.7, Err(outside("dir/out_deep")));
    assert_eq!(got.8, Err(outside("out_abs")));
    assert_eq!(got.9, Err(symlink_loop("write", "loop_a")));
    assert_eq!(variant(&got.10), "Io");
    assert!(got.11.contains(&"a.txt File 8".to_string()), "{:?}", got.11);
    // The secret beside the root is untouched, and nothing was created beside it.
    assert!(c.outside_intact());
}

// A write through a dangling link creates its target, as `open(O_CREAT)` does on Linux.
#[tokio::test]
async fn write_through_a_dangling_link_creates_the_target_inside() {
    let got = same(TREE, &[], async |s| {
        (
            write(s, "dangling", "now here").await,
            read(s, "nowhere.txt").await,
            stat(s, "dangling").await,
            write(s, "dangling_deep", "x").await,
        )
    })
    .await;
    assert_eq!(got.0, Ok(()));
    assert_eq!(got.1, Ok("now here".into()));
    assert_eq!(got.2, Ok(meta(FileKind::File, 8, false)));
    assert_eq!(got.3, Err(not_found("dangling_deep")));
}

#[tokio::test]
async fn remove_deletes_files_links_and_folders_but_never_the_root() {
    let got = same(TREE, &[], async |s| {
        (
            remove(s, "link_file", false).await,
            read(s, "a.txt").await,
            remove(s, "link_dir", false).await,
            list(s, "dir").await.map(|e| e.len()),
            remove(s, "dir", false).await,
            remove(s, "empty", false).await,
            remove(s, "dangling", false).await,
            remove(s, "out_rel", false).await,
            remove(s, "out_dir", false).await,
            remove(s, "missing", false).await,
            (
                remove(s, "", true).await,
                remove(s, "dir/sub/up_dir/a.txt", false).await,
                remove(s, "dir", true).await,
                snapshot(s, "").await,
                s.outside_intact(),
            ),
        )
    })
    .await;
    assert_eq!(got.0, Ok(()));
    assert_eq!(got.1, Ok("alpha\n".into()));
    assert_eq!(got.2, Ok(()));
    assert_eq!(got.3, Ok(4));
    assert_eq!(
        got.4,
        Err(failure(
            "DirectoryNotEmpty",
            "`dir` is a directory that is not empty"
        ))
    );
    assert_eq!(got.5, Ok(()));
    assert_eq!(got.6, Ok(()));
    assert_eq!(got.7, Ok(()));
    assert_eq!(got.8, Ok(()));
    assert_eq!(got.9, Err(not_found("missing")));
    let got = got.10;
    assert_eq!(got.0, Err(outside(".")));
    // A parent link inside the root is followed: this removes `a.txt`.
    assert_eq!(got.1, Ok(()));
    assert_eq!(got.2, Ok(()));
    assert_eq!(
        got.3,
        [
            "dangling_deep Symlink 0",
            "loop_a Symlink 0",
            "loop_b Symlink 0",
            "out_abs Symlink 0",
            "self_loop Symlink 0",
        ]
    );
    assert!(got.4);
}

#[tokio::test]
async fn remove_refuses_paths_through_links_out_of_the_root() {
    let got = same(TREE, &[], async |s| {
        (
            remove(s, "out_dir/secret.txt", false).await,
            remove(s, "out_dir/root", true).await,
            s.outside_intact(),
        )
    })
    .await;
    assert_eq!(got.0, Err(outside("out_dir/secret.txt")));
    assert_eq!(got.1, Err(outside("out_dir/root")));
    assert!(got.2);
}

const GIT_TREE: &[E] = &[
    E::File(".git/config", b"[core]\n"),
    E::File(".git/refs/heads/main", b"abc\n"),
    E::File("src/lib.rs", b"lib\n"),
    E::Link("cfg", ".git/config"),
    E::Link("gitdir", ".git"),
];

fn read_only(path: &str) -> Failure {
    failure(
        "ReadOnly",
        &format!("`{path}` is read-only in this sandbox (protected path `.git`)"),
    )
}

#[tokio::test]
async fn protected_paths_stay_read_only_also_through_links() {
    let got = same(GIT_TREE, &[".git"], async |s| {
        (
            write(s, ".git/config", "x").await,
            write(s, ".git/new", "x").await,
            write(s, ".git/hooks/pre-commit", "x").await,
            remove(s, ".git/config", false).await,
            remove(s, ".git", true).await,
            write(s, "cfg", "x").await,
            write(s, "gitdir/config", "x").await,
            remove(s, "gitdir/refs", true).await,
            (
                read(s, ".git/config").await,
                stat(s, ".git/config").await,
                stat(s, "cfg").await,
                stat(s, "src/lib.rs").await,
                write(s, "src/lib.rs", "changed\n").await,
                write(s, ".gitignore", "x\n").await,
                remove(s, "cfg", false).await,
                snapshot(s, ".git").await,
            ),
        )
    })
    .await;
    assert_eq!(got.0, Err(read_only(".git/config")));
    assert_eq!(got.1, Err(read_only(".git/new")));
    assert_eq!(got.2, Err(read_only(".git/hooks/pre-commit")));
    assert_eq!(got.3, Err(read_only(".git/config")));
    assert_eq!(got.4, Err(read_only(".git")));
    assert_eq!(got.5, Err(read_only("cfg")));
    assert_eq!(got.6, Err(read_only("gitdir/config")));
    assert_eq!(got.7, Err(read_only("gitdir/refs")));
    let got = got.8;
    assert_eq!(got.0, Ok("[core]\n".into()));
    assert_eq!(got.1, Ok(meta(FileKind::File, 7, true)));
    assert_eq!(got.2, Ok(meta(FileKind::File, 7, true)));
    assert_eq!(got.3, Ok(meta(FileKind::File, 4, false)));
    assert_eq!(got.4, Ok(()));
    assert_eq!(got.5, Ok(()));
    // The link itself lies outside `.git`: removing it leaves the config alone.
    assert_eq!(got.6, Ok(()));
    assert_eq!(
        got.7,
        [
            ".git/config File 7",
            ".git/refs Dir 0",
            ".git/refs/heads Dir 0",
            ".git/refs/heads/main File 4",
        ]
    );
}

/// A project with a nested repository, a bare one, and links into them.
const NESTED_TREE: &[E] = &[
    E::File("src/lib.rs", b"lib\n"),
    E::File("vendor/lib/.git/config", b"[core]\n"),
    E::File("vendor/lib/.git/HEAD", b"ref: refs/heads/main\n"),
    E::File("vendor/lib/src.rs", b"nested\n"),
    E::File("store/HEAD", b"ref: refs/heads/main\n"),
    E::Dir("store/objects"),
    E::Dir("store/refs"),
    E::Dir("half/objects"),
    E::Dir("half/refs"),
    E::Link("lib_git", "vendor/lib/.git"),
    E::File(".agent/memory.md", b"- noted\n"),
];

#[tokio::test]
async fn protected_names_and_repositories_stay_read_only_at_any_depth() {
    let [v, c] = [
        virtual_subject_with(NESTED_TREE, |sb| sb.with_default_protection()),
        container_subject_with(NESTED_TREE, |sb| sb.with_default_protection()),
    ];
    let mut got = Vec::new();
    for s in [&v, &c] {
        got.push((
            write(s, "vendor/lib/.git/hooks/pre-commit", "x").await,
            write(s, "lib_git/config", "x").await,
            write(s, "new/deep/.git/config", "x").await,
            remove(s, "vendor", true).await,
            write(s, "store/config", "x").await,
            write(s, "half/HEAD", "x").await,
            (
                write(s, ".mcp.json", "{}").await,
                write(s, ".agent/mcp.json", "{}").await,
                append(s, ".agent/memory.md", "- more\n").await,
                write(s, "vendor/lib/src.rs", "changed\n").await,
                write(s, "half/notes.txt", "x").await,
                stat(s, "vendor/lib/.git/config").await,
                remove(s, "src", true).await,
            ),
        ));
    }
    assert_eq!(
        got[0], got[1],
        "virtual (left) and container (right) differ"
    );
    let got = got.remove(0);
    let ro = |path: &str, protected: &str| {
        Err(failure(
            "ReadOnly",
            &format!("`{path}` is read-only in this sandbox (protected path `{protected}`)"),
        ))
    };
    assert_eq!(
        got.0,
        ro("vendor/lib/.git/hooks/pre-commit", "vendor/lib/.git")
    );
    assert_eq!(got.1, ro("lib_git/config", "vendor/lib/.git"));
    assert_eq!(got.2, ro("new/deep/.git/config", "new/deep/.git"));
    assert_eq!(got.3, ro("vendor", "vendor/lib/.git"));
    assert_eq!(got.4, ro("store/config", "store"));
    assert_eq!(got.5, ro("half/HEAD", "half"));
    let got = got.6;
    assert_eq!(got.0, ro(".mcp.json", ".mcp.json"));
    assert_eq!(got.1, ro(".agent/mcp.json", ".agent/mcp.json"));
    assert_eq!(got.2, Ok(()));
    assert_eq!(got.3, Ok(()));
    assert_eq!(got.4, Ok(()));
    assert_eq!(got.5, Ok(meta(FileKind::File, 7, true)));
    assert_eq!(got.6, Ok(()));
}

/// A tree for glob and grep: ignore files at the root and below, hidden names, links.
const SEARCH_TREE: &[E] = &[
    E::File(".gitignore", b"*.log\nbuild/\n!keep.log\n/top_only.txt\n"),
    E::File(".env", b"SECRET=1 TODO\n"),
    E::File(".hidden/h.rs", b"// TODO hidden\n"),
    E::File("README.md", b"# Readme\nTODO: write docs\n"),
    E::File("debug.log", b"TODO in a log\n"),
    E::File("keep.log", b"TODO kept\n"),
    E::File("top_only.txt", b"TODO top\n"),
    E::File("build/out.rs", b"// TODO built\n"),
    E::File("bin.dat", b"TODO\0binary\n"),
    E::File("src/.gitignore", b"gen_*\n!gen_keep.rs\n"),
    E::File(
        "src/main.rs",
        b"fn main() {\n    // TODO: start\n    run();\n}\n",
    ),
    E::File(
        "src/lib.rs",
        b"pub fn run() {}\n// todo lower\n// TODO upper\n",
    ),
    E::File("src/gen_a.rs", b"// TODO generated\n"),
    E::File("src/gen_keep.rs", b"// TODO kept generated\n"),
    E::File("src/top_only.txt", b"TODO nested top_only\n"),
    E::File("src/util/mod.rs", b"mod helper;\n"),
    E::File(
        "src/util/helper.rs",
        b"a\nb\nTODO helper\nc\nd\ne\nTODO again\n",
    ),
    E::File("src/util.rs", b"// TODO util file\n"),
    E::File("src/trace.log", b"trace\n"),
    E::File("src/util-x/y.rs", b"// TODO dash\n"),
    E::File("docs/a.md", b"crlf TODO\r\nnext\r\n"),
    E::File("docs/b.txt", b"latin1 \xe9 TODO\n"),
    E::Link("src/link.rs", "main.rs"),
    E::Link("linked_src", "src"),
    E::Link("etc", "/etc"),
];

fn glob_req(pattern: &str, base: &str, include_ignored: bool, limit: usize) -> GlobRequest {
    GlobRequest {
        pattern: pattern.into(),
        base: p(base),
        include_ignored,
        limit,
    }
}

async fn glob(s: &Subject, request: GlobRequest) -> Outcome<(Vec<String>, bool)> {
    outcome(s.sandbox.glob(request).await).map(|o| {
        (
            o.paths.iter().map(|p| p.as_str().to_string()).collect(),
            o.truncated,
        )
    })
}

/// Paths, not truncated.
fn paths(list: &[&str]) -> Outcome<(Vec<String>, bool)> {
    Ok((list.iter().map(|s| s.to_string()).collect(), false))
}

#[tokio::test]
async fn glob_star_does_not_cross_folders_and_double_star_does() {
    let got = same(SEARCH_TREE, &[], async |s| {
        (
            glob(s, glob_req("*", "", false, 100)).await,
            glob(s, glob_req("**/*.rs", "", false, 100)).await,
            glob(s, glob_req("src/*.rs", "", false, 100)).await,
            glob(s, glob_req("**/*.{md,txt}", "", false, 100)).await,
            glob(s, glob_req("src/?ain.rs", "", false, 100)).await,
            glob(s, glob_req("src/[l-m]*.rs", "", false, 100)).await,
            glob(s, glob_req("*.zig", "", false, 100)).await,
        )
    })
    .await;
    assert_eq!(got.0, paths(&["README.md", "bin.dat", "keep.log"]));
    assert_eq!(
        got.1,
        paths(&[
            "src/gen_keep.rs",
            "src/lib.rs",
            "src/main.rs",
            "src/util-x/y.rs",
            "src/util.rs",
            "src/util/helper.rs",
            "src/util/mod.rs",
        ])
    );
    assert_eq!(
        got.2,
        paths(&[
            "src/gen_keep.rs",
            "src/lib.rs",
            "src/main.rs",
            "src/util.rs"
        ])
    );
    assert_eq!(
        got.3,
        paths(&["README.md", "docs/a.md", "docs/b.txt", "src/top_only.txt"])
    );
    assert_eq!(got.4, paths(&["src/main.rs"]));
    assert_eq!(got.5, paths(&["src/lib.rs", "src/main.rs"]));
    assert_eq!(got.6, paths(&[]));
}

#[tokio::test]
async fn glob_from_a_folder_matches_paths_relative_to_it_and_keeps_outer_rules() {
    let got = same(SEARCH_TREE, &[], async |s| {
        (
            glob(s, glob_req("*.rs", "src", false, 100)).await,
            glob(s, glob_req("**", "src/util", false, 100)).await,
            glob(s, glob_req("*.log", "src", false, 100)).await,
            glob(s, glob_req("*", "linked_src/util", false, 100)).await,
            glob(s, glob_req("*.log", "src", true, 100)).await,
        )
    })
    .await;
    assert_eq!(
        got.0,
        paths(&[
            "src/gen_keep.rs",
            "src/lib.rs",
            "src/main.rs",
            "src/util.rs"
        ])
    );
    assert_eq!(got.1, paths(&["src/util/helper.rs", "src/util/mod.rs"]));
    assert_eq!(got.2, paths(&[]));
    assert_eq!(
        got.3,
        paths(&["linked_src/util/helper.rs", "linked_src/util/mod.rs"])
    );
    assert_eq!(got.4, paths(&["src/trace.log"]));
}

#[tokio::test]
async fn glob_include_ignored_shows_hidden_and_ignored_files_but_never_links() {
    let got = same(SEARCH_TREE, &[], async |s| {
        (
            glob(s, glob_req("**", "", true, 100)).await,
            glob(s, glob_req("*.rs", "src", true, 100)).await,
        )
    })
    .await;
    assert_eq!(
        got.0,
        paths(&[
            ".env",
            ".gitignore",
            ".hidden/h.rs",
            "README.md",
            "bin.dat",
            "build/out.rs",
            "debug.log",
            "docs/a.md",
            "docs/b.txt",
            "keep.log",
            "src/.gitignore",
            "src/gen_a.rs",
            "src/gen_keep.rs",
            "src/lib.rs",
            "src/main.rs",
            "src/top_only.txt",
            "src/trace.log",
            "src/util-x/y.rs",
            "src/util.rs",
            "src/util/helper.rs",
            "src/util/mod.rs",
            "top_only.txt",
        ])
    );
    assert_eq!(
        got.1,
        paths(&[
            "src/gen_a.rs",
            "src/gen_keep.rs",
            "src/lib.rs",
            "src/main.rs",
            "src/util.rs",
        ])
    );
}

#[tokio::test]
async fn glob_caps_results_and_says_so() {
    let got = same(SEARCH_TREE, &[], async |s| {
        (
            glob(s, glob_req("**/*.rs", "", false, 3)).await,
            glob(s, glob_req("**/*.rs", "", false, 7)).await,
            glob(s, glob_req("**/*.rs", "", false, 0)).await,
        )
    })
    .await;
    assert_eq!(
        got.0,
        Ok((
            vec![
                "src/gen_keep.rs".to_string(),
                "src/lib.rs".into(),
                "src/main.rs".into()
            ],
            true
        ))
    );
    assert_eq!(got.1.as_ref().map(|o| (o.0.len(), o.1)), Ok((7, false)));
    assert_eq!(got.2, Ok((vec![], true)));
}

#[tokio::test]
async fn glob_refuses_bad_patterns_and_bases() {
    let got = same(SEARCH_TREE, &[], async |s| {
        (
            glob(s, glob_req("a[", "", false, 10)).await,
            glob(s, glob_req("../*", "", false, 10)).await,
            glob(s, glob_req("/etc/*", "", false, 10)).await,
            glob(s, glob_req("*", "missing", false, 10)).await,
            glob(s, glob_req("*", "README.md", false, 10)).await,
            glob(s, glob_req("*", "etc", false, 10)).await,
        )
    })
    .await;
    assert_eq!(
        got.0,
        Err(failure(
            "InvalidPattern",
            "invalid glob `a[`: unclosed character class; missing ']'"
        ))
    );
    assert_eq!(got.1, Err(outside("../*")));
    assert_eq!(got.2, Err(outside("/etc/*")));
    assert_eq!(got.3, Err(not_found("missing")));
    assert_eq!(got.4, Err(not_dir("README.md")));
    assert_eq!(got.5, Err(outside("etc")));
}

#[tokio::test]
async fn glob_nested_gitignore_negation_and_anchors_follow_git() {
    let tree: &[E] = &[
        E::File(".gitignore", b"*.tmp\n/anchored.txt\nvendor/\n"),
        E::File("a.tmp", b""),
        E::File("anchored.txt", b""),
        E::File("deep/anchored.txt", b""),
        E::File("deep/.gitignore", b"!*.tmp\n"),
        E::File("deep/b.tmp", b""),
        E::File("deep/vendor/v.rs", b""),
        E::File("vendor/w.rs", b""),
        E::File("other/c.tmp", b""),
        E::File("crlf/.gitignore", b"x.txt\r\n# comment\n\n  \ny.txt\n"),
        E::File("crlf/x.txt", b""),
        E::File("crlf/y.txt", b""),
        E::File("crlf/z.txt", b""),
        E::File(".gitignore_is_hidden/a.rs", b""),
        E::File("kept/.gitignore", b"!.env\n"),
        E::File("kept/.env", b""),
    ];
    let got = same(tree, &[], async |s| {
        (
            glob(s, glob_req("**", "", false, 100)).await,
            glob(s, glob_req("**", "deep", false, 100)).await,
            glob(s, glob_req("**", "vendor", false, 100)).await,
        )
    })
    .await;
    // Blank lines, comments and CRLF line ends are read as git reads them; a rule cannot
    // unhide a hidden name (hidden names are skipped whatever the rules say).
    assert_eq!(
        got.0,
        paths(&["crlf/z.txt", "deep/anchored.txt", "deep/b.tmp"])
    );
    // The deeper `!*.tmp` wins over the root's `*.tmp` from any base.
    assert_eq!(got.1, paths(&["deep/anchored.txt", "deep/b.tmp"]));
    // A folder named as the base is searched even when a rule ignores it (ripgrep does the
    // same for a path given on its command line).
    assert_eq!(got.2, paths(&["vendor/w.rs"]));
}

fn grep_req(pattern: &str, base: &str) -> GrepRequest {
    GrepRequest {
        pattern: pattern.into(),
        base: p(base),
        glob: None,
        ignore_case: false,
        context: 0,
        include_ignored: false,
        limit: 100,
    }
}

/// Lines as `path:line:text`, context lines as `path-line-text`, and whether truncated.
async fn grep(s: &Subject, request: GrepRequest) -> Outcome<(Vec<String>, bool)> {
    outcome(s.sandbox.grep(request).await).map(|o| {
        let lines = o
            .lines
            .iter()
            .map(|l| {
                let sep = if l.is_context { '-' } else { ':' };
                format!("{}{sep}{}{sep}{}", l.path.as_str(), l.line_number, l.text)
            })
            .collect();
        (lines, o.truncated)
    })
}

fn lines(list: &[&str]) -> Outcome<(Vec<String>, bool)> {
    Ok((list.iter().map(|s| s.to_string()).collect(), false))
}

#[tokio::test]
async fn grep_finds_lines_in_sorted_files_skipping_binary_hidden_and_ignored() {
    let got = same(SEARCH_TREE, &[], async |s| {
        (
            grep(s, grep_req("TODO", "")).await,
            grep(s, grep_req(r"fn \w+\(\)", "src")).await,
            grep(s, grep_req("TODO", "src/util/helper.rs")).await,
            grep(s, grep_req("TODO", "linked_src/util")).await,
            grep(s, grep_req("nothing-matches-this", "")).await,
        )
    })
    .await;
    assert_eq!(
        got.0,
        lines(&[
            "README.md:2:TODO: write docs",
            "docs/a.md:1:crlf TODO",
            "docs/b.txt:1:latin1 \u{fffd} TODO",
            "keep.log:1:TODO kept",
            "src/gen_keep.rs:1:// TODO kept generated",
            "src/lib.rs:3:// TODO upper",
            "src/main.rs:2:    // TODO: start",
            "src/top_only.txt:1:TODO nested top_only",
            "src/util-x/y.rs:1:// TODO dash",
            "src/util.rs:1:// TODO util file",
            "src/util/helper.rs:3:TODO helper",
            "src/util/helper.rs:7:TODO again",
        ])
    );
    assert_eq!(
        got.1,
        lines(&["src/lib.rs:1:pub fn run() {}", "src/main.rs:1:fn main() {"])
    );
    assert_eq!(
        got.2,
        lines(&[
            "src/util/helper.rs:3:TODO helper",
            "src/util/helper.rs:7:TODO again"
        ])
    );
    assert_eq!(
        got.3,
        lines(&[
            "linked_src/util/helper.rs:3:TODO helper",
            "linked_src/util/helper.rs:7:TODO again"
        ])
    );
    assert_eq!(got.4, lines(&[]));
}

#[tokio::test]
async fn grep_ignore_case_glob_filter_and_include_ignored() {
    let got = same(SEARCH_TREE, &[], async |s| {
        let mut ic = grep_req("todo", "src");
        ic.ignore_case = true;
        ic.glob = Some("l*.rs".into());
        let mut by_path = grep_req("TODO", "");
        by_path.glob = Some("src/**/*.rs".into());
        let mut by_name = grep_req("TODO", "");
        by_name.glob = Some("*.{md,txt}".into());
        let mut all = grep_req("TODO", "");
        all.include_ignored = true;
        all.glob = Some("*.{log,rs,env}".into());
        (
            grep(s, ic).await,
            grep(s, by_path).await,
            grep(s, by_name).await,
            grep(s, all).await,
        )
    })
    .await;
    assert_eq!(
        got.0,
        lines(&["src/lib.rs:2:// todo lower", "src/lib.rs:3:// TODO upper"])
    );
    assert_eq!(
        got.1,
        lines(&[
            "src/gen_keep.rs:1:// TODO kept generated",
            "src/lib.rs:3:// TODO upper",
            "src/main.rs:2:    // TODO: start",
            "src/util-x/y.rs:1:// TODO dash",
            "src/util.rs:1:// TODO util file",
            "src/util/helper.rs:3:TODO helper",
            "src/util/helper.rs:7:TODO again",
        ])
    );
    assert_eq!(
        got.2,
        lines(&[
            "README.md:2:TODO: write docs",
            "docs/a.md:1:crlf TODO",
            "docs/b.txt:1:latin1 \u{fffd} TODO",
            "src/top_only.txt:1:TODO nested top_only",
        ])
    );
    assert_eq!(
        got.3,
        lines(&[
            ".env:1:SECRET=1 TODO",
            ".hidden/h.rs:1:// TODO hidden",
            "build/out.rs:1:// TODO built",
            "debug.log:1:TODO in a log",
            "keep.log:1:TODO kept",
            "src/gen_a.rs:1:// TODO generated",
            "src/gen_keep.rs:1:// TODO kept generated",
            "src/lib.rs:3:// TODO upper",
            "src/main.rs:2:    // TODO: start",
            "src/util-x/y.rs:1:// TODO dash",
            "src/util.rs:1:// TODO util file",
            "src/util/helper.rs:3:TODO helper",
            "src/util/helper.rs:7:TODO again",
        ])
    );
}

#[tokio::test]
async fn grep_context_lines_surround_matches() {
    let got = same(SEARCH_TREE, &[], async |s| {
        let mut one = grep_req("TODO", "src/util/helper.rs");
        one.context = 1;
        let mut three = grep_req("TODO", "src/util");
        three.context = 3;
        (grep(s, one).await, grep(s, three).await)
    })
    .await;
    assert_eq!(
        got.0,
        lines(&[
            "src/util/helper.rs-2-b",
            "src/util/helper.rs:3:TODO helper",
            "src/util/helper.rs-4-c",
            "src/util/helper.rs-6-e",
            "src/util/helper.rs:7:TODO again",
        ])
    );
    assert_eq!(
        got.1,
        lines(&[
            "src/util/helper.rs-1-a",
            "src/util/helper.rs-2-b",
            "src/util/helper.rs:3:TODO helper",
            "src/util/helper.rs-4-c",
            "src/util/helper.rs-5-d",
            "src/util/helper.rs-6-e",
            "src/util/helper.rs:7:TODO again",
        ])
    );
}

#[tokio::test]
async fn grep_caps_matching_lines_and_says_so() {
    let got = same(SEARCH_TREE, &[], async |s| {
        let mut two = grep_req("TODO", "src");
        two.limit = 2;
        let mut exact = grep_req("TODO", "src/util/helper.rs");
        exact.limit = 2;
        (grep(s, two).await, grep(s, exact).await)
    })
    .await;
    assert_eq!(
        got.0,
        Ok((
            vec![
                "src/gen_keep.rs:1:// TODO kept generated".to_string(),
                "src/lib.rs:3:// TODO upper".into(),
            ],
            true
        ))
    );
    assert_eq!(
        got.1,
        lines(&[
            "src/util/helper.rs:3:TODO helper",
            "src/util/helper.rs:7:TODO again"
        ])
    );
}

#[tokio::test]
async fn grep_refuses_bad_patterns_and_bases() {
    let got = same(SEARCH_TREE, &[], async |s| {
        let mut bad_glob = grep_req("x", "");
        bad_glob.glob = Some("a[".into());
        (
            grep(s, grep_req("a(", "")).await.map_err(|f| f.variant),
            grep(s, bad_glob).await.map_err(|f| f.variant),
            grep(s, grep_req("x", "missing")).await,
            grep(s, grep_req("x", "etc")).await,
            grep(s, grep_req("run", "src/link.rs")).await,
            grep(s, grep_req("TODO", "bin.dat")).await,
        )
    })
    .await;
    assert_eq!(got.0, Err("InvalidPattern".into()));
    assert_eq!(got.1, Err("InvalidPattern".into()));
    assert_eq!(got.2, Err(not_found("missing")));
    assert_eq!(got.3, Err(outside("etc")));
    // A link given as the base is followed, like any path argument.
    assert_eq!(got.4, lines(&["src/link.rs:3:    run();"]));
    // A binary file is skipped even when named.
    assert_eq!(got.5, lines(&[]));
}

// git and ripgrep skip a UTF-8 byte-order mark at the start of a `.gitignore`; an editor
// on Windows writes one, and the first rule must still apply.
#[tokio::test]
async fn gitignore_starting_with_a_byte_order_mark_keeps_its_first_rule() {
    let tree: &[E] = &[
        E::File(".gitignore", b"\xef\xbb\xbfx.txt\ny.txt\n"),
        E::File("x.txt", b""),
        E::File("y.txt", b""),
        E::File("z.txt", b""),
    ];
    let got = same(tree, &[], async |s| {
        glob(s, glob_req("*", "", false, 10)).await
    })
    .await;
    assert_eq!(got, paths(&["z.txt"]));
}

// ---------------------------------------------------------------------------------------
// The same checks at tool level: the coding tools over each sandbox give the same text.
// ---------------------------------------------------------------------------------------

/// Runs `calls` (tool name, JSON arguments) in order with the tools of each sandbox built
/// from `tree`, asserts that both give the same results, and returns them: `ok: text`,
/// `error: text` for an error result, `failed: message` for a tool error.
async fn tool_calls(tree: &[E], protected: &[&str], calls: &[(&str, Value)]) -> Vec<String> {
    same(tree, protected, async |s| {
        let tools = halo_sandbox::tools(Arc::clone(&s.sandbox), ToolOptions::default());
        let mut out = Vec::new();
        for (name, args) in calls {
            let tool = tools
                .iter()
                .find(|t| t.spec().name == *name)
                .unwrap_or_else(|| panic!("no tool {name}"));
            out.push(
                match tool
                    .call_json(
                        args.clone(),
                        &halo_core::ToolContext::detached(halo_core::ToolCall::new(
                            "c1", "tool", "{}",
                        )),
                    )
                    .await
                {
                    Ok(o) if o.is_error => format!("error: {}", o.content),
                    Ok(o) => format!("ok: {}", o.content),
                    Err(e) => format!("failed: {e}"),
                },
            );
        }
        out
    })
    .await
}

#[tokio::test]
async fn tool_specs_are_identical_but_for_bash() {
    let [v, c] = subjects(&[], &[]);
    let specs = |s: &Subject| {
        halo_sandbox::tools(Arc::clone(&s.sandbox), ToolOptions::default())
            .iter()
            .map(|t| t.spec())
            .collect::<Vec<_>>()
    };
    let (from_virtual, from_container) = (specs(&v), specs(&c));
    let names =
        |specs: &[halo_core::ToolSpec]| specs.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&from_virtual),
        ["read", "write", "edit", "ls", "glob", "grep"]
    );
    assert_eq!(
        names(&from_container),
        ["read", "write", "edit", "ls", "glob", "grep", "bash"]
    );
    assert_eq!(from_virtual[..], from_container[..6]);
    // The sandboxes' own shorthands build the same sets.
    let own = |tools: Vec<Arc<dyn halo_core::DynTool>>| {
        tools.iter().map(|t| t.spec()).collect::<Vec<_>>()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(own(VirtualSandbox::new().tools()), from_virtual);
    assert_eq!(
        own(ContainerSandbox::new(dir.path())
            .expect("container")
            .tools()),
        from_container
    );
}

#[tokio::test]
async fn tools_read_write_edit_and_ls_answer_alike() {
    let got = tool_calls(
        TREE,
        &[],
        &[
            ("read", json!({"path": "a.txt"})),
            ("read", json!({"path": "link_dir/sub/c.rs"})),
            ("write", json!({"path": "notes/ten.txt", "content": "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"})),
            ("read", json!({"path": "notes/ten.txt", "offset": 3, "limit": 2})),
            ("read", json!({"path": "notes/ten.txt", "offset": 11})),
            ("edit", json!({"path": "link_file", "old_string": "alpha", "new_string": "omega"})),
            ("read", json!({"path": "a.txt"})),
            ("edit", json!({"path": "notes/ten.txt", "old_string": "1", "new_string": "one"})),
            ("edit", json!({"path": "notes/ten.txt", "old_string": "1", "new_string": "one", "replace_all": true})),
            ("read", json!({"path": "notes/ten.txt", "limit": 1})),
            ("ls", json!({})),
            ("ls", json!({"path": "link_dir"})),
        ],
    )
    .await;
    let expected = [
        "ok:      1\talpha",
        "ok:      1\tfn c() {}",
        "ok: wrote 21 bytes to `notes/ten.txt`",
        "ok:      3\t3\n     4\t4\n\n[showing lines 3-4; call read with offset=5 to read more]",
        "failed: `notes/ten.txt` has 10 lines; offset 11 is past the end",
        "ok: replaced 1 occurrence in `link_file`\n--- a/link_file\n+++ b/link_file\n@@ -1 +1 @@\n-alpha\n+omega",
        "ok:      1\tomega",
        "failed: old_string occurs 2 times in `notes/ten.txt`; include more surrounding lines \
         to make it unique, or set replace_all to replace every occurrence",
        "ok: replaced 2 occurrences in `notes/ten.txt`\n--- a/notes/ten.txt\n+++ b/notes/ten.txt\n@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -7,4 +7,4 @@\n 7\n 8\n 9\n-10\n+one0",
        "ok:      1\tone\n\n[showing lines 1-1; call read with offset=2 to read more]",
        "ok: a.txt\ndangling@\ndangling_deep@\ndir/\nempty/\nlink_dir@\nlink_file@\nloop_a@\nloop_b@\nnotes/\nout_abs@\nout_dir@\nout_rel@\nself_loop@",
        "ok: b.txt\nout_deep@\nsub/\nup_file@",
    ];
    assert_eq!(got, expected);
}

#[tokio::test]
async fn tools_refuse_the_same_paths_with_the_same_messages() {
    let got = tool_calls(
        GIT_TREE,
        &[".git"],
        &[
            ("read", json!({"path": "../x"})),
            ("read", json!({"path": "/etc/passwd"})),
            ("read", json!({"path": "src"})),
            ("read", json!({"path": "missing.rs"})),
            ("write", json!({"path": ".git/config", "content": "x"})),
            ("write", json!({"path": "cfg", "content": "x"})),
            (
                "edit",
                json!({"path": "gitdir/config", "old_string": "core", "new_string": "x"}),
            ),
            (
                "edit",
                json!({"path": "src/lib.rs", "old_string": "nope", "new_string": "x"}),
            ),
            ("ls", json!({"path": "src/lib.rs"})),
            ("glob", json!({"pattern": "../*"})),
            ("grep", json!({"pattern": "(", "path": "src"})),
            ("read", json!({"path": ".git/config"})),
        ],
    )
    .await;
    let expected = [
        "failed: path `../x` is outside the sandbox root; use a path relative to the root",
        "failed: path `/etc/passwd` is outside the sandbox root; use a path relative to the root",
        "failed: `src` is a directory; use ls to list it",
        "failed: `missing.rs` does not exist; use ls or glob to find the right path",
        "failed: `.git/config` is read-only in this sandbox (protected path `.git`)",
        "failed: `cfg` is read-only in this sandbox (protected path `.git`)",
        "failed: `gitdir/config` is read-only in this sandbox (protected path `.git`)",
        "failed: old_string was not found in `src/lib.rs`; read the file first and copy the text \
         to replace exactly, with its whitespace and indentation",
        "failed: `src/lib.rs` is not a directory",
        "failed: path `../*` is outside the sandbox root; use a path relative to the root",
        "failed: invalid regex `(`: unclosed group at character 1 (`(`); to match a special \
         character ( ) [ ] { } . * + ? | ^ $ \\ literally, escape it with \\ (`\\(` matches `(`)",
        "ok:      1\t[core]",
    ];
    assert_eq!(got, expected);
}

#[tokio::test]
async fn tools_glob_and_grep_answer_alike() {
    let got = tool_calls(
        SEARCH_TREE,
        &[],
        &[
            ("glob", json!({"pattern": "src/*.rs"})),
            ("glob", json!({"pattern": "*", "include_ignored": true})),
            ("glob", json!({"pattern": "*.zig"})),
            (
                "grep",
                json!({"pattern": "todo", "path": "src", "ignore_case": true, "glob": "*.rs"}),
            ),
            (
                "grep",
                json!({"pattern": "TODO", "path": "src/util", "context": 1}),
            ),
            ("grep", json!({"pattern": "nothing-matches"})),
        ],
    )
    .await;
    let expected = [
        "ok: src/gen_keep.rs\nsrc/lib.rs\nsrc/main.rs\nsrc/util.rs",
        "ok: .env\n.gitignore\nREADME.md\nbin.dat\ndebug.log\nkeep.log\ntop_only.txt",
        "ok: no files match `*.zig` in `.`",
        "ok: src/gen_keep.rs:1:// TODO kept generated\nsrc/lib.rs:2:// todo lower\nsrc/lib.rs:3:// TODO upper\nsrc/main.rs:2:    // TODO: start\nsrc/util-x/y.rs:1:// TODO dash\nsrc/util.rs:1:// TODO util file\nsrc/util/helper.rs:3:TODO helper\nsrc/util/helper.rs:7:TODO again",
        "ok: src/util/helper.rs-2-b\nsrc/util/helper.rs:3:TODO helper\nsrc/util/helper.rs-4-c\n--\nsrc/util/helper.rs-6-e\nsrc/util/helper.rs:7:TODO again",
        "ok: no matches for `nothing-matches` in `.`",
    ];
    assert_eq!(got, expected);
}

#[tokio::test]
async fn tools_cap_long_results_alike() {
    let many: String = (1..=1005).map(|i| format!("hit {i}\n")).collect();
    let names: Vec<String> = (0..1003).map(|i| format!("many/f{i:04}.txt")).collect();
    let mut tree: Vec<E> = vec![E::File("hits.txt", many.leak().as_bytes())];
    for name in names {
        tree.push(E::File(name.leak(), b""));
    }
    let got = tool_calls(
        &tree,
        &[],
        &[
            ("grep", json!({"pattern": "hit"})),
            ("glob", json!({"pattern": "many/*"})),
        ],
    )
    .await;
    let grep_tail = got[0].rsplit_once("\n\n").map(|(lines, note)| {
        (
            lines.lines().count(),
            lines.lines().last().map(str::to_string),
            note.to_string(),
        )
    });
    let glob_tail = got[1].rsplit_once("\n\n").map(|(lines, note)| {
        (
            lines.lines().count(),
            lines.lines().last().map(str::to_string),
            note.to_string(),
        )
    });
    assert_eq!(
        grep_tail,
        Some((
            1000,
            Some("hits.txt:1000:hit 1000".into()),
            "[stopped after 1000 matches; narrow the pattern, path or glob]".into()
        ))
    );
    assert_eq!(
        glob_tail,
        Some((
            1000,
            Some("many/f0999.txt".into()),
            "[showing the first 1000 matching files; more match: narrow the pattern or path]"
                .into()
        ))
    );
}

// Linux follows at most 40 symbolic links in one resolution (MAXSYMLINKS); the 41st is ELOOP.
#[tokio::test]
async fn a_chain_of_forty_links_resolves_and_forty_one_is_a_loop() {
    let names: Vec<&'static str> = (0..=40).map(|i| &*format!("l{i:02}").leak()).collect();
    let mut tree = vec![E::File("a.txt", b"alpha\n")];
    for (i, name) in names.iter().enumerate() {
        tree.push(E::Link(name, names.get(i + 1).copied().unwrap_or("a.txt")));
    }
    let got = same(&tree, &[], async |s| {
        (read(s, "l01").await, read(s, "l00").await)
    })
    .await;
    assert_eq!(got.0, Ok("alpha\n".into()));
    assert_eq!(got.1, Err(symlink_loop("read", "l00")));
}

// Regression: a context as large as usize reaches no overflow (the tools cap it at 10, but
// the trait takes any value).
#[tokio::test]
async fn grep_with_a_huge_context_shows_whole_files() {
    let got = same(SEARCH_TREE, &[], async |s| {
        let mut huge = grep_req("TODO", "src/util/helper.rs");
        huge.context = usize::MAX;
        huge.limit = 1;
        grep(s, huge).await
    })
    .await;
    assert_eq!(
        got,
        Ok((
            vec![
                "src/util/helper.rs-1-a".to_string(),
                "src/util/helper.rs-2-b".into(),
                "src/util/helper.rs:3:TODO helper".into(),
                "src/util/helper.rs-4-c".into(),
                "src/util/helper.rs-5-d".into(),
                "src/util/helper.rs-6-e".into(),
            ],
            true
        ))
    );
}

// `rm -r` of a link to a folder removes the link, never what it points to.
#[tokio::test]
async fn recursive_remove_of_a_link_to_a_folder_keeps_the_folder() {
    let got = same(TREE, &[], async |s| {
        (
            remove(s, "link_dir", true).await,
            remove(s, "dir/sub/up_dir", true).await,
            snapshot(s, "dir").await,
            read(s, "a.txt").await,
        )
    })
    .await;
    assert_eq!(got.0, Ok(()));
    assert_eq!(got.1, Ok(()));
    assert_eq!(
        got.2,
        [
            "dir/b.txt File 5",
            "dir/out_deep Symlink 0",
            "dir/sub Dir 0",
            "dir/sub/c.rs File 10",
            "dir/up_file Symlink 0",
        ]
    );
    assert_eq!(got.3, Ok("alpha\n".into()));
}

#[tokio::test]
async fn writes_below_links_that_lead_nowhere_are_refused() {
    let got = same(TREE, &[], async |s| {
        (
            write(s, "dangling/x.txt", "x").await,
            write(s, "self_loop/x.txt", "x").await,
            write(s, "dir/up_file/x.txt", "x").await,
            snapshot(s, "").await.len(),
        )
    })
    .await;
    assert_eq!(
        got.0,
        Err(failure(
            "Io",
            "cannot create the parent folders of `dangling/x.txt`: File exists (os error 17)"
        ))
    );
    assert_eq!(got.1, Err(symlink_loop("write", "self_loop/x.txt")));
    assert_eq!(got.2, Err(not_dir("dir/up_file")));
    let [v, _] = subjects(TREE, &[]);
    assert_eq!(got.3, snapshot(&v, "").await.len());
}

#[tokio::test]
async fn a_dangling_link_into_a_protected_path_cannot_create_a_file_there() {
    let tree: &[E] = &[
        E::File(".git/config", b"[core]\n"),
        E::Link("hook", ".git/hooks/pre-commit"),
        E::Link("newcfg", ".git/new"),
    ];
    let got = same(tree, &[".git"], async |s| {
        (
            write(s, "newcfg", "x").await,
            write(s, "hook", "x").await,
            snapshot(s, ".git").await,
        )
    })
    .await;
    assert_eq!(got.0, Err(read_only("newcfg")));
    assert_eq!(got.1, Err(read_only("hook")));
    assert_eq!(got.2, [".git/config File 7"]);
}

/// The protected paths each sandbox keeps for `paths`, or the error text of the first that
/// does not parse.
type Protection = Result<Vec<String>, String>;

#[tokio::test]
async fn protected_paths_that_do_not_parse_are_refused_alike() {
    // Trigger: `with_protected_paths` used to drop such paths silently, protecting nothing.
    let protect = |paths: &[&str]| -> [Protection; 2] {
        let shown = |p: &[SandboxPath]| p.iter().map(|p| p.display().to_string()).collect();
        let root = tempfile::tempdir().expect("tempdir");
        let from_virtual = VirtualSandbox::new()
            .with_protected_paths(paths)
            .map(|s| shown(s.protected_paths()))
            .map_err(|e| e.to_string());
        let from_container = ContainerSandbox::new(root.path())
            .expect("container")
            .with_protected_paths(paths)
            .map(|s| shown(s.protected_paths()))
            .map_err(|e| e.to_string());
        [from_virtual, from_container]
    };
    let alike = |paths: &[&str]| -> Protection {
        let [v, c] = protect(paths);
        assert_eq!(
            v, c,
            "virtual (left) and container (right) differ for {paths:?}"
        );
        v
    };
    let outside = |p: &str| {
        Err(format!(
            "path `{p}` is outside the sandbox root; use a path relative to the root"
        ))
    };
    assert_eq!(
        alike(&[".git", "a/./b/", "x/../y", ""]),
        Ok(vec![".git".into(), "a/b".into(), "y".into(), ".".into()])
    );
    assert_eq!(alike(&["/.git"]), outside("/.git"));
    assert_eq!(alike(&[".git", "../x"]), outside("../x"));
    assert_eq!(alike(&["a/../../x", "/etc"]), outside("a/../../x"));
    assert_eq!(
        alike(&["a\0b"]),
        Err("path `a\\0b` is not valid: it contains a NUL byte".into())
    );
    let long = "a/".repeat(3000);
    assert!(alike(&[long.as_str()]).is_err_and(|e| e.contains("over the")));
}

#[tokio::test]
async fn protected_paths_add_up_across_calls() {
    // Trigger: a second `with_protected_paths(["secrets"])` replaced `[".git"]`, leaving
    // `.git` writable.
    let tree: &[E] = &[
        E::File(".git/config", b"[core]\n"),
        E::File("secrets/key", b"k\n"),
    ];
    let shown = |paths: &[SandboxPath]| {
        paths
            .iter()
            .map(|p| p.as_str().to_string())
            .collect::<Vec<_>>()
    };
    let mut virtual_sb = VirtualSandbox::new();
    for e in tree {
        if let E::File(path, content) = *e {
            virtual_sb = virtual_sb.with_file(path, content).expect("virtual tree");
        }
    }
    let virtual_sb = virtual_sb
        .with_protected_paths([".git"])
        .and_then(|s| s.with_protected_paths(["secrets", ".git"]))
        .expect("virtual");
    let container = container_subject(tree, &[]);
    let root = container.outer.as_ref().expect("outer").path().join("root");
    let container_sb = ContainerSandbox::new(&root)
        .and_then(|s| s.with_protected_paths([".git"]))
        .and_then(|s| s.with_protected_paths(["secrets", ".git"]))
        .expect("container");
    assert_eq!(shown(virtual_sb.protected_paths()), [".git", "secrets"]);
    assert_eq!(shown(container_sb.protected_paths()), [".git", "secrets"]);
    let subjects = [
        Subject {
            name: "virtual",
            sandbox: Arc::new(virtual_sb),
            outer: None,
        },
        Subject {
            name: "container",
            sandbox: Arc::new(container_sb),
            outer: container.outer,
        },
    ];
    for s in &subjects {
        let got = (
            write(s, ".git/config", "x").await,
            write(s, "secrets/key", "x").await,
            write(s, "notes.txt", "x").await,
        );
        let secrets = failure(
            "ReadOnly",
            "`secrets/key` is read-only in this sandbox (protected path `secrets`)",
        );
        assert_eq!(
            got,
            (Err(read_only(".git/config")), Err(secrets), Ok(())),
            "{}",
            s.name
        );
        assert!(s.outside_intact());
    }
}

/// Runs `calls` with the tools of each sandbox built from `tree`, as [`tool_calls`] does,
/// then reads `files`; asserts both sandboxes agree and returns the results and the bytes.
async fn tool_calls_then_files(
    tree: &[E],
    calls: &[(&str, Value)],
    files: &[&str],
) -> (Vec<String>, Vec<Outcome<Vec<u8>>>) {
    same(tree, &[], async |s| {
        let tools = halo_sandbox::tools(Arc::clone(&s.sandbox), ToolOptions::default());
        let mut out = Vec::new();
        for (name, args) in calls {
            let tool = tools
                .iter()
                .find(|t| t.spec().name == *name)
                .unwrap_or_else(|| panic!("no tool {name}"));
            out.push(
                match tool
                    .call_json(
                        args.clone(),
                        &halo_core::ToolContext::detached(halo_core::ToolCall::new(
                            "c1", "tool", "{}",
                        )),
                    )
                    .await
                {
                    Ok(o) if o.is_error => format!("error: {}", o.content),
                    Ok(o) => format!("ok: {}", o.content),
                    Err(e) => format!("failed: {e}"),
                },
            );
        }
        let mut bytes = Vec::new();
        for f in files {
            bytes.push(outcome(s.sandbox.read(&p(f)).await));
        }
        (out, bytes)
    })
    .await
}

// Trigger: `read` shows lines without their `\r`, but `edit` matched bytes exactly, so in a
// file with `\r\n` line endings an old_string copied from read across lines was never found.
#[tokio::test]
async fn edit_matches_line_breaks_as_read_shows_them_in_crlf_files() {
    let tree: &[E] = &[
        E::File("crlf.txt", b"one\r\ntwo\r\nthree\r\n"),
        E::File("twice.txt", b"a\r\nb\r\na\r\nb\r\n"),
        E::File("mixed.txt", b"x\r\ny\nz\n"),
    ];
    let edit = |path: &str, old: &str, new: &str| json!({"path": path, "old_string": old, "new_string": new});
    let (got, files) = tool_calls_then_files(
        tree,
        &[
            ("read", json!({"path": "crlf.txt"})),
            ("edit", edit("crlf.txt", "one\ntwo", "1\n2")),
            ("edit", edit("crlf.txt", "three", "3\n3½")),
            ("edit", edit("crlf.txt", "1\r\n2", "1\n2")),
            ("edit", edit("crlf.txt", "2\nnope", "x")),
            ("edit", edit("twice.txt", "a\nb", "c")),
            (
                "edit",
                json!({"path": "twice.txt", "old_string": "a\nb\n", "new_string": "c\n", "replace_all": true}),
            ),
            ("edit", edit("mixed.txt", "x\ny", "w\nv")),
        ],
        &["crlf.txt", "twice.txt", "mixed.txt"],
    )
    .await;
    let expected = [
        "ok:      1\tone\n     2\ttwo\n     3\tthree",
        "ok: replaced 1 occurrence in `crlf.txt`\n--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1,3 +1,3 @@\n-one\n-two\n+1\n+2\n three",
        "ok: replaced 1 occurrence in `crlf.txt`\n--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1,3 +1,4 @@\n 1\n 2\n-three\n+3\n+3½",
        "failed: old_string and new_string differ only in line endings, which edit keeps as the \
         file has them; there is nothing to change",
        "failed: old_string was not found in `crlf.txt`; read the file first and copy the text \
         to replace exactly, with its whitespace and indentation",
        "failed: old_string occurs 2 times in `twice.txt`; include more surrounding lines to \
         make it unique, or set replace_all to replace every occurrence",
        "ok: replaced 2 occurrences in `twice.txt`\n--- a/twice.txt\n+++ b/twice.txt\n@@ -1,4 +1,2 @@\n-a\n-b\n-a\n-b\n+c\n+c",
        "ok: replaced 1 occurrence in `mixed.txt`\n--- a/mixed.txt\n+++ b/mixed.txt\n@@ -1,3 +1,3 @@\n-x\n-y\n+w\n+v\n z",
    ];
    assert_eq!(got, expected);
    assert_eq!(
        files,
        [
            Ok(b"1\r\n2\r\n3\r\n3\xc2\xbd\r\n".to_vec()),
            Ok(b"c\r\nc\r\n".to_vec()),
            // Found only with `\r\n`: new_string gets the file's `\r\n`; the rest is kept.
            Ok(b"w\r\nv\nz\n".to_vec()),
        ]
    );
}

// Trigger: messages that said what was wrong but not what to do (a write under a file, a
// link loop), or in the wrong words (an invalid regex shown inside grep-regex's `(?:…)`
// wrapper, "only text files can be read" from edit, "no files match ``" for an empty glob,
// a Latin-1 file read with U+FFFD and no word why).
#[tokio::test]
async fn tools_say_what_to_do_alike() {
    let tree: &[E] = &[
        E::File("notes.txt", b"note\n"),
        E::File("bin.dat", b"ab\0cd"),
        E::File("latin1.txt", b"caf\xe9\n"),
        E::Link("loop_a", "loop_b"),
        E::Link("loop_b", "loop_a"),
    ];
    let got = tool_calls(
        tree,
        &[],
        &[
            ("write", json!({"path": "notes.txt/a.md", "content": "x"})),
            ("read", json!({"path": "notes.txt/a.md"})),
            ("read", json!({"path": "loop_a"})),
            ("write", json!({"path": "loop_a", "content": "x"})),
            (
                "edit",
                json!({"path": "bin.dat", "old_string": "ab", "new_string": "x"}),
            ),
            ("read", json!({"path": "latin1.txt"})),
            (
                "edit",
                json!({"path": "latin1.txt", "old_string": "caf", "new_string": "x"}),
            ),
            ("glob", json!({"pattern": ""})),
            ("grep", json!({"pattern": "note", "glob": ""})),
            ("grep", json!({"pattern": "foo(bar"})),
            ("grep", json!({"pattern": "a)"})),
            ("grep", json!({"pattern": "*abc"})),
            ("grep", json!({"pattern": "x{2,1}"})),
            ("grep", json!({"pattern": "\\p{Foo}"})),
            ("grep", json!({"pattern": "[a-"})),
        ],
    )
    .await;
    let escape = "to match a special character ( ) [ ] { } . * + ? | ^ $ \\ literally, escape \
                  it with \\ (`\\(` matches `(`)";
    let loop_ = "the path leads into a symbolic-link loop (too many levels of symbolic links); \
                 fix or remove the link that loops (ls marks links with `@`), or use another path";
    let empty_glob = "failed: invalid glob ``: the pattern is empty; give one such as `**/*.rs` \
                      (every .rs file) or `*` (the files in the folder)";
    let expected = [
        "failed: cannot write `notes.txt/a.md`: `notes.txt` is a file, not a folder; choose \
         another path, or remove that file first"
            .to_string(),
        "failed: `notes.txt/a.md` does not exist: a folder in its path is a file; use ls or \
         glob to find the right path"
            .to_string(),
        format!("failed: cannot stat `loop_a`: {loop_}"),
        format!("failed: cannot write `loop_a`: {loop_}"),
        "failed: `bin.dat` looks like a binary file (it contains NUL bytes); only text files \
         can be edited"
            .to_string(),
        "ok:      1\tcaf\u{fffd}\n\n[the file is not valid UTF-8 (perhaps Latin-1 or another \
         encoding): invalid bytes are shown as U+FFFD (\u{fffd}); edit refuses this file, and \
         write would replace all of its original bytes with the UTF-8 text you give]"
            .to_string(),
        "failed: `latin1.txt` is not valid UTF-8 text (perhaps Latin-1 or another encoding); \
         edit only changes UTF-8 files: to change it, write its whole new content"
            .to_string(),
        empty_glob.to_string(),
        empty_glob.to_string(),
        format!("failed: invalid regex `foo(bar`: unclosed group at character 4 (`(`); {escape}"),
        format!("failed: invalid regex `a)`: unopened group at character 2 (`)`); {escape}"),
        format!(
            "failed: invalid regex `*abc`: repetition operator missing expression at character \
             1 (`*`); {escape}"
        ),
        format!(
            "failed: invalid regex `x{{2,1}}`: invalid repetition count range, the start must \
             be <= the end at character 2 (`{{2,1}}`); {escape}"
        ),
        "failed: invalid regex `\\p{Foo}`: Unicode property not found at character 1 \
         (`\\p{Foo}`)"
            .to_string(),
        format!(
            "failed: invalid regex `[a-`: unclosed character class at character 1 (`[`); \
             {escape}"
        ),
    ];
    assert_eq!(got, expected);
}
