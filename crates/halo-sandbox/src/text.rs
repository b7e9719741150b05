//! Text helpers that keep tool results bounded: cutting long lines, collecting lines up to
//! a byte limit, and keeping the head and tail of a command's output stream in bounded
//! memory, cut on UTF-8 character boundaries.

use std::collections::VecDeque;

use crate::tools::MAX_LINE_BYTES;

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

/// A line of bytes as text for the model: at most a few bytes over [`MAX_LINE_BYTES`] are
/// decoded (invalid UTF-8 replaced), then the line is cut with [`cut_line`].
pub(crate) fn show_line(bytes: &[u8]) -> String {
    // Enough over the cut that `cut_line` sees the line is long and marks the cut.
    const KEEP: usize = MAX_LINE_BYTES + 4;
    let bytes = strip_eol(bytes);
    cut_line(&String::from_utf8_lossy(&bytes[..bytes.len().min(KEEP)]))
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

/// The first and last bytes of a stream, at most `limit` bytes in all, in memory that does
/// not grow with the stream: the head is a buffer filled once, the tail a ring buffer.
#[derive(Debug)]
pub(crate) struct HeadTail {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

/// What [`HeadTail::finish`] gives.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Kept {
    /// The head and the tail, joined by a marker line when bytes were dropped.
    pub(crate) text: String,
    /// The bytes dropped from the middle (with the bytes of characters cut in two).
    pub(crate) dropped: u64,
}

impl HeadTail {
    /// Keeps `limit / 2` bytes of head and the rest as tail.
    pub(crate) fn new(limit: usize) -> Self {
        let head_cap = limit / 2;
        HeadTail {
            head: Vec::with_capacity(head_cap.min(64 * 1024)),
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
            self.tail.extend(&bytes[bytes.len() - self.tail_cap..]);
        } else {
            let over = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..over);
            self.tail.extend(bytes);
        }
    }

    /// Every byte pushed, kept or not.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The kept bytes as text, at most `limit` bytes plus the marker line. When bytes were
    /// dropped, a character cut in two at the end of the head or the start of the tail is
    /// dropped too, and the two parts are joined by a line `[... N bytes omitted ...]`.
    /// Other invalid UTF-8 is shown as U+FFFD (3 bytes for as few as 1): when that makes
    /// the text longer than `limit`, more is dropped from the middle, so the head stays
    /// within `limit / 2` bytes of text and the tail within the rest.
    pub(crate) fn finish(self) -> Kept {
        let (head, tail) = (self.head, Vec::from(self.tail));
        if (head.len() + tail.len()) as u64 == self.total {
            let mut all = head.clone();
            all.extend_from_slice(&tail);
            let text = String::from_utf8_lossy(&all);
            if text.len() <= self.head_cap + self.tail_cap {
                return Kept {
                    text: text.into_owned(),
                    dropped: 0,
                };
            }
        }
        let head = &head[..complete_prefix_len(&head)];
        let tail = &tail[partial_suffix_start(&tail)..];
        let (head_text, head_used) = decode_head(head, self.head_cap);
        let (tail_text, tail_used) = decode_tail(tail, self.tail_cap);
        let dropped = self.total - (head_used + tail_used) as u64;
        Kept {
            text: format!("{head_text}\n[... {dropped} bytes omitted ...]\n{tail_text}"),
            dropped,
        }
    }
}

/// What invalid UTF-8 is shown as, as `String::from_utf8_lossy` does: U+FFFD, 3 bytes.
const REPLACEMENT: &str = "\u{FFFD}";

/// The text of the longest start of `bytes` whose text (invalid UTF-8 shown as U+FFFD)
/// fits in `budget` bytes, and how many bytes of `bytes` it shows.
fn decode_head(bytes: &[u8], budget: usize) -> (String, usize) {
    let mut text = String::new();
    let mut used = 0;
    for chunk in bytes.utf8_chunks() {
        let valid = chunk.valid();
        let room = budget - text.len();
        if valid.len() > room {
            let mut end = room;
            while !valid.is_char_boundary(end) {
                end -= 1;
            }
            text.push_str(&valid[..end]);
            return (text, used + end);
        }
        text.push_str(valid);
        used += valid.len();
        let invalid = chunk.invalid();
        if !invalid.is_empty() {
            if budget - text.len() < REPLACEMENT.len() {
                return (text, used);
            }
            text.push_str(REPLACEMENT);
            used += invalid.len();
        }
    }
    (text, used)
}

