//! An agent that never gets stuck: a panicking tool or hook is an error result, tool output
//! is capped, a result too large for the window is cut, a compaction's summary request fits
//! the window, a compaction that falls back to dropping history says so, and run limits
//! change on a built or restored agent.

use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use halo_core::context::{
    BytesEstimator, Compaction, ContextConfig, ContextPlan, ContextStrategy, TokenEstimator,
    message_tokens,
};
use halo_core::testing::ScriptedModel;
use halo_core::{
    AgentEvent, Compactor, ContextBudget, HaloAgent, HaloError, InvalidRequestKind, JournalEvent,
    MemoryStore, Message, MessageLog, ModelAdapter, ModelError, ModelRequest, ModelResponse,
    NoArgs, RewriteKind, RunState, StablePrefix, Tool, ToolCall, ToolCallDecision, ToolContext,
    ToolError, ToolHook, ToolOutput, ToolResult, Usage, async_trait,
};
use serde_json::{Value, json};

struct Panics;
impl Tool for Panics {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "parse"
    }
    fn description(&self) -> &str {
        "Parses."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        let v: Vec<u8> = Vec::new();
        panic!(
            "index out of bounds: the len is {} but the index is 3",
            v.len()
        );
    }
}

struct Echo;
impl Tool for Echo {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Echoes."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("echoed".into())
    }
}

// A panic in a tool used to unwind out of `generate_text`, killing the task and the agent.
#[tokio::test]
async fn a_panicking_tool_becomes_an_error_result_with_the_panic_message() {
    let model = ScriptedModel::new()
        .tool_call("parse", json!({}))
        .text("The parser is broken.");
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Panics)
        .unwrap()
        .build();
    let out = agent.generate_text("Parse it.").await.unwrap();
    assert_eq!(out.text, "The parser is broken.");
    let result = &out.steps[0].tool_results[0];
    assert!(result.is_error);
    assert_eq!(
        result.content,
        "error: `parse` failed unexpectedly (it panicked: index out of bounds: the len is 0 but \
         the index is 3); what it did before is unknown, so check before calling it again"
    );
    // The agent goes on working.
    assert_eq!(agent.log().len(), 4);
}

struct PanickingHook {
    after: bool,
}
#[async_trait]
impl ToolHook for PanickingHook {
    async fn before_tool_call(&self, _: &ToolContext, _: &Value) -> ToolCallDecision {
        if !self.after {
            panic!("the policy file is corrupt");
        }
        ToolCallDecision::Allow
    }
    async fn after_tool_call(&self, _: &ToolContext, result: ToolResult) -> ToolResult {
        if self.after {
            panic!("the redaction table is corrupt");
        }
        result
    }
}

#[tokio::test]
async fn a_panicking_hook_becomes_an_error_result_with_the_panic_message() {
    for after in [false, true] {
        let model = ScriptedModel::new().tool_call("echo", json!({})).text("ok");
        let mut agent = HaloAgent::builder(model)
            .tool(Echo)
            .unwrap()
            .hook(PanickingHook { after })
            .build();
        let out = agent.generate_text("Echo.").await.unwrap();
        let result = &out.steps[0].tool_results[0];
        assert!(result.is_error);
        let expected = if after {
            "`echo` ran, but a tool hook of this session failed on its result (it panicked: the \
             redaction table is corrupt), so the result was lost; check what the call did \
             before calling it again"
        } else {
            "`echo` did not run: a tool hook of this session failed on the call (it panicked: \
             the policy file is corrupt)"
        };
        assert_eq!(result.content, expected);
    }
}

#[test]
fn with_catch_panics_off_a_panicking_tool_fails_fast() {
    let model = ScriptedModel::new().tool_call("parse", json!({}));
    let mut agent = HaloAgent::builder(model)
        .tool(Panics)
        .unwrap()
        .catch_panics(false)
        .build();
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        futures::executor::block_on(agent.generate_text("Parse it."))
    }));
    assert!(unwound.is_err(), "the panic went on");
}

/// Answers with `bytes` bytes of numbered lines.
struct Huge(usize);
impl Tool for Huge {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "dump"
    }
    fn description(&self) -> &str {
        "Dumps a table."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        let mut text = String::new();
        let mut i = 0;
        while text.len() < self.0 {
            text.push_str(&format!("row {i:07}: é\n"));
            i += 1;
        }
        text.truncate(self.0);
        while !text.is_char_boundary(text.len()) {
            text.pop();
        }
        Ok(text.into())
    }
}

