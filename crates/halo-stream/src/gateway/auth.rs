//! Who may use the gateway: users with scrypt password hashes, browser sessions whose
//! tokens are kept only as SHA-256 digests, the machine token, and the rate limit on
//! failed logins.
//!
//! Everything durable is an append-only log of [`JournalEvent::Custom`] records in the
//! session [`AUTH_SESSION`] of the gateway's store, folded into memory:
//!
//! | kind | data | meaning |
//! | --- | --- | --- |
//! | `halo.user` | `{"name","hash","keep"?}` | a user is created, or their password set: `hash` is the PHC string of scrypt; every browser session of the user from before is revoked, but `keep` (the digest of the session that changed it) |
//! | `halo.login` | `{"user","token","expires_ms"}` | a browser logged in: `token` is the SHA-256 (hex) of its cookie |
//! | `halo.logout` | `{"token"}` | that session ended |
//!
//! The store never holds a password or a session token: a restarted gateway (or another
//! one on the same store) knows every session by its digest, so browsers stay logged in.

mod limit;
mod secret;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use halo_core::session::{Append, JournalEvent, SessionError, SessionStore};
use serde_json::{Value, json};
use tokio::sync::{Mutex, Semaphore};

pub(crate) use limit::Limiter;
pub(crate) use secret::{digest, new_token, write_token_file};

use super::{GatewayError, now_ms};

/// The session of the store that holds the auth log.
pub const AUTH_SESSION: &str = "halo-gateway/auth";

/// How long a browser session lasts without logging in again: 30 days, in ms.
pub const SESSION_TTL_MS: u64 = 30 * 24 * 3600 * 1000;

/// The log folded: users and browser sessions, as of `entries` entries.
#[derive(Debug, Default)]
struct AuthState {
    entries: u64,
    users: HashMap<String, User>,
    sessions: HashMap<String, BrowserSession>,
}

#[derive(Debug)]
struct User {
    hash: String,
}

#[derive(Debug)]
struct BrowserSession {
    user: String,
    expires_ms: u64,
    revoked: bool,
}

impl AuthState {
    fn fold(events: &[JournalEvent]) -> Self {
        let mut state = AuthState::default();
        for event in events {
            state.apply(event);
        }
        state
    }

    fn apply(&mut self, event: &JournalEvent) {
        self.entries += 1;
        let JournalEvent::Custom { kind, data, .. } = event else {
            return;
        };
        let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
        match kind.as_str() {
            "halo.user" => {
                let (Some(name), Some(hash)) = (text("name"), text("hash")) else {
                    return;
                };
                let keep = text("keep");
                for (digest, session) in &mut self.sessions {
                    if session.user == name && keep.as_deref() != Some(digest.as_str()) {
                        session.revoked = true;
                    }
                }
                self.users.insert(name, User { hash });
            }
            "halo.login" => {
                let (Some(user), Some(token)) = (text("user"), text("token")) else {
                    return;
                };
                let expires_ms = data.get("expires_ms").and_then(Value::as_u64).unwrap_or(0);
                self.sessions.insert(
                    token,
                    BrowserSession {
                        user,
                        expires_ms,
                        revoked: false,
                    },
                );
            }
            "halo.logout" => {
                if let Some(session) = text("token").and_then(|t| self.sessions.get_mut(&t)) {
                    session.revoked = true;
                }
            }
            _ => {}
        }
    }
}

/// Why a login failed.
#[derive(Debug)]
pub(crate) enum LoginError {
    /// Wrong name or password.
    Refused,
    /// Too many failures: try again after this many ms.
    Limited(u64),
    /// The store failed.
    Store(GatewayError),
}

/// The gateway's auth: see the [module docs](self).
pub(crate) struct Auth {
    store: Arc<dyn SessionStore>,
    state: Mutex<AuthState>,
    /// Whether other processes write the log too: then it is read again on each check.
    shared: bool,
    machine_digest: String,
    machine_user: String,
    token_file: PathBuf,
    limiter: Limiter,
    /// At most two scrypt computations at once (each takes 128 MiB at the default cost).
    hashing: Semaphore,
    log_n: u8,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("shared", &self.shared)
            .field("machine_user", &self.machine_user)
            .field("token_file", &self.token_file)
            .finish_non_exhaustive()
    }
}

/// What [`Auth::new`] needs.
pub(crate) struct AuthConfig {
    pub shared: bool,
    pub machine_user: String,
    pub token_file: PathBuf,
    pub log_n: u8,
}

