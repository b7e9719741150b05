//! The `Halo` factory: a session comes back from the store with its history, sessions never
//! share a log (also as a property over interleaved turns), every session shares the
//! factory's prefix bytes, and a session held by another owner is in use (or, once taken
//! over, fenced).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use halo_core::session::{MemoryStore, SessionError, SessionStore};
use halo_core::testing::ScriptedModel;
use halo_core::{Clock, Halo, HaloAgent, HaloError, Message, Session};
use proptest::prelude::*;

/// A clock the test sets.
#[derive(Debug)]
struct SetClock(AtomicU64);

impl SetClock {
    fn at(ms: u64) -> Arc<SetClock> {
        Arc::new(SetClock(AtomicU64::new(ms)))
    }
}

impl Clock for SetClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

const T0: u64 = 1_800_000_000_000;

fn texts(session: &Session) -> Vec<String> {
    session.log().messages().map(Message::text).collect()
}

fn factory(model: &ScriptedModel, store: &MemoryStore) -> Halo {
    Halo::new(
        HaloAgent::builder(model.clone()).system("You keep notes for one person."),
        Arc::new(store.clone()),
    )
}

#[tokio::test]
async fn a_session_comes_back_from_the_store_with_its_history() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .text("Noted: Ada likes tea.")
        .text("Ada likes tea.");
    let halo = factory(&model, &store);
    let mut ada = halo.session("ada").await.unwrap();
    assert!(ada.log().is_empty());
    ada.generate_text("Ada likes tea.").await.unwrap();
    drop(ada);

    // Another factory over the same store, as another process would have.
    let again = factory(&model, &store);
    let mut ada = again.session("ada").await.unwrap();
    assert_eq!(ada.id(), "ada");
    assert_eq!(texts(&ada), ["Ada likes tea.", "Noted: Ada likes tea."]);
    let out = ada.generate_text("What does Ada like?").await.unwrap();
    assert_eq!(out.text, "Ada likes tea.");
    // The model saw the restored history before the new question.
    let last = model.requests().pop().unwrap();
    let seen: Vec<String> = last.history.iter().map(Message::text).collect();
    assert_eq!(
        seen,
        [
            "Ada likes tea.",
            "Noted: Ada likes tea.",
            "What does Ada like?"
        ]
    );
    let sessions = again.sessions().await.unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!((sessions[0].id.as_str(), sessions[0].steps), ("ada", 2));
    model.assert_consumed();
}

#[tokio::test]
async fn two_sessions_never_share_a_log() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .text("hi Ada")
        .text("hi Bo")
        .text("bye Ada");
    let halo = factory(&model, &store);
    let mut ada = halo.session("ada").await.unwrap();
    let mut bo = halo.session("bo").await.unwrap();
    ada.generate_text("I am Ada").await.unwrap();
    bo.generate_text("I am Bo").await.unwrap();
    ada.generate_text("bye").await.unwrap();
    assert_eq!(texts(&ada), ["I am Ada", "hi Ada", "bye", "bye Ada"]);
    assert_eq!(texts(&bo), ["I am Bo", "hi Bo"]);
    // Bo's request carried none of Ada's messages, Ada's second none of Bo's.
    let requests = model.requests();
    let history =
        |i: usize| -> Vec<String> { requests[i].history.iter().map(Message::text).collect() };
    assert_eq!(history(1), ["I am Bo"]);
    assert_eq!(history(2), ["I am Ada", "hi Ada", "bye"]);
    // And the store keeps them apart.
    let restored_bo = halo.session("bo").await.unwrap();
    assert_eq!(texts(&restored_bo), ["I am Bo", "hi Bo"]);
    model.assert_consumed();
}

