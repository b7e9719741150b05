//! Teams: named, persistent agents, each with a role, its
//! own history and an inbox.
//!
//! - [`Team::hire`] adds a member: an agent on the team's model whose system prompt is
//!   built from its name and role alone ([`member_prompt`], so the same member has the same
//!   prefix bytes in every session), with the team's tools.
//! - [`Team::send`] puts a message in one member's inbox; [`Team::broadcast`] in every
//!   other member's.
//! - [`Team::run`] gives a member its next task. Its unread messages are delivered first,
//!   in one user turn that carries them all and then the task ([`delivery`]); the member's
//!   history grows across tasks, so each task's request extends the last and reads it from
//!   the cache. The task shares the messages' turn rather than following it as a second
//!   user turn: two user turns in a row are not valid everywhere (Anthropic merges them,
//!   older Gemini models ask for alternating roles), and one turn reads the same to the
//!   model.
//! - [`Team::disband`] ends the team and hands back each member's counters.

use std::collections::BTreeMap;
use std::sync::Arc;

use halo_core::{AgentStats, DynTool, GenerateTextResult, HaloAgent, HaloError, SharedModel};

/// Why a team operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TeamError {
    /// No member has this name.
    #[error("no member named `{0}` in the team")]
    UnknownMember(String),
    /// A member of this name was hired already.
    #[error("a member named `{0}` is already in the team")]
    DuplicateMember(String),
    /// The name is empty or longer than 64 bytes, or the role is empty.
    #[error("invalid member `{name}`: {problem}")]
    InvalidMember {
        /// The name given.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The member's run failed.
    #[error("member `{member}`: {source}")]
    Run {
        /// The member.
        member: String,
        /// The run's error.
        #[source]
        source: HaloError,
    },
}

/// A message between members (or from the application, under any sender name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    /// Who sent it.
    pub from: String,
    /// The text.
    pub text: String,
}

/// One member: its name, role, agent and unread messages.
#[derive(Debug)]
pub struct Member {
    name: String,
    role: String,
    agent: HaloAgent,
    inbox: Vec<Letter>,
}

impl Member {
    /// The member's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The member's role.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The member's agent (its prefix, log and counters).
    pub fn agent(&self) -> &HaloAgent {
        &self.agent
    }

    /// The messages not yet delivered, oldest first.
    pub fn inbox(&self) -> &[Letter] {
        &self.inbox
    }
}

/// The system prompt of the member `name` with `role`: the same name and role, the same
/// bytes.
pub fn member_prompt(name: &str, role: &str) -> String {
    format!(
        "You are {name}, a member of a team of agents. Your role: {role}.\n\nYou get tasks one \
         at a time, each with the messages your team sent you since your last task. Do each \
         task with your tools, then answer with your result: complete and concise, written \
         for the rest of the team to read."
    )
}

/// The user turn that delivers `inbox` (oldest first) and then `task`; just the task when
/// the inbox is empty.
pub fn delivery(inbox: &[Letter], task: &str) -> String {
    if inbox.is_empty() {
        return task.to_string();
    }
    let mut turn = format!(
        "Messages from your team since your last task ({}):\n",
        inbox.len()
    );
    for letter in inbox {
        turn.push_str(&format!("\n[from {}]\n{}\n", letter.from, letter.text));
    }
    turn.push_str(&format!("\nYour task: {task}"));
    turn
}

/// A team of named agents on one model (see the [module docs](self)).
///
/// ```
/// use std::sync::Arc;
/// use halo_core::testing::ScriptedModel;
/// use halo_strategies::Team;
///
/// # futures::executor::block_on(async {
/// let model = ScriptedModel::new().text("Three risks: a, b, c.").text("Agreed; b first.");
/// let mut team = Team::new(Arc::new(model));
/// team.hire("ana", "analyst").unwrap();
/// team.hire("rev", "reviewer").unwrap();
/// let found = team.run("ana", "List the risks.").await.unwrap();
/// assert_eq!(team.broadcast("ana", &found.text), 1);
/// assert_eq!(team.member("rev").unwrap().inbox().len(), 1);
/// let review = team.run("rev", "Review the analysis.").await.unwrap();
/// assert_eq!(review.text, "Agreed; b first.");
/// assert!(team.member("rev").unwrap().inbox().is_empty());
/// let stats = team.disband();
/// assert_eq!(stats.len(), 2);
/// # });
/// ```
pub struct Team {
    model: SharedModel,
    tools: Vec<Arc<dyn DynTool>>,
    max_steps: Option<usize>,
    members: BTreeMap<String, Member>,
    /// Names in hire order.
    order: Vec<String>,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("model", &self.model.model_name())
            .field("members", &self.order)
            .finish_non_exhaustive()
    }
}

impl Team {
    /// An empty team on `model`.
    pub fn new(model: SharedModel) -> Self {
        Team {
            model,
            tools: Vec::new(),
            max_steps: None,
            members: BTreeMap::new(),
            order: Vec::new(),
        }
    }

    /// Gives every member hired from now on these tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Arc<dyn DynTool>>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Sets the members' step limit per task (default: halo-core's).
    pub fn max_steps(mut self, n: usize) -> Self {
        self.max_steps = Some(n);
        self
    }

