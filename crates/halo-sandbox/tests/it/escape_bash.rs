//! The escape suite, for commands: named attempts made from `bash`, through the `bash` tool,
//! to change or reach something outside the sandbox root or inside its protected `.git` —
//! writes by absolute path, `..`, links the command makes and `/proc/*/root`; `.git` written,
//! linked, moved and removed; TCP, UDP and abstract Unix sockets outside; signals, `ptrace`
//! and `/proc/PID/mem` on a process outside; processes that try to outlive the command;
//! `mount`, also in a user namespace of the command's own; what root has (a user namespace,
//! the cgroup filesystem, the kernel keyrings: [`root`]); reads through `/proc/1/root`; and
//! a kernel setting. Each attempt runs in every [`SandboxMode`].
//!
//! A temporary folder holds the root (a git repository, `.git` protected) and an `outside`
//! folder with a secret file whose content is a marker. That folder lies under the system's
//! temp dir, which the OS sandbox replaces by a private `/tmp`: commands do not even see
//! it. So a second outside folder, `visible`, lies in the machine's filesystem that the
//! sandbox binds read-only, never under `/tmp` ([`visible_tempdir`]: cargo's
//! `CARGO_TARGET_TMPDIR`, or `/var/tmp` when the target folder lies under `/tmp`, so the
//! verdicts are the same wherever the checkout is): there the read-only bind is what stops a
//! write. `visible` holds no marker, since reads of the machine's files are not confined
//! (`docs/sandbox.md`).
//!
//! After every attempt the suite checks that neither the marker nor [`SUCCEEDED`] (printed
//! by a command once the step it tried worked) is in the result, that `outside`, `visible`
//! and `.git` are byte for byte and mode for mode as before, and the attempt's own
//! condition (a listener outside accepted, a process outside died, a marked process lives
//! on). Any of them failing is an escape. Then whatever the attempt changed is put back, so
//! the attempts do not depend on each other.
//!
//! Unconfined ([`SandboxMode::FullAccess`]) the same attempts must escape: that run shows
//! the suite can fail. Everything it reaches was made by the test (folders in its temporary
//! folders, its listeners, its own `sleep`), and what it leaves (mounts, live processes) is
//! removed. One attempt, the kernel setting, is confined-only: unconfined it would write the
//! machine's settings. `HALO_ESCAPE_VERBOSE=1` prints what every attempt returned.

use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use halo_core::DynTool;
use halo_sandbox::{ContainerSandbox, SandboxMode};
use serde_json::json;

use crate::common::{survivors, visible_tempdir};

mod harness;
mod root;

use harness::{
    Outsider, Snapshot, bracketed, climbing, drain, installed, machine_address, python_works,
    remove_all, restore, settled_survivors, snapshot, unmount_under,
};

const MARKER: &str = "HALO-BASH-ESCAPE-MARKER-7d41a0";

/// What a command prints once the step it tried worked. Commands write it as
/// [`OK`]/[`PY_OK`], computed when they run, so an error message that quotes the command
/// (a shell's syntax error) cannot show it.
const SUCCEEDED: &str = "HALO-ATTEMPT-SUCCEEDED-42";
const OK: &str = "echo HALO-ATTEMPT-SUCCEEDED-$((6 * 7))";
const PY_OK: &str = "print(\"HALO-ATTEMPT-SUCCEEDED-%d\" % (6 * 7))";

/// Python's view of the C library, for the system calls no shell command makes.
const PY_LIBC: &str = "import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
def call(name, *args):
    if getattr(libc, name)(*args) != 0:
        raise OSError(ctypes.get_errno(), name)
";

