//! The run engine's drivers over the scripted model: manual mode, client-side tools,
//! parallel tools, steering, guardrails, step hooks, resume of interrupted calls, a run state
//! saved mid-step, and sessions.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use halo_core::request::MAY_HAVE_RUN;
use halo_core::testing::ScriptedModel;
use halo_core::{
    AgentEvent, AssistantMessage, CacheVerdict, Clock, HaloAgent, HaloError, InputGuardrail,
    MemoryStore, Message, NoArgs, OutputGuardrail, OutputVerdict, RunState, StepContext, StepHook,
    StepSettings, Tool, ToolAnnotations, ToolCall, ToolError, ToolOutput, ToolSpec, Turn,
    async_trait,
};
use serde_json::json;

/// A read-only tool that waits until `partner` has started too: run one after the other,
/// the two would wait forever.
struct Rendezvous {
    name: &'static str,
    started: Arc<AtomicUsize>,
}

impl Tool for Rendezvous {
    type Args = NoArgs;
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Waits for its partner."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        while self.started.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        // The second call finishes first, so completion order differs from call order.
        if self.name == "first" {
            for _ in 0..50 {
                tokio::task::yield_now().await;
            }
        }
        Ok(format!("{} done", self.name).into())
    }
}

/// Counts its runs; read-only or not as asked.
#[derive(Clone)]
struct Probe {
    name: &'static str,
    runs: Arc<AtomicUsize>,
    annotations: ToolAnnotations,
}

impl Probe {
    fn new(name: &'static str, annotations: ToolAnnotations) -> Self {
        Probe {
            name,
            runs: Arc::default(),
            annotations,
        }
    }
}

impl Tool for Probe {
    type Args = NoArgs;
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Counts its runs."
    }
    fn annotations(&self) -> ToolAnnotations {
        self.annotations
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        let n = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(format!("{} run {n}", self.name).into())
    }
}

fn weather_spec() -> ToolSpec {
    ToolSpec::new(
        "weather",
        "The weather in a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    )
}

/// A clock that advances 1 s per reading, from a fixed start.
#[derive(Debug, Default)]
struct TestClock(AtomicUsize);

impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        1_767_225_600_000 + 1000 * self.0.fetch_add(1, Ordering::SeqCst) as u64
    }
}

