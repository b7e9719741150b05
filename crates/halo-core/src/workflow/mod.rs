//! Workflows: typed agent steps put together in Rust — in sequence, fanned out and in
//! again, or chosen by a condition on an earlier step's typed output — whose state is a
//! value that is saved to a session store after every step and continued after a crash
//! without redoing a finished step (pydantic-ai's graphs, persisted).
//!
//! # Building one
//! A [`Step`] runs a [`NamedAgent`] on a prompt built from the [`WorkflowState`] so far (the
//! workflow's input, the outputs of finished steps) and records its output: the final text
//! ([`Step::text`]) or a typed answer ([`Step::object`], a JSON value checked against `T`'s
//! schema). [`Workflow::then`] adds nodes in sequence; [`parallel`] fans out (its branches
//! run at the same time, and the next node — the fan-in — reads all their outputs);
//! [`Branch::when`] picks a path by a predicate on a finished step's typed output.
//!
//! ```
//! use std::sync::Arc;
//! use halo_core::{HaloAgent, MemoryStore, testing::ScriptedModel};
//! use halo_core::workflow::{Branch, Step, Workflow, parallel};
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, schemars::JsonSchema)]
//! struct Review { approved: bool }
//!
//! let agent = |name: &str, model: ScriptedModel| {
//!     Arc::new(HaloAgent::builder(model).name(name).build().as_tool(name, "A step's agent."))
//! };
//! let history = agent("history", ScriptedModel::new().text("Otters were hunted for fur."));
//! let biology = agent("biology", ScriptedModel::new().text("Otters hold hands."));
//! let writer = agent("writer", ScriptedModel::new().text("A draft.").text("A better draft."));
//! let reviewer = agent("reviewer", ScriptedModel::new().text(r#"{"approved": false}"#));
//! let workflow = Workflow::new("article")
//!     .then(parallel([
//!         Step::text("history", history, |s| Ok(format!("History of {}", s.input::<String>()?))),
//!         Step::text("biology", biology, |s| Ok(format!("Biology of {}", s.input::<String>()?))),
//!     ]))
//!     .then(Step::text("write", writer.clone(), |s| {
//!         Ok(format!("Write from: {} {}", s.text("history")?, s.text("biology")?))
//!     }))
//!     .then(Step::object::<Review>("review", reviewer, |s| Ok(format!("Review: {}", s.text("write")?))))
//!     .then(Branch::when("review", |r: &Review| !r.approved).then(
//!         Step::text("revise", writer, |s| Ok(format!("Revise: {}", s.text("write")?))),
//!     ));
//!
//! # futures::executor::block_on(async {
//! let store = MemoryStore::new();
//! let run = workflow.run("otters", &store, "article-1").await.unwrap();
//! assert_eq!(run.state.text("revise").unwrap(), "A better draft.");
//! assert_eq!(run.ran, ["history", "biology", "write", "review", "revise"]);
//! // Run again on the same session: everything is done, nothing runs.
//! let again = workflow.run("otters", &store, "article-1").await.unwrap();
//! assert!(again.ran.is_empty());
//! # });
//! ```
//!
//! # Saved and continued
//! [`Workflow::run`] journals into a session of a [`SessionStore`]: a
//! [`WorkflowRecord::Started`] with the input, then a [`WorkflowRecord::StepDone`] with each
//! step's output as soon as the step finishes (a [`JournalEvent::Workflow`]). Run again on a
//! session that holds a workflow, it rebuilds the [`WorkflowState`] from the journal and
//! goes on at the step it was in: finished steps are never run again; a step that was
//! running when the process died runs again from its start. Branch decisions are made from
//! the outputs, so a continued run takes the same path.
//!
//! # The engine decides; a driver runs steps
//! As for agent runs ([`crate::driver`]), the decisions are pure: [`Workflow::next`] reads
//! a [`WorkflowState`] and names the steps that can run now ([`WorkflowEffect::Run`], each
//! a [`StepCall`] with its prompt), or says the workflow is done; a driver performs each
//! call ([`Workflow::run_step`]) and records its output ([`WorkflowState::record`]).
//! [`Workflow::run`] is the in-process driver. A durable driver (one that journals each
//! step of a handler and replays it after a crash, such as Restate) runs each `StepCall`
//! inside one journaled step and records the journaled output on replay instead of running
//! the agent again; the state itself (serde) can be kept in its key-value state.
//!
//! [`NamedAgent`]: crate::named::NamedAgent
//! [`SessionStore`]: crate::session::SessionStore
//! [`JournalEvent::Workflow`]: crate::session::JournalEvent::Workflow

