//! The escape suite: named attempts to read or change something outside the sandbox root
//! (or inside a protected `.git`) through every file tool — traversal, absolute paths,
//! symbolic links made before the run and by `bash` during it, dangling links, links into
//! `.git`, hard links, NUL bytes, very long paths, glob and grep patterns reaching out, and a
//! `.gitignore` that is a link out of the root.
//!
//! The root and an `outside` folder are siblings in one temporary folder. `outside` holds a
//! secret file whose content is a marker. After every attempt the suite checks that the
//! marker appears in no tool result and that `outside` and `.git` are byte for byte as
//! before; either failing is an escape. Each attempt also states what the model must see.
//!
//! `bash` itself is not part of the suite: it is a process on the machine, not isolated
//! (see `docs/sandbox.md`); here it only makes links for the file tools to be tried on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use halo_core::{DynTool, ToolError};
use halo_sandbox::ContainerSandbox;
use serde_json::{Value, json};

const MARKER: &str = "HALO-ESCAPE-MARKER-5f2c9e";

/// What an attempt must give the model.
enum Expect {
    /// An error result with exactly this message.
    Refused(String),
    /// An error result starting with this.
    RefusedStarting(&'static str),
    /// A normal result with exactly this text.
    Ok(String),
}

fn outside_msg(path: &str) -> Expect {
    Expect::Refused(format!(
        "path `{path}` is outside the sandbox root; use a path relative to the root"
    ))
}

fn read_only(path: &str) -> Expect {
    Expect::Refused(format!(
        "`{path}` is read-only in this sandbox (protected path `.git`)"
    ))
}

/// Every file and link under `dir`, with its content or target.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let path = entry.expect("entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("lstat");
            let rel = path.strip_prefix(dir).expect("under").to_path_buf();
            if meta.is_symlink() {
                let target = std::fs::read_link(&path).expect("readlink");
                out.insert(rel, format!("link -> {}", target.display()));
            } else if meta.is_dir() {
                out.insert(rel, "dir".into());
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                out.insert(rel, String::from_utf8_lossy(&bytes).into_owned());
            }
        }
    }
    out
}

struct Suite {
    _parent: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    tools: Vec<Arc<dyn DynTool>>,
    attempts: usize,
    escapes: Vec<String>,
    wrong: Vec<String>,
}

