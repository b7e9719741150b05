//! `plan {"task"}` and plan-then-execute.
//!
//! [`Plan`] is a tool that runs the agent ([`ToolAnnotations::runs_agent`]): called with a
//! task, it asks the model for 3 to 5 steps as
//! typed output ([`PlanSteps`], through `generate_text_with_output` in prompted mode: the
//! schema goes in the user message, so neither the prefix nor the request options change;
//! `generate_object` would send `tool_choice: none`, which Anthropic counts against the
//! cached messages),
//! then runs each step as a user turn, and returns every step's result as the tool result.
//! All of it runs on a **fork** of the calling agent ([`AgentHandle::fork`](halo_core::AgentHandle::fork)): the same
//! prefix bytes and history, so each of the plan's requests extends what the caller's last
//! request sent and reads it from the provider's cache; `plan` itself is taken out of the
//! callable tools for the duration through the request's active tools, never out of the
//! tool list (the recursion guard). The steps' turns stay in the fork; the caller's log
//! gets one tool result.
//!
//! [`PlanExt::plan_then_execute`] is the same loop on the agent itself, for callers who
//! want planning always: the plan and the steps enter the agent's own log.

use std::future::Future;

use halo_core::{
    AgentStats, DynTool, HaloAgent, HaloError, Output, OutputMode, ToolAnnotations, ToolContext,
    ToolError, ToolOutput, ToolSpec, async_trait,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The plan tool's name.
pub const PLAN_TOOL: &str = "plan";

/// The most bytes of one step's result the plan's tool result carries by default: 4,000.
pub const DEFAULT_STEP_RESULT_BYTES: usize = 4_000;

/// The most bytes of the plan's whole tool result by default: 16,000.
pub const DEFAULT_PLAN_RESULT_BYTES: usize = 16_000;

/// The typed output the model plans with: 3 to 5 steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, halo_core::JsonSchema)]
#[schemars(crate = "halo_core::schemars")]
pub struct PlanSteps {
    /// The steps in the order to do them: 3 to 5, each one short instruction.
    #[schemars(length(min = 3, max = 5))]
    pub steps: Vec<String>,
}

/// What became of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepOutcome {
    /// The step as the model planned it.
    pub step: String,
    /// The step's answer, or why the step failed (the error's message).
    pub result: Result<String, String>,
}

/// A plan carried out: the task, each step's outcome (a failed step ends the plan, so the
/// steps after it have none), the steps not run, and the counters of every model call the
/// plan made.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanReport {
    /// The task planned.
    pub task: String,
    /// The steps run, in order.
    pub outcomes: Vec<StepOutcome>,
    /// The steps planned but not run (after a failed one).
    pub not_run: Vec<String>,
    /// The counters of the plan's model calls, the planning call included.
    pub stats: AgentStats,
}

impl PlanReport {
    /// Whether every planned step ran and answered.
    pub fn completed(&self) -> bool {
        self.not_run.is_empty() && self.outcomes.iter().all(|o| o.result.is_ok())
    }

