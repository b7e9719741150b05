//! `cargo xtask fresh [--all] [--keep]`: the README's first command on a clean machine.
//!
//! A green CI on a machine that has everything installed proves nothing about a new one: the
//! demo once failed on a new machine for want of libclang while every CI run was green. So
//! `fresh` runs the README's first command (`cargo xtask demo "…"`, read from README.md's
//! "Two commands" block, so the two cannot drift) inside a Debian chroot made with
//! `debootstrap`, and with `--all` then runs `cargo xtask ci` there too.
//!
//! What the chroot is:
//! - `debootstrap --variant=minbase` of Debian bookworm from the Debian mirror, plus the few
//!   packages of [`INCLUDE`], which this kind of machine has when new. The kind's image has more
//!   (g++, make, pip, Node.js, curl); they are left out on purpose, so the project's own scripts
//!   (`prereqs.rs`, `model.rs`, `interop.rs`) must prove that they install them.
//! - The Rust toolchain, bound in read-only because no toolchain can be downloaded here:
//!   `RUSTUP_HOME`, the rustup proxies in `$CARGO_HOME/bin` and `cargo-nextest` when it is on
//!   the PATH elsewhere, each at its host path, with `RUSTUP_TOOLCHAIN` set to the host's active
//!   toolchain so rustup never tries to download one. `CARGO_HOME` is otherwise empty, so every
//!   crate comes from the registry. `/proc`, `/sys` and `/dev` are mounted as a chroot needs;
//!   `/etc/resolv.conf` is copied for DNS, and the machine's own CA certificates
//!   (`/usr/local/share/ca-certificates`, with the variables that point TLS clients at the
//!   bundle) because the registries are reached through a proxy that needs them; `/etc/hosts`
//!   and the apt sources are written as the kind's image has them. Nothing else comes from the
//!   host.
//! - The repository as a `git clone` of the host checkout's HEAD, made from the host side:
//!   the committed state is tested, uncommitted changes are not (a dirty tree is warned about).
//! - Commands run as root with `HOME=/root`, a PATH with the toolchain, stdin from /dev/null.
//!
//! Safety: xtask moves into a private mount namespace first, so its mounts are never visible on
//! the host and vanish with the last process of the run even if xtask is killed. A guard undoes
//! every mount on every exit path (lazy unmount, also on an error, a panic or Ctrl-C, which is
//! passed on to the commands inside), and the chroot is removed only when `/proc/mounts` shows
//! nothing mounted under it: a `rm -rf` through a bind mount would delete the host's toolchain.
//! The toolchain mounts are read-only, and checked to be.
//!
//! The pristine debootstrap result is cached as `target/fresh/bookworm-minbase.tar` for a week
//! (a re-run unpacks it in seconds instead of 70 s); every run starts from a new copy of it in
//! `target/fresh/root`, which is removed at the end unless `--keep`.
//!
//! It stops at once when `target/fresh` has less free space than the chroot grows to (about
//! 5 GB, 11 GB with `--all`), rather than an hour later with "No space left on device".
//!
//! It skips, with a loud `SKIPPED` line and exit status 0, when the Debian mirror cannot be
//! reached, when not root, or when not on Linux: a skip never reads like a pass.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

/// The Debian release of this kind of machine.
const SUITE: &str = "bookworm";
/// The mirror of the kind's `/etc/apt/sources.list.d/debian.sources`.
const MIRROR: &str = "http://deb.debian.org/debian";
/// The security mirror of the same file.
const SECURITY_MIRROR: &str = "http://deb.debian.org/debian-security";
/// debootstrap's smallest variant: essential packages and apt.
const VARIANT: &str = "minbase";

/// What the chroot has beyond minbase: only what a new machine of this kind has, and of that
/// only what the project may take for granted. Each with why.
pub const INCLUDE: &[(&str, &str)] = &[
    (
        "gcc",
        "the C compiler rustc links with (`cc`); the kind has it as its C toolchain",
    ),
    (
        "libc6-dev",
        "the C library's headers and start files, without which gcc cannot link (gcc only \
         recommends it, and debootstrap installs no recommends)",
    ),
    (
        "ca-certificates",
        "cargo and pip fetch over HTTPS; the kind's image trusts the usual roots",
    ),
    ("git", "the kind's image has git"),
    (
        "python3",
        "the kind's CPython; without pip, which the project's scripts install",
    ),
];

/// Where the clone lives inside the chroot.
const CHECKOUT: &str = "/root/halo";
/// Where the host's tree is put by `pivot_root` before it is detached (an empty folder in the
/// root; see `inside`).
const OLD_ROOT: &str = ".oldroot";

/// How long a cached debootstrap result is used before a new one is made.
const CACHE_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The line printed when the check does not run.
pub fn skip_line(reason: &str) -> String {
    format!("xtask fresh: SKIPPED — {reason}; the clean-machine check did NOT run")
}

/// The README's first command: the first line of the ```sh block under "## Two commands",
/// split as a shell would (its trailing `# comment` dropped). It must be `cargo xtask demo …`.
pub fn readme_first_command(readme: &str) -> anyhow::Result<Vec<String>> {
    let section = readme
        .split_once("\n## Two commands")
        .context("README.md has no `## Two commands` section")?
        .1;
    let section = section.split("\n## ").next().unwrap_or(section);
    let block = section
        .split_once("```sh\n")
        .context("README.md's `## Two commands` section has no ```sh code block")?
        .1;
    let block = &block[..block
        .find("```")
        .context("README.md's `## Two commands` code block is not closed")?];
    let line = block
        .lines()
        .find(|l| !l.trim().is_empty())
        .context("README.md's `## Two commands` code block is empty")?;
    let words = shlex::split(line)
        .with_context(|| format!("README.md's first command has unbalanced quotes: {line}"))?;
    if words.len() < 3 || words[..3] != ["cargo", "xtask", "demo"] {
        bail!(
            "README.md's first command is `{line}`; `cargo xtask fresh` expects it to be \
             `cargo xtask demo …` (update xtask/src/fresh.rs if the README now starts elsewhere)"
        );
    }
    Ok(words)
}

