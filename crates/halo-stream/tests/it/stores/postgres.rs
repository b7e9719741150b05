//! `PostgresStore` through the conformance suite, on a real PostgreSQL server started for
//! the test (`halo_stream::testing::PostgresServer`): a schema per check, a second pool as
//! the second worker, and rows damaged with plain SQL.

use std::str::FromStr as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use halo_core::async_trait;
use halo_core::conformance::session_store::{self, StoreFixture, StoreHarness};
use halo_core::session::SessionStore;
use halo_stream::postgres::PostgresStore;
use halo_stream::testing::PostgresServer;

struct Postgres {
    url: String,
    schemas: AtomicUsize,
}

struct Fixture {
    url: String,
    schema: String,
    store: PostgresStore,
}

impl Fixture {
    /// Runs `sql` (with `$1` the session) in the fixture's schema.
    async fn sql(&self, sql: &str, session: &str) -> Result<u64, String> {
        let mut config = tokio_postgres::Config::from_str(&self.url).map_err(|e| e.to_string())?;
        config.options(format!("-c search_path={}", self.schema));
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        client
            .execute(sql, &[&session])
            .await
            .map_err(|e| e.to_string())
    }
}

#[async_trait]
impl StoreHarness for Postgres {
    fn name(&self) -> String {
        "PostgresStore".into()
    }
    async fn fixture(&self) -> Result<Box<dyn StoreFixture>, String> {
        let schema = format!("check_{}", self.schemas.fetch_add(1, Ordering::SeqCst));
        let store = PostgresStore::connect_in(&self.url, &schema)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Box::new(Fixture {
            url: self.url.clone(),
            schema,
            store,
        }))
    }
}

#[async_trait]
impl StoreFixture for Fixture {
    fn store(&self) -> Arc<dyn SessionStore> {
        Arc::new(self.store.clone())
    }
    // Another pool on the same database: a second worker process.
    async fn second(&self) -> Arc<dyn SessionStore> {
        Arc::new(
            PostgresStore::connect_in(&self.url, &self.schema)
                .await
                .expect("a second pool"),
        )
    }
    async fn damage(&mut self, session: &str, index: u64) -> Result<bool, String> {
        let n = self
            .sql(
                &format!(
                    "UPDATE halo_journal SET event = '{{\"type\":\"not_an_event\"}}' \
                     WHERE session = $1 AND seq = {index}"
                ),
                session,
            )
            .await?;
        Ok(n == 1)
    }
    async fn newer_format(&mut self, session: &str, version: u32) -> Result<bool, String> {
        for table in ["halo_journal", "halo_session"] {
            self.sql(
                &format!("UPDATE {table} SET format = {version} WHERE session = $1"),
                session,
            )
            .await?;
        }
        Ok(true)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_passes_the_conformance_suite() {
    let Some(server) = PostgresServer::for_test("postgres_store_passes_the_conformance_suite")
    else {
        return;
    };
    let report = session_store::run(&Postgres {
        url: server.url(),
        schemas: AtomicUsize::new(0),
    })
    .await;
    report.assert_passed();
    // Rows are written whole or not at all: no torn entries.
    let skipped: Vec<&str> = report.skipped().map(|c| c.name).collect();
    assert_eq!(skipped, ["a_torn_last_entry_is_skipped"], "{report}");
}
