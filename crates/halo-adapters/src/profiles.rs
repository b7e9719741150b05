//! Named profiles (feature `profiles`): which provider, model, base URL, context window and
//! sandbox mode to use, kept in a user config file and chosen by name.
//!
//! ```toml
//! # ~/.config/halo/config.toml
//! active = "work"
//!
//! [profiles.work]
//! provider = "anthropic"        # anthropic | gemini | deepseek | openai | local
//! model = "claude-sonnet-4-5"
//! context_window = 200000      # tokens
//!
//! [profiles.home]
//! provider = "openai"
//! base_url = "http://127.0.0.1:8080/v1"   # llama.cpp's llama-server
//! model = "qwen2.5-7b"
//! sandbox = "workspace-write"  # read-only | workspace-write | full-access
//! ```
//!
//! A setting is resolved as: the project's override (`DIR/.agent/config.toml`, its own keys
//! at the top level, and `profile = "NAME"` to pick one) > the chosen profile (given by
//! name, else the file's `active`) > nothing (the program's defaults: the environment's
//! keys and variables). API keys are never in the file: they stay in the environment.
//! [`ProfileFile`] changes the file with `toml_edit`, so its comments, blank lines and key
//! order survive `use` and `set`.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, value};

/// The keys a profile may have.
pub const KEYS: [&str; 5] = ["provider", "model", "base_url", "context_window", "sandbox"];

/// The providers a profile may name.
pub const PROVIDERS: [&str; 5] = ["anthropic", "gemini", "deepseek", "openai", "local"];

/// The sandbox modes a profile may name.
pub const SANDBOX_MODES: [&str; 3] = ["read-only", "workspace-write", "full-access"];

/// Why a profile file could not be read, changed or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The file is not TOML, or a value has the wrong type.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// No profile of that name.
    #[error("there is no profile `{name}`; the profiles are: {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names there are, comma-separated.
        known: String,
    },
    /// A key or value a profile cannot have.
    #[error("{0}")]
    BadSetting(String),
}

/// The settings of a profile, resolved (see the [module docs](self)). `None`: not set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProfileSettings {
    /// The profile's name (`None` when none was chosen).
    pub name: Option<String>,
    /// One of [`PROVIDERS`].
    pub provider: Option<String>,
    /// The model id.
    pub model: Option<String>,
    /// The provider's base URL.
    pub base_url: Option<String>,
    /// The context window, in tokens.
    pub context_window: Option<u64>,
    /// One of [`SANDBOX_MODES`].
    pub sandbox: Option<String>,
}

impl ProfileSettings {
    /// The value of the environment variable `var` as the adapters' `from_env_with` read it,
    /// with this profile on top: a `*_MODEL` variable is the profile's model and a
    /// `*_BASE_URL` its base URL when set; anything else (API keys) comes from `env`.
    pub fn lookup(&self, var: &str, env: impl Fn(&str) -> Option<String>) -> Option<String> {
        let own = if var.ends_with("_MODEL") {
            self.model.clone()
        } else if var.ends_with("_BASE_URL") {
            self.base_url.clone()
        } else {
            None
        };
        own.or_else(|| env(var))
    }

    /// `other`'s settings where set, these elsewhere.
    fn overridden_by(self, other: ProfileSettings) -> ProfileSettings {
        ProfileSettings {
            name: other.name.or(self.name),
            provider: other.provider.or(self.provider),
            model: other.model.or(self.model),
            base_url: other.base_url.or(self.base_url),
            context_window: other.context_window.or(self.context_window),
            sandbox: other.sandbox.or(self.sandbox),
        }
    }
}

/// A profile file, read and changed in place: see the [module docs](self).
#[derive(Debug, Clone)]
pub struct ProfileFile {
    path: PathBuf,
    doc: DocumentMut,
}

impl ProfileFile {
    /// The user's file: `$HALO_CONFIG`, else `$XDG_CONFIG_HOME/halo/config.toml`, else
    /// `~/.config/halo/config.toml`.
    pub fn default_path() -> PathBuf {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(path) = var("HALO_CONFIG") {
            return PathBuf::from(path);
        }
        let config = var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")))
            .unwrap_or_else(std::env::temp_dir);
        config.join("halo").join("config.toml")
    }

