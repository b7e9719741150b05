//! # halo-core
//!
//! The traits and the agent loop of Halo, a library for LLM agents whose every request
//! keeps the provider's prompt cache warm. This crate does no network, process or
//! filesystem IO: models, sandboxes and tools come in through traits.
//!
//! A request is a [`StablePrefix`] (system prompt, tool specs, few-shot turns, skill
//! catalog; canonically serialized and fingerprinted) followed by the [`MessageLog`] (the
//! append-only, bounded history). A [`ModelAdapter`] receives the two separately and
//! decides where the provider's cache markers go. [`HaloAgent`] runs the tool loop.
//! The system text can be built from prompt zones ([`zones`]: static, semi-static frozen
//! for the session, the date last).
//!
//! Agents work together through tools that run the agent ([`delegate`]: a fork, a
//! sub-agent), named agents called as tools ([`named`]), handoffs of the conversation to
//! another agent ([`handoff`]) and typed workflows of agent steps ([`workflow`]); a streamed
//! run shows what happens inside them ([`inner`]).
//!
//! ```
//! use halo_core::{HaloAgent, testing::ScriptedModel, tool::{Tool, ToolError, ToolOutput}};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//!
//! struct Weather;
//! #[derive(Deserialize, JsonSchema)]
//! struct City { city: String }
//! impl Tool for Weather {
//!     type Args = City;
//!     fn name(&self) -> &str { "weather" }
//!     fn description(&self) -> &str { "Current weather in a city." }
//!     async fn call(&self, a: City) -> Result<ToolOutput, ToolError> {
//!         Ok(format!("sunny in {}", a.city).into())
//!     }
//! }
//!
//! # futures::executor::block_on(async {
//! let model = ScriptedModel::new()
//!     .tool_call("weather", json!({"city": "Oslo"}))
//!     .text("It is sunny in Oslo.");
//! let mut agent = HaloAgent::builder(model.clone())
//!     .system("You answer weather questions.")
//!     .tool(Weather).unwrap()
//!     .build();
//! let out = agent.generate_text("Weather in Oslo?").await.unwrap();
//! assert_eq!(out.text, "It is sunny in Oslo.");
//! assert_eq!(out.steps[0].tool_results[0].content, "sunny in Oslo");
//! model.assert_consumed();
//! # });
//! ```

pub mod agent;
pub mod cancel;
pub mod clock;
#[cfg(feature = "testing")]
pub mod conformance;
pub mod context;
pub mod delegate;
mod dispatch;
pub mod driver;
pub mod engine;
pub mod error;
pub mod factory;
pub mod guardrail;
pub mod handoff;
pub mod hook;
pub mod inner;
pub mod ledger;
pub mod log;
pub mod message;
pub mod model;
pub mod named;
pub mod output;
pub mod prefix;
pub mod repair;
pub mod request;
pub mod run;
pub mod sandbox;
pub mod session;
pub mod stats;
pub mod steering;
mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod text;
pub mod tool;
pub mod workflow;
pub mod zones;

pub use agent::{DEFAULT_MAX_STEPS, HaloAgent, HaloAgentBuilder};
pub use cancel::CancelToken;
pub use clock::{Clock, SystemClock};
pub use context::{
    Compaction, Compactor, ContextBudget, ContextConfig, ContextPlan, ContextStrategy,
    DEFAULT_CONTEXT_WINDOW, ModelCompactor, TokenEstimator,
};
pub use delegate::AgentHandle;
pub use dispatch::Toolbox;
pub use driver::{Driver, Effect, Feedback, RunKind};
pub use engine::{PendingStep, RunState};
pub use error::HaloError;
pub use factory::{Halo, Session};
pub use guardrail::{
    InputGuardrail, LoopContext, LoopGuard, LoopKind, LoopVerdict, OutputGuardrail, OutputVerdict,
    StepContext, StepHook, StepSettings,
};
pub use handoff::{Handoff, HistoryFilter};
pub use hook::{ToolCallDecision, ToolHook};
pub use inner::{EventReceiver, EventSink, InnerEvent};
pub use ledger::{CacheCheck, CacheLedger, CacheVerdict};
pub use log::{HistoryKey, MessageLog};
pub use message::{
    AssistantMessage, ContentPart, Message, Reasoning, SmolStr, ToolCall, ToolResult,
};
pub use model::InvalidRequestKind;
pub use model::{
    FinishReason, GenerationOptions, ModelAdapter, ModelCapabilities, ModelError, ModelEventStream,
    ModelRequest, ModelResponse, ModelStreamEvent, ReasoningEffort, ResponseFormat, SharedModel,
    ToolChoice, Usage,
};
pub use named::{AgentContext, NamedAgent};
pub use output::{ObjectResult, ObjectSpec, Output, OutputMode};
pub use prefix::{Fingerprint, PrefixError, SkillMeta, StablePrefix, ToolSpec};
pub use repair::{
    Refusal, Repair, RepairContext, RepairKind, RepairOutcome, RepairStrategy, RetryStop,
};
pub use run::{
    AgentEvent, GenerateTextResult, HistoryRewrite, PendingApproval, RewriteKind, StepResult, Turn,
};
pub use sandbox::{Sandbox, SandboxError, SandboxPath, SharedSandbox};
pub use session::{
    Append, CallStatus, JournalEvent, JournalOutcome, Lease, MemoryStore, SessionError,
    SessionInfo, SessionStore,
};
pub use stats::AgentStats;
pub use steering::SteeringHandle;
pub use tool::{
    DynTool, NoArgs, Tool, ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolRegistry,
    ToolSource,
};
pub use zones::{PromptZones, ZoneSection};

/// The attribute that the object-safe async traits ([`ModelAdapter`], [`Sandbox`],
/// [`DynTool`], [`ToolHook`], [`SessionStore`], ...) and their impls carry, re-exported so an implementing crate needs no
/// `async-trait` dependency of its own: `#[halo_core::async_trait]` on the impl. (A typed
/// [`Tool`] needs none: its impl is plain `async fn call`.)
pub use async_trait::async_trait;
/// The schemars version [`Tool::Args`] is checked against (1.x), re-exported so a crate on
/// another schemars version (0.8) can still derive tool arguments; see [`Tool`].
pub use schemars;
/// The `JsonSchema` trait and derive of the re-exported schemars 1.x.
pub use schemars::JsonSchema;