mod run;
mod state;

use std::collections::BTreeSet;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{Clock, SystemClock};
use crate::error::HaloError;
use crate::named::NamedAgent;
use crate::output::Output;
use crate::session::SessionError;

pub use run::WorkflowRun;
pub use state::{WorkflowRecord, WorkflowState};

/// Why a workflow failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// A step's agent failed; the steps finished before it are saved, and running the
    /// workflow again goes on at this step.
    #[error("workflow step `{step}` failed: {source}")]
    Step {
        /// The step.
        step: String,
        /// The agent's error.
        #[source]
        source: HaloError,
    },
    /// A prompt or a condition needs an output that is missing or of another type.
    #[error("workflow step `{step}`'s output: {message}")]
    Output {
        /// The step whose output was read.
        step: String,
        /// What is wrong.
        message: String,
    },
    /// The workflow's input is not of the type a prompt reads it as.
    #[error("the workflow's input: {0}")]
    Input(String),
    /// The workflow is not well formed: two steps of one name, no steps.
    #[error("invalid workflow: {0}")]
    Invalid(String),
    /// The session holds another workflow, or this one with another input.
    #[error("session `{session}` holds {found}; run it on another session")]
    OtherRun {
        /// The session.
        session: String,
        /// What it holds.
        found: String,
    },
    /// The session store failed.
    #[error(transparent)]
    Session(#[from] SessionError),
}

type Prompt = dyn Fn(&WorkflowState) -> Result<String, WorkflowError> + Send + Sync;
type Condition = dyn Fn(&WorkflowState) -> Result<bool, WorkflowError> + Send + Sync;
type OutputSpec = dyn Fn() -> Output<Value> + Send + Sync;

/// One agent step of a workflow: a named agent run on a prompt built from the state, its
/// output recorded under the step's name.
#[derive(Clone)]
pub struct Step {
    name: String,
    agent: Arc<NamedAgent>,
    prompt: Arc<Prompt>,
    /// The typed output's spec; `None`: the final text, as a JSON string.
    output: Option<Arc<OutputSpec>>,
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Step")
            .field("name", &self.name)
            .field("agent", &self.agent.name())
            .field("typed", &self.output.is_some())
            .finish()
    }
}

impl Step {
    /// A step whose output is `agent`'s final text (a JSON string: read it with
    /// [`WorkflowState::text`]).
    pub fn text(
        name: impl Into<String>,
        agent: Arc<NamedAgent>,
        prompt: impl Fn(&WorkflowState) -> Result<String, WorkflowError> + Send + Sync + 'static,
    ) -> Self {
        Step {
            name: name.into(),
            agent,
            prompt: Arc::new(prompt),
            output: None,
        }
    }

    /// A step whose output is a `T` ([`HaloAgent::generate_text_with_output`](crate::HaloAgent::generate_text_with_output):
    /// the agent keeps its tools, its answer is checked against `T`'s schema), kept as a
    /// JSON value (read it with [`WorkflowState::output`]).
    pub fn object<T: JsonSchema + DeserializeOwned>(
        name: impl Into<String>,
        agent: Arc<NamedAgent>,
        prompt: impl Fn(&WorkflowState) -> Result<String, WorkflowError> + Send + Sync + 'static,
    ) -> Self {
        Step {
            name: name.into(),
            agent,
            prompt: Arc::new(prompt),
            output: Some(Arc::new(|| Output::<T>::new().erase())),
        }
    }

