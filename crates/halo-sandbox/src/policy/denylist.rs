//! [`CommandDenylist`]: a before-hook that refuses dangerous shell commands before they run.

use async_trait::async_trait;
use halo_core::{ToolCallDecision, ToolContext, ToolHook};
use regex::Regex;
use serde_json::Value;

use super::shell;

/// How deep `sh -c`, `eval` and substitutions may nest before a command is refused unread.
const MAX_NESTING: usize = 8;

/// Where a [`DenyRule`]'s pattern is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleScope {
    /// Against each simple command of the line, normalized (quotes removed, whitespace made
    /// one space, wrappers such as `sudo` or `env` dropped, the program by its basename,
    /// redirections as words after the arguments: `> /dev/sda`, `2 >& 1`), and against each
    /// pipeline of two or more of them joined by ` | `. Anchor a program
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
    matcher: Matcher,
}

/// How a rule tells a match.
#[derive(Debug, Clone)]
enum Matcher {
    /// The pattern matches somewhere in the text.
    Pattern(Regex),
    /// The pattern finds shell function definitions (the name in group 1 or 2, the match
    /// ending after the `{`), and one of them calls itself in the background or through a
    /// pipe ([`calls_itself_in_background`]). `regex` has no backreferences, so the second
    /// half is code.
    ForkBomb(Regex),
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
            matcher: Matcher::Pattern(Regex::new(pattern)?),
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

    /// The pattern. For the built-in "fork bomb" rule it only finds function definitions;
    /// whether a function calls itself in the background or through a pipe is checked in
    /// code.
    pub fn pattern(&self) -> &str {
        match &self.matcher {
            Matcher::Pattern(re) | Matcher::ForkBomb(re) => re.as_str(),
        }
    }

    fn is_match(&self, text: &str) -> bool {
        match &self.matcher {
            Matcher::Pattern(re) => re.is_match(text),
            Matcher::ForkBomb(definition) => definition.captures_iter(text).any(|caps| {
                let (Some(whole), Some(name)) = (caps.get(0), caps.get(1).or_else(|| caps.get(2)))
                else {
                    return false;
                };
                calls_itself_in_background(name.as_str(), &function_body(&text[whole.end()..]))
            }),
        }
    }
}

/// The body of a `{ … }` group whose `{` came just before `rest`: up to its matching `}`
/// (or the end), quoted text and escaped characters blanked out (made spaces).
fn function_body(rest: &str) -> Vec<char> {
    let mut body = Vec::new();
    let mut depth = 1usize;
    let mut quote = None;
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                body.push(' ');
            }
            (Some(_), _) => body.push(' '),
            (None, '\'' | '"') => {
                quote = Some(c);
                body.push(' ');
            }
            (None, '\\') => {
                body.push(' ');
                if chars.next().is_some() {
                    body.push(' ');
                }
            }
            (None, '{') => {
                depth += 1;
                body.push(c);
            }
            (None, '}') => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
                body.push(c);
            }
            (None, c) => body.push(c),
        }
    }
    body
}

/// Whether `body` runs the command `name` through a pipe (`name | …`, `… | name`) or in
/// the background (`name &`, `name args &`), the shape of a fork bomb.
fn calls_itself_in_background(name: &str, body: &[char]) -> bool {
    let name: Vec<char> = name.chars().collect();
    let is_name_char = |c: char| c.is_alphanumeric() || "_:.-".contains(c);
    (0..body.len()).any(|i| {
        let after = i + name.len();
        body[i..].starts_with(&name)
            && (i == 0 || !is_name_char(body[i - 1]))
            && body.get(after).is_none_or(|&c| !is_name_char(c))
            && (is_piped_into(&body[..i]) || ends_in_background_or_pipe(&body[after..]))
    })
}

/// Whether the text before a command ends with a pipe (`|`, not `||`).
fn is_piped_into(before: &[char]) -> bool {
    let end = before.iter().rposition(|c| !c.is_whitespace());
    end.is_some_and(|e| before[e] == '|' && (e == 0 || before[e - 1] != '|'))
}

