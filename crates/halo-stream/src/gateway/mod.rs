//! Agents as a web service: [`Gateway`] is an axum [`Router`](axum::Router) that serves
//! the AI SDK's chat client (`useChat`, `DefaultChatTransport`) and keeps every chat in a
//! [`SessionStore`], so runs survive page refreshes, restarts and workers.
//!
//! - **Runs apart from connections.** `POST /api/chat` starts a run (or continues a
//!   paused one) and streams it; the run goes on when the client goes away. Every stream
//!   part is numbered and kept in the store beside the chat's journal; `GET
//!   /api/chat/{id}/stream` (the AI SDK's resume endpoint) replays the latest turn and
//!   follows it live, and `?after=N` (or `Last-Event-ID: N`) sends only what came after
//!   part `N`. SSE frames carry the part's number as their `id`.
//! - **Approvals in the browser.** A call that needs approval becomes a
//!   `tool-approval-request` part and pauses the run; the client answers with
//!   `addToolApprovalResponse` (its next `POST /api/chat` carries the answer), or anyone
//!   with `POST /api/chats/{id}/approvals/{call}`. The run goes on in whichever process
//!   gets the answer. A reconnecting client is shown the pending approvals again. A
//!   request that asks for JSON (`Accept: application/json`) has no one to ask: its
//!   approvals are denied at once. A denied call is a `tool-output-denied` part.
//! - **Client-side tools.** Results the client gives with `addToolOutput` go to the
//!   paused run's waiting calls.
//! - **Steering.** `POST /api/chats/{id}/steer` queues a user message for the run going
//!   on; it enters at the next step boundary, as a `steering-message` part.
//! - **Login.** Users with scrypt password hashes; an HttpOnly, SameSite=Strict session
//!   cookie of which only the SHA-256 is stored, so a restart keeps browsers logged in and
//!   a password change logs out every other browser; failed logins are rate limited; a
//!   machine token written at start to a file of mode 0600, for scripts
//!   (`Authorization: Bearer`). A user never sees another user's chats (404).
//! - **Several processes** on one store (PostgreSQL, Redis; [`GatewayBuilder::shared`]):
//!   a chat's lease says which process runs it; the others follow its parts from the
//!   store, take a paused run over when they get its answers, and pass steering messages
//!   through the store.
//!
//! The routes, the store layout and a walk through a run are in `docs/gateway.md`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use halo_core::{HaloAgent, testing::ScriptedModel};
//! use halo_stream::{gateway::Gateway, journal::JsonlStore};
//!
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Arc::new(JsonlStore::open("chats.jsonl")?);
//! let gateway = Gateway::builder(store, |_chat: &halo_stream::gateway::ChatContext<'_>| {
//!     Ok(HaloAgent::builder(ScriptedModel::new().text("Hello!")))
//! })
//! .build()
//! .await?;
//! gateway.add_user("ann", "correct horse battery").await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, gateway.router()).await?;
//! # Ok(()) }
//! ```

mod auth;
mod events;
mod follow;
mod history;
mod http;
mod runs;
pub mod ui;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use halo_core::session::{JournalEvent, Lease, SessionError, SessionStore};
use halo_core::{HaloAgentBuilder, HaloError, Message};

pub use auth::{AUTH_SESSION, SESSION_TTL_MS};
use auth::{Auth, AuthConfig};
use events::Stored;
use runs::{Prepared, Runs};

use crate::StreamOptions;

/// The record kind of a steering message left in a chat's inbox.
pub(crate) const STEER: &str = "halo.steer";

/// The cookie that holds a browser's session token.
pub const SESSION_COOKIE: &str = "halo_session";

/// What the gateway asks its agent factory for: whose chat, which one, and whether a
/// person can answer approvals (a browser) or not (a plain JSON request).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ChatContext<'a> {
    /// The user.
    pub user: &'a str,
    /// The chat's id.
    pub chat: &'a str,
    /// Whether approvals can be asked (the gateway sets `pause_for_approvals` then).
    pub ui: bool,
}

