//! The walk over brush-parser's syntax tree: every simple command, normalized, in its
//! pipeline, and the command lines nested in words (`$(…)`, backticks, `<(…)`).

use brush_parser::ParserOptions;
use brush_parser::ast::{
    self, AndOr, Command, CommandPrefixOrSuffixItem as PrefixOrSuffix, CompoundCommand,
    ExtendedTestExpr, IoFileRedirectKind, IoFileRedirectTarget, IoRedirect,
    ProcessSubstitutionKind,
};
use brush_parser::word::{self, WordPiece, WordPieceWithSource};

use super::normalize::{Item, Redirect, Word, normalize};
use super::{Pipeline, Split, Unparsed, collapse_whitespace};

/// Splits a parsed program; `source` is the text it was parsed from (process substitutions
/// are taken from it by location).
pub(super) fn split(program: &ast::Program, source: &str) -> Result<Split, Unparsed> {
    let mut walker = Walker {
        source,
        options: ParserOptions::default(),
        out: Split::default(),
        error: None,
    };
    for list in &program.complete_commands {
        walker.list(list);
    }
    match walker.error {
        Some(reason) => Err(Unparsed { reason }),
        None => Ok(walker.out),
    }
}

struct Walker<'a> {
    source: &'a str,
    options: ParserOptions,
    out: Split,
    /// The first word brush-parser could not read; the split is then refused.
    error: Option<String>,
}