impl Auth {
    /// Loads the log, makes a machine token and writes it to the token file (mode 0600).
    pub(crate) async fn new(
        store: Arc<dyn SessionStore>,
        config: AuthConfig,
    ) -> Result<Self, GatewayError> {
        let events = store.load(AUTH_SESSION).await?;
        let token = new_token();
        write_token_file(&config.token_file, &token)?;
        Ok(Auth {
            store,
            state: Mutex::new(AuthState::fold(&events)),
            shared: config.shared,
            machine_digest: digest(&token),
            machine_user: config.machine_user,
            token_file: config.token_file,
            limiter: Limiter::default(),
            hashing: Semaphore::new(2),
            log_n: config.log_n,
        })
    }

    /// Where the machine token is.
    pub(crate) fn token_file(&self) -> &Path {
        &self.token_file
    }

    /// The user the machine token acts as, when `token` is it.
    pub(crate) fn machine(&self, token: &str) -> Option<&str> {
        (digest(token) == self.machine_digest).then_some(self.machine_user.as_str())
    }

    /// Reads the log again when it may have grown elsewhere.
    async fn refresh(&self, state: &mut AuthState) -> Result<(), SessionError> {
        let events = self.store.load(AUTH_SESSION).await?;
        if events.len() as u64 != state.entries {
            *state = AuthState::fold(&events);
        }
        Ok(())
    }

    /// Appends one record at the log's end, reading it again after another writer's
    /// append (a conflict) and trying again.
    async fn append(
        &self,
        state: &mut AuthState,
        kind: &str,
        data: Value,
    ) -> Result<(), GatewayError> {
        let event = JournalEvent::Custom {
            kind: kind.into(),
            data,
            at_ms: now_ms(),
        };
        for _ in 0..8 {
            let append = Append::new(
                AUTH_SESSION,
                state.entries,
                std::slice::from_ref(&event),
                now_ms(),
            );
            match self.store.append(append).await {
                Ok(_) => {
                    state.apply(&event);
                    return Ok(());
                }
                Err(SessionError::Conflict { .. }) => self.refresh(state).await?,
                Err(e) => return Err(e.into()),
            }
        }
        Err(GatewayError::Busy(
            "the auth log kept changing under this write; try again".into(),
        ))
    }

    /// The scrypt hash (PHC string) of `password`, on the blocking pool.
    async fn hash(&self, password: &str) -> Result<String, GatewayError> {
        let _permit = self
            .hashing
            .acquire()
            .await
            .map_err(|_| GatewayError::Closed)?;
        let password = password.to_owned();
        let log_n = self.log_n;
        tokio::task::spawn_blocking(move || secret::hash_password(&password, log_n))
            .await
            .map_err(|e| GatewayError::Busy(format!("the password hash failed: {e}")))?
    }

    /// Whether `password` matches `hash`, on the blocking pool.
    async fn verify(&self, password: &str, hash: Option<String>) -> bool {
        let Ok(_permit) = self.hashing.acquire().await else {
            return false;
        };
        let password = password.to_owned();
        let log_n = self.log_n;
        tokio::task::spawn_blocking(move || match hash {
            Some(hash) => secret::verify_password(&password, &hash),
            // An unknown user costs as much as a known one, so timing tells nothing.
            None => {
                secret::verify_password(&password, secret::dummy_hash(log_n));
                false
            }
        })
        .await
        .unwrap_or(false)
    }

    /// Creates user `name` with `password` unless it exists; returns whether it was created.
    pub(crate) async fn add_user(&self, name: &str, password: &str) -> Result<bool, GatewayError> {
        check_user_name(name)?;
        check_password(password)?;
        let hash = self.hash(password).await?;
        let mut state = self.state.lock().await;
        self.refresh(&mut state).await?;
        if state.users.contains_key(name) {
            return Ok(false);
        }
        self.append(&mut state, "halo.user", json!({"name": name, "hash": hash}))
            .await?;
        Ok(true)
    }

    /// Sets `name`'s password (creating the user when new) and revokes every browser
    /// session of theirs but `keep` (a session's digest).
    pub(crate) async fn set_password(
        &self,
        name: &str,
        password: &str,
        keep: Option<&str>,
    ) -> Result<(), GatewayError> {
        check_user_name(name)?;
        check_password(password)?;
        let hash = self.hash(password).await?;
        let mut state = self.state.lock().await;
        self.refresh(&mut state).await?;
        let mut data = json!({"name": name, "hash": hash});
        if let Some(keep) = keep {
            data["keep"] = keep.into();
        }
        self.append(&mut state, "halo.user", data).await
    }

