//! The example's spans as OpenTelemetry sees them: through opentelemetry_sdk's in-memory
//! exporter (`in_memory`), and as a real OTLP/HTTP receiver decoded them (`received`, run
//! by `cargo xtask interop`). Both hold the same run to the same expectations (`expect`).

mod expect;
mod in_memory;
mod received;