impl Walker<'_> {
    fn list(&mut self, list: &ast::CompoundList) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first);
            for next in &and_or.additional {
                let (AndOr::And(p) | AndOr::Or(p)) = next;
                self.pipeline(p);
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) {
        let mut commands = Vec::new();
        let mut piped = Vec::new();
        let in_pipe = pipeline.seq.len() > 1;
        for command in &pipeline.seq {
            self.command(command, in_pipe, &mut commands, &mut piped);
        }
        if !commands.is_empty() {
            let joined = (piped.len() > 1).then(|| piped.join(" | "));
            self.out.pipelines.push(Pipeline { commands, joined });
        }
    }

    /// One command of a pipeline: its normalized text to `commands`, and to `piped` its
    /// text in the joined pipeline (`in_pipe`: there are two or more).
    fn command(
        &mut self,
        command: &Command,
        in_pipe: bool,
        commands: &mut Vec<String>,
        piped: &mut Vec<String>,
    ) {
        let redirects = match command {
            Command::Simple(simple) => {
                let simple = normalize(&self.simple(simple));
                self.out.nested.extend(simple.nested);
                if !simple.text.is_empty() {
                    piped.push(if simple.via_xargs {
                        format!("xargs {}", simple.text)
                    } else {
                        simple.text.clone()
                    });
                    commands.push(simple.text);
                }
                return;
            }
            Command::Compound(compound, redirects) => {
                self.compound(compound);
                redirects.as_ref()
            }
            Command::Function(function) => {
                self.compound(&function.body.0);
                function.body.1.as_ref()
            }
            Command::ExtendedTest(test, redirects) => {
                self.test(&test.expr);
                redirects.as_ref()
            }
        };
        if in_pipe {
            piped.push(collapse_whitespace(&command.to_string()));
        }
        // A compound command's own redirections, as a command without a program.
        let items: Vec<Item> = redirects
            .into_iter()
            .flat_map(|r| &r.0)
            .map(|r| Item::Redirect(self.redirect(r)))
            .collect();
        let shown = normalize(&items).text;
        if !shown.is_empty() {
            commands.push(shown);
        }
    }

    fn compound(&mut self, compound: &CompoundCommand) {
        match compound {
            CompoundCommand::Arithmetic(a) => self.arithmetic(&a.expr.value),
            CompoundCommand::ArithmeticForClause(f) => {
                for expr in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&expr.value);
                }
                self.list(&f.body.list);
            }
            CompoundCommand::BraceGroup(b) => self.list(&b.list),
            CompoundCommand::Subshell(s) => self.list(&s.list),
            CompoundCommand::ForClause(f) => {
                for value in f.values.iter().flatten() {
                    self.word(&value.value);
                }
                self.list(&f.body.list);
            }
            CompoundCommand::CaseClause(c) => {
                self.word(&c.value.value);
                for case in &c.cases {
                    for pattern in &case.patterns {
                        self.word(&pattern.value);
                    }
                    if let Some(list) = &case.cmd {
                        self.list(list);
                    }
                }
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition);
                self.list(&i.then);
                for clause in i.elses.iter().flatten() {
                    if let Some(condition) = &clause.condition {
                        self.list(condition);
                    }
                    self.list(&clause.body);
                }
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&w.0);
                self.list(&w.1.list);
            }
            CompoundCommand::Coprocess(c) => {
                let mut commands = Vec::new();
                self.command(&c.body, false, &mut commands, &mut Vec::new());
                if !commands.is_empty() {
                    self.out.pipelines.push(Pipeline {
                        commands,
                        joined: None,
                    });
                }
            }
        }
    }

    /// The substitutions of a `[[ … ]]` test's words.
    fn test(&mut self, expr: &ExtendedTestExpr) {
        match expr {
            ExtendedTestExpr::And(a, b) | ExtendedTestExpr::Or(a, b) => {
                self.test(a);
                self.test(b);
            }
            ExtendedTestExpr::Not(e) | ExtendedTestExpr::Parenthesized(e) => self.test(e),
            ExtendedTestExpr::UnaryTest(_, w) => {
                self.word(&w.value);
            }
            ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.word(&a.value);
                self.word(&b.value);
            }
        }
    }

    /// The items of a simple command, in the order written; assignments before the program
    /// leave only their substitutions.
    fn simple(&mut self, simple: &ast::SimpleCommand) -> Vec<Item> {
        let mut items = Vec::new();
        for item in simple.prefix.iter().flat_map(|p| &p.0) {
            match item {
                PrefixOrSuffix::AssignmentWord(_, w) => {
                    self.word(&w.value);
                }
                item => items.push(self.item(item)),
            }
        }
        if let Some(w) = &simple.word_or_name {
            items.push(Item::Word(self.word(&w.value)));
        }
        for item in simple.suffix.iter().flat_map(|s| &s.0) {
            items.push(self.item(item));
        }
        items
    }

    fn item(&mut self, item: &PrefixOrSuffix) -> Item {
        match item {
            PrefixOrSuffix::IoRedirect(r) => Item::Redirect(self.redirect(r)),
            PrefixOrSuffix::Word(w) | PrefixOrSuffix::AssignmentWord(_, w) => {
                Item::Word(self.word(&w.value))
            }
            PrefixOrSuffix::ProcessSubstitution(kind, subshell) => {
                let mut word = Word::default();
                word.push(&self.process_substitution(kind, subshell));
                Item::Word(word)
            }
        }
    }

    fn redirect(&mut self, redirect: &IoRedirect) -> Redirect {
        let fd = |fd: &Option<ast::IoFd>| fd.map(|n| format!("{n} ")).unwrap_or_default();
        let reads_stdin = |fd: &Option<ast::IoFd>| matches!(fd, None | Some(0));
        match redirect {
            IoRedirect::File(n, kind, target) => {
                let op = match kind {
                    IoFileRedirectKind::Read => "<",
                    IoFileRedirectKind::Write => ">",
                    IoFileRedirectKind::Append => ">>",
                    IoFileRedirectKind::ReadAndWrite => "<>",
                    IoFileRedirectKind::Clobber => ">|",
                    IoFileRedirectKind::DuplicateInput => "<&",
                    IoFileRedirectKind::DuplicateOutput => ">&",
                };
                let target = match target {
                    IoFileRedirectTarget::Filename(w) | IoFileRedirectTarget::Duplicate(w) => {
                        self.target(&w.value)
                    }
                    IoFileRedirectTarget::Fd(n) => n.to_string(),
                    IoFileRedirectTarget::ProcessSubstitution(kind, subshell) => {
                        self.process_substitution(kind, subshell)
                    }
                };
                Redirect {
                    shown: format!("{}{op} {target}", fd(n)),
                    stdin: None,
                }
            }
            IoRedirect::OutputAndError(w, append) => Redirect {
                shown: format!(
                    "&>{} {}",
                    if *append { ">" } else { "" },
                    self.target(&w.value)
                ),
                stdin: None,
            },
            IoRedirect::HereString(n, w) => {
                let word = self.word(&w.value);
                Redirect {
                    shown: format!("{}<<< {}", fd(n), word.shown()),
                    stdin: reads_stdin(n).then_some(word.unexpanded),
                }
            }
            IoRedirect::HereDocument(n, doc) => {
                // A body whose delimiter is not quoted is expanded: its substitutions run.
                if doc.requires_expansion {
                    match word::parse_heredoc(&doc.doc.value, &self.options) {
                        Ok(pieces) => {
                            self.pieces(&doc.doc.value, &pieces, false, &mut Word::default());
                        }
                        Err(e) => self.fail(e.to_string()),
                    }
                }
                let delimiter = self.word(&doc.here_end.value).text;
                let op = if doc.remove_tabs { "<<-" } else { "<<" };
                Redirect {
                    shown: format!("{}{op} {delimiter}", fd(n)),
                    stdin: reads_stdin(n).then(|| doc.doc.value.clone()),
                }
            }
        }
    }

    /// A redirection's target as shown: unquoted, its path normalized.
    fn target(&mut self, raw: &str) -> String {
        let word = self.word(raw);
        if word.quoted_special {
            word.shown()
        } else {
            super::normalize_path(&word.text)
        }
    }

    /// `<(…)` or `>(…)` as shown (its body's whitespace collapsed); the body is nested.
    fn process_substitution(
        &mut self,
        kind: &ProcessSubstitutionKind,
        subshell: &ast::SubshellCommand,
    ) -> String {
        // The source between the parentheses, by the subshell's location (in characters);
        // the body as brush-parser prints it if that does not hold.
        let (start, end) = (subshell.loc.start.index, subshell.loc.end.index);
        let body = self
            .source
            .chars()
            .skip(start)
            .take(end.saturating_sub(start))
            .collect::<String>();
        let body = match body.strip_prefix('(').and_then(|b| b.strip_suffix(')')) {
            Some(body) => body.to_string(),
            None => subshell.list.to_string(),
        };
        let op = match kind {
            ProcessSubstitutionKind::Read => '<',
            ProcessSubstitutionKind::Write => '>',
        };
        let shown = format!("{op}({})", collapse_whitespace(&body));
        self.out.nested.push(body);
        shown
    }

    /// A word without its quotes; the bodies of its substitutions are nested.
    fn word(&mut self, raw: &str) -> Word {
        let mut word = Word::default();
        match word::parse(raw, &self.options) {
            Ok(pieces) => self.pieces(raw, &pieces, false, &mut word),
            Err(e) => self.fail(e.to_string()),
        }
        word
    }

    /// Only the substitutions of `text` (the inside of `${…}`).
    fn substitutions(&mut self, text: &str) {
        if text.contains(['$', '`']) {
            self.word(text);
        }
    }

    /// An arithmetic expression with a substitution is also a command of its own (`(( $(curl
    /// …) ))` gives `$(curl …)`): bash evaluates the substitution's output as arithmetic, and
    /// an array subscript there (`a[$(…)]`) runs commands.
    fn arithmetic(&mut self, expr: &str) {
        if expr.contains(['$', '`']) {
            let text = collapse_whitespace(&self.word(expr).text);
            self.out.pipelines.push(Pipeline {
                commands: vec![text],
                joined: None,
            });
        }
    }

    fn pieces(&mut self, raw: &str, pieces: &[WordPieceWithSource], quoted: bool, out: &mut Word) {
        for p in pieces {
            let source = raw.get(p.start_index..p.end_index).unwrap_or_default();
            match &p.piece {
                WordPiece::Text(text) if quoted => out.push_quoted(text),
                WordPiece::Text(text) => out.push(text),
                WordPiece::SingleQuotedText(text) | WordPiece::AnsiCQuotedText(text) => {
                    out.push_quoted(text);
                }
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(raw, inner, true, out);
                }
                WordPiece::EscapeSequence(escape) => {
                    // `\x` is `x`; an escaped newline joins lines.
                    let escaped = escape.strip_prefix('\\').unwrap_or(escape);
                    if escaped != "\n" {
                        out.push_quoted(escaped);
                    }
                }
                WordPiece::CommandSubstitution(body)
                | WordPiece::BackquotedCommandSubstitution(body) => {
                    self.misread(body);
                    out.push_substitution(body);
                    self.out.nested.push(body.clone());
                }
                WordPiece::ParameterExpansion(_) => {
                    if let Some(inner) = source.strip_prefix("${").and_then(|s| s.strip_suffix('}'))
                    {
                        self.substitutions(inner);
                    }
                    push(out, source, quoted);
                }
                WordPiece::ArithmeticExpression(expr) => {
                    self.misread(&expr.value);
                    self.arithmetic(&expr.value);
                    push(out, source, quoted);
                }
                WordPiece::TildeExpansion(_) => push(out, source, quoted),
            }
        }
    }

    /// brush-parser 0.4 empties a `$(…)` or `$((…))` written after a here-document operator
    /// on its line (`cat <<EOF; echo $(reboot)`: the body's tokens become words of the
    /// command); an empty body where the line has `<<` is taken for that and refused.
    fn misread(&mut self, body: &str) {
        if body.trim().is_empty() && self.source.replace("<<<", "").contains("<<") {
            self.fail(
                "a `$(…)` after a here-document operator on its line, which the parser misreads \
                 (put the substitution on a line of its own or before the `<<`)"
                    .into(),
            );
        }
    }

    fn fail(&mut self, reason: String) {
        self.error.get_or_insert(reason);
    }
}

fn push(out: &mut Word, text: &str, quoted: bool) {
    if quoted {
        out.push_quoted(text);
    } else {
        out.push(text);
    }
}
