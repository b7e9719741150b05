//! The [`SessionStore`] conformance suite: every store in this workspace passes it, and a
//! store of your own can run it from a test (the model is LangGraph's
//! `checkpoint-conformance` and the Claude Agent SDK's session-store harness).
//!
//! Implement [`StoreHarness`] (a new, empty store per check) and [`StoreFixture`] (the store
//! and the raw access that the damage checks need), then run [`run`] and assert on its
//! [`Report`]:
//!
//! ```
//! use std::sync::Arc;
//! use halo_core::conformance::session_store::{self, StoreFixture, StoreHarness};
//! use halo_core::session::{MemoryStore, SessionStore};
//!
//! struct Memory;
//! struct Fixture(MemoryStore);
//!
//! #[halo_core::async_trait]
//! impl StoreHarness for Memory {
//!     fn name(&self) -> String { "memory".into() }
//!     async fn fixture(&self) -> Result<Box<dyn StoreFixture>, String> {
//!         Ok(Box::new(Fixture(MemoryStore::new())))
//!     }
//! }
//!
//! #[halo_core::async_trait]
//! impl StoreFixture for Fixture {
//!     fn store(&self) -> Arc<dyn SessionStore> { Arc::new(self.0.clone()) }
//!     async fn second(&self) -> Arc<dyn SessionStore> { Arc::new(self.0.clone()) }
//!     // Memory cannot be torn, damaged or written by a newer version: those checks are
//!     // skipped (the default methods say so).
//! }
//!
//! # futures::executor::block_on(async {
//! let report = session_store::run(&Memory).await;
//! report.assert_passed();
//! assert!(report.skipped().count() >= 3);
//! # });
//! ```
//!
//! Each check uses a fresh fixture and its own session ids. Times are synthetic
//! milliseconds (the suite reads no clock), so lease expiry is checked without waiting.
//! Concurrency checks poll two futures at once (`futures::join!`): a store whose writes
//! really overlap (a connection pool, a blocking pool) races them for real.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::engine::RunState;
use crate::message::{AssistantMessage, Message, ToolCall, ToolResult};
use crate::model::{FinishReason, Usage};
use crate::prefix::Fingerprint;
use crate::session::{
    Append, CallStatus, JOURNAL_FORMAT_VERSION, JournalEvent, JournalOutcome, SessionError,
    SessionInfo, SessionStore,
};

mod checks;

/// Makes the stores the suite runs on.
#[async_trait]
pub trait StoreHarness: Send + Sync {
    /// The store's name, for the report.
    fn name(&self) -> String;

    /// A fixture around a new, empty store: a new file, a new database schema, a new key
    /// prefix. Called once per check.
    ///
    /// # Errors
    /// A message saying why the store could not be made (the check then fails with it).
    async fn fixture(&self) -> Result<Box<dyn StoreFixture>, String>;
}

/// One store under test, and raw access to its data for the checks that damage it.
///
/// After [`tear`](Self::tear), [`damage`](Self::damage) or
/// [`newer_format`](Self::newer_format), the suite takes [`store`](Self::store) again: a
/// fixture may reopen its store around the change (as a new process would find it). The
/// suite holds no handle of the store across those calls.
#[async_trait]
pub trait StoreFixture: Send + Sync {
    /// The store under test.
    fn store(&self) -> Arc<dyn SessionStore>;

    /// A second handle on the same data, as a second process or worker would have (a new
    /// connection pool, a new client). A store that one process owns for its lifetime
    /// returns another handle of [`store`](Self::store).
    async fn second(&self) -> Arc<dyn SessionStore>;

    /// Cuts the last entry of `session` short, as a crash in the middle of its write
    /// leaves it. `Ok(false)`: this store's writes are atomic, so it has no torn entries
    /// (the check is skipped).
    ///
    /// # Errors
    /// Why the entry could not be cut.
    async fn tear(&mut self, session: &str) -> Result<bool, String> {
        let _ = session;
        Ok(false)
    }