fn dump_result(out: &halo_core::GenerateTextResult) -> String {
    out.steps[0].tool_results[0].content.to_string()
}

#[tokio::test]
async fn tool_output_is_capped_by_default_per_agent_and_per_tool_keeping_head_and_tail() {
    let run = |builder: halo_core::HaloAgentBuilder| async move {
        let mut agent = builder.tool(Huge(2_000_000)).unwrap().build();
        dump_result(&agent.generate_text("Dump.").await.unwrap())
    };
    let model = || ScriptedModel::new().tool_call("dump", json!({})).text("ok");
    // Default: 64 KiB.
    let default = run(HaloAgent::builder(model())).await;
    assert!(default.len() <= halo_core::text::DEFAULT_TOOL_OUTPUT_LIMIT);
    assert!(default.starts_with("row 0000000: é\n"));
    assert!(default.trim_end().ends_with('é'), "the tail is kept");
    assert!(
        default.contains(
            "bytes omitted: the result was longer than the 65536-byte limit on tool output ...]"
        ),
        "{}",
        &default[30_000..30_300]
    );
    // Per agent, and per tool (which wins).
    let agent_wide = run(HaloAgent::builder(model()).tool_output_limit(4096)).await;
    assert!(agent_wide.len() <= 4096 && agent_wide.len() > 3000);
    let per_tool = run(HaloAgent::builder(model())
        .tool_output_limit(4096)
        .tool_output_limit_for("dump", 1000))
    .await;
    assert!(
        per_tool.len() <= 1000 && per_tool.len() > 800,
        "{}",
        per_tool.len()
    );
    // On a built agent, and for a result the caller submits.
    let mut agent =
        HaloAgent::builder(ScriptedModel::new().tool_call("dump", json!({})).text("ok")).build();
    agent.set_tool_output_limit(2000);
    let Ok(halo_core::Turn::ToolCalls(calls)) = agent.send("Dump.").await else {
        panic!()
    };
    agent
        .submit_tool_result(&calls[0].id, "x".repeat(100_000))
        .await
        .unwrap();
    let Message::Tool(r) = &agent.log().to_vec()[2] else {
        panic!()
    };
    assert!(r.content.len() <= 2000);
}

#[test]
fn a_result_given_back_as_output_keeps_is_error() {
    let call = ToolCall::new("c1", "read", "{}");
    let output: ToolOutput = ToolResult::error(&call, "no such file").into();
    assert!(output.is_error);
    assert_eq!(output.content, "no such file");
}

/// A model with a context window: a request over it (by the same count the agent makes,
/// [`BytesEstimator`] over the prefix and each message) is refused, as a provider refuses it;
/// every request's size is recorded, and the input tokens reported are that count.
#[derive(Clone)]
struct Windowed {
    inner: ScriptedModel,
    window: u64,
    sizes: Arc<Mutex<Vec<u64>>>,
}

impl Windowed {
    fn tokens(request: &ModelRequest<'_>) -> u64 {
        BytesEstimator.estimate(&String::from_utf8_lossy(request.prefix.canonical_bytes()))
            + request
                .history
                .iter()
                .map(|m| message_tokens(&BytesEstimator, m))
                .sum::<u64>()
    }

    fn max(&self) -> u64 {
        self.sizes
            .lock()
            .unwrap()
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
    }
}

#[async_trait]
impl ModelAdapter for Windowed {
    fn provider(&self) -> &str {
        "windowed"
    }
    fn model_name(&self) -> &str {
        "windowed"
    }
    fn context_window(&self) -> Option<u64> {
        Some(self.window)
    }
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let tokens = Self::tokens(&request);
        self.sizes.lock().unwrap().push(tokens);
        if tokens > self.window {
            return Err(ModelError::InvalidRequest {
                status: 400,
                kind: InvalidRequestKind::ContextWindowExceeded,
                message: format!("{tokens} tokens > {} maximum", self.window),
            });
        }
        let mut response = self.inner.generate(request).await?;
        response.usage = Usage {
            input_tokens: Some(tokens),
            ..Usage::default()
        };
        Ok(response)
    }
}