    /// Hires `name` with `role`: an agent on the team's model and tools, its system prompt
    /// [`member_prompt`].
    ///
    /// # Errors
    /// [`TeamError::DuplicateMember`], [`TeamError::InvalidMember`] (an empty name or
    /// role, a name over 64 bytes), and a tool the agent refuses ([`TeamError::Run`] with
    /// [`HaloError::Prefix`]).
    pub fn hire(&mut self, name: &str, role: &str) -> Result<&Member, TeamError> {
        let (name, role) = (name.trim(), role.trim());
        self.check_new(name, role)?;
        let mut builder = HaloAgent::builder_shared(self.model.clone())
            .system(member_prompt(name, role))
            .tools(self.tools.iter().cloned())
            .map_err(|source| TeamError::Run {
                member: name.to_string(),
                source,
            })?;
        if let Some(n) = self.max_steps {
            builder = builder.max_steps(n);
        }
        Ok(self.add(name, role, builder.build()))
    }

    /// Hires `name` with `role` as `agent`, built by the caller (its own prompt and tools).
    ///
    /// # Errors
    /// [`TeamError::DuplicateMember`], [`TeamError::InvalidMember`].
    pub fn hire_agent(
        &mut self,
        name: &str,
        role: &str,
        agent: HaloAgent,
    ) -> Result<&Member, TeamError> {
        let (name, role) = (name.trim(), role.trim());
        self.check_new(name, role)?;
        Ok(self.add(name, role, agent))
    }

    fn check_new(&self, name: &str, role: &str) -> Result<(), TeamError> {
        let problem = if name.is_empty() {
            "the name is empty"
        } else if name.len() > 64 {
            "the name is longer than 64 bytes"
        } else if role.is_empty() {
            "the role is empty"
        } else if self.members.contains_key(name) {
            return Err(TeamError::DuplicateMember(name.to_string()));
        } else {
            return Ok(());
        };
        Err(TeamError::InvalidMember {
            name: name.to_string(),
            problem: problem.to_string(),
        })
    }

    fn add(&mut self, name: &str, role: &str, agent: HaloAgent) -> &Member {
        self.order.push(name.to_string());
        self.members.entry(name.to_string()).or_insert(Member {
            name: name.to_string(),
            role: role.to_string(),
            agent,
            inbox: Vec::new(),
        })
    }

    /// The member `name`.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.get(name)
    }

    /// The members in hire order.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.order.iter().filter_map(|n| self.members.get(n))
    }

    /// Puts `text` from `from` (a member's name, or any sender the application names) in
    /// `to`'s inbox.
    ///
    /// # Errors
    /// [`TeamError::UnknownMember`] when `to` is not in the team.
    pub fn send(&mut self, from: &str, to: &str, text: &str) -> Result<(), TeamError> {
        let member = self
            .members
            .get_mut(to)
            .ok_or_else(|| TeamError::UnknownMember(to.to_string()))?;
        member.inbox.push(Letter {
            from: from.to_string(),
            text: text.to_string(),
        });
        Ok(())
    }

    /// Puts `text` from `from` in the inbox of every member but `from`; returns how many.
    pub fn broadcast(&mut self, from: &str, text: &str) -> usize {
        let mut n = 0;
        for member in self.members.values_mut().filter(|m| m.name != from) {
            member.inbox.push(Letter {
                from: from.to_string(),
                text: text.to_string(),
            });
            n += 1;
        }
        n
    }

    /// Gives `name` its next task: its unread messages and the task in one user turn
    /// ([`delivery`]), then its tool loop ([`HaloAgent::generate_text`]). The messages
    /// count as delivered once the turn is sent, whatever the run does.
    ///
    /// # Errors
    /// [`TeamError::UnknownMember`]; [`TeamError::Run`] with the run's error.
    pub async fn run(&mut self, name: &str, task: &str) -> Result<GenerateTextResult, TeamError> {
        let member = self
            .members
            .get_mut(name)
            .ok_or_else(|| TeamError::UnknownMember(name.to_string()))?;
        let inbox = std::mem::take(&mut member.inbox);
        member
            .agent
            .generate_text(delivery(&inbox, task))
            .await
            .map_err(|source| TeamError::Run {
                member: name.to_string(),
                source,
            })
    }

    /// The counters of every member's runs, summed ([`AgentStats::add_delegated`], so
    /// `delegated_steps` counts every member's model calls too).
    pub fn stats(&self) -> AgentStats {
        let mut total = AgentStats::default();
        for member in self.members.values() {
            total.add_delegated(&member.agent.stats());
        }
        total
    }

    /// Ends the team: every member leaves (unread messages are dropped); returns each
    /// member's name and counters, in hire order.
    pub fn disband(&mut self) -> Vec<(String, AgentStats)> {
        let order = std::mem::take(&mut self.order);
        let out = order
            .into_iter()
            .filter_map(|n| self.members.remove(&n).map(|m| (n, m.agent.stats())))
            .collect();
        self.members.clear();
        out
    }
}
