//! A shell-like split of a command line for the denylist: not a shell parser, just enough
//! structure to match rules against each command a line would run.
//!
//! A line is cut into pipelines at unquoted `;`, `&`, `&&`, `||`, newlines and parentheses,
//! and each pipeline into simple commands at `|` and `|&`. Words lose their quotes and
//! backslashes (`"$HOME"` is `$HOME`, `\rm` is `rm`); a word whose quoted part held
//! whitespace or an operator character is shown in single quotes, so `echo "rm -rf /"` stays
//! one argument of `echo`. Redirection operators are words of their own (`>/dev/sda` is
//! `> /dev/sda`), `#` starts a comment at the start of a word, and the bodies of `$(…)`,
//! backticks, `<(…)` and `>(…)` are returned as nested command lines to check on their own.
//! A here-document's body (the lines after `<<WORD` up to `WORD`) is skipped as data,
//! unless a shell reads its script from it (`bash <<EOF`): then it is a nested line too.
//!
//! Each simple command is normalized: words joined by one space, leading wrappers dropped
//! (`VAR=value`, `sudo`/`doas` and their options, `env`, `nohup`, `nice`, `time`,
//! `timeout`, `xargs`, `command`, `exec`, `setsid`, `busybox`, `toybox`, `chroot DIR`, and
//! reserved words such as `then` or `{`), and the program named by its basename (`/bin/rm`
//! is `rm`). Arguments that are absolute or home paths are normalized lexically: `//` is
//! `/`, `.` components go, `..` pops the component before it (at `/` it stays `/`; above
//! `~` or `$HOME` it is kept), a trailing `/` goes (`/./` and `/usr/../` are `/`,
//! `$HOME/` is `$HOME`). `sh -c STRING`, `bash -lc STRING`, `su -c STRING`, `eval ARGS` and
//! a shell's here-string (`sh <<< STRING`) and `env -S STRING` add their command string to
//! the nested lines.
//!
//! A pipeline of two or more commands is also shown joined by ` | `, with `xargs` kept
//! before a command it runs (`find / | xargs rm -rf`), since there what feeds `xargs`
//! matters.

/// Characters that change how a line splits when they are not quoted.
const OPERATORS: &[char] = &[';', '&', '|', '<', '>', '(', ')'];

/// One word of a command: its text without quotes, and whether a quoted part held
/// whitespace or an operator character.
#[derive(Debug, Clone, PartialEq)]
struct Word {
    text: String,
    quoted_special: bool,
}

/// One pipeline of a split line.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Pipeline {
    /// Its simple commands, normalized.
    pub(crate) commands: Vec<String>,
    /// With two or more commands: them joined by ` | `, each with `xargs ` before it when
    /// `xargs` was among the wrappers dropped (`echo / | xargs rm -rf`).
    pub(crate) joined: Option<String>,
}

/// A here-document waiting for its body, which starts after the next unquoted newline.
#[derive(Debug)]
struct Heredoc {
    delimiter: String,
    /// `<<-`: leading tabs are stripped from the body and the delimiter line.
    strip_tabs: bool,
    /// Whether a shell reads its script from it; `None` until its command ends.
    to_shell: Option<bool>,
}

/// A command line split for matching.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Split {
    /// Pipelines, in order.
    pub(crate) pipelines: Vec<Pipeline>,
    /// Command lines found inside this one (substitutions, `sh -c`, `eval`).
    pub(crate) nested: Vec<String>,
}

/// Splits `line` (see the module docs).
pub(crate) fn split(line: &str) -> Split {
    let mut s = Splitter {
        chars: line.chars().collect(),
        i: 0,
        word: String::new(),
        word_started: false,
        quoted_special: false,
        command: Vec::new(),
        pipeline: Vec::new(),
        delimiter_next: None,
        heredocs: Vec::new(),
        out: Split::default(),
    };
    s.run();
    s.out
}

