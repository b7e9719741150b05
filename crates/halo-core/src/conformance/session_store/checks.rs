//! The checks of the session store suite, each on a fresh fixture.

use futures::future::BoxFuture;

use super::{
    Checked, StoreFixture, Verdict, ensure, events, get, history, listed, newer, ok, put, step,
};
use crate::message::Message;
use crate::session::{Append, JournalEvent, SessionError, SessionInfo};

/// One check.
pub(super) type CheckFn = for<'a> fn(&'a mut dyn StoreFixture) -> BoxFuture<'a, Checked>;

/// Every check, in the order the report lists them.
pub(super) const ALL: &[(&str, CheckFn)] = &[
    ("appends_load_in_order", appends_load_in_order),
    ("an_unknown_session_is_empty", an_unknown_session_is_empty),
    (
        "the_expected_sequence_is_checked",
        the_expected_sequence_is_checked,
    ),
    (
        "an_empty_append_checks_and_writes_nothing",
        an_empty_append_checks_and_writes_nothing,
    ),
    ("sessions_are_kept_apart", sessions_are_kept_apart),
    (
        "two_concurrent_writers_one_wins",
        two_concurrent_writers_one_wins,
    ),
    ("a_torn_last_entry_is_skipped", a_torn_last_entry_is_skipped),
    ("a_damaged_entry_is_corrupt", a_damaged_entry_is_corrupt),
    ("a_newer_format_is_refused", a_newer_format_is_refused),
    (
        "a_compaction_boundary_restores_the_rewritten_history",
        a_compaction_boundary_restores_the_rewritten_history,
    ),
    ("large_entries_round_trip", large_entries_round_trip),
    (
        "list_gives_id_last_update_and_steps",
        list_gives_id_last_update_and_steps,
    ),
    ("delete_removes_one_session", delete_removes_one_session),
    (
        "a_lease_excludes_others_until_it_expires",
        a_lease_excludes_others_until_it_expires,
    ),
    ("a_taken_over_lease_is_fenced", a_taken_over_lease_is_fenced),
    (
        "a_released_lease_is_free_at_once",
        a_released_lease_is_free_at_once,
    ),
    (
        "leases_are_per_session_and_survive_delete",
        leases_are_per_session_and_survive_delete,
    ),
    (
        "two_concurrent_acquires_one_wins",
        two_concurrent_acquires_one_wins,
    ),
];

/// The time the checks start at, in ms since the Unix epoch.
const T0: u64 = 1_800_000_000_000;

mod leases;

use leases::{
    a_lease_excludes_others_until_it_expires, a_released_lease_is_free_at_once,
    a_taken_over_lease_is_fenced, leases_are_per_session_and_survive_delete,
    two_concurrent_acquires_one_wins,
};

fn appends_load_in_order(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        let all = events(12, T0);
        let mut at = 0;
        for chunk in [&all[..1], &all[1..5], &all[5..6], &all[6..]] {
            at = put(store.as_ref(), "order", at, chunk, T0).await?;
        }
        let loaded = get(store.as_ref(), "order").await?;
        ensure!(
            loaded == all,
            "load returned {} events that differ from the {} appended (order or content)",
            loaded.len(),
            all.len()
        );
        Ok(Verdict::Done)
    })
}

fn an_unknown_session_is_empty(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        ensure!(
            get(store.as_ref(), "never-written").await?.is_empty(),
            "a session never written loads events"
        );
        ensure!(
            listed(store.as_ref()).await?.is_empty(),
            "a new store lists sessions"
        );
        Ok(Verdict::Done)
    })
}

/// The error must be a conflict with these numbers.
fn conflict(r: Result<u64, SessionError>, expected: u64, found: u64) -> Result<(), String> {
    match r {
        Err(SessionError::Conflict {
            expected: e,
            found: f,
            ..
        }) if (e, f) == (expected, found) => Ok(()),
        other => Err(format!(
            "an append at {expected} to a session of {found} entries answered {other:?}, not Conflict {{ expected: {expected}, found: {found} }}"
        )),
    }
}

fn the_expected_sequence_is_checked(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        let first = events(3, T0);
        put(store.as_ref(), "seq", 0, &first, T0).await?;
        let more = events(2, T0 + 100);
        // Behind (a writer that loaded before another appended) and ahead (a gap).
        for stale in [0, 1, 2, 4, 9] {
            conflict(
                store.append(Append::new("seq", stale, &more, T0)).await,
                stale,
                3,
            )?;
        }
        ensure!(
            get(store.as_ref(), "seq").await? == first,
            "a refused append changed the session"
        );
        put(store.as_ref(), "seq", 3, &more, T0).await?;
        ensure!(
            get(store.as_ref(), "seq").await? == [first, more].concat(),
            "the append at the right sequence number is not what loads"
        );
        Ok(Verdict::Done)
    })
}