impl Suite {
    fn new() -> Self {
        let parent = tempfile::tempdir().expect("tempdir");
        let root = parent.path().join("root");
        let outside = parent.path().join("outside");
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("notes.txt"), "inside\n").unwrap();
        std::fs::write(root.join("a.rs"), "fn inside() {}\n").unwrap();
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("secret.txt"), format!("{MARKER}\n")).unwrap();
        std::fs::write(outside.join("sub/deeper.txt"), format!("{MARKER} deeper\n")).unwrap();
        std::fs::write(outside.join("rules"), format!("# {MARKER}\n*.rs\n")).unwrap();
        let sandbox = ContainerSandbox::new(&root)
            .unwrap()
            .with_protected_paths([".git"])
            .unwrap();
        let tools = sandbox.tools();
        Suite {
            root: sandbox.root().to_path_buf(),
            outside: outside.canonicalize().unwrap(),
            _parent: parent,
            tools,
            attempts: 0,
            escapes: Vec::new(),
            wrong: Vec::new(),
        }
    }

    fn secret(&self) -> String {
        self.outside.join("secret.txt").display().to_string()
    }

    fn link(&self, target: impl AsRef<Path>, rel: &str) {
        let at = self.root.join(rel);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, at).expect("symlink");
    }

    async fn call(&self, tool: &str, args: Value) -> Result<String, String> {
        let tool = self
            .tools
            .iter()
            .find(|t| t.spec().name == tool)
            .unwrap_or_else(|| panic!("no tool {tool}"));
        match tool
            .call_json(
                args,
                &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
            )
            .await
        {
            Ok(out) if out.is_error => Err(out.content),
            Ok(out) => Ok(out.content),
            Err(ToolError::Failed(msg)) => Err(msg),
            Err(other) => Err(format!("unexpected error kind: {other:?}")),
        }
    }

    /// Runs a command to prepare an attempt (not itself an attempt).
    async fn bash(&self, command: &str) {
        let out = self
            .call("bash", json!({ "command": command }))
            .await
            .expect("bash");
        assert!(out.starts_with("exit code: 0"), "{command}: {out}");
    }

    async fn attempt(&mut self, name: &str, tool: &str, args: Value, expect: Expect) {
        self.attempts += 1;
        let outside_before = snapshot(&self.outside);
        let git_before = snapshot(&self.root.join(".git"));
        let result = self.call(tool, args.clone()).await;
        let text = match &result {
            Ok(t) | Err(t) => t.clone(),
        };
        let mut escaped = Vec::new();
        if text.contains(MARKER) {
            escaped.push("the secret marker is in the result");
        }
        if snapshot(&self.outside) != outside_before {
            escaped.push("the outside folder changed");
        }
        if snapshot(&self.root.join(".git")) != git_before {
            escaped.push("the protected .git changed");
        }
        if !escaped.is_empty() {
            self.escapes
                .push(format!("{name}: {tool} {args}: {escaped:?}: {text}"));
        }
        let as_expected = match (&expect, &result) {
            (Expect::Refused(m), Err(got)) => m == got,
            (Expect::RefusedStarting(m), Err(got)) => got.starts_with(m),
            (Expect::Ok(m), Ok(got)) => m == got,
            _ => false,
        };
        if !as_expected {
            let wanted = match &expect {
                Expect::Refused(m) => format!("refused with {m:?}"),
                Expect::RefusedStarting(m) => format!("refused with {m:?}..."),
                Expect::Ok(m) => format!("ok with {m:?}"),
            };
            self.wrong.push(format!(
                "{name}: {tool} {args}: wanted {wanted}, got {result:?}"
            ));
        }
    }
}