    /// The step's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A path chosen by a condition on the state: [`then`](Self::then) when it holds,
/// [`otherwise`](Self::otherwise) when not.
#[derive(Clone)]
pub struct Branch {
    condition: Arc<Condition>,
    then: Vec<Node>,
    otherwise: Vec<Node>,
}

impl std::fmt::Debug for Branch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Branch")
            .field("then", &self.then)
            .field("otherwise", &self.otherwise)
            .finish_non_exhaustive()
    }
}

impl Branch {
    /// A branch on the typed output of the finished step `step`: `predicate` decides.
    pub fn when<T: DeserializeOwned>(
        step: impl Into<String>,
        predicate: impl Fn(&T) -> bool + Send + Sync + 'static,
    ) -> Self {
        let step = step.into();
        Branch::on(move |state| Ok(predicate(&state.output::<T>(&step)?)))
    }

    /// A branch on anything in the state.
    pub fn on(
        condition: impl Fn(&WorkflowState) -> Result<bool, WorkflowError> + Send + Sync + 'static,
    ) -> Self {
        Branch {
            condition: Arc::new(condition),
            then: Vec::new(),
            otherwise: Vec::new(),
        }
    }

    /// Adds a node to the path taken when the condition holds.
    pub fn then(mut self, node: impl Into<Node>) -> Self {
        self.then.push(node.into());
        self
    }

    /// Adds a node to the path taken when it does not.
    pub fn otherwise(mut self, node: impl Into<Node>) -> Self {
        self.otherwise.push(node.into());
        self
    }
}

/// A node of a workflow.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Node {
    /// One agent step.
    Step(Step),
    /// Nodes one after the other.
    Sequence(Vec<Node>),
    /// Nodes at the same time (fan-out); what follows reads all their outputs (fan-in).
    Parallel(Vec<Node>),
    /// One of two paths.
    Branch(Branch),
}

impl From<Step> for Node {
    fn from(step: Step) -> Self {
        Node::Step(step)
    }
}

impl From<Branch> for Node {
    fn from(branch: Branch) -> Self {
        Node::Branch(branch)
    }
}

/// Nodes that run at the same time (fan-out); the node after them reads their outputs.
pub fn parallel(nodes: impl IntoIterator<Item = impl Into<Node>>) -> Node {
    Node::Parallel(nodes.into_iter().map(Into::into).collect())
}

/// Nodes one after the other (a branch of [`parallel`] that has several steps).
pub fn sequence(nodes: impl IntoIterator<Item = impl Into<Node>>) -> Node {
    Node::Sequence(nodes.into_iter().map(Into::into).collect())
}

/// One step to run now ([`WorkflowEffect::Run`]): serializable, so a durable driver can
/// journal it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCall {
    /// The step's name.
    pub step: String,
    /// The name of the tool (the named agent) that runs it.
    pub agent: String,
    /// The prompt, built from the state.
    pub prompt: String,
}

/// What a workflow needs next ([`Workflow::next`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
#[non_exhaustive]
pub enum WorkflowEffect {
    /// Run these steps (they may run at the same time) and record each output.
    Run {
        /// The steps, in the workflow's order.
        calls: Vec<StepCall>,
    },
    /// Every step on the workflow's path is done.
    Done,
}

