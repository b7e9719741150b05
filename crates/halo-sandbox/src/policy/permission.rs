//! Permission presets: [`PermissionPolicy`] allows, asks about or denies each tool call by
//! the tool's [`AccessClass`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use async_trait::async_trait;
use halo_core::{ToolCall, ToolCallDecision, ToolHook};
use serde_json::Value;

use super::approval::{Approver, ask};

/// What a tool can do, for [`PermissionPolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessClass {
    /// Only looks: `read`, `ls`, `glob`, `grep`.
    Read,
    /// Changes files in the workspace: `write`, `edit`.
    Write,
    /// Runs commands or does anything else: `bash`, and every tool not classified.
    Exec,
}

impl AccessClass {
    /// The class of a sandbox tool by its name (the coding tools, and the skill tools of
    /// [`crate::harness`]: `load_skill` and `read_skill_file` read, `skill_run` runs a
    /// command); `None` for other names.
    pub fn of_sandbox_tool(name: &str) -> Option<AccessClass> {
        match name {
            "read" | "ls" | "glob" | "grep" | "load_skill" | "read_skill_file" => {
                Some(AccessClass::Read)
            }
            "write" | "edit" => Some(AccessClass::Write),
            "bash" | "skill_run" => Some(AccessClass::Exec),
            _ => None,
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
/// The sandbox's tools have their classes built in (`read`, `ls`, `glob`, `grep`: `Read`;
/// `write`, `edit`: `Write`; `bash`: `Exec`); other tools get theirs from
/// [`classify`](Self::classify). A tool that is not classified counts as `Exec`: the policy
/// cannot know what it does, so it is treated like running a command (denied when read-only,
/// asked about under workspace-write).
///
/// A denied call becomes an error result telling the model what the session allows, e.g.
/// `this session is read-only: `write` is not allowed; use read, ls, glob or grep`. An
/// `Ask` goes to the approver set with [`with_approver`](Self::with_approver) (answers as
/// in [`ApprovalHook`](super::ApprovalHook)); without one it is denied the same way.
///
/// The preset can change mid-session through [`set_preset`](Self::set_preset) on a shared
/// policy (add it with `HaloAgentBuilder::hook_shared`). Hooks are not part of the prompt,
/// so a switch costs no prompt-cache miss.
///
/// ```
/// use std::sync::Arc;
/// use halo_sandbox::policy::{AccessClass, PermissionPolicy, PermissionPreset};
///
/// let policy = Arc::new(
///     PermissionPolicy::new(PermissionPreset::ReadOnly).classify("search_docs", AccessClass::Read),
/// );
/// // let agent = HaloAgent::builder(model).tools(sandbox.tools())?.hook_shared(policy.clone()).build();
/// policy.set_preset(PermissionPreset::WorkspaceWrite);
/// assert_eq!(policy.preset(), PermissionPreset::WorkspaceWrite);
/// assert_eq!(policy.class_of("search_docs"), AccessClass::Read);
/// assert_eq!(policy.class_of("deploy"), AccessClass::Exec);
/// ```
pub struct PermissionPolicy {
    preset: AtomicU8,
    /// Tool names and their classes, in the order they were classified.
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
    /// A policy with `preset`, the sandbox tools' classes, and no approver.
    pub fn new(preset: PermissionPreset) -> Self {
        let classes = ["read", "ls", "glob", "grep", "write", "edit", "bash"]
            .into_iter()
            .filter_map(|name| Some((name.to_string(), AccessClass::of_sandbox_tool(name)?)))
            .collect();
        PermissionPolicy {
            preset: AtomicU8::new(preset.to_u8()),
            classes,
            approver: None,
        }
    }

    /// Gives the tool `name` the class `class` (a user tool, an MCP tool, or a sandbox tool
    /// reclassified).
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

    /// The class of the tool `name`: as [`classify`](Self::classify) set it, else its
    /// [`AccessClass::of_sandbox_tool`] class, else `Exec`.
    pub fn class_of(&self, name: &str) -> AccessClass {
        self.classes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, class)| *class)
            .or_else(|| AccessClass::of_sandbox_tool(name))
            .unwrap_or(AccessClass::Exec)
    }

    /// What the model reads when a call of `tool` (of class `class`) is not allowed.
    fn denial(&self, preset: PermissionPreset, tool: &str, class: AccessClass) -> String {
        let session = match preset {
            PermissionPreset::ReadOnly => "this session is read-only".to_string(),
            PermissionPreset::WorkspaceWrite | PermissionPreset::FullAccess => {
                let what = if self.is_classified(tool) {
                    "running commands needs"
                } else {
                    "tools not known to only read or change files need"
                };
                debug_assert_eq!(class, AccessClass::Exec);
                format!(
                    "this session may read and change files, but {what} the user's approval, \
                     which it cannot ask for"
                )
            }
        };
        let allowed: Vec<&str> = self
            .classes
            .iter()
            .filter(|(_, class)| preset.permission(*class) == Permission::Allow)
            .map(|(name, _)| name.as_str())
            .collect();
        let use_instead = match allowed.as_slice() {
            [] => String::new(),
            [one] => format!("; use {one}"),
            [rest @ .., last] => format!("; use {} or {last}", rest.join(", ")),
        };
        format!("{session}: `{tool}` is not allowed{use_instead}")
    }

    fn is_classified(&self, name: &str) -> bool {
        self.classes.iter().any(|(n, _)| n == name) || AccessClass::of_sandbox_tool(name).is_some()
    }
}

#[async_trait]
impl ToolHook for PermissionPolicy {
    async fn before_tool_call(&self, call: &ToolCall, arguments: &Value) -> ToolCallDecision {
        let preset = self.preset();
        let class = self.class_of(&call.name);
        match (preset.permission(class), &self.approver) {
            (Permission::Allow, _) => ToolCallDecision::Allow,
            (Permission::Ask, Some(approver)) => ask(&**approver, call, arguments).await,
            (Permission::Ask | Permission::Deny, _) => {
                tracing::info!(tool = %call.name, ?preset, ?class, "the permission policy denied a call");
                ToolCallDecision::Deny(self.denial(preset, &call.name, class))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_say_what_the_session_allows() {
        let ro = PermissionPolicy::new(PermissionPreset::ReadOnly);
        assert_eq!(
            ro.denial(PermissionPreset::ReadOnly, "write", AccessClass::Write),
            "this session is read-only: `write` is not allowed; use read, ls, glob or grep"
        );
        let ww = PermissionPolicy::new(PermissionPreset::WorkspaceWrite);
        assert_eq!(
            ww.denial(PermissionPreset::WorkspaceWrite, "bash", AccessClass::Exec),
            "this session may read and change files, but running commands needs the user's approval, which it cannot ask for: `bash` is not allowed; use read, ls, glob, grep, write or edit"
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
