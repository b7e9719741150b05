//! Tracing spans after the OpenTelemetry GenAI semantic conventions
//! (<https://github.com/open-telemetry/semantic-conventions-genai>, `model/gen-ai/spans.yaml`),
//! written so that `tracing-opentelemetry` exports them as the conventions say:
//!
//! | `tracing` span | exported name (`otel.name`) | kind (`otel.kind`) |
//! |---|---|---|
//! | `invoke_agent` | `invoke_agent {gen_ai.agent.name}`, or `invoke_agent` | internal |
//! | `step` | `step` (Halo's own: one model call and its tools) | internal |
//! | `chat` | `chat {gen_ai.request.model}` | client |
//! | `execute_tool` | `execute_tool {gen_ai.tool.name}` (in `dispatch.rs`) | internal |
//!
//! Every count is recorded as an `i64`: `tracing-opentelemetry` exports a `u64` field as a
//! string, which backends do not sum. Halo's own figures (the cache ledger's expected reads
//! and verdicts, busts, steps) are `halo.*` attributes. `docs/telemetry.md` lists them all.
//! `gen_ai.response.finish_reasons` is a string array in the conventions, which a `tracing`
//! field cannot hold: it is the call's one finish reason, as a string (`examples/otel`
//! makes it an array on export).
//! halo-core emits `tracing` spans only; an exporter is the application's choice.

use futures::Stream;
use tracing::field::Empty;

use crate::ledger::{CacheCheck, CacheVerdict};
use crate::model::{FinishReason, ModelAdapter, ModelError, ModelResponse, Usage};
use crate::prefix::Fingerprint;
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

/// A count as the `i64` an OpenTelemetry integer attribute holds (saturating).
pub(crate) fn int(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// `gen_ai.provider.name` for an adapter's [`ModelAdapter::provider`]: the conventions'
/// well-known value where Halo's name differs (`gemini` is `gcp.gemini`), else the name.
pub(crate) fn provider_name(provider: &str) -> &str {
    match provider {
        "gemini" => "gcp.gemini",
        other => other,
    }
}

/// The run's span, `invoke_agent {name}`. `conversation` is `gen_ai.conversation.id`: the
/// agent's session id, when it has one.
pub(crate) fn agent_span(
    model: &dyn ModelAdapter,
    name: Option<&str>,
    conversation: Option<&str>,
    fingerprint: &Fingerprint,
) -> tracing::Span {
    let span_name = match name {
        Some(name) => format!("invoke_agent {name}"),
        None => "invoke_agent".to_string(),
    };
    tracing::info_span!(
        "invoke_agent",
        "otel.name" = span_name.as_str(),
        "otel.kind" = "internal",
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.provider.name" = provider_name(model.provider()),
        "gen_ai.request.model" = model.model_name(),
        "gen_ai.agent.name" = name,
        "gen_ai.conversation.id" = conversation,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "gen_ai.usage.cache_creation.input_tokens" = Empty,
        "halo.prefix.fingerprint" = %fingerprint,
        "halo.steps" = Empty,
        "halo.cache.expected_read_tokens" = Empty,
        "halo.cache.busts" = Empty,
        "halo.prefix.changes" = Empty,
        "halo.history.rewrites" = Empty,
    )
}

/// The span of one step (a model call and the tools it called), under the current span.
pub(crate) fn step_span(step: usize) -> tracing::Span {
    tracing::info_span!("step", "otel.kind" = "internal", "halo.step" = int(step))
}

/// The span of one model call, `chat {model}`, under `parent` (the step's span, or the
/// current span of a driver of one's own). `streaming`: `gen_ai.request.stream`, which the
/// conventions set only on streamed requests.
pub(crate) fn chat_span(
    model: &dyn ModelAdapter,
    conversation: Option<&str>,
    parent: &tracing::Span,
    streaming: bool,
) -> tracing::Span {
    // Formatted only when a subscriber takes the span.
    tracing::info_span!(
        parent: parent,
        "chat",
        "otel.name" = %format_args!("chat {}", model.model_name()),
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = provider_name(model.provider()),
        "gen_ai.request.model" = model.model_name(),
        "gen_ai.conversation.id" = conversation,
        "gen_ai.request.stream" = streaming.then_some(true),
        "gen_ai.response.id" = Empty,
        "gen_ai.response.model" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "gen_ai.response.time_to_first_chunk" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "gen_ai.usage.cache_creation.input_tokens" = Empty,
        "gen_ai.usage.reasoning.output_tokens" = Empty,
        "error.type" = Empty,
        "halo.cache.expected_read_tokens" = Empty,
        "halo.cache.verdict" = Empty,
    )
}

/// Records what came of a model call on its `chat` span.
pub(crate) fn record_answer(span: &tracing::Span, answer: &Result<ModelResponse, ModelError>) {
    match answer {
        // Nothing to record on a span no subscriber takes (the failure's warning is an
        // event of its own, which a subscriber may take without the span).
        Ok(_) if span.is_disabled() => {}
        Ok(response) => record_response(span, response),
        Err(e) => record_failure(span, e),
    }
}

/// A failed model call: `error.type`, an error status, and a warning event.
fn record_failure(span: &tracing::Span, error: &ModelError) {
    span.record("error.type", error_type(error));
    span.record("otel.status_code", "error");
    tracing::warn!(parent: span, error = %error, "model call failed");
}

/// `error.type` of a failed model call: the [`ModelError`] variant, in snake case.
fn error_type(error: &ModelError) -> &'static str {
    match error {
        ModelError::InvalidRequest { .. } => "invalid_request",
        ModelError::Authentication { .. } => "authentication",
        ModelError::InsufficientBalance { .. } => "insufficient_balance",
        ModelError::RateLimited { .. } => "rate_limited",
        ModelError::Server { .. } => "server",
        ModelError::Stream { .. } => "stream",
        ModelError::Http { .. } => "http",
        ModelError::Transport(_) => "transport",
        ModelError::Truncated(_) => "truncated",
        ModelError::InvalidResponse(_) => "invalid_response",
        ModelError::Unsupported(_) => "unsupported",
        ModelError::Local(_) => "local",
        ModelError::Other(_) => "_OTHER",
    }
}

