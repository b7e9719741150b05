//! `FallbackModel`: each trigger that moves a call to the next adapter (a retryable error,
//! a timeout, a stream failing before its first event), what does not (an invalid request,
//! a stream that already gave an event), and what the agent's ledger and stats make of a
//! switch.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use halo_adapters::fallback::FallbackModel;
use halo_core::testing::ScriptedModel;
use halo_core::{
    CacheVerdict, GenerationOptions, HaloAgent, InvalidRequestKind, Message, ModelAdapter,
    ModelError, ModelEventStream, ModelRequest, ModelResponse, ModelStreamEvent, SharedModel,
    StablePrefix, Usage, async_trait,
};
use serde_json::json;

/// A scripted model under a provider name of its own.
struct Named(&'static str, ScriptedModel);

#[async_trait]
impl ModelAdapter for Named {
    fn provider(&self) -> &str {
        self.0
    }
    fn model_name(&self) -> &str {
        self.0
    }
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.1.generate(request).await
    }
    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        self.1.stream(request)
    }
}

/// A model that never answers.
struct Hang;

#[async_trait]
impl ModelAdapter for Hang {
    fn provider(&self) -> &str {
        "hang"
    }
    fn model_name(&self) -> &str {
        "hang"
    }
    async fn generate(&self, _: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        futures::future::pending().await
    }
    fn stream<'a>(&'a self, _: ModelRequest<'a>) -> ModelEventStream<'a> {
        Box::pin(futures::stream::pending())
    }
}

fn pair(primary: ScriptedModel, secondary: ScriptedModel) -> FallbackModel {
    FallbackModel::new([
        Arc::new(Named("primary", primary)) as SharedModel,
        Arc::new(Named("secondary", secondary)) as SharedModel,
    ])
    .unwrap()
}

fn rate_limited() -> ModelError {
    ModelError::RateLimited {
        retry_after: None,
        message: "slow down".into(),
    }
}

async fn call(model: &FallbackModel) -> Result<ModelResponse, ModelError> {
    let prefix = StablePrefix::new("s");
    let history = [Message::user("hi")];
    let options = GenerationOptions::default();
    model
        .generate(ModelRequest::new(&prefix, &history, &options))
        .await
}

async fn stream(model: &FallbackModel) -> Vec<Result<ModelStreamEvent, ModelError>> {
    let prefix = StablePrefix::new("s");
    let history = [Message::user("hi")];
    let options = GenerationOptions::default();
    model
        .stream(ModelRequest::new(&prefix, &history, &options))
        .collect()
        .await
}

#[tokio::test]
async fn a_retryable_error_moves_the_call_to_the_next_adapter_which_is_named() {
    let (a, b) = (
        ScriptedModel::new().error(rate_limited()),
        ScriptedModel::new().text("from b"),
    );
    let model = pair(a.clone(), b.clone());
    let answer = call(&model).await.unwrap();
    assert_eq!(answer.message.text, "from b");
    assert_eq!(answer.provider.as_deref(), Some("secondary"));
    a.assert_consumed();
    b.assert_consumed();
    // The first adapter answering is named too.
    let model = pair(ScriptedModel::new().text("from a"), ScriptedModel::new());
    assert_eq!(
        call(&model).await.unwrap().provider.as_deref(),
        Some("primary")
    );
}

#[tokio::test]
async fn an_invalid_request_is_returned_at_once() {
    let invalid = ModelError::InvalidRequest {
        status: 400,
        kind: InvalidRequestKind::ContextWindowExceeded,
        message: "too long".into(),
    };
    let b = ScriptedModel::new().text("never");
    let model = pair(ScriptedModel::new().error(invalid.clone()), b.clone());
    assert_eq!(call(&model).await.unwrap_err(), invalid);
    assert_eq!(b.remaining(), 1, "the second adapter was not asked");
    // The last adapter's retryable error is the call's.
    let model = pair(
        ScriptedModel::new().error(rate_limited()),
        ScriptedModel::new().error(ModelError::Transport("refused".into())),
    );
    assert_eq!(
        call(&model).await.unwrap_err(),
        ModelError::Transport("refused".into())
    );
}

