//! Property: whatever a caller does — send, submit results (right, wrong, twice), resume,
//! cancel a stream mid-run, clear the log, steer, or edit the log by hand — no request ever
//! carries an orphan tool result, a dangling tool call or an assistant turn made only of
//! reasoning, and the prefix bytes never change; and the messages two requests' history
//! keys say they share are the same messages.

use futures::StreamExt as _;
use halo_core::request::is_valid;
use halo_core::testing::ScriptedModel;
use halo_core::{
    AssistantMessage, HaloAgent, HistoryKey, Message, ModelAdapter, ModelError, ModelEventStream,
    ModelRequest, ModelResponse, NoArgs, Reasoning, Tool, ToolAnnotations, ToolCall, ToolError,
    ToolOutput, ToolResult, async_trait,
};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};

/// A request's history and its key.
type Seen = (Vec<Message>, Option<HistoryKey>);

/// The scripted model, recording every request's history with its key.
#[derive(Clone)]
struct Keyed {
    inner: ScriptedModel,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Keyed {
    fn record(&self, request: &ModelRequest<'_>) {
        let entry = (request.history.to_vec(), request.history_key());
        self.seen.lock().unwrap().push(entry);
    }
}

#[async_trait]
impl ModelAdapter for Keyed {
    fn provider(&self) -> &str {
        "keyed"
    }
    fn model_name(&self) -> &str {
        "keyed"
    }
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.record(&request);
        self.inner.generate(request).await
    }
    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        self.record(&request);
        self.inner.stream(request)
    }
}

struct Look;
impl Tool for Look {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "look"
    }
    fn description(&self) -> &str {
        "Looks."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("seen".into())
    }
}

struct Act;
impl Tool for Act {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "act"
    }
    fn description(&self) -> &str {
        "Acts."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("done".into())
    }
}

#[derive(Debug, Clone)]
enum Reply {
    Text,
    Calls(Vec<&'static str>),
    Error,
}

#[derive(Debug, Clone)]
enum Op {
    Send,
    Generate,
    /// Poll a streamed run for this many events, then drop it.
    StreamThenCancel(usize),
    /// Submit a result for the pending call at this index (or an unknown id when none).
    Submit(usize),
    Resume,
    ClearLog,
    Steer,
    PushOrphan,
    PushDangling,
    PushReasoningOnly,
    PushUser,
    DeleteAt(usize),
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        2 => Just(Reply::Text),
        3 => prop::collection::vec(prop_oneof![Just("look"), Just("act"), Just("ghost")], 1..4)
            .prop_map(Reply::Calls),
        1 => Just(Reply::Error),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Send),
        2 => Just(Op::Generate),
        2 => (0usize..12).prop_map(Op::StreamThenCancel),
        3 => (0usize..4).prop_map(Op::Submit),
        2 => Just(Op::Resume),
        1 => Just(Op::ClearLog),
        1 => Just(Op::Steer),
        1 => Just(Op::PushOrphan),
        1 => Just(Op::PushDangling),
        1 => Just(Op::PushReasoningOnly),
        1 => Just(Op::PushUser),
        1 => (0usize..8).prop_map(Op::DeleteAt),
    ]
}

fn script(replies: &[Reply]) -> ScriptedModel {
    let mut model = ScriptedModel::new();
    for r in replies {
        model = match r {
            Reply::Text => model.text("an answer"),
            Reply::Calls(names) => {
                let calls: Vec<(&str, &str)> = names.iter().map(|n| (*n, "{}")).collect();
                model.tool_calls_raw(&calls)
            }
            Reply::Error => model.error(ModelError::Transport("connection reset".into())),
        };
    }
    model
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_request_is_ever_invalid_and_the_prefix_never_changes(
        replies in prop::collection::vec(reply(), 0..24),
        ops in prop::collection::vec(op(), 1..24),
    ) {
        let model = script(&replies);
        let keyed = Keyed { inner: model.clone(), seen: Arc::default() };
        let mut agent = HaloAgent::builder(keyed.clone())
            .system("You look and act.")
            .tool(Look).unwrap()
            .tool(Act).unwrap()
            .max_steps(4)
            .build();
        let prefix = agent.prefix().canonical_bytes().to_vec();
        futures::executor::block_on(async {
            for (n, op) in ops.iter().enumerate() {
                match op {
                    Op::Send => { let _ = agent.send(format!("task {n}")).await; }
                    Op::Generate => { let _ = agent.generate_text(format!("task {n}")).await; }
                    Op::StreamThenCancel(k) => {
                        let mut events = std::pin::pin!(agent.stream_text(format!("task {n}")));
                        for _ in 0..*k {
                            if events.next().await.is_none() { break; }
                        }
                    }
                    Op::Submit(i) => {
                        let id = agent
                            .run_state()
                            .pending()
                            .and_then(|p| p.missing().get(*i).map(|c| c.id.clone()))
                            .unwrap_or_else(|| "unknown".into());
                        let _ = agent.submit_tool_result(&id, "submitted").await;
                    }
                    Op::Resume => { let _ = agent.resume().await; }
                    Op::ClearLog => agent.clear_log(),
                    Op::Steer => agent.steering().send(format!("steer {n}")),
                    Op::PushOrphan => {
                        let call = ToolCall::new(format!("orphan{n}"), "look", "{}");
                        agent.log_mut().push(Message::Tool(ToolResult::ok(&call, "stray")));
                    }
                    Op::PushDangling => agent.log_mut().push(Message::Assistant(AssistantMessage {
                        tool_calls: vec![ToolCall::new(format!("dangling{n}"), "act", "{}")],
                        ..Default::default()
                    })),
                    Op::PushReasoningOnly => agent.log_mut().push(Message::Assistant(AssistantMessage {
                        reasoning: vec![Reasoning { text: "hmm".into(), signature: None }],
                        ..Default::default()
                    })),
                    Op::PushUser => agent.log_mut().push(Message::user(format!("note {n}"))),
                    Op::DeleteAt(i) => agent.log_mut().retain(|j, _, _| j != *i),
                }
            }
        });
        for (i, request) in model.requests().iter().enumerate() {
            prop_assert!(is_valid(&request.history), "request {i} is invalid: {:#?}", request.history);
            prop_assert!(
                !matches!(request.history.first(), Some(Message::Tool(_))),
                "request {i} starts with a tool result"
            );
            prop_assert_eq!(&request.prefix_bytes, &prefix, "request {} changed the prefix", i);
        }
        // What an adapter may reuse of an earlier request is what that request carried.
        let seen = keyed.seen.lock().unwrap();
        for (j, (later, later_key)) in seen.iter().enumerate() {
            for (i, (earlier, earlier_key)) in seen[..j].iter().enumerate() {
                let (Some(a), Some(b)) = (later_key, earlier_key) else { continue };
                let n = a.shared_prefix(b);
                prop_assert_eq!(&later[..n], &earlier[..n], "requests {} and {} share {} messages by their keys", i, j, n);
            }
        }
    }
}