/// Whether the command whose arguments start `after` ends with `&` (not `&&`, nor a
/// redirection like `2>&1` or `&>`) or `|` (not `||`).
fn ends_in_background_or_pipe(after: &[char]) -> bool {
    for (i, &c) in after.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| after[p]);
        let next = after.get(i + 1).copied();
        match c {
            ';' | '}' | ')' | '(' | '\n' => return false,
            '&' if matches!(prev, Some('>' | '<')) || next == Some('>') => {}
            '&' => return next != Some('&'),
            '|' => return next != Some('|'),
            _ => {}
        }
    }
    false
}

/// Why [`CommandDenylist::check`] refused a command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Denial {
    /// The name of the rule that matched, or [`UNPARSED`] for a line the shell parser could
    /// not read.
    pub rule: String,
    /// The text the rule matched: a normalized command or pipeline, or the line.
    pub matched: String,
    /// Why the shell parser could not read the line, when that is why it was refused (a
    /// syntax error, an unclosed quote); `None` when a rule matched.
    pub parse_error: Option<String>,
}

/// The [`Denial::rule`] of a line the shell parser could not read.
pub const UNPARSED: &str = "command line the denylist cannot parse";

impl Denial {
    fn new(rule: impl Into<String>, matched: String) -> Self {
        Denial {
            rule: rule.into(),
            matched,
            parse_error: None,
        }
    }

    /// The error text the model reads for a refused call of `tool`.
    pub fn message(&self, tool: &str) -> String {
        if let Some(error) = &self.parse_error {
            return format!(
                "command not run: the denylist could not read `{}` as a shell command line \
                 ({error}), so `{tool}` refused it unchecked; fix its quotes, brackets or \
                 here-documents, or split it into simpler commands, and send it again",
                self.matched
            );
        }
        format!(
            "command not run: `{}` matches the denylist rule \"{}\", so `{tool}` refused it; \
             this session never runs such commands: do not retry it or a variant of it, and if \
             the task really needs it, stop and ask the user to run it themselves",
            self.matched, self.rule
        )
    }
}

/// Paths a recursive delete, `chmod`, `mv` or `find -delete` must never start from: `/`
/// (and `/*`, `/.*`), the home folder (`~`, `$HOME`, `${HOME}`, each with an optional `/`,
/// `/*` or `/.*`, or with `/..` above it) and the top-level system folders. Commands are
/// matched with their paths normalized (`/./` and `/usr/../` are `/`), so these are the
/// normal forms; `//`, `/.` and `/..` are kept for rules on text that is not normalized.
const ROOTS: &str = r"(?:/+(?:\.?\*|\.\.?)?|(?:~|\$\{?HOME\}?)(?:/\.\.)*/?(?:\.?\*)?|/(?:bin|boot|dev|etc|home|lib|lib32|lib64|opt|proc|root|sbin|srv|sys|usr|var)/?(?:\.?\*)?)";

/// Block devices: disks, partitions, RAID and device-mapper volumes.
const DEVICES: &str =
    r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk|md\d|dm-\d|mapper/|loop\d)";

/// Shells a script must not be piped into.
const SHELLS: &str = r"(?:sh|bash|zsh|dash|ksh|fish)";

/// The arguments of a shell that still reads its script from standard input: options
/// without `c` (`-e`, `-x`, `-o pipefail`), `-` or `--`, redirections, and `-s` followed by
/// the script's arguments.
const STDIN_SHELL_ARGS: &str = r"(?: -[abd-zA-Z]+| [-+]o \S+| --?| (?:\d+ )?(?:<|>|>>|>&|&>|&>>|>\||<&) \S+)*(?: -s(?: \S+)*)?";

/// Interpreters a downloaded script must not be piped into, with the arguments under
/// which they read the script from standard input: a few flags, then nothing, or `-` and
/// the script's arguments (`python3 - --yes`); not `-c`, `-e` or `-m` (code given inline).
const STDIN_INTERPRETERS: &str = r"(?:python[\d.]*|pypy3?|perl|ruby|node|nodejs|deno run|php|lua)(?: -[uqBIsSEwW]+)*(?: -(?: \S+)*)?";

/// Programs that list paths, feeding `xargs`.
const LISTERS: &str = r"(?:echo|printf|ls|find)";

/// `program` with a flag matching `flag` and an argument matching `arg` (followed by a
/// space or the end), in either order.
fn flag_and_arg(program: &str, flag: &str, arg: &str) -> String {
    format!(
        r"^(?:{program})(?: \S+)* {flag}(?: \S+)* {arg}(?: |$)|^(?:{program})(?: \S+)* {arg}(?: \S+)* {flag}(?: |$)"
    )
}

