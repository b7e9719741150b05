//! Context strategies over random sessions — parallel calls, error results, result sizes,
//! steering messages injected mid-run, discardable entries — every strategy keeps
//! the seam's invariants: the prefix bytes never change, every call in every request has
//! exactly one result, the live round is never dropped, and each rewrite is the ledger's one
//! expected miss.

use std::sync::Arc;

use halo_core::ContextStrategy;
use halo_strategies::{TieredStrategy, TruncateStrategy};
use proptest::prelude::*;

use crate::session::{CacheModel, Turn, check_invariants, run_with};

fn turn() -> impl Strategy<Value = Turn> {
    (
        prop::collection::vec(prop::option::weighted(0.85, 50usize..1_500), 1..4),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(calls, steer)| {
            if steer {
                Turn::Steer(calls)
            } else {
                Turn::Calls(calls)
            }
        })
}

fn strategies() -> Vec<Arc<dyn ContextStrategy>> {
    vec![
        Arc::new(TruncateStrategy::new()),
        Arc::new(TruncateStrategy::new().with_marks(0.7, 0.3)),
        Arc::new(TruncateStrategy::new().keep_task(false)),
        Arc::new(TieredStrategy::new()),
        Arc::new(TieredStrategy::new().with_marks(0.5, 0.7, 0.3)),
        Arc::new(TieredStrategy::new().with_compaction(0.25)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_strategy_keeps_the_invariants(
        script in prop::collection::vec(turn(), 1..60),
        window in 4_000u64..16_000,
        discardable in prop::collection::vec(100usize..2_000, 0..3),
    ) {
        for strategy in strategies() {
            let report = run_with(
                CacheModel::new(script.clone()),
                strategy,
                window,
                script.len(),
                &discardable,
            );
            prop_assert!(report.result.is_ok(), "{:?}", report.result);
            check_invariants(&report);
        }
    }
}
