//! Permission presets: [`PermissionPolicy`] allows, asks about or denies each tool call by
//! the tool's [`AccessClass`], read from its [`ToolAnnotations`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use async_trait::async_trait;
use halo_core::{ToolAnnotations, ToolCallDecision, ToolContext, ToolHook};
use serde_json::Value;

use super::approval::{Approver, ask};

/// What a tool can do, for [`PermissionPolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessClass {
    /// Only looks: `read`, `ls`, `glob`, `grep`, and the tools that run the agent (`plan`,
    /// `subagent`: their own calls are judged one by one).
    Read,
    /// Changes files in the workspace only: `write`, `edit`.
    Write,
    /// Runs commands or reaches beyond the workspace: `bash`, and every tool that promises
    /// nothing.
    Exec,
}

impl AccessClass {
    /// The class a tool's annotations give it: read-only tools and tools that run the agent
    /// read, closed-world tools write (in the workspace), the rest run things — a tool that
    /// says nothing about itself ([`ToolAnnotations::default`], open world) is `Exec`.
    ///
    /// ```
    /// use halo_core::ToolAnnotations;
    /// use halo_sandbox::policy::AccessClass;
    /// assert_eq!(AccessClass::of(ToolAnnotations::READ_ONLY), AccessClass::Read);
    /// assert_eq!(AccessClass::of(ToolAnnotations::default().with_open_world(false)), AccessClass::Write);
    /// assert_eq!(AccessClass::of(ToolAnnotations::default()), AccessClass::Exec);
    /// ```
    pub fn of(annotations: ToolAnnotations) -> AccessClass {
        if annotations.read_only || annotations.runs_agent {
            AccessClass::Read
        } else if !annotations.open_world {
            AccessClass::Write
        } else {
            AccessClass::Exec
        }
    }
}

/// What a preset does with a call of some [`AccessClass`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// The call goes on to the next hook.
    Allow,
    /// The policy's [`Approver`] decides; without one the call is denied.
    Ask,
    /// The call does not run; the model reads why.
    Deny,
}

/// The permission presets.
///
/// | preset           | `Read` | `Write` | `Exec` |
/// |------------------|--------|---------|--------|
/// | `ReadOnly`       | allow  | deny    | deny   |
/// | `WorkspaceWrite` | allow  | allow   | ask    |
/// | `FullAccess`     | allow  | allow   | allow  |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionPreset {
    /// Look, never change or run anything.
    ReadOnly,
    /// Look and change files in the workspace; running commands needs approval.
    WorkspaceWrite,
    /// Everything (the sandbox and the other hooks still apply).
    FullAccess,
}

impl PermissionPreset {
    /// The [`SandboxMode`](crate::SandboxMode) that confines commands under this preset:
    /// `ReadOnly` → `ReadOnly`, `WorkspaceWrite` → `WorkspaceWrite`, `FullAccess` →
    /// `FullAccess` (no OS sandbox). Pass it to
    /// [`ContainerSandbox::with_mode`](crate::ContainerSandbox::with_mode), so the OS sandbox
    /// holds the line the hook draws even for a command the hook let through.
    pub fn sandbox_mode(self) -> crate::SandboxMode {
        match self {
            PermissionPreset::ReadOnly => crate::SandboxMode::ReadOnly,
            PermissionPreset::WorkspaceWrite => crate::SandboxMode::WorkspaceWrite,
            PermissionPreset::FullAccess => crate::SandboxMode::FullAccess,
        }
    }

    /// The preset's decision for a class (the table above).
    pub fn permission(self, class: AccessClass) -> Permission {
        use AccessClass::{Exec, Read, Write};
        use PermissionPreset::{FullAccess, ReadOnly, WorkspaceWrite};
        match (self, class) {
            (_, Read) | (WorkspaceWrite | FullAccess, Write) | (FullAccess, Exec) => {
                Permission::Allow
            }
            (WorkspaceWrite, Exec) => Permission::Ask,
            (ReadOnly, Write | Exec) => Permission::Deny,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            PermissionPreset::ReadOnly => 0,
            PermissionPreset::WorkspaceWrite => 1,
            PermissionPreset::FullAccess => 2,
        }
    }

