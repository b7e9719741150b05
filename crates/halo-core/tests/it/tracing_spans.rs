//! The agent's tracing spans: names and attributes from the OpenTelemetry GenAI semantic
//! conventions, so the loop shows in any tracing subscriber. (What an OpenTelemetry
//! exporter makes of them is tested in `examples/otel`.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;

use futures::StreamExt as _;
use halo_core::driver::{Effect, RunKind};
use halo_core::testing::ScriptedModel;
use halo_core::{
    FinishReason, HaloAgent, Message, ModelResponse, NoArgs, Tool, ToolError, ToolOutput, Usage,
};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A closed span: its name, its fields, and the thread that opened it.
#[derive(Debug, Clone)]
struct SpanRecord {
    name: String,
    fields: BTreeMap<String, String>,
    thread: ThreadId,
}

struct Fields(BTreeMap<String, String>, ThreadId);

impl Visit for Fields {
    /// Marks a `u64`: `tracing-opentelemetry` exports it as a string.
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0
            .insert(field.name().to_string(), format!("u64 {value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            format!("{value:?}").trim_matches('"').to_string(),
        );
    }
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<SpanRecord>>>);

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new(), std::thread::current().id());
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id)
            && let Some(Fields(fields, thread)) = span.extensions_mut().remove::<Fields>()
        {
            self.0.lock().unwrap().push(SpanRecord {
                name: span.name().to_string(),
                fields,
                thread,
            });
        }
    }
}

impl Recorder {
    /// The spans the calling thread opened, innermost first, and forgets them.
    fn mine(&self) -> Vec<SpanRecord> {
        let me = std::thread::current().id();
        let mut all = self.0.lock().unwrap();
        let (mine, others) = all.drain(..).partition(|s| s.thread == me);
        *all = others;
        mine
    }
}

/// One process-wide subscriber: a scoped one can lose callsites to a test thread that has
/// none (tokio-rs/tracing#3611). Tests pick their own spans out by thread.
fn recorder() -> Recorder {
    static RECORDER: OnceLock<Recorder> = OnceLock::new();
    RECORDER
        .get_or_init(|| {
            let recorder = Recorder::default();
            let subscriber = tracing_subscriber::registry().with(recorder.clone());
            tracing::subscriber::set_global_default(subscriber)
                .expect("one global subscriber per test binary");
            recorder
        })
        .clone()
}

struct Ping;
impl Tool for Ping {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "ping"
    }
    fn description(&self) -> &str {
        "Answers pong."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok("pong".into())
    }
}

