//! [`PostgresStore`] (feature `postgres`): sessions in PostgreSQL, through `tokio-postgres`
//! and a `deadpool-postgres` connection pool.
//!
//! Three tables, created if missing when the store connects (in the connection's schema, or
//! the one given to [`PostgresStore::connect_in`]):
//!
//! ```sql
//! CREATE TABLE halo_journal (           -- append-only: one row per entry
//!   session text, seq bigint, format integer, step boolean, at_ms bigint, event json,
//!   PRIMARY KEY (session, seq));
//! CREATE TABLE halo_session (           -- one row per session, for list and the checks
//!   session text PRIMARY KEY, entries bigint, steps bigint, updated_ms bigint, format integer);
//! CREATE TABLE halo_session_lease (     -- one row per session ever leased
//!   session text PRIMARY KEY, owner text, fence bigint, expires_at_ms bigint);
//! ```
//!
//! An append is one transaction: the fence check (`SELECT … FOR SHARE` of the lease row, so
//! no acquire commits between the check and the insert), the expected-sequence check
//! against `halo_session`, then one `INSERT` of every entry at its sequence number. The
//! primary key is the concurrency check: of two writers that both saw the same length, the
//! second one's insert hits the first one's key and fails (`unique_violation`), which the
//! store answers with [`SessionError::Conflict`]. A lease is claimed with one conditional
//! upsert that increments the fence token. Events are stored as `json`, which keeps their
//! text as written. Commits are durable as the server's `synchronous_commit` makes them
//! (on by default).
//!
//! Connections are plain TCP or Unix sockets (no TLS in this version).

use std::str::FromStr as _;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use halo_core::async_trait;
use halo_core::session::{
    Append, JOURNAL_FORMAT_VERSION, JournalEvent, Lease, SessionError, SessionInfo, SessionStore,
};
use tokio_postgres::error::SqlState;
use tokio_postgres::{Config, NoTls};

/// The tables, made once per database under an advisory lock (two processes starting at
/// once would otherwise race on `CREATE TABLE IF NOT EXISTS`).
const SCHEMA: &str = "
SELECT pg_advisory_xact_lock(7523094288207667809);
CREATE TABLE IF NOT EXISTS halo_journal (
  session text NOT NULL, seq bigint NOT NULL, format integer NOT NULL, step boolean NOT NULL,
  at_ms bigint NOT NULL, event json NOT NULL, PRIMARY KEY (session, seq));
CREATE TABLE IF NOT EXISTS halo_session (
  session text PRIMARY KEY, entries bigint NOT NULL, steps bigint NOT NULL,
  updated_ms bigint NOT NULL, format integer NOT NULL);
CREATE TABLE IF NOT EXISTS halo_session_lease (
  session text PRIMARY KEY, owner text, fence bigint NOT NULL, expires_at_ms bigint NOT NULL);
";

