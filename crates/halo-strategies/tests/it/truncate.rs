//! TruncateStrategy over a 200-step session on a 32k window.

use std::sync::Arc;

use halo_core::context::{self, ContextBudget, ContextPlan};
use halo_core::{CacheVerdict, ContextStrategy, HaloAgent, Message, MessageLog, StablePrefix};
use halo_strategies::TruncateStrategy;

use crate::session::{CacheModel, Fail, Read, Turn, check_invariants, run};

/// 200 steps of one or two reads of 200 to 3,000 bytes (a fixed pseudo-random mix), some
/// failing, then the answer.
pub fn long_session() -> Vec<Turn> {
    let mut x: u64 = 0x9e37_79b9;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    (0..200)
        .map(|_| {
            let calls = 1 + next(2) as usize;
            Turn::Calls(
                (0..calls)
                    .map(|_| (next(10) > 0).then(|| 200 + next(2_800) as usize))
                    .collect(),
            )
        })
        .collect()
}

/// 300 steps of three reads of 100 to 250 bytes: results too small to evict, so Tiered's
/// Layer 2 must act.
pub fn small_results_session() -> Vec<Turn> {
    (0..300u64)
        .map(|i| {
            Turn::Calls(
                (0..3)
                    .map(|k| Some(100 + ((i * 37 + k * 53) % 150) as usize))
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn a_200_step_session_stays_in_the_window_rewriting_rarely_and_mostly_cached() {
    let window = 32_000;
    let report = run(Arc::new(TruncateStrategy::new()), window, long_session());
    report.result.as_ref().expect("the run finishes");
    check_invariants(&report);
    eprintln!(
        "200 steps on {window} tokens: {} rewrites, peak {} tokens, {:.3} of input cached",
        report.rewrites,
        report.peak_tokens(),
        report.cached_share()
    );
    assert_eq!(report.seen.len(), 201);
    assert!(
        report.peak_tokens() <= window,
        "a request of {} tokens on a {window}-token window",
        report.peak_tokens()
    );
    assert!(
        (2..=12).contains(&report.rewrites),
        "{} rewrites in 200 steps",
        report.rewrites
    );
    assert!(
        report.cached_share() >= 0.85,
        "cached share {:.3}",
        report.cached_share()
    );
}

#[test]
fn tiered_keeps_a_200_step_session_in_the_window_evicting_in_chunks() {
    let window = 32_000;
    let report = run(
        Arc::new(halo_strategies::TieredStrategy::new()),
        window,
        long_session(),
    );
    report.result.as_ref().expect("the run finishes");
    check_invariants(&report);
    eprintln!(
        "tiered, 200 steps on {window} tokens: {} rewrites, peak {} tokens, {:.3} of input cached",
        report.rewrites,
        report.peak_tokens(),
        report.cached_share()
    );
    assert!(
        report.peak_tokens() <= window,
        "peak {}",
        report.peak_tokens()
    );
    assert!(
        (2..=30).contains(&report.rewrites),
        "{} rewrites in 200 steps",
        report.rewrites
    );
    assert!(
        report.cached_share() >= 0.85,
        "cached share {:.3}",
        report.cached_share()
    );
    // The placeholders are JSON objects, not marker strings.
    let last = report.seen.last().unwrap();
    let evicted = last
        .history
        .iter()
        .filter(|m| matches!(m, Message::Tool(r) if halo_strategies::is_evicted(&r.content)))
        .count();
    assert!(evicted > 0, "nothing evicted");
}

// Layer 2 by the model: the history but its newest rounds becomes one summary turn after the
// task; the summary requests are themselves cache hits.
#[test]
fn tiered_with_compaction_summarizes_in_chunks_and_its_summary_requests_are_cached() {
    let window = 32_000;
    let report = run(
        Arc::new(halo_strategies::TieredStrategy::new().with_compaction(0.25)),
        window,
        small_results_session(),
    );
    report.result.as_ref().expect("the run finishes");
    check_invariants(&report);
    let summaries: Vec<_> = report.seen.iter().filter(|s| s.is_summary()).collect();
    let (cached, total) = summaries
        .iter()
        .fold((0, 0), |(c, t), s| (c + s.cached, t + s.tokens));
    eprintln!(
        "tiered + compaction: {} rewrites, {} compactions, peak {}, {:.3} cached, summary requests {:.3} cached",
        report.rewrites,
        report.compactions,
        report.peak_tokens(),
        report.cached_share(),
        cached as f64 / total.max(1) as f64
    );
    assert!(report.compactions >= 1, "no compaction");
    assert_eq!(summaries.len() as u64, report.compactions);
    assert!(
        cached as f64 / total.max(1) as f64 > 0.8,
        "summary requests {cached} of {total} cached"
    );
    assert!(
        report.peak_tokens() <= window,
        "peak {}",
        report.peak_tokens()
    );
    // After a compaction the task leads the history, the summary follows it.
    let last = report.seen.last().unwrap();
    assert_eq!(last.history[0].text(), "Find the bug in the parser.");
    assert!(
        last.history
            .iter()
            .any(|m| m.text().starts_with(halo_core::context::SUMMARY_HEADER)),
        "no summary in the last request"
    );
}

// A summary request over the window (or failing otherwise) drops what it would have
// summarized instead: the run goes on inside the window.
#[test]
fn a_compaction_whose_own_request_overflows_drops_instead() {
    let model = CacheModel::new(small_results_session());
    model.refuse_summaries();
    let report = crate::session::run_on(
        model.clone(),
        Arc::new(halo_strategies::TieredStrategy::new().with_compaction(0.25)),
        32_000,
        300,
    );
    report.result.as_ref().expect("the run finishes");
    check_invariants(&report);
    assert!(model.summaries() >= 1, "no summary was asked for");
    assert_eq!(report.compactions, 0);
    assert!(report.rewrites >= 1);
    assert!(
        report.peak_tokens() <= 32_000,
        "peak {}",
        report.peak_tokens()
    );
}

// Reactive: a strategy whose marks let a request reach past the window gets the provider's
// context-window error; the engine raises its calibration, rewrites (here: truncates) and
// makes the same step again, so the run goes on.
#[test]
fn a_context_window_error_triggers_one_rewrite_and_a_retry_of_the_step() {
    let window = 16_000;
    let model = CacheModel::new(long_session());
    model.limit(window);
    let report = crate::session::run_on(
        model.clone(),
        // The agent believes the window is twice the server's, and truncates only at its
        // edge: every truncation here is the reaction to a refusal.
        Arc::new(TruncateStrategy::new().with_marks(1.0, 0.6)),
        window * 2,
        200,
    );
    report.result.as_ref().expect("the run finishes");
    eprintln!(
        "reactive: {} refused, {} rewrites, peak {}",
        model.refused(),
        report.rewrites,
        report.peak_tokens()
    );
    assert!(model.refused() >= 1, "no request was over the window");
    assert!(report.rewrites >= model.refused() as u64);
    // Each refusal was followed by an accepted request of the same step: all 201 steps made.
    assert_eq!(report.seen.len(), 201);
    assert!(report.peak_tokens() <= window);
}

// A summary request over the window is made again in halves — the older half, then the newer
// half after its summary — before anything is dropped.
#[test]
fn a_summary_request_over_the_window_is_made_in_halves() {
    let window = 32_000;
    let model = CacheModel::new(small_results_session());
    // The whole history does not fit a summary request; half of it does.
    model.limit_summaries(window * 7 / 10);
    let report = crate::session::run_on(
        model.clone(),
        Arc::new(halo_strategies::TieredStrategy::new().with_compaction(0.25)),
        window,
        300,
    );
    report.result.as_ref().expect("the run finishes");
    check_invariants(&report);
    assert!(report.compactions >= 1, "no compaction");
    // Each compaction: the whole request refused, then two halves answered.
    assert_eq!(model.summaries() as u64, 3 * report.compactions);
    let last = report.seen.last().unwrap();
    assert!(
        last.history
            .iter()
            .any(|m| m.text().starts_with(halo_core::context::SUMMARY_HEADER)),
        "no summary in the last request"
    );
}

/// The naive sliding window: whenever the request is over the mark, drop just enough of the
/// oldest units — so once full, it rewrites the head of the history on every step.
#[derive(Debug)]
struct Sliding(f64);

impl ContextStrategy for Sliding {
    fn plan(&self, _: &StablePrefix, log: &MessageLog, budget: &ContextBudget<'_>) -> ContextPlan {
        let messages: Vec<&Message> = log.messages().collect();
        let live = context::live_round_start(log);
        let mut plan = ContextPlan::keep();
        let mut used = budget.used_tokens;
        for unit in context::units(log).into_iter().skip(1) {
            if used <= budget.of_window(self.0) || unit.end > live {
                break;
            }
            used -= unit
                .clone()
                .map(|i| budget.tokens(messages[i]))
                .sum::<u64>();
            plan.drop.extend(unit);
        }
        plan
    }
}

// The control: the same session through a per-step sliding window is predicted just as well
// (every rewrite an expected miss) but rewrites on nearly every step and caches little —
// what the chunked marks avoid.
#[test]
fn a_per_step_sliding_window_rewrites_every_step_and_caches_little() {
    let report = run(Arc::new(Sliding(0.8)), 32_000, long_session());
    report.result.as_ref().expect("the run finishes");
    check_invariants(&report);
    // Once the window is full it rewrites on most steps (a step that drops a large unit
    // buys the next one).
    let first = report
        .seen
        .iter()
        .position(|s| s.tokens > 25_000)
        .expect("the window fills");
    eprintln!(
        "sliding: full at step {first}, {} rewrites, {:.3} of input cached",
        report.rewrites,
        report.cached_share()
    );
    assert!(
        report.rewrites as usize >= (200 - first) * 2 / 3,
        "{} rewrites after filling at {first}",
        report.rewrites
    );
    assert!(
        report.cached_share() < 0.6,
        "cached share {:.3}",
        report.cached_share()
    );
}

// Without a strategy, the log's capacity is the only bound: once full it evicts on every
// push, and the ledger reports each rewrite it was not told of as a bust.
#[test]
fn ring_buffer_evictions_are_reported_as_busts() {
    let model = CacheModel::new(long_session().into_iter().take(60));
    let mut agent = HaloAgent::builder(model)
        .tool(Read)
        .unwrap()
        .tool(Fail)
        .unwrap()
        .max_steps(61)
        .log_capacity(40)
        .build();
    futures::executor::block_on(agent.generate_text("Find the bug.")).expect("the run finishes");
    let busts: Vec<_> = agent
        .cache_ledger()
        .checks()
        .filter(|c| c.is_bust())
        .collect();
    assert!(busts.len() > 30, "{} busts", busts.len());
    let CacheVerdict::Bust { cause } = &busts[0].verdict else {
        unreachable!()
    };
    assert!(
        cause.contains("without a context strategy planning it"),
        "{cause}"
    );
    assert_eq!(agent.stats().history_rewrites, 0);
}

// A rewrite is journaled as a compact boundary holding the new history, so a session
// restored from the journal has the same log as the one that ran, rewrites included.
#[test]
fn a_session_restored_from_its_journal_has_the_rewritten_history() {
    use halo_core::{JournalEvent, MemoryStore};

    let store = Arc::new(MemoryStore::new());
    let model = CacheModel::new(long_session().into_iter().take(80));
    let mut agent = HaloAgent::builder(model)
        .tool(Read)
        .unwrap()
        .tool(Fail)
        .unwrap()
        .max_steps(81)
        .session(store.clone())
        .context(halo_core::ContextConfig::new(
            Arc::new(TruncateStrategy::new()),
            16_000,
        ))
        .build();
    futures::executor::block_on(agent.generate_text("Find the bug.")).expect("the run finishes");
    let boundaries = store
        .events()
        .iter()
        .filter(|e| matches!(e, JournalEvent::CompactBoundary { .. }))
        .count() as u64;
    assert!(boundaries >= 2, "{boundaries} boundaries");
    assert_eq!(boundaries, agent.stats().history_rewrites);

    let mut restored = HaloAgent::builder(CacheModel::new([]))
        .session(store.clone())
        .build();
    futures::executor::block_on(restored.restore_session()).expect("the journal loads");
    let ran: Vec<&Message> = agent.log().messages().collect();
    let back: Vec<&Message> = restored.log().messages().collect();
    assert_eq!(back, ran);
}

// A compactor over another model answers the summary requests; the agent's model sees none.
#[test]
fn a_compactor_over_another_model_answers_the_summary_requests() {
    use halo_core::{ContextConfig, ModelCompactor};

    let main = CacheModel::new(small_results_session());
    let summarizer = CacheModel::new([]);
    let mut agent = HaloAgent::builder(main.clone())
        .tool(Read)
        .unwrap()
        .tool(Fail)
        .unwrap()
        .max_steps(301)
        .context(ContextConfig::new(
            Arc::new(halo_strategies::TieredStrategy::new().with_compaction(0.25)),
            32_000,
        ))
        .compactor(Arc::new(ModelCompactor(Arc::new(summarizer.clone()))))
        .build();
    futures::executor::block_on(agent.generate_text("Find the bug.")).expect("the run finishes");
    assert!(agent.stats().compactions >= 1);
    assert_eq!(summarizer.summaries() as u64, agent.stats().compactions);
    assert_eq!(main.summaries(), 0);
}