/// The text of the longest end of `bytes` whose text (invalid UTF-8 shown as U+FFFD) fits
/// in `budget` bytes, and how many bytes of `bytes` it shows.
fn decode_tail(bytes: &[u8], budget: usize) -> (String, usize) {
    // Pieces of text from the end backwards.
    let mut pieces: Vec<&str> = Vec::new();
    let mut len = 0;
    let mut used = 0;
    for chunk in bytes.utf8_chunks().collect::<Vec<_>>().into_iter().rev() {
        let invalid = chunk.invalid();
        if !invalid.is_empty() {
            if budget - len < REPLACEMENT.len() {
                break;
            }
            pieces.push(REPLACEMENT);
            len += REPLACEMENT.len();
            used += invalid.len();
        }
        let valid = chunk.valid();
        let room = budget - len;
        if valid.len() > room {
            let mut start = valid.len() - room;
            while !valid.is_char_boundary(start) {
                start += 1;
            }
            pieces.push(&valid[start..]);
            used += valid.len() - start;
            break;
        }
        pieces.push(valid);
        len += valid.len();
        used += valid.len();
    }
    (pieces.into_iter().rev().collect(), used)
}

/// The length of `b` without a UTF-8 character cut short at its end.
fn complete_prefix_len(b: &[u8]) -> usize {
    let n = b.len();
    for back in 1..=n.min(4) {
        let i = n - back;
        if !is_continuation(b[i]) {
            let needed = match b[i] {
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF7 => 4,
                _ => 1,
            };
            return if back < needed { i } else { n };
        }
    }
    n
}

/// Where `b` starts once the continuation bytes of a character cut at its start (at most 3)
/// are skipped.
fn partial_suffix_start(b: &[u8]) -> usize {
    b.iter()
        .take(3)
        .take_while(|&&byte| is_continuation(byte))
        .count()
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
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
        assert_eq!(show_line(b"crlf\r\n"), "crlf");
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

    fn kept(limit: usize, chunks: &[&[u8]]) -> (String, u64) {
        let mut h = HeadTail::new(limit);
        for c in chunks {
            h.push(c);
        }
        let k = h.finish();
        (k.text, k.dropped)
    }

    #[test]
    fn head_tail_keeps_both_ends() {
        assert_eq!(
            kept(8, &[b"0123", b"456789", b"ab"]),
            ("0123\n[... 4 bytes omitted ...]\n89ab".into(), 4)
        );
        assert_eq!(kept(8, &[b"01234567"]), ("01234567".into(), 0));
        assert_eq!(
            kept(4, &[b"abcdefghij"]),
            ("ab\n[... 6 bytes omitted ...]\nij".into(), 6)
        );
        // Many small pushes go through the ring buffer.
        let many: Vec<&[u8]> = std::iter::repeat_n(&b"xy"[..], 50).collect();
        // 100 bytes `xyxy...xy`: the head `xyx`, the tail the last 3 bytes.
        assert_eq!(
            kept(6, &many),
            ("xyx\n[... 94 bytes omitted ...]\nyxy".into(), 94)
        );
    }

    #[test]
    fn a_character_cut_in_two_is_dropped_whole() {
        // "€" is 3 bytes (E2 82 AC). Head of 4 bytes: "aa" + 2 bytes of "€".
        let text = format!("aa€{}€bb", "z".repeat(20));
        let (out, dropped) = kept(8, &[text.as_bytes()]);
        assert_eq!(out, format!("aa\n[... {dropped} bytes omitted ...]\nbb"));
        assert_eq!(dropped, text.len() as u64 - 4);
        // A 4-byte character across the tail cut: the tail starts inside "😀".
        let text = format!("{}😀b", "z".repeat(20));
        let (out, dropped) = kept(8, &[text.as_bytes()]);
        assert_eq!(out, format!("zzzz\n[... {dropped} bytes omitted ...]\nb"));
        assert_eq!(dropped, text.len() as u64 - 5);
        assert_eq!(complete_prefix_len("a😀".as_bytes()), 5);
        assert_eq!(complete_prefix_len(&"a😀".as_bytes()[..4]), 1);
        assert_eq!(partial_suffix_start(&"😀a".as_bytes()[1..]), 3);
    }

    #[test]
    fn invalid_utf8_shown_as_u_fffd_stays_within_the_limit() {
        // Trigger: each invalid byte became a 3-byte U+FFFD after the byte cut, so 16 KiB
        // of binary output grew to 48 KiB of text.
        let (out, dropped) = kept(8, &[&[0xFF; 8]]);
        assert_eq!(out, "\u{FFFD}\n[... 6 bytes omitted ...]\n\u{FFFD}");
        assert_eq!(dropped, 6);
        let (out, dropped) = kept(8, &[b"ab\xFFcd\xFFef"]);
        assert_eq!(out, "ab\n[... 4 bytes omitted ...]\nef");
        assert_eq!(dropped, 4);
        // Dropped anyway: the head and the tail each keep their share of text.
        let mut noisy = b"a\xFF".repeat(100);
        noisy.extend_from_slice(b"end");
        let (out, dropped) = kept(12, &[&noisy]);
        assert_eq!(out, "a\u{FFFD}a\n[... 196 bytes omitted ...]\n\u{FFFD}end");
        assert_eq!(dropped, 196);
        // Text that fits after replacement is kept whole.
        assert_eq!(kept(8, &[b"ab\xFFcd"]), ("ab\u{FFFD}cd".into(), 0));
    }
}
