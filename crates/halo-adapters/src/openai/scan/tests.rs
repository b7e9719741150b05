//! The reader against serde_json: real bodies, bodies left to serde_json, and proptests over
//! arbitrary and edited bodies.

use super::*;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use serde_json::Map;

fn serde(text: &str) -> Option<ChatCompletion> {
    serde_json::from_str(text).ok()
}

#[test]
fn the_bodies_servers_send_are_read_as_serde_json_reads_them() {
    let bodies = [
        // OpenAI, a tool call, with the fields Halo does not read.
        r#"{"id":"chatcmpl-B9","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris, \u00e9t\u00e9 \ud83c\udf1e\"}"}}],"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}"#,
        // DeepSeek, thinking mode, pretty-printed.
        "{\n  \"id\": \"d1\",\n  \"model\": \"deepseek-reasoner\",\n  \"choices\": [ {\n    \"index\": 0,\n    \"message\": {\"role\": \"assistant\", \"content\": \"4\", \"reasoning_content\": \"2+2\\n= 4\"},\n    \"finish_reason\": \"stop\" } ],\n  \"usage\": {\"prompt_tokens\": 100, \"completion_tokens\": 5, \"prompt_cache_hit_tokens\": 64, \"prompt_cache_miss_tokens\": 36}\n}\n",
        // llama.cpp, with timings and fractional milliseconds.
        r#"{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"Hi"}}],"created":1,"model":"m","object":"chat.completion","usage":{"completion_tokens":2,"prompt_tokens":14,"total_tokens":16},"id":"chatcmpl-x","timings":{"cache_n":236,"prompt_n":14,"prompt_ms":51.2,"predicted_n":9,"predicted_ms":8.01e1}}"#,
        // vLLM's `reasoning`, an empty object of details, `error: null`.
        r#"{"id":"v","choices":[{"message":{"content":"ok","reasoning":"because"},"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":3,"prompt_tokens_details":null,"completion_tokens_details":{}},"error":null}"#,
    ];
    for body in bodies {
        let read = read(body);
        assert!(read.is_some(), "not read: {body}");
        assert_eq!(read, serde(body), "{body}");
    }
    let weather = read(bodies[0]).unwrap().choices.remove(0).message.unwrap();
    let arguments = weather
        .tool_calls
        .unwrap()
        .remove(0)
        .function
        .unwrap()
        .arguments;
    assert_eq!(
        arguments,
        Some(WireArguments::Text(
            "{\"location\":\"Paris, été 🌞\"}".into()
        ))
    );
}

#[test]
fn other_shapes_and_malformed_bodies_are_left_to_serde_json() {
    let left = [
        // Shapes serde_json reads and this reader does not.
        r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"}]}}]}"#,
        r#"{"choices":[],"error":{"message":"overloaded"}}"#,
        r#"{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}}]}"#,
        r#"{"choices":[{"message":{"reasoning":{"text":"r"}}}]}"#,
        r#"{"ch\u006fices":[]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":-0}}"#,
        r#"[null,null,[]]"#,
        // Errors, which serde_json words.
        r#"{"choices":[],"id":"a","id":"b"}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":1.0}}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":18446744073709551616}}"#,
        r#"{"choices":null}"#,
        r#"{"choices":[],}"#,
        r#"{"choices":[],"x":01}"#,
        r#"{"choices":[],"id":"\ud800"} "#,
        r#"{"choices":[],"id":"\udc00\ud800"} "#,
        "{\"choices\":[],\"x\":\"a\u{1}b\"}",
        r#"{"choices":[]} x"#,
        r#"{"choices":[],"x":tru}"#,
        r#"{"choices":[]"#,
        "",
    ];
    for body in left {
        assert_eq!(read(body), None, "{body}");
    }
    let deep = format!(
        r#"{{"choices":[],"x":{}{}}}"#,
        "[".repeat(70),
        "]".repeat(70)
    );
    assert_eq!(read(&deep), None);
    assert!(serde(&deep).is_some());
}

/// Writes a value as JSON text, each choice of whitespace and escape taken from `picks`.
struct Writer<'a> {
    out: String,
    picks: &'a [u8],
    at: usize,
}

impl Writer<'_> {
    fn pick(&mut self) -> u8 {
        self.at += 1;
        self.picks[self.at % self.picks.len()]
    }

    fn ws(&mut self) {
        let ws = match self.pick() % 8 {
            0 => " ",
            1 => "\n  ",
            2 => "\t",
            3 => "\r\n",
            _ => "",
        };
        self.out.push_str(ws);
    }

    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            let pick = self.pick();
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' if pick.is_multiple_of(2) => self.out.push_str("\\n"),
                '/' if pick.is_multiple_of(2) => self.out.push_str("\\/"),
                c if u32::from(c) < 0x20 || pick.is_multiple_of(8) => {
                    let mut units = [0; 2];
                    for unit in c.encode_utf16(&mut units) {
                        self.out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    fn value(&mut self, value: &Value) {
        self.ws();
        match value {
            Value::String(s) => self.string(s),
            Value::Array(items) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.value(item);
                }
                self.ws();
                self.out.push(']');
            }
            Value::Object(map) => {
                self.out.push('{');
                for (i, (key, item)) in map.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.ws();
                    self.string_key(key);
                    self.ws();
                    self.out.push(':');
                    self.value(item);
                }
                self.ws();
                self.out.push('}');
            }
            other => self.out.push_str(&other.to_string()),
        }
        self.ws();
    }

    /// Keys as serde_json writes them (an escaped key is left to serde_json).
    fn string_key(&mut self, key: &str) {
        self.out.push_str(&serde_json::to_string(key).unwrap());
    }
}

