//! Session stores: the conformance suite on `MemoryStore` and on deliberately broken stores
//! (the suite can fail), and the agent's side of the contract — a second writer is refused,
//! never merged; a taken-over lease fences the old holder.

use std::sync::Arc;

use async_trait::async_trait;
use halo_core::conformance::session_store::{self, Outcome, StoreFixture, StoreHarness};
use halo_core::session::{
    Append, JournalEvent, Lease, MemoryStore, SessionError, SessionInfo, SessionStore,
};
use halo_core::testing::ScriptedModel;
use halo_core::{HaloAgent, HaloError, Message};

struct Memory;
struct MemoryFixture(MemoryStore);

#[async_trait]
impl StoreHarness for Memory {
    fn name(&self) -> String {
        "MemoryStore".into()
    }
    async fn fixture(&self) -> Result<Box<dyn StoreFixture>, String> {
        Ok(Box::new(MemoryFixture(MemoryStore::new())))
    }
}

#[async_trait]
impl StoreFixture for MemoryFixture {
    fn store(&self) -> Arc<dyn SessionStore> {
        Arc::new(self.0.clone())
    }
    async fn second(&self) -> Arc<dyn SessionStore> {
        Arc::new(self.0.clone())
    }
}

#[tokio::test]
async fn memory_store_passes_the_conformance_suite() {
    let report = session_store::run(&Memory).await;
    report.assert_passed();
    let skipped: Vec<&str> = report.skipped().map(|c| c.name).collect();
    assert_eq!(
        skipped,
        [
            "a_torn_last_entry_is_skipped",
            "a_damaged_entry_is_corrupt",
            "a_newer_format_is_refused"
        ],
        "{report}"
    );
    assert_eq!(report.checks.len(), 18);
}

/// What a broken store gets wrong.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Flaw {
    /// Appends at the end whatever the writer expected: two writers merge.
    IgnoresExpected,
    /// Appends under any fence.
    IgnoresFence,
    /// Never lets a lease expire.
    LeasesNeverExpire,
    /// Lists a session's entries as its steps.
    CountsEntriesAsSteps,
}

/// A `MemoryStore` with one flaw.
struct Broken {
    inner: MemoryStore,
    flaw: Flaw,
}

#[async_trait]
impl SessionStore for Broken {
    async fn append(&self, append: Append<'_>) -> Result<u64, SessionError> {
        let mut append = append;
        if self.flaw == Flaw::IgnoresExpected {
            append.expected = self.inner.load(append.session).await?.len() as u64;
        }
        if self.flaw == Flaw::IgnoresFence {
            append.fence = None;
        }
        self.inner.append(append).await
    }
    async fn load(&self, session: &str) -> Result<Vec<JournalEvent>, SessionError> {
        self.inner.load(session).await
    }
    async fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let mut list = self.inner.list().await?;
        if self.flaw == Flaw::CountsEntriesAsSteps {
            for info in &mut list {
                info.steps = info.entries;
            }
        }
        Ok(list)
    }
    async fn delete(&self, session: &str) -> Result<(), SessionError> {
        self.inner.delete(session).await
    }
    async fn acquire(
        &self,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Lease, SessionError> {
        let ttl_ms = if self.flaw == Flaw::LeasesNeverExpire {
            u64::MAX / 2
        } else {
            ttl_ms
        };
        self.inner.acquire(session, owner, ttl_ms, now_ms).await
    }
    async fn renew(&self, lease: &Lease, ttl_ms: u64, now_ms: u64) -> Result<Lease, SessionError> {
        self.inner.renew(lease, ttl_ms, now_ms).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), SessionError> {
        self.inner.release(lease).await
    }
}

struct BrokenHarness(Flaw);
struct BrokenFixture(Arc<Broken>);

#[async_trait]
impl StoreHarness for BrokenHarness {
    fn name(&self) -> String {
        format!("broken ({:?})", self.0)
    }
    async fn fixture(&self) -> Result<Box<dyn StoreFixture>, String> {
        Ok(Box::new(BrokenFixture(Arc::new(Broken {
            inner: MemoryStore::new(),
            flaw: self.0,
        }))))
    }
}

#[async_trait]
impl StoreFixture for BrokenFixture {
    fn store(&self) -> Arc<dyn SessionStore> {
        self.0.clone()
    }
    async fn second(&self) -> Arc<dyn SessionStore> {
        self.0.clone()
    }
}

#[tokio::test]
async fn the_suite_fails_on_a_broken_store_and_says_which_contract_it_breaks() {
    for (flaw, broken) in [
        (
            Flaw::IgnoresExpected,
            &[
                "the_expected_sequence_is_checked",
                "an_empty_append_checks_and_writes_nothing",
                "two_concurrent_writers_one_wins",
                "delete_removes_one_session",
            ][..],
        ),
        (
            Flaw::IgnoresFence,
            &[
                "a_taken_over_lease_is_fenced",
                "a_released_lease_is_free_at_once",
                "leases_are_per_session_and_survive_delete",
            ][..],
        ),
        (
            Flaw::LeasesNeverExpire,
            &[
                "a_lease_excludes_others_until_it_expires",
                "a_taken_over_lease_is_fenced",
                "leases_are_per_session_and_survive_delete",
            ][..],
        ),
        (
            Flaw::CountsEntriesAsSteps,
            &["list_gives_id_last_update_and_steps"][..],
        ),
    ] {
        let report = session_store::run(&BrokenHarness(flaw)).await;
        let failed: Vec<&str> = report.failures().map(|c| c.name).collect();
        assert_eq!(failed, broken, "{flaw:?}:\n{report}");
        let panicked = std::panic::catch_unwind(|| report.assert_passed());
        assert!(panicked.is_err(), "assert_passed lets {flaw:?} through");
    }
    // The report says what was wrong, for the person reading the test's output.
    let report = session_store::run(&BrokenHarness(Flaw::IgnoresExpected)).await;
    let Some(Outcome::Failed(why)) = report.outcome("two_concurrent_writers_one_wins") else {
        panic!("{report}")
    };
    assert!(why.contains("exactly one must win"), "{why}");
    assert!(
        report
            .to_string()
            .contains("FAIL  the_expected_sequence_is_checked")
    );
}

