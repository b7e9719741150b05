//! A message's digest for the ledger: a 64-bit hash of its content and the length in bytes
//! of its JSON, computed without writing the JSON.
//!
//! The hash chains XXH3-64 (whose output its specification fixes: the same in every process,
//! platform and version) over each value in a fixed order, each seeded with what came before
//! (the keys before it chained in by a constant of their own) and a tag of its own, so two
//! messages hash alike only when every field is equal. The length is exactly
//! `serde_json::to_vec(message).len()`: the JSON's punctuation and keys counted per field,
//! each string with its escapes (tested against `serde_json` over arbitrary messages).
//! Every type is taken apart field by field, so a field added to a message type does not
//! compile here until it is counted.
//!
//! Writing the JSON and hashing it cost a seventh of a step's own work on a short tool loop;
//! this costs a fraction of that.

use serde_json::Value;
use xxhash_rust::const_xxh3;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::message::{AssistantMessage, ContentPart, Message, Reasoning, ToolCall, ToolResult};

/// A message's digest: its hash and the length of its JSON in bytes.
pub(super) type Digest = (u64, u64);

/// A JSON key: its name, and its identity in the hash (XXH3-64 of the name, computed when
/// compiling).
#[derive(Clone, Copy)]
struct Key {
    name: &'static str,
    id: u64,
}

impl Key {
    const fn new(name: &'static str) -> Key {
        Key {
            name,
            id: const_xxh3::xxh3_64(name.as_bytes()),
        }
    }
}

/// `key!("name")`: the [`Key`] named so, made when compiling.
macro_rules! key {
    ($name:literal) => {
        const { Key::new($name) }
    };
}

/// The digest of `message`.
pub(super) fn message_digest(message: &Message) -> Digest {
    let mut d = Digester::default();
    d.open();
    match message {
        Message::System { content } => {
            d.key_str(key!("role"), "system");
            d.comma();
            d.key_str(key!("content"), content);
        }
        Message::User { content } => {
            d.key_str(key!("role"), "user");
            d.comma();
            d.key(key!("content"));
            d.list(content, Digester::part);
        }
        Message::Assistant(turn) => {
            d.key_str(key!("role"), "assistant");
            d.comma();
            d.assistant_fields(turn);
        }
        Message::Tool(result) => {
            d.key_str(key!("role"), "tool");
            d.comma();
            d.result_fields(result);
        }
    }
    d.close();
    (d.hash, d.len)
}

/// The running hash and length of one message.
#[derive(Default)]
struct Digester {
    hash: u64,
    len: u64,
}

impl Digester {
    /// Chains `bytes` into the hash under `tag`.
    fn mix(&mut self, tag: u64, bytes: &[u8]) {
        self.hash = xxh3_64_with_seed(bytes, self.hash ^ tag.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }

    /// Punctuation: counted only (the keys and the values fix the structure).
    fn punct(&mut self, text: &'static str) {
        self.len += text.len() as u64;
    }

    fn open(&mut self) {
        self.punct("{");
    }

    fn close(&mut self) {
        self.punct("}");
    }

    fn comma(&mut self) {
        self.punct(",");
    }

    /// A string value: quoted and escaped as `serde_json` writes it.
    fn string(&mut self, s: &str) {
        self.len += escaped_len(s);
        self.mix(2, s.as_bytes());
    }

    /// `"name":`, chained in by its identity (no hashing of the name at run time).
    fn key(&mut self, key: Key) {
        self.len += key.name.len() as u64 + 3;
        self.hash = (self.hash ^ key.id)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }

    fn key_str(&mut self, key: Key, value: &str) {
        self.key(key);
        self.string(value);
    }

    fn key_bool(&mut self, key: Key, value: bool) {
        self.key(key);
        let literal = if value { "true" } else { "false" };
        self.len += literal.len() as u64;
        self.mix(1, literal.as_bytes());
    }

    /// Any JSON value (a call's provider data): written out, which is rare.
    fn value(&mut self, value: &Value) {
        let text = value.to_string();
        self.len += text.len() as u64;
        self.mix(4, text.as_bytes());
    }

    /// `[a,b,…]`
    fn list<T>(&mut self, items: &[T], mut each: impl FnMut(&mut Self, &T)) {
        self.punct("[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.comma();
            }
            each(self, item);
        }
        self.punct("]");
    }

    fn part(&mut self, part: &ContentPart) {
        self.open();
        match part {
            ContentPart::Text { text } => {
                self.key_str(key!("type"), "text");
                self.comma();
                self.key_str(key!("text"), text);
            }
            ContentPart::Image { media_type, data } => {
                self.key_str(key!("type"), "image");
                self.comma();
                self.key_str(key!("media_type"), media_type);
                self.comma();
                self.key_str(key!("data"), data);
            }
        }
        self.close();
    }

    fn assistant_fields(&mut self, turn: &AssistantMessage) {
        let AssistantMessage {
            text,
            reasoning,
            tool_calls,
        } = turn;
        self.key_str(key!("text"), text);
        if !reasoning.is_empty() {
            self.comma();
            self.key(key!("reasoning"));
            self.list(reasoning, Digester::reasoning);
        }
        if !tool_calls.is_empty() {
            self.comma();
            self.key(key!("tool_calls"));
            self.list(tool_calls, Digester::call);
        }
    }

    fn reasoning(&mut self, block: &Reasoning) {
        let Reasoning { text, signature } = block;
        self.open();
        self.key_str(key!("text"), text);
        if let Some(signature) = signature {
            self.comma();
            self.key_str(key!("signature"), signature);
        }
        self.close();
    }

