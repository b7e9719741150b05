//! The tool-name repair table: `tests/data/names.json`, names from several model families
//! against one tool set, each with the tool it must become (`null`: left alone).

use halo_core::ToolSpec;
use halo_strategies::names::repair_name;
use serde_json::json;

#[test]
fn every_case_of_the_table() {
    let table = crate::data("names.json");
    let tools: Vec<ToolSpec> = table["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| ToolSpec::new(n.as_str().unwrap(), "", json!({"type": "object"})))
        .collect();
    let mut failed = Vec::new();
    for case in table["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let expected = case["expected"].as_str();
        let got = repair_name(name, &tools);
        if got.as_deref() != expected {
            failed.push(format!(
                "{}/{}: {name:?} -> {got:?}, expected {expected:?}",
                case["family"].as_str().unwrap(),
                case["case"].as_str().unwrap()
            ));
        }
    }
    assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n"));
}
