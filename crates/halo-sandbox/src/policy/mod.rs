//! Safety policies as tool hooks ([`ToolHook`](halo_core::ToolHook)): add them to an agent
//! with `HaloAgentBuilder::hook` and they run around every tool call, the sandbox's and
//! your own.
//!
//! | hook                 | when   | what the model sees                                      |
//! |----------------------|--------|----------------------------------------------------------|
//! | [`CommandDenylist`]  | before | `command not run: … matches the denylist rule "…"`       |
//! | [`ApprovalHook`]     | before | the result if the user says run; on skip, [`skipped_message`]; quit ends the run |
//! | [`PermissionPolicy`] | before | the result if the preset allows; else what the session allows (asks an [`Approver`] where the preset says ask) |
//! | [`OutputTruncation`] | after  | results over the bound keep head and tail with `[... N bytes omitted ...]` |
//!
//! Hooks run in the order they are added; the first denial wins and later hooks are not
//! asked. A good order: the denylist first (nobody is asked about a command that is refused
//! anyway), then the permission policy or the approval hook, then truncation.
//!
//! ```
//! use halo_core::{HaloAgent, testing::ScriptedModel};
//! use halo_sandbox::policy::{
//!     ApprovalAnswer, ApprovalRequest, CommandDenylist, OutputTruncation, PermissionPolicy,
//!     PermissionPreset,
//! };
//!
//! let agent = HaloAgent::builder(ScriptedModel::new())
//!     .hook(CommandDenylist::new())
//!     .hook(
//!         PermissionPolicy::new(PermissionPreset::WorkspaceWrite)
//!             .with_approver(|_: &ApprovalRequest| ApprovalAnswer::Skip),
//!     )
//!     .hook(OutputTruncation::default())
//!     .build();
//! # let _ = agent;
//! ```
//!
//! Hooks are not part of the stable prefix: adding, removing or switching them costs no
//! prompt-cache miss.

mod approval;
mod denylist;
mod permission;
mod shell;
mod truncation;

pub use approval::{
    ABORT_REASON, ApprovalAnswer, ApprovalHook, ApprovalRequest, Approver, skipped_message,
};
pub use denylist::{CommandDenylist, Denial, DenyRule, RuleScope, UNPARSED};
pub use permission::{AccessClass, Permission, PermissionPolicy, PermissionPreset};
pub use truncation::{DEFAULT_RESULT_LIMIT, MIN_RESULT_LIMIT, OutputTruncation};
