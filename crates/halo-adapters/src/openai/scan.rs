//! A direct reader of a `chat.completion` body into [`ChatCompletion`], for the shapes
//! servers send, with no generic deserializer between the bytes and the struct.
//!
//! It accepts a subset of what `serde_json` accepts and reads it to the same value. Anything
//! it is not sure of — a known field of another type, `content` as an array of parts, an
//! `error` object, a duplicate field, an escaped key, a token count that is not a plain
//! non-negative integer, a struct written as an array, nesting deeper than [`MAX_DEPTH`] —
//! makes [`read`] answer `None`, and the caller reads the body with `serde_json`, which also
//! words the error of a malformed body. Two proptests check both halves:
//! `tests::read_is_serde_json` (a body in these shapes, however spaced and escaped, is read
//! to `serde_json`'s value) and `tests::a_read_body_is_serde_json_s_value` (an edited body
//! that is read at all is read to `serde_json`'s value).
//!
//! Why a reader of its own rather than `serde_json` alone, measured: reading the 385-byte
//! completion of a tool call into these types took `serde_json` 1.0.154 12,760 instructions,
//! simd-json 0.19 14,124, sonic-rs 0.5 14,919 and a reader on jiter 0.19's iterator 17,800
//! (callgrind, per parse): a third of an agent step of `cargo xtask bench loop`. This reader
//! takes about 6,900 for the same body, with the same allocations (`docs/performance.md`);
//! since the call's strings became `SmolStr`, it builds short ones inline, with none.

use serde_json::Value;
use smol_str::{SmolStr, SmolStrBuilder};

use super::response::{
    ChatCompletion, Choice, CompletionTokensDetails, PromptTokensDetails, ResponseFunction,
    ResponseMessage, ResponseToolCall, Timings, WireArguments, WireContent, WireUsage,
};

/// The longest text a [`SmolStr`] holds inline, in bytes: an unescaped string this long is
/// built without an allocation.
const INLINE: usize = 23;

/// Objects and arrays nested deeper than this are left to `serde_json` (whose limit is 128).
const MAX_DEPTH: u32 = 64;

/// The completion in `text`, or `None` when `serde_json` must decide (see the module docs).
pub(super) fn read(text: &str) -> Option<ChatCompletion> {
    let mut scan = Scan {
        text,
        b: text.as_bytes(),
        i: 0,
        depth: 0,
    };
    let completion = scan.completion()?;
    scan.ws();
    (scan.i == scan.b.len()).then_some(completion)
}

/// The bytes that end a string's plain run (what [`plain_run`] looks for): a quote, a
/// backslash, a control character.
static STOPS: [bool; 256] = {
    let mut stops = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        stops[c] = true;
        c += 1;
    }
    stops[b'"' as usize] = true;
    stops[b'\\' as usize] = true;
    stops
};

/// The index of the first quote, backslash or control character at or after `from`: eight
/// bytes at a time while eight remain (a word's bytes that are zero after an XOR, or below
/// 0x20, flag their high bit; the lowest flag is exact), then byte by byte.
#[inline(always)]
fn plain_run(b: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let below = |w: u64, n: u8| w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH;
    let mut j = from;
    while let Some(word) = b.get(j..j + 8) {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(word);
        let w = u64::from_le_bytes(bytes);
        let stops = below(w ^ (ONES * u64::from(b'"')), 1)
            | below(w ^ (ONES * u64::from(b'\\')), 1)
            | below(w, 0x20);
        if stops != 0 {
            return Some(j + (stops.trailing_zeros() / 8) as usize);
        }
        j += 8;
    }
    Some(j + b.get(j..)?.iter().position(|&c| STOPS[usize::from(c)])?)
}

/// What [`Scan::key`] found.
#[derive(Debug, PartialEq, Eq)]
enum Key {
    /// The object ended.
    End,
    /// The field of this index in the list asked for.
    Field(usize),
    /// A key not in the list.
    Other,
}

/// A cursor over the body. Every method returns `None` for what it does not accept, having
/// consumed an unspecified amount: the whole read is then abandoned.
struct Scan<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
    depth: u32,
}

impl<'a> Scan<'a> {
    /// Skips JSON whitespace (RFC 8259 §2: space, tab, line feed, carriage return).
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// The next byte that is not whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    /// Consumes `word` (`true`, `false`, `null`) at the cursor.
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b
            .get(self.i..)?
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// Consumes a `null` if one is next: whether it was.
    fn null(&mut self) -> Option<bool> {
        if self.peek()? != b'n' {
            return Some(false);
        }
        self.literal(b"null")?;
        Some(true)
    }