    /// Checks `name`'s password; returns a new session token for the cookie.
    pub(crate) async fn login(&self, name: &str, password: &str) -> Result<String, LoginError> {
        let now = now_ms();
        if let Err(wait) = self.limiter.check(name, now) {
            return Err(LoginError::Limited(wait));
        }
        let hash = {
            let mut state = self.state.lock().await;
            if self.shared {
                self.refresh(&mut state)
                    .await
                    .map_err(|e| LoginError::Store(e.into()))?;
            }
            state.users.get(name).map(|u| u.hash.clone())
        };
        if !self.verify(password, hash).await {
            self.limiter.failed(name, now_ms());
            return Err(LoginError::Refused);
        }
        self.limiter.succeeded(name);
        let token = new_token();
        let data = json!({
            "user": name,
            "token": digest(&token),
            "expires_ms": now_ms() + SESSION_TTL_MS,
        });
        let mut state = self.state.lock().await;
        self.append(&mut state, "halo.login", data)
            .await
            .map_err(LoginError::Store)?;
        Ok(token)
    }

    /// Whether `password` is `name`'s, without counting toward the rate limit's free tries
    /// when it is (a password change checks the current one).
    pub(crate) async fn check_password(
        &self,
        name: &str,
        password: &str,
    ) -> Result<bool, LoginError> {
        if let Err(wait) = self.limiter.check(name, now_ms()) {
            return Err(LoginError::Limited(wait));
        }
        let hash = self
            .state
            .lock()
            .await
            .users
            .get(name)
            .map(|u| u.hash.clone());
        let ok = self.verify(password, hash).await;
        if !ok {
            self.limiter.failed(name, now_ms());
        }
        Ok(ok)
    }

    /// The user of the browser session whose cookie is `token`, and its digest.
    pub(crate) async fn session_user(
        &self,
        token: &str,
    ) -> Result<Option<(String, String)>, GatewayError> {
        let digest = digest(token);
        let mut state = self.state.lock().await;
        if self.shared || !state.sessions.contains_key(&digest) {
            self.refresh(&mut state).await?;
        }
        let now = now_ms();
        Ok(state
            .sessions
            .get(&digest)
            .filter(|s| !s.revoked && s.expires_ms > now && state.users.contains_key(&s.user))
            .map(|s| (s.user.clone(), digest.clone())))
    }

    /// Ends the browser session with this digest.
    pub(crate) async fn logout(&self, digest: &str) -> Result<(), GatewayError> {
        let mut state = self.state.lock().await;
        self.append(&mut state, "halo.logout", json!({"token": digest}))
            .await
    }
}

/// User names: 1 to 64 of `a-z A-Z 0-9 . _ -`, so they can name store sessions.
pub(crate) fn check_user_name(name: &str) -> Result<(), GatewayError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(GatewayError::Invalid(format!(
            "`{name}` is not a user name: use 1 to 64 letters, digits, `.`, `_` or `-`"
        )))
    }
}

/// Passwords: 8 to 1,024 bytes.
fn check_password(password: &str) -> Result<(), GatewayError> {
    if (8..=1024).contains(&password.len()) {
        Ok(())
    } else {
        Err(GatewayError::Invalid(
            "a password has 8 to 1024 bytes".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custom(kind: &str, data: Value) -> JournalEvent {
        JournalEvent::Custom {
            kind: kind.into(),
            data,
            at_ms: 0,
        }
    }

    #[test]
    fn a_password_change_revokes_every_other_session_of_the_user() {
        let far = u64::MAX;
        let log = [
            custom("halo.user", json!({"name": "ann", "hash": "h1"})),
            custom("halo.user", json!({"name": "bob", "hash": "h2"})),
            custom(
                "halo.login",
                json!({"user": "ann", "token": "a1", "expires_ms": far}),
            ),
            custom(
                "halo.login",
                json!({"user": "ann", "token": "a2", "expires_ms": far}),
            ),
            custom(
                "halo.login",
                json!({"user": "bob", "token": "b1", "expires_ms": far}),
            ),
            custom(
                "halo.user",
                json!({"name": "ann", "hash": "h3", "keep": "a2"}),
            ),
            custom(
                "halo.login",
                json!({"user": "ann", "token": "a3", "expires_ms": far}),
            ),
            custom("halo.logout", json!({"token": "b1"})),
        ];
        let state = AuthState::fold(&log);
        let live = |t: &str| !state.sessions[t].revoked;
        assert_eq!(
            [live("a1"), live("a2"), live("a3"), live("b1")],
            [false, true, true, false]
        );
        assert_eq!(state.users["ann"].hash, "h3");
        assert_eq!(state.entries, 8);
    }

    #[test]
    fn user_names_can_name_sessions() {
        assert!(check_user_name("ann.b_c-1").is_ok());
        for bad in ["", "a/b", "a b", "é", &"x".repeat(65)] {
            assert!(check_user_name(bad).is_err(), "{bad:?}");
        }
    }
}