    /// Reads `path` (a file that does not exist is empty).
    ///
    /// # Errors
    /// [`ProfileError::Io`], [`ProfileError::Invalid`] for a file that is not TOML.
    pub fn load(path: impl Into<PathBuf>) -> Result<Self, ProfileError> {
        let path = path.into();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io(&path, &e)),
        };
        let doc = text
            .parse::<DocumentMut>()
            .map_err(|e| ProfileError::Invalid {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        Ok(ProfileFile { path, doc })
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's text as it would be saved.
    pub fn text(&self) -> String {
        self.doc.to_string()
    }

    /// The profiles' names, in the file's order.
    pub fn names(&self) -> Vec<String> {
        self.doc
            .get("profiles")
            .and_then(Item::as_table_like)
            .map(|t| t.iter().map(|(k, _)| k.to_owned()).collect())
            .unwrap_or_default()
    }

    /// The name of the active profile (`active = "NAME"`), if any.
    pub fn active(&self) -> Option<String> {
        self.doc.get("active")?.as_str().map(str::to_owned)
    }

    /// The settings of profile `name`.
    ///
    /// # Errors
    /// [`ProfileError::Unknown`], [`ProfileError::Invalid`] for a value of the wrong type.
    pub fn profile(&self, name: &str) -> Result<ProfileSettings, ProfileError> {
        let table = self
            .doc
            .get("profiles")
            .and_then(|p| p.get(name))
            .and_then(Item::as_table_like)
            .ok_or_else(|| self.unknown(name))?;
        let mut settings = settings_of(table, &self.path)?;
        settings.name = Some(name.to_owned());
        Ok(settings)
    }

    fn unknown(&self, name: &str) -> ProfileError {
        let names = self.names();
        ProfileError::Unknown {
            name: name.to_owned(),
            known: if names.is_empty() {
                "none yet (`profile set KEY VALUE` makes one)".into()
            } else {
                names.join(", ")
            },
        }
    }

    /// Makes `name` the active profile.
    ///
    /// # Errors
    /// [`ProfileError::Unknown`].
    pub fn use_profile(&mut self, name: &str) -> Result<(), ProfileError> {
        self.profile(name)?;
        replace(&mut self.doc["active"], value(name));
        Ok(())
    }

    /// Sets `key` of profile `name` to `text` (made when missing; a number for
    /// `context_window`), keeping everything else in the file where it is.
    ///
    /// # Errors
    /// [`ProfileError::BadSetting`] for a key that is not one of [`KEYS`], or a value that
    /// key cannot take.
    pub fn set(&mut self, name: &str, key: &str, text: &str) -> Result<(), ProfileError> {
        let item = setting(key, text)?;
        if !valid_name(name) {
            return Err(ProfileError::BadSetting(format!(
                "`{name}` is not a profile name: use letters, digits, `-` or `_`"
            )));
        }
        if !self.doc.contains_key("profiles") {
            let mut profiles = Table::new();
            profiles.set_implicit(true);
            self.doc["profiles"] = Item::Table(profiles);
        }
        let profiles = &mut self.doc["profiles"];
        if profiles.get(name).is_none() {
            profiles[name] = Item::Table(Table::new());
        }
        replace(&mut profiles[name][key], item);
        Ok(())
    }

    /// Writes the file (a new file renamed over the old one; its folder made when missing).
    ///
    /// # Errors
    /// [`ProfileError::Io`].
    pub fn save(&self) -> Result<(), ProfileError> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| io(dir, &e))?;
        }
        let tmp = self.path.with_extension("toml.tmp");
        std::fs::write(&tmp, self.doc.to_string()).map_err(|e| io(&tmp, &e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| io(&self.path, &e))
    }

    /// The settings to use: the project's override file (`DIR/.agent/config.toml`, when
    /// `project` is given and has one) over the profile `chosen` (else the project's
    /// `profile = "NAME"`, else the file's active one), over nothing.
    ///
    /// # Errors
    /// [`ProfileError::Unknown`] for a profile named but not in the file; the errors of
    /// [`load`](Self::load) for the project's file.
    pub fn resolve(
        &self,
        chosen: Option<&str>,
        project: Option<&Path>,
    ) -> Result<ProfileSettings, ProfileError> {
        let project = match project {
            Some(dir) => Some(ProfileFile::load(project_file(dir))?),
            None => None,
        };
        let project_pick = project
            .as_ref()
            .and_then(|p| p.doc.get("profile")?.as_str().map(str::to_owned));
        let name = chosen
            .map(str::to_owned)
            .or(project_pick)
            .or_else(|| self.active());
        let base = match &name {
            Some(name) => self.profile(name)?,
            None => ProfileSettings::default(),
        };
        Ok(match project {
            Some(p) => base.overridden_by(settings_of(p.doc.as_table(), &p.path)?),
            None => base,
        })
    }
}