    /// Enters the object or array opened by `open`.
    fn open(&mut self, open: u8) -> Option<()> {
        if self.peek()? != open {
            return None;
        }
        self.i += 1;
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// The next key of the object being read, its colon consumed: which of `fields` it is,
    /// another key, or the object's end. `first` is true until the first key has been read.
    #[inline(always)]
    fn key(&mut self, first: &mut bool, fields: &[&str]) -> Option<Key> {
        let mut next = self.peek()?;
        if next == b'}' {
            self.i += 1;
            self.depth -= 1;
            return Some(Key::End);
        }
        if !*first {
            if next != b',' {
                return None;
            }
            self.i += 1;
            next = self.peek()?;
        }
        *first = false;
        if next != b'"' {
            return None;
        }
        // A field's name followed by its closing quote is that field, without a scan for
        // the quote (an escaped key never matches: its backslash is not the quote).
        let rest = self.b.get(self.i + 1..)?;
        let key = match fields.iter().position(|field| {
            rest.get(field.len()) == Some(&b'"') && rest.starts_with(field.as_bytes())
        }) {
            Some(i) => {
                self.i += fields[i].len() + 2;
                Key::Field(i)
            }
            None => match self.raw_str()? {
                (_, false) => Key::Other,
                (_, true) => return None,
            },
        };
        if self.peek()? != b':' {
            return None;
        }
        self.i += 1;
        Some(key)
    }

    /// Whether another item of the array being read follows (its comma consumed).
    fn item(&mut self, first: &mut bool) -> Option<bool> {
        let next = self.peek()?;
        if next == b']' {
            self.i += 1;
            self.depth -= 1;
            return Some(false);
        }
        if !*first {
            if next != b',' {
                return None;
            }
            self.i += 1;
        }
        *first = false;
        Some(true)
    }

    /// The text between the quotes of the string at the cursor, escapes not decoded, and
    /// whether it has any. Escapes are checked as `serde_json` checks them; a control
    /// character is refused, as JSON refuses it.
    fn raw_str(&mut self) -> Option<(&'a str, bool)> {
        let start = self.i + 1;
        // Nearly every string ends without an escape: find its end eight bytes at a time.
        let j = plain_run(self.b, start)?;
        if self.b[j] == b'"' {
            self.i = j + 1;
            return Some((self.text.get(start..j)?, false));
        }
        self.escaped_str(start, j)
    }

    /// The rest of [`raw_str`](Self::raw_str) for a string whose plain run ended at `j`
    /// short of its closing quote: each escape checked, the runs between them skipped eight
    /// bytes at a time.
    #[inline(never)]
    fn escaped_str(&mut self, start: usize, mut j: usize) -> Option<(&'a str, bool)> {
        loop {
            match *self.b.get(j)? {
                b'"' => break,
                b'\\' => {
                    match *self.b.get(j + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => j += 2,
                        b'u' => {
                            let hex = self.b.get(j + 2..j + 6)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            j += 6;
                        }
                        _ => return None,
                    }
                    j = plain_run(self.b, j)?;
                }
                // A control character.
                _ => return None,
            }
        }
        self.i = j + 1;
        // Both ends are ASCII quotes, so both are character boundaries of `text`.
        Some((self.text.get(start..j)?, true))
    }

    /// The string at the cursor, escapes decoded.
    fn string(&mut self) -> Option<String> {
        let (raw, escaped) = self.raw_str()?;
        if escaped {
            unescape(raw)
        } else {
            Some(raw.to_owned())
        }
    }

    /// `null` or a string.
    fn opt_str(&mut self) -> Option<Option<String>> {
        match self.peek()? {
            b'"' => self.string().map(Some),
            _ => self.null()?.then_some(None),
        }
    }

    /// `null` or a string, as a [`SmolStr`]: inline, with no allocation, when it is short.
    fn opt_smol(&mut self) -> Option<Option<SmolStr>> {
        if self.peek()? != b'"' {
            return self.null()?.then_some(None);
        }
        let (raw, escaped) = self.raw_str()?;
        Some(Some(if !escaped {
            SmolStr::new(raw)
        } else if raw.len() <= INLINE {
            // Decoding never lengthens the text.
            let mut out = SmolStrBuilder::default();
            unescape_into(raw, &mut out)?;
            out.finish()
        } else {
            unescape(raw)?.into()
        }))
    }

    /// `null` or a non-negative integer that fits a `u64`, written without fraction or
    /// exponent (`serde_json` refuses `1.0` for a `u64`).
    fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.null()? {
            return Some(None);
        }
        let b = self.b;
        let mut j = self.i;
        let mut n: u64 = 0;
        match *b.get(j)? {
            b'0' => j += 1,
            b'1'..=b'9' => {
                while let Some(&d @ b'0'..=b'9') = b.get(j) {
                    n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
                    j += 1;
                }
            }
            _ => return None,
        }
        if matches!(b.get(j), Some(b'.' | b'e' | b'E' | b'0'..=b'9')) {
            return None;
        }
        self.i = j;
        Some(Some(n))
    }