#[test]
fn run_step_chat_and_tool_spans_carry_gen_ai_attributes_with_integer_counts() {
    let recorder = recorder();
    let usage = Usage {
        input_tokens: Some(1200),
        output_tokens: Some(7),
        cache_read_tokens: Some(1024),
        cache_write_tokens: Some(100),
        reasoning_tokens: None,
    };
    let model = ScriptedModel::new()
        .tool_call("ping", json!({}))
        .respond(ModelResponse {
            id: Some("resp-2".into()),
            message: halo_core::AssistantMessage {
                text: "pong received".into(),
                ..Default::default()
            },
            finish_reason: FinishReason::Stop,
            usage,
            model: Some("scripted-1".into()),
            provider: None,
        });
    let mut agent = HaloAgent::builder(model)
        .system("trace test")
        .name("pinger")
        .session_id("conversation-7")
        .tool(Ping)
        .unwrap()
        .build();
    futures::executor::block_on(agent.generate_text("ping it")).unwrap();

    let spans = recorder.mine();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    // Spans close innermost first.
    assert_eq!(
        names,
        [
            "chat",
            "execute_tool",
            "step",
            "chat",
            "step",
            "invoke_agent"
        ]
    );
    let exported: Vec<&str> = spans
        .iter()
        .map(|s| s.fields.get("otel.name").map_or("", String::as_str))
        .collect();
    assert_eq!(
        exported,
        [
            "chat scripted",
            "execute_tool ping",
            "",
            "chat scripted",
            "",
            "invoke_agent pinger"
        ]
    );
    for span in &spans {
        let u64s: Vec<_> = span
            .fields
            .iter()
            .filter(|(_, v)| v.starts_with("u64 "))
            .collect();
        assert!(u64s.is_empty(), "{}: u64 fields {u64s:?}", span.name);
        assert!(
            !span.fields.contains_key("gen_ai.system"),
            "the deprecated gen_ai.system is gone"
        );
    }

    let run = &spans[5].fields;
    assert_eq!(run["otel.kind"], "internal");
    assert_eq!(run["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(run["gen_ai.provider.name"], "scripted");
    assert_eq!(run["gen_ai.request.model"], "scripted");
    assert_eq!(run["gen_ai.agent.name"], "pinger");
    assert_eq!(run["gen_ai.conversation.id"], "conversation-7");
    assert_eq!(run["gen_ai.usage.input_tokens"], "1200");
    assert_eq!(run["gen_ai.usage.output_tokens"], "7");
    assert_eq!(run["gen_ai.usage.cache_read.input_tokens"], "1024");
    assert_eq!(run["gen_ai.usage.cache_creation.input_tokens"], "100");
    assert_eq!(run["halo.steps"], "2");
    assert_eq!(run["halo.cache.busts"], "0");
    assert_eq!(
        run["halo.prefix.fingerprint"],
        agent.prefix().fingerprint().to_string()
    );

    let tool = &spans[1].fields;
    assert_eq!(tool["gen_ai.operation.name"], "execute_tool");
    assert_eq!(tool["gen_ai.tool.name"], "ping");
    assert_eq!(tool["gen_ai.tool.call.id"], "call_1");
    assert_eq!(tool["gen_ai.tool.type"], "function");
    assert_eq!(tool["halo.tool.is_error"], "false");
    assert!(!tool.contains_key("error.type"));
    assert_eq!(spans[2].fields["halo.step"], "1");

    let chat = &spans[3].fields;
    assert_eq!(chat["otel.kind"], "client");
    assert_eq!(chat["gen_ai.operation.name"], "chat");
    assert_eq!(chat["gen_ai.provider.name"], "scripted");
    assert_eq!(chat["gen_ai.request.model"], "scripted");
    assert_eq!(chat["gen_ai.conversation.id"], "conversation-7");
    assert_eq!(chat["gen_ai.response.id"], "resp-2");
    assert_eq!(chat["gen_ai.response.model"], "scripted-1");
    assert_eq!(chat["gen_ai.response.finish_reasons"], "stop");
    assert_eq!(chat["gen_ai.usage.input_tokens"], "1200");
    assert_eq!(chat["gen_ai.usage.output_tokens"], "7");
    assert_eq!(chat["gen_ai.usage.cache_read.input_tokens"], "1024");
    assert_eq!(chat["gen_ai.usage.cache_creation.input_tokens"], "100");
    assert!(
        !chat.contains_key("gen_ai.usage.reasoning.output_tokens"),
        "unknown counts are not recorded"
    );
    // The first call reported no usage, so the ledger cannot judge the second.
    assert_eq!(chat["halo.cache.verdict"], "unreported");
    assert!(!chat.contains_key("gen_ai.response.time_to_first_chunk"));
    assert!(
        !chat.contains_key("gen_ai.request.stream"),
        "set only on streamed requests"
    );

    let first = &spans[0].fields;
    assert_eq!(first["gen_ai.response.finish_reasons"], "tool_calls");
    assert_eq!(first["halo.cache.verdict"], "cold");
    // The first call's usage was unknown: nothing recorded rather than a 0.
    assert!(!first.contains_key("gen_ai.usage.input_tokens"));
    assert!(!first.contains_key("gen_ai.response.id"));
}

#[test]
fn streamed_calls_and_calls_of_a_drivers_own_open_chat_spans() {
    let recorder = recorder();
    let mut agent = HaloAgent::builder(ScriptedModel::new().text("streamed answer"))
        .system("trace test")
        .build();
    futures::executor::block_on(async {
        let mut events = std::pin::pin!(agent.stream_text("hi"));
        while let Some(event) = events.next().await {
            event.unwrap();
        }
    });
    let spans = recorder.mine();
    let chat = &spans.iter().find(|s| s.name == "chat").unwrap().fields;
    assert_eq!(chat["gen_ai.request.stream"], "true");
    let first_chunk: f64 = chat["gen_ai.response.time_to_first_chunk"].parse().unwrap();
    assert!(first_chunk >= 0.0, "seconds: {first_chunk}");

    // A driver of one's own (a durable one, say) gets the same `chat` span from
    // `Driver::call_model`, under whatever span it runs in.
    let mut agent = HaloAgent::builder(ScriptedModel::new().text("driven answer"))
        .system("trace test")
        .session_id("s-1")
        .build();
    let mut driver = agent.driver();
    driver.start(Message::user("hi"), RunKind::Text, 0).unwrap();
    loop {
        let feedback = futures::executor::block_on(async {
            match driver.next(0) {
                Effect::CheckInput { message } => Some(driver.check_input(&message).await),
                Effect::PrepareStep { step } => Some(driver.prepare_step(step).await),
                Effect::CallModel(call) => Some(driver.call_model(&call).await),
                Effect::Review { text } => Some(driver.review(&text).await),
                Effect::Done(outcome) => {
                    outcome.unwrap();
                    None
                }
                other => panic!("not expected here: {other:?}"),
            }
        });
        let Some(feedback) = feedback else { break };
        driver.feed(feedback, 0).unwrap();
    }
    let spans = recorder.mine();
    assert_eq!(
        spans.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["chat"]
    );
    let chat = &spans[0].fields;
    assert_eq!(chat["otel.name"], "chat scripted");
    assert_eq!(chat["otel.kind"], "client");
    assert_eq!(chat["gen_ai.provider.name"], "scripted");
    assert_eq!(chat["gen_ai.conversation.id"], "s-1");
    assert_eq!(chat["gen_ai.response.finish_reasons"], "stop");
    assert!(!chat.contains_key("gen_ai.request.stream"));
}
