//! Property: a run driven by an external driver that serializes the whole run state to JSON
//! and restores it into a fresh agent between every two effects — in every kind of run
//! (`generate_text`, `stream_text`, manual, object), with a repair strategy, a loop guard, a
//! context strategy that compacts, an agent tool, steering, a client-side tool and calls that
//! pause for approval — sends byte-identical requests to the uninterrupted run's, and leaves
//! the same log and the same outcome.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use halo_core::context::{Compaction, ContextConfig, ContextPlan, ContextStrategy};
use halo_core::driver::{Effect, Feedback, RunKind, Streaming, Unary};
use halo_core::repair::{Repair, RepairContext, RepairKind, RepairOutcome, RepairStrategy};
use halo_core::testing::{RecordedRequest, ScriptedModel};
use halo_core::{
    AgentEvent, AssistantMessage, Compactor, ContextBudget, DynTool, GenerateTextResult, HaloAgent,
    HaloError, LoopContext, LoopGuard, LoopVerdict, Message, MessageLog, ModelError, ModelRequest,
    ModelResponse, NoArgs, ObjectSpec, Output, PendingApproval, RunState, StablePrefix, Tool,
    ToolAnnotations, ToolContext, ToolError, ToolOutput, ToolSpec, Turn, async_trait,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// The fixed time every effect is fed at (times never reach a request).
const AT: u64 = 1_767_225_600_000;

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

/// Not safe to run twice; answers with its call id, so a second run would show.
struct Act;
#[async_trait]
impl DynTool for Act {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("act", "Acts.", json!({"type": "object"}))
    }
    async fn call_json(&self, _: Value, cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(format!("acted for {}", cx.call().id).into())
    }
}

/// Runs only once approved.
struct Deploy;
impl Tool for Deploy {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "deploy"
    }
    fn description(&self) -> &str {
        "Deploys."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default().with_needs_approval(true)
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("deployed".into())
    }
}

/// An agent tool: asks a fork of the agent.
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
        let mut fork = cx.agent().expect("the agent").fork();
        fork.set_max_steps(2);
        let text = match fork.generate_text("think again").await {
            Ok(run) => run.text,
            Err(e) => format!("the fork failed: {e}"),
        };
        Ok(ToolOutput::text(text).with_stats(fork.stats()))
    }
}

/// Queues a steering message while it runs, as another task would.
struct Steer(halo_core::SteeringHandle);
impl Tool for Steer {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "steer"
    }
    fn description(&self) -> &str {
        "Runs while the user types."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        self.0.send("also mind the tests");
        Ok("steered".into())
    }
}

/// Repairs upper-case tool names.
struct Lower;
impl RepairStrategy for Lower {
    fn repair(&self, turn: &mut AssistantMessage, _: RepairContext<'_>) -> RepairOutcome {
        let mut outcome = RepairOutcome::default();
        for call in &mut turn.tool_calls {
            let lower = call.name.to_lowercase();
            if lower != call.name {
                outcome.repairs.push(Repair {
                    call_id: call.id.to_string(),
                    kind: RepairKind::ToolName,
                    before: call.name.to_string(),
                    after: lower.clone(),
                });
                call.name = lower.into();
            }
        }
        outcome
    }
}

/// Nudges when two steps in a row made the same calls; stops after two nudges.
struct Repeats;
impl LoopGuard for Repeats {
    fn check(&self, cx: LoopContext<'_>) -> LoopVerdict {
        let names = |i: usize| -> Vec<String> {
            cx.steps[i]
                .message
                .tool_calls
                .iter()
                .map(|c| c.name.to_string())
                .collect()
        };
        let n = cx.steps.len();
        if n >= 2 && !names(n - 1).is_empty() && names(n - 1) == names(n - 2) {
            if cx.nudges >= 2 {
                return LoopVerdict::Stop {
                    kind: halo_core::LoopKind::RepeatedCall,
                    message: "the same calls again".into(),
                };
            }
            return LoopVerdict::Nudge("try something else".into());
        }
        LoopVerdict::Continue
    }
}

