//! # halo-strategies
//!
//! Context strategies for Halo agents, behind halo-core's seam ([`halo_core::context`]):
//! before each model call the engine asks the agent's strategy how the history fits the
//! context window, and applies its plan between steps.
//!
//! | strategy | what it does |
//! |---|---|
//! | [`TruncateStrategy`] | drops whole units from the front in one chunk, from a high-water mark (90 %) down to a low-water mark (60 %) |
//!
//! ```
//! use std::sync::Arc;
//! use halo_core::{ContextConfig, HaloAgent, testing::ScriptedModel};
//! use halo_strategies::TruncateStrategy;
//!
//! let agent = HaloAgent::builder(ScriptedModel::new().text("ok"))
//!     .context(ContextConfig::new(Arc::new(TruncateStrategy::new()), 32_000))
//!     .build();
//! # let _ = agent;
//! ```

mod truncate;

pub use truncate::TruncateStrategy;
