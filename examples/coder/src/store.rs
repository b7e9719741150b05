//! `--session`: where the conversation is kept — a JSONL file, or a PostgreSQL or Redis URL —
//! and the lease that makes this process the session's one writer while it runs.
//!
//! - `--session FILE`: `halo_stream::journal::JsonlStore`; the file is this process's until
//!   it exits (a second coder gets "session FILE is in use by process PID").
//! - `--session postgres://USER@HOST:PORT/DB[?session=NAME]`: `PostgresStore`;
//! - `--session redis://HOST:PORT[?session=NAME]`: `RedisStore`.
//!
//! A URL's `session` query names the session (`default` when absent); every store's
//! session is leased for [`LEASE_TTL_MS`] and renewed every third of it while the coder
//! runs, so a second coder on the same session is refused ("session … is in use by process
//! PID on HOST"), and one that crashed frees it when its lease runs out.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use halo_core::session::{DEFAULT_SESSION, Lease, SessionError, SessionStore};
use halo_stream::journal::JsonlStore;
use halo_stream::postgres::PostgresStore;
use halo_stream::redis::RedisStore;

/// How long a lease runs without renewal, in ms.
pub const LEASE_TTL_MS: u64 = 15_000;

/// A `--session` value, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A JSONL file.
    File(std::path::PathBuf),
    /// A PostgreSQL database: the URL without `session`, and the session's name.
    Postgres { url: String, session: String },
    /// A Redis server: the URL without `session`, and the session's name.
    Redis { url: String, session: String },
}

impl Target {
    /// Reads a `--session` value: a `postgres://`, `postgresql://`, `redis://` or
    /// `rediss://` URL, else a file path.
    pub fn parse(value: &str) -> Target {
        let lower = value.to_ascii_lowercase();
        let is = |scheme: &str| lower.starts_with(scheme);
        if is("postgres://") || is("postgresql://") {
            let (url, session) = split_session(value);
            Target::Postgres { url, session }
        } else if is("redis://") || is("rediss://") {
            let (url, session) = split_session(value);
            Target::Redis { url, session }
        } else {
            Target::File(value.into())
        }
    }

    /// The session's name in its store.
    pub fn session(&self) -> &str {
        match self {
            Target::File(_) => DEFAULT_SESSION,
            Target::Postgres { session, .. } | Target::Redis { session, .. } => session,
        }
    }
}

/// `url` without its `session` query parameter, and that parameter's value (`default`).
fn split_session(url: &str) -> (String, String) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), DEFAULT_SESSION.to_string());
    };
    let mut session = DEFAULT_SESSION.to_string();
    let rest: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.split_once('=') {
            Some(("session", name)) if !name.is_empty() => {
                session = name.to_string();
                false
            }
            _ => !pair.is_empty(),
        })
        .collect();
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, session)
}

/// The milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Who this process is, as leases name it: `process PID on HOST`.
fn owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty());
    match host {
        Some(host) => format!("process {} on {host}", std::process::id()),
        None => format!("process {}", std::process::id()),
    }
}

/// An open store with this process's lease on the session, renewed in the background.
pub struct Opened {
    pub store: Arc<dyn SessionStore>,
    pub lease: Lease,
    renewer: tokio::task::JoinHandle<()>,
}

/// Opens the store of `target` and leases its session.
///
/// # Errors
/// [`SessionError::InUse`] when another process has the session; the store's errors.
pub async fn open(target: &Target) -> Result<Opened, SessionError> {
    let store: Arc<dyn SessionStore> = match target {
        Target::File(path) => Arc::new(JsonlStore::open(path)?),
        Target::Postgres { url, .. } => Arc::new(PostgresStore::connect(url).await?),
        Target::Redis { url, .. } => Arc::new(RedisStore::connect(url).await?),
    };
    let lease = store
        .acquire(target.session(), &owner(), LEASE_TTL_MS, now_ms())
        .await?;
    let renewer = tokio::spawn({
        let store = Arc::clone(&store);
        let mut lease = lease.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(LEASE_TTL_MS / 3)).await;
                match store.renew(&lease, LEASE_TTL_MS, now_ms()).await {
                    Ok(renewed) => lease = renewed,
                    Err(e) => {
                        // The next append says so too, and writes nothing.
                        tracing::warn!("the session's lease was not renewed: {e}");
                        if matches!(e, SessionError::Fenced { .. }) {
                            return;
                        }
                    }
                }
            }
        }
    });
    Ok(Opened {
        store,
        lease,
        renewer,
    })
}

impl Opened {
    /// Stops renewing and releases the lease, so the next coder needs not wait for it to
    /// run out.
    pub async fn close(self) {
        self.renewer.abort();
        if let Err(e) = self.store.release(&self.lease).await {
            tracing::warn!("could not release the session's lease: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_value_is_a_file_or_a_store_url_with_an_optional_session_name() {
        assert_eq!(
            Target::parse("notes/s.jsonl"),
            Target::File("notes/s.jsonl".into())
        );
        assert_eq!(
            Target::parse("postgres://halo@127.0.0.1:5432/halo"),
            Target::Postgres {
                url: "postgres://halo@127.0.0.1:5432/halo".into(),
                session: "default".into()
            }
        );
        assert_eq!(
            Target::parse("postgresql://h/db?sslmode=disable&session=team-a"),
            Target::Postgres {
                url: "postgresql://h/db?sslmode=disable".into(),
                session: "team-a".into()
            }
        );
        assert_eq!(
            Target::parse("redis://127.0.0.1:6379?session=bob"),
            Target::Redis {
                url: "redis://127.0.0.1:6379".into(),
                session: "bob".into()
            }
        );
        assert_eq!(Target::parse("redis://h:1/2").session(), "default");
    }
}