fn results_of(log: &[Message]) -> Vec<(String, String)> {
    log.iter()
        .filter_map(|m| match m {
            Message::Tool(r) => Some((r.tool_call_id.to_string(), r.content.to_string())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn manual_mode_hands_every_call_to_the_caller_and_continues_when_the_step_is_complete() {
    let model = ScriptedModel::new()
        .tool_calls_raw(&[("count", "{}"), ("count", "{}")])
        .text("two counted");
    let probe = Probe::new("count", ToolAnnotations::default());
    let mut agent = HaloAgent::builder(model.clone())
        .tool(probe.clone())
        .unwrap()
        .build();
    let Turn::ToolCalls(calls) = agent.send("count twice").await.unwrap() else {
        panic!("expected tool calls")
    };
    assert_eq!(calls.len(), 2);
    assert_eq!(probe.runs.load(Ordering::SeqCst), 0, "the caller runs them");
    // Out of order, one at a time; the step is logged only when complete.
    assert_eq!(
        agent
            .submit_tool_result(&calls[1].id, "second")
            .await
            .unwrap(),
        None
    );
    assert_eq!(agent.log().len(), 1, "only the user message so far");
    assert!(matches!(
        agent.submit_tool_result(&calls[1].id, "again").await,
        Err(HaloError::DuplicateToolResult { .. })
    ));
    assert!(matches!(
        agent.submit_tool_result("nope", "x").await,
        Err(HaloError::UnknownToolCall { .. })
    ));
    let Some(Turn::Answer(answer)) = agent
        .submit_tool_result(&calls[0].id, "first")
        .await
        .unwrap()
    else {
        panic!("expected the answer")
    };
    assert_eq!(answer.text, "two counted");
    let log = agent.log().to_vec();
    assert_eq!(
        results_of(&log),
        [
            (calls[0].id.to_string(), "first".to_string()),
            (calls[1].id.to_string(), "second".to_string())
        ],
        "results logged in call order"
    );
    model.assert_consumed();
}

#[tokio::test]
async fn a_client_side_tool_pauses_generate_text_and_its_result_continues_the_run() {
    let model = ScriptedModel::new()
        .tool_calls_raw(&[("weather", r#"{"city":"Oslo"}"#), ("count", "{}")])
        .text("Snow in Oslo.");
    let probe = Probe::new("count", ToolAnnotations::default());
    let mut agent = HaloAgent::builder(model.clone())
        .client_tool(weather_spec())
        .unwrap()
        .tool(probe.clone())
        .unwrap()
        .build();
    let paused = agent.generate_text("weather?").await.unwrap();
    assert_eq!(paused.pending_tool_calls.len(), 1);
    assert_eq!(paused.pending_tool_calls[0].name, "weather");
    assert_eq!(paused.text, "");
    assert_eq!(
        probe.runs.load(Ordering::SeqCst),
        1,
        "the server-side call ran"
    );
    let id = paused.pending_tool_calls[0].id.to_string();
    let Some(Turn::Answer(answer)) = agent.submit_tool_result(&id, "snow").await.unwrap() else {
        panic!("expected the answer")
    };
    assert_eq!(answer.text, "Snow in Oslo.");
    assert_eq!(agent.log().len(), 5, "user, turn, two results, answer");
    // Both schemas reached the model; the client tool is in the prefix like any other.
    let tools = &model.requests()[0].tool_names;
    assert_eq!(tools, &["count", "weather"]);
    model.assert_consumed();
}

#[tokio::test]
async fn read_only_calls_run_concurrently_and_their_results_are_logged_in_call_order() {
    let model = ScriptedModel::new()
        .tool_calls_raw(&[("first", "{}"), ("second", "{}")])
        .text("both");
    let started = Arc::new(AtomicUsize::new(0));
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Rendezvous {
            name: "first",
            started: started.clone(),
        })
        .unwrap()
        .tool(Rendezvous {
            name: "second",
            started,
        })
        .unwrap()
        .build();
    let mut order = Vec::new();
    let run = tokio::time::timeout(Duration::from_secs(10), async {
        let mut events = std::pin::pin!(agent.stream_text("go"));
        while let Some(event) = events.next().await {
            if let AgentEvent::ToolResult(r) = event.unwrap() {
                order.push(r.content);
            }
        }
    });
    run.await
        .expect("the two read-only calls must run at the same time");
    assert_eq!(
        order,
        ["second done", "first done"],
        "events as they finish"
    );
    let log = agent.log().to_vec();
    let contents: Vec<String> = results_of(&log).into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        contents,
        ["first done", "second done"],
        "the log in call order"
    );
}

/// A read-only tool that never finishes and records whether it was dropped.
struct Forever(Arc<AtomicUsize>);

struct DropFlag(Arc<AtomicUsize>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Tool for Forever {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "forever"
    }
    fn description(&self) -> &str {
        "Never returns."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        let _flag = DropFlag(self.0.clone());
        futures::future::pending::<()>().await;
        Ok("unreachable".into())
    }
}

struct Fatal;
impl Tool for Fatal {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "fatal"
    }
    fn description(&self) -> &str {
        "Fails fatally."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        tokio::task::yield_now().await;
        Err(ToolError::Fatal("the disk is gone".into()))
    }
}

#[tokio::test]
async fn a_fatal_error_aborts_its_sibling_calls_and_logs_nothing_of_the_step() {
    let model = ScriptedModel::new().tool_calls_raw(&[("forever", "{}"), ("fatal", "{}")]);
    let dropped = Arc::new(AtomicUsize::new(0));
    let mut agent = HaloAgent::builder(model)
        .tool(Forever(dropped.clone()))
        .unwrap()
        .tool(Fatal)
        .unwrap()
        .build();
    let err = tokio::time::timeout(Duration::from_secs(10), agent.generate_text("go"))
        .await
        .expect("the fatal error must end the run")
        .unwrap_err();
    assert!(
        matches!(err, HaloError::ToolFatal { ref tool, .. } if tool == "fatal"),
        "{err:?}"
    );
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the sibling was dropped");
    assert_eq!(agent.log().len(), 1, "only the user message");
}

/// A tool that queues a steering message while it runs (as another task would).
struct Steer(halo_core::SteeringHandle);
impl Tool for Steer {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "steer"
    }
    fn description(&self) -> &str {
        "Runs while the user types."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        self.0.send("also check the tests");
        Ok("ran".into())
    }
}

#[tokio::test]
async fn steering_enters_at_the_next_step_boundary_marked_injected() {
    let model = ScriptedModel::new()
        .tool_call("steer", json!({}))
        .text("checked");
    let mut agent = HaloAgent::builder(model.clone()).build();
    agent.add_tool(Steer(agent.steering())).unwrap();
    let mut injected = Vec::new();
    {
        let mut events = std::pin::pin!(agent.stream_text("fix it"));
        while let Some(event) = events.next().await {
            if let AgentEvent::Injected(text) = event.unwrap() {
                injected.push(text);
            }
        }
    }
    assert_eq!(injected, ["also check the tests"]);
    let log = agent.log().to_vec();
    // user, call, its result, the injected message, the answer: never between call and result.
    assert_eq!(log.len(), 5);
    assert!(matches!(&log[2], Message::Tool(_)));
    assert_eq!(log[3].text(), "also check the tests");
    assert!(agent.log().is_injected(3) && !agent.log().is_injected(0));
    let second = &model.requests()[1].history;
    assert_eq!(second.last().unwrap().text(), "also check the tests");
}

/// A model that, while it makes its first answer, has a steering message sent.
struct SteeredWhileAnswering {
    inner: ScriptedModel,
    handle: std::sync::Mutex<Option<halo_core::SteeringHandle>>,
}

#[async_trait]
impl halo_core::ModelAdapter for SteeredWhileAnswering {
    fn provider(&self) -> &str {
        "scripted"
    }
    fn model_name(&self) -> &str {
        "steered"
    }
    async fn generate(
        &self,
        request: halo_core::ModelRequest<'_>,
    ) -> Result<halo_core::ModelResponse, halo_core::ModelError> {
        if let Some(handle) = self.handle.lock().unwrap().take() {
            handle.send("in Celsius, please");
        }
        self.inner.generate(request).await
    }
}

#[tokio::test]
async fn a_steering_message_sent_during_the_final_answer_takes_another_step() {
    // Trigger: a message sent while the model made its last answer was dropped with the run.
    let inner = ScriptedModel::new().text("It is 70 F.").text("It is 21 C.");
    let model = Arc::new(SteeredWhileAnswering {
        inner: inner.clone(),
        handle: std::sync::Mutex::new(None),
    });
    let mut agent = HaloAgent::builder_shared(model.clone()).build();
    *model.handle.lock().unwrap() = Some(agent.steering());
    let out = agent.generate_text("How warm is it?").await.unwrap();
    assert_eq!(out.text, "It is 21 C.");
    assert_eq!(out.steps.len(), 2);
    let texts: Vec<String> = agent.log().messages().map(Message::text).collect();
    assert_eq!(
        texts,
        [
            "How warm is it?",
            "It is 70 F.",
            "in Celsius, please",
            "It is 21 C."
        ]
    );
    assert!(agent.log().is_injected(2));
    inner.assert_consumed();
}

struct NoSecrets;
#[async_trait]
impl InputGuardrail for NoSecrets {
    fn name(&self) -> &str {
        "no-secrets"
    }
    async fn check(&self, input: &Message) -> Result<(), String> {
        if input.text().contains("password") {
            Err("the message holds a password".into())
        } else {
            Ok(())
        }
    }
}

struct MustCite(AtomicUsize);
#[async_trait]
impl OutputGuardrail for MustCite {
    fn name(&self) -> &str {
        "must-cite"
    }
    async fn check(&self, answer: &str) -> OutputVerdict {
        if answer.contains("[1]") {
            OutputVerdict::Accept
        } else if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            OutputVerdict::Retry("cite a source as [1]".into())
        } else {
            OutputVerdict::Reject("still no citation".into())
        }
    }
}

#[tokio::test]
async fn an_input_guardrail_rejects_before_any_model_call_and_logs_nothing() {
    let model = ScriptedModel::new().text("never");
    let mut agent = HaloAgent::builder(model.clone())
        .input_guardrail(NoSecrets)
        .build();
    let err = agent
        .generate_text("my password is hunter2")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "input guardrail `no-secrets` rejected the message: the message holds a password"
    );
    assert!(agent.log().is_empty());
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn an_output_guardrail_retries_with_feedback_then_accepts_or_rejects() {
    let model = ScriptedModel::new().text("It is 42.").text("It is 42 [1].");
    let mut agent = HaloAgent::builder(model.clone())
        .output_guardrail(MustCite(AtomicUsize::new(0)))
        .build();
    let out = agent.generate_text("answer?").await.unwrap();
    assert_eq!(out.text, "It is 42 [1].");
    let log = agent.log().to_vec();
    assert_eq!(
        log.len(),
        4,
        "question, first answer, feedback, second answer"
    );
    assert_eq!(log[2].text(), "cite a source as [1]");
    assert!(agent.log().is_injected(2));

    let model = ScriptedModel::new().text("no").text("still no");
    let mut agent = HaloAgent::builder(model)
        .output_guardrail(MustCite(AtomicUsize::new(0)))
        .build();
    let err = agent.generate_text("answer?").await.unwrap_err();
    assert!(matches!(err, HaloError::OutputRejected { ref answer, .. } if answer == "still no"));
    assert_eq!(agent.log().len(), 3, "the rejected answer is not logged");
}

struct OnlyCount(Arc<AtomicUsize>);
#[async_trait]
impl StepHook for OnlyCount {
    async fn prepare_step(&self, context: StepContext<'_>) -> StepSettings {
        assert_eq!(context.steps.len(), context.step - 1);
        StepSettings {
            active_tools: Some(vec!["count".into()]),
            ..StepSettings::default()
        }
    }
    async fn on_step_finish(&self, _step: &halo_core::StepResult) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn prepare_step_restricts_tools_without_changing_the_prefix() {
    let model = ScriptedModel::new()
        .tool_call("other", json!({}))
        .text("ok");
    let finished = Arc::new(AtomicUsize::new(0));
    let other = Probe::new("other", ToolAnnotations::default());
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Probe::new("count", ToolAnnotations::default()))
        .unwrap()
        .tool(other.clone())
        .unwrap()
        .step_hook(OnlyCount(finished.clone()))
        .build();
    let plain = agent.prefix().canonical_bytes().to_vec();
    agent.generate_text("go").await.unwrap();
    assert_eq!(
        other.runs.load(Ordering::SeqCst),
        0,
        "an inactive tool does not run"
    );
    let log = agent.log().to_vec();
    let (_, content) = &results_of(&log)[0];
    assert_eq!(
        content,
        "`other` is not available in this step; use one of: count"
    );
    let requests = model.requests();
    assert_eq!(
        requests[0].options.active_tools,
        Some(vec!["count".to_string()])
    );
    assert!(requests.iter().all(|r| r.prefix_bytes == plain));
    assert_eq!(finished.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn resume_runs_interrupted_read_only_calls_again_and_closes_the_others() {
    let model = ScriptedModel::new().text("resumed");
    let safe = Probe::new("look", ToolAnnotations::READ_ONLY);
    let unsafe_ = Probe::new("deploy", ToolAnnotations::default());
    let mut agent = HaloAgent::builder(model.clone())
        .tool(safe.clone())
        .unwrap()
        .tool(unsafe_.clone())
        .unwrap()
        .build();
    // A log restored by hand that ends in a turn whose calls never got results.
    agent.log_mut().push(Message::user("look, then deploy"));
    agent.log_mut().push(Message::Assistant(AssistantMessage {
        tool_calls: vec![
            ToolCall::new("a", "look", "{}"),
            ToolCall::new("b", "deploy", "{}"),
        ],
        ..Default::default()
    }));
    let out = agent.resume().await.unwrap();
    assert_eq!(out.text, "resumed");
    assert_eq!(safe.runs.load(Ordering::SeqCst), 1);
    assert_eq!(unsafe_.runs.load(Ordering::SeqCst), 0, "not run twice");
    let log = agent.log().to_vec();
    assert_eq!(
        results_of(&log),
        [
            ("a".to_string(), "look run 1".to_string()),
            ("b".to_string(), MAY_HAVE_RUN.to_string())
        ]
    );
    let sent = &model.requests()[0].history;
    assert_eq!(sent.len(), 4, "user, turn, both results");
}

#[tokio::test]
async fn a_hand_edited_log_still_sends_a_valid_request() {
    let model = ScriptedModel::new().text("fine");
    let mut agent = HaloAgent::builder(model.clone()).build();
    let call = ToolCall::new("x", "gone", "{}");
    agent
        .log_mut()
        .push(Message::Tool(halo_core::ToolResult::ok(&call, "orphan")));
    agent.log_mut().push(Message::Assistant(AssistantMessage {
        reasoning: vec![halo_core::Reasoning {
            text: "thinking only".into(),
            signature: None,
        }],
        ..Default::default()
    }));
    agent.generate_text("hello").await.unwrap();
    let sent = &model.requests()[0].history;
    assert_eq!(sent, &[Message::user("hello")]);
}

#[tokio::test]
async fn a_run_state_saved_mid_step_continues_in_a_new_agent_with_identical_requests() {
    fn build(model: &ScriptedModel, state: Option<RunState>) -> HaloAgent {
        let mut b = HaloAgent::builder(model.clone())
            .system("You count.")
            .tool(Probe::new("count", ToolAnnotations::default()))
            .unwrap()
            .clock(Arc::new(TestClock::default()));
        if let Some(state) = state {
            b = b.run_state(state);
        }
        b.build()
    }
    let script = || {
        ScriptedModel::new()
            .tool_calls_raw(&[("count", "{}"), ("count", "{}")])
            .text("counted")
    };
    // Uninterrupted.
    let whole = script();
    let mut agent = build(&whole, None);
    let Turn::ToolCalls(calls) = agent.send("count").await.unwrap() else {
        panic!()
    };
    agent.submit_tool_result(&calls[0].id, "1").await.unwrap();
    agent.submit_tool_result(&calls[1].id, "2").await.unwrap();

    // Interrupted after the first result: the state goes through JSON, the agent is dropped.
    let split = script();
    let mut first = build(&split, None);
    let Turn::ToolCalls(calls) = first.send("count").await.unwrap() else {
        panic!()
    };
    first.submit_tool_result(&calls[0].id, "1").await.unwrap();
    let saved = serde_json::to_string(first.run_state()).unwrap();
    drop(first);
    let state: RunState = serde_json::from_str(&saved).unwrap();
    assert_eq!(state.pending().unwrap().missing().len(), 1);
    let mut second = build(&split, Some(state));
    let Some(Turn::Answer(answer)) = second.submit_tool_result(&calls[1].id, "2").await.unwrap()
    else {
        panic!()
    };
    assert_eq!(answer.text, "counted");
    assert_eq!(
        split.requests(),
        whole.requests(),
        "byte-identical requests"
    );
    assert_eq!(second.log(), agent.log());
}

#[tokio::test]
async fn a_session_journal_restores_the_log_and_a_changed_prefix_is_one_expected_miss() {
    let store = MemoryStore::new();
    let usage = |input, read| halo_core::Usage {
        input_tokens: Some(input),
        cache_read_tokens: Some(read),
        ..Default::default()
    };
    let answer = |text: &str, u| halo_core::ModelResponse {
        id: None,
        message: AssistantMessage {
            text: text.into(),
            ..Default::default()
        },
        finish_reason: halo_core::FinishReason::Stop,
        usage: u,
        model: None,
        provider: None,
    };
    let model = ScriptedModel::new()
        .tool_call("count", json!({}))
        .respond(answer("one", usage(3000, 0)));
    let mut agent = HaloAgent::builder(model)
        .system("x".repeat(12_000))
        .tool(Probe::new("count", ToolAnnotations::default()))
        .unwrap()
        .session(Arc::new(store.clone()))
        .build();
    agent.generate_text("count once").await.unwrap();
    let before = agent.log().clone();
    drop(agent);

    // Same prefix: the journal's log, and the next call is judged against the last one.
    let model = ScriptedModel::new().respond(answer("two", usage(3100, 2900)));
    let mut again = HaloAgent::builder(model.clone())
        .system("x".repeat(12_000))
        .tool(Probe::new("count", ToolAnnotations::default()))
        .unwrap()
        .session(Arc::new(store.clone()))
        .build();
    again.restore_session().await.unwrap();
    assert_eq!(again.log().to_vec(), before.to_vec());
    again.generate_text("and again").await.unwrap();
    assert_eq!(
        again.cache_ledger().last().unwrap().verdict,
        CacheVerdict::Hit
    );
    assert_eq!(model.requests()[0].history.len(), before.len() + 1);

    // A different prefix on resume: exactly one expected miss.
    let model = ScriptedModel::new().respond(answer("three", usage(3200, 0)));
    let mut changed = HaloAgent::builder(model)
        .system("y".repeat(12_000))
        .tool(Probe::new("count", ToolAnnotations::default()))
        .unwrap()
        .session(Arc::new(store.clone()))
        .build();
    changed.generate_text("once more").await.unwrap();
    assert_eq!(
        changed.cache_ledger().last().unwrap().verdict,
        CacheVerdict::ExpectedMiss
    );
    assert_eq!(changed.stats().prefix_fingerprint_changes, 1);
    assert_eq!(changed.stats().cache_busts, 0);
}

/// A tool that cancels the run it belongs to, then would wait forever.
struct CancelMe(halo_core::CancelToken);
impl Tool for CancelMe {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> &str {
        "Takes forever; the user cancels meanwhile."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        self.0.cancel();
        futures::future::pending::<()>().await;
        Ok("unreachable".into())
    }
}

#[tokio::test]
async fn a_cancel_token_ends_the_run_with_only_complete_steps_and_resume_goes_on() {
    let model = ScriptedModel::new()
        .tool_call("count", json!({}))
        .tool_call("slow", json!({}))
        .text("done");
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Probe::new("count", ToolAnnotations::default()))
        .unwrap()
        .build();
    agent.add_tool(CancelMe(agent.cancel_token())).unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), agent.generate_text("go"))
        .await
        .expect("cancel must end the run")
        .unwrap_err();
    assert!(matches!(err, HaloError::Cancelled), "{err:?}");
    // The first step is complete and logged; the cancelled one is not.
    assert_eq!(agent.log().len(), 3);
    assert_eq!(
        agent.run_state().pending().unwrap().missing()[0].name,
        "slow"
    );
    // `slow` is not read-only: resume closes its call as interrupted, and goes on.
    let out = agent.resume().await.unwrap();
    assert_eq!(out.text, "done");
    let log = agent.log().to_vec();
    assert_eq!(results_of(&log)[1].1, MAY_HAVE_RUN);
    model.assert_consumed();
}

/// A store whose first `fail` appends fail (a full disk), then works.
#[derive(Default)]
struct Flaky {
    fail: AtomicUsize,
    inner: MemoryStore,
}

#[async_trait]
impl halo_core::SessionStore for Flaky {
    async fn append(&self, append: halo_core::Append<'_>) -> Result<u64, halo_core::SessionError> {
        if self.fail.load(Ordering::SeqCst) > 0 {
            self.fail.fetch_sub(1, Ordering::SeqCst);
            return Err(halo_core::SessionError::Io {
                location: "flaky".into(),
                message: "no space left on device".into(),
            });
        }
        self.inner.append(append).await
    }
    async fn load(
        &self,
        session: &str,
    ) -> Result<Vec<halo_core::JournalEvent>, halo_core::SessionError> {
        self.inner.load(session).await
    }
    async fn list(&self) -> Result<Vec<halo_core::SessionInfo>, halo_core::SessionError> {
        self.inner.list().await
    }
    async fn delete(&self, session: &str) -> Result<(), halo_core::SessionError> {
        self.inner.delete(session).await
    }
    async fn acquire(
        &self,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<halo_core::Lease, halo_core::SessionError> {
        self.inner.acquire(session, owner, ttl_ms, now_ms).await
    }
    async fn renew(
        &self,
        lease: &halo_core::Lease,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<halo_core::Lease, halo_core::SessionError> {
        self.inner.renew(lease, ttl_ms, now_ms).await
    }
    async fn release(&self, lease: &halo_core::Lease) -> Result<(), halo_core::SessionError> {
        self.inner.release(lease).await
    }
}

// A failed journal write used to drop its events: the journal then had a gap.
#[tokio::test]
async fn a_failed_journal_write_keeps_its_events_for_the_next_one() {
    let store = Arc::new(Flaky::default());
    let model = ScriptedModel::new().text("one").text("two");
    let mut agent = HaloAgent::builder(model).session(store.clone()).build();
    store.fail.store(1, Ordering::SeqCst);
    let err = agent.generate_text("first").await.unwrap_err();
    assert!(matches!(err, HaloError::Session(_)), "{err:?}");
    agent.generate_text("second").await.unwrap();
    let restored = RunState::from_journal(&store.inner.events(), 100);
    assert_eq!(restored.log().to_vec(), agent.log().to_vec());
    // The first run stopped before its model call; the second answered both messages.
    let texts: Vec<String> = agent.log().messages().map(Message::text).collect();
    assert_eq!(texts, ["first", "second", "one"]);
}

/// The length and the key of a request's history.
type Seen = (usize, Option<halo_core::HistoryKey>);

/// The scripted model, recording the length and the key of every request's history.
#[derive(Clone, Default)]
struct Keys {
    inner: ScriptedModel,
    seen: Arc<std::sync::Mutex<Vec<Seen>>>,
}

impl Keys {
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

#[async_trait]
impl halo_core::ModelAdapter for Keys {
    fn provider(&self) -> &str {
        "keys"
    }
    fn model_name(&self) -> &str {
        "keys"
    }
    async fn generate(
        &self,
        request: halo_core::ModelRequest<'_>,
    ) -> Result<halo_core::ModelResponse, halo_core::ModelError> {
        let key = request.history_key();
        self.seen.lock().unwrap().push((request.history.len(), key));
        self.inner.generate(request).await
    }
}

#[tokio::test]
async fn each_request_s_history_key_shares_the_last_history_until_the_log_is_edited() {
    let model = Keys {
        inner: ScriptedModel::new()
            .tool_call("count", json!({}))
            .tool_call("count", json!({}))
            .text("two")
            .text("again")
            .text("forked")
            .text("repaired")
            .text("cleared"),
        ..Keys::default()
    };
    let build = |state: Option<RunState>| {
        let mut b = HaloAgent::builder(model.clone())
            .system("You count.")
            .tool(Probe::new("count", ToolAnnotations::default()))
            .unwrap();
        if let Some(state) = state {
            b = b.run_state(state);
        }
        b.build()
    };
    let mut agent = build(None);
    agent.generate_text("count twice").await.unwrap();
    agent.generate_text("again").await.unwrap();
    let seen = model.take();
    let lens: Vec<usize> = seen.iter().map(|s| s.0).collect();
    assert_eq!(lens, [1, 3, 5, 7]);
    let keys: Vec<_> = seen
        .iter()
        .map(|s| s.1.expect("a borrowed log has a key"))
        .collect();
    for pair in keys.windows(2) {
        assert_eq!(
            pair[1].shared_prefix(&pair[0]),
            pair[0].len(),
            "a grown log shares all of the last history"
        );
    }
    let last = keys[3];

    // A run state cloned into another agent shares the history up to the clone.
    let mut fork = build(Some(agent.run_state().clone()));
    fork.generate_text("forked").await.unwrap();
    let forked = model.take()[0].1.unwrap();
    assert_eq!(forked.len(), 9);
    assert_eq!(forked.shared_prefix(&last), 7);

    // A history the engine repairs (an orphan result put in by hand) is a copy: no key.
    agent.log_mut().push(Message::Tool(halo_core::ToolResult {
        tool_call_id: "nobody".into(),
        tool_name: "count".into(),
        content: "orphan".into(),
        is_error: false,
        discardable: false,
    }));
    agent.generate_text("repaired").await.unwrap();
    assert_eq!(model.take()[0].1, None);

    // A cleared log shares nothing with what came before.
    agent.clear_log();
    agent.generate_text("cleared").await.unwrap();
    let cleared = model.take()[0].1.unwrap();
    assert_eq!(cleared.shared_prefix(&last), 0);
    assert_eq!(cleared.shared_prefix(&forked), 0);
}