fn an_empty_append_checks_and_writes_nothing(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        ensure!(
            ok(
                "empty append",
                store.append(Append::new("empty", 0, &[], T0)).await
            )? == 0,
            "an empty append to a new session does not answer 0"
        );
        ensure!(
            listed(store.as_ref()).await?.is_empty(),
            "an empty append created a listed session"
        );
        put(store.as_ref(), "empty", 0, &events(2, T0), T0).await?;
        ensure!(
            ok(
                "empty append",
                store.append(Append::new("empty", 2, &[], T0)).await
            )? == 2,
            "an empty append at the session's length does not answer it"
        );
        conflict(store.append(Append::new("empty", 1, &[], T0)).await, 1, 2)?;
        ensure!(
            get(store.as_ref(), "empty").await?.len() == 2,
            "an empty append changed the session"
        );
        Ok(Verdict::Done)
    })
}

fn sessions_are_kept_apart(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        let a = events(3, T0);
        let b = events(5, T0 + 50);
        put(store.as_ref(), "a", 0, &a[..1], T0).await?;
        put(store.as_ref(), "b", 0, &b, T0).await?;
        put(store.as_ref(), "a", 1, &a[1..], T0).await?;
        // Ids that differ only in case or by a separator character are other sessions.
        put(store.as_ref(), "A", 0, &b[..1], T0).await?;
        put(store.as_ref(), "a:b", 0, &b[..2], T0).await?;
        ensure!(
            get(store.as_ref(), "a").await? == a,
            "session a mixes with others"
        );
        ensure!(
            get(store.as_ref(), "b").await? == b,
            "session b mixes with others"
        );
        ensure!(
            get(store.as_ref(), "A").await? == b[..1],
            "session A mixes with others"
        );
        ensure!(
            get(store.as_ref(), "a:b").await? == b[..2],
            "session a:b mixes with others"
        );
        Ok(Verdict::Done)
    })
}

fn two_concurrent_writers_one_wins(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let one = fx.store();
        let two = fx.second().await;
        for round in 0..10u64 {
            let session = format!("race-{round}");
            let seed = events(2, T0);
            put(one.as_ref(), &session, 0, &seed, T0).await?;
            let mine = events(3, T0 + 1_000);
            let theirs = events(4, T0 + 2_000);
            // Both loaded the seed; both append at its end at once.
            let (a, b) = futures::join!(
                one.append(Append::new(&session, 2, &mine, T0)),
                two.append(Append::new(&session, 2, &theirs, T0)),
            );
            let winner = match (&a, &b) {
                (Ok(5), Err(SessionError::Conflict { expected: 2, .. })) => &mine,
                (Err(SessionError::Conflict { expected: 2, .. }), Ok(6)) => &theirs,
                _ => {
                    return Err(format!(
                        "round {round}: two writers at sequence 2 answered {a:?} and {b:?}; exactly one must win and the other get Conflict"
                    ));
                }
            };
            let loaded = get(one.as_ref(), &session).await?;
            ensure!(
                loaded == [&seed[..], &winner[..]].concat(),
                "round {round}: the session holds {} events, not the seed and the winner's alone (merged?)",
                loaded.len()
            );
            ensure!(
                get(two.as_ref(), &session).await? == loaded,
                "round {round}: the second handle loads something else"
            );
        }
        Ok(Verdict::Done)
    })
}

fn a_torn_last_entry_is_skipped(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let all = events(4, T0);
        put(fx.store().as_ref(), "torn", 0, &all[..3], T0).await?;
        if !fx.tear("torn").await? {
            return Ok(Verdict::Skip(
                "the store writes entries atomically: none can be torn".into(),
            ));
        }
        let store = fx.store();
        let loaded = get(store.as_ref(), "torn").await?;
        ensure!(
            loaded == all[..2],
            "after the last entry was cut, load gave {} events, not the 2 before it",
            loaded.len()
        );
        put(store.as_ref(), "torn", 2, &all[3..], T0).await?;
        ensure!(
            get(store.as_ref(), "torn").await? == [&all[..2], &all[3..]].concat(),
            "the append after a torn entry does not load as the complete entries and it"
        );
        Ok(Verdict::Done)
    })
}

fn a_damaged_entry_is_corrupt(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        put(fx.store().as_ref(), "damaged", 0, &events(4, T0), T0).await?;
        put(fx.store().as_ref(), "intact", 0, &events(2, T0), T0).await?;
        if !fx.damage("damaged", 1).await? {
            return Ok(Verdict::Skip("the harness cannot damage this store".into()));
        }
        let store = fx.store();
        match store.load("damaged").await {
            Err(SessionError::Corrupt { .. }) => {}
            other => {
                return Err(format!(
                    "a session whose entry 1 of 4 is damaged loads as {other:?}, not Corrupt"
                ));
            }
        }
        Ok(Verdict::Done)
    })
}