    /// Makes entry `index` (from 0) of `session` unreadable, as a bad disk or a hand edit
    /// would. `Ok(false)`: not possible for this store (the check is skipped).
    ///
    /// # Errors
    /// Why the entry could not be damaged.
    async fn damage(&mut self, session: &str, index: u64) -> Result<bool, String> {
        let _ = (session, index);
        Ok(false)
    }

    /// Marks `session` as written in journal format `version`, newer than this Halo's, as
    /// a newer Halo writing to it would. `Ok(false)`: not possible for this store (the check
    /// is skipped).
    ///
    /// # Errors
    /// Why the mark could not be made.
    async fn newer_format(&mut self, session: &str, version: u32) -> Result<bool, String> {
        let _ = (session, version);
        Ok(false)
    }
}

/// How one check went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The store kept the contract.
    Passed,
    /// It did not: what was wrong.
    Failed(String),
    /// Not run for this store: why.
    Skipped(String),
}

/// One check of the suite and how it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The check's name (for example `two_concurrent_writers_one_wins`).
    pub name: &'static str,
    /// How it went.
    pub outcome: Outcome,
}

/// What [`run`] found: every check, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The harness's [`name`](StoreHarness::name).
    pub store: String,
    /// Every check.
    pub checks: Vec<Check>,
}

impl Report {
    /// The checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Failed(_)))
    }

    /// The checks that were skipped.
    pub fn skipped(&self) -> impl Iterator<Item = &Check> {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Skipped(_)))
    }

    /// The outcome of the check `name`, if the suite has one.
    pub fn outcome(&self, name: &str) -> Option<&Outcome> {
        self.checks
            .iter()
            .find(|c| c.name == name)
            .map(|c| &c.outcome)
    }

    /// Panics with the whole report unless every check passed or was skipped.
    ///
    /// # Panics
    /// When a check failed.
    pub fn assert_passed(&self) {
        assert!(
            self.failures().next().is_none(),
            "the session store conformance suite failed\n{self}"
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failed = self.failures().count();
        let skipped = self.skipped().count();
        writeln!(
            f,
            "{}: {} passed, {failed} failed, {skipped} skipped",
            self.store,
            self.checks.len() - failed - skipped
        )?;
        for check in &self.checks {
            match &check.outcome {
                Outcome::Passed => writeln!(f, "  ok    {}", check.name)?,
                Outcome::Failed(why) => writeln!(f, "  FAIL  {}: {why}", check.name)?,
                Outcome::Skipped(why) => writeln!(f, "  skip  {}: {why}", check.name)?,
            }
        }
        Ok(())
    }
}

/// Runs every check on stores from `harness`.
pub async fn run(harness: &dyn StoreHarness) -> Report {
    let mut report = Report {
        store: harness.name(),
        checks: Vec::new(),
    };
    for (name, check) in checks::ALL {
        let outcome = match harness.fixture().await {
            Err(why) => Outcome::Failed(format!("no store to check: {why}")),
            Ok(mut fixture) => match check(fixture.as_mut()).await {
                Ok(Verdict::Done) => Outcome::Passed,
                Ok(Verdict::Skip(why)) => Outcome::Skipped(why),
                Err(why) => Outcome::Failed(why),
            },
        };
        report.checks.push(Check { name, outcome });
    }
    report
}

/// What a check that did not fail found.
enum Verdict {
    Done,
    Skip(String),
}

/// A check's result: `Err` says what the store did wrong.
type Checked = Result<Verdict, String>;

/// Fails the check with a message unless `cond`.
macro_rules! ensure {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}
use ensure;

/// A store call that must succeed.
fn ok<T>(what: &str, r: Result<T, SessionError>) -> Result<T, String> {
    r.map_err(|e| format!("{what} failed: {e}"))
}