/// Sessions in PostgreSQL (see the [module docs](self)). Clones share the pool.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    location: String,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// A time or count as the `bigint` it is stored as.
fn big(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`, or any
    /// connection string `tokio-postgres` reads) and creates the tables if they are missing.
    ///
    /// # Errors
    /// [`SessionError::Io`] when the URL is invalid or the database cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, SessionError> {
        Self::open(url, None).await
    }

    /// As [`connect`](Self::connect), with the tables in `schema` (created if missing).
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub async fn connect_in(url: &str, schema: &str) -> Result<Self, SessionError> {
        Self::open(url, Some(schema)).await
    }

    async fn open(url: &str, schema: Option<&str>) -> Result<Self, SessionError> {
        let mut config = Config::from_str(url).map_err(|e| SessionError::Io {
            location: "postgres".into(),
            message: format!("not a PostgreSQL connection URL ({e}): {}", redact(url)),
        })?;
        let location = location(&config);
        if let Some(schema) = schema {
            config.options(format!("-c search_path={}", ident(schema)));
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(16)
            .build()
            .map_err(|e| SessionError::Io {
                location: location.clone(),
                message: format!("cannot make the connection pool: {e}"),
            })?;
        let store = PostgresStore { pool, location };
        let mut client = store.client().await?;
        if let Some(schema) = schema {
            client
                .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", ident(schema)))
                .await
                .or_else(|e| {
                    // Two processes creating it at once: the loser's error is harmless.
                    if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                        Ok(())
                    } else {
                        Err(store.err("cannot create the schema", &e))
                    }
                })?;
        }
        let tx = client
            .transaction()
            .await
            .map_err(|e| store.err("cannot begin", &e))?;
        tx.batch_execute(SCHEMA)
            .await
            .map_err(|e| store.err("cannot create the tables", &e))?;
        tx.commit()
            .await
            .map_err(|e| store.err("cannot create the tables", &e))?;
        Ok(store)
    }

    /// The database, as errors name it: `postgres://USER@HOST:PORT/DB` (no password).
    pub fn location(&self) -> &str {
        &self.location
    }

    fn err(&self, what: &str, e: &tokio_postgres::Error) -> SessionError {
        let detail = match e.as_db_error() {
            Some(db) => format!("{}: {}", db.severity(), db.message()),
            None => e.to_string(),
        };
        SessionError::Io {
            location: self.location.clone(),
            message: format!("{what}: {detail}"),
        }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, SessionError> {
        self.pool.get().await.map_err(|e| SessionError::Io {
            location: self.location.clone(),
            message: format!("cannot connect: {e}"),
        })
    }

    /// The session's length and format, as `halo_session` holds them.
    async fn head(
        &self,
        client: &impl deadpool_postgres::GenericClient,
        session: &str,
    ) -> Result<(u64, u32), SessionError> {
        let row = client
            .query_opt(
                "SELECT entries, format FROM halo_session WHERE session = $1",
                &[&session],
            )
            .await
            .map_err(|e| self.err("cannot read the session", &e))?;
        Ok(row.map_or((0, 0), |r| {
            (
                u64::try_from(r.get::<_, i64>(0)).unwrap_or(0),
                u32::try_from(r.get::<_, i32>(1)).unwrap_or(0),
            )
        }))
    }

    /// The session's lease holder and fence.
    async fn holder(
        &self,
        client: &impl deadpool_postgres::GenericClient,
        session: &str,
        lock: bool,
    ) -> Result<(Option<String>, u64, u64), SessionError> {
        let sql = if lock {
            "SELECT owner, fence, expires_at_ms FROM halo_session_lease WHERE session = $1 FOR SHARE"
        } else {
            "SELECT owner, fence, expires_at_ms FROM halo_session_lease WHERE session = $1"
        };
        let row = client
            .query_opt(sql, &[&session])
            .await
            .map_err(|e| self.err("cannot read the lease", &e))?;
        Ok(row.map_or((None, 0, 0), |r| {
            (
                r.get(0),
                u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
                u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
            )
        }))
    }

    fn fenced(
        &self,
        session: &str,
        fence: u64,
        holder: Option<String>,
        current: u64,
    ) -> SessionError {
        SessionError::Fenced {
            location: self.location.clone(),
            session: session.to_string(),
            fence,
            holder,
            current,
        }
    }
}

#[async_trait]
impl SessionStore for PostgresStore {
    async fn append(&self, append: Append<'_>) -> Result<u64, SessionError> {
        let mut seqs = Vec::with_capacity(append.events.len());
        let mut steps = Vec::with_capacity(append.events.len());
        let mut texts = Vec::with_capacity(append.events.len());
        for (i, event) in append.events.iter().enumerate() {
            seqs.push(big(append.expected + i as u64));
            steps.push(matches!(event, JournalEvent::Step { .. }));
            texts.push(serde_json::to_string(event).map_err(|e| SessionError::Io {
                location: self.location.clone(),
                message: format!("cannot serialize a journal event: {e}"),
            })?);
        }
        let session = append.session;
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| self.err("cannot begin", &e))?;
        if let Some(fence) = append.fence {
            let (holder, current, _) = self.holder(&tx, session, true).await?;
            if holder.is_none() || current != fence {
                return Err(self.fenced(session, fence, holder, current));
            }
        }
        let (found, format) = self.head(&tx, session).await?;
        if format > JOURNAL_FORMAT_VERSION {
            return Err(SessionError::NewerFormat {
                location: self.location.clone(),
                found: format,
                supported: JOURNAL_FORMAT_VERSION,
            });
        }
        let conflict = |found| SessionError::Conflict {
            location: self.location.clone(),
            session: session.to_string(),
            expected: append.expected,
            found,
        };
        if found != append.expected {
            return Err(conflict(found));
        }
        if append.events.is_empty() {
            return Ok(found);
        }
        let format = i32::try_from(JOURNAL_FORMAT_VERSION).unwrap_or(i32::MAX);
        let inserted = tx
            .execute(
                "INSERT INTO halo_journal (session, seq, format, step, at_ms, event) \
                 SELECT $1, s, $2, st, $3, e::json FROM unnest($4::bigint[], $5::bool[], $6::text[]) AS t(s, st, e)",
                &[&session, &format, &big(append.at_ms), &seqs, &steps, &texts],
            )
            .await;
        if let Err(e) = inserted {
            if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                // Another writer committed entries at these numbers first.
                drop(tx);
                let (found, _) = self.head(&client, session).await?;
                return Err(conflict(found));
            }
            return Err(self.err("cannot append", &e));
        }
        let n = append.events.len() as u64;
        tx.execute(
            "INSERT INTO halo_session AS s (session, entries, steps, updated_ms, format) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session) DO UPDATE SET \
             entries = s.entries + EXCLUDED.entries, steps = s.steps + EXCLUDED.steps, \
             updated_ms = GREATEST(s.updated_ms, EXCLUDED.updated_ms), \
             format = GREATEST(s.format, EXCLUDED.format)",
            &[
                &session,
                &big(n),
                &big(append.steps()),
                &big(append.at_ms),
                &format,
            ],
        )
        .await
        .map_err(|e| self.err("cannot append", &e))?;
        tx.commit()
            .await
            .map_err(|e| self.err("cannot commit the append", &e))?;
        Ok(found + n)
    }

    async fn load(&self, session: &str) -> Result<Vec<JournalEvent>, SessionError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT seq, format, event::text FROM halo_journal WHERE session = $1 ORDER BY seq",
                &[&session],
            )
            .await
            .map_err(|e| self.err("cannot load the session", &e))?;
        let mut events = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let seq: i64 = row.get(0);
            let format = u32::try_from(row.get::<_, i32>(1)).unwrap_or(0);
            let corrupt = |message: String| SessionError::Corrupt {
                location: self.location.clone(),
                entry: i + 1,
                message: format!("session {session:?}, entry {seq}: {message}"),
            };
            if format > JOURNAL_FORMAT_VERSION {
                return Err(SessionError::NewerFormat {
                    location: self.location.clone(),
                    found: format,
                    supported: JOURNAL_FORMAT_VERSION,
                });
            }
            if seq != i as i64 {
                return Err(corrupt(format!(
                    "the entry numbered {seq} follows {i} entries: rows are missing"
                )));
            }
            let text: &str = row.get(2);
            events.push(serde_json::from_str(text).map_err(|e| {
                corrupt(format!(
                    "not a journal event this version reads ({e}); fix or delete the row, or open the session with a newer Halo"
                ))
            })?);
        }
        Ok(events)
    }

    async fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT session, updated_ms, steps, entries FROM halo_session WHERE entries > 0",
                &[],
            )
            .await
            .map_err(|e| self.err("cannot list the sessions", &e))?;
        Ok(rows
            .iter()
            .map(|r| SessionInfo {
                id: r.get(0),
                updated_ms: u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
                steps: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
                entries: u64::try_from(r.get::<_, i64>(3)).unwrap_or(0),
            })
            .collect())
    }

    async fn delete(&self, session: &str) -> Result<(), SessionError> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| self.err("cannot begin", &e))?;
        for sql in [
            "DELETE FROM halo_session WHERE session = $1",
            "DELETE FROM halo_journal WHERE session = $1",
        ] {
            tx.execute(sql, &[&session])
                .await
                .map_err(|e| self.err("cannot delete the session", &e))?;
        }
        tx.commit()
            .await
            .map_err(|e| self.err("cannot delete the session", &e))
    }

    async fn acquire(
        &self,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Lease, SessionError> {
        let client = self.client().await?;
        let expires_at_ms = now_ms.saturating_add(ttl_ms);
        // A lease released or expired between the claim and the read of its holder: claim
        // again.
        for _ in 0..8 {
            let claimed = client
                .query_opt(
                    "INSERT INTO halo_session_lease AS l (session, owner, fence, expires_at_ms) \
                     VALUES ($1, $2, 1, $3) ON CONFLICT (session) DO UPDATE SET \
                     owner = EXCLUDED.owner, fence = l.fence + 1, expires_at_ms = EXCLUDED.expires_at_ms \
                     WHERE l.owner IS NULL OR l.owner = EXCLUDED.owner OR l.expires_at_ms <= $4 \
                     RETURNING fence",
                    &[&session, &owner, &big(expires_at_ms), &big(now_ms)],
                )
                .await
                .map_err(|e| self.err("cannot acquire the lease", &e))?;
            if let Some(row) = claimed {
                return Ok(Lease {
                    session: session.to_string(),
                    owner: owner.to_string(),
                    fence: u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
                    expires_at_ms,
                });
            }
            let (holder, _, expires) = self.holder(&client, session, false).await?;
            if let Some(holder) = holder
                && expires > now_ms
            {
                return Err(SessionError::InUse {
                    location: self.location.clone(),
                    session: session.to_string(),
                    holder,
                    expires_at_ms: Some(expires),
                });
            }
        }
        Err(SessionError::Io {
            location: self.location.clone(),
            message: format!(
                "cannot acquire the lease of session {session:?}: it changed hands eight times while trying"
            ),
        })
    }

    async fn renew(&self, lease: &Lease, ttl_ms: u64, now_ms: u64) -> Result<Lease, SessionError> {
        let client = self.client().await?;
        let expires_at_ms = now_ms.saturating_add(ttl_ms);
        let renewed = client
            .execute(
                "UPDATE halo_session_lease SET expires_at_ms = $3 \
                 WHERE session = $1 AND fence = $2 AND owner IS NOT NULL",
                &[&lease.session, &big(lease.fence), &big(expires_at_ms)],
            )
            .await
            .map_err(|e| self.err("cannot renew the lease", &e))?;
        if renewed == 0 {
            let (holder, current, _) = self.holder(&client, &lease.session, false).await?;
            return Err(self.fenced(&lease.session, lease.fence, holder, current));
        }
        Ok(Lease {
            expires_at_ms,
            ..lease.clone()
        })
    }

    async fn release(&self, lease: &Lease) -> Result<(), SessionError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE halo_session_lease SET owner = NULL, expires_at_ms = 0 \
                 WHERE session = $1 AND fence = $2",
                &[&lease.session, &big(lease.fence)],
            )
            .await
            .map_err(|e| self.err("cannot release the lease", &e))?;
        Ok(())
    }
}

/// `postgres://USER@HOST:PORT/DB` from a connection's settings (never its password).
fn location(config: &Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let db = config.get_dbname().unwrap_or_default();
    format!("postgres://{user}{host}:{port}/{db}")
}

/// `url` with any password replaced by `***`.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// `name` as a quoted SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_database_without_its_password() {
        let config = Config::from_str("postgres://halo:s3cret@127.0.0.1:5433/sessions").unwrap();
        assert_eq!(location(&config), "postgres://halo@127.0.0.1:5433/sessions");
        assert_eq!(
            redact("postgres://halo:s3cret@db/x?sslmode=disable"),
            "postgres://halo:***@db/x?sslmode=disable"
        );
        assert_eq!(redact("postgres://db/x"), "postgres://db/x");
        assert_eq!(ident("we\"ird"), "\"we\"\"ird\"");
    }
}
