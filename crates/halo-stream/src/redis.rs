//! [`RedisStore`] (feature `redis`): sessions in Redis, through the `redis` crate on tokio
//! (a `ConnectionManager`, which reconnects).
//!
//! Keys, under a prefix (`halo` unless [`RedisStore::connect_with_prefix`] says otherwise):
//! - `PREFIX:session:ID:journal` — the session's entries, an append-only list of the events'
//!   JSON (the list index is the sequence number);
//! - `PREFIX:session:ID:meta` — a hash: `steps`, `updated_ms`, `format`;
//! - `PREFIX:session:ID:lease` — a hash: `owner`, `fence`, `expires_at_ms`;
//! - `PREFIX:sessions` — the set of session ids.
//!
//! An append is one Lua script, which Redis runs atomically: the fence check, the format
//! check, `LLEN` against the expected sequence number, then `RPUSH` of the entries. Acquire,
//! renew and release are scripts too. Durability is the server's: run it with the
//! append-only file on and `appendfsync always` (with `everysec`, a crash of the server can
//! lose the last second of appends); the store warns at connect when it can see that the
//! append-only file is off. One Redis server (with replicas), not Redis Cluster: a script
//! touches the session's keys and the set of sessions.

use halo_core::async_trait;
use halo_core::session::{
    Append, JOURNAL_FORMAT_VERSION, JournalEvent, Lease, SessionError, SessionInfo, SessionStore,
};
use redis::aio::ConnectionManager;
use redis::{Script, Value};

/// Appends at the expected sequence number, under the fence if one is given.
/// KEYS: journal, meta, lease, sessions. ARGV: id, expected, fence or '', format, at_ms,
/// steps, events...
const APPEND: &str = r"
if ARGV[3] ~= '' then
  local lease = redis.call('HMGET', KEYS[3], 'owner', 'fence')
  if (not lease[1]) or lease[2] ~= ARGV[3] then
    return {'fenced', lease[1] or '', lease[2] or '0'}
  end
end
local format = tonumber(redis.call('HGET', KEYS[2], 'format') or '0')
if format > tonumber(ARGV[4]) then return {'newer', tostring(format)} end
local len = redis.call('LLEN', KEYS[1])
if len ~= tonumber(ARGV[2]) then return {'conflict', tostring(len)} end
if #ARGV == 6 then return {'ok', tostring(len)} end
for i = 7, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HINCRBY', KEYS[2], 'steps', ARGV[6])
local updated = redis.call('HGET', KEYS[2], 'updated_ms')
if (not updated) or tonumber(ARGV[5]) > tonumber(updated) then
  redis.call('HSET', KEYS[2], 'updated_ms', ARGV[5])
end
if format < tonumber(ARGV[4]) then redis.call('HSET', KEYS[2], 'format', ARGV[4]) end
redis.call('SADD', KEYS[4], ARGV[1])
return {'ok', tostring(redis.call('LLEN', KEYS[1]))}
";

/// KEYS: lease. ARGV: owner, expires_at_ms, now_ms.
const ACQUIRE: &str = r"
local lease = redis.call('HMGET', KEYS[1], 'owner', 'expires_at_ms')
if lease[1] and lease[1] ~= ARGV[1] and tonumber(lease[2] or '0') > tonumber(ARGV[3]) then
  return {'in_use', lease[1], lease[2]}
end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'expires_at_ms', ARGV[2])
return {'ok', tostring(fence)}
";

/// KEYS: lease. ARGV: fence, expires_at_ms.
const RENEW: &str = r"
local lease = redis.call('HMGET', KEYS[1], 'owner', 'fence')
if (not lease[1]) or lease[2] ~= ARGV[1] then
  return {'fenced', lease[1] or '', lease[2] or '0'}
end
redis.call('HSET', KEYS[1], 'expires_at_ms', ARGV[2])
return {'ok'}
";

/// KEYS: lease. ARGV: fence.
const RELEASE: &str = r"
if redis.call('HGET', KEYS[1], 'fence') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'owner')
  redis.call('HSET', KEYS[1], 'expires_at_ms', '0')
end
return {'ok'}
";