// One result larger than the window sat in the live round that strategies may not touch,
// and every later request was refused the same way.
#[tokio::test]
async fn one_result_too_large_for_the_window_is_cut_so_the_run_finishes() {
    #[derive(Debug)]
    struct Keep;
    impl ContextStrategy for Keep {
        fn plan(&self, _: &StablePrefix, _: &MessageLog, _: &ContextBudget<'_>) -> ContextPlan {
            ContextPlan::keep()
        }
    }
    let model = Windowed {
        inner: ScriptedModel::new()
            .tool_call("dump", json!({}))
            .text("It is a long table."),
        window: 8_000,
        sizes: Arc::default(),
    };
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Huge(200_000))
        .unwrap()
        .tool_output_limit(1_000_000)
        .context(ContextConfig::for_model(Arc::new(Keep)))
        .build();
    let mut rewrites = Vec::new();
    let mut answer = None;
    {
        let mut events = std::pin::pin!(agent.stream_text("What is in the table?"));
        while let Some(event) = events.next().await {
            match event.unwrap() {
                AgentEvent::HistoryRewritten(r) => rewrites.push(*r),
                AgentEvent::Finish(r) => answer = Some(r.text),
                _ => {}
            }
        }
    }
    assert_eq!(answer.as_deref(), Some("It is a long table."));
    assert!(
        model.max() <= 8_000,
        "a request over the window: {}",
        model.max()
    );
    assert_eq!(rewrites.len(), 1);
    assert_eq!(rewrites[0].kind, RewriteKind::Shortened);
    let Message::Tool(cut) = &agent.log().to_vec()[2] else {
        panic!()
    };
    assert!(cut.content.starts_with("row 0000000"));
    assert!(
        cut.content
            .contains("bytes omitted: the result did not fit the model's context window ...]")
    );
}

/// Compacts all but the newest unit once the request passes 90 % of the window, keeping the
/// task.
#[derive(Debug)]
struct CompactAt90;
impl ContextStrategy for CompactAt90 {
    fn plan(&self, _: &StablePrefix, log: &MessageLog, budget: &ContextBudget<'_>) -> ContextPlan {
        if budget.usage() < 0.9 {
            return ContextPlan::keep();
        }
        let live = halo_core::context::live_round_start(log);
        ContextPlan {
            compact: Some(Compaction {
                keep_from: live,
                task: Some(0),
                instruction: halo_core::context::COMPACTION_PROMPT.into(),
            }),
            ..ContextPlan::keep()
        }
    }
}

/// Reads a file: about 1 KB of text.
struct ReadFile;
impl Tool for ReadFile {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "read"
    }
    fn description(&self) -> &str {
        "Reads the file."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("fn parse(input: &str) -> Result<Ast, Error> { todo }\n"
            .repeat(20)
            .into())
    }
}

// Measured before: on an 8k-token model with a 30-round history, the summary requests were
// 26.6k and 12.5k tokens, both refused, and the history was then dropped silently.
#[tokio::test]
async fn a_compaction_never_sends_a_summary_request_larger_than_the_window() {
    let model = Windowed {
        inner: ScriptedModel::new().text("The bug is in parse."),
        window: 8_000,
        sizes: Arc::default(),
    };
    // The summaries come from the same kind of model, with the same window.
    let mut summaries = ScriptedModel::new();
    for i in 0..8 {
        summaries = summaries.text(format!("summary {i}: the parser was read"));
    }
    let summarizer = Windowed {
        inner: summaries,
        window: 8_000,
        sizes: Arc::default(),
    };
    let mut agent = HaloAgent::builder(model.clone())
        .tool(ReadFile)
        .unwrap()
        .compactor(Arc::new(halo_core::ModelCompactor(Arc::new(
            summarizer.clone(),
        ))))
        .build();
    // A 30-round history of about 26,000 tokens (restored, say), then a strategy that must
    // compact it: even its halves are over the window.
    for _ in 0..30 {
        let call = ToolCall::new(format!("c{}", agent.log().len()), "read", "{}");
        let text = "fn parse(input: &str) -> Result<Ast, Error> { todo }\n".repeat(60);
        if agent.log().is_empty() {
            agent
                .log_mut()
                .push(Message::user("Find the bug in the parser."));
        }
        agent.log_mut().push_step(
            Message::Assistant(halo_core::AssistantMessage {
                tool_calls: vec![call.clone()],
                ..Default::default()
            }),
            [Message::Tool(ToolResult::ok(&call, text))],
        );
    }
    agent.set_context(ContextConfig::for_model(Arc::new(CompactAt90)));
    let out = agent.resume().await.unwrap();
    assert_eq!(out.text, "The bug is in parse.");
    let sizes = summarizer.sizes.lock().unwrap().clone();
    assert!(
        sizes.len() >= 2 && sizes.iter().all(|&s| s <= 8_000),
        "every summary request inside the 8,000-token window: {sizes:?}"
    );
    assert!(model.max() <= 8_000);
    assert!(agent.stats().compactions >= 1, "{:?}", agent.stats());
    assert!(
        agent.log().messages().any(|m| m.text().contains("summary")),
        "the history holds a summary"
    );
}