fn a_newer_format_is_refused(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        put(fx.store().as_ref(), "newer", 0, &events(2, T0), T0).await?;
        if !fx.newer_format("newer", newer()).await? {
            return Ok(Verdict::Skip(
                "the harness cannot mark this store as written by a newer format".into(),
            ));
        }
        let store = fx.store();
        match store.load("newer").await {
            Err(SessionError::NewerFormat { found, .. }) if found == newer() => {}
            other => {
                return Err(format!(
                    "a session of format {} loads as {other:?}, not NewerFormat",
                    newer()
                ));
            }
        }
        match store
            .append(Append::new("newer", 2, &events(1, T0), T0))
            .await
        {
            Err(SessionError::NewerFormat { .. }) => {}
            other => {
                return Err(format!(
                    "an append to a session of format {} answered {other:?}, not NewerFormat",
                    newer()
                ));
            }
        }
        Ok(Verdict::Done)
    })
}

fn a_compaction_boundary_restores_the_rewritten_history(
    fx: &mut dyn StoreFixture,
) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        let before = events(8, T0);
        let rewritten = vec![
            Message::user("summary: the user asked for the tests; they pass"),
            Message::assistant("Noted."),
        ];
        let boundary = JournalEvent::CompactBoundary {
            history: rewritten.clone(),
            injected: vec![],
            discardable: vec![1],
            reason: Some("a compaction replaced 8 messages by the model's summary".into()),
            at_ms: T0 + 10,
        };
        let after = JournalEvent::User {
            message: Message::user("and now the docs"),
            injected: false,
            at_ms: T0 + 11,
        };
        let at = put(store.as_ref(), "compact", 0, &before, T0).await?;
        put(store.as_ref(), "compact", at, &[boundary, after], T0).await?;
        let loaded = get(store.as_ref(), "compact").await?;
        let mut expected = rewritten;
        expected.push(Message::user("and now the docs"));
        ensure!(
            history(&loaded) == expected,
            "the restored history is not the rewritten one and what followed: {:?}",
            history(&loaded)
        );
        Ok(Verdict::Done)
    })
}

fn large_entries_round_trip(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        // A 4 MiB tool result and a 2.5 MiB user message, multibyte characters included.
        let big = vec![
            JournalEvent::User {
                message: Message::user("ß€𝄞".repeat(1 << 18)),
                injected: false,
                at_ms: T0,
            },
            step(1, T0 + 1, 4 << 20),
        ];
        put(store.as_ref(), "large", 0, &big, T0).await?;
        put(store.as_ref(), "large", 2, &events(3, T0 + 2), T0).await?;
        let loaded = get(store.as_ref(), "large").await?;
        ensure!(
            loaded.len() == 5 && loaded[..2] == big[..],
            "large entries do not load as written"
        );
        Ok(Verdict::Done)
    })
}

fn list_gives_id_last_update_and_steps(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        // events(): one step in each four, at index 1.
        put(store.as_ref(), "alpha", 0, &events(4, T0), T0 + 10).await?;
        put(store.as_ref(), "beta", 0, &events(2, T0), T0 + 20).await?;
        put(store.as_ref(), "beta", 2, &events(6, T0), T0 + 30).await?;
        ok(
            "empty append",
            store.append(Append::new("gamma", 0, &[], T0)).await,
        )?;
        let expected = vec![
            SessionInfo {
                id: "alpha".into(),
                updated_ms: T0 + 10,
                steps: 1,
                entries: 4,
            },
            SessionInfo {
                id: "beta".into(),
                updated_ms: T0 + 30,
                steps: 3,
                entries: 8,
            },
        ];
        let list = listed(store.as_ref()).await?;
        ensure!(list == expected, "list gave {list:?}, not {expected:?}");
        ensure!(
            listed(fx.second().await.as_ref()).await? == expected,
            "a second handle lists something else"
        );
        Ok(Verdict::Done)
    })
}

fn delete_removes_one_session(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        put(store.as_ref(), "gone", 0, &events(3, T0), T0).await?;
        put(store.as_ref(), "kept", 0, &events(2, T0), T0).await?;
        ok("delete", store.delete("gone").await)?;
        ok(
            "delete of a session never written",
            store.delete("never").await,
        )?;
        ensure!(
            get(store.as_ref(), "gone").await?.is_empty(),
            "a deleted session still loads events"
        );
        ensure!(
            get(store.as_ref(), "kept").await? == events(2, T0),
            "deleting one session changed another"
        );
        let ids: Vec<String> = listed(store.as_ref())
            .await?
            .into_iter()
            .map(|s| s.id)
            .collect();
        ensure!(ids == ["kept"], "after delete, list gives {ids:?}");
        // A deleted session starts again at 0.
        conflict(
            store
                .append(Append::new("gone", 3, &events(1, T0), T0))
                .await,
            3,
            0,
        )?;
        put(store.as_ref(), "gone", 0, &events(1, T0 + 5), T0).await?;
        ensure!(
            get(store.as_ref(), "gone").await? == events(1, T0 + 5),
            "a session written again after delete holds old events"
        );
        Ok(Verdict::Done)
    })
}
