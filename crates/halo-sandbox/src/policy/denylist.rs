//! [`CommandDenylist`]: a before-hook that refuses dangerous shell commands before they run.

use futures::future::BoxFuture;
use halo_core::{ToolCall, ToolCallDecision, ToolHook};
use regex::Regex;
use serde_json::Value;

use super::shell;

/// How deep `sh -c`, `eval` and substitutions may nest before a command is refused unread.
const MAX_NESTING: usize = 8;

/// Where a [`DenyRule`]'s pattern is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleScope {
    /// Against each simple command of the line, normalized (quotes removed, whitespace made
    /// one space, wrappers such as `sudo` or `env` dropped, the program by its basename),
    /// and against each pipeline of two or more of them joined by ` | `. Anchor a program
    /// with `^`: `^rm ` matches `sudo /bin/rm -rf x` but not `echo rm`.
    Command,
    /// Against the whole line, with every run of whitespace made one space (quotes kept).
    /// For shapes the split would break up, like a fork bomb.
    Line,
}

/// One denylist rule: a name the model reads when it matches, and a pattern.
#[derive(Debug, Clone)]
pub struct DenyRule {
    name: String,
    scope: RuleScope,
    pattern: Regex,
}

impl DenyRule {
    /// A rule matched against each normalized command and pipeline ([`RuleScope::Command`]).
    /// `pattern` is [`regex`] syntax.
    ///
    /// ```
    /// use halo_sandbox::policy::{CommandDenylist, DenyRule};
    ///
    /// let list = CommandDenylist::new()
    ///     .with_rule(DenyRule::command("force push", r"^git push(?: \S+)* (?:-f|--force)(?: |$)").unwrap());
    /// assert_eq!(list.check("cd repo && git push --force origin main").unwrap().rule, "force push");
    /// assert!(list.check("git push origin main").is_none());
    /// ```
    ///
    /// # Errors
    /// The [`regex::Error`] of an invalid pattern.
    pub fn command(name: impl Into<String>, pattern: &str) -> Result<Self, regex::Error> {
        Self::new(name, RuleScope::Command, pattern)
    }

    /// A rule matched against the whole line ([`RuleScope::Line`]).
    ///
    /// # Errors
    /// The [`regex::Error`] of an invalid pattern.
    pub fn line(name: impl Into<String>, pattern: &str) -> Result<Self, regex::Error> {
        Self::new(name, RuleScope::Line, pattern)
    }

    fn new(name: impl Into<String>, scope: RuleScope, pattern: &str) -> Result<Self, regex::Error> {
        Ok(DenyRule {
            name: name.into(),
            scope,
            pattern: Regex::new(pattern)?,
        })
    }

    /// The rule's name, as the model reads it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the pattern is matched.
    pub fn scope(&self) -> RuleScope {
        self.scope
    }

    /// The pattern.
    pub fn pattern(&self) -> &str {
        self.pattern.as_str()
    }
}

/// Why [`CommandDenylist::check`] refused a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The name of the rule that matched.
    pub rule: String,
    /// The text the rule matched: a normalized command or pipeline, or the line.
    pub matched: String,
}

impl Denial {
    /// The error text the model reads for a refused call of `tool`.
    pub fn message(&self, tool: &str) -> String {
        format!(
            "command not run: `{}` matches the denylist rule \"{}\", so `{tool}` refused it; \
             this session never runs such commands: do not retry it or a variant of it, and if \
             the task really needs it, stop and ask the user to run it themselves",
            self.matched, self.rule
        )
    }
}

/// Paths a recursive delete, `chmod` or `find -delete` must never start from: `/` (and
/// `/*`, `//`, `/.`), the home folder (`~`, `$HOME`, `${HOME}`, each with an optional `/`
/// or `/*`) and the top-level system folders.
const ROOTS: &str = r"(?:/+(?:\*|\.\.?)?|~/?\*?|\$\{?HOME\}?/?\*?|/(?:bin|boot|dev|etc|home|lib|lib32|lib64|opt|proc|root|sbin|srv|sys|usr|var)/?\*?)";

/// Block devices: disks, partitions, RAID and device-mapper volumes.
const DEVICES: &str =
    r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk|md\d|dm-\d|mapper/|loop\d)";

/// Shells a downloaded script must not be piped into.
const SHELLS: &str = r"(?:sh|bash|zsh|dash|ksh|fish)";

/// `program` with a flag matching `flag` and an argument in [`ROOTS`], in either order.
fn flag_and_root(program: &str, flag: &str) -> String {
    format!(
        r"^(?:{program})(?: \S+)* {flag}(?: \S+)* {ROOTS}(?: |$)|^(?:{program})(?: \S+)* {ROOTS}(?: \S+)* {flag}(?: |$)"
    )
}

