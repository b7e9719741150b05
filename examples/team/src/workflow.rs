//! A research-then-write-then-review workflow ([`halo_core::workflow`]): two researchers
//! at once (history and biology; the fan-out), a writer who reads both (the fan-in), a
//! reviewer whose typed verdict decides whether the writer revises (the condition). Each
//! step's output is saved to the session store as it finishes, so a run killed between two
//! steps goes on at the next one.

use std::sync::Arc;

use halo_core::testing::ScriptedModel;
use halo_core::workflow::{Branch, Step, Workflow, parallel};
use halo_core::{HaloAgent, NamedAgent, SharedModel};
use serde::{Deserialize, Serialize};

/// What a researcher found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, halo_core::JsonSchema)]
#[schemars(crate = "halo_core::schemars")]
pub struct Notes {
    /// Three to five findings, one sentence each.
    pub points: Vec<String>,
}

/// The reviewer's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, halo_core::JsonSchema)]
#[schemars(crate = "halo_core::schemars")]
pub struct Review {
    /// Whether the article can be published as it is.
    pub approved: bool,
    /// What to change, when not approved; what is good, when approved.
    pub notes: String,
}

/// The workflow's agents.
#[derive(Debug, Clone)]
pub struct Agents {
    /// Researches the topic's history.
    pub historian: Arc<NamedAgent>,
    /// Researches the topic's biology.
    pub biologist: Arc<NamedAgent>,
    /// Writes the article.
    pub writer: Arc<NamedAgent>,
    /// Revises it: the writer again (the same prompt, so the same prefix), as an agent of
    /// its own, so that each step's scripted answers are its own.
    pub reviser: Arc<NamedAgent>,
    /// Reviews it.
    pub reviewer: Arc<NamedAgent>,
}

fn agent(model: SharedModel, name: &str, system: &str) -> Arc<NamedAgent> {
    Arc::new(
        HaloAgent::builder_shared(model)
            .name(name)
            .system(system)
            .build()
            .as_tool(name, system),
    )
}

/// The prompts of the agents.
const HISTORIAN: &str = "You research the history of a topic: what people did with it and \
when. Answer with your findings.";
const BIOLOGIST: &str = "You research the biology of a topic: how it lives and works. Answer \
with your findings.";
const WRITER: &str = "You write short, clear articles for a general audience from research \
notes, and revise them from a reviewer's notes.";
const REVIEWER: &str = "You review short articles for accuracy and clarity, and say whether \
they can be published.";

impl Agents {
    /// Every agent on `model` (a hosted one), each with its own prompt.
    pub fn on(model: &SharedModel) -> Self {
        Agents {
            historian: agent(model.clone(), "historian", HISTORIAN),
            biologist: agent(model.clone(), "biologist", BIOLOGIST),
            writer: agent(model.clone(), "writer", WRITER),
            reviser: agent(model.clone(), "writer", WRITER),
            reviewer: agent(model.clone(), "reviewer", REVIEWER),
        }
    }

    /// Every agent on a scripted model of its own, with the answers of an article on
    /// otters whose first draft the reviewer sends back.
    pub fn scripted() -> Self {
        let script = |answers: &[&str]| -> SharedModel {
            Arc::new(
                answers
                    .iter()
                    .fold(ScriptedModel::new(), |model, answer| model.text(*answer)),
            )
        };
        Agents {
            historian: agent(
                script(&[
                    r#"{"points": ["Otters were hunted for their fur until 1911.", "Sea otters returned to California from a few dozen animals."]}"#,
                ]),
                "historian",
                HISTORIAN,
            ),
            biologist: agent(
                script(&[
                    r#"{"points": ["Sea otters hold hands while they sleep.", "They crack shells with stones."]}"#,
                ]),
                "biologist",
                BIOLOGIST,
            ),
            writer: agent(
                script(&["Otters hold hands and use stones."]),
                "writer",
                WRITER,
            ),
            reviser: agent(
                script(&[
                    "Sea otters, hunted for their fur until 1911, came back from a few dozen \
                     animals. They hold hands while they sleep and crack shells with stones.",
                ]),
                "writer",
                WRITER,
            ),
            reviewer: agent(
                script(&[
                    r#"{"approved": false, "notes": "Add the history: the fur trade and the return."}"#,
                ]),
                "reviewer",
                REVIEWER,
            ),
        }
    }
}

/// The workflow over `agents`: its input is the topic (a string).
pub fn article(agents: &Agents) -> Workflow {
    let notes = |s: &halo_core::workflow::WorkflowState, step: &str| {
        Ok::<_, halo_core::workflow::WorkflowError>(s.output::<Notes>(step)?.points.join("\n- "))
    };
    Workflow::new("article")
        .then(parallel([
            Step::object::<Notes>("history", agents.historian.clone(), |s| {
                Ok(format!(
                    "Research the history of {}: 2 to 5 findings.",
                    s.input::<String>()?
                ))
            }),
            Step::object::<Notes>("biology", agents.biologist.clone(), |s| {
                Ok(format!(
                    "Research the biology of {}: 2 to 5 findings.",
                    s.input::<String>()?
                ))
            }),
        ]))
        .then(Step::text("write", agents.writer.clone(), move |s| {
            Ok(format!(
                "Write a paragraph about {} from these notes.\n\nHistory:\n- {}\n\nBiology:\n- {}",
                s.input::<String>()?,
                notes(s, "history")?,
                notes(s, "biology")?
            ))
        }))
        .then(Step::object::<Review>(
            "review",
            agents.reviewer.clone(),
            |s| Ok(format!("Review this article:\n\n{}", s.text("write")?)),
        ))
        .then(
            Branch::when("review", |r: &Review| !r.approved).then(Step::text(
                "revise",
                agents.reviser.clone(),
                |s| {
                    Ok(format!(
                        "Revise the article from the reviewer's notes.\n\nArticle:\n{}\n\nNotes: {}",
                        s.text("write")?,
                        s.output::<Review>("review")?.notes
                    ))
                },
            )),
        )
}

/// The article a finished run ends with: the revision, or the approved first draft.
pub fn final_article(state: &halo_core::workflow::WorkflowState) -> Option<String> {
    state.text("revise").or_else(|_| state.text("write")).ok()
}
