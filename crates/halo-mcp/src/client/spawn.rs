//! Starting a stdio server: the child process (only `PATH` plus the configured environment;
//! its own process group, killed when dropped), its stderr drained into a log and
//! `tracing` (never the terminal), and its stdout watched for stray non-JSON lines before
//! the handshake.
//!
//! rmcp's `TokioChildProcess` hands its stdout straight to the JSON-RPC codec, which skips
//! lines that are not JSON (MCP basic/transports, stdio: stdout carries protocol messages
//! only). So the process is spawned here with process-wrap (what `TokioChildProcess` uses)
//! and its stdout copied to the transport by a task that remembers such lines: when the
//! handshake then fails, the error quotes them and names the server.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{ChildStdin, ChildStdout};

use crate::config::StdioConfig;

/// Lines of stderr kept for error messages.
const STDERR_TAIL: usize = 20;
/// Stray stdout lines kept, and the characters kept of each.
const STRAY_LINES: usize = 5;
const STRAY_CHARS: usize = 200;

/// A spawned stdio server.
pub(crate) struct Child {
    /// The process; dropping it kills the process group.
    pub(crate) process: Box<dyn ChildWrapper>,
    /// The transport's end of the child's stdout (copied by a task that watches it).
    pub(crate) stdout: tokio::io::DuplexStream,
    pub(crate) stdin: ChildStdin,
    /// The last lines of stderr.
    pub(crate) stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Non-JSON lines seen on stdout before the first JSON one.
    pub(crate) stray: Arc<Mutex<Vec<String>>>,
    /// The tasks reading stdout and stderr: both end when the process closes them.
    pub(crate) readers: Vec<tokio::task::JoinHandle<()>>,
}

/// Spawns `config`'s command: environment cleared but for `PATH` (from this process,
/// unless the config sets it) and `config.env`; `cwd` as configured.
pub(crate) fn spawn(
    server: &str,
    config: &StdioConfig,
    log_dir: Option<&PathBuf>,
) -> std::io::Result<Child> {
    let mut command = tokio::process::Command::new(&config.command);
    command
        .args(&config.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command.envs(&config.env);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let mut process = wrapped.spawn()?;
    let stdin = process
        .stdin()
        .take()
        .ok_or_else(|| std::io::Error::other("the child's stdin was not piped"))?;
    let stdout = process
        .stdout()
        .take()
        .ok_or_else(|| std::io::Error::other("the child's stdout was not piped"))?;
    let stderr = process.stderr().take();
    let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
    let mut readers = Vec::new();
    if let Some(stderr) = stderr {
        readers.push(tokio::spawn(drain_stderr(
            server.to_string(),
            stderr,
            log_dir.map(|d| d.join(format!("{}.log", crate::name::sanitize(server)))),
            stderr_tail.clone(),
        )));
    }
    let stray = Arc::new(Mutex::new(Vec::new()));
    let (transport_end, pump_end) = tokio::io::duplex(64 * 1024);
    readers.push(tokio::spawn(pump(
        stdout,
        pump_end,
        StrayLines::new(stray.clone()),
    )));
    Ok(Child {
        process,
        stdout: transport_end,
        stdin,
        stderr_tail,
        stray,
        readers,
    })
}

/// Reads the server's stderr to its end: every line to `tracing` (debug, target
/// `halo_mcp::stderr`) and, when given, appended to the log file; the last lines kept.
async fn drain_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    log: Option<PathBuf>,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut file = match &log {
        Some(path) => {
            if let Some(parent) = path.parent() {
                let _ = tokio::fs::create_dir_all(parent).await;
            }
            match tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .await
            {
                Ok(f) => Some(f),
                Err(e) => {
                    tracing::warn!(%server, path = %path.display(), error = %e, "cannot open the mcp server's stderr log");
                    None
                }
            }
        }
        None => None,
    };
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "halo_mcp::stderr", %server, "{line}");
        if let Some(f) = file.as_mut() {
            let _ = f.write_all(format!("{line}\n").as_bytes()).await;
        }
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == STDERR_TAIL {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    }
    if let Some(f) = file.as_mut() {
        let _ = f.flush().await;
    }
}

/// Records the non-JSON lines that come before the first line starting with `{`.
pub(crate) struct StrayLines {
    stray: Arc<Mutex<Vec<String>>>,
    line: Vec<u8>,
    /// Set once a JSON line was seen: from then on nothing is recorded.
    done: bool,
}

impl StrayLines {
    fn new(stray: Arc<Mutex<Vec<String>>>) -> Self {
        StrayLines {
            stray,
            line: Vec::new(),
            done: false,
        }
    }

    fn observe(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.done {
                return;
            }
            if b != b'\n' {
                if self.line.len() < STRAY_CHARS * 4 {
                    self.line.push(b);
                }
                continue;
            }
            self.end_line();
        }
    }

    fn end_line(&mut self) {
        let text = String::from_utf8_lossy(&self.line).trim().to_string();
        self.line.clear();
        if text.starts_with('{') {
            self.done = true;
        } else if !text.is_empty()
            && let Ok(mut stray) = self.stray.lock()
            && stray.len() < STRAY_LINES
        {
            stray.push(text.chars().take(STRAY_CHARS).collect());
        }
    }
}

/// Copies the child's stdout to `to` (the transport's end), watching for stray lines; goes
/// on reading to the end when the transport is gone, so a failed handshake still sees all
/// of what the server wrote.
async fn pump(mut from: ChildStdout, mut to: tokio::io::DuplexStream, mut watch: StrayLines) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut open = true;
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !watch.done {
            watch.observe(&buf[..n]);
        }
        if open && to.write_all(&buf[..n]).await.is_err() {
            open = false;
        }
    }
    if !watch.done && !watch.line.is_empty() {
        watch.end_line();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stray_lines_before_the_first_json_line_are_kept() {
        let stray = Arc::new(Mutex::new(Vec::new()));
        let mut watch = StrayLines::new(stray.clone());
        watch.observe(b"Starting server...\n\nlisten");
        watch.observe(b"ing on stdio\n{\"jsonrpc\":\"2.0\"}\nafter\n");
        assert!(watch.done);
        assert_eq!(
            *stray.lock().unwrap(),
            ["Starting server...", "listening on stdio"]
        );
    }
}
