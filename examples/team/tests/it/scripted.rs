//! `run_team` on the scripted model: the lead's roster, then the lead calling its members
//! as named agents in turn, their work streamed and tagged, the last one reviewing.

use std::sync::Arc;

use halo_core::Message;
use halo_core::testing::ScriptedModel;
use halo_strategies::team::member_prompt;
use serde_json::json;
use team::{kickoff, run_team, tool_name};

#[tokio::test]
async fn the_lead_calls_its_members_as_named_agents_in_turn_and_the_last_reviews() {
    let roster = r#"{"members": [
        {"name": "Ana", "role": "researcher", "assignment": "List three facts about otters."},
        {"name": "Bo", "role": "writer", "assignment": "Write a paragraph from the facts."},
        {"name": "Cy", "role": "reviewer", "assignment": "Check the paragraph."}
    ]}"#;
    let facts = "Otters hold hands; they use tools; they have dense fur.";
    let paragraph =
        "Otters hold hands while they sleep, crack shells with stones, and stay warm in dense fur.";
    let script = ScriptedModel::new()
        .text(roster)
        .tool_call("ana", json!({"task": "List three facts about otters."}))
        .text(facts)
        .tool_call(
            "bo",
            json!({"task": format!("Write a paragraph from: {facts}")}),
        )
        .text(paragraph)
        .tool_call("cy", json!({"task": format!("Review: {paragraph}")}))
        .text("Right on all three facts.")
        .text(format!("Final: {paragraph}"));
    let mut lines = Vec::new();
    let task = "A paragraph about otters";
    let report = run_team(Arc::new(script.clone()), Vec::new(), task, |l| {
        lines.push(l.to_string())
    })
    .await
    .unwrap();
    script.assert_consumed();
    assert_eq!(report.roster.members.len(), 3);
    assert_eq!(report.result, format!("Final: {paragraph}"));
    let answers: Vec<(&str, &str)> = report
        .answers
        .iter()
        .map(|(n, a)| (n.as_str(), a.as_str()))
        .collect();
    assert_eq!(
        answers,
        [
            ("ana", facts),
            ("bo", paragraph),
            ("cy", "Right on all three facts.")
        ]
    );

    let requests = script.requests();
    assert_eq!(requests.len(), 8);
    // The lead has the members as its tools, and the roster in its first turn.
    assert_eq!(requests[1].tool_names, ["ana", "bo", "cy"]);
    assert_eq!(
        requests[1].history,
        [Message::user(kickoff(task, &report.roster))]
    );
    // Each member: its own prompt, the task the lead gave it.
    let ana = halo_core::StablePrefix::new(member_prompt("Ana", "researcher"));
    assert_eq!(requests[2].fingerprint, ana.fingerprint());
    assert_eq!(
        requests[2].history,
        [Message::user("List three facts about otters.")]
    );
    // The members' work came out tagged with their names as it happened.
    assert!(lines.contains(&format!("[ana] {facts}")), "{lines:?}");
    assert!(lines.contains(&"[cy] Right on all three facts.".to_string()));
    assert!(lines[0].starts_with("hired Ana (researcher)"));
    // Each member's counters, then the roster's and the lead's (its members' included).
    let steps: Vec<_> = report
        .stats
        .iter()
        .map(|(n, s)| (n.as_str(), s.steps, s.delegated_steps))
        .collect();
    assert_eq!(
        steps,
        [
            ("ana", 1, 0),
            ("bo", 1, 0),
            ("cy", 1, 0),
            ("roster", 1, 0),
            ("lead", 7, 3)
        ]
    );
}

#[tokio::test]
async fn a_roster_of_one_is_sent_back_with_the_schema_and_names_become_tool_names() {
    let script = ScriptedModel::new()
        .text(r#"{"members": [{"name": "solo", "role": "r", "assignment": "all"}]}"#)
        .text(r#"{"members": [{"name": "Dr. A", "role": "r", "assignment": "x"}, {"name": "b", "role": "rev", "assignment": "y"}]}"#)
        .text("Nothing to do.");
    let report = run_team(Arc::new(script.clone()), Vec::new(), "t", |_| {})
        .await
        .unwrap();
    assert_eq!(report.roster.members.len(), 2);
    assert_eq!(script.requests()[2].tool_names, ["b", "dr__a"]);
    assert_eq!(tool_name("Dr. A"), "dr__a");
    script.assert_consumed();
}
