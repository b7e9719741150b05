//! The lease checks: exclusion until expiry, take-over and fencing, release, per-session
//! leases whose fences survive a delete, two owners acquiring at once.

use futures::future::BoxFuture;

use super::super::{Checked, StoreFixture, Verdict, ensure, events, get, ok, put};
use super::T0;
use crate::session::{Append, SessionError};

/// The error must say the session is in use by `holder`.
fn in_use<T: std::fmt::Debug>(r: Result<T, SessionError>, holder: &str) -> Result<(), String> {
    match r {
        Err(SessionError::InUse { holder: h, .. }) if h == holder => Ok(()),
        other => Err(format!(
            "acquiring a session {holder} holds answered {other:?}, not InUse naming {holder}"
        )),
    }
}

pub(super) fn a_lease_excludes_others_until_it_expires(
    fx: &mut dyn StoreFixture,
) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        let a = ok(
            "acquire",
            store.acquire("leased", "worker a", 500, T0).await,
        )?;
        ensure!(
            a.session == "leased"
                && a.owner == "worker a"
                && a.fence >= 1
                && a.expires_at_ms == T0 + 500,
            "acquire gave {a:?}"
        );
        in_use(
            store.acquire("leased", "worker b", 500, T0 + 200).await,
            "worker a",
        )?;
        let renewed = ok("renew", store.renew(&a, 500, T0 + 400).await)?;
        ensure!(
            renewed.fence == a.fence && renewed.expires_at_ms == T0 + 900,
            "renew gave {renewed:?}: the same fence, expiring at {}",
            T0 + 900
        );
        // Past the first expiry, before the renewed one: still held.
        in_use(
            store.acquire("leased", "worker b", 500, T0 + 600).await,
            "worker a",
        )?;
        // The holder appends under its fence.
        let at = ok(
            "fenced append",
            store
                .append(Append::new("leased", 0, &events(2, T0), T0).fenced(a.fence))
                .await,
        )?;
        ensure!(at == 2, "a fenced append answered {at}");
        let b = ok(
            "acquire after expiry",
            store.acquire("leased", "worker b", 500, T0 + 900).await,
        )?;
        ensure!(
            b.fence > a.fence,
            "the new holder's fence {} is not above {}",
            b.fence,
            a.fence
        );
        Ok(Verdict::Done)
    })
}

/// The error must say the lease `fence` is stale and who holds the session.
fn fenced<T: std::fmt::Debug>(
    r: Result<T, SessionError>,
    fence: u64,
    holder: Option<&str>,
) -> Result<(), String> {
    match r {
        Err(SessionError::Fenced {
            fence: f,
            holder: h,
            ..
        }) if f == fence && h.as_deref() == holder => Ok(()),
        other => Err(format!(
            "a call under the stale fence {fence} answered {other:?}, not Fenced naming {holder:?}"
        )),
    }
}

pub(super) fn a_taken_over_lease_is_fenced(fx: &mut dyn StoreFixture) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        let other = fx.second().await;
        let a = ok("acquire", store.acquire("taken", "worker a", 100, T0).await)?;
        put(store.as_ref(), "taken", 0, &events(2, T0), T0).await?;
        // Worker a stalls past its lease; worker b (another process) takes the session over.
        let b = ok(
            "take over",
            other.acquire("taken", "worker b", 100, T0 + 150).await,
        )?;
        ensure!(
            b.fence > a.fence,
            "the new fence {} is not above {}",
            b.fence,
            a.fence
        );
        fenced(
            store
                .append(Append::new("taken", 2, &events(3, T0), T0).fenced(a.fence))
                .await,
            a.fence,
            Some("worker b"),
        )?;
        fenced(
            store.renew(&a, 100, T0 + 160).await,
            a.fence,
            Some("worker b"),
        )?;
        ensure!(
            get(store.as_ref(), "taken").await?.len() == 2,
            "the fenced append wrote events"
        );
        put(other.as_ref(), "taken", 2, &events(1, T0), T0).await?;
        let at = ok(
            "the new holder's fenced append",
            other
                .append(Append::new("taken", 3, &events(1, T0), T0).fenced(b.fence))
                .await,
        )?;
        ensure!(at == 4, "the new holder's append answered {at}");
        Ok(Verdict::Done)
    })
}