    /// The report as the tool result the model reads: the task, then each step and its
    /// result (each cut at `step_bytes`), the whole cut at `max_bytes`.
    pub fn render(&self, step_bytes: usize, max_bytes: usize) -> String {
        let mut out = format!("plan for: {}\n", self.task);
        let n = self.outcomes.len() + self.not_run.len();
        for (i, o) in self.outcomes.iter().enumerate() {
            let (state, text) = match &o.result {
                Ok(text) => ("done", text.as_str()),
                Err(e) => ("failed", e.as_str()),
            };
            out.push_str(&format!(
                "\n## step {} of {n} ({state}): {}\n{}\n",
                i + 1,
                o.step,
                bounded(text, step_bytes)
            ));
        }
        for (i, step) in self.not_run.iter().enumerate() {
            out.push_str(&format!(
                "\n## step {} of {n} (not run): {step}\n",
                self.outcomes.len() + i + 1
            ));
        }
        bounded(&out, max_bytes)
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with a note of what was cut.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let note = |cut: usize| format!("\n[… {cut} more bytes cut]");
    let mut end = max.saturating_sub(note(text.len()).len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{}", &text[..end], note(text.len() - end))
}

/// The user turn that asks for the plan.
fn planning_prompt(task: &str) -> String {
    format!(
        "Plan this task before doing it: break it into 3 to 5 steps, in order, each one short \
         instruction you can carry out with your tools. Do not carry them out yet.\n\nTask: {task}"
    )
}

/// The user turn of step `i` (from 1) of `n`.
fn step_prompt(task: &str, step: &str, i: usize, n: usize) -> String {
    format!(
        "Step {i} of {n} of the plan for \"{task}\": {step}\nDo this step now, then answer with \
         what you did and found."
    )
}

/// Plans `task` on `agent` and runs the steps in its log: the loop behind [`Plan`] (on a
/// fork) and [`PlanExt::plan_then_execute`] (on the agent).
///
/// # Errors
/// The planning call's [`HaloError`] (an invalid plan after the retry budget is
/// [`HaloError::InvalidObject`]); a failed step is not an error but its outcome, and ends
/// the plan.
pub async fn run_plan(agent: &mut HaloAgent, task: &str) -> Result<PlanReport, HaloError> {
    let before = agent.stats();
    let output = Output::<PlanSteps>::new().mode(OutputMode::Prompted);
    let planned = agent
        .generate_text_with_output(output, planning_prompt(task))
        .await?;
    let steps = planned.object.steps;
    let n = steps.len();
    let mut outcomes = Vec::with_capacity(n);
    let mut rest = steps.into_iter();
    for (i, step) in rest.by_ref().enumerate() {
        let result = agent
            .generate_text(step_prompt(task, &step, i + 1, n))
            .await
            .map(|run| run.text)
            .map_err(|e| e.to_string());
        let failed = result.is_err();
        outcomes.push(StepOutcome { step, result });
        if failed {
            break;
        }
    }
    Ok(PlanReport {
        task: task.to_string(),
        outcomes,
        not_run: rest.collect(),
        stats: agent.stats().since(&before),
    })
}

/// The `plan {"task"}` tool (see the [module docs](self)). Register it as any tool, with
/// [`HaloAgentBuilder::tool`](halo_core::HaloAgentBuilder::tool).
///
/// ```
/// use halo_core::{HaloAgent, testing::ScriptedModel};
/// use halo_strategies::Plan;
/// use serde_json::json;
///
/// # futures::executor::block_on(async {
/// let model = ScriptedModel::new()
///     .tool_call("plan", json!({"task": "greet"}))
///     .text(r#"{"steps": ["say hello", "say your name", "say goodbye"]}"#)
///     .text("Hello.").text("I am Halo.").text("Goodbye.")
///     .text("Greeted.");
/// let mut agent = HaloAgent::builder(model.clone()).tool(Plan::new()).unwrap().build();
/// let out = agent.generate_text("Greet me").await.unwrap();
/// assert_eq!(out.text, "Greeted.");
/// assert!(out.steps[0].tool_results[0].content.contains("I am Halo."));
/// assert_eq!(out.stats.delegated_steps, 4); // the plan and its three steps
/// model.assert_consumed();
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Plan {
    step_bytes: usize,
    max_bytes: usize,
}

impl Default for Plan {
    fn default() -> Self {
        Plan::new()
    }
}

impl Plan {
    /// The tool with the default bounds ([`DEFAULT_STEP_RESULT_BYTES`],
    /// [`DEFAULT_PLAN_RESULT_BYTES`]).
    pub fn new() -> Self {
        Plan {
            step_bytes: DEFAULT_STEP_RESULT_BYTES,
            max_bytes: DEFAULT_PLAN_RESULT_BYTES,
        }
    }

    /// Bounds each step's result and the whole tool result, in bytes.
    pub fn max_bytes(mut self, step: usize, total: usize) -> Self {
        self.step_bytes = step;
        self.max_bytes = total;
        self
    }
}

#[async_trait]
impl DynTool for Plan {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            PLAN_TOOL,
            "Plans a task with several distinct parts as 3 to 5 steps and carries them out one \
             by one in this conversation; returns each step's result. Use it for work that \
             needs several steps, not for a single action.",
            json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "The task to plan and carry out."}
                },
                "required": ["task"],
                "additionalProperties": false,
            }),
        )
    }

    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default().with_runs_agent(true)
    }

    async fn call_json(&self, args: Value, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let context = cx
            .agent()
            .ok_or_else(|| ToolError::Failed(format!("`{PLAN_TOOL}` runs only inside an agent")))?;
        let task = args["task"].as_str().unwrap_or_default().trim().to_string();
        if task.is_empty() {
            return Err(ToolError::InvalidArguments(
                "`task` is empty; say what to plan".into(),
            ));
        }
        let mut fork = context.fork();
        match run_plan(&mut fork, &task).await {
            Ok(report) => {
                let text = report.render(self.step_bytes, self.max_bytes);
                let out = if report.completed() {
                    ToolOutput::text(text)
                } else {
                    ToolOutput::error(text)
                };
                Ok(out.with_stats(report.stats))
            }
            Err(e @ HaloError::Aborted { .. }) => Err(ToolError::Fatal(e.to_string())),
            Err(e) => Ok(ToolOutput::error(format!(
                "the plan could not be made: {e}; do the task step by step yourself"
            ))
            .with_stats(fork.stats())),
        }
    }
}

/// Plan-then-execute as an agent method.
pub trait PlanExt {
    /// Plans `task` (3 to 5 steps, typed output) and runs each step as a user turn of this
    /// agent, in its own log, with a registered `plan` tool not callable meanwhile (through
    /// the options' active tools; the prefix is unchanged). The options are restored
    /// afterwards.
    ///
    /// # Errors
    /// As [`run_plan`].
    fn plan_then_execute(
        &mut self,
        task: &str,
    ) -> impl Future<Output = Result<PlanReport, HaloError>> + Send;
}

impl PlanExt for HaloAgent {
    async fn plan_then_execute(&mut self, task: &str) -> Result<PlanReport, HaloError> {
        let saved = self.options().clone();
        let mut options = saved.clone();
        let names: Vec<String> = match &saved.active_tools {
            Some(active) => active.clone(),
            None => self.tool_registry().names().map(str::to_string).collect(),
        };
        if names.iter().any(|n| n == PLAN_TOOL) {
            options.active_tools = Some(names.into_iter().filter(|n| n != PLAN_TOOL).collect());
        }
        self.set_options(options);
        let report = run_plan(self, task).await;
        self.set_options(saved);
        report
    }
}
