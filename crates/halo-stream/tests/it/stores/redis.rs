//! `RedisStore` through the conformance suite, on a real Redis server started for the test
//! (`halo_stream::testing::RedisServer`, append-only file on): a key prefix per check, a
//! second connection as the second worker, and entries damaged with plain commands.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use halo_core::async_trait;
use halo_core::conformance::session_store::{self, StoreFixture, StoreHarness};
use halo_core::session::SessionStore;
use halo_stream::redis::RedisStore;
use halo_stream::testing::RedisServer;

struct Redis {
    url: String,
    prefixes: AtomicUsize,
}

struct Fixture {
    url: String,
    prefix: String,
    store: RedisStore,
}

impl Fixture {
    async fn command(&self, cmd: &mut redis::Cmd) -> Result<(), String> {
        let client = redis::Client::open(self.url.as_str()).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        cmd.query_async::<()>(&mut conn)
            .await
            .map_err(|e| e.to_string())
    }
}

#[async_trait]
impl StoreHarness for Redis {
    fn name(&self) -> String {
        "RedisStore".into()
    }
    async fn fixture(&self) -> Result<Box<dyn StoreFixture>, String> {
        let prefix = format!("check{}", self.prefixes.fetch_add(1, Ordering::SeqCst));
        let store = RedisStore::connect_with_prefix(&self.url, &prefix)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Box::new(Fixture {
            url: self.url.clone(),
            prefix,
            store,
        }))
    }
}

#[async_trait]
impl StoreFixture for Fixture {
    fn store(&self) -> Arc<dyn SessionStore> {
        Arc::new(self.store.clone())
    }
    // Another connection: a second worker process.
    async fn second(&self) -> Arc<dyn SessionStore> {
        Arc::new(
            RedisStore::connect_with_prefix(&self.url, &self.prefix)
                .await
                .expect("a second connection"),
        )
    }
    async fn damage(&mut self, session: &str, index: u64) -> Result<bool, String> {
        let key = format!("{}:session:{session}:journal", self.prefix);
        self.command(
            redis::cmd("LSET")
                .arg(key)
                .arg(index)
                .arg("{\"type\": damaged"),
        )
        .await?;
        Ok(true)
    }
    async fn newer_format(&mut self, session: &str, version: u32) -> Result<bool, String> {
        let key = format!("{}:session:{session}:meta", self.prefix);
        self.command(redis::cmd("HSET").arg(key).arg("format").arg(version))
            .await?;
        Ok(true)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_passes_the_conformance_suite() {
    let Some(server) = RedisServer::for_test("redis_store_passes_the_conformance_suite") else {
        return;
    };
    let report = session_store::run(&Redis {
        url: server.url(),
        prefixes: AtomicUsize::new(0),
    })
    .await;
    report.assert_passed();
    // A script's writes are whole or none: no torn entries.
    let skipped: Vec<&str> = report.skipped().map(|c| c.name).collect();
    assert_eq!(skipped, ["a_torn_last_entry_is_skipped"], "{report}");
    // The server really keeps an append-only file.
    assert!(
        std::fs::read_dir(server.dir())
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("appendonly")),
        "no append-only file in {}",
        server.dir().display()
    );
}
