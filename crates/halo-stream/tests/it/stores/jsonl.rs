//! `JsonlStore` through the conformance suite: a fixture per check around a new file in a
//! temporary folder, which it damages by editing the file with the store closed.

use std::path::PathBuf;
use std::sync::Arc;

use halo_core::async_trait;
use halo_core::conformance::session_store::{self, StoreFixture, StoreHarness};
use halo_core::session::SessionStore;
use halo_stream::journal::JsonlStore;
use serde_json::Value;

struct Jsonl;

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    store: Option<JsonlStore>,
}

impl Fixture {
    /// Closes the store, lets `edit` change the file's lines, and opens it again.
    fn edit(&mut self, edit: impl FnOnce(&mut Vec<String>)) -> Result<bool, String> {
        drop(self.store.take());
        let text = std::fs::read_to_string(&self.path).map_err(|e| e.to_string())?;
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        edit(&mut lines);
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(&self.path, text).map_err(|e| e.to_string())?;
        self.store = Some(JsonlStore::open(&self.path).map_err(|e| e.to_string())?);
        Ok(true)
    }
}

/// The index of the line holding entry `seq` of `session`.
fn line_of(lines: &[String], session: &str, seq: u64) -> usize {
    lines
        .iter()
        .position(|l| {
            serde_json::from_str::<Value>(l)
                .is_ok_and(|v| v["session"] == session && v["seq"] == seq)
        })
        .expect("the entry's line")
}

#[async_trait]
impl StoreHarness for Jsonl {
    fn name(&self) -> String {
        "JsonlStore".into()
    }
    async fn fixture(&self) -> Result<Box<dyn StoreFixture>, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = dir.path().join("sessions.jsonl");
        let store = JsonlStore::open(&path).map_err(|e| e.to_string())?;
        Ok(Box::new(Fixture {
            _dir: dir,
            path,
            store: Some(store),
        }))
    }
}

#[async_trait]
impl StoreFixture for Fixture {
    fn store(&self) -> Arc<dyn SessionStore> {
        Arc::new(self.store.clone().expect("the store is open"))
    }
    // One process owns the file: a second worker is another handle of this store.
    async fn second(&self) -> Arc<dyn SessionStore> {
        self.store()
    }
    async fn tear(&mut self, session: &str) -> Result<bool, String> {
        drop(self.store.take());
        let mut bytes = std::fs::read(&self.path).map_err(|e| e.to_string())?;
        let body = &bytes[..bytes.len() - 1];
        let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let last = String::from_utf8_lossy(&body[start..]).into_owned();
        assert!(
            last.contains(&format!("\"session\":\"{session}\"")),
            "{last}"
        );
        // Half the last line, and no newline after it.
        bytes.truncate(start + last.len() / 2);
        std::fs::write(&self.path, &bytes).map_err(|e| e.to_string())?;
        self.store = Some(JsonlStore::open(&self.path).map_err(|e| e.to_string())?);
        Ok(true)
    }
    async fn damage(&mut self, session: &str, index: u64) -> Result<bool, String> {
        let session = session.to_string();
        self.edit(move |lines| {
            let at = line_of(lines, &session, index);
            lines[at] = "{\"session\": this line was damaged".to_string();
        })
    }
    async fn newer_format(&mut self, _session: &str, version: u32) -> Result<bool, String> {
        self.edit(move |lines| {
            lines[0] = format!("{{\"type\":\"halo_journal\",\"version\":{version}}}");
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jsonl_store_passes_the_conformance_suite() {
    let report = session_store::run(&Jsonl).await;
    report.assert_passed();
    assert_eq!(report.skipped().count(), 0, "{report}");
}
