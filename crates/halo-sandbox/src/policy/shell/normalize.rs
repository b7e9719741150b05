//! The denylist's normal form of one simple command: wrappers dropped, the program by its
//! basename, paths normalized lexically, and the command strings it runs (`sh -c`, `eval`,
//! `env -S`, a shell's here-string or here-document).

/// One word of a command: its text without quotes, and whether a quoted part held
/// whitespace or an operator character.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Word {
    /// Without quotes, each substitution shown as `$(…)` with its body's whitespace
    /// collapsed.
    pub(super) text: String,
    /// Without quotes, substitutions as written: the command string `sh -c` or `eval` runs.
    pub(super) unexpanded: String,
    pub(super) quoted_special: bool,
}

/// Characters that change how a line splits when they are not quoted.
const OPERATORS: &[char] = &[';', '&', '|', '<', '>', '(', ')'];

impl Word {
    /// Appends unquoted text.
    pub(super) fn push(&mut self, text: &str) {
        self.text.push_str(text);
        self.unexpanded.push_str(text);
    }

    /// Appends text that came from a quote or an escape.
    pub(super) fn push_quoted(&mut self, text: &str) {
        if text
            .chars()
            .any(|c| c.is_whitespace() || OPERATORS.contains(&c))
        {
            self.quoted_special = true;
        }
        self.push(text);
    }

    /// Appends a command substitution with this body.
    pub(super) fn push_substitution(&mut self, body: &str) {
        self.text
            .push_str(&format!("$({})", super::collapse_whitespace(body)));
        self.unexpanded.push_str(&format!("$({body})"));
    }

    /// The word as it appears in normalized text.
    pub(super) fn shown(&self) -> String {
        if self.quoted_special {
            format!("'{}'", self.text)
        } else {
            self.text.clone()
        }
    }
}

/// A word of a simple command or one of its redirections, in the order written.
#[derive(Debug)]
pub(super) enum Item {
    Word(Word),
    Redirect(Redirect),
}

/// A redirection: how it is shown (`> /dev/sda`, `2 >& 1`, `<< EOF`, `<<< 'reboot'`) and the
/// text it feeds to standard input (a here-string's or a here-document's).
#[derive(Debug)]
pub(super) struct Redirect {
    pub(super) shown: String,
    pub(super) stdin: Option<String>,
}

/// A simple command, normalized.
pub(super) struct Simple {
    /// Empty when the command runs no program and has no redirection (`x=1`, `sudo`).
    pub(super) text: String,
    /// Whether `xargs` was among the wrappers dropped.
    pub(super) via_xargs: bool,
    /// The command strings it runs (`sh -c`, `eval`, `env -S`, a shell's here-string or
    /// here-document).
    pub(super) nested: Vec<String>,
}

/// Normalizes a simple command (see the module docs of `shell`): the program's basename and
/// the items after it, then the redirections written before the program.
pub(super) fn normalize(items: &[Item]) -> Simple {
    let words: Vec<&Word> = items
        .iter()
        .filter_map(|i| match i {
            Item::Word(w) => Some(w),
            Item::Redirect(_) => None,
        })
        .collect();
    let (index, via_xargs) = program_index(&words);
    let mut nested = Vec::new();
    // `env -S STRING ARGS` runs STRING split into words, then ARGS.
    let split_string = words[..index].iter().enumerate().find(|(i, w)| {
        !w.quoted_special
            && (w.text == "-S" || w.text == "--split-string")
            && words[..*i].iter().any(|e| basename(&e.text) == "env")
    });
    if let Some((i, _)) = split_string {
        let run: Vec<&str> = words[i + 1..]
            .iter()
            .map(|w| w.unexpanded.as_str())
            .collect();
        nested.push(run.join(" "));
    }
    let redirects_before = |end: usize| {
        items[..end].iter().filter_map(|i| match i {
            Item::Redirect(r) => Some(r.shown.as_str()),
            Item::Word(_) => None,
        })
    };
    let Some((program, args)) = words[index..].split_first() else {
        let text: Vec<&str> = redirects_before(items.len()).collect();
        return Simple {
            text: text.join(" "),
            via_xargs,
            nested,
        };
    };
    let name = if program.quoted_special {
        program.shown()
    } else {
        basename(&program.text).to_string()
    };
    let stdin_script = reads_script_from_stdin(&words[index..]);
    if SHELLS.contains(&name.as_str()) {
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if is_c_option(a) {
                nested.extend(it.next().map(|command| command.unexpanded.clone()));
                break;
            }
        }
    } else if name == "eval" {
        let line: Vec<&str> = args.iter().map(|a| a.unexpanded.as_str()).collect();
        nested.push(line.join(" "));
    }
    // The item of the program word: words[index] is the index-th word item.
    let at = items
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i, Item::Word(_)))
        .nth(index)
        .map_or(items.len(), |(at, _)| at);
    let mut text = name;
    for item in &items[at + 1..] {
        text.push(' ');
        match item {
            Item::Word(w) if w.quoted_special => text.push_str(&w.shown()),
            Item::Word(w) => text.push_str(&normalize_path(&w.text)),
            Item::Redirect(r) => text.push_str(&r.shown),
        }
    }
    for shown in redirects_before(at) {
        text.push(' ');
        text.push_str(shown);
    }
    if stdin_script {
        for item in items {
            if let Item::Redirect(Redirect {
                stdin: Some(script),
                ..
            }) = item
            {
                nested.push(script.clone());
            }
        }
    }
    Simple {
        text,
        via_xargs,
        nested,
    }
}