/// Makes the agent of a chat: a builder with the model, prompt and tools; the gateway adds
/// the session, its lease and the approval mode. Any `Fn(&ChatContext) -> Result<HaloAgentBuilder, HaloError>`
/// is one.
pub trait AgentFactory: Send + Sync + 'static {
    /// The builder for `chat`.
    ///
    /// # Errors
    /// Any [`HaloError`]; the request fails with it.
    fn agent(&self, chat: &ChatContext<'_>) -> Result<HaloAgentBuilder, HaloError>;
}

impl<F> AgentFactory for F
where
    F: Fn(&ChatContext<'_>) -> Result<HaloAgentBuilder, HaloError> + Send + Sync + 'static,
{
    fn agent(&self, chat: &ChatContext<'_>) -> Result<HaloAgentBuilder, HaloError> {
        self(chat)
    }
}

/// Why the gateway failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The store failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The agent failed to build or to take an answer.
    #[error(transparent)]
    Halo(#[from] HaloError),
    /// A file could not be written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The request was wrong.
    #[error("{0}")]
    Invalid(String),
    /// No such chat, run or call for this user.
    #[error("{0}")]
    NotFound(String),
    /// Someone else is working on it; try again.
    #[error("{0}")]
    Busy(String),
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    Closed,
}

/// The milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The store sessions of one chat.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    pub user: String,
    pub chat: String,
    /// The agent's journal: `chat/USER/CHAT`.
    pub journal: String,
    /// The stream parts: `chat/USER/CHAT/events`.
    pub events: String,
    /// Steering messages from other processes: `chat/USER/CHAT/inbox`.
    pub inbox: String,
}

impl Names {
    pub(crate) fn new(user: &str, chat: &str) -> Result<Names, GatewayError> {
        let ok = !chat.is_empty()
            && chat.len() <= 128
            && chat
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
        if !ok {
            return Err(GatewayError::Invalid(format!(
                "`{chat}` is not a chat id: use 1 to 128 letters, digits, `_` or `-`"
            )));
        }
        let journal = format!("chat/{user}/{chat}");
        Ok(Names {
            user: user.to_owned(),
            chat: chat.to_owned(),
            events: format!("{journal}/events"),
            inbox: format!("{journal}/inbox"),
            journal,
        })
    }

    /// The chat id of a journal session of `user`, if `session` is one.
    pub(crate) fn chat_of<'a>(user: &str, session: &'a str) -> Option<&'a str> {
        let chat = session
            .strip_prefix("chat/")?
            .strip_prefix(user)?
            .strip_prefix('/')?;
        (!chat.contains('/')).then_some(chat)
    }
}

/// The gateway's settings.
pub(crate) struct Options {
    pub shared: bool,
    pub lease_ttl_ms: u64,
    pub poll: Duration,
    pub stream: StreamOptions,
    pub cookie_secure: bool,
    /// How long an action waits for a run that is ending to let go of the chat.
    pub wait: Duration,
}

/// What every handler and run shares.
pub(crate) struct Shared {
    pub store: Arc<dyn SessionStore>,
    agents: Box<dyn AgentFactory>,
    pub auth: Auth,
    pub runs: Runs,
    pub options: Options,
    /// This process, as lease owners are named.
    owner: String,
}

impl Shared {
    /// Takes the chat's lease (waiting up to [`Options::wait`] while a run lets go of it),
    /// writes `seed` as the history of a chat that has none, builds and restores the agent.
    pub(crate) async fn prepare(
        self: &Arc<Self>,
        names: Names,
        ui: bool,
        seed: Vec<Message>,
    ) -> Result<Prepared, GatewayError> {
        let lease = self.acquire(&names.journal).await?;
        match self.build(names, ui, seed, &lease).await {
            Ok(prepared) => Ok(prepared),
            Err(e) => {
                let _ = self.store.release(&lease).await;
                Err(e)
            }
        }
    }