/// Python entering a user and mount namespace of its own, where it holds every capability
/// over its own mounts (unprivileged users may do that), its mounts kept from the machine.
const PY_USERNS: &str = "call(\"unshare\", 0x10000000 | 0x20000)
call(\"mount\", None, b\"/\", None, 16384 | 262144, None)
";

/// `python3 -c CODE`, the code in single quotes (it must hold none).
fn py(code: &str) -> String {
    assert!(!code.contains('\''), "{code}");
    format!("python3 -c '{code}'")
}

/// What the suite watches besides its invariants.
enum Watch<'a> {
    Nothing,
    /// A connection reached this listener.
    Tcp(&'a TcpListener),
    /// A datagram reached this socket.
    Udp(&'a UdpSocket),
    /// A connection reached this Unix listener.
    Unix(&'a UnixListener),
    /// This process, outside the sandbox, died.
    Died(&'a mut Outsider),
    /// A process with this marker in its command line is alive after the command.
    Survivor(&'a str),
    /// A key with this name is in one of the machine's keyrings after the command.
    Key(&'a str),
}

/// What one mode's run found.
struct Report {
    mode: SandboxMode,
    tried: Vec<String>,
    skipped: Vec<String>,
    /// Each escape: the attempt's name, then why and what the command returned.
    escaped: Vec<(String, String)>,
}

impl Report {
    fn print(&self) {
        eprintln!(
            "bash escape suite, {:?}: {} attempts tried, {} escaped",
            self.mode,
            self.tried.len(),
            self.escaped.len()
        );
        for (name, why) in &self.escaped {
            eprintln!("  escaped: {name}: {why}");
        }
        if self.mode == SandboxMode::FullAccess {
            for name in &self.tried {
                if !self.escaped.iter().any(|(n, _)| n == name) {
                    eprintln!("  held even unconfined: {name}");
                }
            }
        }
        for name in &self.skipped {
            eprintln!("  skipped: {name}");
        }
    }

    fn escaped_names(&self) -> Vec<&str> {
        self.escaped.iter().map(|(n, _)| n.as_str()).collect()
    }
}

struct Suite {
    _tmp: tempfile::TempDir,
    _visible_parent: tempfile::TempDir,
    /// The folders unconfined mounts are looked for under.
    tmp_path: PathBuf,
    visible_parent_path: PathBuf,
    root: PathBuf,
    outside: PathBuf,
    visible: PathBuf,
    pristine_outside: Snapshot,
    pristine_visible: Snapshot,
    pristine_git: Snapshot,
    bash: Arc<dyn DynTool>,
    /// The start of every process marker of this run (unique to the mode and process):
    /// what is left with it is killed after each attempt.
    marker_prefix: String,
    /// The start of the markers of the outside `sleep`s, which live across attempts.
    outsider_prefix: String,
    markers: usize,
    report: Report,
}

impl Suite {
    fn new(mode: SandboxMode) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let visible_parent = visible_tempdir("escape-bash-");
        let tmp_path = tmp.path().canonicalize().unwrap();
        let visible_parent_path = visible_parent.path().canonicalize().unwrap();
        let root = tmp_path.join("root");
        let outside = tmp_path.join("outside");
        let visible = visible_parent_path.join("visible");

        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("secret.txt"), format!("{MARKER}\n")).unwrap();
        std::fs::write(outside.join("sub/deeper.txt"), "outside\n").unwrap();
        std::fs::create_dir_all(&visible).unwrap();
        std::fs::write(visible.join("file.txt"), "visible from the sandbox\n").unwrap();
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("notes.txt"), "inside\n").unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args([
                    "-c",
                    "user.name=halo",
                    "-c",
                    "user.email=halo@example.invalid",
                ])
                .args(args)
                .current_dir(&root)
                .output()
                .expect("git is needed by the escape suite");
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "init"]);

        let sandbox = ContainerSandbox::new(&root)
            .unwrap()
            .with_protected_paths([".git"])
            .unwrap()
            .with_mode(mode);
        let bash = sandbox
            .tools()
            .into_iter()
            .find(|t| t.spec().name == "bash")
            .expect("bash tool");
        Suite {
            pristine_outside: snapshot(&outside),
            pristine_visible: snapshot(&visible),
            pristine_git: snapshot(&root.join(".git")),
            _tmp: tmp,
            _visible_parent: visible_parent,
            tmp_path,
            visible_parent_path,
            root,
            outside,
            visible,
            bash,
            marker_prefix: format!("halo-escape-bash-{mode:?}-{}", std::process::id()),
            outsider_prefix: format!("halo-outsider-{mode:?}-{}", std::process::id()),
            markers: 0,
            report: Report {
                mode,
                tried: Vec::new(),
                skipped: Vec::new(),
                escaped: Vec::new(),
            },
        }
    }

    /// A fresh process marker of this run.
    fn marker(&mut self) -> String {
        self.markers += 1;
        // Not ending in a digit, so no marker is the start of another.
        format!("{}-{}x", self.marker_prefix, self.markers)
    }

    fn skip(&mut self, name: &str, why: &str) {
        self.report.skipped.push(format!("{name} ({why})"));
    }

    async fn attempt(&mut self, name: &str, command: &str, watch: Watch<'_>) {
        self.attempt_within(name, command, 10, watch).await;
    }

    async fn attempt_within(
        &mut self,
        name: &str,
        command: &str,
        timeout_secs: u64,
        watch: Watch<'_>,
    ) {
        assert!(
            !self.report.tried.iter().any(|n| n == name),
            "two attempts named {name}"
        );
        self.report.tried.push(name.to_string());
        let out = self
            .bash
            .call_json(
                json!({"command": command, "timeout_secs": timeout_secs}),
                &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: the bash tool failed: {e}"));
        assert!(!out.is_error, "{name}: {}", out.content);
        let text = out.content;
        if std::env::var_os("HALO_ESCAPE_VERBOSE").is_some() {
            eprintln!("--- {:?}: {name}\n{text}", self.report.mode);
        }

        let mut why: Vec<String> = Vec::new();
        if text.contains(MARKER) {
            why.push("the secret marker is in the result".into());
        }
        if text.contains(SUCCEEDED) {
            why.push("the command says the step it tried worked".into());
        }
        match watch {
            Watch::Nothing => {}
            Watch::Tcp(listener) => {
                if drain(|| listener.accept().map(drop)) > 0 {
                    why.push("the listener outside accepted a connection".into());
                }
            }
            Watch::Udp(socket) => {
                let mut buf = [0u8; 64];
                if drain(|| socket.recv_from(&mut buf).map(drop)) > 0 {
                    why.push("the socket outside received a datagram".into());
                }
            }
            Watch::Unix(listener) => {
                if drain(|| listener.accept().map(drop)) > 0 {
                    why.push("the Unix listener outside accepted a connection".into());
                }
            }
            Watch::Died(outsider) => {
                // A signal sent is delivered before the sender's next step; allow the
                // kernel a moment to finish the kill.
                tokio::time::sleep(Duration::from_millis(50)).await;
                if outsider.died() {
                    why.push(format!("the process outside ({}) died", outsider.marker));
                }
            }
            Watch::Key(name) => {
                if root::key_on_host(name) {
                    why.push(format!(
                        "the key {name} is on the machine after the command"
                    ));
                }
            }
            Watch::Survivor(marker) => {
                let left = settled_survivors(marker).await;
                if !left.is_empty() {
                    why.push(format!("processes outlived the command: {left:?}"));
                }
            }
        }
        for (label, dir, pristine) in [
            ("outside", &self.outside, &self.pristine_outside),
            ("visible", &self.visible, &self.pristine_visible),
        ] {
            if snapshot(dir) != *pristine {
                why.push(format!("the {label} folder changed"));
            }
        }
        if snapshot(&self.root.join(".git")) != self.pristine_git {
            why.push("the protected .git changed".into());
        }
        if !why.is_empty() {
            self.report
                .escaped
                .push((name.to_string(), format!("{why:?}: {text}")));
        }
        self.put_back();
    }

    /// Undoes what an attempt did: mounts, live processes, files in the root, and any
    /// change to the outside folders and `.git`.
    fn put_back(&self) {
        unmount_under(&[&self.tmp_path, &self.visible_parent_path]);
        for line in survivors(&self.marker_prefix, "none") {
            let pid = line.split(':').next().expect("pid");
            let _ = Command::new("kill").args(["-9", pid]).status();
        }
        for entry in std::fs::read_dir(&self.root).expect("root") {
            let entry = entry.expect("entry");
            if entry.file_name() != ".git" {
                remove_all(&entry.path());
            }
        }
        std::fs::write(self.root.join("notes.txt"), "inside\n").unwrap();
        restore(&self.outside, &self.pristine_outside);
        restore(&self.visible, &self.pristine_visible);
        restore(&self.root.join(".git"), &self.pristine_git);
    }
}

/// Runs every attempt in `mode`.
async fn run(mode: SandboxMode) -> Report {
    let mut s = Suite::new(mode);
    let out = s.outside.display().to_string();
    let vis = s.visible.display().to_string();
    let secret = format!("{out}/secret.txt");
    let vis_up = climbing(&s.root, &s.visible);
    let root = s.root.display().to_string();
    let python = python_works();
    let confined = mode != SandboxMode::FullAccess;

    // Writes outside the root: absolute paths, `..`, links the command makes, /proc.
    let writes = [
        (
            "write: absolute path into the outside folder",
            format!("echo pwned > {out}/new.txt && {OK}"),
        ),
        (
            "write: absolute path into the visible folder",
            format!("echo pwned > {vis}/new.txt && {OK}"),
        ),
        (
            "write: overwrite a file in the visible folder",
            format!("echo pwned > {vis}/file.txt && {OK}"),
        ),
        (
            "write: append to the outside secret",
            format!("echo pwned >> {secret} && {OK}"),
        ),
        (
            "write: .. into the outside folder",
            format!("echo pwned > ../outside/new.txt && {OK}"),
        ),
        (
            // In the sandbox this works, in the private /tmp: the real outside is unchanged.
            "write: .. into a folder of the same name it makes (lands in the private /tmp)",
            "mkdir -p ../outside/sub && echo pwned > ../outside/sub/deeper.txt".into(),
        ),
        (
            "write: .. climbing to the visible folder",
            format!("echo pwned > {vis_up}/new.txt && {OK}"),
        ),
        (
            "write: cd out of the root, then a relative path",
            format!("cd {vis_up} && echo pwned > new.txt && {OK}"),
        ),
        (
            "write: through a link it makes to the visible folder",
            format!("ln -s {vis} vis_link && echo pwned > vis_link/new.txt && {OK}"),
        ),
        (
            "write: through a link it makes to a file in the visible folder",
            format!("ln -s {vis}/file.txt file_link && echo pwned >> file_link && {OK}"),
        ),
        (
            "write: through a relative link it makes, climbing to the visible folder",
            format!("ln -s {vis_up} up_link && echo pwned > up_link/new.txt && {OK}"),
        ),
        (
            "write: through a link it makes to the outside secret",
            format!("ln -s {secret} secret_link && echo pwned >> secret_link && {OK}"),
        ),
        (
            "write: through a hard link it makes to a file in the visible folder",
            format!("ln {vis}/file.txt hard && echo pwned >> hard && {OK}"),
        ),
        (
            "write: through a hard link it makes to the outside secret",
            format!("ln {secret} hard && echo pwned >> hard && {OK}"),
        ),
        (
            "write: /proc/self/root into the visible folder",
            format!("echo pwned > /proc/self/root{vis}/new.txt && {OK}"),
        ),
        (
            "write: /proc/self/root into the outside folder",
            format!("echo pwned > /proc/self/root{out}/new.txt && {OK}"),
        ),
        (
            "write: /proc/1/root into the visible folder",
            format!("echo pwned > /proc/1/root{vis}/new.txt && {OK}"),
        ),
        (
            "write: move a file of the root out",
            format!("mv notes.txt {vis}/ && {OK}"),
        ),
        (
            "write: chmod a file in the visible folder",
            format!("chmod 777 {vis}/file.txt && {OK}"),
        ),
        (
            "write: rm -rf the visible folder",
            format!("rm -rf {vis} && {OK}"),
        ),
    ];
    for (name, command) in &writes {
        s.attempt(name, command, Watch::Nothing).await;
    }
    if python {
        s.attempt(
            "write: python3 opens an absolute path in the visible folder",
            &py(&format!(
                "open(\"{vis}/py.txt\", \"w\").write(\"pwned\"); {PY_OK}"
            )),
            Watch::Nothing,
        )
        .await;
    }

    // The protected `.git`: directly, through links the command makes, moved, removed, and
    // by git itself.
    let git_writes = [
        (
            "git: append to .git/config",
            format!("echo pwned >> .git/config && {OK}"),
        ),
        (
            "git: create a hook",
            format!(
                "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit && \
                 chmod +x .git/hooks/pre-commit && {OK}"
            ),
        ),
        (
            "git: through a link it makes to .git/config",
            format!("ln -s .git/config cfg && echo pwned >> cfg && {OK}"),
        ),
        (
            "git: through a link it makes to the .git folder",
            format!("ln -s .git g && echo pwned > g/hooks/post-checkout && {OK}"),
        ),
        (
            "git: through a hard link it makes to .git/config",
            format!("ln .git/config cfg && echo pwned >> cfg && {OK}"),
        ),
        ("git: mv .git away", format!("mv .git .git-old && {OK}")),
        (
            "git: mv .git/config away",
            format!("mv .git/config config.bak && {OK}"),
        ),
        ("git: rm -rf .git", format!("rm -rf .git && {OK}")),
        ("git: chmod -R .git", format!("chmod -R 777 .git && {OK}")),
        (
            "git: git commit from inside",
            format!("git -c user.name=a -c user.email=a@b commit --allow-empty -qm pwned && {OK}"),
        ),
        (
            "git: git config from inside",
            format!("git config core.hooksPath /tmp/hooks && {OK}"),
        ),
    ];
    for (name, command) in &git_writes {
        s.attempt(name, command, Watch::Nothing).await;
    }

    // The network: listeners of the test process on the machine's network.
    let tcp = TcpListener::bind("127.0.0.1:0").expect("tcp listener");
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();
    s.attempt(
        "network: TCP to a loopback port with bash /dev/tcp",
        &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && {OK}"),
        Watch::Tcp(&tcp),
    )
    .await;
    if python {
        s.attempt(
            "network: TCP to a loopback port with python3",
            &py(&format!(
                "import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=3); \
                 {PY_OK}"
            )),
            Watch::Tcp(&tcp),
        )
        .await;
    } else {
        s.skip("network: TCP to a loopback port with python3", "no python3");
    }
    let any = TcpListener::bind("0.0.0.0:0").expect("tcp listener");
    any.set_nonblocking(true).unwrap();
    match machine_address() {
        Some(ip) => {
            let port = any.local_addr().unwrap().port();
            s.attempt(
                "network: TCP to the machine's own address",
                &format!("exec 3<>/dev/tcp/{ip}/{port} && {OK}"),
                Watch::Tcp(&any),
            )
            .await;
        }
        None => s.skip(
            "network: TCP to the machine's own address",
            "no address from hostname -I",
        ),
    }
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp socket");
    udp.set_nonblocking(true).unwrap();
    let uport = udp.local_addr().unwrap().port();
    for i in 0..3 {
        // A datagram can be lost, so three, each its own attempt.
        s.attempt(
            &format!("network: UDP datagram {i} to a loopback port"),
            &format!("echo pwned > /dev/udp/127.0.0.1/{uport}"),
            Watch::Udp(&udp),
        )
        .await;
    }
    if python {
        let name = format!("{}-abstract", s.outsider_prefix);
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_listener = UnixListener::bind_addr(&addr).expect("abstract socket");
        abstract_listener.set_nonblocking(true).unwrap();
        s.attempt(
            "network: connect to an abstract Unix socket",
            &py(&format!(
                "import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"\\0{name}\"); \
                 {PY_OK}"
            )),
            Watch::Unix(&abstract_listener),
        )
        .await;
    }

    // Signals to a process outside.
    let mut outsider = Outsider::spawn(format!("{}-kill", s.outsider_prefix));
    let pid = outsider.pid();
    s.attempt(
        "signal: kill -9 a process outside",
        &format!("kill -9 {pid} && {OK}"),
        Watch::Died(&mut outsider),
    )
    .await;
    let mut outsider = Outsider::spawn(format!("{}-pkill", s.outsider_prefix));
    let pattern = bracketed(&outsider.marker);
    s.attempt(
        "signal: pkill -9 a process outside by its command line",
        &format!("pkill -9 -f '{pattern}' && {OK}"),
        Watch::Died(&mut outsider),
    )
    .await;
    drop(outsider);

    // Processes that try to outlive the command, each found on the machine by its marker
    // (`MARKER` in the command: the attempt's own).
    let survivor_tries = [
        (
            "process: setsid survives the timeout",
            "setsid bash -c 'exec -a MARKER sleep 300' >/dev/null 2>&1 &",
            true,
        ),
        (
            "process: nohup survives the timeout",
            "nohup bash -c 'exec -a MARKER sleep 300' >/dev/null 2>&1 &",
            true,
        ),
        (
            "process: set -m job control survives the timeout",
            "set -m; bash -c 'exec -a MARKER sleep 300' >/dev/null 2>&1 &",
            true,
        ),
        (
            "process: a double fork survives the timeout",
            "( ( exec -a MARKER sleep 300 >/dev/null 2>&1 & ) & )",
            true,
        ),
        (
            "process: a daemon (fork, setsid) survives the timeout",
            "( setsid bash -c 'exec -a MARKER sleep 300' >/dev/null 2>&1 & )",
            true,
        ),
        (
            "process: setsid survives a command that ends",
            "setsid bash -c 'exec -a MARKER sleep 300' >/dev/null 2>&1 &",
            false,
        ),
    ];
    for (name, start, until_timeout) in survivor_tries {
        let m = s.marker();
        // Wait until the process runs, then outlive the timeout (or end).
        let wait = format!(
            "until pgrep -f '{}' >/dev/null; do sleep 0.05; done",
            bracketed(&m)
        );
        let end = if until_timeout {
            "sleep 30"
        } else {
            "echo started"
        };
        let command = format!("{}\n{wait}\n{end}", start.replace("MARKER", &m));
        s.attempt_within(name, &command, 3, Watch::Survivor(&m))
            .await;
    }

    // Mounts: directly, in a mount namespace, and in a user namespace of the command's own
    // (where the kernel keeps the sandbox's mounts read-only and its `.git` in place).
    s.attempt(
        "mount: a tmpfs over the visible folder",
        &format!("mount -t tmpfs none {vis} && {OK}"),
        Watch::Nothing,
    )
    .await;
    s.attempt(
        "mount: bind the root over the visible folder",
        &format!("mount --bind . {vis} && {OK}"),
        Watch::Nothing,
    )
    .await;
    s.attempt(
        "mount: remount / read-write in a mount namespace of its own",
        &format!(
            "unshare -m sh -c 'mount -o remount,rw,bind / && echo pwned > {vis}/remounted && \
             {OK}'"
        ),
        Watch::Nothing,
    )
    .await;
    if python {
        s.attempt(
            "mount: remount / read-write in a user namespace of its own",
            &py(&format!(
                "{PY_LIBC}{PY_USERNS}call(\"mount\", None, b\"/\", None, 32 | 4096, None)\n\
                 open(\"{vis}/remounted\", \"w\").write(\"pwned\")\n{PY_OK}"
            )),
            Watch::Nothing,
        )
        .await;
        s.attempt(
            "mount: unmount the read-only .git in a user namespace of its own",
            &py(&format!(
                "{PY_LIBC}{PY_USERNS}try:\n    call(\"umount2\", b\"{root}/.git\", 2)\n\
                 except OSError:\n    pass\n\
                 open(\"{root}/.git/config\", \"a\").write(\"pwned\")\n{PY_OK}"
            )),
            Watch::Nothing,
        )
        .await;
        s.attempt(
            "mount: bind the root without its .git mount in a user namespace of its own",
            &py(&format!(
                "{PY_LIBC}{PY_USERNS}call(\"mount\", b\"{root}\", b\"{vis}\", None, 4096, None)\n\
                 open(\"{vis}/.git/config\", \"a\").write(\"pwned\")\n{PY_OK}"
            )),
            Watch::Nothing,
        )
        .await;
    } else {
        s.skip("mount: in a user namespace of its own", "no python3");
    }

    // What root has: user namespaces, the cgroup filesystem, the kernel keyrings.
    root::attempts(&mut s, python).await;

    // ptrace and /proc/PID/mem on a process outside.
    let outsider = Outsider::spawn(format!("{}-trace", s.outsider_prefix));
    let pid = outsider.pid();
    if python {
        s.attempt(
            "ptrace: PTRACE_ATTACH to a process outside",
            &py(&format!(
                "{PY_LIBC}if libc.ptrace(16, {pid}, None, None) == 0:\n\
                 \x20   os.waitpid({pid}, 0x40000000)\n\
                 \x20   libc.ptrace(17, {pid}, None, None)\n\
                 \x20   {PY_OK}"
            )),
            Watch::Nothing,
        )
        .await;
        s.attempt(
            "ptrace: read /proc/PID/mem of a process outside",
            &py(&format!(
                "for line in open(\"/proc/{pid}/maps\"):\n\
                 \x20   if line.rstrip().endswith(\"[stack]\"):\n\
                 \x20       lo, hi = (int(x, 16) for x in line.split()[0].split(\"-\"))\n\
                 \x20       mem = open(\"/proc/{pid}/mem\", \"rb\")\n\
                 \x20       mem.seek(lo)\n\
                 \x20       if b\"{marker}\" in mem.read(hi - lo):\n\
                 \x20           {PY_OK}",
                marker = outsider.marker
            )),
            Watch::Nothing,
        )
        .await;
    } else {
        s.skip("ptrace: PTRACE_ATTACH and /proc/PID/mem", "no python3");
    }
    if installed("strace") {
        s.attempt_within(
            "ptrace: strace -p a process outside",
            &format!(
                "timeout 1 strace -p {pid} -e trace=none 2>&1 | grep -q 'Process {pid} attached' \
                 && {OK}"
            ),
            30,
            Watch::Nothing,
        )
        .await;
    } else {
        s.skip("ptrace: strace -p", "strace is not installed");
    }
    if installed("gdb") {
        s.attempt_within(
            "ptrace: gdb -p a process outside",
            &format!(
                "timeout 20 gdb -batch -nx -iex 'set debuginfod enabled off' -p {pid} \
                 -ex 'info proc' 2>&1 | grep -q '^process {pid}$' && {OK}"
            ),
            30,
            Watch::Nothing,
        )
        .await;
    } else {
        s.skip("ptrace: gdb -p", "gdb is not installed");
    }
    drop(outsider);

    // Reads of the outside secret, which holds the marker.
    let test_pid = std::process::id();
    let reads = [
        (
            "read: the secret by its absolute path",
            format!("cat {secret}"),
        ),
        (
            "read: the secret through ..",
            "cat ../outside/secret.txt".into(),
        ),
        (
            "read: the secret through /proc/1/root",
            format!("cat /proc/1/root{secret}"),
        ),
        (
            "read: the secret through /proc/self/root",
            format!("cat /proc/self/root{secret}"),
        ),
        (
            "read: the secret through the test process's /proc/PID/root",
            format!("cat /proc/{test_pid}/root{secret}"),
        ),
        (
            "read: the secret through /proc/self/cwd/..",
            "cat /proc/self/cwd/../outside/secret.txt".into(),
        ),
    ];
    for (name, command) in &reads {
        s.attempt(name, command, Watch::Nothing).await;
    }

    // A machine-wide kernel setting, written back with the value it has. Unconfined that
    // would write the machine's setting, so it runs confined only.
    let sysctl = "kernel: write a machine-wide setting (vm.swappiness, its own value)";
    if confined {
        s.attempt(
            sysctl,
            &format!(
                "v=$(cat /proc/sys/vm/swappiness) && echo \"$v\" > /proc/sys/vm/swappiness && \
                 {OK}"
            ),
            Watch::Nothing,
        )
        .await;
    } else {
        s.skip(
            sysctl,
            "confined only: it would write the machine's setting",
        );
    }

    // Nothing is left behind: no live process of this run, no mount.
    assert_eq!(survivors(&s.marker_prefix, "none"), Vec::<String>::new());
    s.report
}

#[tokio::test]
async fn no_command_escapes_in_workspace_write() {
    let report = run(SandboxMode::WorkspaceWrite).await;
    report.print();
    assert!(report.tried.len() >= 40, "{}", report.tried.len());
    assert_eq!(report.escaped, Vec::<(String, String)>::new());
}

#[tokio::test]
async fn no_command_escapes_in_read_only() {
    let report = run(SandboxMode::ReadOnly).await;
    report.print();
    assert!(report.tried.len() >= 40, "{}", report.tried.len());
    assert_eq!(report.escaped, Vec::<(String, String)>::new());
}

// The suite can fail: unconfined, the same attempts escape.
#[tokio::test]
async fn unconfined_commands_escape_so_the_suite_can_fail() {
    let report = run(SandboxMode::FullAccess).await;
    report.print();
    let escaped = report.escaped_names();
    let mut expected = vec![
        "write: absolute path into the outside folder",
        "write: absolute path into the visible folder",
        "write: rm -rf the visible folder",
        "git: append to .git/config",
        "network: TCP to a loopback port with bash /dev/tcp",
        "signal: kill -9 a process outside",
        "process: setsid survives the timeout",
        "userns: make a user namespace of its own (unshare -U)",
        "cgroup: mount the cgroup filesystem",
        "read: the secret by its absolute path",
    ];
    if installed("keyctl") {
        expected.extend([
            "keyring: read the machine's key from the user keyring",
            "keyring: plant a key in @u that outlives the command",
        ]);
    }
    for name in expected {
        assert!(
            escaped.contains(&name),
            "{name} did not escape: {escaped:#?}"
        );
    }
}

// A known gap, pinned: a Unix socket file the sandbox can see (here one the test binds in a
// folder outside /tmp, `visible_tempdir`; on a machine, /run/docker.sock, the D-Bus and systemd sockets
// in /run) accepts a connection from a command. A read-only bind does not stop `connect`,
// and a network namespace only separates abstract sockets. Closing it needs a seccomp
// filter on `socket(AF_UNIX)` or hiding the sockets' folders; when that is done, this test
// fails and the attempt belongs in the suite above.
#[tokio::test]
async fn known_gap_a_unix_socket_file_the_sandbox_can_see_accepts_a_connection() {
    if !python_works() {
        eprintln!("skipped: no python3");
        return;
    }
    let dir = visible_tempdir("unix-socket-");
    let path = dir.path().canonicalize().unwrap().join("s");
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let root = tempfile::tempdir().unwrap();
    let sandbox = ContainerSandbox::new(root.path()).unwrap();
    assert_eq!(sandbox.mode(), SandboxMode::WorkspaceWrite);
    let bash = sandbox
        .tools()
        .into_iter()
        .find(|t| t.spec().name == "bash")
        .unwrap();
    let command = py(&format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\")",
        path.display()
    ));
    let out = bash
        .call_json(
            json!({ "command": command }),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert_eq!(out.content, "exit code: 0\n(no output)");
    assert_eq!(drain(|| listener.accept().map(drop)), 1);
}
