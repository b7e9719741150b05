//! Text helpers that keep tool results bounded: cutting long lines, collecting lines up to
//! a byte limit, and keeping the head and tail of a command's output stream.

use std::collections::VecDeque;

use crate::sandbox::MAX_LINE_BYTES;

/// The marker put after a line cut at [`MAX_LINE_BYTES`].
pub(crate) const LINE_CUT_MARKER: &str = " [line truncated]";

/// `line` cut to at most [`MAX_LINE_BYTES`] bytes on a character boundary, with
/// [`LINE_CUT_MARKER`] when something was cut.
pub(crate) fn cut_line(line: &str) -> String {
    if line.len() <= MAX_LINE_BYTES {
        return line.to_string();
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{LINE_CUT_MARKER}", &line[..end])
}

/// `bytes` without one trailing `\n` or `\r\n`.
pub(crate) fn strip_eol(bytes: &[u8]) -> &[u8] {
    let b = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    b.strip_suffix(b"\r").unwrap_or(b)
}

/// Lines joined with `\n`, refusing the line that would take the text over a byte limit.
#[derive(Debug)]
pub(crate) struct Lines {
    text: String,
    limit: usize,
    count: usize,
}

impl Lines {
    pub(crate) fn new(limit: usize) -> Self {
        Lines {
            text: String::new(),
            limit,
            count: 0,
        }
    }

    /// Appends `line`; returns `false`, appending nothing, when it would not fit.
    pub(crate) fn push(&mut self, line: &str) -> bool {
        let extra = line.len() + usize::from(self.count > 0);
        if self.text.len() + extra > self.limit {
            return false;
        }
        if self.count > 0 {
            self.text.push('\n');
        }
        self.text.push_str(line);
        self.count += 1;
        true
    }

    /// The number of lines appended.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The text, with `note` on a line of its own after a blank line when given.
    pub(crate) fn finish(self, note: Option<String>) -> String {
        match note {
            Some(note) if self.text.is_empty() => note,
            Some(note) => format!("{}\n\n{note}", self.text),
            None => self.text,
        }
    }
}

/// The first and last bytes of a stream, at most `limit` bytes in all.
#[derive(Debug)]
pub(crate) struct HeadTail {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl HeadTail {
    pub(crate) fn new(limit: usize) -> Self {
        let head_cap = limit / 2;
        HeadTail {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: limit - head_cap,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let n = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend(bytes[bytes.len() - self.tail_cap..].iter().copied());
        } else {
            self.tail.extend(bytes.iter().copied());
            let over = self.tail.len().saturating_sub(self.tail_cap);
            self.tail.drain(..over);
        }
    }

    /// Every byte pushed, kept or not.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The kept bytes as text (invalid UTF-8 replaced), with a marker where bytes were
    /// dropped.
    pub(crate) fn render(&self) -> String {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let omitted = self.total - kept;
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if omitted == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        format!(
            "{}\n[... {omitted} bytes omitted ...]\n{}",
            String::from_utf8_lossy(&self.head),
            String::from_utf8_lossy(&tail)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_on_char_boundaries() {
        let line = "é".repeat(MAX_LINE_BYTES); // 2 bytes each
        let cut = cut_line(&line);
        assert_eq!(cut.len(), MAX_LINE_BYTES + LINE_CUT_MARKER.len());
        assert!(cut.ends_with(LINE_CUT_MARKER));
        let odd = format!("a{}", "é".repeat(MAX_LINE_BYTES));
        assert_eq!(
            cut_line(&odd).len(),
            MAX_LINE_BYTES - 1 + LINE_CUT_MARKER.len()
        );
        assert_eq!(cut_line("short"), "short");
    }

    #[test]
    fn lines_stop_at_the_limit() {
        let mut l = Lines::new(7);
        assert!(l.push("abc"));
        assert!(l.push("def"));
        assert!(!l.push("g"));
        assert_eq!(l.count(), 2);
        assert_eq!(l.finish(Some("note".into())), "abc\ndef\n\nnote");
    }

    #[test]
    fn head_tail_keeps_both_ends() {
        let mut h = HeadTail::new(8);
        h.push(b"0123");
        h.push(b"456789");
        h.push(b"ab");
        assert_eq!(h.render(), "0123\n[... 4 bytes omitted ...]\n89ab");
        let mut small = HeadTail::new(8);
        small.push(b"01234567");
        assert_eq!(small.render(), "01234567");
        let mut big = HeadTail::new(4);
        big.push(b"abcdefghij");
        assert_eq!(big.render(), "ab\n[... 6 bytes omitted ...]\nij");
    }
}