/// Compacts everything before the live round once the log holds more than 8 messages.
#[derive(Debug)]
struct CompactLong;
impl ContextStrategy for CompactLong {
    fn plan(&self, _: &StablePrefix, log: &MessageLog, _: &ContextBudget<'_>) -> ContextPlan {
        let live = halo_core::context::live_round_start(log);
        if log.len() <= 8 || live == 0 {
            return ContextPlan::keep();
        }
        ContextPlan {
            compact: Some(Compaction {
                keep_from: live,
                task: None,
                instruction: "Summarize.".into(),
            }),
            ..ContextPlan::keep()
        }
    }
}

/// Answers summary requests with a numbered summary, recording them.
#[derive(Debug, Default)]
struct Summaries {
    seen: Mutex<Vec<Vec<Message>>>,
    n: AtomicUsize,
}

#[async_trait]
impl Compactor for Summaries {
    async fn summarize(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.seen.lock().unwrap().push(request.history.to_vec());
        let n = self.n.fetch_add(1, Ordering::SeqCst);
        Ok(ModelResponse {
            id: None,
            message: AssistantMessage {
                text: format!("summary {n}"),
                ..Default::default()
            },
            finish_reason: halo_core::FinishReason::Stop,
            usage: Default::default(),
            model: None,
            provider: None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Generate,
    Stream,
    Manual,
    Object,
}

#[derive(Debug, Clone)]
enum Reply {
    Text(&'static str),
    Calls(Vec<&'static str>),
}

fn reply() -> impl Strategy<Value = Reply> {
    let name = prop_oneof![
        Just("look"),
        Just("LOOK"),
        Just("act"),
        Just("deploy"),
        Just("reflect"),
        Just("weather"),
        Just("steer"),
        Just("ghost"),
    ];
    prop_oneof![
        2 => prop_oneof![
            Just(Reply::Text("an answer")),
            Just(Reply::Text(r#"{"answer": "42"}"#)),
        ],
        5 => prop::collection::vec(name, 1..4).prop_map(Reply::Calls),
    ]
}

fn script(replies: &[Reply]) -> ScriptedModel {
    let mut model = ScriptedModel::new();
    for r in replies {
        model = match r {
            Reply::Text(t) => model.text(*t),
            Reply::Calls(names) => {
                let calls: Vec<(&str, &str)> = names.iter().map(|n| (*n, "{}")).collect();
                model.tool_calls_raw(&calls)
            }
        };
    }
    model
}

/// The agent, built the same way for every effect; `state` is the saved run, if any.
fn build(model: &ScriptedModel, summaries: &Arc<Summaries>, state: Option<RunState>) -> HaloAgent {
    let mut builder = HaloAgent::builder(model.clone())
        .system("You look, act and deploy.")
        .tool(Look)
        .unwrap()
        .tool(Act)
        .unwrap()
        .tool(Deploy)
        .unwrap()
        .tool(Reflect)
        .unwrap()
        .client_tool(ToolSpec::new(
            "weather",
            "The weather.",
            json!({"type": "object"}),
        ))
        .unwrap()
        .repair(Lower)
        .loop_guard(Repeats)
        .context(ContextConfig::new(Arc::new(CompactLong), 100_000))
        .compactor(summaries.clone())
        .pause_for_approvals()
        .max_steps(6);
    if let Some(state) = state {
        builder = builder.run_state(state);
    }
    let mut agent = builder.build();
    agent.add_tool(Steer(agent.steering())).unwrap();
    agent
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Answer {
    answer: String,
}

/// What the caller answers to a paused run: the first call that waits, decided by its
/// position (approve the even ones, reject the odd ones; the weather is "sunny").
enum Answer1 {
    Approve(String),
    Reject(String),
    Submit(String, String),
}

fn first_pending(state: &RunState, manual: bool) -> Option<Answer1> {
    let step = state.pending()?;
    let approvals: Vec<PendingApproval> = state.pending_approvals();
    if let Some(a) = approvals.first() {
        let index = step
            .tool_calls()
            .iter()
            .position(|c| c.id == a.call.id)
            .unwrap_or(0);
        return Some(if index % 2 == 0 {
            Answer1::Approve(a.call.id.to_string())
        } else {
            Answer1::Reject(a.call.id.to_string())
        });
    }
    let call = step
        .missing()
        .into_iter()
        .find(|c| manual || c.name == "weather")?;
    Some(Answer1::Submit(
        call.id.to_string(),
        format!("result of {}", call.name),
    ))
}

/// The outcome, comparable: the answer (or the object's), or the error's text.
fn outcome_of(result: &Result<GenerateTextResult, HaloError>) -> String {
    match result {
        Ok(r) => format!("ok: {}", r.text),
        Err(e) => format!("err: {e}"),
    }
}

/// The uninterrupted run.
async fn uninterrupted(
    model: &ScriptedModel,
    summaries: &Arc<Summaries>,
    mode: Mode,
) -> (String, MessageLog) {
    let mut agent = build(model, summaries, None);
    let mut result: Result<GenerateTextResult, HaloError> = match mode {
        Mode::Generate => agent.generate_text("go").await,
        Mode::Stream => {
            let mut finish = None;
            let mut events = std::pin::pin!(agent.stream_text("go"));
            while let Some(event) = events.next().await {
                match event {
                    Ok(AgentEvent::Finish(r)) => finish = Some(Ok(*r)),
                    Ok(_) => {}
                    Err(e) => finish = Some(Err(e)),
                }
            }
            finish.expect("a finish or an error")
        }
        Mode::Manual => match agent.send("go").await {
            Ok(Turn::Answer(a)) => Ok(*a),
            Ok(_) => Ok(GenerateTextResult::default()),
            Err(e) => Err(e),
        },
        Mode::Object => {
            let out = agent.generate_object::<Answer>("go").await;
            let log = agent.log().clone();
            return (
                match out {
                    Ok(o) => format!("object: {}", o.object.answer),
                    Err(e) => format!("err: {e}"),
                },
                log,
            );
        }
    };
    loop {
        if result.is_err() {
            break;
        }
        let Some(answer) = first_pending(agent.run_state(), mode == Mode::Manual) else {
            break;
        };
        let turn = match answer {
            Answer1::Approve(id) => agent.approve(&id).await,
            Answer1::Reject(id) => agent.reject(&id, "not now").await,
            Answer1::Submit(id, text) => agent.submit_tool_result(&id, text).await,
        };
        match turn {
            Ok(Some(Turn::Answer(a))) => result = Ok(*a),
            Ok(_) => {}
            Err(e) => result = Err(e),
        }
    }
    (outcome_of(&result), agent.log().clone())
}

/// Restores the saved state into a fresh agent.
fn restore(model: &ScriptedModel, summaries: &Arc<Summaries>, saved: &str) -> HaloAgent {
    let state: RunState = serde_json::from_str(saved).expect("the saved state loads");
    build(model, summaries, Some(state))
}

fn save(agent: &HaloAgent) -> String {
    serde_json::to_string(agent.run_state()).expect("the state saves")
}

/// Performs one effect with a fresh agent; the feedback to give.
async fn perform(agent: &mut HaloAgent, effect: Effect, streaming: bool) -> Feedback {
    let driver = agent.driver();
    match effect {
        Effect::CheckInput { message } => driver.check_input(&message).await,
        Effect::PrepareStep { step } => driver.prepare_step(step).await,
        Effect::Summarize(call) => driver.summarize(&call).await,
        Effect::Review { text } => driver.review(&text).await,
        Effect::CallModel(call) if streaming => driver.call_model_with(&call, &Streaming).await,
        Effect::CallModel(call) => driver.call_model_with(&call, &Unary).await,
        other => panic!("not performed here: {other:?}"),
    }
}

/// The run driven effect by effect, the state saved and restored into a fresh agent between
/// every two steps of the protocol.
async fn external(
    model: &ScriptedModel,
    summaries: &Arc<Summaries>,
    mode: Mode,
) -> (String, MessageLog) {
    let manual = mode == Mode::Manual;
    let (kind, spec) = match mode {
        Mode::Manual => (RunKind::Manual, None),
        Mode::Object => {
            let agent = build(model, summaries, None);
            let spec = ObjectSpec::new(
                Output::<Answer>::new(),
                true,
                agent.model().capabilities(),
                agent.prefix(),
            )
            .unwrap();
            (RunKind::Object(Box::new(spec.clone())), Some(spec))
        }
        _ => (RunKind::Text, None),
    };
    let mut streaming = mode == Mode::Stream;
    let mut saved = {
        let mut agent = build(model, summaries, None);
        agent
            .driver()
            .start(Message::user("go"), kind, AT)
            .expect("a new run starts");
        save(&agent)
    };
    let outcome = loop {
        // What to do next: decided by a fresh agent, then saved.
        let effect = {
            let mut agent = restore(model, summaries, &saved);
            let effect = agent.driver().next(AT);
            saved = save(&agent);
            effect
        };
        let mut agent = restore(model, summaries, &saved);
        let feedbacks: Vec<Feedback> = match effect {
            Effect::Done(result) => break result,
            Effect::Pause(_) => {
                // The caller answers the first call that waits, then the run goes on (as
                // `approve`, `reject` and `submit_tool_result` do).
                let answer = first_pending(agent.run_state(), manual).expect("a call waits");
                let feedback = match answer {
                    Answer1::Approve(call_id) => Feedback::Approve { call_id },
                    Answer1::Reject(call_id) => Feedback::Reject {
                        call_id,
                        reason: "not now".into(),
                    },
                    Answer1::Submit(call_id, text) => Feedback::Submit {
                        call_id,
                        output: text.into(),
                    },
                };
                let mut driver = agent.driver();
                if let Err(e) = driver.feed(feedback, AT) {
                    break Err(e);
                }
                saved = save(&agent);
                let mut agent = restore(model, summaries, &saved);
                if let Err(e) = agent.driver().resume(AT) {
                    break Err(e);
                }
                saved = save(&agent);
                // The continuations of a paused run are unary.
                streaming = false;
                continue;
            }
            Effect::RunTools { calls } => {
                let driver = agent.driver();
                let mut out = Vec::new();
                for call in &calls {
                    out.push(driver.run_tool(call).await);
                }
                out
            }
            effect => vec![perform(&mut agent, effect, streaming).await],
        };
        // The first feedback goes to the agent that performed the effect (steering a tool
        // queued on it moves into the state with it); each later one to a fresh agent.
        let mut agent = Some(agent);
        for feedback in feedbacks {
            let mut current = agent
                .take()
                .unwrap_or_else(|| restore(model, summaries, &saved));
            current
                .driver()
                .feed(feedback, AT)
                .expect("the feedback fits");
            saved = save(&current);
        }
    };
    let agent = restore(model, summaries, &saved);
    let text = match (spec, outcome) {
        (Some(spec), Ok(result)) => match spec.decode::<Answer>(result) {
            Ok(o) => format!("object: {}", o.object.answer),
            Err(e) => format!("err: {e}"),
        },
        (Some(_), Err(e)) => format!("err: {e}"),
        (None, outcome) => outcome_of(&outcome),
    };
    (text, agent.log().clone())
}

fn requests_of(model: &ScriptedModel) -> Vec<RecordedRequest> {
    model.requests()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_run_saved_and_restored_between_every_effect_sends_the_requests_of_an_uninterrupted_one(
        replies in prop::collection::vec(reply(), 1..14),
        mode in prop_oneof![
            Just(Mode::Generate),
            Just(Mode::Stream),
            Just(Mode::Manual),
            Just(Mode::Object),
        ],
    ) {
        let (whole_model, split_model) = (script(&replies), script(&replies));
        let (whole_summaries, split_summaries) = (Arc::default(), Arc::default());
        let (whole, split) = futures::executor::block_on(async {
            (
                uninterrupted(&whole_model, &whole_summaries, mode).await,
                external(&split_model, &split_summaries, mode).await,
            )
        });
        let (a, b) = (requests_of(&whole_model), requests_of(&split_model));
        prop_assert_eq!(a.len(), b.len(), "as many requests");
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            prop_assert_eq!(x, y, "request {} differs", i);
        }
        prop_assert_eq!(
            &*whole_summaries.seen.lock().unwrap(),
            &*split_summaries.seen.lock().unwrap(),
            "the summary requests"
        );
        prop_assert_eq!(&whole.0, &split.0, "the outcome");
        prop_assert_eq!(whole.1.to_vec(), split.1.to_vec(), "the log");
    }
}

/// The script of [`every_feature_happens_and_a_restored_run_matches_in_every_mode`].
fn every_feature() -> Vec<Reply> {
    vec![
        // A name to repair, and a tool that steers.
        Reply::Calls(vec!["LOOK", "steer"]),
        // Two calls that wait for approval (the first approved, the second rejected) and a
        // client-side call.
        Reply::Calls(vec!["deploy", "deploy", "weather"]),
        // An agent tool: its fork answers with the next reply.
        Reply::Calls(vec!["reflect"]),
        Reply::Text("the fork's answer"),
        // The same calls twice: the loop guard nudges.
        Reply::Calls(vec!["act"]),
        Reply::Calls(vec!["act"]),
        Reply::Text(r#"{"answer": "42"}"#),
    ]
}

#[test]
fn every_feature_happens_and_a_restored_run_matches_in_every_mode() {
    for mode in [Mode::Generate, Mode::Stream, Mode::Manual, Mode::Object] {
        let replies = every_feature();
        let (whole_model, split_model) = (script(&replies), script(&replies));
        let (whole_summaries, split_summaries): (Arc<Summaries>, Arc<Summaries>) =
            (Arc::default(), Arc::default());
        let (whole, split) = futures::executor::block_on(async {
            (
                uninterrupted(&whole_model, &whole_summaries, mode).await,
                external(&split_model, &split_summaries, mode).await,
            )
        });
        assert_eq!(
            whole_model.requests(),
            split_model.requests(),
            "{mode:?}: the requests"
        );
        assert_eq!(
            *whole_summaries.seen.lock().unwrap(),
            *split_summaries.seen.lock().unwrap(),
            "{mode:?}: the summary requests"
        );
        assert_eq!(whole.0, split.0, "{mode:?}: the outcome");
        assert_eq!(whole.1.to_vec(), split.1.to_vec(), "{mode:?}: the log");
        if mode != Mode::Generate {
            continue;
        }
        // Each feature took part (checked on the run the others are compared with).
        let requests = whole_model.requests();
        let last = &requests.last().unwrap().history;
        let texts: Vec<String> = last.iter().map(Message::text).collect();
        let all = format!("{texts:?}");
        let results: Vec<&halo_core::ToolResult> = requests
            .iter()
            .flat_map(|r| r.history.iter())
            .filter_map(|m| match m {
                Message::Tool(r) => Some(r),
                _ => None,
            })
            .collect();
        assert!(
            requests[1]
                .history
                .iter()
                .any(|m| m.tool_calls().first().is_some_and(|c| c.name == "look")),
            "the repaired call"
        );
        assert!(
            requests
                .iter()
                .any(|r| r.history.iter().any(|m| m.text() == "also mind the tests")),
            "steering"
        );
        assert!(
            results.iter().any(|r| r.content == "deployed"),
            "an approved call ran"
        );
        assert!(
            results
                .iter()
                .any(|r| r.is_error && r.content.contains("the user rejected this call")),
            "a rejected call"
        );
        assert!(
            results.iter().any(|r| r.content == "result of weather"),
            "a client-side result"
        );
        assert!(
            results.iter().any(|r| r.content == "the fork's answer"),
            "the agent tool"
        );
        assert!(
            requests
                .iter()
                .any(|r| r.history.iter().any(|m| m.text() == "try something else")),
            "the loop guard's nudge"
        );
        assert!(
            !whole_summaries.seen.lock().unwrap().is_empty(),
            "a compaction"
        );
        assert!(all.contains("Summary of the earlier part"), "{all}");
        assert_eq!(whole.0, r#"ok: {"answer": "42"}"#);
    }
}
