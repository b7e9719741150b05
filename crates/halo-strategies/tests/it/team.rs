//! Teams on the scripted model: the inbox delivered as one user turn, broadcast, persistent
//! histories, disband.

use std::sync::Arc;

use halo_core::testing::ScriptedModel;
use halo_core::{Message, StablePrefix};
use halo_strategies::team::{Letter, delivery, member_prompt};
use halo_strategies::{Team, TeamError};

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    futures::executor::block_on(f)
}

#[test]
fn unread_messages_are_delivered_as_one_user_turn_before_the_next_task() {
    let script = ScriptedModel::new()
        .text("first answer")
        .text("second answer");
    let mut team = Team::new(Arc::new(script.clone()));
    for (name, role) in [("ana", "analyst"), ("bo", "builder"), ("cy", "critic")] {
        team.hire(name, role).unwrap();
    }
    team.send("ana", "cy", "the parser is slow").unwrap();
    assert_eq!(team.broadcast("bo", "I rewrote the lexer"), 2);
    let inbox = team.member("cy").unwrap().inbox().to_vec();
    assert_eq!(
        inbox,
        [
            Letter {
                from: "ana".into(),
                text: "the parser is slow".into()
            },
            Letter {
                from: "bo".into(),
                text: "I rewrote the lexer".into()
            },
        ]
    );
    assert_eq!(
        team.member("ana").unwrap().inbox().len(),
        1,
        "bo's broadcast"
    );
    assert!(
        team.member("bo").unwrap().inbox().is_empty(),
        "not to the sender"
    );

    let out = block(team.run("cy", "Judge the work.")).unwrap();
    assert_eq!(out.text, "first answer");
    let requests = script.requests();
    // One user turn: both messages, in order, then the task.
    assert_eq!(
        requests[0].history,
        [Message::user(delivery(&inbox, "Judge the work."))]
    );
    let turn = requests[0].history[0].text();
    let (a, b, t) = (
        turn.find("the parser is slow").unwrap(),
        turn.find("I rewrote the lexer").unwrap(),
        turn.find("Your task: Judge the work.").unwrap(),
    );
    assert!(a < b && b < t, "{turn}");
    assert!(turn.contains("[from ana]") && turn.contains("[from bo]"));
    assert_eq!(
        requests[0].fingerprint,
        StablePrefix::new(member_prompt("cy", "critic")).fingerprint()
    );
    assert!(team.member("cy").unwrap().inbox().is_empty());

    // The next task: no messages, the task alone, and the history kept.
    block(team.run("cy", "Now summarize.")).unwrap();
    let requests = script.requests();
    assert_eq!(requests[1].history.len(), 3);
    assert_eq!(
        requests[1].history[..2],
        requests[0].history[..1]
            .iter()
            .cloned()
            .chain([requests[1].history[1].clone()])
            .collect::<Vec<_>>()[..]
    );
    assert_eq!(requests[1].history[2], Message::user("Now summarize."));
    assert_eq!(requests[0].prefix_bytes, requests[1].prefix_bytes);
}

#[test]
fn disband_hands_back_each_members_counters_in_hire_order_and_empties_the_team() {
    let script = ScriptedModel::new().text("a").text("b");
    let mut team = Team::new(Arc::new(script));
    team.hire("zed", "writer").unwrap();
    team.hire("amy", "reviewer").unwrap();
    block(team.run("zed", "write")).unwrap();
    block(team.run("amy", "review")).unwrap();
    assert_eq!(team.stats().steps, 2);
    let names: Vec<_> = team.members().map(|m| m.name().to_string()).collect();
    assert_eq!(names, ["zed", "amy"]);
    let out = team.disband();
    let summary: Vec<_> = out.iter().map(|(n, s)| (n.as_str(), s.steps)).collect();
    assert_eq!(summary, [("zed", 1), ("amy", 1)]);
    assert_eq!(team.members().count(), 0);
    assert!(
        matches!(block(team.run("zed", "again")), Err(TeamError::UnknownMember(n)) if n == "zed")
    );
    assert_eq!(team.broadcast("x", "anyone?"), 0);
}

#[test]
fn bad_names_and_unknown_members_are_typed_errors() {
    let mut team = Team::new(Arc::new(ScriptedModel::new()));
    team.hire("ana", "analyst").unwrap();
    assert!(matches!(team.hire("ana", "other"), Err(TeamError::DuplicateMember(n)) if n == "ana"));
    assert!(matches!(
        team.hire(" ", "r"),
        Err(TeamError::InvalidMember { .. })
    ));
    assert!(matches!(
        team.hire("bo", ""),
        Err(TeamError::InvalidMember { .. })
    ));
    let err = team.send("ana", "nobody", "hi").unwrap_err();
    assert_eq!(err.to_string(), "no member named `nobody` in the team");
}
