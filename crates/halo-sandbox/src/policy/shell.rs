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
//!
//! Each simple command is normalized: words joined by one space, leading wrappers dropped
//! (`VAR=value`, `sudo`/`doas` and their options, `env`, `nohup`, `nice`, `time`,
//! `timeout`, `xargs`, `command`, `exec`, and reserved words such as `then` or `{`), and the
//! program named by its basename (`/bin/rm` is `rm`). `sh -c STRING`, `bash -lc STRING`,
//! `su -c STRING` and `eval ARGS` add their command string to the nested lines.

/// Characters that change how a line splits when they are not quoted.
const OPERATORS: &[char] = &[';', '&', '|', '<', '>', '(', ')'];

/// One word of a command: its text without quotes, and whether a quoted part held
/// whitespace or an operator character.
#[derive(Debug, Clone, PartialEq)]
struct Word {
    text: String,
    quoted_special: bool,
}

/// A command line split for matching.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Split {
    /// Pipelines; each holds its simple commands, normalized.
    pub(crate) pipelines: Vec<Vec<String>>,
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
                '\n' | ';' | '(' | ')' => {
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
    /// `<`, `<<`, `<<<`, `<>`, `<&`).
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
                    | ("<<", '<')
            );
            if !fits {
                break;
            }
            op.push(c);
            self.i += 1;
        }
        self.command.push(Word {
            text: op,
            quoted_special: false,
        });
    }

    fn end_word(&mut self) {
        if self.word_started {
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
        let mut normalized = Vec::with_capacity(pipeline.len());
        for words in &pipeline {
            let (text, nested) = normalize(words);
            self.out.nested.extend(nested);
            if !text.is_empty() {
                normalized.push(text);
            }
        }
        if !normalized.is_empty() {
            self.out.pipelines.push(normalized);
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
        "nohup" | "command" | "builtin" | "exec" | "time" | "stdbuf" => &[],
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

/// The normalized text of a simple command, and the command strings it runs (`sh -c`,
/// `eval`).
fn normalize(words: &[Word]) -> (String, Vec<String>) {
    let rest = &words[program_index(words)..];
    let mut nested = Vec::new();
    let Some((program, args)) = rest.split_first() else {
        return (String::new(), nested);
    };
    let name = if program.quoted_special {
        shown(program)
    } else {
        basename(&program.text).to_string()
    };
    if SHELLS.contains(&name.as_str()) {
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let t = a.text.as_str();
            let is_c = t.len() > 1
                && t.starts_with('-')
                && t[1..].chars().all(|c| c.is_ascii_alphabetic())
                && t.contains('c');
            if is_c {
                nested.extend(it.next().map(|command| command.text.clone()));
                break;
            }
        }
    } else if name == "eval" {
        let line: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
        nested.push(line.join(" "));
    }
    let mut text = name;
    for a in args {
        text.push(' ');
        text.push_str(&shown(a));
    }
    (text, nested)
}

/// The index of the word that names the program, past reserved words, assignments and
/// wrappers with their options (`words.len()` when there is none).
fn program_index(words: &[Word]) -> usize {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let text = w.text.as_str();
        if w.quoted_special {
            return i;
        }
        if RESERVED.contains(&text) || is_assignment(text) {
            i += 1;
            continue;
        }
        let wrapper = basename(text);
        let Some(takes_value) = wrapper_options(wrapper) else {
            return i;
        };
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
                return at_wrapper;
            }
            if wrapper == "env" && is_assignment(o) {
                i += 1;
            } else if o.len() > 1 && o.starts_with('-') {
                i += if takes_value.contains(&o) { 2 } else { 1 };
            } else {
                break;
            }
        }
        // `timeout DURATION COMMAND`.
        if wrapper == "timeout" {
            i += 1;
        }
    }
    words.len()
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
        split(line).pipelines
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
        let s = split(r#"echo "$(rm -rf /)" `reboot` && bash <(curl -s https://x)"#);
        assert_eq!(s.nested, ["rm -rf /", "reboot", "curl -s https://x"]);
        assert_eq!(
            s.pipelines,
            vec![
                vec!["echo $(rm -rf /) $(reboot)".to_string()],
                vec!["bash <(curl -s https://x)".to_string()],
            ]
        );
        let s = split(r#"sh -c "rm -rf /" ; bash -lc 'reboot'; eval mkfs /dev/sda"#);
        assert_eq!(s.nested, ["rm -rf /", "reboot", "mkfs /dev/sda"]);
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
        ] {
            let _ = split(line);
        }
        assert_eq!(split("echo $(ls").nested, ["ls"]);
    }
}
