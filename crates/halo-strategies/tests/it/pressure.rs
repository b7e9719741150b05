//! TieredStrategy under pressure: one result far larger than the window, and a session whose
//! every step adds a large share of the window (a model paging through a big file).

use std::sync::Arc;

use halo_strategies::TieredStrategy;

use crate::session::{CacheModel, Turn, check_invariants, run_on};

/// The coder's marks: evict from 85 %, truncate from 95 %, down to 55 %.
fn tiered() -> TieredStrategy {
    TieredStrategy::new().with_marks(0.85, 0.95, 0.55)
}

// A 2 MB result used to enter the log whole: every later request was over the window and
// refused, whatever the strategy, because the result sat in the live round it may not touch.
#[test]
fn a_2_mb_result_on_a_16k_window_is_cut_and_the_run_finishes_inside_the_window() {
    let window = 16_000;
    let mut script: Vec<Turn> = (0..4).map(|_| Turn::Calls(vec![Some(2_000)])).collect();
    script.push(Turn::Calls(vec![Some(2_000_000)]));
    script.extend((0..4).map(|_| Turn::Calls(vec![Some(2_000)])));
    let turns = script.len();
    let model = CacheModel::new(script);
    model.limit(window);
    let report = run_on(model.clone(), Arc::new(tiered()), window, turns);
    report.result.as_ref().expect("the run finishes");
    check_invariants(&report);
    assert_eq!(model.refused(), 0, "no request was refused");
    assert!(
        report.peak_tokens() <= window,
        "peak {} tokens on a {window}-token window",
        report.peak_tokens()
    );
    // The big result is in the history, cut: its head, its tail, and what was cut.
    let last = &report.seen.last().unwrap().history;
    let cut = last
        .iter()
        .find_map(|m| match m {
            halo_core::Message::Tool(r) if r.content.contains("bytes omitted") => Some(r),
            _ => None,
        })
        .expect("the cut result");
    assert!(
        cut.content.starts_with("fn main()"),
        "{}",
        &cut.content[..60]
    );
}

/// `steps` reads of `bytes` each: paging through a file, one chunk a step.
fn paging(steps: usize, bytes: usize) -> Vec<Turn> {
    (0..steps).map(|_| Turn::Calls(vec![Some(bytes)])).collect()
}

// With a fixed low-water mark, a session adding ~9 % of the window per step was rewritten
// every three or four steps (each rewrite a cache miss of everything after it).
#[test]
fn under_heavy_growth_the_low_water_mark_follows_it_and_rewrites_are_fewer() {
    let window = 16_000;
    let steps = 60;
    let script = paging(steps, 5_600);
    let fixed = run_on(
        CacheModel::new(script.clone()),
        Arc::new(tiered().room_for_steps(0)),
        window,
        steps,
    );
    let following = run_on(CacheModel::new(script), Arc::new(tiered()), window, steps);
    for report in [&fixed, &following] {
        report.result.as_ref().expect("the run finishes");
        check_invariants(report);
        assert!(report.peak_tokens() <= window, "{}", report.peak_tokens());
    }
    eprintln!(
        "paging {steps} steps of 5,600 bytes on {window} tokens: fixed low water {} rewrites \
         ({:.3} cached), following the growth {} rewrites ({:.3} cached)",
        fixed.rewrites,
        fixed.cached_share(),
        following.rewrites,
        following.cached_share()
    );
    assert!(
        following.rewrites < fixed.rewrites,
        "following the growth: {} rewrites, fixed: {}",
        following.rewrites,
        fixed.rewrites
    );
    assert!(following.cached_share() > fixed.cached_share());
}