/// Whether a shell's argument is an option cluster holding `c` (`-c`, `-lc`, `-ec`).
fn is_c_option(word: &Word) -> bool {
    let t = word.text.as_str();
    !word.quoted_special
        && t.len() > 1
        && t.starts_with('-')
        && t[1..].chars().all(|c| c.is_ascii_alphabetic())
        && t.contains('c')
}

/// Whether `command` (program first, wrappers dropped, redirections left out) is a shell
/// that reads its script from standard input: `sh`, `bash -s -- ARGS`, `sudo bash -e`, `su -
/// root`; not `sh -c …` nor `bash script.sh`.
fn reads_script_from_stdin(command: &[&Word]) -> bool {
    let Some((program, args)) = command.split_first() else {
        return false;
    };
    let name = basename(&program.text);
    if program.quoted_special || !SHELLS.contains(&name) {
        return false;
    }
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if is_c_option(a) {
            return false;
        }
        if name == "su" || t == "-s" {
            // `su`'s operands name a user; after `-s` come the script's arguments.
            i += 1;
            continue;
        }
        if t == "-o" || t == "+o" {
            i += 2;
        } else if t.starts_with('-') || t.starts_with('+') {
            i += 1;
        } else {
            // A script file.
            return false;
        }
    }
    true
}

/// The index of the word that names the program, past reserved words, assignments and
/// wrappers with their options (`words.len()` when there is none), and whether `xargs` was
/// one of the wrappers.
fn program_index(words: &[&Word]) -> (usize, bool) {
    let mut i = 0;
    let mut via_xargs = false;
    while let Some(w) = words.get(i) {
        let text = w.text.as_str();
        if w.quoted_special {
            return (i, via_xargs);
        }
        if RESERVED.contains(&text) || is_assignment(text) {
            i += 1;
            continue;
        }
        let wrapper = basename(text);
        let Some(takes_value) = wrapper_options(wrapper) else {
            return (i, via_xargs);
        };
        via_xargs |= wrapper == "xargs";
        let at_wrapper = i;
        i += 1;
        while let Some(opt) = words.get(i) {
            let o = opt.text.as_str();
            if o == "--" {
                i += 1;
                break;
            }
            // `command -v NAME` looks a name up; it runs nothing.
            if wrapper == "command" && (o == "-v" || o == "-V") {
                return (at_wrapper, via_xargs);
            }
            if wrapper == "env" && is_assignment(o) {
                i += 1;
            } else if o.len() > 1 && o.starts_with('-') {
                i += if takes_value.contains(&o) { 2 } else { 1 };
            } else {
                break;
            }
        }
        // `timeout DURATION COMMAND`, `chroot NEWROOT COMMAND`.
        if wrapper == "timeout" || wrapper == "chroot" {
            i += 1;
        }
    }
    (words.len(), via_xargs)
}

/// Programs that run their arguments as another command, with the options of theirs that
/// take a value (the next word).
fn wrapper_options(program: &str) -> Option<&'static [&'static str]> {
    Some(match program {
        "sudo" => &[
            "-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-R", "-T",
        ],
        "doas" => &["-u", "-C"],
        "env" => &["-u", "-C", "-S", "--unset", "--chdir"],
        "nice" => &["-n", "--adjustment"],
        "ionice" => &["-c", "-n", "-p", "--class", "--classdata"],
        "timeout" => &["-s", "-k", "--signal", "--kill-after"],
        "xargs" => &[
            "-I",
            "-n",
            "-P",
            "-L",
            "-d",
            "-E",
            "-s",
            "-a",
            "--delimiter",
        ],
        "chroot" => &["--userspec", "--groups"],
        "nohup" | "command" | "builtin" | "exec" | "time" | "stdbuf" | "setsid" | "busybox"
        | "toybox" => &[],
        _ => return None,
    })
}

/// Reserved words that may still open a simple command's words (brush-parser reads them
/// as structure where bash does; `!` after a pipe, say, stays a word).
const RESERVED: &[&str] = &[
    "{", "}", "!", "then", "do", "else", "if", "elif", "while", "until",
];

/// Shells whose `-c` option takes a command string.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "fish", "su"];

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `word` normalized lexically when it is an absolute path or starts at the home folder
/// (`~`, `$HOME`, `${HOME}`); any other word as it is. `/./`, `/../` and `//` are `/`,
/// `/usr/../etc/` is `/etc`, `~/./` is `~`, `$HOME/a/../..` is `$HOME/..`.
pub(crate) fn normalize_path(word: &str) -> String {
    let (base, rest) = if let Some(rest) = word.strip_prefix('/') {
        ("", rest)
    } else if let Some((base, rest)) = ["~", "${HOME}", "$HOME"].iter().find_map(|base| {
        let rest = word.strip_prefix(base)?;
        (rest.is_empty() || rest.starts_with('/')).then_some((*base, rest))
    }) {
        (base, rest)
    } else {
        return word.to_string();
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                // Above `/` is `/`; above the home folder is kept.
                _ if base.is_empty() => {}
                _ => parts.push(".."),
            },
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return if base.is_empty() { "/" } else { base }.to_string();
    }
    format!("{base}/{}", parts.join("/"))
}

/// The last path component of a program word (`/usr/bin/rm` is `rm`); the word itself when
/// it has none or is a substitution (`$(…)`, `<(…)`).
fn basename(word: &str) -> &str {
    if word.contains('(') {
        return word;
    }
    match word.rsplit_once('/') {
        Some((_, name)) if !name.is_empty() => name,
        _ => word,
    }
}
