//! Runs each JSON-repair crate on the argument case table and prints, per crate, the cases
//! it passes: alone, and behind halo-strategies' thin pre/post-steps (a valid object passes
//! through; a fenced block or prose around one object is cut to that object; a JSON string
//! holding an object is decoded; the result must be an object, else the call is
//! unrepairable).

use serde_json::Value;

type Repair = fn(&str) -> Option<String>;

fn candidates() -> Vec<(&'static str, Repair)> {
    vec![
        ("llm_json 1.0.3", |s| {
            llm_json::repair_json(s, &llm_json::RepairOptions::default()).ok()
        }),
        ("jsonrepair 0.1.0", |s| {
            jsonrepair::repair_to_string(s, &jsonrepair::Options::default()).ok()
        }),
        ("jsonrepair-rs 0.2.6", |s| jsonrepair_rs::jsonrepair(s).ok()),
        ("json5 1.3.7", |s| {
            json5::from_str::<Value>(s).ok().map(|v| v.to_string())
        }),
    ]
}

/// The verdict on one output: the object it parses to, if any.
fn object(out: Option<String>) -> Option<Value> {
    let v: Value = serde_json::from_str(&out?).ok()?;
    match v {
        Value::Object(_) => Some(v),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => Some(v),
            _ => None,
        },
        _ => None,
    }
}

/// The thin steps around a crate: the valid fast path, fences and prose cut to the outermost
/// braces, a double-encoded string decoded.
fn wrapped(repair: Repair, raw: &str) -> Option<Value> {
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(raw) {
        return Some(v);
    }
    if let Ok(Value::String(inner)) = serde_json::from_str::<Value>(raw) {
        return wrapped(repair, &inner);
    }
    let body = outermost_object(raw)?;
    object(repair(body))
}

/// The first `{` and everything up to its balanced `}` (strings in either quote skipped), or
/// to the end when the object is cut off.
fn outermost_object(raw: &str) -> Option<&str> {
    let start = raw.find('{')?;
    let (mut depth, mut quote, mut escaped) = (0usize, None::<char>, false);
    for (i, c) in raw[start..].char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '{' | '[' => depth += 1,
                '}' | ']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Some(&raw[start..start + i + c.len_utf8()]);
                    }
                }
                _ => {}
            },
        }
    }
    Some(&raw[start..])
}

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../crates/halo-strategies/tests/data/arguments.json"
        )
        .into()
    });
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    println!("{} cases", cases.len());
    for (name, repair) in candidates() {
        let (mut alone, mut thin) = (0, 0);
        let mut failed = Vec::new();
        for case in &cases {
            let raw = case["raw"].as_str().unwrap();
            let expected = case.get("expected").cloned();
            // A crate that panics fails the case.
            let a = std::panic::catch_unwind(|| object(repair(raw))).unwrap_or(None);
            let t = std::panic::catch_unwind(|| wrapped(repair, raw)).unwrap_or(None);
            if a == expected {
                alone += 1;
            } else {
                failed.push(format!(
                    "alone {}/{} -> {:?}",
                    case["family"].as_str().unwrap(),
                    case["case"].as_str().unwrap(),
                    a.map(|v| v.to_string())
                ));
            }
            if t == expected {
                thin += 1;
            } else {
                failed.push(format!(
                    "thin {}/{} -> {:?}",
                    case["family"].as_str().unwrap(),
                    case["case"].as_str().unwrap(),
                    t.map(|v| v.to_string())
                ));
            }
        }
        println!(
            "{name:<22} alone {alone:>2}/{n}  with thin steps {thin:>2}/{n}",
            n = cases.len()
        );
        for f in failed {
            println!("    fails: {f}");
        }
    }
}