/// `line` with every run of whitespace made one space, trimmed.
pub(crate) fn collapse_whitespace(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct Splitter {
    chars: Vec<char>,
    i: usize,
    word: String,
    word_started: bool,
    quoted_special: bool,
    command: Vec<Word>,
    pipeline: Vec<Vec<Word>>,
    /// After `<<` (`Some(false)`) or `<<-` (`Some(true)`): the next word is a delimiter.
    delimiter_next: Option<bool>,
    heredocs: Vec<Heredoc>,
    out: Split,
}

impl Splitter {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.i + ahead).copied()
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '\\' => {
                    match self.peek(1) {
                        // A line continuation.
                        Some('\n') => {}
                        Some(next) => self.push_quoted(next),
                        None => {}
                    }
                    self.i += 2;
                }
                '\'' => {
                    self.i += 1;
                    self.word_started = true;
                    while let Some(q) = self.peek(0) {
                        self.i += 1;
                        if q == '\'' {
                            break;
                        }
                        self.push_quoted(q);
                    }
                }
                '"' => {
                    self.i += 1;
                    self.word_started = true;
                    self.double_quoted();
                }
                '$' if self.peek(1) == Some('(') => {
                    self.i += 1;
                    let body = self.balanced();
                    self.word
                        .push_str(&format!("$({})", collapse_whitespace(&body)));
                    self.word_started = true;
                    self.out.nested.push(body);
                }
                '`' => {
                    self.i += 1;
                    let body = self.backticks();
                    self.word
                        .push_str(&format!("$({})", collapse_whitespace(&body)));
                    self.word_started = true;
                    self.out.nested.push(body);
                }
                '<' | '>' if self.peek(1) == Some('(') => {
                    self.end_word();
                    self.i += 1;
                    let body = self.balanced();
                    self.command.push(Word {
                        text: format!("{c}({})", collapse_whitespace(&body)),
                        quoted_special: false,
                    });
                    self.out.nested.push(body);
                }
                '#' if !self.word_started => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.i += 1;
                    }
                }
                '\n' => {
                    self.i += 1;
                    self.end_pipeline();
                    self.heredoc_bodies();
                }
                ';' | '(' | ')' => {
                    self.i += 1;
                    self.end_pipeline();
                }
                '&' => {
                    if self.peek(1) == Some('>') {
                        self.redirection();
                    } else {
                        self.i += if self.peek(1) == Some('&') { 2 } else { 1 };
                        self.end_pipeline();
                    }
                }
                '|' => match self.peek(1) {
                    Some('|') => {
                        self.i += 2;
                        self.end_pipeline();
                    }
                    Some('&') => {
                        self.i += 2;
                        self.end_command();
                    }
                    _ => {
                        self.i += 1;
                        self.end_command();
                    }
                },
                '<' | '>' => self.redirection(),
                c if c.is_whitespace() => {
                    self.i += 1;
                    self.end_word();
                }
                c => {
                    self.i += 1;
                    self.word.push(c);
                    self.word_started = true;
                }
            }
        }
        self.end_pipeline();
    }

    /// Appends a character that came from a quote or an escape.
    fn push_quoted(&mut self, c: char) {
        if c.is_whitespace() || OPERATORS.contains(&c) {
            self.quoted_special = true;
        }
        self.word.push(c);
        self.word_started = true;
    }

    /// The inside of `"…"`, up to and past the closing quote.
    fn double_quoted(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.i += 1;
                    return;
                }
                '\\' => {
                    if let Some(next) = self.peek(1) {
                        if !matches!(next, '"' | '\\' | '$' | '`' | '\n') {
                            self.push_quoted('\\');
                        }
                        if next != '\n' {
                            self.push_quoted(next);
                        }
                    }
                    self.i += 2;
                }
                '$' if self.peek(1) == Some('(') => {
                    self.i += 1;
                    let body = self.balanced();
                    self.word
                        .push_str(&format!("$({})", collapse_whitespace(&body)));
                    self.out.nested.push(body);
                }
                '`' => {
                    self.i += 1;
                    let body = self.backticks();
                    self.word
                        .push_str(&format!("$({})", collapse_whitespace(&body)));
                    self.out.nested.push(body);
                }
                c => {
                    self.i += 1;
                    self.push_quoted(c);
                }
            }
        }
    }

    /// The body of a `(…)` group starting at `self.i` (on the `(`), past its closing
    /// parenthesis; quotes inside are skipped over, an unclosed group runs to the end.
    fn balanced(&mut self) -> String {
        debug_assert_eq!(self.peek(0), Some('('));
        self.i += 1;
        let start = self.i;
        let mut depth = 1usize;
        let mut quote = None;
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some('"'), '\\') => self.i += 1,
                (Some(_), _) => {}
                (None, '\\') => self.i += 1,
                (None, '\'' | '"') => quote = Some(c),
                (None, '(') => depth += 1,
                (None, ')') => {
                    depth -= 1;
                    if depth == 0 {
                        return self.chars[start..self.i - 1].iter().collect();
                    }
                }
                (None, _) => {}
            }
        }
        let end = self.i.min(self.chars.len());
        self.chars[start..end].iter().collect()
    }

    /// The body of a backtick substitution (`self.i` just past the opening backtick), past
    /// its closing backtick.
    fn backticks(&mut self) -> String {
        let mut body = String::new();
        while let Some(c) = self.peek(0) {
            self.i += 1;
            match c {
                '`' => break,
                '\\' => {
                    if let Some(next) = self.peek(0) {
                        body.push(next);
                        self.i += 1;
                    }
                }
                c => body.push(c),
            }
        }
        body
    }

    /// A redirection operator as a word of its own (`>`, `>>`, `>|`, `>&`, `&>`, `&>>`,
    /// `<`, `<<`, `<<-`, `<<<`, `<>`, `<&`).
    fn redirection(&mut self) {
        self.end_word();
        let mut op = String::new();
        while let Some(c) = self.peek(0) {
            let fits = matches!(
                (op.as_str(), c),
                ("", '&' | '<' | '>')
                    | ("&" | "&>", '>')
                    | (">", '>' | '|' | '&')
                    | ("<", '<' | '>' | '&')
                    | ("<<", '<' | '-')
            );
            if !fits {
                break;
            }
            op.push(c);
            self.i += 1;
        }
        if op == "<<" || op == "<<-" {
            self.delimiter_next = Some(op == "<<-");
        }
        self.command.push(Word {
            text: op,
            quoted_special: false,
        });
    }

    /// Reads the bodies of the pending here-documents, line by line up to each delimiter
    /// line (`self.i` at the start of a line); a body a shell reads becomes a nested line.
    fn heredoc_bodies(&mut self) {
        for doc in std::mem::take(&mut self.heredocs) {
            let mut body = String::new();
            while self.i < self.chars.len() {
                let end = self.chars[self.i..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.chars.len(), |n| self.i + n);
                let line: String = self.chars[self.i..end].iter().collect();
                self.i = (end + 1).min(self.chars.len());
                let line = if doc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line.as_str()
                };
                if line.trim_end_matches('\r') == doc.delimiter {
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            if doc.to_shell == Some(true) {
                self.out.nested.push(body);
            }
        }
    }

    fn end_word(&mut self) {
        if self.word_started {
            if let Some(strip_tabs) = self.delimiter_next.take() {
                self.heredocs.push(Heredoc {
                    delimiter: self.word.clone(),
                    strip_tabs,
                    to_shell: None,
                });
            }
            self.command.push(Word {
                text: std::mem::take(&mut self.word),
                quoted_special: self.quoted_special,
            });
        }
        self.word.clear();
        self.word_started = false;
        self.quoted_special = false;
    }

    fn end_command(&mut self) {
        self.end_word();
        let command = std::mem::take(&mut self.command);
        let (program, _) = program_index(&command);
        let to_shell = reads_script_from_stdin(&command[program..]);
        for doc in self.heredocs.iter_mut().filter(|d| d.to_shell.is_none()) {
            doc.to_shell = Some(to_shell);
        }
        if !command.is_empty() {
            self.pipeline.push(command);
        }
    }

    fn end_pipeline(&mut self) {
        self.end_command();
        let pipeline = std::mem::take(&mut self.pipeline);
        if pipeline.is_empty() {
            return;
        }
        let mut commands = Vec::with_capacity(pipeline.len());
        let mut piped = Vec::with_capacity(pipeline.len());
        for words in &pipeline {
            let simple = normalize(words);
            self.out.nested.extend(simple.nested);
            if !simple.text.is_empty() {
                piped.push(if simple.via_xargs {
                    format!("xargs {}", simple.text)
                } else {
                    simple.text.clone()
                });
                commands.push(simple.text);
            }
        }
        if !commands.is_empty() {
            let joined = (piped.len() > 1).then(|| piped.join(" | "));
            self.out.pipelines.push(Pipeline { commands, joined });
        }
    }
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

/// Reserved words that may open a command without being its program.
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

/// A simple command, normalized.
struct Simple {
    text: String,
    /// Whether `xargs` was among the wrappers dropped.
    via_xargs: bool,
    /// The command strings it runs (`sh -c`, `eval`, a shell's here-string).
    nested: Vec<String>,
}

/// Normalizes a simple command (see the module docs).
fn normalize(words: &[Word]) -> Simple {
    let (index, via_xargs) = program_index(words);
    let rest = &words[index..];
    let mut nested = Vec::new();
    // `env -S STRING ARGS` runs STRING split into words, then ARGS.
    let split_string = words[..index].iter().enumerate().find(|(i, w)| {
        !w.quoted_special
            && (w.text == "-S" || w.text == "--split-string")
            && words[..*i].iter().any(|e| basename(&e.text) == "env")
    });
    if let Some((i, _)) = split_string {
        let run: Vec<&str> = words[i + 1..].iter().map(|w| w.text.as_str()).collect();
        nested.push(run.join(" "));
    }
    let Some((program, args)) = rest.split_first() else {
        return Simple {
            text: String::new(),
            via_xargs,
            nested,
        };
    };
    let name = if program.quoted_special {
        shown(program)
    } else {
        basename(&program.text).to_string()
    };
    if SHELLS.contains(&name.as_str()) {
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if is_c_option(a) {
                nested.extend(it.next().map(|command| command.text.clone()));
                break;
            }
        }
        if reads_script_from_stdin(rest) {
            let here_string = args
                .windows(2)
                .find(|w| !w[0].quoted_special && w[0].text == "<<<")
                .map(|w| w[1].text.clone());
            nested.extend(here_string);
        }
    } else if name == "eval" {
        let line: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
        nested.push(line.join(" "));
    }
    let mut text = name;
    for a in args {
        text.push(' ');
        if a.quoted_special {
            text.push_str(&shown(a));
        } else {
            text.push_str(&normalize_path(&a.text));
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

/// Whether `command` (program first, wrappers dropped) is a shell that reads its script
/// from standard input: `sh`, `bash -s -- ARGS`, `sudo bash -e`, `su - root`; not `sh -c
/// …` nor `bash script.sh`. Redirections and their targets are not arguments.
fn reads_script_from_stdin(command: &[Word]) -> bool {
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
        let is_operator = |w: &Word| {
            !w.quoted_special && !w.text.is_empty() && w.text.chars().all(|c| "<>&|-".contains(c))
        };
        if is_operator(a) && t != "-" && t != "--" {
            // A redirection and its target.
            i += 2;
            continue;
        }
        if t.chars().all(|c| c.is_ascii_digit()) && args.get(i + 1).is_some_and(is_operator) {
            // The descriptor of `2>file`.
            i += 1;
            continue;
        }
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
fn program_index(words: &[Word]) -> (usize, bool) {
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

/// A word as it appears in normalized text.
fn shown(word: &Word) -> String {
    if word.quoted_special {
        format!("'{}'", word.text)
    } else {
        word.text.clone()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn commands(line: &str) -> Vec<Vec<String>> {
        split(line)
            .pipelines
            .into_iter()
            .map(|p| p.commands)
            .collect()
    }

    #[test]
    fn splits_chains_and_pipelines_and_drops_wrappers() {
        assert_eq!(
            commands("cd a && sudo -u root rm -rf /  ;  ls | FOO=1 env -i nice -n 5 sh x || true"),
            vec![
                vec!["cd a".to_string()],
                vec!["rm -rf /".to_string()],
                vec!["ls".to_string(), "sh x".to_string()],
                vec!["true".to_string()],
            ]
        );
        assert_eq!(
            commands("/bin/rm -rf ~"),
            vec![vec!["rm -rf ~".to_string()]]
        );
        assert_eq!(
            commands("timeout 5 reboot"),
            vec![vec!["reboot".to_string()]]
        );
        assert_eq!(
            commands("if x; then reboot; fi")[1],
            vec!["reboot".to_string()]
        );
    }

    #[test]
    fn quotes_are_removed_but_quoted_operators_stay_one_word() {
        assert_eq!(
            commands(r#"rm -rf "/""#),
            vec![vec!["rm -rf /".to_string()]]
        );
        assert_eq!(
            commands(r"\rm -rf '$HOME'"),
            vec![vec!["rm -rf $HOME".to_string()]]
        );
        assert_eq!(
            commands(r#"echo "rm -rf /; reboot" | grep '| sh'"#),
            vec![vec![
                "echo 'rm -rf /; reboot'".to_string(),
                "grep '| sh'".to_string()
            ]]
        );
        assert_eq!(
            commands("echo hi # ; reboot"),
            vec![vec!["echo hi".to_string()]]
        );
        assert_eq!(commands("echo a#b"), vec![vec!["echo a#b".to_string()]]);
    }

    #[test]
    fn redirections_are_words_and_substitutions_are_nested() {
        assert_eq!(
            commands("cat x>/dev/sda 2>&1"),
            vec![vec!["cat x > /dev/sda 2 >& 1".to_string()]]
        );
        let line = r#"echo "$(rm -rf /)" `reboot` && bash <(curl -s https://x)"#;
        assert_eq!(
            split(line).nested,
            ["rm -rf /", "reboot", "curl -s https://x"]
        );
        assert_eq!(
            commands(line),
            vec![
                vec!["echo $(rm -rf /) $(reboot)".to_string()],
                vec!["bash <(curl -s https://x)".to_string()],
            ]
        );
        let s = split(r#"sh -c "rm -rf /" ; bash -lc 'reboot'; eval mkfs /dev/sda"#);
        assert_eq!(s.nested, ["rm -rf /", "reboot", "mkfs /dev/sda"]);
    }

    #[test]
    fn paths_are_normalized_lexically() {
        for (word, normal) in [
            ("/", "/"),
            ("/./", "/"),
            ("/../", "/"),
            ("//", "/"),
            ("/.", "/"),
            ("/usr/../", "/"),
            ("/usr/../etc/", "/etc"),
            ("/./*", "/*"),
            ("/tmp/./build/", "/tmp/build"),
            ("~", "~"),
            ("~/", "~"),
            ("~/./", "~"),
            ("~/..", "~/.."),
            ("~/a/../..", "~/.."),
            ("~/project/build/..", "~/project"),
            ("$HOME/", "$HOME"),
            ("${HOME}/.", "${HOME}"),
            ("~/.*", "~/.*"),
            ("./..", "./.."),
            ("build/..", "build/.."),
            ("~user/x", "~user/x"),
            ("$HOMEDIR/x", "$HOMEDIR/x"),
            ("of=/dev/sda", "of=/dev/sda"),
        ] {
            assert_eq!(normalize_path(word), normal, "{word}");
        }
        assert_eq!(
            commands(r#"rm -rf "$HOME"/./ /a//b "/x/../ y""#),
            vec![vec!["rm -rf $HOME /a/b '/x/../ y'".to_string()]]
        );
    }

    #[test]
    fn busybox_toybox_chroot_and_setsid_are_wrappers() {
        assert_eq!(
            commands(
                "busybox rm -rf / ; toybox rm x; sudo chroot --userspec=a:b /mnt rm -rf /; setsid -f ls; chroot /mnt"
            ),
            vec![
                vec!["rm -rf /".to_string()],
                vec!["rm x".to_string()],
                vec!["rm -rf /".to_string()],
                vec!["ls".to_string()],
            ]
        );
        assert_eq!(split("busybox sh -c 'reboot'").nested, ["reboot"]);
        assert_eq!(split("env -S 'rm -rf' /").nested, ["rm -rf /"]);
        assert!(split("sudo -S -u root ls").nested.is_empty());
    }

    #[test]
    fn a_joined_pipeline_keeps_xargs() {
        let s = split("find / -print0 | sort | sudo xargs -0 -n 1 rm -rf; ls | wc");
        assert_eq!(
            s.pipelines[0].commands,
            ["find / -print0", "sort", "rm -rf"]
        );
        assert_eq!(
            s.pipelines[0].joined.as_deref(),
            Some("find / -print0 | sort | xargs rm -rf")
        );
        assert_eq!(s.pipelines[1].joined.as_deref(), Some("ls | wc"));
        assert_eq!(split("xargs rm -rf").pipelines[0].joined, None);
    }

    #[test]
    fn a_shell_here_string_or_here_document_is_nested_and_other_bodies_are_data() {
        assert_eq!(split("sh <<< 'rm -rf /'").nested, ["rm -rf /"]);
        assert_eq!(split("sudo bash -s <<<\"reboot\"").nested, ["reboot"]);
        assert!(split("grep x <<< 'rm -rf /'").nested.is_empty());
        assert!(split("bash -c 'cat' <<< 'rm -rf /'").nested == ["cat"]);
        assert!(split("bash run.sh <<< 'rm -rf /'").nested.is_empty());

        let s = split("bash <<EOF\nrm -rf /\necho \"$x\"\nEOF\nls");
        assert_eq!(s.nested, ["rm -rf /\necho \"$x\"\n"]);
        assert_eq!(
            s.pipelines
                .iter()
                .map(|p| p.commands.clone())
                .collect::<Vec<_>>(),
            vec![vec!["bash << EOF".to_string()], vec!["ls".to_string()]]
        );
        let s = split("sh <<-'END' 2>/dev/null\n\treboot\n\tEND\nls");
        assert_eq!(s.nested, ["reboot\n"]);
        assert_eq!(s.pipelines.len(), 2);
        // A body fed to another program is data: an apostrophe in it opens no quote.
        let s = split("cat > notes.md <<'EOF'\nDon't rm -rf /\nEOF\nreboot");
        assert!(s.nested.is_empty());
        assert_eq!(
            s.pipelines
                .iter()
                .map(|p| p.commands.clone())
                .collect::<Vec<_>>(),
            vec![
                vec!["cat > notes.md << EOF".to_string()],
                vec!["reboot".to_string()]
            ]
        );
        // Two here-documents on one line, read in order; a body without its delimiter
        // runs to the end.
        let s = split("cat <<A; sh <<B\na1\nA\nreboot\nB\nsh <<C\nmkfs /dev/sda");
        assert_eq!(s.nested, ["reboot\n", "mkfs /dev/sda\n"]);
    }

    #[test]
    fn unclosed_quotes_and_groups_do_not_panic() {
        for line in [
            "echo 'abc",
            "echo \"abc",
            "echo $(ls",
            "echo `ls",
            "a \\",
            "\"\\",
            "$(",
            "<(",
            "cat <<",
            "cat <<EOF",
            "sh <<EOF\n",
            "sh <<-",
            "sh <<<",
            "chroot",
            "sudo chroot --userspec",
        ] {
            let _ = split(line);
        }
        assert_eq!(split("echo $(ls").nested, ["ls"]);
    }
}
