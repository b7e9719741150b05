//! `cargo xtask interop`, the gateway's part: `examples/web-chat/web/test/gateway.test.mjs`
//! in headless Chromium against the web-chat binary the browser step built — a wrong password
//! refused and another user's chat 404 by URL, a refresh in the middle of an answer resumed
//! without a word twice, an approval card across a refresh (approve runs the command, deny
//! is read by the model), steering mid-run, a killed and restarted server keeping the
//! browser logged in and the chat's history.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::run_cmd;

/// Runs the gateway's browser tests; `web` is the page's npm project, built and installed.
pub fn browser(web: &Path, web_chat_bin: &Path, chromium: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    run_cmd(
        Command::new("node")
            .arg("--test")
            .arg(web.join("test/gateway.test.mjs"))
            .env("WEB_CHAT_BIN", web_chat_bin)
            .env("CHROMIUM", chromium),
    )?;
    eprintln!(
        "xtask interop: the gateway passed in headless Chromium ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
