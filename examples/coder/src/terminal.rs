//! What the coder prints on a terminal, made unable to drive it: [`escape`] shows every
//! control character but newline and tab as text, so that no model text, command, command
//! output, server name or error can move the cursor, erase a line, redraw the approval
//! question, set the window title or write the clipboard (OSC 52).
//!
//! Every line the coder prints for people goes through this module ([`line()`], [`eline`],
//! [`text`]); a test keeps `println!` and friends out of the other source files.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write as _;

/// Whether `c` is shown escaped: the C0 controls but `\n` and `\t` (ESC, CR, BEL, BS, ...),
/// DEL, the C1 controls U+0080–U+009F (U+009B is a one-character CSI for terminals that
/// read C1), and the bidirectional formatting characters (U+200E, U+200F, U+202A–U+202E,
/// U+2066–U+2069), which reorder what is shown without changing what runs.
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every [`is_unsafe`] character written visibly: `\r`, `\x1b`, `\x07`, ...
/// for C0 and DEL, `\u{9b}` for C1 and the bidirectional characters. Borrowed when nothing
/// needs escaping.
///
/// ```
/// use coder::terminal::escape;
///
/// assert_eq!(escape("ls -la\n"), "ls -la\n");
/// assert_eq!(
///     escape("rm -rf x\r\x1b[1A\x1b[2Kls -la\u{9b}2J"),
///     "rm -rf x\\r\\x1b[1A\\x1b[2Kls -la\\u{9b}2J"
/// );
/// ```
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            c if !is_unsafe(c) => out.push(c),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// Prints `text`, escaped, and a newline on stdout.
pub fn line(text: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", escape(&text.to_string()));
}

/// Prints `text`, escaped, and a newline on stderr.
pub fn eline(text: impl std::fmt::Display) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{}", escape(&text.to_string()));
}

/// Prints `text`, escaped, on stdout without a newline, and flushes (streamed model text).
pub fn text(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "{}", escape(text));
    let _ = out.flush();
}

/// A JSON line made safe for a terminal while staying the same JSON: serde escapes the C0
/// controls inside strings, and the others [`is_unsafe`] names (DEL, C1, bidirectional
/// characters, which can only stand inside strings) become `\u` escapes here.
///
/// ```
/// use coder::terminal::json;
///
/// let line = serde_json::to_string(&serde_json::json!({"delta": "a\u{9b}b\r"})).unwrap();
/// assert_eq!(json(&line), r#"{"delta":"a\u009bb\r"}"#);
/// ```
pub fn json(line: &str) -> Cow<'_, str> {
    if !line.chars().any(is_unsafe) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 16);
    for c in line.chars() {
        if is_unsafe(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// stderr, each write escaped: the log lines' writer (a log may quote a server's or a
/// model's words). A write is taken whole as text (the log formatter writes one event per
/// call).
#[derive(Debug, Clone, Copy)]
pub struct EscapedStderr;

impl std::io::Write for EscapedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr()
            .lock()
            .write_all(escape(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Writes `text`, escaped, to `out` (the approval question's stream).
pub fn write_to(out: &mut dyn std::io::Write, text: &str) {
    let _ = write!(out, "{}", escape(text));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_but_newline_and_tab_is_shown_visibly() {
        assert!(matches!(
            escape("plain text, tabs\tand\nnewlines"),
            Cow::Borrowed(_)
        ));
        assert_eq!(escape("a\rb"), "a\\rb");
        assert_eq!(escape("\x1b]52;c;cHduZWQ=\x07"), "\\x1b]52;c;cHduZWQ=\\x07");
        assert_eq!(escape("\0\x08\x7f"), "\\x00\\x08\\x7f");
        assert_eq!(escape("\u{9b}31m\u{85}"), "\\u{9b}31m\\u{85}");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape("é ü ✓ 日本"), "é ü ✓ 日本");
        for c in (0u32..0x110000).filter_map(char::from_u32) {
            let shown = escape(c.encode_utf8(&mut [0; 4])).into_owned();
            assert!(!shown.chars().any(is_unsafe), "{c:?} -> {shown:?}");
            assert_eq!(shown.len() == c.len_utf8(), !is_unsafe(c), "{c:?}");
        }
    }

    // One owner: nothing else in the coder's sources prints to the terminal directly.
    #[test]
    fn only_this_module_prints() {
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut offenders = Vec::new();
        for entry in std::fs::read_dir(src).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == "terminal.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, l) in text.lines().enumerate() {
                let code = l.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                for raw in [
                    "println!",
                    "print!",
                    "eprintln!",
                    "eprint!",
                    "write!(out",
                    "writeln!(out",
                ] {
                    if code.contains(raw) {
                        offenders.push(format!("{}:{}: {code}", path.display(), i + 1));
                    }
                }
            }
        }
        assert_eq!(offenders, Vec::<String>::new());
    }
}
