//! A Halo agent served as one MCP tool: a prompt in, the agent's final text out, and one
//! `notifications/progress` per completed step when the client asked for progress. A thin
//! wrapper of halo-core's named agent ([`NamedAgent`], [`HaloAgent::as_tool`]), which does the
//! running, bounding and error reporting; this adds the server's progress.

use futures::StreamExt as _;
use futures::future::{Either, select};
use halo_core::named::AgentContext;
use halo_core::{
    AgentEvent, DynTool, EventSink, HaloAgent, HaloError, NamedAgent, StepResult, ToolAnnotations,
    ToolContext, ToolError, ToolOutput, ToolSpec, async_trait,
};
use serde_json::Value;

use super::progress::Progress;

/// The argument of a served agent: `prompt`.
const PROMPT: &str = "prompt";
const PROMPT_DESCRIPTION: &str = "The task or question for the agent, in plain words.";

/// A [`HaloAgent`] served over MCP as one tool `{prompt}` → the run's final text. (The agent
/// *is* the tool; not to be confused with a tool inside an agent that runs that agent,
/// [`ToolAnnotations::runs_agent`].)
///
/// The run is halo-core's named agent's ([`NamedAgent`]): the answer is cut to its bound, a
/// failed run (max steps reached, a model error) is an error result that says what
/// happened, and a call that needs approval is denied (no one can answer over MCP). Each
/// completed step of the run sends `notifications/progress` (progress = the step's number,
/// message `step N: called read, grep` or `step N: answered`) when the request carried a
/// progress token. Serve it like any tool: `McpServer::builder().tool(Arc::new(served))`;
/// the server's hooks see its calls too.
///
/// ```
/// use std::sync::Arc;
/// use halo_core::{HaloAgent, testing::ScriptedModel};
/// use halo_mcp::server::{McpServer, ServedAgent};
///
/// let tool = ServedAgent::per_call("ask_agent", "Asks a Halo agent; give it a task.", || {
///     Ok(HaloAgent::builder(ScriptedModel::new().text("done")).build())
/// });
/// let server = McpServer::builder().tool(Arc::new(tool)).build().unwrap();
/// assert_eq!(server.tool_names(), ["ask_agent"]);
/// ```
#[derive(Debug)]
pub struct ServedAgent {
    agent: NamedAgent,
}

/// The former name of [`ServedAgent`].
#[deprecated(note = "renamed `ServedAgent`; `shared` now takes the agent itself")]
pub type AgentAsTool = ServedAgent;

impl ServedAgent {
    /// Each call builds its agent with `factory` (a new conversation per call; calls may
    /// run at once).
    pub fn per_call(
        name: impl Into<String>,
        description: impl Into<String>,
        factory: impl Fn() -> Result<HaloAgent, HaloError> + Send + Sync + 'static,
    ) -> Self {
        ServedAgent::new(
            NamedAgent::per_call(name, description, factory).argument(PROMPT, PROMPT_DESCRIPTION),
        )
    }

    /// Every call runs on `agent`, one at a time: each prompt is the next user turn of one
    /// conversation ([`AgentContext::Continue`]); a step an earlier call left open (cut off
    /// by the call timeout) is dropped first.
    pub fn shared(
        name: impl Into<String>,
        description: impl Into<String>,
        agent: HaloAgent,
    ) -> Self {
        ServedAgent::new(
            agent
                .as_tool(name, description)
                .context(AgentContext::Continue)
                .argument(PROMPT, PROMPT_DESCRIPTION),
        )
    }

    /// Serves `agent` as it is (its own argument name, context and bounds).
    pub fn new(agent: NamedAgent) -> Self {
        ServedAgent { agent }
    }

    /// The named agent served.
    pub fn agent(&self) -> &NamedAgent {
        &self.agent
    }
}

#[async_trait]
impl DynTool for ServedAgent {
    fn spec(&self) -> ToolSpec {
        self.agent.spec()
    }

    fn annotations(&self) -> ToolAnnotations {
        self.agent.annotations()
    }

    async fn call_json(&self, arguments: Value, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(progress) = Progress::current() else {
            return self.agent.call_json(arguments, cx).await;
        };
        // Watch the run: its own steps (one level below this call) are the progress.
        let (sink, mut events) = EventSink::channel();
        let watched = cx.clone().with_events(Some(sink));
        let depth = cx.depth() + 1;
        let mut step = 0u32;
        let output = {
            let mut run = std::pin::pin!(self.agent.call_json(arguments, &watched));
            loop {
                match select(run.as_mut(), events.next()).await {
                    Either::Left((output, _)) => break output,
                    Either::Right((Some(event), _)) => {
                        report(&progress, &mut step, depth, &event).await;
                    }
                    Either::Right((None, _)) => break run.await,
                }
            }
        };
        while let Some(event) = events.try_next() {
            report(&progress, &mut step, depth, &event).await;
        }
        output
    }
}

/// Reports `event` when it is the end of one of the served agent's own steps.
async fn report(progress: &Progress, step: &mut u32, depth: usize, event: &AgentEvent) {
    if let AgentEvent::Inner(inner) = event
        && inner.depth == depth
        && let AgentEvent::StepFinish(result) = &inner.event
    {
        *step += 1;
        progress
            .report(f64::from(*step), None, step_message(*step, result))
            .await;
    }
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
