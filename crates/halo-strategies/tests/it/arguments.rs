//! The argument repair table: `tests/data/arguments.json`, malformed arguments from GPT,
//! Claude, Llama, Qwen and Gemini, each with the object it must become (or `unrepairable`).

use halo_strategies::arguments::{ArgumentRepair, repair_arguments};
use serde_json::Value;

#[test]
fn every_case_of_the_table() {
    let cases = crate::data("arguments.json");
    let cases = cases.as_array().unwrap();
    assert!(cases.len() >= 30, "the table has {} cases", cases.len());
    let mut failed = Vec::new();
    for case in cases {
        let label = format!(
            "{}/{}",
            case["family"].as_str().unwrap(),
            case["case"].as_str().unwrap()
        );
        let raw = case["raw"].as_str().unwrap();
        let got = repair_arguments(raw);
        let ok = match (case.get("expected"), &got) {
            (None, ArgumentRepair::Unrepairable) => true,
            (Some(expected), ArgumentRepair::Valid) => {
                serde_json::from_str::<Value>(raw).ok().as_ref() == Some(expected)
            }
            (Some(expected), ArgumentRepair::Repaired(out)) => {
                serde_json::from_str::<Value>(out).ok().as_ref() == Some(expected)
            }
            _ => false,
        };
        if !ok {
            failed.push(format!("{label}: {raw:?} -> {got:?}"));
        }
    }
    assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n"));
}

#[test]
fn repaired_arguments_are_compact_json_with_sorted_keys() {
    assert_eq!(
        repair_arguments("{path: 'a.txt', limit: 10, all: True,}"),
        ArgumentRepair::Repaired(r#"{"all":true,"limit":10,"path":"a.txt"}"#.into())
    );
    // Double-encoded: decoded once, not left as a string.
    assert_eq!(
        repair_arguments(r#""{\"path\": \"a.txt\"}""#),
        ArgumentRepair::Repaired(r#"{"path":"a.txt"}"#.into())
    );
}

#[test]
fn a_valid_object_keeps_its_bytes() {
    // Key order and spacing as the model sent them: a byte changed would be a cache miss.
    assert_eq!(
        repair_arguments("{\"b\": 1,  \"a\":2}"),
        ArgumentRepair::Valid
    );
}