/// What probing the mirror got: an HTTP status, or no answer at all (with why).
#[derive(Debug, PartialEq, Eq)]
pub enum Probe {
    Status(u16),
    NoAnswer(String),
}

/// Whether the check can run.
#[derive(Debug, PartialEq, Eq)]
pub enum Reach {
    Reachable,
    /// Why not, for the skip line.
    Unreachable(String),
}

/// Decides from a probe of `url` (the suite's `Release` file) whether the mirror can be used.
///
/// # Errors
/// The mirror answers that the file does not exist (404, 410): the suite or the mirror in this
/// file is wrong, which is a bug to fix, not a reason to skip.
pub fn judge(url: &str, probe: Probe) -> anyhow::Result<Reach> {
    match probe {
        Probe::Status(200..=299) => Ok(Reach::Reachable),
        Probe::Status(s @ (404 | 410)) => bail!(
            "{url} answered HTTP {s}: the mirror is reachable but has no {SUITE}; fix SUITE or \
             MIRROR in xtask/src/fresh.rs"
        ),
        Probe::Status(s) => Ok(Reach::Unreachable(format!(
            "the Debian mirror {MIRROR} answered HTTP {s} for {url}"
        ))),
        Probe::NoAnswer(why) => Ok(Reach::Unreachable(format!(
            "the Debian mirror {MIRROR} cannot be reached ({why})"
        ))),
    }
}

/// `/proc/mounts` escapes space, tab, newline and backslash in paths as `\ooo` octal.
fn unescape_mount_path(s: &str) -> PathBuf {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt as _;
        PathBuf::from(std::ffi::OsString::from_vec(out))
    }
    #[cfg(not(unix))]
    PathBuf::from(String::from_utf8_lossy(&out).into_owned())
}

/// The mount points in `proc_mounts` (the text of `/proc/mounts`) that are `dir` or below it,
/// in the order listed. `dir` must be canonical, as the kernel lists canonical paths.
pub fn mounts_under(proc_mounts: &str, dir: &Path) -> Vec<PathBuf> {
    proc_mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(unescape_mount_path)
        .filter(|p| p.starts_with(dir))
        .collect()
}

/// The options of the last mount listed at exactly `point` (the one in effect).
pub fn mount_options(proc_mounts: &str, point: &Path) -> Option<Vec<String>> {
    proc_mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let at = unescape_mount_path(f.nth(1)?);
            let options = f.nth(1)?;
            (at == point).then(|| options.split(',').map(str::to_owned).collect())
        })
        .next_back()
}

/// Removes `dir` and everything in it, unless `proc_mounts` shows something mounted at or
/// under it: then it refuses and removes nothing, since `remove_dir_all` would go down into
/// the mount (a bound toolchain, the host's /dev) and delete the host's files.
pub fn remove_unless_mounted(dir: &Path, proc_mounts: &str) -> anyhow::Result<()> {
    let mounted = mounts_under(proc_mounts, dir);
    if !mounted.is_empty() {
        let list: Vec<String> = mounted.iter().map(|p| p.display().to_string()).collect();
        bail!(
            "refusing to remove {}: still mounted under it: {}; unmount each (`umount -l PATH`), \
             check that `grep {} /proc/mounts` prints nothing, then remove the folder",
            dir.display(),
            list.join(", "),
            dir.display()
        );
    }
    std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))
}

/// The toolchain name in `rustup show active-toolchain`'s output
/// (`stable-x86_64-unknown-linux-gnu (default)`).
pub fn active_toolchain(rustup_output: &str) -> Option<String> {
    rustup_output
        .lines()
        .next()?
        .split_whitespace()
        .next()
        .map(str::to_owned)
}

/// What identifies a debootstrap result: suite, variant, mirror and extra packages.
fn cache_key() -> String {
    let include: Vec<&str> = INCLUDE.iter().map(|(p, _)| *p).collect();
    format!("{SUITE} {VARIANT} {MIRROR} {}", include.join(","))
}

/// Whether a cached debootstrap result made with `stored_key`, `age` ago, can stand for a
/// new one made with `key` now.
pub fn cache_usable(stored_key: Option<&str>, key: &str, age: Option<Duration>) -> bool {
    stored_key.is_some_and(|k| k.trim() == key) && age.is_some_and(|a| a <= CACHE_MAX_AGE)
}

/// About the most the chroot grows to, in bytes: packages, crates and the build of the demo
/// (llama.cpp and the coder), or with `--all` of the whole CI recipe (seen: 9 GB).
pub fn space_needed(all: bool) -> u64 {
    const GB: u64 = 1_000_000_000;
    if all { 11 * GB } else { 5 * GB }
}

/// Why a run with `free` bytes free where the chroot goes would run out of space, if it would.
pub fn space_problem(dir: &Path, free: u64, all: bool) -> Option<String> {
    let need = space_needed(all);
    let gb = |b: u64| b as f64 / 1e9;
    (free < need).then(|| {
        format!(
            "{} has {:.1} GB free, and the chroot needs about {:.0} GB{}; free some space (a \
             `cargo clean` in a checkout you don't need) and run it again",
            dir.display(),
            gb(free),
            gb(need),
            if all { " with --all" } else { "" }
        )
    })
}

/// The deb822 apt sources of the kind's image (`/etc/apt/sources.list.d/debian.sources`).
fn apt_sources() -> String {
    format!(
        "Types: deb\nURIs: {MIRROR}\nSuites: {SUITE} {SUITE}-updates\nComponents: main\n\
         Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n\
         Types: deb\nURIs: {SECURITY_MIRROR}\nSuites: {SUITE}-security\nComponents: main\n\
         Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
}

/// Where Debian keeps the CA certificates a machine adds to the ones it ships.
const LOCAL_CAS: &str = "/usr/local/share/ca-certificates";

/// The kind's environment variables that point TLS clients at the machine's CA bundle (the
/// same path inside): passed on when set, so the clients inside trust what the host's trust.
const TLS_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
];