/// Fails every summary request.
#[derive(Debug)]
struct Unavailable;
#[async_trait]
impl Compactor for Unavailable {
    async fn summarize(&self, _: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        Err(ModelError::Server {
            status: 503,
            retry_after: None,
            message: "overloaded".into(),
        })
    }
}

#[tokio::test]
async fn a_compaction_that_falls_back_to_dropping_history_says_so() {
    #[derive(Debug)]
    struct CompactLong;
    impl ContextStrategy for CompactLong {
        fn plan(&self, _: &StablePrefix, log: &MessageLog, _: &ContextBudget<'_>) -> ContextPlan {
            let live = halo_core::context::live_round_start(log);
            if log.len() < 5 {
                return ContextPlan::keep();
            }
            ContextPlan {
                compact: Some(Compaction {
                    keep_from: live,
                    task: Some(0),
                    instruction: "Summarize.".into(),
                }),
                ..ContextPlan::keep()
            }
        }
    }
    let store = MemoryStore::new();
    let model = ScriptedModel::new()
        .tool_call("echo", json!({}))
        .tool_call("echo", json!({}))
        .text("done");
    let mut agent = HaloAgent::builder(model)
        .tool(Echo)
        .unwrap()
        .context(ContextConfig::new(Arc::new(CompactLong), 100_000))
        .compactor(Arc::new(Unavailable))
        .session(Arc::new(store.clone()))
        .build();
    let mut rewrites = Vec::new();
    {
        let mut events = std::pin::pin!(agent.stream_text("Echo twice."));
        while let Some(event) = events.next().await {
            if let AgentEvent::HistoryRewritten(r) = event.unwrap() {
                rewrites.push(*r);
            }
        }
    }
    assert_eq!(rewrites.len(), 1, "{rewrites:?}");
    assert_eq!(rewrites[0].kind, RewriteKind::Dropped);
    assert_eq!(
        rewrites[0].description,
        "a compaction failed (provider error (HTTP 503): overloaded), so the 2 messages before \
         message 3 it would have summarized were dropped instead"
    );
    assert_eq!(
        (rewrites[0].messages_before, rewrites[0].messages_after),
        (5, 3)
    );
    let boundary = store.events().into_iter().find_map(|e| match e {
        JournalEvent::CompactBoundary { reason, .. } => reason,
        _ => None,
    });
    assert_eq!(boundary.as_deref(), Some(rewrites[0].description.as_str()));
}

#[tokio::test]
async fn run_limits_change_on_a_built_or_restored_agent() {
    let model = ScriptedModel::new()
        .tool_call("echo", json!({}))
        .tool_call("echo", json!({}))
        .tool_call("echo", json!({}));
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Echo)
        .unwrap()
        .build();
    agent.set_max_steps(1);
    assert_eq!(agent.max_steps(), 1);
    let err = agent.generate_text("Echo.").await.unwrap_err();
    assert!(
        matches!(err, HaloError::MaxStepsReached { max_steps: 1, .. }),
        "{err}"
    );
    // Restored from its state: the limit is the new agent's, and can change there too.
    let state: RunState =
        serde_json::from_str(&serde_json::to_string(agent.run_state()).unwrap()).unwrap();
    let mut restored = HaloAgent::builder(model)
        .tool(Echo)
        .unwrap()
        .run_state(state)
        .build();
    restored.set_max_steps(2);
    let err = restored.resume().await.unwrap_err();
    assert!(
        matches!(err, HaloError::MaxStepsReached { max_steps: 2, .. }),
        "{err}"
    );
    assert_eq!(restored.log().len(), 7, "one step before, two more now");
}
