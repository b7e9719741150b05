//! [`WorkflowState`]: a workflow's input and the outputs of its finished steps, the whole of
//! what it needs to go on; and [`WorkflowRecord`], how it is journaled.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::WorkflowError;
use crate::session::JournalEvent;

/// A workflow's state: its name, its input, and each finished step's output by step name.
/// Serializes with serde; [`Workflow::next`](super::Workflow::next) decides everything from
/// it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkflowState {
    /// The workflow's name.
    pub workflow: String,
    /// The input it was started with.
    pub input: Value,
    /// The outputs of the finished steps (a text step's is a JSON string).
    #[serde(default)]
    pub outputs: BTreeMap<String, Value>,
}

/// A workflow's progress as journaled in a session ([`JournalEvent::Workflow`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
#[non_exhaustive]
pub enum WorkflowRecord {
    /// The workflow started with this input.
    Started {
        /// The workflow's name.
        workflow: String,
        /// Its input.
        input: Value,
    },
    /// A step finished with this output.
    StepDone {
        /// The step.
        step: String,
        /// Its output.
        output: Value,
    },
}

impl WorkflowState {
    /// A new state of `workflow` on `input`, no step done.
    pub fn new(workflow: impl Into<String>, input: Value) -> Self {
        WorkflowState {
            workflow: workflow.into(),
            input,
            outputs: BTreeMap::new(),
        }
    }

    /// The state a session's journal holds, if it holds a workflow: its `Started` record,
    /// then every `StepDone` after it (a later output of a step replaces an earlier one).
    pub fn from_journal(events: &[JournalEvent]) -> Option<WorkflowState> {
        let mut state: Option<WorkflowState> = None;
        for event in events {
            let JournalEvent::Workflow { record, .. } = event else {
                continue;
            };
            match record {
                WorkflowRecord::Started { workflow, input } => {
                    state = Some(WorkflowState::new(workflow.clone(), input.clone()));
                }
                WorkflowRecord::StepDone { step, output } => {
                    if let Some(state) = &mut state {
                        state.outputs.insert(step.clone(), output.clone());
                    }
                }
            }
        }
        state
    }

    /// Records `step`'s output.
    pub fn record(&mut self, step: impl Into<String>, output: Value) {
        self.outputs.insert(step.into(), output);
    }

    /// Whether `step` is done.
    pub fn is_done(&self, step: &str) -> bool {
        self.outputs.contains_key(step)
    }

    /// The input, as a `T`.
    ///
    /// # Errors
    /// [`WorkflowError::Input`] when it is not one.
    pub fn input<T: DeserializeOwned>(&self) -> Result<T, WorkflowError> {
        T::deserialize(&self.input).map_err(|e| WorkflowError::Input(e.to_string()))
    }

    /// The output of the finished step `step`, as a `T`.
    ///
    /// # Errors
    /// [`WorkflowError::Output`] when the step is not done or its output is not a `T`.
    pub fn output<T: DeserializeOwned>(&self, step: &str) -> Result<T, WorkflowError> {
        let value = self
            .outputs
            .get(step)
            .ok_or_else(|| WorkflowError::Output {
                step: step.to_string(),
                message: "the step has not finished".to_string(),
            })?;
        T::deserialize(value).map_err(|e| WorkflowError::Output {
            step: step.to_string(),
            message: e.to_string(),
        })
    }

    /// The text output of the finished step `step`.
    ///
    /// # Errors
    /// As [`output`](Self::output).
    pub fn text(&self, step: &str) -> Result<String, WorkflowError> {
        self.output(step)
    }
}