    /// `null`, or the object `read` reads.
    fn opt_object<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.null()? {
            return Some(None);
        }
        read(self).map(Some)
    }

    /// Passes over one value of any kind, checking it is JSON.
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.raw_str().map(drop),
            b'{' => {
                self.open(b'{')?;
                let mut first = true;
                while self.key(&mut first, &[])? != Key::End {
                    self.skip()?;
                }
                Some(())
            }
            b'[' => {
                self.open(b'[')?;
                let mut first = true;
                while self.item(&mut first)? {
                    self.skip()?;
                }
                Some(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.skip_number(),
            _ => None,
        }
    }

    /// Passes over a number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn skip_number(&mut self) -> Option<()> {
        let b = self.b;
        let mut j = self.i;
        let digits = |j: &mut usize| {
            let start = *j;
            while b.get(*j).is_some_and(u8::is_ascii_digit) {
                *j += 1;
            }
            *j > start
        };
        if b.get(j) == Some(&b'-') {
            j += 1;
        }
        match *b.get(j)? {
            b'0' => j += 1,
            b'1'..=b'9' => {
                digits(&mut j);
            }
            _ => return None,
        }
        if b.get(j) == Some(&b'.') {
            j += 1;
            if !digits(&mut j) {
                return None;
            }
        }
        if matches!(b.get(j), Some(b'e' | b'E')) {
            j += 1;
            if matches!(b.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if !digits(&mut j) {
                return None;
            }
        }
        if b.get(j).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        self.i = j;
        Some(())
    }

    /// Reads an object: the value of a key among `fields` by `read(self, its index)`, any
    /// other key's value skipped. A field given twice is `serde_json`'s "duplicate field".
    #[inline(always)]
    fn fields(
        &mut self,
        fields: &[&str],
        mut read: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        self.open(b'{')?;
        let (mut seen, mut first) = (0u32, true);
        loop {
            match self.key(&mut first, fields)? {
                Key::End => return Some(()),
                Key::Other => self.skip()?,
                Key::Field(i) => {
                    let bit = 1 << i;
                    if seen & bit != 0 {
                        return None;
                    }
                    seen |= bit;
                    read(self, i)?;
                }
            }
        }
    }

    fn completion(&mut self) -> Option<ChatCompletion> {
        let mut c = ChatCompletion::default();
        let fields = ["id", "model", "choices", "usage", "timings", "error"];
        self.fields(&fields, |s, field| {
            match field {
                0 => c.id = s.opt_str()?,
                1 => c.model = s.opt_str()?,
                2 => {
                    s.open(b'[')?;
                    // One choice, nearly always (`n` > 1 is rare).
                    let mut choices = Vec::with_capacity(1);
                    let mut first = true;
                    while s.item(&mut first)? {
                        choices.push(s.choice()?);
                    }
                    c.choices = choices;
                }
                3 => c.usage = s.opt_object(Self::usage)?,
                4 => c.timings = s.opt_object(Self::timings)?,
                // An error object is rare: serde_json reads it into a `Value`.
                _ => return s.null()?.then_some(()),
            }
            Some(())
        })?;
        Some(c)
    }

    fn choice(&mut self) -> Option<Choice> {
        let mut c = Choice::default();
        self.fields(&["message", "finish_reason"], |s, field| {
            match field {
                0 => c.message = s.opt_object(Self::message)?,
                _ => c.finish_reason = s.opt_smol()?,
            }
            Some(())
        })?;
        Some(c)
    }

    fn message(&mut self) -> Option<ResponseMessage> {
        let mut m = ResponseMessage::default();
        let fields = [
            "content",
            "reasoning_content",
            "reasoning",
            "tool_calls",
            "refusal",
        ];
        self.fields(&fields, |s, field| {
            match field {
                // Parts (an array) are rare: serde_json reads them.
                0 => m.content = s.opt_str()?.map(WireContent::Text),
                1 => m.reasoning_content = s.opt_str()?,
                2 => m.reasoning = s.opt_str()?.map(Value::String),
                3 => {
                    m.tool_calls = s.opt_object(|s| {
                        s.open(b'[')?;
                        let mut calls = Vec::with_capacity(1);
                        let mut first = true;
                        while s.item(&mut first)? {
                            calls.push(s.tool_call()?);
                        }
                        Some(calls)
                    })?;
                }
                _ => m.refusal = s.opt_str()?,
            }
            Some(())
        })?;
        Some(m)
    }

    fn tool_call(&mut self) -> Option<ResponseToolCall> {
        let mut c = ResponseToolCall::default();
        self.fields(&["id", "function"], |s, field| {
            match field {
                0 => c.id = s.opt_smol()?,
                _ => c.function = s.opt_object(Self::function)?,
            }
            Some(())
        })?;
        Some(c)
    }

    fn function(&mut self) -> Option<ResponseFunction> {
        let mut f = ResponseFunction::default();
        self.fields(&["name", "arguments"], |s, field| {
            match field {
                0 => f.name = s.opt_smol()?,
                // Arguments as an object (not the documented string) go to serde_json.
                _ => f.arguments = s.opt_smol()?.map(WireArguments::Text),
            }
            Some(())
        })?;
        Some(f)
    }

    fn usage(&mut self) -> Option<WireUsage> {
        let mut u = WireUsage::default();
        let fields = [
            "prompt_tokens",
            "completion_tokens",
            "prompt_cache_hit_tokens",
            "prompt_cache_miss_tokens",
            "prompt_tokens_details",
            "completion_tokens_details",
        ];
        self.fields(&fields, |s, field| {
            match field {
                0 => u.prompt_tokens = s.opt_u64()?,
                1 => u.completion_tokens = s.opt_u64()?,
                2 => u.prompt_cache_hit_tokens = s.opt_u64()?,
                3 => u.prompt_cache_miss_tokens = s.opt_u64()?,
                4 => {
                    u.prompt_tokens_details = s.opt_object(|s| {
                        let mut d = PromptTokensDetails::default();
                        s.fields(&["cached_tokens", "cache_write_tokens"], |s, field| {
                            match field {
                                0 => d.cached_tokens = s.opt_u64()?,
                                _ => d.cache_write_tokens = s.opt_u64()?,
                            }
                            Some(())
                        })?;
                        Some(d)
                    })?;
                }
                _ => {
                    u.completion_tokens_details = s.opt_object(|s| {
                        let mut d = CompletionTokensDetails::default();
                        s.fields(&["reasoning_tokens"], |s, _| {
                            d.reasoning_tokens = s.opt_u64()?;
                            Some(())
                        })?;
                        Some(d)
                    })?;
                }
            }
            Some(())
        })?;
        Some(u)
    }

    fn timings(&mut self) -> Option<Timings> {
        let mut t = Timings::default();
        self.fields(&["cache_n", "prompt_n", "predicted_n"], |s, field| {
            match field {
                0 => t.cache_n = s.opt_u64()?,
                1 => t.prompt_n = s.opt_u64()?,
                _ => t.predicted_n = s.opt_u64()?,
            }
            Some(())
        })?;
        Some(t)
    }
}

