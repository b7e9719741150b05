//! The run through opentelemetry_sdk's in-memory exporter: the `SpanData` the OTLP exporter
//! would encode, with each attribute's `Value` as the SDK holds it.

use std::sync::OnceLock;

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Array, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SpanData};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::expect::{self, Attr, SpanView};

/// The spans of one `weather_run`, exported once per test binary (a process has one global
/// `tracing` subscriber; the run's tasks all poll on the thread that blocks on it).
fn exported() -> &'static [SpanData] {
    static SPANS: OnceLock<Vec<SpanData>> = OnceLock::new();
    SPANS.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = otel::simple_provider(exporter.clone());
        let subscriber = tracing_subscriber::registry().with(otel::layer(&provider));
        tracing::subscriber::set_global_default(subscriber)
            .expect("one global subscriber per test binary");
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(otel::weather_run()).unwrap();
        drop(runtime);
        provider.force_flush().unwrap();
        exporter.get_finished_spans().unwrap()
    })
}

fn value(value: &Value) -> Attr {
    match value {
        Value::I64(n) => Attr::Int(*n),
        Value::F64(x) => Attr::Double(*x),
        Value::Bool(b) => Attr::Bool(*b),
        Value::String(s) => Attr::Str(s.to_string()),
        Value::Array(Array::String(items)) => {
            Attr::StrArray(items.iter().map(ToString::to_string).collect())
        }
        other => Attr::Other(format!("{other:?}")),
    }
}

fn view(span: &SpanData) -> SpanView {
    let kind = match span.span_kind {
        SpanKind::Client => "SPAN_KIND_CLIENT",
        SpanKind::Server => "SPAN_KIND_SERVER",
        SpanKind::Producer => "SPAN_KIND_PRODUCER",
        SpanKind::Consumer => "SPAN_KIND_CONSUMER",
        SpanKind::Internal => "SPAN_KIND_INTERNAL",
    };
    let status = match span.status {
        Status::Unset => "STATUS_CODE_UNSET",
        Status::Ok => "STATUS_CODE_OK",
        Status::Error { .. } => "STATUS_CODE_ERROR",
    };
    let parent = span.parent_span_id;
    SpanView {
        name: span.name.to_string(),
        kind: kind.into(),
        status: status.into(),
        trace_id: span.span_context.trace_id().to_string(),
        span_id: span.span_context.span_id().to_string(),
        parent_span_id: if parent == opentelemetry::trace::SpanId::INVALID {
            String::new()
        } else {
            parent.to_string()
        },
        attributes: span
            .attributes
            .iter()
            .map(|kv| (kv.key.to_string(), value(&kv.value)))
            .collect(),
    }
}

#[test]
fn the_sdk_gets_the_run_as_the_gen_ai_conventions_name_it() {
    let spans: Vec<SpanView> = exported().iter().map(view).collect();
    expect::weather_run(&spans);
}

#[test]
fn token_counts_leave_as_i64_never_as_strings() {
    // Trigger: tracing-opentelemetry exports a `u64` field as a string, which backends
    // neither sum nor compare; every count was one.
    let mut counts = 0;
    for span in exported() {
        for kv in &span.attributes {
            if kv.key.as_str().starts_with("gen_ai.usage.") {
                assert!(
                    matches!(kv.value, Value::I64(_)),
                    "{}: {} is {:?}",
                    span.name,
                    kv.key,
                    kv.value
                );
                counts += 1;
            }
        }
    }
    // input, output and cache reads on both chats; those and cache writes on the run.
    assert!(counts >= 10, "only {counts} token counts exported");
}

#[test]
fn finish_reasons_are_exported_as_a_string_array() {
    let reasons: Vec<&Value> = exported()
        .iter()
        .flat_map(|s| &s.attributes)
        .filter(|kv| kv.key.as_str() == "gen_ai.response.finish_reasons")
        .map(|kv| &kv.value)
        .collect();
    assert_eq!(
        reasons,
        [
            &Value::Array(Array::String(vec!["tool_calls".into()])),
            &Value::Array(Array::String(vec!["stop".into()])),
        ]
    );
}
