//! `cargo xtask bench tools`: the sandbox's `grep` and `glob` tools over a generated
//! 50,000-file tree next to ripgrep (`rg`) on the same queries, with the ratio tool / rg
//! (goal: at most 1.5, judged on the ratio as printed, to two decimals: `1.50x` meets it);
//! then `exec`: p50 and p95 wall time of `true` and `ls -la` through `Sandbox::exec` in
//! bubblewrap (`WorkspaceWrite`) and unconfined (`FullAccess`), and under Landlock + seccomp
//! (the alternative issue 11 weighed), after a check of what each one confines, with the time
//! bubblewrap adds at p50 (goal: at most 20 ms per command).
//!
//! The tree is generated once under `target/bench-tools/tree` (deterministic content,
//! about 50 MB; kept between runs, regenerated when its format version changes): 50,000
//! files under `src/` (mostly `.rs`, a tenth `Cargo.toml`-like `.toml`, a hundredth
//! `.md`), plus a `.gitignore` that ignores `target/` and `*.log` with files there, and a
//! hidden folder, which both sides must skip. Then the example
//! `crates/halo-sandbox/examples/tools_bench/` runs in release mode and prints the
//! figures; its docs say how rg is made comparable and how exec is timed. `rg` comes from
//! Debian's `ripgrep` package and `bwrap` from `bubblewrap`, each installed with apt-get when
//! missing and running as root. Nothing is asserted. The exec section alone, without the tree:
//! `cargo run -q --release -p halo-sandbox --example tools_bench -- --exec`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

/// Bump when the generated tree changes, so an old tree is replaced.
const TREE_VERSION: &str = "1";

/// Files under `src/`: 50 modules × 10 folders × 100 files.
const MODULES: usize = 50;
const FOLDERS: usize = 10;
const FILES: usize = 100;

/// Runs the benchmark.
///
/// # Errors
/// rg or bubblewrap is missing and cannot be installed, the tree cannot be written, or the
/// example fails.
pub fn run() -> anyhow::Result<()> {
    ensure_rg()?;
    // The exec section runs on Linux only, where it needs bubblewrap.
    if cfg!(target_os = "linux") {
        crate::prereqs::ensure_sandbox()?;
    }
    let root = crate::root();
    let dir = crate::interop::target_dir(&root).join("bench-tools");
    let tree = dir.join("tree");
    let stamp = dir.join(format!("tree-v{TREE_VERSION}.complete"));
    if stamp.exists() {
        eprintln!("xtask bench tools: reusing {}", tree.display());
    } else {
        eprintln!(
            "xtask bench tools: generating {} files in {}",
            MODULES * FOLDERS * FILES,
            tree.display()
        );
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        generate(&tree).with_context(|| format!("writing {}", tree.display()))?;
        std::fs::write(&stamp, "")?;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    crate::run_cmd(
        Command::new(cargo)
            .args([
                "run",
                "--quiet",
                "--release",
                "-p",
                "halo-sandbox",
                "--example",
                "tools_bench",
                "--",
            ])
            .arg(&tree)
            .arg("5"),
    )
}

/// Makes sure `rg` is on the PATH: as root with apt-get, installs Debian's `ripgrep`.
fn ensure_rg() -> anyhow::Result<()> {
    let present = || {
        Command::new("rg")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if present() {
        return Ok(());
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let has_apt = Command::new("apt-get").arg("--version").output().is_ok();
    if !(is_root && has_apt) {
        bail!(
            "ripgrep (rg) is needed to compare against.\nOn Debian/Ubuntu: sudo apt-get install \
             ripgrep\nElsewhere: see https://github.com/BurntSushi/ripgrep#installation"
        );
    }
    eprintln!("xtask bench tools: installing ripgrep with apt-get");
    let update = Command::new("apt-get").args(["update", "-qq"]).status()?;
    let install = Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends", "ripgrep"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()?;
    if !update.success() || !install.success() || !present() {
        bail!("`apt-get install ripgrep` failed; install ripgrep yourself");
    }
    Ok(())
}

/// A small deterministic generator (64-bit linear congruential, Knuth's constants).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "parse", "render", "load", "store", "merge", "split", "fetch", "apply", "check", "build",
    "index", "scan", "flush", "count", "shift", "trace",
];

fn generate(tree: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(tree)?;
    std::fs::write(tree.join(".gitignore"), "target/\n*.log\n")?;
    std::fs::write(
        tree.join("Cargo.toml"),
        "[package]\nname = \"bench\"\nedition = \"2024\"\n",
    )?;
    let mut n = 0u64;
    for m in 0..MODULES {
        for f in 0..FOLDERS {
            let folder = tree.join(format!("src/mod_{m:02}/sub_{f}"));
            std::fs::create_dir_all(&folder)?;
            for i in 0..FILES {
                n += 1;
                let (name, text) = file(n, i);
                std::fs::write(folder.join(format!("{name}_{i:02}.{}", ext(i))), text)?;
            }
        }
    }
    // Ignored and hidden files with the same content: both sides must skip them.
    for (folder, name_ext) in [("target/debug", "rs"), ("logs", "log"), (".hidden", "rs")] {
        let folder = tree.join(folder);
        std::fs::create_dir_all(&folder)?;
        for i in 0..200 {
            let (_, text) = file(1_000_000 + i, 0);
            std::fs::write(folder.join(format!("skip_{i:03}.{name_ext}")), text)?;
        }
    }
    Ok(())
}

fn ext(i: usize) -> &'static str {
    match i {
        99 => "md",
        _ if i % 10 == 8 => "toml",
        _ => "rs",
    }
}

/// The file name stem and content of file `n` (its index `i` in its folder picks the kind).
fn file(n: u64, i: usize) -> (&'static str, String) {
    let mut rng = Lcg(n);
    let mut text = String::new();
    match ext(i) {
        "toml" => {
            let _ = write!(
                text,
                "[package]\nname = \"pkg_{n}\"\nversion = \"0.1.{}\"\nedition = \"2021\"\n\n\
                 [dependencies]\nserde = \"1\"\n",
                rng.below(50)
            );
            ("Cargo", text)
        }
        "md" => {
            let _ = write!(text, "# Module {n}\n\nNotes for the generated module.\n");
            ("README", text)
        }
        _ => {
            let _ = writeln!(text, "//! Generated file {n} for cargo xtask bench tools.");
            text.push_str("use std::collections::HashMap;\n\n");
            for _ in 0..6 {
                let word = WORDS[rng.below(WORDS.len() as u64) as usize];
                let k = rng.below(10_000);
                let _ = write!(
                    text,
                    "pub fn {word}_{k}(x: u32) -> u32 {{\n    let table: HashMap<u32, u32> = \
                     HashMap::new();\n    x.wrapping_mul({}) + table.len() as u32\n}}\n\n",
                    rng.below(1000)
                );
            }
            if rng.below(100) == 0 {
                let _ = writeln!(text, "// TODO(bench): revisit file {n}");
            }
            ("file", text)
        }
    }
}