/// Decodes the escapes of a string's raw text (already checked by [`Scan::raw_str`]); `None`
/// for a lone surrogate, which `serde_json` refuses in a string.
fn unescape(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    unescape_into(raw, &mut out)?;
    Some(out)
}

/// [`unescape`] into `out` (a `String` or a [`SmolStrBuilder`], whose writes never fail).
fn unescape_into(raw: &str, out: &mut impl std::fmt::Write) -> Option<()> {
    let b = raw.as_bytes();
    // The raw text has no quote or control character left (`raw_str` checked it), so the
    // next byte `plain_run` stops at is a backslash.
    let mut start = 0;
    while let Some(i) = plain_run(b, start) {
        out.write_str(raw.get(start..i)?).ok()?;
        let (c, used) = match *b.get(i + 1)? {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            b'u' => match hex4(b.get(i + 2..i + 6)?)? {
                high @ 0xD800..=0xDBFF => {
                    if b.get(i + 6..i + 8)? != b"\\u" {
                        return None;
                    }
                    let low = hex4(b.get(i + 8..i + 12)?)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return None;
                    }
                    (
                        char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))?,
                        12,
                    )
                }
                code => (char::from_u32(code)?, 6),
            },
            _ => return None,
        };
        out.write_char(c).ok()?;
        start = i + used;
    }
    out.write_str(raw.get(start..)?).ok()
}

/// Four hex digits' value.
fn hex4(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0, |n, &d| Some(n * 16 + char::from(d).to_digit(16)?))
}

#[cfg(test)]
mod tests;
