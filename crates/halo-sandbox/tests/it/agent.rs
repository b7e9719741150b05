//! The sandbox's tools driven by a `HaloAgent` and a scripted model: calls go through the
//! registry's schema check and come back as tool results the model reads.

use halo_core::HaloAgent;
use halo_core::testing::ScriptedModel;
use serde_json::json;

use crate::common::{Fixture, outside_message};

#[tokio::test]
async fn an_agent_writes_then_reads_a_file() {
    let f = Fixture::new();
    let model = ScriptedModel::new()
        .tool_call(
            "write",
            json!({"path": "notes/todo.md", "content": "- ship it\n"}),
        )
        .tool_call("read", json!({"path": "notes/todo.md"}))
        .tool_call("read", json!({"path": "../etc/passwd"}))
        .tool_call("read", json!({"path": "notes/todo.md", "offset": 0}))
        .text("the file says: ship it");
    let mut agent = HaloAgent::builder(model.clone())
        .system("You edit files.")
        .tools(f.sandbox.tools())
        .unwrap()
        .build();
    let result = agent.generate_text("write and read a note").await.unwrap();
    model.assert_consumed();

    assert_eq!(result.text, "the file says: ship it");
    let results: Vec<(&str, bool)> = result
        .steps
        .iter()
        .flat_map(|s| &s.tool_results)
        .map(|r| (r.content.as_str(), r.is_error))
        .collect();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0], ("wrote 10 bytes to `notes/todo.md`", false));
    assert_eq!(results[1], ("     1\t- ship it", false));
    assert_eq!(
        results[2],
        (
            format!("error: {}", outside_message("../etc/passwd")).as_str(),
            true
        )
    );
    // The schema says offset >= 1: the registry refuses before the tool runs.
    assert!(results[3].1, "{:?}", results[3]);
    assert!(
        results[3].0.contains("do not match its schema"),
        "{}",
        results[3].0
    );
    assert_eq!(
        std::fs::read_to_string(f.path("notes/todo.md")).unwrap(),
        "- ship it\n"
    );
    // The prefix (with the tool specs) was the same at every step.
    let fingerprints: Vec<_> = model.requests().iter().map(|r| r.fingerprint).collect();
    assert_eq!(fingerprints.len(), 5);
    assert!(fingerprints.windows(2).all(|w| w[0] == w[1]));
}
