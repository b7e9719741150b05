//! Tracing spans named after the OpenTelemetry GenAI semantic conventions
//! (<https://opentelemetry.io/docs/specs/semconv/gen-ai/>): `invoke_agent` per run, `chat` per
//! model call, `execute_tool` per tool call, with their attribute names
//! (`gen_ai.request.model`, `gen_ai.usage.input_tokens`, ...).

use futures::Stream;
use tracing::field::Empty;

use crate::model::{ModelAdapter, ModelError, ModelResponse, Usage};
use crate::stats::AgentStats;

/// Polls `stream` inside `span`, as `Instrument` does for a future.
pub(crate) fn instrument_stream<S: Stream + Send>(
    stream: S,
    span: tracing::Span,
) -> impl Stream<Item = S::Item> + Send {
    let mut stream = Box::pin(stream);
    futures::stream::poll_fn(move |cx| {
        let _entered = span.enter();
        stream.as_mut().poll_next(cx)
    })
}

pub(crate) fn chat_span(model: &dyn ModelAdapter, step: &tracing::Span) -> tracing::Span {
    tracing::info_span!(
        parent: step,
        "chat",
        "gen_ai.operation.name" = "chat",
        "gen_ai.system" = model.provider(),
        "gen_ai.request.model" = model.model_name(),
        "gen_ai.response.model" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "gen_ai.usage.cache_creation.input_tokens" = Empty,
    )
}

pub(crate) fn warn_failed(span: &tracing::Span, error: &ModelError) {
    tracing::warn!(parent: span, error = %error, "model call failed");
}

/// Records the run's totals on the current (`invoke_agent`) span.
pub(crate) fn record_run(stats: &AgentStats) {
    let span = tracing::Span::current();
    span.record("gen_ai.usage.input_tokens", stats.input_tokens);
    span.record("gen_ai.usage.output_tokens", stats.output_tokens);
    span.record(
        "gen_ai.usage.cache_read.input_tokens",
        stats.cache_read_tokens,
    );
    span.record("halo.steps", stats.steps);
}

pub(crate) fn record_response(span: &tracing::Span, response: &ModelResponse) {
    if let Some(m) = &response.model {
        span.record("gen_ai.response.model", m.as_str());
    }
    span.record(
        "gen_ai.response.finish_reasons",
        format!("{:?}", response.finish_reason),
    );
    record_usage(span, &response.usage);
}

fn record_usage(span: &tracing::Span, usage: &Usage) {
    if let Some(n) = usage.input_tokens {
        span.record("gen_ai.usage.input_tokens", n);
    }
    if let Some(n) = usage.output_tokens {
        span.record("gen_ai.usage.output_tokens", n);
    }
    if let Some(n) = usage.cache_read_tokens {
        span.record("gen_ai.usage.cache_read.input_tokens", n);
    }
    if let Some(n) = usage.cache_write_tokens {
        span.record("gen_ai.usage.cache_creation.input_tokens", n);
    }
}