    fn from_u8(n: u8) -> Self {
        match n {
            0 => PermissionPreset::ReadOnly,
            1 => PermissionPreset::WorkspaceWrite,
            _ => PermissionPreset::FullAccess,
        }
    }
}

/// A before-hook that applies a [`PermissionPreset`] to every tool call by the tool's
/// [`AccessClass`].
///
/// The class comes from the tool's annotations, which every call's [`ToolContext`] carries
/// ([`AccessClass::of`]): the sandbox's `read`, `ls`, `glob`, `grep` are read-only, `write`
/// and `edit` closed-world, `bash` neither; a tool of your own, an MCP server's, is classed
/// by what it says of itself, and one that says nothing counts as `Exec` (denied when
/// read-only, asked about under workspace-write). [`classify`](Self::classify) overrides the
/// class of a tool by name (an MCP server whose annotations you do not trust).
///
/// A denied call becomes an error result telling the model what the session allows, e.g.
/// `this session is read-only: `write` is not allowed; use glob, grep, ls or read` (the
/// agent's tools the preset allows). An `Ask` goes to the approver set with
/// [`with_approver`](Self::with_approver) (answers as in
/// [`ApprovalHook`](super::ApprovalHook)); without one the policy answers
/// [`ToolCallDecision::Ask`], and the agent pauses the run for someone to approve or reject
/// the call, or — when no one can answer — denies it at once with an error result that
/// says so.
///
/// The preset can change mid-session through [`set_preset`](Self::set_preset) on a shared
/// policy (add it with `HaloAgentBuilder::hook_shared`). Hooks are not part of the prompt,
/// so a switch costs no prompt-cache miss.
///
/// ```
/// use std::sync::Arc;
/// use halo_sandbox::policy::{AccessClass, PermissionPolicy, PermissionPreset};
///
/// use halo_core::ToolAnnotations;
///
/// let policy = Arc::new(
///     PermissionPolicy::new(PermissionPreset::ReadOnly).classify("search_docs", AccessClass::Read),
/// );
/// // let agent = HaloAgent::builder(model).tools(sandbox.tools())?.hook_shared(policy.clone()).build();
/// policy.set_preset(PermissionPreset::WorkspaceWrite);
/// assert_eq!(policy.preset(), PermissionPreset::WorkspaceWrite);
/// let nothing = ToolAnnotations::default();
/// assert_eq!(policy.class_of("search_docs", nothing), AccessClass::Read);
/// assert_eq!(policy.class_of("deploy", nothing), AccessClass::Exec);
/// assert_eq!(policy.class_of("lookup", ToolAnnotations::READ_ONLY), AccessClass::Read);
/// ```
pub struct PermissionPolicy {
    preset: AtomicU8,
    /// Tool names whose class overrides their annotations, in the order classified.
    classes: Vec<(String, AccessClass)>,
    approver: Option<Arc<dyn Approver>>,
}

impl std::fmt::Debug for PermissionPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermissionPolicy")
            .field("preset", &self.preset())
            .field("classes", &self.classes)
            .field("approver", &self.approver.is_some())
            .finish()
    }
}

impl PermissionPolicy {
    /// A policy with `preset`, classing tools by their annotations, and no approver.
    pub fn new(preset: PermissionPreset) -> Self {
        PermissionPolicy {
            preset: AtomicU8::new(preset.to_u8()),
            classes: Vec::new(),
            approver: None,
        }
    }