pub(super) fn a_released_lease_is_free_at_once(
    fx: &mut dyn StoreFixture,
) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        let a = ok(
            "acquire",
            store.acquire("free", "worker a", 10_000, T0).await,
        )?;
        ok("release", store.release(&a).await)?;
        fenced(
            store
                .append(Append::new("free", 0, &events(1, T0), T0).fenced(a.fence))
                .await,
            a.fence,
            None,
        )?;
        let b = ok(
            "acquire after release",
            store.acquire("free", "worker b", 10_000, T0 + 1).await,
        )?;
        ensure!(
            b.fence > a.fence,
            "the fence did not grow: {} after {}",
            b.fence,
            a.fence
        );
        // Releasing the stale lease again frees nothing.
        ok("release of a stale lease", store.release(&a).await)?;
        in_use(
            store.acquire("free", "worker c", 10_000, T0 + 2).await,
            "worker b",
        )?;
        // The same owner acquiring again gets a new fence; its old one is stale.
        let b2 = ok(
            "acquire by the holder",
            store.acquire("free", "worker b", 10_000, T0 + 3).await,
        )?;
        ensure!(
            b2.fence > b.fence,
            "re-acquiring gave fence {} after {}",
            b2.fence,
            b.fence
        );
        fenced(
            store
                .append(Append::new("free", 0, &events(1, T0), T0).fenced(b.fence))
                .await,
            b.fence,
            Some("worker b"),
        )?;
        Ok(Verdict::Done)
    })
}

pub(super) fn leases_are_per_session_and_survive_delete(
    fx: &mut dyn StoreFixture,
) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let store = fx.store();
        let one = ok("acquire", store.acquire("one", "worker a", 100, T0).await)?;
        let two = ok(
            "acquire of another session",
            store.acquire("two", "worker b", 100, T0).await,
        )?;
        ensure!(two.session == "two", "acquire gave {two:?}");
        put(store.as_ref(), "one", 0, &events(2, T0), T0).await?;
        ok("delete", store.delete("one").await)?;
        // Fences never go back, even across a delete: a stale writer stays fenced.
        let again = ok(
            "acquire after expiry",
            store.acquire("one", "worker c", 100, T0 + 100).await,
        )?;
        ensure!(
            again.fence > one.fence,
            "the fence went back after delete: {} after {}",
            again.fence,
            one.fence
        );
        fenced(
            store
                .append(Append::new("one", 0, &events(1, T0), T0).fenced(one.fence))
                .await,
            one.fence,
            Some("worker c"),
        )?;
        Ok(Verdict::Done)
    })
}

pub(super) fn two_concurrent_acquires_one_wins(
    fx: &mut dyn StoreFixture,
) -> BoxFuture<'_, Checked> {
    Box::pin(async move {
        let one = fx.store();
        let two = fx.second().await;
        for round in 0..10u64 {
            let session = format!("contended-{round}");
            let (a, b) = futures::join!(
                one.acquire(&session, "worker a", 1_000, T0),
                two.acquire(&session, "worker b", 1_000, T0),
            );
            match (&a, &b) {
                (Ok(_), Err(SessionError::InUse { holder, .. })) if holder == "worker a" => {}
                (Err(SessionError::InUse { holder, .. }), Ok(_)) if holder == "worker b" => {}
                _ => {
                    return Err(format!(
                        "round {round}: two owners acquiring at once answered {a:?} and {b:?}; exactly one must hold the session"
                    ));
                }
            }
        }
        Ok(Verdict::Done)
    })
}