/// The `/etc/hosts` every Debian machine has (debootstrap writes none).
const HOSTS: &str = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";

/// Runs the clean-machine check (see the module docs).
#[cfg(not(target_os = "linux"))]
pub fn run(_all: bool, _keep: bool) -> anyhow::Result<()> {
    eprintln!(
        "\n{}\n",
        skip_line("it needs Linux (debootstrap, chroot and bind mounts)")
    );
    Ok(())
}

/// Runs the clean-machine check (see the module docs).
#[cfg(target_os = "linux")]
pub fn run(all: bool, keep: bool) -> anyhow::Result<()> {
    imp::run(all, keep)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::cmp::Reverse;
    use std::os::unix::process::CommandExt as _;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use anyhow::{Context, bail};
    use nix::errno::Errno;
    use nix::mount::{MntFlags, MsFlags, mount, umount2};
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::{Pid, Uid};

    use super::{
        CHECKOUT, HOSTS, INCLUDE, LOCAL_CAS, MIRROR, OLD_ROOT, Probe, Reach, SUITE, TLS_VARS,
        VARIANT, active_toolchain, apt_sources, cache_key, cache_usable, judge, mount_options,
        mounts_under, readme_first_command, remove_unless_mounted, skip_line, space_problem,
    };
    use crate::root;

    /// How long the commands inside get to stop after SIGTERM before SIGKILL.
    const GRACE: Duration = Duration::from_secs(10);

    pub fn run(all: bool, keep: bool) -> anyhow::Result<()> {
        let started = Instant::now();
        let what = if all {
            "the README's first command, then `cargo xtask ci`,"
        } else {
            "the README's first command"
        };
        eprintln!("xtask fresh: {what} in a clean Debian {SUITE} chroot");
        if !Uid::effective().is_root() {
            eprintln!(
                "\n{}\n",
                skip_line("it must run as root (debootstrap, chroot and bind mounts need root)")
            );
            return Ok(());
        }
        // First, while xtask has one thread (unshare refuses a process whose threads share
        // its filesystem context).
        let private = private_mount_namespace();
        let url = format!("{MIRROR}/dists/{SUITE}/Release");
        if let Reach::Unreachable(why) = judge(&url, probe(&url))? {
            eprintln!("\n{}\n", skip_line(&why));
            return Ok(());
        }
        if let Err(e) = private {
            eprintln!(
                "xtask fresh: note: no private mount namespace ({e}); the mounts are undone by \
                 the guard alone"
            );
        }
        let workspace = root();
        let readme = std::fs::read_to_string(workspace.join("README.md"))
            .context("cannot read README.md")?;
        let first = readme_first_command(&readme)?;
        let toolchain = Toolchain::find()?;
        let stop = Arc::new(AtomicBool::new(false));
        let interrupted = Arc::new(AtomicBool::new(false));
        for sig in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            signal_hook::flag::register(sig, Arc::clone(&stop))?;
            signal_hook::flag::register(sig, Arc::clone(&interrupted))?;
        }
        let run = Run {
            stop,
            interrupted,
            phases: Vec::new(),
            current: "setup",
        };
        run.main(all, keep, &workspace, &first, &toolchain, started)
    }

    /// Moves xtask into a mount namespace of its own whose mounts do not propagate to the
    /// host's: whatever happens, the host never sees them, and they end with the run.
    fn private_mount_namespace() -> nix::Result<()> {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
    }

    /// An HTTP HEAD of `url` with a short timeout.
    fn probe(url: &str) -> Probe {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(15)))
            .http_status_as_error(false)
            .build()
            .new_agent();
        match agent.head(url).call() {
            Ok(response) => Probe::Status(response.status().as_u16()),
            Err(e) => Probe::NoAnswer(e.to_string()),
        }
    }

    /// The host's Rust toolchain, as it is bound into the chroot.
    struct Toolchain {
        rustup_home: PathBuf,
        cargo_home: PathBuf,
        /// `$CARGO_HOME/bin`: the rustup proxies (`cargo`, `rustc`, …).
        proxies: PathBuf,
        /// cargo-nextest, when it is installed outside `$CARGO_HOME/bin`.
        nextest: Option<PathBuf>,
        /// The active toolchain, e.g. `stable-x86_64-unknown-linux-gnu`.
        name: String,
    }

    impl Toolchain {
        fn find() -> anyhow::Result<Self> {
            let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
            let home = var("HOME").map(PathBuf::from);
            let under_home = |dir: &str| home.as_ref().map(|h| h.join(dir));
            let rustup_home = var("RUSTUP_HOME")
                .map(PathBuf::from)
                .or_else(|| under_home(".rustup"))
                .context("neither RUSTUP_HOME nor HOME is set; set RUSTUP_HOME")?;
            let cargo_home = var("CARGO_HOME")
                .map(PathBuf::from)
                .or_else(|| under_home(".cargo"))
                .context("neither CARGO_HOME nor HOME is set; set CARGO_HOME")?;
            if !rustup_home.join("toolchains").is_dir() {
                bail!(
                    "no rustup toolchains in {}: `cargo xtask fresh` binds the rustup toolchain \
                     into the chroot; install Rust with rustup, or set RUSTUP_HOME",
                    rustup_home.display()
                );
            }
            let proxies = cargo_home.join("bin");
            if !proxies.join("cargo").is_file() {
                bail!(
                    "no rustup proxy {}: install Rust with rustup, or set CARGO_HOME",
                    proxies.join("cargo").display()
                );
            }
            let name = match var("RUSTUP_TOOLCHAIN") {
                Some(n) => n.to_string_lossy().into_owned(),
                None => {
                    let out = Command::new("rustup")
                        .args(["show", "active-toolchain"])
                        .output()
                        .context("cannot run `rustup show active-toolchain`")?;
                    active_toolchain(&String::from_utf8_lossy(&out.stdout))
                        .context("`rustup show active-toolchain` named no toolchain")?
                }
            };
            // A toolchain linked from elsewhere (`rustup toolchain link`) would not be bound.
            let rustup_home = rustup_home.canonicalize()?;
            let dir = rustup_home.join("toolchains").join(&name);
            let real = dir.canonicalize().with_context(|| {
                format!("the active toolchain {name} is not in {}", dir.display())
            })?;
            if !real.starts_with(&rustup_home) {
                bail!(
                    "the active toolchain {name} lives at {}, outside RUSTUP_HOME ({}), and \
                     would not be bound into the chroot; use a toolchain rustup installed",
                    real.display(),
                    rustup_home.display()
                );
            }
            let cargo_home = cargo_home.canonicalize()?;
            let proxies = cargo_home.join("bin");
            let nextest = std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .map(|d| d.join("cargo-nextest"))
                .find(|p| p.is_file())
                .and_then(|p| p.canonicalize().ok())
                .filter(|p| !p.starts_with(&proxies));
            Ok(Self {
                rustup_home,
                cargo_home,
                proxies,
                nextest,
                name,
            })
        }

        /// The environment of the commands inside: nothing from the host's but these.
        fn env(&self) -> Vec<(String, String)> {
            let mut env = vec![
                ("HOME".into(), "/root".into()),
                ("USER".into(), "root".into()),
                ("LANG".into(), "C.UTF-8".into()),
                (
                    "PATH".into(),
                    format!(
                        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        self.proxies.display()
                    ),
                ),
                ("RUSTUP_HOME".into(), self.rustup_home.display().to_string()),
                ("CARGO_HOME".into(), self.cargo_home.display().to_string()),
                ("RUSTUP_TOOLCHAIN".into(), self.name.clone()),
            ];
            // How the output looks, and where the CA bundle is: not what the machine has.
            for &name in ["TERM", "CARGO_TERM_COLOR"].iter().chain(TLS_VARS) {
                if let Ok(v) = std::env::var(name) {
                    env.push((name.into(), v));
                }
            }
            env
        }
    }

    struct Run {
        /// Set by SIGINT, SIGTERM or SIGHUP; cleared when passed on to the commands inside.
        stop: Arc<AtomicBool>,
        /// Set by the same signals; stays set.
        interrupted: Arc<AtomicBool>,
        phases: Vec<(&'static str, Duration)>,
        /// The phase under way.
        current: &'static str,
    }

    impl Run {
        fn main(
            mut self,
            all: bool,
            keep: bool,
            workspace: &Path,
            first: &[String],
            toolchain: &Toolchain,
            started: Instant,
        ) -> anyhow::Result<()> {
            let dir = crate::interop::target_dir(workspace).join("fresh");
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let dir = dir.canonicalize()?;
            let mut chroot = Chroot::new(dir.join("root"), keep)?;
            let stat = nix::sys::statvfs::statvfs(&dir)?;
            // Both are u64 here and narrower on 32-bit targets.
            #[allow(clippy::useless_conversion)]
            let free = u64::from(stat.blocks_available()) * u64::from(stat.fragment_size());
            if let Some(problem) = space_problem(&dir, free, all) {
                bail!("{problem}");
            }
            let result = self.phases(all, workspace, &dir, &mut chroot, first, toolchain);
            let closed = chroot.close();
            let total = started.elapsed().as_secs_f64();
            let times: Vec<String> = self
                .phases
                .iter()
                .map(|(name, d)| format!("{name} {:.0} s", d.as_secs_f64()))
                .collect();
            let times = if times.is_empty() {
                "no phase finished".to_owned()
            } else {
                times.join(", ")
            };
            let ran = if all {
                "the README's first command and `cargo xtask ci`"
            } else {
                "the README's first command"
            };
            match (&result, &closed) {
                (Ok(()), Ok(())) => {
                    eprintln!(
                        "\nxtask fresh: PASSED — {ran} succeeded in a clean Debian {SUITE} \
                         chroot in {total:.0} s ({times})"
                    );
                    Ok(())
                }
                (Err(e), _) => {
                    if let Err(c) = &closed {
                        eprintln!("xtask fresh: also, cleaning up failed: {c:#}");
                    }
                    eprintln!(
                        "\nxtask fresh: FAILED in {} after {total:.0} s ({times}): {e:#}",
                        self.current
                    );
                    if !keep {
                        eprintln!(
                            "xtask fresh: `cargo xtask fresh --keep` keeps the chroot to look \
                             into (`chroot {} /bin/bash`)",
                            chroot.root.display()
                        );
                    }
                    result
                }
                (Ok(()), Err(_)) => closed,
            }
        }

        fn phases(
            &mut self,
            all: bool,
            workspace: &Path,
            dir: &Path,
            chroot: &mut Chroot,
            first: &[String],
            toolchain: &Toolchain,
        ) -> anyhow::Result<()> {
            let t = self.phase("debootstrap");
            self.debootstrap(dir, &chroot.root)?;
            self.done("debootstrap", t);
            chroot.set_up_etc()?;

            let t = self.phase("clone");
            let head = clone(workspace, &chroot.root)?;
            self.done("clone", t);

            chroot.mount_all(toolchain)?;
            let env = toolchain.env();

            let t = self.phase("demo");
            eprintln!("xtask fresh: the README's first command, in {CHECKOUT} at {head}");
            self.inside(&chroot.root, &env, first)?;
            self.done("demo", t);

            if all {
                let t = self.phase("ci");
                let ci = ["cargo", "xtask", "ci"].map(String::from);
                self.inside(&chroot.root, &env, &ci)?;
                self.done("ci", t);
            }
            Ok(())
        }

        fn phase(&mut self, name: &'static str) -> Instant {
            self.current = name;
            eprintln!("\n==> fresh: {name}");
            Instant::now()
        }

        fn done(&mut self, name: &'static str, started: Instant) {
            let took = started.elapsed();
            eprintln!("<== fresh: {name}: ok ({:.1} s)", took.as_secs_f64());
            self.phases.push((name, took));
        }

        /// Makes `root` a pristine minbase: unpacked from the cache when it is usable, else
        /// made with debootstrap and cached.
        fn debootstrap(&self, dir: &Path, root: &Path) -> anyhow::Result<()> {
            let tar = dir.join(format!("{SUITE}-{VARIANT}.tar"));
            let key_file = dir.join(format!("{SUITE}-{VARIANT}.key"));
            let key = cache_key();
            let stored = std::fs::read_to_string(&key_file).ok();
            let age = std::fs::metadata(&tar)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| m.elapsed().ok());
            std::fs::create_dir_all(root)?;
            if cache_usable(stored.as_deref(), &key, age) {
                eprintln!(
                    "xtask fresh: unpacking the debootstrap result cached {:.1} days ago ({})",
                    age.unwrap_or_default().as_secs_f64() / 86_400.0,
                    tar.display()
                );
                return self.watched(
                    Command::new("tar")
                        .args(["--extract", "--numeric-owner", "--xattrs"])
                        .args(["--xattrs-include=*", "--same-permissions", "--file"])
                        .arg(&tar)
                        .arg("--directory")
                        .arg(root),
                );
            }
            ensure_debootstrap()?;
            let include: Vec<&str> = INCLUDE.iter().map(|(p, _)| *p).collect();
            self.watched(
                Command::new("debootstrap")
                    .arg(format!("--variant={VARIANT}"))
                    .arg(format!("--include={}", include.join(",")))
                    .arg(SUITE)
                    .arg(root)
                    .arg(MIRROR),
            )?;
            let partial = tar.with_extension("tar.partial");
            self.watched(
                Command::new("tar")
                    .args(["--create", "--numeric-owner", "--xattrs", "--file"])
                    .arg(&partial)
                    .arg("--directory")
                    .arg(root)
                    .arg("."),
            )?;
            std::fs::rename(&partial, &tar)?;
            std::fs::write(&key_file, &key)?;
            eprintln!(
                "xtask fresh: cached the debootstrap result as {}",
                tar.display()
            );
            Ok(())
        }

        /// Runs `argv` inside the chroot, in the clone, as a new login would.
        ///
        /// The root is entered with `pivot_root` in a mount namespace of the command's own
        /// (`unshare --mount`), not with chroot(2) alone: the kernel refuses a new user
        /// namespace to a chrooted process (user_namespaces(7): EPERM "in a chroot
        /// environment"), and the OS sandbox of `bash`, which the tests inside run, gives
        /// every command one. After `pivot_root` the process's root is its namespace's root,
        /// so it is not "chrooted"; the host's tree is detached (`umount -l`) before the
        /// command starts. The root is a mount point already (`mount_all`).
        fn inside(
            &self,
            root: &Path,
            env: &[(String, String)],
            argv: &[String],
        ) -> anyhow::Result<()> {
            std::fs::create_dir_all(root.join(OLD_ROOT))?;
            let mut cmd = Command::new("unshare");
            cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg(format!(
                    "cd \"$0\" && pivot_root . {OLD_ROOT} && umount -l /{OLD_ROOT} && exec /usr/sbin/chroot . \"$@\""
                ))
                .arg(root)
                .args(["/usr/bin/env", "-i", "-C", CHECKOUT])
                .args(env.iter().map(|(k, v)| format!("{k}={v}")))
                .args(argv)
                .stdin(Stdio::null());
            let what = argv
                .iter()
                .map(|a| shlex::try_quote(a).map_or_else(|_| a.clone(), |q| q.into_owned()))
                .collect::<Vec<_>>()
                .join(" ");
            self.watched_as(&mut cmd, &format!("`{what}` in the chroot"))
        }

        fn watched(&self, cmd: &mut Command) -> anyhow::Result<()> {
            let shown = crate::shown(cmd);
            self.watched_as(cmd, &format!("`{shown}`"))
        }

        /// Runs `cmd` in a process group of its own, passing SIGINT/SIGTERM/SIGHUP on to the
        /// whole group (SIGTERM, then SIGKILL after a grace period or a second signal).
        /// `what` names the command in an error.
        fn watched_as(&self, cmd: &mut Command, what: &str) -> anyhow::Result<()> {
            if self.interrupted.load(Ordering::SeqCst) {
                bail!("interrupted");
            }
            let shown = crate::shown(cmd);
            eprintln!("$ {shown}");
            cmd.process_group(0);
            let mut child = cmd
                .spawn()
                .with_context(|| format!("cannot run `{shown}`"))?;
            let group = Pid::from_raw(i32::try_from(child.id())?);
            let mut asked: Option<Instant> = None;
            let status = loop {
                if let Some(status) = child.try_wait()? {
                    break status;
                }
                let again = self.stop.swap(false, Ordering::SeqCst);
                match asked {
                    None if again => {
                        eprintln!("xtask fresh: stopping `{shown}`");
                        let _ = killpg(group, Signal::SIGTERM);
                        asked = Some(Instant::now());
                    }
                    Some(t) if again || t.elapsed() > GRACE => {
                        let _ = killpg(group, Signal::SIGKILL);
                    }
                    _ => {}
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            // Whatever the command left running in its group would hold the chroot busy.
            let _ = killpg(group, Signal::SIGKILL);
            if self.interrupted.load(Ordering::SeqCst) {
                bail!("interrupted");
            }
            if !status.success() {
                bail!("{what} failed ({status})");
            }
            Ok(())
        }
    }

    /// Installs debootstrap on the host with apt-get when it is missing.
    fn ensure_debootstrap() -> anyhow::Result<()> {
        let present = || Path::new("/usr/sbin/debootstrap").is_file();
        if present() {
            return Ok(());
        }
        let apt = Path::new("/usr/bin/apt-get");
        if !apt.is_file() {
            bail!(
                "debootstrap is missing and there is no apt-get to install it; install debootstrap"
            );
        }
        eprintln!("xtask fresh: installing debootstrap with apt-get");
        crate::run_cmd(Command::new(apt).args(["update", "-qq"]))?;
        crate::run_cmd(
            Command::new(apt)
                .args([
                    "install",
                    "-y",
                    "-qq",
                    "--no-install-recommends",
                    "debootstrap",
                ])
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )?;
        if !present() {
            bail!("apt-get installed debootstrap but there is no /usr/sbin/debootstrap");
        }
        Ok(())
    }

    /// Clones the workspace's HEAD into the chroot's `/root/halo`, from the host side;
    /// returns the commit, shortened.
    fn clone(workspace: &Path, root: &Path) -> anyhow::Result<String> {
        let git = |args: &[&str]| -> anyhow::Result<String> {
            let out = Command::new("git")
                .args(args)
                .current_dir(workspace)
                .output()
                .context("cannot run git")?;
            if !out.status.success() {
                bail!(
                    "`git {}` failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        };
        let head = git(&["rev-parse", "HEAD"])?;
        let short = git(&["rev-parse", "--short", "HEAD"])?;
        let dirty = git(&["status", "--porcelain"])?;
        eprintln!(
            "xtask fresh: testing commit {short} of {}, the committed state",
            workspace.display()
        );
        if !dirty.is_empty() {
            eprintln!(
                "xtask fresh: WARNING: the work tree has {} uncommitted change(s); they are NOT \
                 tested (commit them to test them)",
                dirty.lines().count()
            );
        }
        let dest = root.join(CHECKOUT.trim_start_matches('/'));
        crate::run_cmd(
            Command::new("git")
                .args(["clone", "--quiet", "--no-hardlinks"])
                .arg(workspace)
                .arg(&dest),
        )?;
        crate::run_cmd(
            Command::new("git")
                .arg("-C")
                .arg(&dest)
                .args(["checkout", "--quiet", "--detach", &head]),
        )?;
        Ok(short)
    }

    fn proc_mounts() -> anyhow::Result<String> {
        std::fs::read_to_string("/proc/mounts").context("cannot read /proc/mounts")
    }

    /// The chroot folder and what is mounted in it; undoes the mounts and removes the folder
    /// (unless kept) in [`Chroot::close`], or failing that when dropped.
    struct Chroot {
        root: PathBuf,
        mounts: Vec<PathBuf>,
        keep: bool,
        closed: bool,
    }

    impl Chroot {
        /// Takes `root`, removing what an earlier run left there.
        fn new(root: PathBuf, keep: bool) -> anyhow::Result<Self> {
            if root.exists() {
                eprintln!(
                    "xtask fresh: removing {} from an earlier run",
                    root.display()
                );
                let root = root.canonicalize()?;
                let mut left = Self {
                    root,
                    mounts: Vec::new(),
                    keep: false,
                    closed: false,
                };
                left.close()?;
            }
            Ok(Self {
                root,
                mounts: Vec::new(),
                keep,
                closed: false,
            })
        }

        fn path(&self, inside: &Path) -> PathBuf {
            self.root.join(inside.strip_prefix("/").unwrap_or(inside))
        }

        /// DNS, localhost and the apt sources, as on a new machine of this kind.
        fn set_up_etc(&self) -> anyhow::Result<()> {
            let etc = self.path(Path::new("/etc"));
            for (file, text) in [
                ("resolv.conf", std::fs::read_to_string("/etc/resolv.conf")?),
                ("hosts", HOSTS.to_owned()),
                ("apt/sources.list.d/debian.sources", apt_sources()),
            ] {
                let path = etc.join(file);
                // A symlink there would be followed to the host's file.
                if path.symlink_metadata().is_ok() {
                    std::fs::remove_file(&path)?;
                }
                std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            // debootstrap's one-line list names only the suite, not its updates and security.
            let list = etc.join("apt/sources.list");
            if list.symlink_metadata().is_ok() {
                std::fs::remove_file(list)?;
            }
            self.trust_local_cas()
        }

        /// The CA certificates the machine trusts beyond Debian's (this workplace reaches the
        /// registries over HTTPS through a proxy with a CA of its own): copied from
        /// `/usr/local/share/ca-certificates` and added to the bundle by ca-certificates' own
        /// `update-ca-certificates`, as on the kind's image. Without them cargo fails with
        /// "self-signed certificate in certificate chain".
        fn trust_local_cas(&self) -> anyhow::Result<()> {
            let host = Path::new(LOCAL_CAS);
            let Ok(entries) = std::fs::read_dir(host) else {
                return Ok(());
            };
            let inside = self.path(host);
            std::fs::create_dir_all(&inside)?;
            let mut copied = Vec::new();
            for e in entries.flatten() {
                let path = e.path();
                if path.extension().is_some_and(|x| x == "crt") && path.is_file() {
                    let to = inside.join(e.file_name());
                    std::fs::copy(&path, &to)
                        .with_context(|| format!("cannot copy {}", path.display()))?;
                    copied.push(e.file_name().to_string_lossy().into_owned());
                }
            }
            if copied.is_empty() {
                return Ok(());
            }
            eprintln!(
                "xtask fresh: trusting the machine's own CA certificates ({}), as the host does",
                copied.join(", ")
            );
            crate::run_cmd(
                Command::new("chroot")
                    .arg(&self.root)
                    .args(["/usr/sbin/update-ca-certificates", "--fresh"])
                    .env_clear()
                    .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
                    .stdout(Stdio::null()),
            )
        }

        /// Mounts the root onto itself, then /proc, /sys, /dev and the toolchain.
        ///
        /// The root is bound onto itself first so that the chroot's `/` is a mount point, as
        /// a machine's or a container's is: bubblewrap (the OS sandbox of `bash`, run by the
        /// tests inside) makes `/` a slave mount and fails with "Failed to make / slave:
        /// Invalid argument" when it is a plain folder.
        fn mount_all(&mut self, toolchain: &Toolchain) -> anyhow::Result<()> {
            mount(
                Some(&self.root),
                &self.root,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .context("cannot bind the chroot onto itself")?;
            self.mounts.push(self.root.clone());
            let at = self.mount_point(Path::new("/proc"), true)?;
            mount(
                Some("proc"),
                &at,
                Some("proc"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                None::<&str>,
            )
            .context("cannot mount /proc in the chroot")?;
            self.mounts.push(at);
            // /dev with /dev/pts and /dev/shm, /sys with the cgroups cargo reads the CPU quota from.
            for dir in ["/sys", "/dev"] {
                self.bind(Path::new(dir), true, false)?;
            }
            let mut bound = vec![toolchain.rustup_home.clone(), toolchain.proxies.clone()];
            bound.extend(toolchain.nextest.clone());
            for path in &bound {
                self.bind(path, false, true)?;
            }
            let list: Vec<String> = bound.iter().map(|p| p.display().to_string()).collect();
            eprintln!(
                "xtask fresh: bound read-only: {}; CARGO_HOME {} is empty otherwise",
                list.join(", "),
                toolchain.cargo_home.display()
            );
            Ok(())
        }

        /// Creates the mount point for `inside` (a folder, or a file when `dir` is false).
        fn mount_point(&self, inside: &Path, dir: bool) -> anyhow::Result<PathBuf> {
            let at = self.path(inside);
            if dir {
                std::fs::create_dir_all(&at)?;
            } else {
                if let Some(parent) = at.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                if !at.exists() {
                    std::fs::write(&at, b"")?;
                }
            }
            Ok(at)
        }

        /// Binds the host's `path` at the same path inside: with what is mounted below it
        /// (`recursive`, made a slave so nothing propagates back), or read-only.
        fn bind(&mut self, path: &Path, recursive: bool, read_only: bool) -> anyhow::Result<()> {
            let at = self.mount_point(path, path.is_dir())?;
            let mut flags = MsFlags::MS_BIND;
            if recursive {
                flags |= MsFlags::MS_REC;
            }
            mount(Some(path), &at, None::<&str>, flags, None::<&str>)
                .with_context(|| format!("cannot bind {} into the chroot", path.display()))?;
            self.mounts.push(at.clone());
            if recursive {
                mount(
                    None::<&str>,
                    &at,
                    None::<&str>,
                    MsFlags::MS_REC | MsFlags::MS_SLAVE,
                    None::<&str>,
                )
                .with_context(|| format!("cannot make {} a slave mount", at.display()))?;
            }
            if read_only {
                mount(
                    None::<&str>,
                    &at,
                    None::<&str>,
                    MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                    None::<&str>,
                )
                .with_context(|| format!("cannot make {} read-only", at.display()))?;
                let options = mount_options(&proc_mounts()?, &at).unwrap_or_default();
                if !options.iter().any(|o| o == "ro") {
                    bail!(
                        "{} is still writable after remounting it read-only ({})",
                        at.display(),
                        options.join(",")
                    );
                }
            }
            Ok(())
        }

        /// Undoes every mount under the root (lazily: a busy one is detached now and released
        /// when its last user ends); then removes the root unless it is kept.
        fn close(&mut self) -> anyhow::Result<()> {
            self.closed = true;
            for at in self.mounts.drain(..).rev() {
                if let Err(e) = umount2(&at, MntFlags::MNT_DETACH)
                    && e != Errno::EINVAL
                {
                    eprintln!("xtask fresh: cannot unmount {}: {e}", at.display());
                }
            }
            // What others mounted there: debootstrap's /proc after an interrupt, say.
            let mut left = mounts_under(&proc_mounts()?, &self.root);
            left.sort_by_key(|p| Reverse(p.components().count()));
            for at in left {
                let _ = umount2(&at, MntFlags::MNT_DETACH);
            }
            if self.keep {
                let still = mounts_under(&proc_mounts()?, &self.root);
                if !still.is_empty() {
                    bail!("still mounted in the kept chroot: {still:?}");
                }
                eprintln!(
                    "xtask fresh: kept the chroot (nothing mounted in it) at {}",
                    self.root.display()
                );
                return Ok(());
            }
            if !self.root.exists() {
                return Ok(());
            }
            remove_unless_mounted(&self.root, &proc_mounts()?)
        }
    }

    impl Drop for Chroot {
        fn drop(&mut self) {
            if !self.closed
                && let Err(e) = self.close()
            {
                eprintln!("xtask fresh: {e:#}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_command_is_read_from_two_commands() {
        let readme = "# X\n\n## Crates\n\n```sh\ncargo other\n```\n\n## Two commands\n\n\
                      ```sh\ncargo xtask demo \"Say #1 thing.\"  # set-up, then an agent\n\
                      cargo xtask ci   # every check\n```\n";
        assert_eq!(
            readme_first_command(readme).unwrap(),
            ["cargo", "xtask", "demo", "Say #1 thing."]
        );
    }

    // The README's first command is what a new user types: fresh runs exactly it, and it is
    // the demo's own default task.
    #[test]
    fn the_real_readme_starts_with_the_demo_default() {
        let readme = include_str!("../../README.md");
        assert_eq!(
            readme_first_command(readme).unwrap(),
            ["cargo", "xtask", "demo", crate::demo::DEFAULT_TASK]
        );
    }

    #[test]
    fn a_readme_without_the_demo_first_is_an_error() {
        for readme in [
            "# X\n",
            "# X\n## Two commands\n\nno block\n## Next\n```sh\ncargo xtask demo\n```\n",
            "# X\n## Two commands\n```sh\ncargo xtask ci\n```\n",
            "# X\n## Two commands\n```sh\ncargo xtask demo \"open\n```\n",
            "# X\n## Two commands\n```sh\ncargo xtask demo\n",
        ] {
            assert!(readme_first_command(readme).is_err(), "{readme}");
        }
    }

    const MOUNTS: &str = "\
/dev/vda / ext4 rw,relatime 0 0
proc /proc proc rw,relatime 0 0
proc /work/t/fresh/root/proc proc rw,nosuid,nodev,noexec,relatime 0 0
/dev/vda /work/t/fresh/root/root/.rustup ext4 rw,relatime 0 0
/dev/vda /work/t/fresh/root/root/.rustup ext4 ro,relatime 0 0
/dev/vda /work/t/fresh/root2/x ext4 rw,relatime 0 0
/dev/vda /work/t/my\\040dir/a ext4 rw,relatime 0 0
";

    #[test]
    fn mounts_under_a_folder_are_found_and_no_others() {
        assert_eq!(
            mounts_under(MOUNTS, Path::new("/work/t/fresh/root")),
            [
                "/work/t/fresh/root/proc",
                "/work/t/fresh/root/root/.rustup",
                "/work/t/fresh/root/root/.rustup"
            ]
            .map(PathBuf::from)
        );
        // `root2` only shares a prefix of characters, not a path component.
        assert_eq!(
            mounts_under(MOUNTS, Path::new("/work/t/fresh/root2")),
            [PathBuf::from("/work/t/fresh/root2/x")]
        );
        assert_eq!(
            mounts_under(MOUNTS, Path::new("/work/t/my dir")),
            [PathBuf::from("/work/t/my dir/a")]
        );
        assert!(mounts_under(MOUNTS, Path::new("/work/t/fresh/roo")).is_empty());
        assert!(mounts_under("", Path::new("/")).is_empty());
    }

    #[test]
    fn the_mount_in_effect_gives_the_options() {
        let at = Path::new("/work/t/fresh/root/root/.rustup");
        assert_eq!(
            mount_options(MOUNTS, at).unwrap(),
            ["ro", "relatime"].map(String::from)
        );
        assert_eq!(mount_options(MOUNTS, Path::new("/nowhere")), None);
    }

    // Guard against deleting the host's ~/.rustup through a bind mount left in the chroot.
    #[test]
    fn a_folder_with_a_mount_under_it_is_not_removed() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        let toolchain = root.join("root/.rustup/toolchains/stable");
        std::fs::create_dir_all(&toolchain).unwrap();
        std::fs::write(toolchain.join("rustc"), b"host toolchain").unwrap();
        let mounts = format!(
            "proc /proc proc rw 0 0\n/dev/vda {} ext4 ro,relatime 0 0\n",
            root.join("root/.rustup").display()
        );
        let err = remove_unless_mounted(&root, &mounts)
            .unwrap_err()
            .to_string();
        assert!(err.contains("refusing to remove"), "{err}");
        assert!(err.contains(".rustup"), "{err}");
        assert_eq!(
            std::fs::read(toolchain.join("rustc")).unwrap(),
            b"host toolchain"
        );
        // Once nothing is mounted there, it goes.
        remove_unless_mounted(&root, "proc /proc proc rw 0 0\n").unwrap();
        assert!(!root.exists());
    }

    #[test]
    fn only_a_missing_release_file_is_an_error() {
        let url = "http://deb.debian.org/debian/dists/bookworm/Release";
        assert_eq!(judge(url, Probe::Status(200)).unwrap(), Reach::Reachable);
        for s in [404, 410] {
            let e = judge(url, Probe::Status(s)).unwrap_err().to_string();
            assert!(e.contains("fix SUITE or MIRROR"), "{e}");
        }
        let Reach::Unreachable(why) = judge(url, Probe::Status(503)).unwrap() else {
            panic!("503 is not a reachable mirror")
        };
        assert!(why.contains("HTTP 503"), "{why}");
        let Reach::Unreachable(why) = judge(url, Probe::NoAnswer("timeout".into())).unwrap() else {
            panic!("no answer is not a reachable mirror")
        };
        assert_eq!(
            skip_line(&why),
            "xtask fresh: SKIPPED — the Debian mirror http://deb.debian.org/debian cannot be \
             reached (timeout); the clean-machine check did NOT run"
        );
    }

    #[test]
    fn the_active_toolchain_is_the_first_word() {
        assert_eq!(
            active_toolchain("stable-x86_64-unknown-linux-gnu (default)\n").as_deref(),
            Some("stable-x86_64-unknown-linux-gnu")
        );
        assert_eq!(
            active_toolchain(
                "1.95.0-x86_64-unknown-linux-gnu (overridden by '/w/rust-toolchain.toml')"
            )
            .as_deref(),
            Some("1.95.0-x86_64-unknown-linux-gnu")
        );
        assert_eq!(active_toolchain(""), None);
    }

    #[test]
    fn a_cached_minbase_is_used_only_when_it_matches_and_is_recent() {
        let key = cache_key();
        assert!(key.starts_with("bookworm minbase http://deb.debian.org/debian gcc,"));
        let day = Duration::from_secs(86_400);
        assert!(cache_usable(Some(&format!("{key}\n")), &key, Some(day)));
        assert!(!cache_usable(Some(&key), &key, Some(8 * day)));
        assert!(!cache_usable(
            Some("bookworm minbase x gcc"),
            &key,
            Some(day)
        ));
        assert!(!cache_usable(None, &key, Some(day)));
        assert!(!cache_usable(Some(&key), &key, None));
    }

    #[test]
    fn the_chroot_includes_only_the_base_images_c_toolchain_certificates_git_and_python() {
        let include: Vec<&str> = INCLUDE.iter().map(|(p, _)| *p).collect();
        assert_eq!(
            include,
            ["gcc", "libc6-dev", "ca-certificates", "git", "python3"]
        );
    }

    #[test]
    fn too_little_space_is_said_before_anything_runs() {
        let dir = Path::new("/w/target/fresh");
        assert_eq!(space_problem(dir, 6_000_000_000, false), None);
        assert_eq!(
            space_problem(dir, 4_000_000_000, false).unwrap(),
            "/w/target/fresh has 4.0 GB free, and the chroot needs about 5 GB; free some space \
             (a `cargo clean` in a checkout you don't need) and run it again"
        );
        let all = space_problem(dir, 8_900_000_000, true).unwrap();
        assert!(
            all.contains("8.9 GB free") && all.contains("11 GB with --all"),
            "{all}"
        );
        assert_eq!(space_problem(dir, 12_000_000_000, true), None);
    }

    #[test]
    fn the_apt_sources_are_the_kinds() {
        let s = apt_sources();
        assert!(
            s.contains("URIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n")
        );
        assert!(
            s.contains("URIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n")
        );
    }
}
