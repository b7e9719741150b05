//! Events from inside (`inner.rs`): a streamed run hands out the steps, tool calls and text
//! of the agents its tools run, tagged with their name and depth, before the calling tool's
//! result; deeper agents' events come wrapped once per level; a caller that runs a tool
//! itself can watch it.

use futures::StreamExt as _;
use halo_core::testing::ScriptedModel;
use halo_core::{
    AgentEvent, DynTool, EventSink, HaloAgent, InnerEvent, ToolAnnotations, ToolCall, ToolContext,
    ToolError, ToolOutput, ToolSpec, async_trait,
};
use serde_json::{Value, json};

struct Wiki;

#[async_trait]
impl DynTool for Wiki {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "wiki",
            "Looks a topic up.",
            json!({"type": "object", "properties": {"topic": {"type": "string"}}}),
        )
    }
    async fn call_json(&self, _args: Value, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok("otters hold hands".into())
    }
}

/// Every event of a streamed run of `agent` on `input`.
async fn stream(agent: &mut HaloAgent, input: &str) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    let mut stream = std::pin::pin!(agent.stream_text(input));
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    events
}

fn inner(events: &[AgentEvent]) -> Vec<&InnerEvent> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Inner(inner) => Some(&**inner),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_named_agents_tool_call_and_text_reach_the_callers_stream_tagged() {
    let model = ScriptedModel::new()
        .tool_call("ask_researcher", json!({"task": "otters"}))
        .tool_call("wiki", json!({"topic": "otters"}))
        .text("Otters hold hands.")
        .text("Done.");
    let researcher = HaloAgent::builder(model.clone())
        .name("researcher")
        .system("You research.")
        .tool(Wiki)
        .unwrap()
        .build()
        .as_tool("ask_researcher", "Looks facts up.");
    let mut writer = HaloAgent::builder(model.clone())
        .tool(researcher)
        .unwrap()
        .build();
    let events = stream(&mut writer, "Write about otters.").await;
    model.assert_consumed();

    let inner = inner(&events);
    assert!(!inner.is_empty());
    for e in &inner {
        assert_eq!((e.agent.as_str(), e.depth), ("researcher", 1));
        assert_eq!(e.call_id, "call_1");
    }
    let kinds: Vec<&str> = inner
        .iter()
        .map(|e| match &e.event {
            AgentEvent::StepStart { .. } => "step_start",
            AgentEvent::TextDelta(_) => "text",
            AgentEvent::ToolCallStart { .. } | AgentEvent::ToolCallDelta { .. } => "call_delta",
            AgentEvent::ToolCall(_) => "tool_call",
            AgentEvent::ToolResult(_) => "tool_result",
            AgentEvent::StepFinish(_) => "step_finish",
            other => panic!("{other:?}"),
        })
        .filter(|k| *k != "call_delta")
        .collect();
    assert_eq!(
        kinds,
        [
            "step_start",
            "tool_call",
            "tool_result",
            "step_finish",
            "step_start",
            "text",
            "step_finish"
        ]
    );
    assert!(inner.iter().any(
        |e| matches!(&e.event, AgentEvent::ToolCall(c) if c.name == "wiki" && c.id == "call_2")
    ));
    assert!(
        inner
            .iter()
            .any(|e| e.event == AgentEvent::TextDelta("Otters hold hands.".into()))
    );
    // All of them before the writer's result of the call that ran the researcher.
    let last_inner = events
        .iter()
        .rposition(|e| matches!(e, AgentEvent::Inner(_)))
        .unwrap();
    let result = events
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolResult(r) if r.tool_call_id == "call_1"))
        .unwrap();
    assert!(last_inner < result);
    // And as JSON, tagged.
    let json = serde_json::to_value(
        &events[events
            .iter()
            .position(|e| matches!(e, AgentEvent::Inner(_)))
            .unwrap()],
    )
    .unwrap();
    assert_eq!(json["type"], "inner");
    assert_eq!(json["agent"], "researcher");
    assert_eq!(json["depth"], 1);
    assert_eq!(json["event"]["type"], "step_start");
}

/// A tool that runs a fork of its caller (as `plan` does) on a fixed question.
struct Reflect;

#[async_trait]
impl DynTool for Reflect {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("reflect", "Thinks again.", json!({"type": "object"}))
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default().with_runs_agent(true)
    }
    async fn call_json(&self, _: Value, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut fork = cx.agent().unwrap().fork();
        let run = fork
            .generate_text("Think again.")
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        Ok(ToolOutput::text(run.text).with_stats(fork.stats()))
    }
}

#[tokio::test]
async fn a_deeper_agents_events_arrive_wrapped_once_per_level() {
    let model = ScriptedModel::new()
        .tool_call("researcher", json!({"task": "otters"}))
        .tool_call("reflect", json!({})) // the researcher reflects: a fork at depth 2
        .text("On second thought: otters.") // the fork
        .text("Otters.") // the researcher
        .text("Done."); // the writer
    let researcher = HaloAgent::builder(model.clone())
        .name("researcher")
        .tool(Reflect)
        .unwrap()
        .build()
        .as_tool("researcher", "Looks facts up.");
    let mut writer = HaloAgent::builder(model.clone())
        .tool(researcher)
        .unwrap()
        .build();
    let events = stream(&mut writer, "Otters?").await;
    model.assert_consumed();
    let deep: Vec<&InnerEvent> = inner(&events)
        .into_iter()
        .filter(|e| matches!(e.event, AgentEvent::Inner(_)))
        .collect();
    assert!(!deep.is_empty());
    for e in &deep {
        // Outermost: the researcher's tag; innermost: the fork's, named after its tool.
        assert_eq!((e.agent.as_str(), e.depth), ("researcher", 1));
        let origin = e.innermost();
        assert_eq!((origin.agent.as_str(), origin.depth), ("reflect", 2));
        assert_eq!(origin.call_id, "call_2");
    }
    assert!(
        deep.iter()
            .any(|e| e.innermost().event
                == AgentEvent::TextDelta("On second thought: otters.".into()))
    );
}

#[tokio::test]
async fn a_caller_that_runs_a_named_agent_itself_can_watch_its_events() {
    let model = ScriptedModel::new().text("Otters.");
    let researcher = HaloAgent::builder(model.clone())
        .name("researcher")
        .build()
        .as_tool("researcher", "Looks facts up.");
    // Called by hand with a watcher of our own (as an MCP server reporting progress).
    let (sink, mut events) = EventSink::channel();
    let cx = ToolContext::detached(ToolCall::new("c9", "researcher", "{}")).with_events(Some(sink));
    let out = researcher
        .call_json(json!({"task": "otters"}), &cx)
        .await
        .unwrap();
    assert_eq!(out.content, "Otters.");
    drop(cx);
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        seen.push(event);
    }
    assert!(
        seen.iter()
            .all(|e| matches!(e, AgentEvent::Inner(i) if i.call_id == "c9" && i.depth == 1))
    );
    assert!(seen.iter().any(
        |e| matches!(e, AgentEvent::Inner(i) if matches!(i.event, AgentEvent::StepFinish(_)))
    ));
}
