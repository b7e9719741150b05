//! The agent's tracing spans: names and attributes from the OpenTelemetry GenAI semantic
//! conventions, so the loop shows in any tracing subscriber.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;

use halo_core::testing::ScriptedModel;
use halo_core::{
    FinishReason, HaloAgent, ModelResponse, NoArgs, Tool, ToolError, ToolOutput, Usage,
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
fn run_step_chat_and_tool_spans_carry_gen_ai_attributes() {
    let recorder = recorder();
    let usage = Usage {
        input_tokens: Some(1200),
        output_tokens: Some(7),
        cache_read_tokens: Some(1024),
        cache_write_tokens: None,
        reasoning_tokens: None,
    };
    let model = ScriptedModel::new()
        .tool_call("ping", json!({}))
        .respond(ModelResponse {
            message: halo_core::AssistantMessage {
                text: "pong received".into(),
                ..Default::default()
            },
            finish_reason: FinishReason::Stop,
            usage,
            model: Some("scripted-1".into()),
        });
    let mut agent = HaloAgent::builder(model)
        .system("trace test")
        .tool(Ping)
        .unwrap()
        .build();
    futures::executor::block_on(agent.generate_text("ping it")).unwrap();

    let me = std::thread::current().id();
    let spans: Vec<SpanRecord> = recorder
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.thread == me)
        .cloned()
        .collect();
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

    let run = &spans[5].fields;
    assert_eq!(run["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(run["gen_ai.request.model"], "scripted");
    assert_eq!(run["gen_ai.usage.input_tokens"], "1200");
    assert_eq!(run["gen_ai.usage.cache_read.input_tokens"], "1024");
    assert_eq!(run["halo.steps"], "2");
    assert_eq!(
        run["halo.prefix.fingerprint"],
        agent.prefix().fingerprint().to_string()
    );

    let tool = &spans[1].fields;
    assert_eq!(tool["gen_ai.operation.name"], "execute_tool");
    assert_eq!(tool["gen_ai.tool.name"], "ping");
    assert_eq!(tool["gen_ai.tool.call.id"], "call_1");
    assert_eq!(tool["halo.tool.is_error"], "false");

    let chat = &spans[3].fields;
    assert_eq!(chat["gen_ai.operation.name"], "chat");
    assert_eq!(chat["gen_ai.request.model"], "scripted");
    assert_eq!(chat["gen_ai.response.model"], "scripted-1");
    assert_eq!(chat["gen_ai.usage.input_tokens"], "1200");
    assert_eq!(chat["gen_ai.usage.output_tokens"], "7");
    assert_eq!(chat["gen_ai.usage.cache_read.input_tokens"], "1024");
    assert!(
        !chat.contains_key("gen_ai.usage.cache_creation.input_tokens"),
        "unknown counts are not recorded"
    );
    // The first call's usage was unknown: nothing recorded rather than a 0.
    assert!(!spans[0].fields.contains_key("gen_ai.usage.input_tokens"));
}