fn write(value: &Value, picks: &[u8]) -> String {
    let mut writer = Writer {
        out: String::new(),
        picks,
        at: 0,
    };
    writer.value(value);
    writer.out
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{0,12}",
        any::<String>(),
        "[\"\\\\/\n\té🌞\u{1}]{0,6}"
    ]
}

fn opt_str() -> BoxedStrategy<Value> {
    prop_oneof![Just(Value::Null), text().prop_map(Value::String)].boxed()
}

fn count() -> BoxedStrategy<Value> {
    prop_oneof![Just(Value::Null), any::<u64>().prop_map(Value::from)].boxed()
}

/// Any JSON, for the fields no one reads.
fn other() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..3).prop_map(Value::Array),
            btree_map("x_[a-z]{1,4}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

fn nullable(value: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop_oneof![1 => Just(Value::Null), 3 => value].boxed()
}

fn array(item: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    vec(item, 0..3).prop_map(Value::Array).boxed()
}

/// An object with each of `fields` present or not, and up to two fields no one reads.
fn object(fields: Vec<(&'static str, BoxedStrategy<Value>)>) -> BoxedStrategy<Value> {
    let known: Vec<_> = fields
        .into_iter()
        .map(|(key, value)| proptest::option::of(value).prop_map(move |v| (key, v)))
        .collect();
    (known, btree_map("x_[a-z]{1,6}", other(), 0..3))
        .prop_map(|(known, unknown)| {
            let mut map: Map<String, Value> = unknown.into_iter().collect();
            for (key, value) in known {
                if let Some(value) = value {
                    map.insert(key.to_string(), value);
                }
            }
            Value::Object(map)
        })
        .boxed()
}

/// A chat completion of any shape this reader reads.
fn completion() -> BoxedStrategy<Value> {
    let function = object(vec![("name", opt_str()), ("arguments", opt_str())]);
    let call = object(vec![("id", opt_str()), ("function", nullable(function))]);
    let message = object(vec![
        ("content", opt_str()),
        ("reasoning_content", opt_str()),
        ("reasoning", opt_str()),
        ("refusal", opt_str()),
        ("tool_calls", nullable(array(call))),
    ]);
    let choice = object(vec![
        ("message", nullable(message)),
        ("finish_reason", opt_str()),
    ]);
    let usage = object(vec![
        ("prompt_tokens", count()),
        ("completion_tokens", count()),
        ("prompt_cache_hit_tokens", count()),
        ("prompt_cache_miss_tokens", count()),
        (
            "prompt_tokens_details",
            nullable(object(vec![
                ("cached_tokens", count()),
                ("cache_write_tokens", count()),
            ])),
        ),
        (
            "completion_tokens_details",
            nullable(object(vec![("reasoning_tokens", count())])),
        ),
    ]);
    let timings = object(vec![
        ("cache_n", count()),
        ("prompt_n", count()),
        ("predicted_n", count()),
    ]);
    object(vec![
        ("id", opt_str()),
        ("model", opt_str()),
        ("choices", array(choice)),
        ("usage", nullable(usage)),
        ("timings", nullable(timings)),
        ("error", Just(Value::Null).boxed()),
    ])
}

proptest! {
    /// A body in the shapes this reader knows is read, to serde_json's value, however
    /// it is spaced and escaped.
    #[test]
    fn read_is_serde_json(completion in completion(), picks in vec(any::<u8>(), 1..64)) {
        let text = write(&completion, &picks);
        let expected = serde(&text);
        prop_assert!(expected.is_some(), "serde_json refused {}", text);
        prop_assert_eq!(read(&text), expected, "{}", text);
    }

    /// Whatever a body is changed into, what this reader reads is what serde_json reads.
    #[test]
    fn a_read_body_is_serde_json_s_value(
        completion in completion(),
        picks in vec(any::<u8>(), 1..64),
        edits in vec((any::<prop::sample::Index>(), 0..3u8, prop::sample::select(
            b"{}[]\",:\\ 0123456789.eE+-ntrufalsx".to_vec()
        )), 1..4),
    ) {
        let mut bytes = write(&completion, &picks).into_bytes();
        for (at, how, byte) in edits {
            let at = at.index(bytes.len() + 1);
            match how {
                0 => bytes.insert(at, byte),
                1 if at < bytes.len() => bytes[at] = byte,
                _ if at < bytes.len() => { bytes.remove(at); }
                _ => bytes.push(byte),
            }
        }
        if let Ok(text) = std::str::from_utf8(&bytes)
            && let Some(read) = read(text)
        {
            prop_assert_eq!(Some(read), serde(text), "{}", text);
        }
    }
}
