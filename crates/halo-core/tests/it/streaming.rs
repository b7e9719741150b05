//! `stream_text`: event order, agreement with `generate_text`, cut streams, cancellation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use halo_core::testing::ScriptedModel;
use halo_core::{
    AgentEvent, AssistantMessage, FinishReason, HaloAgent, HaloError, Message, ModelError,
    ModelResponse, ModelStreamEvent, NoArgs, Tool, ToolCall, ToolError, ToolOutput, Usage,
};
use serde_json::json;

struct Upper;
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct UpperArgs {
    text: String,
}
impl Tool for Upper {
    type Args = UpperArgs;
    fn name(&self) -> &str {
        "upper"
    }
    fn description(&self) -> &str {
        "Upper-cases text."
    }
    async fn call(&self, a: UpperArgs) -> Result<ToolOutput, ToolError> {
        Ok(a.text.to_uppercase().into())
    }
}

/// Never finishes; records that its future was dropped.
#[derive(Clone, Default)]
struct Hang {
    started: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}
struct SetOnDrop(Arc<AtomicBool>);
impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
impl Tool for Hang {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "hang"
    }
    fn description(&self) -> &str {
        "Never returns."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        let _guard = SetOnDrop(self.dropped.clone());
        self.started.store(true, Ordering::SeqCst);
        futures::future::pending::<()>().await;
        Ok("unreachable".into())
    }
}