// Two agents restored from one empty session both start a conversation: before, the second
// one's events were appended after the first one's and a restore merged the two.
#[tokio::test]
async fn a_second_writer_on_one_session_is_refused_and_nothing_is_merged() {
    let store = Arc::new(MemoryStore::new());
    let mut first = HaloAgent::builder(ScriptedModel::new().text("first answer"))
        .session(store.clone())
        .build();
    let mut second = HaloAgent::builder(ScriptedModel::new().text("second answer"))
        .session(store.clone())
        .build();
    first.restore_session().await.unwrap();
    second.restore_session().await.unwrap();
    first.generate_text("first task").await.unwrap();
    let err = second.generate_text("second task").await.unwrap_err();
    assert!(
        matches!(
            &err,
            HaloError::Session(SessionError::Conflict { expected: 0, .. })
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("another writer changed it"),
        "{err}"
    );
    let mut restored = HaloAgent::builder(ScriptedModel::new())
        .session(store.clone())
        .build();
    restored.restore_session().await.unwrap();
    let texts: Vec<String> = restored.log().messages().map(Message::text).collect();
    assert_eq!(texts, ["first task", "first answer"]);
}

#[tokio::test]
async fn an_agent_whose_lease_was_taken_over_is_fenced_and_writes_nothing() {
    let store = Arc::new(MemoryStore::new());
    let t0 = 1_800_000_000_000;
    let lease = store.acquire("team", "process 1", 1_000, t0).await.unwrap();
    let mut agent = HaloAgent::builder(ScriptedModel::new().text("one").text("two"))
        .session(store.clone())
        .session_lease(&lease)
        .build();
    agent.generate_text("first").await.unwrap();
    assert_eq!(agent.session_name(), "team");
    // The task, the prefix, the step and the outcome.
    assert_eq!(store.session_events("team").len(), 4);
    // The lease ran out and another process took the session over.
    let taken = store
        .acquire("team", "process 2", 1_000, t0 + 5_000)
        .await
        .unwrap();
    let before = store.session_events("team");
    let err = agent.generate_text("second").await.unwrap_err();
    let HaloError::Session(SessionError::Fenced {
        holder, current, ..
    }) = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (holder.as_deref(), *current),
        (Some("process 2"), taken.fence)
    );
    assert!(
        err.to_string().contains("the session is held by process 2"),
        "{err}"
    );
    assert_eq!(store.session_events("team"), before);
    assert!(store.events().is_empty(), "nothing in the default session");
}

#[tokio::test]
async fn agents_on_named_sessions_of_one_store_keep_apart() {
    let store = Arc::new(MemoryStore::new());
    for (name, answer) in [("alice", "hi alice"), ("bob", "hi bob")] {
        let mut agent = HaloAgent::builder(ScriptedModel::new().text(answer))
            .session_named(store.clone(), name)
            .build();
        agent.generate_text(format!("I am {name}")).await.unwrap();
    }
    let mut ids: Vec<String> = store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    ids.sort();
    assert_eq!(ids, ["alice", "bob"]);
    let mut bob = HaloAgent::builder(ScriptedModel::new())
        .session_named(store.clone(), "bob")
        .build();
    bob.restore_session().await.unwrap();
    let texts: Vec<String> = bob.log().messages().map(Message::text).collect();
    assert_eq!(texts, ["I am bob", "hi bob"]);
}

#[tokio::test]
async fn custom_records_in_a_session_are_skipped_on_restore() {
    // An application keeps its own records between the engine's (a gateway's stream parts).
    let store = Arc::new(MemoryStore::new());
    let mut agent = HaloAgent::builder(ScriptedModel::new().text("hi"))
        .session_named(store.clone(), "chat")
        .build();
    agent.generate_text("hello").await.unwrap();
    let held = store.load("chat").await.unwrap().len() as u64;
    let note = JournalEvent::Custom {
        kind: "acme.note".into(),
        data: serde_json::json!({"seen": true}),
        at_ms: 7,
    };
    store
        .append(Append::new("chat", held, std::slice::from_ref(&note), 7))
        .await
        .unwrap();
    let mut restored = HaloAgent::builder(ScriptedModel::new().text("again"))
        .session_named(store.clone(), "chat")
        .build();
    restored.restore_session().await.unwrap();
    assert_eq!(restored.log().to_vec(), agent.log().to_vec());
    // The restored agent appends after the record, which stays where it was.
    restored.generate_text("more").await.unwrap();
    let events = store.load("chat").await.unwrap();
    assert_eq!(events[held as usize], note);
    let texts: Vec<String> = restored.log().messages().map(Message::text).collect();
    assert_eq!(texts, ["hello", "hi", "more", "again"]);
}