/// A project's override file: `DIR/.agent/config.toml`.
pub fn project_file(dir: &Path) -> PathBuf {
    dir.join(".agent").join("config.toml")
}

/// Puts `new` in `slot`, keeping the comment and spacing around the value it replaces.
fn replace(slot: &mut Item, mut new: Item) {
    if let (Some(old), Some(fresh)) = (slot.as_value(), new.as_value_mut()) {
        *fresh.decor_mut() = old.decor().clone();
    }
    *slot = new;
}

fn io(path: &Path, e: &std::io::Error) -> ProfileError {
    ProfileError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// The TOML value of `key` set to `text`, checked.
fn setting(key: &str, text: &str) -> Result<Item, ProfileError> {
    let one_of = |what: &str, allowed: &[&str]| {
        if allowed.contains(&text) {
            Ok(value(text))
        } else {
            Err(ProfileError::BadSetting(format!(
                "`{text}` is not a {what}; use one of: {}",
                allowed.join(", ")
            )))
        }
    };
    match key {
        "provider" => one_of("provider", &PROVIDERS),
        "sandbox" => one_of("sandbox mode", &SANDBOX_MODES),
        "model" | "base_url" if !text.trim().is_empty() => Ok(value(text)),
        "context_window" => match text.parse::<i64>() {
            Ok(n) if n >= 1024 => Ok(value(n)),
            _ => Err(ProfileError::BadSetting(format!(
                "`{text}` is not a context window: give a number of tokens, at least 1024"
            ))),
        },
        "model" | "base_url" => Err(ProfileError::BadSetting(format!("{key} is empty"))),
        other => Err(ProfileError::BadSetting(format!(
            "a profile has no key `{other}`; the keys are: {}",
            KEYS.join(", ")
        ))),
    }
}

/// The settings a table holds (unknown keys are left alone).
fn settings_of(
    table: &dyn toml_edit::TableLike,
    path: &Path,
) -> Result<ProfileSettings, ProfileError> {
    let invalid = |key: &str, what: &str| ProfileError::Invalid {
        path: path.display().to_string(),
        message: format!("`{key}` must be {what}"),
    };
    let text = |key: &str| -> Result<Option<String>, ProfileError> {
        match table.get(key) {
            None => Ok(None),
            Some(item) => item
                .as_str()
                .map(|s| Some(s.to_owned()))
                .ok_or_else(|| invalid(key, "a string")),
        }
    };
    let context_window = match table.get("context_window") {
        None => None,
        Some(item) => Some(
            item.as_integer()
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| invalid("context_window", "a number of tokens"))?,
        ),
    };
    Ok(ProfileSettings {
        name: None,
        provider: text("provider")?,
        model: text("model")?,
        base_url: text("base_url")?,
        context_window,
        sandbox: text("sandbox")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# my profiles\nactive = \"work\" # the usual one\n\n[profiles.work]\n# the office model\nprovider = \"anthropic\"\nmodel = \"claude-x\"\n\n[profiles.home]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n";

    fn file(dir: &tempfile::TempDir) -> ProfileFile {
        let path = dir.path().join("config.toml");
        std::fs::write(&path, FILE).unwrap();
        ProfileFile::load(path).unwrap()
    }

    #[test]
    fn use_and_set_keep_comments_and_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = file(&dir);
        assert_eq!(f.names(), ["work", "home"]);
        f.use_profile("home").unwrap();
        f.set("home", "model", "qwen2.5-7b").unwrap();
        f.set("work", "context_window", "200000").unwrap();
        f.set("lab", "provider", "gemini").unwrap();
        f.save().unwrap();
        let text = std::fs::read_to_string(f.path()).unwrap();
        assert_eq!(
            text,
            "# my profiles\nactive = \"home\" # the usual one\n\n[profiles.work]\n# the office model\nprovider = \"anthropic\"\nmodel = \"claude-x\"\ncontext_window = 200000\n\n[profiles.home]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"qwen2.5-7b\"\n\n[profiles.lab]\nprovider = \"gemini\"\n"
        );
        let again = ProfileFile::load(f.path()).unwrap();
        assert_eq!(again.active().as_deref(), Some("home"));
        assert_eq!(again.profile("work").unwrap().context_window, Some(200_000));
    }

    #[test]
    fn a_project_overrides_the_chosen_profile_which_overrides_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let f = file(&dir);
        let work = f.resolve(None, None).unwrap();
        assert_eq!(
            (
                work.name.as_deref(),
                work.provider.as_deref(),
                work.model.as_deref()
            ),
            (Some("work"), Some("anthropic"), Some("claude-x"))
        );
        let project = dir.path().join("project");
        std::fs::create_dir_all(project.join(".agent")).unwrap();
        std::fs::write(
            project_file(&project),
            "profile = \"home\"\nmodel = \"project-model\"\nsandbox = \"read-only\"\n",
        )
        .unwrap();
        let resolved = f.resolve(None, Some(&project)).unwrap();
        assert_eq!(resolved.name.as_deref(), Some("home"));
        assert_eq!(resolved.provider.as_deref(), Some("openai"));
        assert_eq!(resolved.model.as_deref(), Some("project-model"));
        assert_eq!(
            resolved.base_url.as_deref(),
            Some("http://127.0.0.1:8080/v1")
        );
        assert_eq!(resolved.sandbox.as_deref(), Some("read-only"));
        // A name given wins over the project's pick.
        let chosen = f.resolve(Some("work"), Some(&project)).unwrap();
        assert_eq!(chosen.provider.as_deref(), Some("anthropic"));
        assert_eq!(chosen.model.as_deref(), Some("project-model"));
        // Nothing chosen and no file: nothing set.
        let empty = ProfileFile::load(dir.path().join("none.toml")).unwrap();
        assert_eq!(
            empty.resolve(None, None).unwrap(),
            ProfileSettings::default()
        );
    }

    #[test]
    fn bad_keys_values_and_names_are_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = file(&dir);
        for (key, value, says) in [
            ("temperature", "1", "the keys are: provider"),
            ("provider", "mistral", "use one of: anthropic"),
            ("context_window", "lots", "a number of tokens"),
            ("sandbox", "none", "read-only, workspace-write, full-access"),
        ] {
            let e = f.set("work", key, value).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        let e = f.use_profile("nope").unwrap_err().to_string();
        assert!(e.contains("the profiles are: work, home"), "{e}");
        assert!(f.set("a b", "model", "m").is_err());
        assert_eq!(f.text(), FILE, "nothing changed");
    }

    #[test]
    fn the_lookup_puts_the_profile_over_the_environment_but_keys() {
        let settings = ProfileSettings {
            model: Some("m1".into()),
            ..ProfileSettings::default()
        };
        let env = |var: &str| Some(format!("env {var}"));
        assert_eq!(settings.lookup("OPENAI_MODEL", env).as_deref(), Some("m1"));
        assert_eq!(
            settings.lookup("OPENAI_BASE_URL", env).as_deref(),
            Some("env OPENAI_BASE_URL")
        );
        assert_eq!(
            settings.lookup("OPENAI_API_KEY", env).as_deref(),
            Some("env OPENAI_API_KEY")
        );
    }
}