    /// Gives the tool `name` the class `class`, whatever its annotations say.
    pub fn classify(mut self, name: impl Into<String>, class: AccessClass) -> Self {
        let name = name.into();
        match self.classes.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = class,
            None => self.classes.push((name, class)),
        }
        self
    }

    /// Asks `approver` when the preset says [`Permission::Ask`].
    pub fn with_approver(self, approver: impl Approver + 'static) -> Self {
        self.with_shared_approver(Arc::new(approver))
    }

    /// [`with_approver`](Self::with_approver) with a shared approver.
    pub fn with_shared_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// The current preset.
    pub fn preset(&self) -> PermissionPreset {
        PermissionPreset::from_u8(self.preset.load(Ordering::Relaxed))
    }

    /// Switches the preset; calls decided from now on use it.
    pub fn set_preset(&self, preset: PermissionPreset) {
        self.preset.store(preset.to_u8(), Ordering::Relaxed);
    }

    /// The class of the tool `name` with `annotations`: as [`classify`](Self::classify) set
    /// it, else by its annotations ([`AccessClass::of`]).
    pub fn class_of(&self, name: &str, annotations: ToolAnnotations) -> AccessClass {
        self.classes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, class)| *class)
            .unwrap_or_else(|| AccessClass::of(annotations))
    }

    /// What the preset decides for the call `cx`.
    pub fn permission_for(&self, cx: &ToolContext) -> Permission {
        self.preset()
            .permission(self.class_of(&cx.call().name, cx.annotations()))
    }

    /// Why a call of class `class` needs approval.
    fn ask_reason(class: AccessClass) -> &'static str {
        match class {
            AccessClass::Exec => "it runs commands or reaches beyond the workspace",
            AccessClass::Write => "it changes files",
            AccessClass::Read => "it reads files",
        }
    }

    /// What the model reads when a call of `tool` (of class `class`) is not allowed; the
    /// tools the preset allows are named from `cx`'s list of the agent's tools.
    fn denial(&self, preset: PermissionPreset, cx: &ToolContext, class: AccessClass) -> String {
        let tool = &cx.call().name;
        let session = match preset {
            PermissionPreset::ReadOnly => "this session is read-only".to_string(),
            PermissionPreset::WorkspaceWrite | PermissionPreset::FullAccess => format!(
                "this session may read and change files, but {} needs the user's approval",
                match class {
                    AccessClass::Exec => "running commands",
                    AccessClass::Write => "changing files",
                    AccessClass::Read => "reading files",
                }
            ),
        };
        let allowed: Vec<&str> = cx
            .tools()
            .map(|tools| {
                tools
                    .names()
                    .filter(|name| {
                        let annotations = tools.annotations(name).unwrap_or_default();
                        preset.permission(self.class_of(name, annotations)) == Permission::Allow
                    })
                    .collect()
            })
            .unwrap_or_default();
        let use_instead = match allowed.as_slice() {
            [] => String::new(),
            [one] => format!("; use {one}"),
            [rest @ .., last] => format!("; use {} or {last}", rest.join(", ")),
        };
        format!("{session}: `{tool}` is not allowed{use_instead}")
    }
}

#[async_trait]
impl ToolHook for PermissionPolicy {
    async fn before_tool_call(&self, cx: &ToolContext, arguments: &Value) -> ToolCallDecision {
        let preset = self.preset();
        let call = cx.call();
        let class = self.class_of(&call.name, cx.annotations());
        match (preset.permission(class), &self.approver) {
            (Permission::Allow, _) => ToolCallDecision::Allow,
            (Permission::Ask, Some(approver)) => ask(&**approver, call, arguments).await,
            (Permission::Ask, None) => ToolCallDecision::Ask(Self::ask_reason(class).to_string()),
            (Permission::Deny, _) => {
                tracing::info!(tool = %call.name, ?preset, ?class, "the permission policy denied a call");
                ToolCallDecision::Deny(self.denial(preset, cx, class))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_call_is_denied_without_a_list_of_tools() {
        let ro = PermissionPolicy::new(PermissionPreset::ReadOnly);
        let cx = ToolContext::detached(halo_core::ToolCall::new("c1", "write", "{}"));
        assert_eq!(
            ro.denial(PermissionPreset::ReadOnly, &cx, AccessClass::Write),
            "this session is read-only: `write` is not allowed"
        );
    }

    #[test]
    fn the_preset_table() {
        use AccessClass::*;
        use Permission::*;
        use PermissionPreset::*;
        let table: Vec<_> = [ReadOnly, WorkspaceWrite, FullAccess]
            .into_iter()
            .map(|p| [Read, Write, Exec].map(|c| p.permission(c)))
            .collect();
        assert_eq!(
            table,
            [
                [Allow, Deny, Deny],
                [Allow, Allow, Ask],
                [Allow, Allow, Allow]
            ]
        );
    }
}