/// Sessions in Redis (see the [module docs](self)). Clones share the connection.
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    prefix: String,
    location: String,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("location", &self.location)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to the server at `url` (`redis://[:PASSWORD@]HOST:PORT[/DB]`), with keys
    /// under `halo:`.
    ///
    /// # Errors
    /// [`SessionError::Io`] when the URL is invalid or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, SessionError> {
        Self::connect_with_prefix(url, "halo").await
    }

    /// As [`connect`](Self::connect), with keys under `prefix:`.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub async fn connect_with_prefix(url: &str, prefix: &str) -> Result<Self, SessionError> {
        let location = redact(url);
        let io = |what: &str, e: redis::RedisError| SessionError::Io {
            location: location.clone(),
            message: format!("{what}: {e}"),
        };
        let client = redis::Client::open(url).map_err(|e| io("not a Redis URL", e))?;
        let mut conn = ConnectionManager::new(client)
            .await
            .map_err(|e| io("cannot connect", e))?;
        // CONFIG may be refused (managed servers): then there is nothing to say.
        let aof: Result<Vec<String>, _> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("appendonly")
            .query_async(&mut conn)
            .await;
        if let Ok(reply) = aof
            && reply.get(1).is_some_and(|v| v == "no")
        {
            tracing::warn!(
                redis = %location,
                "the Redis server's append-only file is off: a crash of the server loses \
                 session entries; run it with `appendonly yes` and `appendfsync always`"
            );
        }
        Ok(RedisStore {
            conn,
            prefix: prefix.to_string(),
            location,
        })
    }

    /// The server, as errors name it (no password).
    pub fn location(&self) -> &str {
        &self.location
    }

    fn key(&self, session: &str, part: &str) -> String {
        format!("{}:session:{session}:{part}", self.prefix)
    }

    fn sessions_key(&self) -> String {
        format!("{}:sessions", self.prefix)
    }

    fn err(&self, what: &str, e: redis::RedisError) -> SessionError {
        SessionError::Io {
            location: self.location.clone(),
            message: format!("{what}: {e}"),
        }
    }

    fn fenced(&self, session: &str, fence: u64, reply: &[String]) -> SessionError {
        SessionError::Fenced {
            location: self.location.clone(),
            session: session.to_string(),
            fence,
            holder: reply.get(1).filter(|h| !h.is_empty()).cloned(),
            current: number(reply.get(2)),
        }
    }

    fn unexpected(&self, what: &str, reply: &[String]) -> SessionError {
        SessionError::Io {
            location: self.location.clone(),
            message: format!("unexpected reply to {what}: {reply:?}"),
        }
    }
}

