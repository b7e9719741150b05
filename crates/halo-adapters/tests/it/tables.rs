//! The simulators keep their own reading of the providers' documented tables (minimum
//! cacheable lengths, breakpoint limits) rather than importing the adapters': these tests
//! compare the two, so editing one without checking the other's source fails here.

use halo_adapters::{anthropic, gemini, sim};

#[test]
fn anthropic_tables_of_the_adapter_and_the_simulator_agree() {
    assert_eq!(
        anthropic::MIN_CACHEABLE_TOKENS,
        sim::anthropic::MIN_CACHEABLE_TOKENS
    );
    assert_eq!(
        anthropic::DEFAULT_MIN_CACHEABLE_TOKENS,
        sim::anthropic::DEFAULT_MIN_CACHEABLE_TOKENS
    );
    assert_eq!(anthropic::MAX_BREAKPOINTS, sim::anthropic::MAX_BREAKPOINTS);
    assert_eq!(anthropic::LOOKBACK_BLOCKS, sim::anthropic::LOOKBACK_BLOCKS);
    for model in [
        "claude-opus-4-5-20251101",
        "anthropic/claude-3-5-haiku",
        "alias",
    ] {
        assert_eq!(
            anthropic::min_cacheable_tokens(model),
            sim::anthropic::min_cacheable_tokens(model),
            "{model}"
        );
    }
}

#[test]
fn gemini_tables_of_the_adapter_and_the_simulator_agree() {
    for model in [
        "gemini-2.5-flash",
        "models/gemini-2.5-pro",
        "gemini-3-flash-preview",
        "gemini-3-pro-preview",
        "gemini-9",
    ] {
        assert_eq!(
            gemini::min_cacheable_tokens(model),
            sim::gemini::min_cacheable_tokens(model),
            "{model}"
        );
    }
}