#[tokio::test]
async fn no_tool_reaches_outside_the_root_or_into_protected_git() {
    let mut s = Suite::new();
    let secret = s.secret();
    let outside = s.outside.display().to_string();

    // Traversal and absolute paths, through every tool.
    for (tool, path) in [
        ("read", "../outside/secret.txt"),
        ("read", "a/../../outside/secret.txt"),
        ("ls", ".."),
        ("ls", "../outside"),
    ] {
        s.attempt(
            &format!("traversal {tool} {path}"),
            tool,
            json!({ "path": path }),
            outside_msg(path),
        )
        .await;
    }
    s.attempt(
        "absolute read",
        "read",
        json!({"path": secret}),
        outside_msg(&secret),
    )
    .await;
    s.attempt(
        "absolute read through /proc",
        "read",
        json!({"path": format!("/proc/self/root{secret}")}),
        outside_msg(&format!("/proc/self/root{secret}")),
    )
    .await;
    s.attempt(
        "traversal write",
        "write",
        json!({"path": "../outside/secret.txt", "content": "pwned"}),
        outside_msg("../outside/secret.txt"),
    )
    .await;
    s.attempt(
        "absolute write of a new file",
        "write",
        json!({"path": format!("{outside}/new.txt"), "content": "pwned"}),
        outside_msg(&format!("{outside}/new.txt")),
    )
    .await;
    s.attempt(
        "traversal edit",
        "edit",
        json!({"path": "../outside/secret.txt", "old_string": MARKER, "new_string": "x"}),
        outside_msg("../outside/secret.txt"),
    )
    .await;
    s.attempt(
        "absolute ls",
        "ls",
        json!({"path": outside}),
        outside_msg(&outside),
    )
    .await;

    // Glob and grep patterns and paths that reach out.
    for pattern in ["../**", "../outside/*", "**/../../*", "{..,x}/*"] {
        s.attempt(
            &format!("glob pattern {pattern}"),
            "glob",
            json!({ "pattern": pattern }),
            outside_msg(pattern),
        )
        .await;
    }
    let abs_pattern = format!("{outside}/*");
    s.attempt(
        "glob absolute pattern",
        "glob",
        json!({ "pattern": abs_pattern }),
        outside_msg(&abs_pattern),
    )
    .await;
    s.attempt(
        "glob path ..",
        "glob",
        json!({"pattern": "**", "path": ".."}),
        outside_msg(".."),
    )
    .await;
    s.attempt(
        "grep path ../outside",
        "grep",
        json!({"pattern": "MARKER", "path": "../outside"}),
        outside_msg("../outside"),
    )
    .await;
    s.attempt(
        "grep absolute file",
        "grep",
        json!({"pattern": "MARKER", "path": secret}),
        outside_msg(&secret),
    )
    .await;
    s.attempt(
        "grep file glob climbing out",
        "grep",
        json!({"pattern": "MARKER", "glob": "../**"}),
        outside_msg("../**"),
    )
    .await;

    // Symbolic links made before the run: a file link, a folder link, a relative link that
    // climbs out, a link to the root's parent, and a chain of links.
    s.link(&secret, "secret_link");
    s.link(s.outside.clone(), "out_dir");
    s.link("../outside/secret.txt", "relative_link");
    s.link("..", "up");
    s.link("chain2", "chain1");
    s.link(&secret, "chain2");
    for path in [
        "secret_link",
        "out_dir/secret.txt",
        "relative_link",
        "up/outside/secret.txt",
        "chain1",
    ] {
        s.attempt(
            &format!("read through link {path}"),
            "read",
            json!({ "path": path }),
            outside_msg(path),
        )
        .await;
    }
    s.attempt(
        "write through file link",
        "write",
        json!({"path": "secret_link", "content": "pwned"}),
        outside_msg("secret_link"),
    )
    .await;
    s.attempt(
        "edit through file link",
        "edit",
        json!({"path": "relative_link", "old_string": MARKER, "new_string": "x"}),
        outside_msg("relative_link"),
    )
    .await;
    s.attempt(
        "write a new file into a folder link",
        "write",
        json!({"path": "out_dir/new.txt", "content": "pwned"}),
        outside_msg("out_dir/new.txt"),
    )
    .await;
    s.attempt(
        "write new folders under a folder link",
        "write",
        json!({"path": "out_dir/a/b/new.txt", "content": "pwned"}),
        outside_msg("out_dir/a/b/new.txt"),
    )
    .await;
    for (tool, path) in [("ls", "out_dir"), ("ls", "up"), ("ls", "out_dir/sub")] {
        s.attempt(
            &format!("{tool} through link {path}"),
            tool,
            json!({ "path": path }),
            outside_msg(path),
        )
        .await;
    }
    s.attempt(
        "glob in a folder link",
        "glob",
        json!({"pattern": "**", "path": "out_dir"}),
        outside_msg("out_dir"),
    )
    .await;
    s.attempt(
        "grep in the root's parent through a link",
        "grep",
        json!({"pattern": "MARKER", "path": "up"}),
        outside_msg("up"),
    )
    .await;
    s.attempt(
        "grep a file link",
        "grep",
        json!({"pattern": "MARKER", "path": "chain1"}),
        outside_msg("chain1"),
    )
    .await;
    // Walks from the root see the links but neither follow nor list them.
    s.attempt(
        "grep the whole root with links out",
        "grep",
        json!({"pattern": "MARKER", "context": 2}),
        Expect::Ok("no matches for `MARKER` in `.`".into()),
    )
    .await;
    s.attempt(
        "glob everything, ignored included, with links out",
        "glob",
        json!({"pattern": "**", "include_ignored": true}),
        Expect::Ok(".git/HEAD\n.git/config\na.rs\nnotes.txt".into()),
    )
    .await;

    // Dangling links: a write would create the file wherever they point.
    s.link(s.outside.join("created.txt"), "dangling_out");
    s.link("../outside/newdir/x.txt", "dangling_rel");
    s.attempt(
        "write through a dangling link out",
        "write",
        json!({"path": "dangling_out", "content": "pwned"}),
        outside_msg("dangling_out"),
    )
    .await;
    s.attempt(
        "write through a relative dangling link out",
        "write",
        json!({"path": "dangling_rel", "content": "pwned"}),
        outside_msg("dangling_rel"),
    )
    .await;
    s.attempt(
        "read a dangling link out",
        "read",
        json!({"path": "dangling_out"}),
        outside_msg("dangling_out"),
    )
    .await;

    // Links made by a command during the run, then used by the file tools.
    s.bash(&format!(
        "ln -s '{secret}' made_by_bash && ln -s '{outside}' dir_by_bash && \
         ln -s ../outside/sub sub_by_bash"
    ))
    .await;
    s.attempt(
        "read a link bash made",
        "read",
        json!({"path": "made_by_bash"}),
        outside_msg("made_by_bash"),
    )
    .await;
    s.attempt(
        "write a link bash made",
        "write",
        json!({"path": "made_by_bash", "content": "pwned"}),
        outside_msg("made_by_bash"),
    )
    .await;
    s.attempt(
        "edit a link bash made",
        "edit",
        json!({"path": "made_by_bash", "old_string": MARKER, "new_string": "x"}),
        outside_msg("made_by_bash"),
    )
    .await;
    s.attempt(
        "write into a folder link bash made",
        "write",
        json!({"path": "dir_by_bash/new.txt", "content": "pwned"}),
        outside_msg("dir_by_bash/new.txt"),
    )
    .await;
    s.attempt(
        "grep a relative folder link bash made",
        "grep",
        json!({"pattern": "deeper", "path": "sub_by_bash"}),
        outside_msg("sub_by_bash"),
    )
    .await;
    // A link swapped under a name that was a real folder a moment ago.
    std::fs::create_dir(s.root.join("swap")).unwrap();
    std::fs::write(s.root.join("swap/file.txt"), "inside\n").unwrap();
    s.bash(&format!("rm -r swap && ln -s '{outside}' swap"))
        .await;
    s.attempt(
        "read through a folder swapped for a link",
        "read",
        json!({"path": "swap/secret.txt"}),
        outside_msg("swap/secret.txt"),
    )
    .await;

    // A `.gitignore` that is a link out of the root is not read: its rule `*.rs` would
    // hide a.rs, and its comment holds the marker.
    s.link(s.outside.join("rules"), ".gitignore");
    s.attempt(
        "gitignore link out of the root",
        "glob",
        json!({"pattern": "*.rs"}),
        Expect::Ok("a.rs".into()),
    )
    .await;
    s.attempt(
        "read a gitignore link out of the root",
        "read",
        json!({"path": ".gitignore"}),
        outside_msg(".gitignore"),
    )
    .await;

    // The protected `.git`: directly, through a file link, a folder link and a dangling
    // link into it, and removals that would take it.
    s.link(".git/config", "git_config_link");
    s.link(".git", "git_dir_link");
    s.link(".git/hooks/post-checkout", "git_dangling");
    s.attempt(
        "write .git/config",
        "write",
        json!({"path": ".git/config", "content": "pwned"}),
        read_only(".git/config"),
    )
    .await;
    s.attempt(
        "write .git/hooks through ./ and ..",
        "write",
        json!({"path": "./a/../.git/hooks/pre-commit", "content": "pwned"}),
        read_only(".git/hooks/pre-commit"),
    )
    .await;
    s.attempt(
        "write .git/config through a file link",
        "write",
        json!({"path": "git_config_link", "content": "pwned"}),
        read_only("git_config_link"),
    )
    .await;
    s.attempt(
        "edit .git/config through a file link",
        "edit",
        json!({"path": "git_config_link", "old_string": "[core]", "new_string": "x"}),
        read_only("git_config_link"),
    )
    .await;
    s.attempt(
        "write a hook through a folder link",
        "write",
        json!({"path": "git_dir_link/hooks/pre-commit", "content": "pwned"}),
        read_only("git_dir_link/hooks/pre-commit"),
    )
    .await;
    s.attempt(
        "write a hook through a dangling link",
        "write",
        json!({"path": "git_dangling", "content": "pwned"}),
        read_only("git_dangling"),
    )
    .await;
    s.bash("ln -s .git/HEAD head_by_bash").await;
    s.attempt(
        "edit .git/HEAD through a link bash made",
        "edit",
        json!({"path": "head_by_bash", "old_string": "main", "new_string": "evil"}),
        read_only("head_by_bash"),
    )
    .await;

    // Hard links. One made before the run to a file outside IS that file, inside the
    // root's tree: the tools read it, as documented. The file tools cannot make one: no
    // tool links, and write replaces a file's content at its own name.
    std::fs::write(s.outside.join("shared.txt"), "shared by a hard link\n").unwrap();
    std::fs::hard_link(s.outside.join("shared.txt"), s.root.join("hard")).unwrap();
    s.attempt(
        "read a hard link made before the run (inside by definition)",
        "read",
        json!({"path": "hard"}),
        Expect::Ok("     1\tshared by a hard link".into()),
    )
    .await;
    s.attempt(
        "write a file named like an outside one",
        "write",
        json!({"path": "secret.txt", "content": "not a link"}),
        Expect::Ok("wrote 10 bytes to `secret.txt`".into()),
    )
    .await;
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(s.root.join("secret.txt"))
            .unwrap()
            .nlink(),
        1
    );

    // Paths that are not paths.
    s.attempt(
        "NUL byte",
        "read",
        json!({"path": "notes.txt\u{0}../../outside/secret.txt"}),
        Expect::Refused(
            "path `notes.txt\\0../../outside/secret.txt` is not valid: it contains a NUL byte"
                .into(),
        ),
    )
    .await;
    let long = format!("{}../outside/secret.txt", "a/".repeat(2100));
    s.attempt(
        "very long path",
        "read",
        json!({ "path": long }),
        Expect::RefusedStarting("path `a/a/a/"),
    )
    .await;
    s.attempt(
        "very long component",
        "write",
        json!({"path": "x".repeat(300), "content": "x"}),
        Expect::RefusedStarting("path `xxxx"),
    )
    .await;
    s.attempt(
        "a loop of links",
        "read",
        json!({"path": "loop_a"}),
        Expect::RefusedStarting("`loop_a` does not exist"),
    )
    .await;
    s.link("loop_b", "loop_a");
    s.link("loop_a", "loop_b");
    s.attempt(
        "a loop of links, made",
        "read",
        json!({"path": "loop_a"}),
        Expect::Refused(
            "cannot stat `loop_a`: the path leads into a symbolic-link loop (too many levels \
             of symbolic links); fix or remove the link that loops (ls marks links with `@`), \
             or use another path"
                .into(),
        ),
    )
    .await;

    println!("{} attempts, {} escapes", s.attempts, s.escapes.len());
    assert!(s.attempts >= 30, "{}", s.attempts);
    assert_eq!(s.escapes, Vec::<String>::new());
    assert_eq!(s.wrong, Vec::<String>::new());
    // The outside folder holds exactly what the suite put there.
    let names: Vec<PathBuf> = snapshot(&s.outside).into_keys().collect();
    assert_eq!(
        names,
        ["rules", "secret.txt", "shared.txt", "sub", "sub/deeper.txt"].map(PathBuf::from)
    );
}