/// A number in a script's reply (0 when absent).
fn number(s: Option<&String>) -> u64 {
    s.and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[async_trait]
impl SessionStore for RedisStore {
    async fn append(&self, append: Append<'_>) -> Result<u64, SessionError> {
        let script = Script::new(APPEND);
        let mut call = script.key(self.key(append.session, "journal"));
        call.key(self.key(append.session, "meta"))
            .key(self.key(append.session, "lease"))
            .key(self.sessions_key())
            .arg(append.session)
            .arg(append.expected)
            .arg(append.fence.map(|f| f.to_string()).unwrap_or_default())
            .arg(JOURNAL_FORMAT_VERSION)
            .arg(append.at_ms)
            .arg(append.steps());
        for event in append.events {
            call.arg(serde_json::to_vec(event).map_err(|e| SessionError::Io {
                location: self.location.clone(),
                message: format!("cannot serialize a journal event: {e}"),
            })?);
        }
        let reply: Vec<String> = call
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.err("cannot append", e))?;
        match reply.first().map(String::as_str) {
            Some("ok") => Ok(number(reply.get(1))),
            Some("conflict") => Err(SessionError::Conflict {
                location: self.location.clone(),
                session: append.session.to_string(),
                expected: append.expected,
                found: number(reply.get(1)),
            }),
            Some("fenced") => Err(self.fenced(append.session, append.fence.unwrap_or(0), &reply)),
            Some("newer") => Err(SessionError::NewerFormat {
                location: self.location.clone(),
                found: u32::try_from(number(reply.get(1))).unwrap_or(u32::MAX),
                supported: JOURNAL_FORMAT_VERSION,
            }),
            _ => Err(self.unexpected("an append", &reply)),
        }
    }

    async fn load(&self, session: &str) -> Result<Vec<JournalEvent>, SessionError> {
        let (format, entries): (Option<u32>, Vec<Vec<u8>>) = redis::pipe()
            .atomic()
            .hget(self.key(session, "meta"), "format")
            .lrange(self.key(session, "journal"), 0, -1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.err("cannot load the session", e))?;
        if let Some(found) = format.filter(|f| *f > JOURNAL_FORMAT_VERSION) {
            return Err(SessionError::NewerFormat {
                location: self.location.clone(),
                found,
                supported: JOURNAL_FORMAT_VERSION,
            });
        }
        entries
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                serde_json::from_slice(entry).map_err(|e| SessionError::Corrupt {
                    location: self.location.clone(),
                    entry: i + 1,
                    message: format!(
                        "session {session:?}, entry {i}: not a journal event this version reads ({e}); fix or remove it, or open the session with a newer Halo"
                    ),
                })
            })
            .collect()
    }

    async fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let mut conn = self.conn.clone();
        let ids: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.sessions_key())
            .query_async(&mut conn)
            .await
            .map_err(|e| self.err("cannot list the sessions", e))?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("HMGET")
                .arg(self.key(id, "meta"))
                .arg("steps")
                .arg("updated_ms")
                .llen(self.key(id, "journal"));
        }
        let replies: Vec<Value> = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| self.err("cannot list the sessions", e))?;
        let mut list = Vec::with_capacity(ids.len());
        for (id, pair) in ids.into_iter().zip(replies.chunks(2)) {
            let meta: Vec<Option<u64>> =
                redis::from_redis_value(pair[0].clone()).unwrap_or_default();
            let entries: u64 = redis::from_redis_value(pair[1].clone()).unwrap_or(0);
            if entries == 0 {
                continue;
            }
            list.push(SessionInfo {
                id,
                steps: meta.first().copied().flatten().unwrap_or(0),
                updated_ms: meta.get(1).copied().flatten().unwrap_or(0),
                entries,
            });
        }
        Ok(list)
    }

    async fn delete(&self, session: &str) -> Result<(), SessionError> {
        let _: () = redis::pipe()
            .atomic()
            .del(&[self.key(session, "journal"), self.key(session, "meta")])
            .ignore()
            .srem(self.sessions_key(), session)
            .ignore()
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.err("cannot delete the session", e))?;
        Ok(())
    }

    async fn acquire(
        &self,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Lease, SessionError> {
        let expires_at_ms = now_ms.saturating_add(ttl_ms);
        let reply: Vec<String> = Script::new(ACQUIRE)
            .key(self.key(session, "lease"))
            .arg(owner)
            .arg(expires_at_ms)
            .arg(now_ms)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.err("cannot acquire the lease", e))?;
        match reply.first().map(String::as_str) {
            Some("ok") => Ok(Lease {
                session: session.to_string(),
                owner: owner.to_string(),
                fence: number(reply.get(1)),
                expires_at_ms,
            }),
            Some("in_use") => Err(SessionError::InUse {
                location: self.location.clone(),
                session: session.to_string(),
                holder: reply.get(1).cloned().unwrap_or_default(),
                expires_at_ms: Some(number(reply.get(2))),
            }),
            _ => Err(self.unexpected("acquire", &reply)),
        }
    }

    async fn renew(&self, lease: &Lease, ttl_ms: u64, now_ms: u64) -> Result<Lease, SessionError> {
        let expires_at_ms = now_ms.saturating_add(ttl_ms);
        let reply: Vec<String> = Script::new(RENEW)
            .key(self.key(&lease.session, "lease"))
            .arg(lease.fence)
            .arg(expires_at_ms)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.err("cannot renew the lease", e))?;
        match reply.first().map(String::as_str) {
            Some("ok") => Ok(Lease {
                expires_at_ms,
                ..lease.clone()
            }),
            Some("fenced") => Err(self.fenced(&lease.session, lease.fence, &reply)),
            _ => Err(self.unexpected("renew", &reply)),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), SessionError> {
        let _: Vec<String> = Script::new(RELEASE)
            .key(self.key(&lease.session, "lease"))
            .arg(lease.fence)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.err("cannot release the lease", e))?;
        Ok(())
    }
}

/// `url` with any password replaced by `***`.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => format!("{}***{}", &url[..scheme + 3], &url[at..]),
            }
        }
        _ => url.to_string(),
    }
}