fn script() -> ScriptedModel {
    ScriptedModel::new()
        .tool_call("upper", json!({"text": "abc"}))
        .tool_calls_raw(&[("upper", r#"{"text":"x"}"#), ("upper", r#"{"text":"y"}"#)])
        .text("done: ABC X Y")
}

fn agent(model: &ScriptedModel) -> HaloAgent {
    HaloAgent::builder(model.clone())
        .system("s")
        .tool(Upper)
        .unwrap()
        .tool(Hang::default())
        .unwrap()
        .build()
}

async fn collect(agent: &mut HaloAgent, input: &str) -> Vec<Result<AgentEvent, HaloError>> {
    agent.stream_text(input).collect().await
}

#[tokio::test]
async fn stream_text_and_generate_text_leave_the_same_log() {
    let mut by_stream = agent(&script());
    let events = collect(&mut by_stream, "go").await;
    let mut by_generate = agent(&script());
    let out = by_generate.generate_text("go").await.unwrap();

    assert_eq!(by_stream.log().to_vec(), by_generate.log().to_vec());
    assert_eq!(by_stream.log().len(), 1 + 2 + 3 + 1);
    let Some(Ok(AgentEvent::Finish(streamed))) = events.last() else {
        panic!("no finish: {events:?}")
    };
    assert_eq!(**streamed, out);
    assert_eq!(out.text, "done: ABC X Y");
}

#[tokio::test]
async fn events_come_in_step_order() {
    let mut a = agent(&script());
    let events: Vec<AgentEvent> = collect(&mut a, "go")
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let kinds: Vec<String> = events
        .iter()
        .map(|e| match e {
            AgentEvent::StepStart { step } => format!("start{step}"),
            AgentEvent::TextDelta(t) => format!("text:{t}"),
            AgentEvent::ToolCallStart { name, .. } => format!("call-start:{name}"),
            AgentEvent::ToolCallDelta { arguments, .. } => format!("args:{arguments}"),
            AgentEvent::ToolCall(c) => format!("call:{}", c.id),
            AgentEvent::ToolResult(r) => format!("result:{}={}", r.tool_call_id, r.content),
            AgentEvent::StepFinish(s) => format!("finish-step:{:?}", s.finish_reason),
            AgentEvent::Finish(_) => "finish".into(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "start1",
            "call-start:upper",
            r#"args:{"text":"abc"}"#,
            "call:call_1",
            "result:call_1=ABC",
            "finish-step:ToolCalls",
            "start2",
            "call-start:upper",
            r#"args:{"text":"x"}"#,
            "call-start:upper",
            r#"args:{"text":"y"}"#,
            "call:call_2",
            "call:call_3",
            "result:call_2=X",
            "result:call_3=Y",
            "finish-step:ToolCalls",
            "start3",
            "text:done: ABC X Y",
            "finish-step:Stop",
            "finish",
        ]
    );
}

#[tokio::test]
async fn split_deltas_reach_the_caller_and_the_finish_is_what_is_logged() {
    let call = ToolCall::new("c9", "upper", r#"{"text":"split"}"#);
    let response = ModelResponse {
        id: None,
        message: AssistantMessage {
            text: "Let me ".to_string() + "check.",
            tool_calls: vec![call],
            ..Default::default()
        },
        finish_reason: FinishReason::ToolCalls,
        usage: Usage {
            input_tokens: Some(10),
            cache_read_tokens: Some(0),
            ..Default::default()
        },
        model: None,
        provider: None,
    };
    let model = ScriptedModel::new()
        .events(vec![
            Ok(ModelStreamEvent::TextDelta("Let me ".into())),
            Ok(ModelStreamEvent::TextDelta("check.".into())),
            Ok(ModelStreamEvent::ToolCallStart {
                index: 0,
                id: "c9".into(),
                name: "upper".into(),
            }),
            Ok(ModelStreamEvent::ToolCallDelta {
                index: 0,
                arguments: r#"{"te"#.into(),
            }),
            Ok(ModelStreamEvent::ToolCallDelta {
                index: 0,
                arguments: r#"xt":"split"}"#.into(),
            }),
            Ok(ModelStreamEvent::Finish(response.clone())),
        ])
        .text("SPLIT");
    let mut a = agent(&model);
    let events: Vec<AgentEvent> = collect(&mut a, "go")
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let text: String = events
        .iter()
        .filter_map(|e| {
            if let AgentEvent::TextDelta(t) = e {
                Some(t.as_str())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(text, "Let me check.SPLIT");
    let args: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolCallDelta { id, arguments } if id == "c9" => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, r#"{"text":"split"}"#);
    assert_eq!(a.log().to_vec()[1], Message::Assistant(response.message));
    assert_eq!(a.log().to_vec()[2].text(), "SPLIT");
}

#[tokio::test]
async fn a_cut_stream_is_truncated_and_its_tool_call_never_runs() {
    let hang = Hang::default();
    let model = ScriptedModel::new().events(vec![
        Ok(ModelStreamEvent::TextDelta("Calling".into())),
        Ok(ModelStreamEvent::ToolCallStart {
            index: 0,
            id: "c1".into(),
            name: "hang".into(),
        }),
        Ok(ModelStreamEvent::ToolCallDelta {
            index: 0,
            arguments: "{".into(),
        }),
    ]);
    let mut a = HaloAgent::builder(model.clone())
        .tool(hang.clone())
        .unwrap()
        .build();
    let events = collect(&mut a, "go").await;
    let Some(Err(HaloError::Model(e @ ModelError::Truncated(_)))) = events.last() else {
        panic!("{events:?}")
    };
    assert!(e.is_retryable());
    assert!(
        !hang.started.load(Ordering::SeqCst),
        "no tool runs from a cut stream"
    );
    assert_eq!(a.log().len(), 1, "only the user message");
}

#[tokio::test]
async fn an_error_mid_stream_ends_the_run_with_that_error() {
    let model = ScriptedModel::new().events(vec![
        Ok(ModelStreamEvent::TextDelta("par".into())),
        Err(ModelError::Server {
            status: 529,
            retry_after: None,
            message: "overloaded".into(),
        }),
    ]);
    let mut a = agent(&model);
    let events = collect(&mut a, "go").await;
    assert!(
        matches!(
            events.last(),
            Some(Err(HaloError::Model(ModelError::Server {
                status: 529,
                ..
            })))
        ),
        "{events:?}"
    );
    assert_eq!(a.log().len(), 1);
}

#[tokio::test]
async fn dropping_the_stream_mid_tool_call_stops_the_tool_and_logs_only_complete_steps() {
    let hang = Hang::default();
    let model = ScriptedModel::new()
        .tool_call("upper", json!({"text": "a"}))
        .tool_call("hang", json!({}));
    let mut a = HaloAgent::builder(model.clone())
        .tool(Upper)
        .unwrap()
        .tool(hang.clone())
        .unwrap()
        .build();
    {
        let mut events = std::pin::pin!(a.stream_text("go"));
        // Read until the second step's tool call is announced, then poll once more so the
        // tool starts, and drop the stream while the tool is running.
        loop {
            match events.next().await {
                Some(Ok(AgentEvent::ToolCall(c))) if c.name == "hang" => break,
                Some(Ok(_)) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
        let pending = futures::poll!(events.next());
        assert!(
            pending.is_pending(),
            "the hanging tool keeps the stream pending"
        );
        assert!(hang.started.load(Ordering::SeqCst));
    }
    assert!(
        hang.dropped.load(Ordering::SeqCst),
        "dropping the stream dropped the running tool"
    );
    let log = a.log().to_vec();
    assert_eq!(
        log.len(),
        3,
        "user, then the first step's call and result: {log:?}"
    );
    assert_eq!(log[2].text(), "A");
    assert!(
        log.iter()
            .all(|m| m.tool_calls().iter().all(|c| c.name != "hang"))
    );
}

#[tokio::test]
async fn take_until_a_signal_cancels_the_run() {
    let hang = Hang::default();
    let model = ScriptedModel::new().tool_call("hang", json!({}));
    let mut a = HaloAgent::builder(model.clone())
        .tool(hang.clone())
        .unwrap()
        .build();
    let (cancel, signal) = futures::channel::oneshot::channel::<()>();
    let started = hang.started.clone();
    let canceller = async move {
        while !started.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        cancel.send(()).unwrap();
    };
    let run = a.stream_text("go").take_until(signal).collect::<Vec<_>>();
    let (events, ()) = futures::join!(run, canceller);
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, Ok(AgentEvent::ToolResult(_))))
    );
    assert!(hang.dropped.load(Ordering::SeqCst));
    assert_eq!(a.log().len(), 1);
}
