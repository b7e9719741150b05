//! [`Halo`]: many sessions in one process over one configuration — the model, the stable
//! prefix, the tools with their hooks, the guardrails and strategies — and one
//! [`SessionStore`].
//!
//! An application that serves agents to many people configures them once: a
//! [`HaloAgentBuilder`] is the template, and [`Halo::new`] builds it once, freezing the
//! prefix (its canonical bytes and fingerprint are computed there, once). Then
//! [`Halo::session`] gives a [`Session`] for a session id: an agent restored from the
//! store's journal of that session, which appends to it as it runs. Every session's agent
//! shares the template's parts (`Arc`s: the prefix with its canonical bytes, the tools'
//! registry, the model, the hooks, guardrails and strategies), so what a session costs
//! beyond its history is its run state and a few pointers, and every request of every
//! session starts with the same prefix bytes: the provider caches them once for all
//! sessions. `cargo xtask bench sessions` measures the memory per idle session.
//!
//! With [`Halo::leased`], each session is held under a lease of the store
//! ([`SessionStore::acquire`]) for the factory's owner: a session another owner holds is
//! [`SessionError::InUse`], and an agent whose lease was taken over writes nothing
//! ([`SessionError::Fenced`]). Renewing the lease while a session is in use is the caller's
//! ([`Session::renew`]); this crate runs no timer. `docs/sessions.md` says how to pick a
//! store.
//!
//! [`SessionError::InUse`]: crate::session::SessionError::InUse
//! [`SessionError::Fenced`]: crate::session::SessionError::Fenced
//!
//! ```
//! use std::sync::Arc;
//! use halo_core::{Halo, HaloAgent, MemoryStore, testing::ScriptedModel};
//!
//! # futures::executor::block_on(async {
//! let model = ScriptedModel::new().text("Hello, Ada.").text("Hello, Bo.").text("You are Ada.");
//! let store = Arc::new(MemoryStore::new());
//! let halo = Halo::new(HaloAgent::builder(model).system("Be brief."), store.clone());
//!
//! let mut ada = halo.session("ada").await.unwrap();
//! ada.generate_text("I am Ada.").await.unwrap();
//! let mut bo = halo.session("bo").await.unwrap();
//! bo.generate_text("I am Bo.").await.unwrap();
//! drop(ada);
//!
//! // Later, maybe in another process over the same store: Ada's history is back.
//! let mut ada = halo.session("ada").await.unwrap();
//! assert_eq!(ada.log().len(), 2);
//! assert_eq!(ada.generate_text("Who am I?").await.unwrap().text, "You are Ada.");
//! // One prefix for all: the same bytes, not copies.
//! assert!(std::ptr::eq(ada.prefix().canonical_bytes(), halo.prefix().canonical_bytes()));
//! # });
//! ```

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::agent::{Config, HaloAgent, HaloAgentBuilder};
use crate::error::HaloError;
use crate::model::SharedModel;
use crate::prefix::StablePrefix;
use crate::session::{Lease, SessionInfo, SessionStore};

/// How long a session's lease lasts unless renewed, by default: 15,000 ms.
pub const DEFAULT_LEASE_TTL_MS: u64 = 15_000;

/// Many sessions over one configuration and one store (see the [module docs](self)).
///
/// Cheap to clone (one `Arc`): clones are the same factory, for tasks and handlers.
#[derive(Clone)]
pub struct Halo {
    shared: Arc<Shared>,
}

/// What every session shares.
#[derive(Clone)]
struct Shared {
    /// The template: each session's agent starts from a clone, which shares its parts.
    config: Config,
    store: Arc<dyn SessionStore>,
    lease: Option<LeasePolicy>,
}

/// Who holds the sessions a leased factory gives, and for how long.
#[derive(Debug, Clone)]
struct LeasePolicy {
    owner: String,
    ttl_ms: u64,
}

impl std::fmt::Debug for Halo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.shared.config;
        f.debug_struct("Halo")
            .field("model", &c.model.model_name())
            .field("prefix_fingerprint", &c.prefix.fingerprint())
            .field("tools", &c.tools)
            .field("lease", &self.shared.lease)
            .finish_non_exhaustive()
    }
}

impl Halo {
    /// A factory whose sessions are agents as `template` would build them, journaled in
    /// `store`. The template is built once, here: prompt zones are rendered with the
    /// clock's date now and the context window is resolved, so the prefix is frozen for
    /// the factory (an agent can still [`refresh_prefix`](HaloAgent::refresh_prefix) its
    /// own). A session store or run state given to the template is not used: each session
    /// is journaled in `store` under its own id.
    pub fn new(template: HaloAgentBuilder, store: Arc<dyn SessionStore>) -> Halo {
        let config = template.build().config().clone();
        // The canonical bytes and fingerprint, computed once: every session's clone shares
        // them.
        config.prefix.fingerprint();
        Halo {
            shared: Arc::new(Shared {
                config,
                store,
                lease: None,
            }),
        }
    }

    /// Holds every session this factory gives under a lease of the store for `owner` (for
    /// example `worker 3 on node-b`, what others are told holds it), lasting `ttl_ms`
    /// milliseconds ([`DEFAULT_LEASE_TTL_MS`] is a fair choice) unless renewed with
    /// [`Session::renew`]. Without it sessions take no lease, and a second writer is still
    /// refused at its first append ([`SessionError::Conflict`]).
    ///
    /// [`SessionError::Conflict`]: crate::session::SessionError::Conflict
    pub fn leased(mut self, owner: impl Into<String>, ttl_ms: u64) -> Halo {
        Arc::make_mut(&mut self.shared).lease = Some(LeasePolicy {
            owner: owner.into(),
            ttl_ms,
        });
        self
    }

