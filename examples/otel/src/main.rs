//! `otel`: one agent run, its spans exported over OTLP/HTTP to the endpoint in
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` (default
//! `http://localhost:4318`, an OpenTelemetry Collector's or Jaeger's OTLP/HTTP port).
//! The model is a loopback fake; only the spans leave the process.
//!
//! ```text
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 cargo run -p otel
//! ```

use tracing_subscriber::layer::SubscriberExt as _;

fn main() -> anyhow::Result<()> {
    // Built outside the async runtime: the exporter's blocking HTTP client runs on the batch
    // processor's own thread, and must not be created or dropped inside a runtime.
    let provider = otel::otlp_provider()?;
    let subscriber = tracing_subscriber::registry().with(otel::layer(&provider));
    tracing::subscriber::set_global_default(subscriber)?;

    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(otel::weather_run());
    drop(runtime);
    // Sends what the batch still holds, and waits for it.
    let shutdown = provider.shutdown();
    let result = result?;
    println!("answer: {}", result.text);
    println!("stats: {}", result.stats);
    shutdown?;
    let endpoint = [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .find_map(|name| std::env::var(name).ok())
    .unwrap_or_else(|| "http://localhost:4318".into());
    println!("spans exported over OTLP/HTTP to {endpoint}");
    Ok(())
}
