//! The answers of [`GeminiSim`](super::GeminiSim) in Gemini's wire shape: the usage
//! metadata, a scripted turn's parts (function calls without ids, thought signatures,
//! thought summaries) as one response or as `alt=sse` chunks, and RFC 3339 times.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::SimUsage;
use crate::sim::{SimReply, tokens};

pub(super) fn usage_json(u: &SimUsage) -> Value {
    let mut m = Map::new();
    m.insert("promptTokenCount".into(), u.prompt_tokens.into());
    m.insert("candidatesTokenCount".into(), u.output_tokens.into());
    if u.cached_tokens > 0 {
        m.insert("cachedContentTokenCount".into(), u.cached_tokens.into());
    }
    if u.thoughts_tokens > 0 {
        m.insert("thoughtsTokenCount".into(), u.thoughts_tokens.into());
    }
    m.insert(
        "totalTokenCount".into(),
        (u.prompt_tokens + u.output_tokens + u.thoughts_tokens).into(),
    );
    Value::Object(m)
}

/// One scripted answer in Gemini's parts.
pub(super) struct Turn {
    reply: SimReply,
    signature: Option<String>,
    thoughts: Option<String>,
}

impl Turn {
    pub(super) fn new(
        reply: SimReply,
        signature: Option<String>,
        thoughts: Option<String>,
    ) -> Self {
        Turn {
            reply,
            signature,
            thoughts,
        }
    }

    pub(super) fn output_tokens(&self) -> u64 {
        match &self.reply {
            SimReply::Text(t) => tokens(t).len() as u64,
            SimReply::ToolCalls(calls) => calls
                .iter()
                .map(|(name, args)| {
                    tokens(&json!({"name": name, "args": args}).to_string()).len() as u64
                })
                .sum(),
        }
    }

    pub(super) fn thought_tokens(&self) -> u64 {
        self.thoughts
            .as_deref()
            .map_or(0, |t| tokens(t).len() as u64)
    }

    pub(super) fn thought_part(&self) -> Option<Value> {
        self.thoughts
            .as_ref()
            .map(|t| json!({"text": t, "thought": true}))
    }

    pub(super) fn call_parts(&self, calls: &[(String, Value)]) -> Vec<Value> {
        calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                let mut part = json!({"functionCall": {"name": name, "args": args}});
                if i == 0
                    && let Some(s) = &self.signature
                {
                    part["thoughtSignature"] = Value::String(s.clone());
                }
                part
            })
            .collect()
    }

    pub(super) fn candidate(parts: Vec<Value>, finish: bool) -> Value {
        let mut c = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if finish {
            c["finishReason"] = Value::String("STOP".into());
        }
        c
    }

    pub(super) fn response(candidate: Value, usage: &Value, model: &str, id: &str) -> Value {
        json!({
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": id,
        })
    }

    pub(super) fn whole(&self, usage: &Value, model: &str, id: &str) -> Value {
        let mut parts: Vec<Value> = self.thought_part().into_iter().collect();
        match &self.reply {
            SimReply::Text(t) => {
                let mut part = json!({ "text": t });
                if let Some(s) = &self.signature {
                    part["thoughtSignature"] = Value::String(s.clone());
                }
                parts.push(part);
            }
            SimReply::ToolCalls(calls) => parts.extend(self.call_parts(calls)),
        }
        Self::response(Self::candidate(parts, true), usage, model, id)
    }

    /// The streamed chunks: the thought, the text in three pieces (or the calls whole),
    /// then a last chunk with `STOP`, an empty text part (holding a text answer's
    /// signature) and the usage. Earlier chunks carry the prompt count only.
    pub(super) fn chunks(&self, usage: &Value, model: &str, id: &str) -> Vec<Value> {
        let partial = json!({"promptTokenCount": usage["promptTokenCount"]});
        let mut out = Vec::new();
        if let Some(t) = self.thought_part() {
            out.push(Self::response(
                Self::candidate(vec![t], false),
                &partial,
                model,
                id,
            ));
        }
        let mut last = json!({ "text": "" });
        match &self.reply {
            SimReply::Text(t) => {
                for piece in split3(t) {
                    out.push(Self::response(
                        Self::candidate(vec![json!({ "text": piece })], false),
                        &partial,
                        model,
                        id,
                    ));
                }
                if let Some(s) = &self.signature {
                    last["thoughtSignature"] = Value::String(s.clone());
                }
            }
            SimReply::ToolCalls(calls) => out.push(Self::response(
                Self::candidate(self.call_parts(calls), false),
                &partial,
                model,
                id,
            )),
        }
        out.push(Self::response(
            Self::candidate(vec![last], true),
            usage,
            model,
            id,
        ));
        out
    }
}

/// `text` in three pieces on char boundaries (fewer for short texts, never an empty one).
pub(super) fn split3(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    if chars.len() < 3 {
        return if text.is_empty() {
            Vec::new()
        } else {
            vec![text]
        };
    }
    let a = chars[chars.len() / 3].0;
    let b = chars[2 * chars.len() / 3].0;
    vec![&text[..a], &text[a..b], &text[b..]]
}

/// RFC 3339 in UTC with millisecond precision (`2026-05-07T12:00:00.123Z`), the form
/// Google's JSON timestamps take. Days to civil date: Howard Hinnant's algorithm
/// (<https://howardhinnant.github.io/date_algorithms.html#civil_from_days>).
pub(super) fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    pub(super) fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789); // a leap day
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56.789Z");
    }

    #[test]
    pub(super) fn text_splits_on_char_boundaries() {
        assert_eq!(split3("héllo wörld"), ["hél", "lo w", "örld"]);
        assert_eq!(split3("hi"), ["hi"]);
        assert!(split3("").is_empty());
    }
}
