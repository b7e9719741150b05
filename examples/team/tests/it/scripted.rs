//! `run_team` on the scripted model: the lead's roster, members in turn with broadcasts,
//! the review, the disband.

use std::sync::Arc;

use halo_core::Message;
use halo_core::testing::ScriptedModel;
use halo_strategies::team::{Letter, delivery};
use team::{MemberPlan, review_task, run_team, work_task};

#[tokio::test]
async fn the_lead_proposes_members_who_work_in_turn_with_broadcasts_and_the_last_reviews() {
    let roster = r#"{"members": [
        {"name": "ana", "role": "researcher", "assignment": "List three facts about otters."},
        {"name": "bo", "role": "writer", "assignment": "Write a paragraph from the facts."},
        {"name": "cy", "role": "reviewer", "assignment": "Check the paragraph."}
    ]}"#;
    let script = ScriptedModel::new()
        .text(roster)
        .text("Otters hold hands; they use tools; they have dense fur.")
        .text("Otters hold hands while they sleep, crack shells with stones, and stay warm in dense fur.")
        .text("Right on all three facts. Final: the paragraph as written.");
    let mut lines = Vec::new();
    let task = "A paragraph about otters";
    let report = run_team(Arc::new(script.clone()), task, |l| {
        lines.push(l.to_string())
    })
    .await
    .unwrap();
    script.assert_consumed();
    assert_eq!(report.roster.members.len(), 3);
    assert_eq!(report.answers.len(), 2);
    assert_eq!(
        report.review,
        "Right on all three facts. Final: the paragraph as written."
    );

    let requests = script.requests();
    assert_eq!(requests.len(), 4);
    let [ana, bo, cy] = [0, 1, 2].map(|i| report.roster.members[i].clone());
    let letter = |m: &MemberPlan, i: usize| Letter {
        from: m.name.clone(),
        text: report.answers[i].1.clone(),
    };
    // ana works first with an empty inbox; bo gets ana's broadcast with its task in one
    // user turn; cy gets both answers, then the review task.
    assert_eq!(requests[1].history, [Message::user(work_task(task, &ana))]);
    assert_eq!(
        requests[2].history,
        [Message::user(delivery(
            &[letter(&ana, 0)],
            &work_task(task, &bo)
        ))]
    );
    assert_eq!(
        requests[3].history,
        [Message::user(delivery(
            &[letter(&ana, 0), letter(&bo, 1)],
            &review_task(task, &cy)
        ))]
    );
    // Each member has its own prefix.
    assert_ne!(requests[1].fingerprint, requests[2].fingerprint);
    // Disbanded: every member's counters, then the lead's.
    let names: Vec<_> = report
        .stats
        .iter()
        .map(|(n, s)| (n.as_str(), s.steps))
        .collect();
    assert_eq!(names, [("ana", 1), ("bo", 1), ("cy", 1), ("lead", 1)]);
    assert_eq!(
        lines[0],
        "hired ana (researcher): List three facts about otters."
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("ana: Otters hold hands;") && l.ends_with("(sent to 2)"))
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("cy reviews: Right on all three facts."))
    );
}

#[tokio::test]
async fn a_roster_of_one_is_sent_back_with_the_schema() {
    let script = ScriptedModel::new()
        .text(r#"{"members": [{"name": "solo", "role": "r", "assignment": "all"}]}"#)
        .text(r#"{"members": [{"name": "a", "role": "r", "assignment": "x"}, {"name": "b", "role": "rev", "assignment": "y"}]}"#)
        .text("x done")
        .text("y: fine");
    let report = run_team(Arc::new(script.clone()), "t", |_| {})
        .await
        .unwrap();
    assert_eq!(report.roster.members.len(), 2);
    script.assert_consumed();
}
