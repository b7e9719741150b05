//! The rate limit on failed logins: per user name, the first [`FREE_FAILURES`] failures
//! in a row cost nothing; each one after locks the name for twice as long as the one
//! before (1 s, 2 s, 4 s, ... up to [`MAX_LOCK_MS`]). A success clears the count. Kept in
//! memory: each gateway process counts its own.

use std::collections::HashMap;
use std::sync::Mutex;

/// Failures in a row before logins of a name are slowed down.
pub const FREE_FAILURES: u32 = 5;

/// The longest lock, in ms (15 minutes).
pub const MAX_LOCK_MS: u64 = 15 * 60 * 1000;

/// Names tracked at most; past it, names whose lock has ended are forgotten.
const MAX_NAMES: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    locked_until_ms: u64,
}

/// See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Limiter {
    names: Mutex<HashMap<String, Failures>>,
}

impl Limiter {
    fn names(&self) -> std::sync::MutexGuard<'_, HashMap<String, Failures>> {
        self.names.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Err(ms to wait)` while `name` is locked at `now_ms`.
    pub(crate) fn check(&self, name: &str, now_ms: u64) -> Result<(), u64> {
        match self.names().get(name) {
            Some(f) if f.locked_until_ms > now_ms => Err(f.locked_until_ms - now_ms),
            _ => Ok(()),
        }
    }

    /// Counts a failed login of `name` at `now_ms`.
    pub(crate) fn failed(&self, name: &str, now_ms: u64) {
        let mut names = self.names();
        if names.len() >= MAX_NAMES && !names.contains_key(name) {
            names.retain(|_, f| f.locked_until_ms > now_ms);
        }
        let f = names.entry(name.to_owned()).or_insert(Failures {
            count: 0,
            locked_until_ms: 0,
        });
        f.count += 1;
        if f.count >= FREE_FAILURES {
            let doublings = (f.count - FREE_FAILURES).min(20);
            f.locked_until_ms = now_ms + (1000u64 << doublings).min(MAX_LOCK_MS);
        }
    }

    /// Clears `name`'s failures.
    pub(crate) fn succeeded(&self, name: &str) {
        self.names().remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_past_the_free_ones_lock_the_name_for_longer_each_time() {
        let limiter = Limiter::default();
        let mut now = 1_000_000;
        for _ in 0..FREE_FAILURES - 1 {
            limiter.failed("ann", now);
            assert_eq!(limiter.check("ann", now), Ok(()));
        }
        let mut locks = Vec::new();
        for _ in 0..4 {
            limiter.failed("ann", now);
            let wait = limiter.check("ann", now).unwrap_err();
            locks.push(wait);
            now += wait;
            assert_eq!(limiter.check("ann", now), Ok(()));
        }
        assert_eq!(locks, [1000, 2000, 4000, 8000]);
        assert_eq!(limiter.check("bob", now), Ok(()));
        limiter.succeeded("ann");
        limiter.failed("ann", now);
        assert_eq!(limiter.check("ann", now), Ok(()));
    }
}