#[tokio::test]
async fn a_timeout_moves_the_call_and_the_stream_to_the_next_adapter() {
    let b = ScriptedModel::new().text("unary").text("streamed");
    let model = FallbackModel::new([
        Arc::new(Hang) as SharedModel,
        Arc::new(Named("secondary", b.clone())) as SharedModel,
    ])
    .unwrap()
    .timeout(Duration::from_millis(50));
    assert_eq!(call(&model).await.unwrap().message.text, "unary");
    let events = stream(&model).await;
    let Some(Ok(ModelStreamEvent::Finish(turn))) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(
        (turn.message.text.as_str(), turn.provider.as_deref()),
        ("streamed", Some("secondary"))
    );
    b.assert_consumed();
    // The last adapter's timeout ends the call.
    let only = FallbackModel::new([Arc::new(Hang) as SharedModel])
        .unwrap()
        .timeout(Duration::from_millis(20));
    assert!(
        matches!(call(&only).await, Err(ModelError::Transport(m)) if m.contains("within 20 ms"))
    );
}

#[tokio::test]
async fn a_stream_failing_before_its_first_event_moves_to_the_next_adapter() {
    // Even an error that is not retryable: nothing reached the caller yet.
    let a = ScriptedModel::new().events(vec![Err(ModelError::Other("connection reset".into()))]);
    let b = ScriptedModel::new().text("from b");
    let events = stream(&pair(a.clone(), b.clone())).await;
    assert_eq!(events[0], Ok(ModelStreamEvent::TextDelta("from b".into())));
    let Some(Ok(ModelStreamEvent::Finish(turn))) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(turn.provider.as_deref(), Some("secondary"));
    a.assert_consumed();
    b.assert_consumed();
}

#[tokio::test]
async fn a_stream_that_failed_after_its_first_event_is_never_replayed_elsewhere() {
    let a = ScriptedModel::new().events(vec![
        Ok(ModelStreamEvent::TextDelta("Hel".into())),
        Err(ModelError::Truncated(
            "the connection failed mid-stream".into(),
        )),
    ]);
    let b = ScriptedModel::new().text("Hello from b");
    let events = stream(&pair(a, b.clone())).await;
    assert_eq!(
        events,
        [
            Ok(ModelStreamEvent::TextDelta("Hel".into())),
            Err(ModelError::Truncated(
                "the connection failed mid-stream".into()
            )),
        ]
    );
    assert_eq!(b.remaining(), 1, "the second adapter was never asked");
}

fn with_usage(mut response: ModelResponse, input: u64, read: u64) -> ModelResponse {
    response.usage = Usage {
        input_tokens: Some(input),
        cache_read_tokens: Some(read),
        ..Usage::default()
    };
    response
}

fn answer(text: &str) -> ModelResponse {
    ModelResponse {
        message: halo_core::AssistantMessage {
            text: text.into(),
            ..Default::default()
        },
        finish_reason: halo_core::FinishReason::Stop,
        usage: Usage::default(),
        model: None,
        provider: None,
        id: None,
    }
}

#[tokio::test]
async fn the_ledger_counts_a_switch_as_an_expected_miss_and_each_step_names_its_provider() {
    // Turn one on the primary; turn two fails there (503) and the secondary answers with a
    // cold cache: an expected miss, not a bust. Turn three stays on the secondary, warm.
    let a = ScriptedModel::new()
        .respond(with_usage(answer("one"), 5000, 0))
        .error(ModelError::Server {
            status: 503,
            retry_after: None,
            message: "overloaded".into(),
        })
        .error(rate_limited());
    let b = ScriptedModel::new()
        .respond(with_usage(answer("two"), 5100, 0))
        .respond(with_usage(answer("three"), 5200, 5100));
    let mut agent = HaloAgent::builder(pair(a.clone(), b.clone()))
        .system("x".repeat(20_000))
        .build();
    let first = agent.generate_text("one").await.unwrap();
    let second = agent.generate_text("two").await.unwrap();
    let third = agent.generate_text("three").await.unwrap();
    assert_eq!(first.steps[0].cache.provider.as_deref(), Some("primary"));
    let switched = &second.steps[0].cache;
    assert_eq!(switched.provider.as_deref(), Some("secondary"));
    assert!(switched.provider_changed);
    assert_eq!(switched.verdict, CacheVerdict::ExpectedMiss);
    assert_eq!(second.stats.provider_switches, 1);
    assert_eq!(second.stats.cache_busts, 0, "a switch is not a bust");
    assert_eq!(third.steps[0].cache.verdict, CacheVerdict::Hit);
    assert!(!third.steps[0].cache.provider_changed);
    assert_eq!(agent.stats().provider_switches, 1);
    a.assert_consumed();
    b.assert_consumed();
    let _ = json!({});
}