/// Seconds from the request to the first streamed event
/// (`gen_ai.response.time_to_first_chunk`).
pub(crate) fn record_first_chunk(span: &tracing::Span, ms: u64) {
    span.record("gen_ai.response.time_to_first_chunk", ms as f64 / 1000.0);
}

/// Records the run's totals so far on its `invoke_agent` span.
pub(crate) fn record_run(span: &tracing::Span, stats: &AgentStats) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.usage.input_tokens", int(stats.input_tokens));
    span.record("gen_ai.usage.output_tokens", int(stats.output_tokens));
    span.record(
        "gen_ai.usage.cache_read.input_tokens",
        int(stats.cache_read_tokens),
    );
    span.record(
        "gen_ai.usage.cache_creation.input_tokens",
        int(stats.cache_write_tokens),
    );
    span.record("halo.steps", int(stats.steps));
    span.record(
        "halo.cache.expected_read_tokens",
        int(stats.expected_cached_tokens),
    );
    span.record("halo.cache.busts", int(stats.cache_busts));
    span.record("halo.prefix.changes", int(stats.prefix_fingerprint_changes));
    span.record("halo.history.rewrites", int(stats.history_rewrites));
}

/// Records a model call's answer on its `chat` span.
fn record_response(span: &tracing::Span, response: &ModelResponse) {
    if let Some(id) = &response.id {
        span.record("gen_ai.response.id", id.as_str());
    }
    if let Some(m) = &response.model {
        span.record("gen_ai.response.model", m.as_str());
    }
    span.record(
        "gen_ai.response.finish_reasons",
        finish_reason_name(&response.finish_reason),
    );
    record_usage(span, &response.usage);
}

/// The finish reason as the conventions name it (`stop`, `length`, `tool_calls`,
/// `content_filter`, or the provider's own word).
fn finish_reason_name(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other,
    }
}

/// A call's counts; an unknown count is left out rather than recorded as 0.
/// `gen_ai.usage.input_tokens` is [`Usage::input_tokens`], which every adapter reports as
/// the total, cached tokens included (as the conventions define it).
fn record_usage(span: &tracing::Span, usage: &Usage) {
    let counts = [
        ("gen_ai.usage.input_tokens", usage.input_tokens),
        ("gen_ai.usage.output_tokens", usage.output_tokens),
        (
            "gen_ai.usage.cache_read.input_tokens",
            usage.cache_read_tokens,
        ),
        (
            "gen_ai.usage.cache_creation.input_tokens",
            usage.cache_write_tokens,
        ),
        (
            "gen_ai.usage.reasoning.output_tokens",
            usage.reasoning_tokens,
        ),
    ];
    for (field, count) in counts {
        if let Some(n) = count {
            span.record(field, int(n));
        }
    }
}

/// Records the cache ledger's judgement of a call on its `chat` span.
pub(crate) fn record_cache(span: &tracing::Span, check: &CacheCheck) {
    if span.is_disabled() {
        return;
    }
    if let Some(n) = check.expected_cached_tokens {
        span.record("halo.cache.expected_read_tokens", int(n));
    }
    span.record("halo.cache.verdict", verdict_name(&check.verdict));
}

fn verdict_name(verdict: &CacheVerdict) -> &'static str {
    match verdict {
        CacheVerdict::Cold => "cold",
        CacheVerdict::ExpectedMiss => "expected_miss",
        CacheVerdict::Hit => "hit",
        CacheVerdict::Bust { .. } => "bust",
        CacheVerdict::Unreported => "unreported",
    }
}