#[tokio::test]
async fn every_session_shares_the_factorys_prefix_bytes() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new().text("one").text("two");
    let halo = factory(&model, &store);
    let shared = halo.prefix().canonical_bytes();
    let mut sessions = Vec::new();
    for id in ["a", "b", "c"] {
        sessions.push(halo.session(id).await.unwrap());
    }
    sessions[0].generate_text("first").await.unwrap();
    sessions[1].generate_text("second").await.unwrap();
    for s in &sessions {
        // The same bytes in memory, not equal copies: the canonical bytes, and the parts
        // they were made of (the system prompt, the tool specs).
        assert!(
            std::ptr::eq(s.prefix().canonical_bytes(), shared),
            "{}",
            s.id()
        );
        assert!(std::ptr::eq(s.prefix().system(), halo.prefix().system()));
        assert!(std::ptr::eq(s.prefix().tools(), halo.prefix().tools()));
        assert_eq!(s.prefix().fingerprint(), halo.prefix().fingerprint());
    }
    // And the same bytes in every request, so the provider caches them once.
    let requests = model.requests();
    assert_eq!(requests[0].prefix_bytes, shared);
    assert_eq!(requests[1].prefix_bytes, shared);
    // A session that changes its own prefix changes no one else's.
    sessions[2].set_system("You keep notes for a team.");
    assert_ne!(
        sessions[2].prefix().fingerprint(),
        halo.prefix().fingerprint()
    );
    assert!(std::ptr::eq(sessions[0].prefix().canonical_bytes(), shared));
    assert!(std::ptr::eq(halo.prefix().canonical_bytes(), shared));
    assert_eq!(halo.prefix().system(), "You keep notes for one person.");
}

#[tokio::test]
async fn a_session_another_owner_holds_is_in_use_until_released() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new().text("noted").text("noted again");
    let clock = SetClock::at(T0);
    let leased = |owner: &str| {
        Halo::new(
            HaloAgent::builder(model.clone()).clock(clock.clone()),
            Arc::new(store.clone()),
        )
        .leased(owner, 10_000)
    };
    let (one, two) = (leased("worker 1"), leased("worker 2"));
    assert_eq!(one.owner(), Some("worker 1"));
    let mut held = one.session("ticket").await.unwrap();
    assert_eq!(held.lease().unwrap().owner, "worker 1");
    held.generate_text("remember this").await.unwrap();

    let err = two.session("ticket").await.unwrap_err();
    let HaloError::Session(SessionError::InUse { holder, .. }) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(holder, "worker 1");
    assert!(err.to_string().contains("is in use by worker 1"), "{err}");

    held.release().await.unwrap();
    let mut taken = two.session("ticket").await.unwrap();
    assert_eq!(texts(&taken), ["remember this", "noted"]);
    taken.generate_text("and this").await.unwrap();
    let restored = two.session("ticket").await.unwrap();
    assert_eq!(
        texts(&restored),
        ["remember this", "noted", "and this", "noted again"]
    );
}

#[tokio::test]
async fn a_session_whose_lease_was_taken_over_is_fenced_and_writes_nothing() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new().text("one").text("never sent");
    let clock = SetClock::at(T0);
    let leased = |owner: &str| {
        Halo::new(
            HaloAgent::builder(model.clone()).clock(clock.clone()),
            Arc::new(store.clone()),
        )
        .leased(owner, 1_000)
    };
    let mut old = leased("worker 1").session("ticket").await.unwrap();
    old.generate_text("first").await.unwrap();
    old.renew().await.unwrap();
    // The lease ran out; another worker took the session over.
    clock.0.store(T0 + 5_000, Ordering::SeqCst);
    let new = leased("worker 2").session("ticket").await.unwrap();
    assert!(new.lease().unwrap().fence > old.lease().unwrap().fence);
    let before = store.session_events("ticket");

    let err = old.generate_text("second").await.unwrap_err();
    let HaloError::Session(SessionError::Fenced { holder, .. }) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(holder.as_deref(), Some("worker 2"));
    assert_eq!(store.session_events("ticket"), before);
    let err = old.renew().await.unwrap_err();
    assert!(
        matches!(err, HaloError::Session(SessionError::Fenced { .. })),
        "{err:?}"
    );
}

