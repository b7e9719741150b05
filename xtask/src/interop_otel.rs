//! `cargo xtask interop`, the OpenTelemetry part: a run's spans as a real OTLP/HTTP receiver
//! decodes them.
//!
//! 1. A virtualenv under the target dir (`otel-interop/venv`) with PyPI
//!    `opentelemetry-proto` pinned (`examples/otel/tests/receiver/requirements.txt`).
//! 2. The receiver (`examples/otel/tests/receiver/receiver.py`) on a free loopback port: it
//!    decodes each `POST /v1/traces` as an `ExportTraceServiceRequest` with the
//!    OpenTelemetry project's generated classes and writes the spans, with the types their
//!    attribute values arrived as, to `otel-interop/spans.jsonl`.
//! 3. The `otel` example (built by `interop::peers`) with `OTEL_EXPORTER_OTLP_ENDPOINT`
//!    naming the receiver: one agent run against a loopback fake of DeepSeek's API, exported
//!    by opentelemetry-otlp.
//! 4. The file's path is returned: the otel example's `received` tests run with
//!    `HALO_OTLP_SPANS` naming it and check the span names, kinds, parent/child links and
//!    integer token counts, by the same expectations as the in-memory exporter's test; they
//!    fail when the variable is set and the file holds no run.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::interop::{python_venv, target_dir};
use crate::run_cmd;

/// The receiver's folder, relative to the workspace root.
const RECEIVER_DIR: &str = "examples/otel/tests/receiver";

/// Kills the receiver when the check ends, however it ends.
struct Receiver(Child);

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(root: &Path) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    let work = target_dir(root).join("otel-interop");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let receiver_dir = root.join(RECEIVER_DIR);
    let python = python_venv(&work.join("venv"), &receiver_dir.join("requirements.txt"))?;

    let spans = work.join("spans.jsonl");
    let mut child = Command::new(&python)
        .arg(receiver_dir.join("receiver.py"))
        .arg("--out")
        .arg(&spans)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", python.display()))?;
    let stdout = child.stdout.take();
    let _receiver = Receiver(child);
    let mut line = String::new();
    if let Some(stdout) = stdout {
        BufReader::new(stdout).read_line(&mut line)?;
    }
    let Some(url) = line.trim().strip_prefix("listening on ") else {
        bail!("the OTLP receiver did not start (it printed {line:?})");
    };
    eprintln!("xtask interop: OTLP/HTTP receiver at {url}");

    run_cmd(
        Command::new(target_dir(root).join("debug/otel"))
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", url)
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL"),
    )?;
    eprintln!(
        "xtask interop: the OTLP receiver decoded the run's spans as the GenAI conventions \
         name them ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(spans)
}