/// The built-in rules (name, scope, pattern).
fn default_rules() -> Vec<(&'static str, RuleScope, String)> {
    use RuleScope::{Command, Line};
    vec![
        (
            "recursive delete of /, the home folder or a system folder",
            Command,
            flag_and_root("rm", "(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)"),
        ),
        (
            "rm with --no-preserve-root",
            Command,
            r"^rm (?:.* )?--no-preserve-root(?: |$)".into(),
        ),
        (
            "find deleting from /, the home folder or a system folder",
            Command,
            format!(r"^find {ROOTS}(?: .*)? (?:-delete|-exec rm|-execdir rm)(?: |$)"),
        ),
        (
            "recursive chmod or chown of /, the home folder or a system folder",
            Command,
            flag_and_root("chmod|chown|chgrp", "(?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)"),
        ),
        (
            "make a filesystem",
            Command,
            r"^(?:mkfs(?:\.\w+)?|mke2fs|mkswap|mkdosfs|mkntfs|wipefs)(?: |$)".into(),
        ),
        (
            "dd onto a disk device",
            Command,
            format!(r"^dd(?: \S+)* of={DEVICES}"),
        ),
        (
            "write onto a disk device",
            Command,
            format!(r"(?:^| )(?:>|>>|>\||&>|&>>|>&) {DEVICES}|^tee(?: \S+)* {DEVICES}"),
        ),
        (
            "fork bomb",
            Line,
            r"[\w:.]+ ?\( ?\) ?\{ ?[\w:.]+ ?\| ?[\w:.]+ ?& ?\} ?;? ?[\w:.]+".into(),
        ),
        (
            "download piped into a shell",
            Command,
            format!(r"(?:^|\| )(?:curl|wget)(?: .*)? \| {SHELLS}(?: |$)"),
        ),
        (
            "run a downloaded script",
            Command,
            format!(
                r"^(?:{SHELLS}|source|\.)(?: \S+)* <\((?:curl|wget) |^\$\((?:curl|wget) "
            ),
        ),
        (
            "shut down or reboot the machine",
            Command,
            r"^(?:shutdown|reboot|halt|poweroff)(?: |$)|^systemctl(?: \S+)* (?:reboot|poweroff|halt|kexec)(?: |$)|^(?:init|telinit) [06](?: |$)".into(),
        ),
    ]
}

/// A before-hook that refuses dangerous shell commands: the call becomes an error tool
/// result saying which rule matched and that the command was not run.
///
/// It looks at one tool, by default `bash` with the argument `command` (see
/// [`for_tool`](Self::for_tool)); other tools pass. The built-in rules ([`new`](Self::new))
/// refuse:
///
/// - `rm -r`/`-R`/`--recursive` (with or without `-f`, flags before or after) of `/`,
///   `/*`, `~`, `$HOME`, `${HOME}` or a top-level system folder, and `rm --no-preserve-root`;
/// - `find` from those folders with `-delete` or `-exec rm`;
/// - `chmod`/`chown`/`chgrp -R` on them (`chmod -R 777 /`);
/// - `mkfs*`, `mke2fs`, `mkswap`, `wipefs`;
/// - `dd … of=/dev/sd*|hd*|vd*|xvd*|nvme*|mmcblk*|disk*|md*|dm-*|mapper/*|loop*`, and
///   redirection (`>`, `>>`, `&>`, …) or `tee` onto those devices;
/// - fork bombs (`:(){ :|:& };:` and its spacing and naming variants);
/// - `curl`/`wget … | sh` (or bash, zsh, dash, ksh, fish; `| sudo bash` too), `bash
///   <(curl …)` and `sh -c "$(curl …)"`;
/// - `shutdown`, `reboot`, `halt`, `poweroff`, `systemctl reboot|poweroff|halt|kexec`,
///   `init 0|6`.
///
/// A line is checked command by command: every part of a `;`, `&&`, `||`, `&` or `|`
/// chain, with `sudo`, `env`, `nohup`, `timeout`, `xargs` and similar wrappers dropped, and
/// again inside `sh -c '…'`, `eval`, `$(…)`, backticks and `<(…)` (8 levels deep; a line
/// nested deeper is refused). Quoted arguments stay arguments: `echo "reboot"`, `grep
/// shutdown log.txt` and `git commit -m "rm -rf /"` pass, while `rm -rf "/"` and `\rm -rf
/// /` do not.
///
/// A denylist is a speed bump, not a sandbox: it stops a model's slip, not a determined
/// adversary (a script file, an alias or `perl -e` get around it). Where in doubt the rules
/// prefer refusing a harmless command to missing a dangerous one. Confinement comes from
/// the sandbox itself.
///
/// ```
/// use halo_sandbox::policy::CommandDenylist;
///
/// let list = CommandDenylist::new();
/// let denial = list.check("cd /tmp && sudo rm -rf --no-preserve-root /").unwrap();
/// assert_eq!(denial.rule, "recursive delete of /, the home folder or a system folder");
/// assert_eq!(denial.matched, "rm -rf --no-preserve-root /");
/// assert!(list.check("rm -rf ./build && echo reboot").is_none());
/// ```
#[derive(Debug, Clone)]
pub struct CommandDenylist {
    tool: String,
    argument: String,
    rules: Vec<DenyRule>,
}

