//! The coder's profiles: `coder profile list | use NAME | set KEY VALUE` on the user's config
//! file (`halo_adapters::profiles`), the settings a run resolves, and the session's own
//! record of what it was run with — the profile and the permission mode go into the
//! session's journal (a `coder.settings` record), never into the user's file.

use std::path::Path;
use std::sync::Arc;

use halo_adapters::profiles::{ProfileError, ProfileFile, ProfileSettings};
use halo_core::session::{Append, JournalEvent, Lease, SessionError, SessionStore};
use serde_json::{Value, json};

use crate::cli::{Cli, ProfileAction, Sandbox};

/// The kind of the session's record of its choices.
pub const SETTINGS: &str = "coder.settings";

/// Runs `coder profile ACTION` on the file at `path`; returns what to print.
///
/// # Errors
/// The file's, and an unknown profile or a bad key or value.
pub fn command(action: &ProfileAction, path: &Path) -> Result<String, ProfileError> {
    let mut file = ProfileFile::load(path)?;
    match action {
        ProfileAction::List => {
            let active = file.active();
            let mut lines = Vec::new();
            for name in file.names() {
                let p = file.profile(&name)?;
                let mark = if active.as_deref() == Some(name.as_str()) {
                    '*'
                } else {
                    ' '
                };
                let mut fields = Vec::new();
                for (key, value) in [
                    ("provider", p.provider),
                    ("model", p.model),
                    ("base_url", p.base_url),
                    ("context_window", p.context_window.map(|n| n.to_string())),
                    ("sandbox", p.sandbox),
                ] {
                    if let Some(value) = value {
                        fields.push(format!("{key}={value}"));
                    }
                }
                lines.push(format!("{mark} {name}  {}", fields.join(" ")));
            }
            if lines.is_empty() {
                lines.push(format!(
                    "no profiles in {}; `coder profile set KEY VALUE` makes one",
                    file.path().display()
                ));
            }
            Ok(lines.join("\n"))
        }
        ProfileAction::Use { name } => {
            file.use_profile(name)?;
            file.save()?;
            Ok(format!(
                "active profile: {name} ({})",
                file.path().display()
            ))
        }
        ProfileAction::Set {
            key,
            value,
            profile,
        } => {
            let name = profile
                .clone()
                .or_else(|| file.active())
                .unwrap_or_else(|| "default".into());
            let fresh = !file.names().contains(&name);
            file.set(&name, key, value)?;
            if fresh && file.active().is_none() {
                file.use_profile(&name)?;
            }
            file.save()?;
            Ok(format!(
                "{name}.{key} = {value} ({})",
                file.path().display()
            ))
        }
    }
}

/// What a session was last run with, from its journal's last `coder.settings` record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionChoice {
    /// The profile's name.
    pub profile: Option<String>,
    /// The sandbox mode (`read-only`, `workspace-write`, `full-access`).
    pub sandbox: Option<String>,
    /// `--read-only`.
    pub read_only: bool,
    /// `--yes`.
    pub yes: bool,
}

/// The session's last choice, if it recorded one.
///
/// # Errors
/// The store's.
pub async fn session_choice(
    store: &dyn SessionStore,
    session: &str,
) -> Result<Option<SessionChoice>, SessionError> {
    let events = store.load(session).await?;
    Ok(events.iter().rev().find_map(|e| match e {
        JournalEvent::Custom { kind, data, .. } if kind == SETTINGS => {
            let text = |k: &str| data.get(k).and_then(Value::as_str).map(str::to_owned);
            let flag = |k: &str| data.get(k).and_then(Value::as_bool).unwrap_or(false);
            Some(SessionChoice {
                profile: text("profile"),
                sandbox: text("sandbox"),
                read_only: flag("read_only"),
                yes: flag("yes"),
            })
        }
        _ => None,
    }))
}

/// Records `choice` at the end of the session's journal, under `lease` (before the agent
/// restores it, so the agent appends after it). Nothing when it equals the last one.
///
/// # Errors
/// The store's.
pub async fn record(
    store: &Arc<dyn SessionStore>,
    lease: &Lease,
    choice: &SessionChoice,
    at_ms: u64,
) -> Result<(), SessionError> {
    if session_choice(store.as_ref(), &lease.session)
        .await?
        .as_ref()
        == Some(choice)
    {
        return Ok(());
    }
    let held = store.load(&lease.session).await?.len() as u64;
    let event = JournalEvent::Custom {
        kind: SETTINGS.into(),
        data: json!({
            "profile": choice.profile,
            "sandbox": choice.sandbox,
            "read_only": choice.read_only,
            "yes": choice.yes,
        }),
        at_ms,
    };
    let append =
        Append::new(&lease.session, held, std::slice::from_ref(&event), at_ms).fenced(lease.fence);
    store.append(append).await.map(|_| ())
}

/// The settings of this run: `--profile`, else the session's recorded profile, else the
/// project's or the file's choice (`ProfileFile::resolve`); then the flags the user did not
/// give are filled in from them (context window, sandbox mode).
///
/// # Errors
/// The file's, and a profile named but not in it.
pub fn resolve(
    cli: &mut Cli,
    file: &ProfileFile,
    session: Option<&SessionChoice>,
) -> Result<ProfileSettings, ProfileError> {
    let chosen = cli
        .profile
        .clone()
        .or_else(|| session.and_then(|s| s.profile.clone()));
    let settings = file.resolve(chosen.as_deref(), Some(&cli.dir))?;
    if cli.context_window.is_none() {
        cli.context_window = settings.context_window;
    }
    if cli.sandbox.is_none() {
        let recorded = session.and_then(|s| s.sandbox.clone());
        cli.sandbox = match recorded.or_else(|| settings.sandbox.clone()).as_deref() {
            Some("read-only") => Some(Sandbox::ReadOnly),
            Some("full-access") => Some(Sandbox::FullAccess),
            Some("workspace-write") => Some(Sandbox::WorkspaceWrite),
            _ => None,
        };
    }
    Ok(settings)
}

/// What this run is recorded with.
pub fn choice_of(cli: &Cli, settings: &ProfileSettings) -> SessionChoice {
    let sandbox = match cli.sandbox_mode() {
        halo_sandbox::SandboxMode::ReadOnly => "read-only",
        halo_sandbox::SandboxMode::FullAccess => "full-access",
        _ => "workspace-write",
    };
    SessionChoice {
        profile: settings.name.clone(),
        sandbox: Some(sandbox.into()),
        read_only: cli.read_only,
        yes: cli.yes,
    }
}