    /// The stable prefix every session starts with (the same bytes: see
    /// [`StablePrefix::canonical_bytes`]).
    pub fn prefix(&self) -> &StablePrefix {
        &self.shared.config.prefix
    }

    /// The model every session calls.
    pub fn model(&self) -> &SharedModel {
        &self.shared.config.model
    }

    /// The store the sessions are journaled in.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.shared.store
    }

    /// The owner the sessions are leased for ([`leased`](Self::leased)); `None` without
    /// leases.
    pub fn owner(&self) -> Option<&str> {
        self.shared.lease.as_ref().map(|l| l.owner.as_str())
    }

    /// The sessions of the store ([`SessionStore::list`]).
    ///
    /// # Errors
    /// The store's [`HaloError::Session`] errors.
    pub async fn sessions(&self) -> Result<Vec<SessionInfo>, HaloError> {
        Ok(self.shared.store.list().await?)
    }

    /// The session `id`: an agent restored from the store's journal of `id` (its history
    /// and, when a run was paused or cut, its open step), which appends there as it runs. A
    /// new id gives an agent with an empty history. Leased factories take the session's
    /// lease first ([`leased`](Self::leased)).
    ///
    /// Giving the same id twice gives two agents on one journal: the first to append wins
    /// and the other's run ends with [`SessionError::Conflict`] (or, leased, the earlier
    /// agent's with [`SessionError::Fenced`], since each lease has a new fence).
    ///
    /// # Errors
    /// [`HaloError::Session`]: [`SessionError::InUse`] when another owner holds the
    /// session's lease, and the store's errors on loading the journal
    /// ([`SessionError::Corrupt`], [`SessionError::NewerFormat`], [`SessionError::Io`]); a
    /// lease taken before a failed load is released.
    ///
    /// [`SessionError::Conflict`]: crate::session::SessionError::Conflict
    /// [`SessionError::Fenced`]: crate::session::SessionError::Fenced
    /// [`SessionError::InUse`]: crate::session::SessionError::InUse
    /// [`SessionError::Corrupt`]: crate::session::SessionError::Corrupt
    /// [`SessionError::NewerFormat`]: crate::session::SessionError::NewerFormat
    /// [`SessionError::Io`]: crate::session::SessionError::Io
    pub async fn session(&self, id: impl Into<String>) -> Result<Session, HaloError> {
        let id = id.into();
        let shared = &self.shared;
        let lease = match &shared.lease {
            Some(policy) => {
                let now = shared.config.clock.now_ms();
                Some(
                    shared
                        .store
                        .acquire(&id, &policy.owner, policy.ttl_ms, now)
                        .await?,
                )
            }
            None => None,
        };
        let mut builder = HaloAgentBuilder::from_config(shared.config.clone())
            .session_named(shared.store.clone(), id);
        if let Some(lease) = &lease {
            builder = builder.session_lease(lease);
        }
        let mut agent = builder.build();
        if let Err(e) = agent.restore_session().await {
            if let Some(lease) = &lease {
                // Best effort: the load's error is the one to report.
                let _ = shared.store.release(lease).await;
            }
            return Err(e);
        }
        Ok(Session {
            agent,
            lease,
            halo: self.clone(),
        })
    }
}

/// One session of a [`Halo`]: its agent (which it dereferences to, so
/// `session.generate_text(..)` runs it) and, from a leased factory, its lease.
///
/// Dropping a session frees its memory; its journal stays in the store, and its lease runs
/// out by itself ([`release`](Self::release) frees it at once).
pub struct Session {
    agent: HaloAgent,
    lease: Option<Lease>,
    halo: Halo,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id())
            .field("agent", &self.agent)
            .field("lease", &self.lease)
            .finish()
    }
}

impl Session {
    /// The session's id.
    pub fn id(&self) -> &str {
        self.agent.session_name()
    }

    /// The session's lease (`None` from a factory without leases).
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// The agent.
    pub fn agent(&self) -> &HaloAgent {
        &self.agent
    }

    /// The agent, to run it.
    pub fn agent_mut(&mut self) -> &mut HaloAgent {
        &mut self.agent
    }

    /// The agent alone. Its appends stay fenced by the lease, which runs out unless
    /// renewed: keep the session to renew it.
    pub fn into_agent(self) -> HaloAgent {
        self.agent
    }

    /// Extends the session's lease by the factory's time to live from now (the agent's
    /// clock), keeping its fence; nothing without a lease. Call it more often than the time
    /// to live while the session is in use.
    ///
    /// # Errors
    /// [`HaloError::Session`]: [`SessionError::Fenced`] when another owner took the session
    /// over (the agent's appends fail too: stop using it), the store's errors.
    ///
    /// [`SessionError::Fenced`]: crate::session::SessionError::Fenced
    pub async fn renew(&mut self) -> Result<(), HaloError> {
        let (Some(lease), Some(policy)) = (&self.lease, &self.halo.shared.lease) else {
            return Ok(());
        };
        let now = self.agent.config().clock.now_ms();
        let renewed = self
            .halo
            .shared
            .store
            .renew(lease, policy.ttl_ms, now)
            .await?;
        self.lease = Some(renewed);
        Ok(())
    }

    /// Ends the session: releases its lease, so another owner can take the session at once.
    /// Its journal stays in the store.
    ///
    /// # Errors
    /// The store's [`HaloError::Session`] errors.
    pub async fn release(self) -> Result<(), HaloError> {
        if let Some(lease) = &self.lease {
            self.halo.shared.store.release(lease).await?;
        }
        Ok(())
    }
}

impl Deref for Session {
    type Target = HaloAgent;

    fn deref(&self) -> &HaloAgent {
        &self.agent
    }
}

impl DerefMut for Session {
    fn deref_mut(&mut self) -> &mut HaloAgent {
        &mut self.agent
    }
}