/// A workflow of agent steps (see the [module docs](self)).
#[derive(Clone)]
pub struct Workflow {
    name: String,
    nodes: Vec<Node>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Workflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workflow")
            .field("name", &self.name)
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

impl Workflow {
    /// An empty workflow named `name` (the name is journaled: a session holds one
    /// workflow).
    pub fn new(name: impl Into<String>) -> Self {
        Workflow {
            name: name.into(),
            nodes: Vec::new(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Adds a node after the others.
    pub fn then(mut self, node: impl Into<Node>) -> Self {
        self.nodes.push(node.into());
        self
    }

    /// Sets the clock the journal's times come from (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The workflow's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every step's name, in the workflow's order (both paths of a branch).
    pub fn step_names(&self) -> Vec<&str> {
        let mut names = Vec::new();
        for node in &self.nodes {
            collect_names(node, &mut names);
        }
        names
    }

    /// Checks the workflow: at least one step, no two steps of one name.
    ///
    /// # Errors
    /// [`WorkflowError::Invalid`].
    pub fn validate(&self) -> Result<(), WorkflowError> {
        let names = self.step_names();
        if names.is_empty() {
            return Err(WorkflowError::Invalid(format!(
                "`{}` has no steps",
                self.name
            )));
        }
        let mut seen = BTreeSet::new();
        for name in names {
            if !seen.insert(name) {
                return Err(WorkflowError::Invalid(format!(
                    "two steps are named `{name}`"
                )));
            }
        }
        Ok(())
    }

    /// What to do next, from `state` alone: the steps that can run now (the first
    /// unfinished node of the sequence: a step, every unfinished branch of a fan-out, the
    /// chosen path of a branch), or done. Pure: the same state gives the same effect.
    ///
    /// # Errors
    /// A prompt's or a condition's [`WorkflowError`] (an output missing or of another type).
    pub fn next(&self, state: &WorkflowState) -> Result<WorkflowEffect, WorkflowError> {
        let mut steps = Vec::new();
        ready(&self.nodes, state, &mut steps)?;
        if steps.is_empty() {
            return Ok(WorkflowEffect::Done);
        }
        let calls = steps
            .into_iter()
            .map(|step| {
                Ok(StepCall {
                    step: step.name.clone(),
                    agent: step.agent.name().to_string(),
                    prompt: (step.prompt)(state)?,
                })
            })
            .collect::<Result<_, WorkflowError>>()?;
        Ok(WorkflowEffect::Run { calls })
    }

    /// The step named `name`.
    pub fn step(&self, name: &str) -> Option<&Step> {
        self.nodes.iter().find_map(|n| find(n, name))
    }
}

fn collect_names<'a>(node: &'a Node, names: &mut Vec<&'a str>) {
    match node {
        Node::Step(step) => names.push(&step.name),
        Node::Sequence(nodes) | Node::Parallel(nodes) => {
            for n in nodes {
                collect_names(n, names);
            }
        }
        Node::Branch(branch) => {
            for n in branch.then.iter().chain(&branch.otherwise) {
                collect_names(n, names);
            }
        }
    }
}

fn find<'a>(node: &'a Node, name: &str) -> Option<&'a Step> {
    match node {
        Node::Step(step) => (step.name == name).then_some(step),
        Node::Sequence(nodes) | Node::Parallel(nodes) => nodes.iter().find_map(|n| find(n, name)),
        Node::Branch(branch) => branch
            .then
            .iter()
            .chain(&branch.otherwise)
            .find_map(|n| find(n, name)),
    }
}

/// Adds the steps of `nodes` (a sequence) that can run now to `out`; returns whether the
/// sequence is done.
fn ready<'a>(
    nodes: &'a [Node],
    state: &WorkflowState,
    out: &mut Vec<&'a Step>,
) -> Result<bool, WorkflowError> {
    for node in nodes {
        if !ready_node(node, state, out)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// As [`ready`], for one node.
fn ready_node<'a>(
    node: &'a Node,
    state: &WorkflowState,
    out: &mut Vec<&'a Step>,
) -> Result<bool, WorkflowError> {
    match node {
        Node::Step(step) => {
            if state.is_done(&step.name) {
                return Ok(true);
            }
            out.push(step);
            Ok(false)
        }
        Node::Sequence(nodes) => ready(nodes, state, out),
        Node::Parallel(nodes) => {
            let mut done = true;
            for n in nodes {
                done &= ready_node(n, state, out)?;
            }
            Ok(done)
        }
        Node::Branch(branch) => {
            let path = if (branch.condition)(state)? {
                &branch.then
            } else {
                &branch.otherwise
            };
            ready(path, state, out)
        }
    }
}
