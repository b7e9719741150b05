//! A local token count for the context budget (feature `tokens`): OpenAI's `o200k_base` BPE
//! through `tiktoken-rs`, as [`O200kEstimator`], a [`TokenEstimator`].
//!
//! It counts GPT-4o / GPT-4.1 / GPT-5 and o-series prompts exactly and other providers'
//! closely (Claude, Gemini and DeepSeek tokenizers differ by some percent); the engine's
//! calibration against the provider's reported input tokens corrects the rest
//! ([`halo_core::context`]). The sims count with the same tokenizer.

use std::sync::OnceLock;

use halo_core::TokenEstimator;

/// The `o200k_base` tokenizer, built once (its ranks are compiled into tiktoken-rs).
pub(crate) fn bpe() -> &'static tiktoken_rs::CoreBPE {
    static BPE: OnceLock<tiktoken_rs::CoreBPE> = OnceLock::new();
    // The o200k_base ranks are compiled into tiktoken-rs; building them cannot fail.
    BPE.get_or_init(|| tiktoken_rs::o200k_base().expect("o200k_base ranks are built in"))
}

/// Counts tokens with OpenAI's `o200k_base` (special tokens as plain text).
///
/// ```
/// use halo_adapters::tokens::O200kEstimator;
/// use halo_core::TokenEstimator;
///
/// assert_eq!(O200kEstimator.estimate("hello world"), 2);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct O200kEstimator;

impl TokenEstimator for O200kEstimator {
    fn estimate(&self, text: &str) -> u64 {
        bpe().encode_ordinary(text).len() as u64
    }
}
