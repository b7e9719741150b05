//! `ToolSource`: tools swapped mid-run (an MCP server's `tools/list_changed`) reach the
//! prefix only at the next step boundary, as exactly one expected miss and no bust.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use halo_core::testing::ScriptedModel;
use halo_core::{
    AssistantMessage, CacheVerdict, DynTool, FinishReason, HaloAgent, ModelResponse, NoArgs, Tool,
    ToolCall, ToolError, ToolOutput, ToolSource, Usage,
};
use serde_json::json;

/// A source whose tool list the test replaces.
#[derive(Default)]
struct Swappable {
    version: AtomicU64,
    tools: Mutex<Vec<Arc<dyn DynTool>>>,
}

impl Swappable {
    fn set(&self, tools: Vec<Arc<dyn DynTool>>) {
        *self.tools.lock().unwrap() = tools;
        self.version.fetch_add(1, Ordering::SeqCst);
    }
}

impl ToolSource for Swappable {
    fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }
    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.tools.lock().unwrap().clone()
    }
}

/// A tool named as given that answers its name.
struct Named(&'static str);
impl Tool for Named {
    type Args = NoArgs;
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "Answers its name."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok(self.0.into())
    }
}

/// A local tool that, while it runs (mid-step), makes the source swap `old` for `new`.
struct Flip(Arc<Swappable>);
impl Tool for Flip {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "flip"
    }
    fn description(&self) -> &str {
        "Changes the source's tools."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        self.0.set(vec![Arc::new(Named("new"))]);
        Ok("flipped".into())
    }
}

fn usage(input: u64, read: u64) -> Usage {
    Usage {
        input_tokens: Some(input),
        cache_read_tokens: Some(read),
        ..Default::default()
    }
}

fn call(name: &str, id: &str, u: Usage) -> ModelResponse {
    ModelResponse {
        id: None,
        message: AssistantMessage {
            tool_calls: vec![ToolCall::new(id, name, "{}")],
            ..Default::default()
        },
        finish_reason: FinishReason::ToolCalls,
        usage: u,
        model: None,
        provider: None,
    }
}

#[tokio::test]
async fn tools_swapped_mid_run_change_the_prefix_between_steps_as_one_expected_miss() {
    let source = Arc::new(Swappable::default());
    source.set(vec![Arc::new(Named("old"))]);
    let model = ScriptedModel::new()
        // Step 0: the model calls `flip`, which swaps the source's tools mid-step.
        .respond(call("flip", "c0", usage(3000, 0)))
        // Step 1: the new tool is there; the old one is gone.
        .respond(call("new", "c1", usage(3100, 0)))
        .respond(ModelResponse {
            id: None,
            message: AssistantMessage {
                text: "done".into(),
                ..Default::default()
            },
            finish_reason: FinishReason::Stop,
            usage: usage(3200, 3000),
            model: None,
            provider: None,
        });
    let mut agent = HaloAgent::builder(model.clone())
        .system("x".repeat(12_000))
        .tool(Flip(source.clone()))
        .unwrap()
        .tool_source(source.clone())
        .build();
    let before = agent.prefix().fingerprint();
    let result = agent.generate_text("go").await.unwrap();
    assert_eq!(result.text, "done");

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].tool_names, ["flip", "old"]);
    assert_eq!(requests[0].fingerprint, before);
    // The swap happened during step 0's tool call; step 1's request is the first to show it.
    assert_eq!(requests[1].tool_names, ["flip", "new"]);
    assert_ne!(requests[1].fingerprint, before);
    assert_eq!(requests[2].fingerprint, requests[1].fingerprint);
    // The new tool ran, from the source.
    let results: Vec<String> = agent
        .log()
        .to_vec()
        .iter()
        .filter_map(|m| match m {
            halo_core::Message::Tool(r) => Some(r.content.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(results, ["flipped", "new"]);

    let verdicts: Vec<CacheVerdict> = agent
        .cache_ledger()
        .checks()
        .map(|c| c.verdict.clone())
        .collect();
    assert_eq!(
        verdicts,
        [
            CacheVerdict::Cold,
            CacheVerdict::ExpectedMiss,
            CacheVerdict::Hit
        ]
    );
    assert_eq!(agent.cache_ledger().expected_misses(), 1);
    assert_eq!(agent.stats().cache_busts, 0);
    assert_eq!(agent.stats().prefix_fingerprint_changes, 1);
    model.assert_consumed();
}

#[tokio::test]
async fn a_version_bump_with_the_same_tools_leaves_the_prefix_alone() {
    let source = Arc::new(Swappable::default());
    source.set(vec![Arc::new(Named("same"))]);
    let model = ScriptedModel::new().tool_call("same", json!({})).text("ok");
    let mut agent = HaloAgent::builder(model.clone())
        .tool_source(source.clone())
        .build();
    let before = agent.prefix().fingerprint();
    // A restarted server lists the same tools again.
    source.set(vec![Arc::new(Named("same"))]);
    agent.generate_text("go").await.unwrap();
    let requests = model.requests();
    assert!(requests.iter().all(|r| r.fingerprint == before));
    assert_eq!(agent.stats().prefix_fingerprint_changes, 0);
}