    fn call(&mut self, call: &ToolCall) {
        let ToolCall {
            id,
            name,
            raw_arguments,
            provider_data,
        } = call;
        self.open();
        self.key_str(key!("id"), id);
        self.comma();
        self.key_str(key!("name"), name);
        self.comma();
        self.key_str(key!("raw_arguments"), raw_arguments);
        if let Some(data) = provider_data {
            self.comma();
            self.key(key!("provider_data"));
            self.value(data);
        }
        self.close();
    }

    fn result_fields(&mut self, result: &ToolResult) {
        let ToolResult {
            tool_call_id,
            tool_name,
            content,
            is_error,
            discardable,
        } = result;
        self.key_str(key!("tool_call_id"), tool_call_id);
        self.comma();
        self.key_str(key!("tool_name"), tool_name);
        self.comma();
        self.key_str(key!("content"), content);
        self.comma();
        self.key_bool(key!("is_error"), *is_error);
        if *discardable {
            self.comma();
            self.key_bool(key!("discardable"), true);
        }
    }
}

/// The length of `s` as a JSON string written by `serde_json`: the quotes, and each byte
/// that must be escaped counted as its escape (`\"`, `\\`, `\n` and the other short ones:
/// 2 bytes; any other control character: `\u00XX`, 6 bytes).
fn escaped_len(s: &str) -> u64 {
    // Most strings have nothing to escape. This check (no early exit) becomes vector code,
    // about 2.5 instructions a byte; the count below is about 14.
    let plain = s.as_bytes().iter().fold(true, |plain, &b| {
        plain & (b >= 0x20) & (b != b'"') & (b != b'\\')
    });
    if plain {
        return s.len() as u64 + 2;
    }
    let extra: u64 = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0A | 0x0C | 0x0D => 1,
            0x00..=0x1F => 5,
            _ => 0,
        })
        .sum();
    s.len() as u64 + 2 + extra
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn text() -> impl Strategy<Value = String> {
        // Plain text, quotes, backslashes, every control character, non-ASCII.
        prop::collection::vec(
            prop_oneof![
                "[a-z ]{0,6}",
                Just("\"".to_string()),
                Just("\\".to_string()),
                (0u8..0x20).prop_map(|b| char::from(b).to_string()),
                Just("é→\u{7f}".to_string()),
            ],
            0..6,
        )
        .prop_map(|parts| parts.concat())
    }

    fn call() -> impl Strategy<Value = ToolCall> {
        (text(), text(), text(), any::<Option<u8>>()).prop_map(|(id, name, args, data)| {
            let mut call = ToolCall::new(id, name, args);
            call.provider_data = data.map(|n| serde_json::json!({"sig": n, "s": "a\"b"}));
            call
        })
    }

    fn message() -> impl Strategy<Value = Message> {
        prop_oneof![
            text().prop_map(Message::system),
            prop::collection::vec(
                prop_oneof![
                    text().prop_map(|text| ContentPart::Text { text }),
                    (text(), text())
                        .prop_map(|(media_type, data)| ContentPart::Image { media_type, data }),
                ],
                0..3,
            )
            .prop_map(|content| Message::User { content }),
            (
                text(),
                prop::collection::vec((text(), prop::option::of(text())), 0..3),
                prop::collection::vec(call(), 0..3),
            )
                .prop_map(|(text, reasoning, tool_calls)| {
                    Message::Assistant(AssistantMessage {
                        text,
                        reasoning: reasoning
                            .into_iter()
                            .map(|(text, signature)| Reasoning { text, signature })
                            .collect(),
                        tool_calls,
                    })
                }),
            (call(), text(), any::<bool>(), any::<bool>()).prop_map(
                |(call, content, is_error, discardable)| {
                    Message::Tool(ToolResult {
                        is_error,
                        discardable,
                        ..ToolResult::ok(&call, content)
                    })
                }
            ),
        ]
    }

    proptest! {
        /// The length is that of the JSON `serde_json` writes, for every message.
        #[test]
        fn the_length_is_that_of_the_json(m in message()) {
            let json = serde_json::to_vec(&m).unwrap();
            prop_assert_eq!(message_digest(&m).1, json.len() as u64, "{}", String::from_utf8_lossy(&json));
        }

        /// Two messages have the same hash when, and (barring a 64-bit collision) only when,
        /// their JSON is the same.
        #[test]
        fn equal_json_equal_hash(a in message(), b in message()) {
            let same = serde_json::to_vec(&a).unwrap() == serde_json::to_vec(&b).unwrap();
            prop_assert_eq!(message_digest(&a).0 == message_digest(&b).0, same);
            prop_assert_eq!(message_digest(&a), message_digest(&a.clone()));
        }
    }

    #[test]
    fn a_changed_byte_in_any_field_changes_the_hash() {
        let call = ToolCall::new("call_1", "read", r#"{"path":"a"}"#);
        let base = Message::Tool(ToolResult::ok(&call, "content"));
        let variants = [
            Message::Tool(ToolResult::ok(
                &ToolCall::new("call_2", "read", ""),
                "content",
            )),
            Message::Tool(ToolResult::ok(
                &ToolCall::new("call_1", "reaD", ""),
                "content",
            )),
            Message::Tool(ToolResult::ok(&call, "contenT")),
            Message::Tool(ToolResult::error(&call, "content")),
            // The same strings moved between fields.
            Message::Tool(ToolResult::ok(
                &ToolCall::new("read", "call_1", ""),
                "content",
            )),
        ];
        for v in &variants {
            assert_ne!(message_digest(&base).0, message_digest(v).0, "{v:?}");
        }
    }
}
