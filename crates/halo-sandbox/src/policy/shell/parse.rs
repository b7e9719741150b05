//! Running brush-parser on a line without letting the line take the process down: a stack
//! sized for the line's nesting, a caught panic, a final newline, and bash's reading of a
//! here-document left without its delimiter.

use std::io::BufReader;
use std::panic::{AssertUnwindSafe, catch_unwind};

use brush_parser::{ParseError, Parser, ParserOptions, TokenizerError, ast, unquote_str};

use super::Unparsed;

/// Stack per nesting opener (see [`openers`]). brush-parser is a recursive-descent parser:
/// measured in a debug build, one level of `$(`, `{ … }`, `if … fi` or a function
/// definition takes 12 to 18 KiB, so this is about twice the worst, for the walk over the
/// tree and its drop as well.
const STACK_PER_OPENER: usize = 32 * 1024;

/// Stack for the rest of the parse and the walk.
const BASE_STACK: usize = 1024 * 1024;

/// Lines with at most this many openers are parsed on the caller's thread: a few hundred
/// KiB at worst, which any thread that runs an agent has to spare.
const INLINE_OPENERS: usize = 8;

/// Lines with more openers are refused unparsed; their stack would pass 256 MiB.
pub(super) const MAX_OPENERS: usize = 8192;

/// Runs `f` (the parse and walk of `line`) where it cannot overflow the stack: inline for a
/// flat line, on a thread of its own with a stack sized by [`openers`] otherwise. A panic in
/// `f` (brush-parser 0.4 unwraps a few number parses) is an [`Unparsed`] error.
pub(super) fn guarded<T: Send>(
    line: &str,
    f: impl FnOnce(&str) -> Result<T, Unparsed> + Send,
) -> Result<T, Unparsed> {
    if has_overlong_number(line) {
        return Err(Unparsed {
            reason: "a file descriptor or directory-stack number too long to read".into(),
        });
    }
    let openers = openers(line);
    if openers > MAX_OPENERS {
        return Err(Unparsed {
            reason: format!(
                "nested too deeply to check: more than {MAX_OPENERS} brackets, backticks and compound-command keywords"
            ),
        });
    }
    let panicked = || Unparsed {
        reason: "the shell parser failed on it".into(),
    };
    if openers <= INLINE_OPENERS {
        return catch_unwind(AssertUnwindSafe(|| f(line))).unwrap_or_else(|_| Err(panicked()));
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("denylist-parse".into())
            .stack_size(BASE_STACK + openers * STACK_PER_OPENER)
            .spawn_scoped(scope, || f(line))
            .map_err(|e| Unparsed {
                reason: format!("no thread to parse it on: {e}"),
            })?
            .join()
            .unwrap_or_else(|_| Err(panicked()))
    })
}

/// Whether `line` has a number of ten digits or more right before `<` or `>` (a file
/// descriptor, `99999999999>x`) or after `~`, `~+` or `~-` (a directory-stack entry).
/// brush-parser 0.4 unwraps their parse; such a line is refused before it is parsed, so
/// that no panic message reaches standard error (the catch in [`guarded`] stays, for panics
/// not known).
fn has_overlong_number(line: &str) -> bool {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let before = bytes[..start]
            .strip_suffix(b"+")
            .or(bytes[..start].strip_suffix(b"-"));
        let after_tilde =
            bytes[..start].ends_with(b"~") || before.is_some_and(|b| b.ends_with(b"~"));
        if i - start >= 10 && (matches!(bytes.get(i), Some(b'<' | b'>')) || after_tilde) {
            return true;
        }
    }
    false
}

/// An upper bound on how deeply `line` nests: its `(`, `{`, `[`, backticks, `!`, `&&` and
/// `||` (a `[[ … ]]` test nests by them), and the keywords that open a compound command,
/// wherever they are (in quotes and here-documents too). Each level of brush-parser's
/// recursion, and of the tree it returns, needs one of them.
fn openers(line: &str) -> usize {
    let brackets = line
        .chars()
        .filter(|c| matches!(c, '(' | '{' | '[' | '`' | '!'))
        .count()
        + line.matches("&&").count()
        + line.matches("||").count();
    let keywords = line
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| {
            matches!(
                *w,
                "if" | "while" | "until" | "for" | "case" | "select" | "coproc" | "function"
            )
        })
        .count();
    brackets + keywords
}

/// Parses `line` into a program, with the source its locations refer to: `line` ended by a
/// newline, and by the missing delimiter lines of its here-documents (bash reads such a body
/// up to the end, with a warning).
///
/// brush-parser 0.4 can loop without end, allocating as it goes, on a line that ends inside
/// a here-document's tag (`cat <<"" `, `$(x <<-  `); ended by a newline (two after a
/// trailing backslash, which joins the next line) it stops. The newline changes nothing
/// bash would run.
pub(super) fn program(line: &str) -> Result<(ast::Program, String), Unparsed> {
    let mut source = format!("{line}\n");
    if line.ends_with('\\') {
        source.push('\n');
    }
    // Twice: `cat <<EOF` names its delimiter only once the line has ended.
    for _ in 0..2 {
        match parse(&source) {
            Err(ParseError::Tokenizing {
                inner: TokenizerError::UnterminatedHereDocuments(tags, _),
                ..
            }) => {
                for tag in tags.split(", ").filter(|t| !t.is_empty()) {
                    if !source.ends_with('\n') {
                        source.push('\n');
                    }
                    source.push_str(&unquote_str(tag));
                }
                source.push('\n');
            }
            result => return Ok((result.map_err(unparsed)?, source)),
        }
    }
    Ok((parse(&source).map_err(unparsed)?, source))
}

fn parse(line: &str) -> Result<ast::Program, ParseError> {
    Parser::new(BufReader::new(line.as_bytes()), &ParserOptions::default()).parse_program()
}

fn unparsed(e: ParseError) -> Unparsed {
    Unparsed {
        reason: e.to_string(),
    }
}
