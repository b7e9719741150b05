//! `otel`: a Halo agent's run as OpenTelemetry traces.
//!
//! halo-core writes `tracing` spans named after the OpenTelemetry GenAI semantic conventions
//! (`docs/telemetry.md`): `invoke_agent {agent}` per run, a `step` per model call and its
//! tools, `chat {model}` (kind CLIENT) per model call, `execute_tool {tool}` per tool call,
//! with `gen_ai.*` attributes and Halo's own `halo.*` cache figures. It does no IO, so the
//! export is the application's: this crate shows the pipeline to copy.
//!
//! ```text
//! halo-core spans ─▶ tracing-opentelemetry layer ─▶ SdkTracerProvider
//!     ─▶ FinishReasonsArray ─▶ BatchSpanProcessor ─▶ opentelemetry-otlp (HTTP, protobuf)
//! ```
//!
//! - [`otlp_provider`]: the SDK's tracer provider with a batch OTLP/HTTP exporter; the
//!   endpoint comes from the standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` (default `http://localhost:4318/v1/traces`).
//! - [`layer`]: the `tracing` layer that turns spans into OpenTelemetry spans
//!   (`otel.name`, `otel.kind` and `otel.status_code` become the span's name, kind and
//!   status; an `i64` field an integer attribute).
//! - [`FinishReasonsArray`]: a span processor that makes `gen_ai.response.finish_reasons`
//!   the string array the conventions ask for (a `tracing` field holds one value).
//! - [`weather_run`]: the run the binary exports and the tests check, against a loopback
//!   fake of DeepSeek's API (halo-adapters' `sim`), so nothing leaves the machine.

use std::time::Duration;

use futures::StreamExt as _;
use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::sim::{SimReply, openai::OpenAiSim};
use halo_core::{AgentEvent, GenerateTextResult, HaloAgent, Tool, ToolError, ToolOutput};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Array, Context, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanExporter, SpanProcessor,
};
use serde::Deserialize;
use serde_json::json;

/// The `service.name` of the example's resource.
pub const SERVICE_NAME: &str = "halo-otel-example";

/// The agent's name: `gen_ai.agent.name`, and the run span's `invoke_agent weather-agent`.
pub const AGENT_NAME: &str = "weather-agent";

/// The agent's session id: `gen_ai.conversation.id` on the run and on each model call.
pub const SESSION_ID: &str = "otel-example-session";

/// The model id the agent asks for: `chat deepseek-chat`.
pub const MODEL: &str = "deepseek-chat";

/// A tracer provider that exports in batches over OTLP/HTTP (protobuf), its spans passed
/// through [`FinishReasonsArray`] first. Call [`SdkTracerProvider::shutdown`] before the
/// process exits: it sends what the batch still holds.
///
/// # Errors
/// The exporter's build error (an endpoint that is not a URL, say).
pub fn otlp_provider() -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    Ok(provider(BatchSpanProcessor::builder(exporter).build()))
}

/// A tracer provider over `processor` (wrapped in [`FinishReasonsArray`]), with the
/// example's `service.name`.
pub fn provider(processor: impl SpanProcessor + 'static) -> SdkTracerProvider {
    SdkTracerProvider::builder()
        .with_span_processor(FinishReasonsArray(processor))
        .with_resource(Resource::builder().with_service_name(SERVICE_NAME).build())
        .build()
}

/// A tracer provider that hands each ended span to `exporter` at once (no batch): for
/// tests with opentelemetry_sdk's in-memory exporter.
pub fn simple_provider(exporter: impl SpanExporter + 'static) -> SdkTracerProvider {
    provider(opentelemetry_sdk::trace::SimpleSpanProcessor::new(exporter))
}

/// The `tracing` layer that sends spans to `provider`'s tracer (instrumentation scope
/// `halo`).
pub fn layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_opentelemetry::layer().with_tracer(provider.tracer("halo"))
}

/// A span processor in front of `P` that turns a string `gen_ai.response.finish_reasons`
/// into a one-element string array, as the GenAI conventions type it. halo-core records it
/// as a string because a `tracing` field holds one value; a model call ends with one
/// reason.
#[derive(Debug)]
pub struct FinishReasonsArray<P>(pub P);

/// The attribute [`FinishReasonsArray`] rewrites.
const FINISH_REASONS: &str = "gen_ai.response.finish_reasons";

impl<P: SpanProcessor> SpanProcessor for FinishReasonsArray<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.0.on_start(span, cx);
    }

    fn on_end(&self, mut span: SpanData) {
        for attribute in &mut span.attributes {
            if attribute.key.as_str() == FINISH_REASONS
                && let Value::String(reason) = &attribute.value
            {
                let reasons = Value::Array(Array::String(vec![reason.clone()]));
                *attribute = KeyValue::new(FINISH_REASONS, reasons);
            }
        }
        self.0.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

/// The example's tool.
struct Weather;

#[derive(Deserialize, schemars::JsonSchema)]
struct WeatherArgs {
    /// The city's name, such as "Oslo".
    city: String,
}

impl Tool for Weather {
    type Args = WeatherArgs;
    fn name(&self) -> &str {
        "weather"
    }
    fn description(&self) -> &str {
        "The current weather in a city."
    }
    async fn call(&self, args: WeatherArgs) -> Result<ToolOutput, ToolError> {
        Ok(format!("{}: snow, -3 °C", args.city).into())
    }
}

/// One streamed run of a named agent with a session id: a call of its `weather` tool,
/// then the answer, against a loopback fake of DeepSeek's API that reports cached tokens
/// by DeepSeek's rule (the second request reads the first one's prefix from the cache).
/// Its spans go to whatever `tracing` subscriber is current.
///
/// # Errors
/// The simulator's bind error, the adapter's build error, or the run's error.
pub async fn weather_run() -> anyhow::Result<GenerateTextResult> {
    let sim = OpenAiSim::deepseek().await?;
    sim.set_reply_script([
        SimReply::tool_call("weather", json!({"city": "Oslo"})),
        SimReply::text("It is snowing in Oslo, at -3 °C."),
    ]);
    let model = OpenAiCompatible::deepseek(MODEL)
        .api_key("sk-sim")
        .base_url(sim.base_url())
        .max_retries(0)
        .build()?;
    let mut agent = HaloAgent::builder(model)
        .system("You answer questions about the weather. Use the weather tool.")
        .name(AGENT_NAME)
        .session_id(SESSION_ID)
        .tool(Weather)?
        .build();
    let mut events = std::pin::pin!(agent.stream_text("What is the weather in Oslo?"));
    while let Some(event) = events.next().await {
        if let AgentEvent::Finish(result) = event? {
            return Ok(*result);
        }
    }
    anyhow::bail!("the run ended without its finish event")
}