    async fn acquire(&self, session: &str) -> Result<Lease, GatewayError> {
        let started = std::time::Instant::now();
        loop {
            let ttl = self.options.lease_ttl_ms;
            match self
                .store
                .acquire(session, &self.owner, ttl, now_ms())
                .await
            {
                Ok(lease) => return Ok(lease),
                Err(SessionError::InUse { holder, .. }) => {
                    if started.elapsed() >= self.options.wait {
                        return Err(GatewayError::Busy(format!(
                            "a run of this chat is going on (in {holder}); steer it, or wait until it ends"
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    async fn build(
        self: &Arc<Self>,
        names: Names,
        ui: bool,
        seed: Vec<Message>,
        lease: &Lease,
    ) -> Result<Prepared, GatewayError> {
        if !seed.is_empty() && self.store.load(&names.journal).await?.is_empty() {
            let boundary = JournalEvent::CompactBoundary {
                history: seed,
                injected: Vec::new(),
                discardable: Vec::new(),
                reason: Some("the conversation the client sent with its first message".into()),
                at_ms: now_ms(),
            };
            let append = halo_core::session::Append::new(
                &names.journal,
                0,
                std::slice::from_ref(&boundary),
                now_ms(),
            )
            .fenced(lease.fence);
            self.store.append(append).await?;
        }
        let context = ChatContext {
            user: &names.user,
            chat: &names.chat,
            ui,
        };
        let mut builder = self
            .agents
            .agent(&context)?
            .session_named(self.store.clone(), names.journal.clone())
            .session_lease(lease);
        if ui {
            builder = builder.pause_for_approvals();
        }
        let mut agent = builder.build();
        agent.restore_session().await?;
        let events = Stored::load(self.store.as_ref(), &names.events).await?;
        let inbox = if self.options.shared {
            self.store.load(&names.inbox).await?.len() as u64
        } else {
            0
        };
        Ok(Prepared {
            names,
            agent,
            lease: lease.clone(),
            events,
            inbox,
        })
    }
}

/// Agents as a web service; see the [module docs](self).
#[derive(Clone)]
pub struct Gateway {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("owner", &self.shared.owner)
            .field("auth", &self.shared.auth)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Starts building a gateway over `store`, whose chats' agents `agents` makes.
    pub fn builder(store: Arc<dyn SessionStore>, agents: impl AgentFactory) -> GatewayBuilder {
        GatewayBuilder {
            store,
            agents: Box::new(agents),
            shared: false,
            token_file: None,
            machine_user: "local".into(),
            password_cost: 17,
            lease_ttl_ms: 15_000,
            poll: Duration::from_millis(200),
            stream: StreamOptions::new().with_step_usage(true),
            cookie_secure: false,
            wait: Duration::from_secs(5),
        }
    }

    /// The routes, to serve or to merge into an application's router (paths under `/api`;
    /// see `docs/gateway.md`).
    pub fn router(&self) -> axum::Router {
        http::router(self.shared.clone())
    }

    /// Creates user `name` with `password` unless the user exists (a restarted gateway keeps
    /// its users and their passwords); returns whether it was created. Names are 1 to 64 of
    /// `a-z A-Z 0-9 . _ -`; passwords 8 to 1,024 bytes.
    ///
    /// # Errors
    /// [`GatewayError::Invalid`] for a bad name or password, the store's errors.
    pub async fn add_user(&self, name: &str, password: &str) -> Result<bool, GatewayError> {
        self.shared.auth.add_user(name, password).await
    }

    /// Sets `name`'s password (creating the user when new); every browser session of the
    /// user ends.
    ///
    /// # Errors
    /// As [`add_user`](Self::add_user).
    pub async fn set_password(&self, name: &str, password: &str) -> Result<(), GatewayError> {
        self.shared.auth.set_password(name, password, None).await
    }

    /// The file the machine token was written to (mode 0600): its one line is the token to
    /// send as `Authorization: Bearer TOKEN`. A new token is made at every start.
    pub fn token_file(&self) -> &Path {
        self.shared.auth.token_file()
    }
}

/// Builds a [`Gateway`]: [`Gateway::builder`].
#[must_use]
pub struct GatewayBuilder {
    store: Arc<dyn SessionStore>,
    agents: Box<dyn AgentFactory>,
    shared: bool,
    token_file: Option<PathBuf>,
    machine_user: String,
    password_cost: u8,
    lease_ttl_ms: u64,
    poll: Duration,
    stream: StreamOptions,
    cookie_secure: bool,
    wait: Duration,
}

impl std::fmt::Debug for GatewayBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayBuilder")
            .field("shared", &self.shared)
            .field("token_file", &self.token_file)
            .finish_non_exhaustive()
    }
}

impl GatewayBuilder {
    /// Whether other gateway processes use the same store (PostgreSQL, Redis): then logins,
    /// runs and steering messages are read from the store rather than trusted from memory.
    /// Default `false`.
    pub fn shared(mut self, shared: bool) -> Self {
        self.shared = shared;
        self
    }

    /// Where the machine token is written. Default: `$XDG_RUNTIME_DIR/halo-gateway/token`,
    /// or `halo-gateway-$USER/token` in the temporary folder.
    pub fn token_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.token_file = Some(path.into());
        self
    }

    /// The user the machine token acts as. Default `local`.
    pub fn machine_user(mut self, user: impl Into<String>) -> Self {
        self.machine_user = user.into();
        self
    }

    /// scrypt's cost for new password hashes, as log₂ N (memory: 128 × 2^N bytes with
    /// r = 8). Default 17 (128 MiB, scrypt's recommendation); lower only for tests.
    pub fn password_cost(mut self, log_n: u8) -> Self {
        self.password_cost = log_n;
        self
    }

    /// How long a chat's lease lasts unless its run renews it, in ms. Default 15,000: a
    /// killed process's paused or stopped chat is free again after this.
    pub fn lease_ttl_ms(mut self, ms: u64) -> Self {
        self.lease_ttl_ms = ms;
        self
    }

    /// How often a follower reads the store when another process makes the run. Default
    /// 200 ms.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll = every;
        self
    }

    /// The stream options of every run (error texts, reasoning, Halo's data parts). Default:
    /// [`StreamOptions::new`] with [`with_step_usage`](StreamOptions::with_step_usage).
    pub fn stream_options(mut self, options: StreamOptions) -> Self {
        self.stream = options;
        self
    }

    /// Whether the session cookie is marked `Secure` (sent over HTTPS only). Default
    /// `false`, for loopback; set it behind TLS.
    pub fn cookie_secure(mut self, secure: bool) -> Self {
        self.cookie_secure = secure;
        self
    }

    /// Reads the users and sessions from the store and writes the machine token.
    ///
    /// # Errors
    /// The store's; [`GatewayError::Io`] when the token file cannot be written.
    pub async fn build(self) -> Result<Gateway, GatewayError> {
        let token_file = self.token_file.unwrap_or_else(default_token_file);
        let auth = Auth::new(
            self.store.clone(),
            AuthConfig {
                shared: self.shared,
                machine_user: self.machine_user,
                token_file,
                log_n: self.password_cost,
            },
        )
        .await?;
        let owner = format!(
            "gateway process {} ({})",
            std::process::id(),
            &auth::new_token()[..8]
        );
        Ok(Gateway {
            shared: Arc::new(Shared {
                store: self.store,
                agents: self.agents,
                auth,
                runs: Runs::default(),
                options: Options {
                    shared: self.shared,
                    lease_ttl_ms: self.lease_ttl_ms,
                    poll: self.poll,
                    stream: self.stream,
                    cookie_secure: self.cookie_secure,
                    wait: self.wait,
                },
                owner,
            }),
        })
    }
}

fn default_token_file() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("halo-gateway").join("token"),
        None => {
            let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
            std::env::temp_dir()
                .join(format!("halo-gateway-{user}"))
                .join("token")
        }
    }
}
