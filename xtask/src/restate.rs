//! `cargo xtask restate`: the Restate server that the durable-run tests (`examples/durable`)
//! start, installed from npm, and what those tests need around it.
//!
//! The server is the npm package `@restatedev/restate-server`, pinned (version and
//! integrity) by the npm project `examples/durable/restate` (`package.json` and
//! `package-lock.json`); it holds a static binary per platform in an optional dependency
//! (`@restatedev/restate-server-linux-x64`, ...). `npm ci --ignore-scripts` installs it into
//! that folder's `node_modules` (again whenever the lock file is newer than the install),
//! where the tests find it: the only script it would run is a usage-analytics postinstall.
//!
//! The tests run each case in a network namespace of its own (`unshare`, util-linux) and
//! bring loopback up there with `ip` (iproute2): as root on Debian, iproute2 is installed
//! with apt-get when missing. `cargo xtask ci` does all this before the tests and names the
//! binary to them (`HALO_RESTATE_SERVER`), so there a missing server fails the tests instead
//! of skipping them.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::{root, run_cmd};

/// The npm project that pins the server, relative to the workspace root.
pub const PROJECT: &str = "examples/durable/restate";

/// The server binary inside the npm project `dir`, for this platform.
///
/// # Errors
/// A platform the server is not published for.
pub fn binary_in(dir: &Path) -> anyhow::Result<PathBuf> {
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => bail!("the Restate server is published for x86_64 and aarch64, not {other}"),
    };
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        other => bail!("the Restate server is published for Linux and macOS, not {other}"),
    };
    Ok(dir.join(format!(
        "node_modules/@restatedev/restate-server-{os}-{cpu}/bin/restate-server"
    )))
}

/// `cargo xtask restate`: installs the server (and iproute2) when missing and prints the
/// binary's path.
///
/// # Errors
/// Those of [`ensure`].
pub fn run() -> anyhow::Result<()> {
    let path = ensure()?;
    println!("{}", path.display());
    Ok(())
}

/// Makes sure the pinned Restate server is installed, and `unshare` and `ip` for the tests'
/// network namespaces; returns the server binary's path.
///
/// # Errors
/// node, npm or iproute2 missing and not installable here, `npm ci` failing, or an install
/// without the binary for this platform.
pub fn ensure() -> anyhow::Result<PathBuf> {
    crate::prereqs::ensure_netns()?;
    let dir = root().join(PROJECT);
    let binary = binary_in(&dir)?;
    if binary.is_file() && !stale(&dir) {
        return Ok(binary);
    }
    crate::interop::ensure_node()?;
    eprintln!(
        "xtask: installing the Restate server pinned by {PROJECT}/package-lock.json from npm \
         (about 220 MB)"
    );
    run_cmd(
        Command::new("npm")
            .args([
                "ci",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--prefix",
            ])
            .arg(&dir),
    )
    .with_context(|| format!("installing the Restate server into {}", dir.display()))?;
    if !binary.is_file() {
        bail!(
            "npm installed {PROJECT} without a Restate server binary for this platform (no {})",
            binary.display()
        );
    }
    Ok(binary)
}

/// Whether the install in `dir` is older than its lock file (npm records what it installed
/// in `node_modules/.package-lock.json`), or absent.
fn stale(dir: &Path) -> bool {
    let modified = |p: PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (
        modified(dir.join("node_modules/.package-lock.json")),
        modified(dir.join("package-lock.json")),
    ) {
        (Some(installed), Some(locked)) => installed < locked,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_file_pins_the_server_and_its_platform_binaries() {
        let dir = root().join(PROJECT);
        let read = |name: &str| -> serde_json::Value {
            let text = std::fs::read_to_string(dir.join(name)).expect(name);
            serde_json::from_str(&text).expect(name)
        };
        let manifest = read("package.json");
        let version = manifest["dependencies"]["@restatedev/restate-server"]
            .as_str()
            .expect("the server is a dependency");
        assert!(
            version.chars().all(|c| c.is_ascii_digit() || c == '.'),
            "the server's version is pinned exactly, not {version}"
        );
        let lock = read("package-lock.json");
        let packages = &lock["packages"];
        let server = &packages["node_modules/@restatedev/restate-server"];
        assert_eq!(server["version"], version);
        for platform in ["linux-x64", "linux-arm64"] {
            let binary = &packages[format!("node_modules/@restatedev/restate-server-{platform}")];
            assert_eq!(binary["version"], version, "{platform}");
            assert!(
                binary["integrity"]
                    .as_str()
                    .is_some_and(|i| i.starts_with("sha512-")),
                "{platform} has an integrity hash"
            );
        }
    }

    #[test]
    fn the_binary_is_looked_for_in_the_platforms_package() {
        let path = binary_in(Path::new("/x")).unwrap();
        let path = path.to_string_lossy();
        assert!(path.starts_with("/x/node_modules/@restatedev/restate-server-"));
        assert!(path.ends_with("/bin/restate-server"));
    }
}