/// `program` with a flag matching `flag` and an argument in [`ROOTS`], in either order.
fn flag_and_root(program: &str, flag: &str) -> String {
    flag_and_arg(program, flag, ROOTS)
}

/// How a built-in rule matches.
enum Check {
    Pattern(String),
    /// A [`Matcher::ForkBomb`] with this definition pattern.
    ForkBomb(&'static str),
}

/// The `-r`, `-R` or `--recursive` of `rm`.
const RECURSIVE: &str = "(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)";

/// The built-in rules (name, scope, check), in the order they are tried.
fn default_rules() -> Vec<(&'static str, RuleScope, Check)> {
    use Check::{ForkBomb, Pattern};
    use RuleScope::{Command, Line};
    vec![
        (
            "recursive delete of /, the home folder or a system folder",
            Command,
            Pattern(flag_and_root("rm", RECURSIVE)),
        ),
        (
            "rm with --no-preserve-root",
            Command,
            Pattern(r"^rm (?:.* )?--no-preserve-root(?: |$)".into()),
        ),
        (
            "find deleting from /, the home folder or a system folder",
            Command,
            // Options before the start paths (`-L`, `-O3`, `-D tree`), then start paths
            // up to the first expression word.
            Pattern(format!(
                r"^find(?: -[HLP]| -O\d*| -D \S+)*(?: [^-\s(!]\S*)*? {ROOTS}(?: .*)? (?:-delete|-exec(?:dir)? (?:sudo )?(?:\S*/)?rm)(?: |$)"
            )),
        ),
        (
            "xargs deleting a listing of /, the home folder or a system folder",
            Command,
            // On a joined pipeline: `echo /`, `ls ~`, `find /` first, `xargs rm -r` later.
            Pattern(format!(
                r"^{LISTERS}(?: \S+)*? {ROOTS}(?: [^|]*)?(?: \| [^|]*)*? \| xargs rm(?: \S+)* {RECURSIVE}(?: |$)"
            )),
        ),
        (
            "recursive chmod or chown of /, the home folder or a system folder",
            Command,
            Pattern(flag_and_root(
                "chmod|chown|chgrp",
                "(?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)",
            )),
        ),
        (
            "move /, the home folder or a system folder",
            Command,
            // A root as a source: followed by another operand, or after `-t DIR`.
            Pattern(format!(
                r"^mv(?: \S+)* {ROOTS}(?: \S+)* [^-\s]\S*$|^mv(?: \S+)* (?:-t |--target-directory[= ])\S+(?: \S+)* {ROOTS}$"
            )),
        ),
        (
            "make a filesystem",
            Command,
            Pattern(r"^(?:mkfs(?:\.\w+)?|mke2fs|mkswap|mkdosfs|mkntfs)(?: |$)".into()),
        ),
        (
            "erase or repartition a disk device",
            Command,
            Pattern(
                [
                    format!(r"^(?:shred|blkdiscard)(?: \S+)* {DEVICES}"),
                    flag_and_arg(
                        "wipefs",
                        r"(?:-[a-zA-Z]*[ao][a-zA-Z]*|--all|--offset\S*)",
                        &format!(r"{DEVICES}\S*"),
                    ),
                    flag_and_arg(
                        "sgdisk",
                        r"(?:-[a-zA-Z]*[Zzodn][a-zA-Z]*\S*|--zap-all|--zap|--clear|--delete\S*|--new\S*)",
                        &format!(r"{DEVICES}\S*"),
                    ),
                    flag_and_arg("sfdisk", r"(?:--delete|<)", &format!(r"{DEVICES}\S*")),
                    format!(
                        r"^parted(?: \S+)* {DEVICES}\S*(?: \S+)* (?:mklabel|mktable|mkpart|rm|resizepart)(?: |$)"
                    ),
                ]
                .join("|"),
            ),
        ),
        (
            "dd onto a disk device",
            Command,
            Pattern(format!(r"^dd(?: \S+)* of={DEVICES}")),
        ),
        (
            "write onto a disk device",
            Command,
            Pattern(format!(
                r"(?:^| )(?:>|>>|>\||&>|&>>|>&) {DEVICES}|^tee(?: \S+)* {DEVICES}"
            )),
        ),
        (
            "fork bomb",
            Line,
            // A function definition (`name() {`, `function name {`); the body is checked in
            // code for the name run in the background or through a pipe.
            ForkBomb(
                r#"(?:^|[\s;&|(){}'"])(?:function\s+)?([\w:.\-]+)\s*\(\s*\)\s*\{|(?:^|[\s;&|(){}'"])function\s+([\w:.\-]+)\s*\{"#,
            ),
        ),
        (
            "download piped into a shell",
            Command,
            Pattern(format!(r"(?:^|\| )(?:curl|wget)(?: .*)? \| {SHELLS}(?: |$)")),
        ),
        (
            "download piped into an interpreter",
            Command,
            Pattern(format!(
                r"(?:^|\| )(?:curl|wget)(?: .*)? \| {STDIN_INTERPRETERS}(?: \||$)"
            )),
        ),
        (
            "run a downloaded script",
            Command,
            Pattern(format!(
                r"^(?:{SHELLS}|source|\.)(?: \S+)* <\((?:curl|wget) |^\$\((?:curl|wget) "
            )),
        ),
        (
            "script piped into a shell",
            Command,
            // Any text piped into a shell reading stdin (`echo … | base64 -d | sh`, `cat
            // x.sh | bash`), a shell reading `<(…)` or a here-string of a substitution, and
            // decoded text run as a command (`eval "$(… | base64 -d)"`).
            Pattern(format!(
                r"\| {SHELLS}{STDIN_SHELL_ARGS}(?: \||$)|^{SHELLS}(?: -[abd-zA-Z]+)* <\(|^{SHELLS}(?: \S+)* <<< \$\(|^\$\((?:[^)]* )?base64(?: \S+)*? (?:-d|-D|--decode)(?: |\))"
            )),
        ),
        (
            "shut down or reboot the machine",
            Command,
            Pattern(
                r"^(?:shutdown|reboot|halt|poweroff)(?: |$)|^systemctl(?: \S+)* (?:reboot|poweroff|halt|kexec)(?: |$)|^(?:init|telinit) [06](?: |$)|(?:^| )(?:>|>>|>\||&>|&>>) /proc/sysrq-trigger(?: |$)|^tee(?: \S+)* /proc/sysrq-trigger(?: |$)".into(),
            ),
        ),
        (
            "kill every process",
            Command,
            // `kill … -1` (pid -1 is every process the user may signal; a first `-1` is the
            // signal), `killall5`, and `pkill`/`killall -u USER` without a name.
            Pattern(
                r"^kill (?:\S+ )+-1(?: |$)|^killall5(?: |$)|^(?:pkill|killall)(?: -\S+)* (?:-u|--user)[= ]\S+(?: -\S+)*$".into(),
            ),
        ),
    ]
}

/// A before-hook that refuses dangerous shell commands: the call becomes an error tool
/// result saying which rule matched and that the command was not run.
///
/// It looks at one tool, by default `bash` with the argument `command` (see
/// [`for_tool`](Self::for_tool)); other tools pass. The built-in rules ([`new`](Self::new))
/// refuse, by rule name:
///
/// - *recursive delete …*: `rm -r`/`-R`/`--recursive` (with or without `-f`, flags before
///   or after) of a root: `/`, `/*`, `~`, `$HOME`, `${HOME}` (each also with `/*` or
///   `/.*`), `~/..`, or a top-level system folder (`/etc`, `/usr`, …); and `rm
///   --no-preserve-root` of anything;
/// - *find deleting …*: `find` from a root (after options such as `-L`, `-H`, `-P`, `-O3`,
///   among several start paths) with `-delete` or `-exec rm`;
/// - *xargs deleting a listing …*: a pipeline that starts with `echo`, `printf`, `ls` or
///   `find` of a root and later runs `xargs rm -r` (`find / -print0 | xargs -0 rm -rf`);
/// - `chmod`/`chown`/`chgrp -R` of a root (`chmod -R 000 /`), and `mv` of a root (`mv / x`,
///   `mv ~ /tmp/old`, `mv -t DIR /usr`);
/// - `mkfs*`, `mke2fs`, `mkswap`; `shred`/`blkdiscard` of a block device, `wipefs -a`,
///   `sgdisk --zap-all|-o|-n|-d`, `sfdisk --delete` and `parted … mklabel|mkpart|rm` on
///   one; `dd … of=/dev/sd*|hd*|vd*|xvd*|nvme*|mmcblk*|disk*|md*|dm-*|mapper/*|loop*`;
///   redirection (`>`, `>>`, `&>`, …) or `tee` onto those devices;
/// - fork bombs: a shell function whose body runs itself in the background or through a
///   pipe (`:(){ :|:& };:`, `fork() { fork & fork & }`, `function f { f | f & }`);
/// - `curl`/`wget … | sh` (or bash, zsh, dash, ksh, fish; `| sudo bash` too), `… |
///   python`, `perl`, `ruby`, `node` or `php` reading the script from stdin, `bash <(curl
///   …)` and `sh -c "$(curl …)"`;
/// - *script piped into a shell*: any text piped into a shell that reads its script from
///   stdin (`echo … | base64 -d | sh`, `cat x.sh | bash`, `… | sudo bash -s -- --yes`),
///   `bash <(…)`, `sh <<< "$(…)"`, and `eval "$(… | base64 -d)"`;
/// - `shutdown`, `reboot`, `halt`, `poweroff`, `systemctl reboot|poweroff|halt|kexec`,
///   `init 0|6`, `telinit 0|6`, and writes to `/proc/sysrq-trigger` (`echo b > …`);
/// - *kill every process*: `kill … -1`, `killall5`, `pkill`/`killall -u USER` without a
///   process name.
///
/// A line is parsed as bash by [brush-parser](https://docs.rs/brush-parser/0.4) and checked
/// command by command: every simple command in it (each part of a `;`, `&&`, `||`, `&` or
/// `|` chain, and those in subshells, `{ … }` groups, `if`, `while`, `for` and `case` bodies
/// and function definitions), with `sudo`, `env`, `nohup`, `nice`, `timeout`, `xargs`,
/// `setsid`, `busybox`, `toybox`, `chroot DIR` and similar wrappers dropped, each pipeline
/// also as a whole, and again inside `sh -c '…'`, `eval`, `env -S`, `$(…)` and backticks
/// (in any word, `${x:-…}`, `$((…))` and a here-document whose delimiter is not quoted),
/// `<(…)` and a shell's here-string or here-document (`sh <<< '…'`, `bash <<EOF`; 8 levels
/// deep, a line nested deeper is refused). Paths are compared lexically normalized (`/./`,
/// `/../`, `//`, `~/` and `"$HOME"/` are roots). Quoted arguments stay arguments: `echo
/// "reboot"`, `grep shutdown log.txt` and `git commit -m "rm -rf /"` pass, while `rm -rf
/// "/"` and `\rm -rf /` do not; a here-document fed to anything but a shell is data (`cat >
/// README.md <<'EOF'` may mention `curl … | sh`).
///
/// A line the parser cannot read is refused unchecked, as rule [`UNPARSED`], with
/// [`Denial::parse_error`] saying why (an unclosed quote, a syntax error, a construct
/// brush-parser 0.4 does not know such as `select`, a `$(…)` after `<<EOF` on the same line,
/// which it misreads, or more than 8192 brackets and compound-command keywords): bash would
/// refuse such a line too, but only after running the commands before the error, so it
/// never passes unread. The whole line is tried against the rules as one command first, so
/// that a rule it breaks is named (`rm -rf / 'oops`); otherwise the model is asked to fix the
/// line and send it again.
///
/// A denylist is a speed bump, not a sandbox: it stops a model's slip, not a determined
/// adversary. It reads the text of one command line and knows nothing of variables,
/// files or what a program does with its input, so it cannot see, for example:
/// `x=/; rm -rf $x`; `rm -rf $(echo /)`; `python3 -c "import shutil; shutil.rmtree('/')"`
/// or `perl -e '…'`; a download and its run in two steps (`curl -o x.sh … && bash x.sh`);
/// a script written to a file and run later; an alias or a function defined in an earlier
/// call; a listing fed to `xargs` from a file. Where in doubt the rules prefer refusing a
/// harmless command to missing a dangerous one: any text piped into a shell is refused, so
/// the harmless `cat script.sh | bash` is refused too (`bash script.sh` runs), and a fork
/// bomb inside quotes is refused although it would only be printed. Confinement comes from
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
            .map(|(name, scope, check)| {
                // The built-in patterns are constants; the unit tests compile every one.
                let compile = |pattern: &str| {
                    Regex::new(pattern)
                        .unwrap_or_else(|e| panic!("built-in denylist rule `{name}`: {e}"))
                };
                let matcher = match check {
                    Check::Pattern(p) => Matcher::Pattern(compile(&p)),
                    Check::ForkBomb(p) => Matcher::ForkBomb(compile(p)),
                };
                DenyRule {
                    name: name.into(),
                    scope,
                    matcher,
                }
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
            return Some(Denial::new(
                format!("commands nested more than {MAX_NESTING} levels deep"),
                shell::collapse_whitespace(line),
            ));
        }
        let collapsed = shell::collapse_whitespace(line);
        if let Some(rule) = self.first_match(RuleScope::Line, &collapsed) {
            return Some(Denial::new(&rule.name, collapsed));
        }
        let split = match shell::split(line) {
            Ok(split) => split,
            Err(unparsed) => {
                // Unread, the line is refused; the whole of it is tried as one command first,
                // so that a rule it breaks is named (`rm -rf / 'oops`).
                if let Some(rule) = self.first_match(RuleScope::Command, &collapsed) {
                    return Some(Denial::new(&rule.name, collapsed));
                }
                return Some(Denial {
                    parse_error: Some(unparsed.reason),
                    ..Denial::new(UNPARSED, collapsed)
                });
            }
        };
        for pipeline in &split.pipelines {
            for text in pipeline.commands.iter().chain(pipeline.joined.as_ref()) {
                if let Some(rule) = self.first_match(RuleScope::Command, text) {
                    return Some(Denial::new(&rule.name, text.clone()));
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
            .find(|r| r.scope == scope && r.is_match(text))
    }
}

#[async_trait]
impl ToolHook for CommandDenylist {
    async fn before_tool_call(&self, cx: &ToolContext, arguments: &Value) -> ToolCallDecision {
        let call = cx.call();
        match arguments.get(&self.argument).and_then(Value::as_str) {
            Some(command) if call.name == self.tool => match self.check(command) {
                Some(denial) => {
                    tracing::info!(tool = %call.name, rule = %denial.rule, "the denylist refused a command");
                    ToolCallDecision::Deny(denial.message(&call.name))
                }
                None => ToolCallDecision::Allow,
            },
            _ => ToolCallDecision::Allow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_pattern_compiles() {
        for (name, _, check) in default_rules() {
            let pattern = match check {
                Check::Pattern(p) => p,
                Check::ForkBomb(p) => p.to_string(),
            };
            assert!(Regex::new(&pattern).is_ok(), "{name}: {pattern}");
        }
        assert_eq!(CommandDenylist::new().rules().len(), default_rules().len());
    }

    fn body(text: &str) -> Vec<char> {
        function_body(text)
    }

    #[test]
    fn a_function_body_ends_at_its_brace_with_quotes_blanked() {
        assert_eq!(
            body(" f | f & }; f").iter().collect::<String>(),
            " f | f & "
        );
        assert_eq!(
            body(r#" { a; }; echo "f | x" }; f"#)
                .iter()
                .collect::<String>(),
            " { a; }; echo         "
        );
        assert_eq!(body(" f & ").iter().collect::<String>(), " f & ");
    }

    #[test]
    fn a_fork_bomb_calls_itself_through_a_pipe_or_in_the_background() {
        for (name, text, bomb) in [
            (":", ":|:&", true),
            ("fork", " fork & fork & ", true),
            ("f", " f arg & ", true),
            ("s", " cat | s; ", true),
            ("f", " f | tee x ", true),
            ("f", " f && f; ", false),
            ("f", " make || f; ", false),
            ("f", " f 2>&1; ", false),
            ("f", " f &> log; ", false),
            ("f", " g | h & ", false),
            ("f", " ff | ff & ", false),
            ("f", " echo          ", false),
            ("f", "", false),
        ] {
            let body: Vec<char> = text.chars().collect();
            assert_eq!(
                calls_itself_in_background(name, &body),
                bomb,
                "{name}: {text:?}"
            );
        }
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