// Without leases, a session given twice is two writers on one journal: the second to append
// is refused, never merged.
#[tokio::test]
async fn a_session_given_twice_without_leases_refuses_the_second_writer() {
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .text("first answer")
        .text("second answer");
    let halo = factory(&model, &store);
    let mut first = halo.session("s").await.unwrap();
    let mut second = halo.session("s").await.unwrap();
    assert!(first.lease().is_none());
    first.generate_text("first task").await.unwrap();
    let err = second.generate_text("second task").await.unwrap_err();
    assert!(
        matches!(
            err,
            HaloError::Session(SessionError::Conflict { expected: 0, .. })
        ),
        "{err:?}"
    );
    let restored = halo.session("s").await.unwrap();
    assert_eq!(texts(&restored), ["first task", "first answer"]);
}

// A store that cannot be read gives no session, and the lease taken for it is let go.
#[tokio::test]
async fn a_session_whose_journal_cannot_be_loaded_is_an_error_and_frees_its_lease() {
    let store = MemoryStore::new();
    let damaged = Arc::new(Unreadable(store.clone()));
    let halo = Halo::new(
        HaloAgent::builder(ScriptedModel::new()).clock(SetClock::at(T0)),
        damaged,
    )
    .leased("worker 1", 10_000);
    let err = halo.session("s").await.unwrap_err();
    assert!(
        matches!(err, HaloError::Session(SessionError::Corrupt { .. })),
        "{err:?}"
    );
    // Another owner can take the session at once.
    store.acquire("s", "worker 2", 10_000, T0).await.unwrap();
}

/// A store whose journals are all damaged.
struct Unreadable(MemoryStore);

#[halo_core::async_trait]
impl SessionStore for Unreadable {
    async fn append(&self, append: halo_core::session::Append<'_>) -> Result<u64, SessionError> {
        self.0.append(append).await
    }
    async fn load(&self, _: &str) -> Result<Vec<halo_core::JournalEvent>, SessionError> {
        Err(SessionError::Corrupt {
            location: "test".into(),
            entry: 1,
            message: "damaged".into(),
        })
    }
    async fn list(&self) -> Result<Vec<halo_core::SessionInfo>, SessionError> {
        self.0.list().await
    }
    async fn delete(&self, session: &str) -> Result<(), SessionError> {
        self.0.delete(session).await
    }
    async fn acquire(
        &self,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<halo_core::Lease, SessionError> {
        self.0.acquire(session, owner, ttl_ms, now_ms).await
    }
    async fn renew(
        &self,
        lease: &halo_core::Lease,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<halo_core::Lease, SessionError> {
        self.0.renew(lease, ttl_ms, now_ms).await
    }
    async fn release(&self, lease: &halo_core::Lease) -> Result<(), SessionError> {
        self.0.release(lease).await
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Turns interleaved over a few sessions, each session dropped and restored between its
    /// turns or kept: every session's log, live and restored, is its own turns in order.
    #[test]
    fn interleaved_sessions_each_keep_only_their_own_turns(
        turns in proptest::collection::vec((0usize..4, any::<bool>()), 1..24)
    ) {
        futures::executor::block_on(async {
            let store = MemoryStore::new();
            let mut model = ScriptedModel::new();
            for (i, (s, _)) in turns.iter().enumerate() {
                model = model.text(format!("answer {i} to s{s}"));
            }
            let halo = factory(&model, &store);
            let mut live: Vec<Option<Session>> = (0..4).map(|_| None).collect();
            let mut expected: Vec<Vec<String>> = vec![Vec::new(); 4];
            for (i, (s, keep)) in turns.iter().enumerate() {
                let mut session = match live[*s].take() {
                    Some(session) => session,
                    None => halo.session(format!("s{s}")).await.unwrap(),
                };
                session.generate_text(format!("turn {i} of s{s}")).await.unwrap();
                expected[*s].push(format!("turn {i} of s{s}"));
                expected[*s].push(format!("answer {i} to s{s}"));
                prop_assert_eq!(texts(&session), expected[*s].clone());
                if *keep {
                    live[*s] = Some(session);
                }
            }
            for (s, want) in expected.iter().enumerate() {
                let restored = halo.session(format!("s{s}")).await.unwrap();
                prop_assert_eq!(&texts(&restored), want);
            }
            model.assert_consumed();
            Ok(())
        })?;
    }
}
