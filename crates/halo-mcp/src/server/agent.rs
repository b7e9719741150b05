//! The agent itself as one MCP tool: a prompt in, the agent's final text out, and one
//! `notifications/progress` per completed step when the client asked for progress.

use std::sync::Arc;

use futures::StreamExt as _;
use halo_core::{
    AgentEvent, DynTool, HaloAgent, HaloError, StepResult, ToolError, ToolOutput, ToolSpec,
    async_trait,
};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::progress::Progress;

type Factory = dyn Fn() -> Result<HaloAgent, HaloError> + Send + Sync;

enum Source {
    /// A fresh agent per call: calls are independent and may run at once.
    Factory(Box<Factory>),
    /// One agent for every call: a conversation across calls, one call at a time.
    Shared(Arc<Mutex<HaloAgent>>),
}

/// A [`HaloAgent`] served as one tool `{prompt}` → the run's final text. (Not to be confused
/// with [`halo_core::AgentTool`], a tool *inside* an agent that runs that agent.)
///
/// Each completed step of the run sends `notifications/progress` (progress = the step's
/// number, message `step N: called read, grep` or `step N: answered`) when the request
/// carried a progress token; the result is the final answer, or an error result with the
/// run's error (max steps reached, a model error, an aborted run). Serve it like any tool:
/// `McpServer::builder().tool(Arc::new(agent_tool))`; the server's hooks see its calls too.
///
/// ```
/// use std::sync::Arc;
/// use halo_core::{HaloAgent, testing::ScriptedModel};
/// use halo_mcp::server::{AgentAsTool, McpServer};
///
/// let tool = AgentAsTool::per_call("ask_agent", "Asks a Halo agent; give it a task.", || {
///     Ok(HaloAgent::builder(ScriptedModel::new().text("done")).build())
/// });
/// let server = McpServer::builder().tool(Arc::new(tool)).build().unwrap();
/// assert_eq!(server.tool_names(), ["ask_agent"]);
/// ```
pub struct AgentAsTool {
    name: String,
    description: String,
    source: Source,
}

impl AgentAsTool {
    /// Each call builds its agent with `factory` (a new conversation per call).
    pub fn per_call(
        name: impl Into<String>,
        description: impl Into<String>,
        factory: impl Fn() -> Result<HaloAgent, HaloError> + Send + Sync + 'static,
    ) -> Self {
        AgentAsTool {
            name: name.into(),
            description: description.into(),
            source: Source::Factory(Box::new(factory)),
        }
    }

    /// Every call runs on `agent`, one at a time: each prompt is the conversation's next
    /// user turn.
    pub fn shared(
        name: impl Into<String>,
        description: impl Into<String>,
        agent: Arc<Mutex<HaloAgent>>,
    ) -> Self {
        AgentAsTool {
            name: name.into(),
            description: description.into(),
            source: Source::Shared(agent),
        }
    }
}

#[async_trait]
impl DynTool for AgentAsTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            &self.name,
            &self.description,
            json!({
                "type": "object",
                "properties": {
                    "prompt": {
                        "type": "string",
                        "description": "The task or question for the agent, in plain words.",
                        "minLength": 1
                    }
                },
                "required": ["prompt"],
                "additionalProperties": false
            }),
        )
    }

    async fn call_json(&self, arguments: Value) -> Result<ToolOutput, ToolError> {
        let Some(prompt) = arguments["prompt"].as_str().map(str::to_owned) else {
            return Err(ToolError::InvalidArguments(
                "`prompt` must be a string".into(),
            ));
        };
        if prompt.trim().is_empty() {
            return Ok(ToolOutput::error(
                "the prompt is empty: give the agent a task or a question",
            ));
        }
        match &self.source {
            Source::Factory(factory) => match factory() {
                Ok(mut agent) => Ok(run(&mut agent, prompt).await),
                Err(e) => Ok(ToolOutput::error(format!(
                    "the agent could not be set up: {e}"
                ))),
            },
            Source::Shared(agent) => Ok(run(&mut *agent.lock().await, prompt).await),
        }
    }
}

/// Streams one run, reporting each finished step, and returns its answer.
async fn run(agent: &mut HaloAgent, prompt: String) -> ToolOutput {
    let progress = Progress::current();
    let mut events = std::pin::pin!(agent.stream_text(prompt));
    let mut step = 0u32;
    while let Some(event) = events.next().await {
        match event {
            Ok(AgentEvent::StepFinish(result)) => {
                step += 1;
                if let Some(p) = &progress {
                    p.report(f64::from(step), None, step_message(step, &result))
                        .await;
                }
            }
            Ok(AgentEvent::Finish(result)) => {
                return if result.pending_tool_calls.is_empty() {
                    ToolOutput::text(result.text)
                } else {
                    ToolOutput::error(
                        "the agent stopped for tool calls that its application must run; it cannot answer over MCP",
                    )
                };
            }
            Ok(_) => {}
            Err(e) => return ToolOutput::error(format!("the agent's run failed: {e}")),
        }
    }
    ToolOutput::error("the agent's run ended without an answer")
}

/// `step N: called a, b` or `step N: answered`.
fn step_message(step: u32, result: &StepResult) -> String {
    let calls: Vec<&str> = result
        .message
        .tool_calls
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    if calls.is_empty() {
        format!("step {step}: answered")
    } else {
        format!("step {step}: called {}", calls.join(", "))
    }
}