impl Default for CommandDenylist {
    fn default() -> Self {
        Self::new()
    }
}

impl CommandDenylist {
    /// The built-in rules, on the tool `bash` and its argument `command`.
    pub fn new() -> Self {
        let rules = default_rules()
            .into_iter()
            .map(|(name, scope, pattern)| {
                // The built-in patterns are constants; the unit tests compile every one.
                DenyRule::new(name, scope, &pattern)
                    .unwrap_or_else(|e| panic!("built-in denylist rule `{name}`: {e}"))
            })
            .collect();
        CommandDenylist {
            tool: "bash".into(),
            argument: "command".into(),
            rules,
        }
    }

    /// No rules at all (add your own with [`with_rule`](Self::with_rule)).
    pub fn empty() -> Self {
        CommandDenylist {
            rules: Vec::new(),
            ..Self::new()
        }
    }

    /// Looks at the string argument `argument` of the tool `tool` instead of `bash`'s
    /// `command`.
    pub fn for_tool(mut self, tool: impl Into<String>, argument: impl Into<String>) -> Self {
        self.tool = tool.into();
        self.argument = argument.into();
        self
    }

    /// Adds a rule after the existing ones.
    pub fn with_rule(mut self, rule: DenyRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// The rules, in the order they are tried.
    pub fn rules(&self) -> &[DenyRule] {
        &self.rules
    }

    /// The first rule `command` breaks, or `None` when it may run.
    pub fn check(&self, command: &str) -> Option<Denial> {
        self.check_nested(command, 0)
    }

    fn check_nested(&self, line: &str, depth: usize) -> Option<Denial> {
        if depth > MAX_NESTING {
            return Some(Denial {
                rule: format!("commands nested more than {MAX_NESTING} levels deep"),
                matched: shell::collapse_whitespace(line),
            });
        }
        let collapsed = shell::collapse_whitespace(line);
        if let Some(rule) = self.first_match(RuleScope::Line, &collapsed) {
            return Some(Denial {
                rule: rule.name.clone(),
                matched: collapsed,
            });
        }
        let split = shell::split(line);
        for pipeline in &split.pipelines {
            let joined = (pipeline.len() > 1).then(|| pipeline.join(" | "));
            for text in pipeline.iter().chain(joined.as_ref()) {
                if let Some(rule) = self.first_match(RuleScope::Command, text) {
                    return Some(Denial {
                        rule: rule.name.clone(),
                        matched: text.clone(),
                    });
                }
            }
        }
        split
            .nested
            .iter()
            .find_map(|inner| self.check_nested(inner, depth + 1))
    }

    fn first_match(&self, scope: RuleScope, text: &str) -> Option<&DenyRule> {
        self.rules
            .iter()
            .find(|r| r.scope == scope && r.pattern.is_match(text))
    }
}

impl ToolHook for CommandDenylist {
    fn before_tool_call<'a>(
        &'a self,
        call: &'a ToolCall,
        arguments: &'a Value,
    ) -> BoxFuture<'a, ToolCallDecision> {
        let decision = match arguments.get(&self.argument).and_then(Value::as_str) {
            Some(command) if call.name == self.tool => match self.check(command) {
                Some(denial) => {
                    tracing::info!(tool = %call.name, rule = %denial.rule, "the denylist refused a command");
                    ToolCallDecision::Deny(denial.message(&call.name))
                }
                None => ToolCallDecision::Allow,
            },
            _ => ToolCallDecision::Allow,
        };
        Box::pin(futures::future::ready(decision))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_pattern_compiles() {
        for (name, _, pattern) in default_rules() {
            assert!(Regex::new(&pattern).is_ok(), "{name}: {pattern}");
        }
        assert_eq!(CommandDenylist::new().rules().len(), default_rules().len());
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut line = "ls".to_string();
        for _ in 0..10 {
            line = format!("sh -c {}", shell_quote(&line));
        }
        let d = CommandDenylist::new().check(&line).unwrap();
        assert_eq!(d.rule, "commands nested more than 8 levels deep");
        let mut ok = "ls".to_string();
        for _ in 0..3 {
            ok = format!("sh -c {}", shell_quote(&ok));
        }
        assert_eq!(CommandDenylist::new().check(&ok), None);
    }

    fn shell_quote(s: &str) -> String {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
