//! The shared transport, through each HTTP adapter: what a streaming request answered with
//! something other than an event stream reports (a proxy's HTML page, JSON that is not the
//! provider's answer), over a loopback wiremock server.

use futures::StreamExt as _;
use halo_adapters::anthropic::AnthropicAdapter;
use halo_adapters::gemini::GeminiAdapter;
use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::responses::ResponsesAdapter;
use halo_core::{GenerationOptions, Message, ModelAdapter, ModelError, ModelRequest, StablePrefix};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-transport-test-key-0123456789";

/// A maintenance page as a proxy serves it, with status 200.
const MAINTENANCE: &str = "<!DOCTYPE html>\n<html><head><title>Maintenance</title></head>\
    <body><h1>We are back soon</h1></body></html>\n";

/// Every HTTP adapter, pointed at `base`, without retries.
fn adapters(base: &str) -> Vec<Box<dyn ModelAdapter>> {
    vec![
        Box::new(
            OpenAiCompatible::custom(format!("{base}/v1"), "m")
                .api_key(KEY)
                .max_retries(0)
                .build()
                .unwrap(),
        ),
        Box::new(
            AnthropicAdapter::builder("claude-sonnet-4-5")
                .api_key(KEY)
                .base_url(base)
                .max_retries(0)
                .build()
                .unwrap(),
        ),
        Box::new(
            ResponsesAdapter::builder("gpt-5")
                .api_key(KEY)
                .base_url(format!("{base}/v1"))
                .max_retries(0)
                .build()
                .unwrap(),
        ),
        Box::new(
            GeminiAdapter::builder()
                .api_key(KEY)
                .base_url(base)
                .explicit_cache(false)
                .max_retries(0)
                .build()
                .unwrap(),
        ),
    ]
}

/// The error that ends one streaming call of `model`.
async fn stream_error(model: &dyn ModelAdapter) -> ModelError {
    let prefix = StablePrefix::new("You are terse.");
    let history = [Message::user("hi")];
    let options = GenerationOptions::default();
    let events: Vec<_> = model
        .stream(ModelRequest::new(&prefix, &history, &options))
        .collect()
        .await;
    match events.last() {
        Some(Err(e)) => e.clone(),
        other => panic!("{}: the stream did not fail: {other:?}", model.provider()),
    }
}

async fn serving(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(template)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn a_streamed_html_page_says_what_the_server_sent_and_is_not_retryable() {
    // Trigger: a proxy's maintenance page with status 200 read as a cut stream ("try again").
    let server = serving(ResponseTemplate::new(200).set_body_raw(MAINTENANCE, "text/html")).await;
    for model in adapters(&server.uri()) {
        let err = stream_error(model.as_ref()).await;
        let ModelError::InvalidResponse(message) = &err else {
            panic!("{}: {err:?}", model.provider());
        };
        assert!(!err.is_retryable(), "{}: {err}", model.provider());
        for part in [
            "HTTP 200",
            "content type `text/html`",
            "Maintenance We are back soon",
            "not an event stream",
            &server.uri(),
        ] {
            assert!(
                message.contains(part),
                "{}: no `{part}` in {message}",
                model.provider()
            );
        }
    }
}

#[tokio::test]
async fn a_streamed_html_page_without_a_content_type_is_recognised_by_its_markup() {
    let server = serving(ResponseTemplate::new(200).set_body_bytes(MAINTENANCE)).await;
    for model in adapters(&server.uri()) {
        let err = stream_error(model.as_ref()).await;
        assert!(
            matches!(&err, ModelError::InvalidResponse(m) if m.contains("no content type") && m.contains("We are back soon")),
            "{}: {err:?}",
            model.provider()
        );
    }
}

#[tokio::test]
async fn streamed_json_that_is_not_an_answer_says_what_the_server_sent() {
    // Trigger: Gemini's stream endpoint without `alt=sse` answers a JSON array; a gateway
    // answers a JSON status object. Neither is an event stream nor the provider's answer.
    let body = r#"[{"status": "queued", "detail": "use the batch API"}]"#;
    let server = serving(ResponseTemplate::new(200).set_body_raw(body, "application/json")).await;
    for model in adapters(&server.uri()) {
        let err = stream_error(model.as_ref()).await;
        let ModelError::InvalidResponse(message) = &err else {
            panic!("{}: {err:?}", model.provider());
        };
        assert!(!err.is_retryable());
        assert!(
            message.contains("content type `application/json`")
                && message.contains("use the batch API"),
            "{}: {message}",
            model.provider()
        );
    }
}

#[tokio::test]
async fn a_streamed_page_never_shows_the_key() {
    let page = format!("<html><body>bad key {KEY}</body></html>");
    let server = serving(ResponseTemplate::new(200).set_body_raw(page, "text/html")).await;
    for model in adapters(&server.uri()) {
        let err = stream_error(model.as_ref()).await;
        let shown = err.to_string();
        assert!(
            !shown.contains(KEY) && shown.contains("[redacted]"),
            "{shown}"
        );
    }
}
