//! The team example's logic, shared by the binary (a hosted model) and its tests (a
//! scripted model): [`run_team`].
//!
//! 1. A lead agent proposes the members for the task as typed output ([`Roster`]: 2 to 4
//!    members, each a name, a role and an assignment; the last one reviews).
//! 2. Each member but the last works on its assignment, in turn; its answer is broadcast
//!    to the others, so the next member's task arrives with every earlier answer in one
//!    user turn (halo-strategies' [`Team`]).
//! 3. The last member reviews the work it received and gives the final result.
//! 4. The team disbands; each member's counters are reported.

use halo_core::{AgentStats, HaloAgent, SharedModel};
use halo_strategies::Team;
use serde::Deserialize;

/// The lead's system prompt.
pub const LEAD: &str = "You are the lead of a small team of AI agents. You split a task \
between members who work one after another, each reading what the earlier ones wrote; the \
last member reviews their work and gives the final result.";

/// One proposed member.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, halo_core::JsonSchema)]
#[schemars(crate = "halo_core::schemars")]
pub struct MemberPlan {
    /// A short first name, unique in the team.
    pub name: String,
    /// The member's role in a few words, for example "researcher".
    pub role: String,
    /// What this member does for the task, in one or two sentences.
    pub assignment: String,
}

/// The members the lead proposes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, halo_core::JsonSchema)]
#[schemars(crate = "halo_core::schemars")]
pub struct Roster {
    /// 2 to 4 members in the order they work; the last one is the reviewer.
    #[schemars(length(min = 2, max = 4))]
    pub members: Vec<MemberPlan>,
}

/// What the team did.
#[derive(Debug, Clone)]
pub struct TeamReport {
    /// The members the lead proposed.
    pub roster: Roster,
    /// Each working member's answer, in order (the reviewer's is `review`).
    pub answers: Vec<(String, String)>,
    /// The reviewer's final result.
    pub review: String,
    /// Each member's counters at disband, in hire order, then the lead's as `"lead"`.
    pub stats: Vec<(String, AgentStats)>,
}

/// The task each working member gets.
pub fn work_task(task: &str, member: &MemberPlan) -> String {
    format!(
        "The team's task: {task}\nYour part: {}",
        member.assignment.trim()
    )
}

/// The reviewer's task.
pub fn review_task(task: &str, member: &MemberPlan) -> String {
    format!(
        "The team's task: {task}\nYour part: {}\nReview the work the team sent you: say what \
         is right and what is wrong, then give the final result.",
        member.assignment.trim()
    )
}

/// Runs the team on `task` with `model`; `say` gets each progress line.
///
/// # Errors
/// The lead's typed output failing (after its retries), a member's run failing, a roster
/// with a duplicate or empty name.
pub async fn run_team(
    model: SharedModel,
    task: &str,
    mut say: impl FnMut(&str),
) -> anyhow::Result<TeamReport> {
    let mut lead = HaloAgent::builder_shared(model.clone())
        .system(LEAD)
        .build();
    let roster = lead
        .generate_object::<Roster>(format!(
            "Propose the members for this task: 2 to 4, in the order they work, the last \
             one the reviewer.\n\nTask: {task}"
        ))
        .await?
        .object;
    let mut team = Team::new(model);
    for m in &roster.members {
        team.hire(&m.name, &m.role)?;
        say(&format!("hired {} ({}): {}", m.name, m.role, m.assignment));
    }
    let Some((reviewer, workers)) = roster.members.split_last() else {
        anyhow::bail!("the lead proposed no members");
    };
    let mut answers = Vec::new();
    for m in workers {
        let out = team.run(&m.name, &work_task(task, m)).await?;
        let n = team.broadcast(&m.name, &out.text);
        say(&format!("{}: {} (sent to {n})", m.name, out.text.trim()));
        answers.push((m.name.clone(), out.text));
    }
    let review = team
        .run(&reviewer.name, &review_task(task, reviewer))
        .await?;
    say(&format!(
        "{} reviews: {}",
        reviewer.name,
        review.text.trim()
    ));
    let mut stats = team.disband();
    stats.push(("lead".to_string(), lead.stats()));
    for (name, s) in &stats {
        say(&format!("{name}: {s}"));
    }
    Ok(TeamReport {
        roster,
        answers,
        review: review.text,
        stats,
    })
}