/// `n` distinct events of every kind, at increasing times from `at_ms`.
fn events(n: usize, at_ms: u64) -> Vec<JournalEvent> {
    (0..n)
        .map(|i| {
            let at_ms = at_ms + i as u64;
            match i % 4 {
                0 => JournalEvent::User {
                    message: Message::user(format!("message {i}: ünïcødé ✓ \"quoted\"\n")),
                    injected: i % 8 == 4,
                    at_ms,
                },
                1 => step(i, at_ms, 64),
                2 => JournalEvent::Prefix {
                    fingerprint: Fingerprint([i as u8; 32]),
                    prefix_bytes: 4096 + i as u64,
                    at_ms,
                },
                // The events of a step left open (a paused or interrupted run) now and then.
                _ if i % 16 == 7 => JournalEvent::Call {
                    call_id: format!("call_{i}"),
                    status: CallStatus::AwaitingApproval {
                        reason: format!("it runs command {i}"),
                    },
                    at_ms,
                },
                _ if i % 16 == 15 => JournalEvent::ToolResult {
                    result: ToolResult::ok(
                        &ToolCall::new(format!("call_{i}"), "read", "{}"),
                        format!("result {i}"),
                    ),
                    at_ms,
                },
                // An application's record between the engine's.
                _ if i % 16 == 11 => JournalEvent::Custom {
                    kind: "acme.note".into(),
                    data: serde_json::json!({"n": i, "text": "ünïcødé ✓", "nested": [1, {"a": null}]}),
                    at_ms,
                },
                _ => JournalEvent::Outcome {
                    outcome: if i % 8 == 3 {
                        JournalOutcome::Error {
                            message: format!("rate limited {i}"),
                        }
                    } else {
                        JournalOutcome::Answered
                    },
                    at_ms,
                },
            }
        })
        .collect()
}

/// A step with one tool call whose result has `result_bytes` bytes (at least).
fn step(i: usize, at_ms: u64, result_bytes: usize) -> JournalEvent {
    let call = ToolCall::new(
        format!("call_{i}"),
        "read",
        format!(r#"{{"path":"src/{i}.rs"}}"#),
    );
    let unit = "fn main() { println!(\"héllo\"); }\n";
    let content = unit.repeat(result_bytes.div_ceil(unit.len()));
    JournalEvent::Step {
        assistant: AssistantMessage {
            text: format!("step {i}"),
            tool_calls: vec![call.clone()],
            ..Default::default()
        },
        results: vec![ToolResult::ok(&call, content)],
        finish_reason: FinishReason::ToolCalls,
        usage: Usage {
            input_tokens: Some(1_200 + i as u64),
            cache_read_tokens: Some(1_024),
            output_tokens: Some(12),
            ..Default::default()
        },
        at_ms,
    }
}

/// The history a journal restores to.
fn history(events: &[JournalEvent]) -> Vec<Message> {
    RunState::from_journal(events, 10_000).log().to_vec()
}

/// The format version one newer than this Halo's.
fn newer() -> u32 {
    JOURNAL_FORMAT_VERSION + 1
}

/// `list`, sorted by id.
async fn listed(store: &dyn SessionStore) -> Result<Vec<SessionInfo>, String> {
    let mut list = ok("list", store.list().await)?;
    list.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(list)
}

/// Appends `events` to `session` at `expected`, which must succeed.
async fn put(
    store: &dyn SessionStore,
    session: &str,
    expected: u64,
    events: &[JournalEvent],
    at_ms: u64,
) -> Result<u64, String> {
    let next = ok(
        &format!(
            "append of {} events to {session} at {expected}",
            events.len()
        ),
        store
            .append(Append::new(session, expected, events, at_ms))
            .await,
    )?;
    ensure!(
        next == expected + events.len() as u64,
        "append of {} events at {expected} returned {next}, not {}",
        events.len(),
        expected + events.len() as u64
    );
    Ok(next)
}

/// Loads `session`, which must succeed.
async fn get(store: &dyn SessionStore, session: &str) -> Result<Vec<JournalEvent>, String> {
    ok(&format!("load of {session}"), store.load(session).await)
}
