//! The team example's logic, shared by the binaries (a hosted model, or the scripted one)
//! and the tests: [`run_team`], and the research-write-review [`workflow`].
//!
//! 1. A lead agent proposes the members for the task as typed output ([`Roster`]: 2 to 4
//!    members, each a name, a role and an assignment; the last one reviews).
//! 2. Each member becomes a named agent ([`HaloAgent::as_tool`]): its own prompt
//!    ([`member_prompt`]), the team's tools, one conversation across calls
//!    ([`AgentContext::Continue`]).
//! 3. The lead, with the members as its tools, carries the task out: it calls each member
//!    in turn with its assignment and what the earlier ones wrote, the last one reviews,
//!    and the lead gives the final result. Its run is streamed, so each member's steps,
//!    tool calls and text come out tagged with the member's name as they happen.
//! 4. Each member's counters and the lead's are reported.

pub mod hosted;
pub mod workflow;

use std::sync::Arc;

use futures::StreamExt as _;
use halo_core::named::AgentContext;
use halo_core::{AgentEvent, AgentStats, DynTool, HaloAgent, NamedAgent, SharedModel};
use halo_strategies::team::member_prompt;
use serde::Deserialize;

/// The lead's system prompt.
pub const LEAD: &str = "You are the lead of a small team of AI agents. You split a task \
between members who work one after another, each reading what the earlier ones wrote; the \
last member reviews their work and you give the final result.";

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
    /// Each member's answers, in the order the lead called them: (tool name, answer).
    pub answers: Vec<(String, String)>,
    /// The lead's final result.
    pub result: String,
    /// Each member's counters, in roster order, then the roster proposal's as `"roster"`,
    /// then the lead's as `"lead"` (which include its members' runs).
    pub stats: Vec<(String, AgentStats)>,
}

/// A member's tool name: its name in lower case, every character a tool name cannot have
/// replaced by `_`, at most 64 bytes.
pub fn tool_name(member: &str) -> String {
    let name: String = member
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        "member".to_string()
    } else {
        name
    }
}

/// The lead's turn that sets the team to work.
pub fn kickoff(task: &str, roster: &Roster) -> String {
    let mut turn = format!(
        "The team's task: {task}\n\nCall your members one at a time, in this order, each with \
         its assignment and everything the earlier members answered (they see nothing else); \
         the last one reviews. Then give the final result.\n"
    );
    for m in &roster.members {
        turn.push_str(&format!(
            "\n- `{}` ({}): {}",
            tool_name(&m.name),
            m.role.trim(),
            m.assignment.trim()
        ));
    }
    turn
}

/// The member `m` as a named agent on `model` with `tools`.
///
/// # Errors
/// A tool the agent refuses.
pub fn member(
    model: &SharedModel,
    tools: &[Arc<dyn DynTool>],
    m: &MemberPlan,
) -> anyhow::Result<NamedAgent> {
    let name = tool_name(&m.name);
    let agent = HaloAgent::builder_shared(model.clone())
        .name(&name)
        .system(member_prompt(m.name.trim(), m.role.trim()))
        .tools(tools.iter().cloned())?
        .build();
    Ok(agent
        .as_tool(
            &name,
            format!(
                "{} ({}): {}",
                m.name.trim(),
                m.role.trim(),
                m.assignment.trim()
            ),
        )
        .context(AgentContext::Continue))
}

/// A line about an event of a member's, for people: its tool calls and its text, tagged
/// with the member's name; `None` for the rest.
pub fn describe(event: &AgentEvent) -> Option<String> {
    let AgentEvent::Inner(inner) = event else {
        return None;
    };
    let origin = inner.innermost();
    match &origin.event {
        AgentEvent::ToolCall(call) => Some(format!(
            "[{}] calls {} {}",
            origin.agent, call.name, call.raw_arguments
        )),
        AgentEvent::StepFinish(step) if !step.message.text.trim().is_empty() => {
            Some(format!("[{}] {}", origin.agent, step.message.text.trim()))
        }
        _ => None,
    }
}

/// Runs the team on `task` with `model` and the members' `tools`; `say` gets each progress
/// line.
///
/// # Errors
/// The lead's typed output failing (after its retries), the lead's run failing, a roster
/// with two members of one tool name.
pub async fn run_team(
    model: SharedModel,
    tools: Vec<Arc<dyn DynTool>>,
    task: &str,
    mut say: impl FnMut(&str),
) -> anyhow::Result<TeamReport> {
    let mut planner = HaloAgent::builder_shared(model.clone())
        .system(LEAD)
        .build();
    let roster = planner
        .generate_object::<Roster>(format!(
            "Propose the members for this task: 2 to 4, in the order they work, the last \
             one the reviewer.\n\nTask: {task}"
        ))
        .await?
        .object;
    let mut lead = HaloAgent::builder_shared(model.clone())
        .name("lead")
        .system(LEAD);
    let mut members = Vec::new();
    for m in &roster.members {
        let named = Arc::new(member(&model, &tools, m)?);
        say(&format!("hired {} ({}): {}", m.name, m.role, m.assignment));
        lead = lead.tools([named.clone() as Arc<dyn DynTool>])?;
        members.push(named);
    }
    let mut lead = lead.build();
    let mut answers = Vec::new();
    let mut result = String::new();
    {
        let mut events = std::pin::pin!(lead.stream_text(kickoff(task, &roster)));
        while let Some(event) = events.next().await {
            let event = event?;
            if let Some(line) = describe(&event) {
                say(&line);
            }
            match event {
                AgentEvent::ToolResult(r) => answers.push((r.tool_name.into(), r.content.into())),
                AgentEvent::Finish(done) => result = done.text,
                _ => {}
            }
        }
    }
    say(&format!("lead: {}", result.trim()));
    let mut stats: Vec<(String, AgentStats)> = members
        .iter()
        .map(|m| (m.name().to_string(), m.stats()))
        .collect();
    stats.push(("roster".to_string(), planner.stats()));
    stats.push(("lead".to_string(), lead.stats()));
    for (name, s) in &stats {
        say(&format!("{name}: {s}"));
    }
    Ok(TeamReport {
        roster,
        answers,
        result,
        stats,
    })
}
