//! Error bodies in Google's shape mapped to typed errors, the retry delay taken from
//! `google.rpc.RetryInfo`, and the key kept out of every message.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use halo_core::{
    GenerationOptions, InvalidRequestKind, Message, ModelAdapter, ModelError, StablePrefix,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::{KEY, builder, request};

/// Answers from a FIFO script and counts the requests.
#[derive(Clone, Default)]
struct Script(Arc<Mutex<(VecDeque<ResponseTemplate>, usize)>>);

impl Respond for Script {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let mut s = self.0.lock().unwrap();
        s.1 += 1;
        s.0.pop_front()
            .unwrap_or_else(|| ResponseTemplate::new(418).set_body_string("script exhausted"))
    }
}

impl Script {
    fn requests(&self) -> usize {
        self.0.lock().unwrap().1
    }
}

async fn fake(script: Vec<ResponseTemplate>) -> (MockServer, Script) {
    let server = MockServer::start().await;
    let responder = Script(Arc::new(Mutex::new((script.into(), 0))));
    Mock::given(method("POST"))
        .and(path("/v1beta/models/gemini-2.5-flash:generateContent"))
        .respond_with(responder.clone())
        .mount(&server)
        .await;
    (server, responder)
}

fn google_error(code: u16, status: &str, message: &str, details: Value) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_json(json!({
        "error": {"code": code, "message": message, "status": status, "details": details}
    }))
}

fn ok_text(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 2, "totalTokenCount": 10},
        "modelVersion": "gemini-2.5-flash"
    }))
}

fn rate_limited(delay: &str) -> ResponseTemplate {
    google_error(
        429,
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
        json!([
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
        ]),
    )
}

async fn call(base: &str, retries: u32) -> Result<halo_core::ModelResponse, ModelError> {
    let model = builder(base)
        .max_retries(retries)
        .retry_min_delay(Duration::from_millis(1))
        .build()
        .unwrap();
    let prefix = StablePrefix::new("s");
    let history = [Message::user("hi")];
    let options = GenerationOptions::default();
    model.generate(request(&prefix, &history, &options)).await
}

#[tokio::test]
async fn a_429_carries_the_retry_info_delay_and_is_retried_then_succeeds() {
    let (server, script) = fake(vec![rate_limited("0.013s"), ok_text("ok")]).await;
    let out = call(&server.uri(), 2).await.unwrap();
    assert_eq!(out.message.text, "ok");
    assert_eq!(script.requests(), 2);
    assert_eq!(out.usage.input_tokens, Some(8));

    // Without retries the error itself shows the delay the body asked for.
    let (server, _) = fake(vec![rate_limited("45.837906927s")]).await;
    let err = call(&server.uri(), 0).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::RateLimited {
            retry_after: Some(Duration::new(45, 837_906_927)),
            message: "You exceeded your current quota, please check your plan and billing details. (status RESOURCE_EXHAUSTED)".into(),
        }
    );
}

#[tokio::test]
async fn server_errors_are_retried_and_a_daily_quota_is_not() {
    let unavailable = || {
        google_error(
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
            json!([]),
        )
    };
    let (server, script) = fake(vec![unavailable(), unavailable(), ok_text("done")]).await;
    assert_eq!(call(&server.uri(), 2).await.unwrap().message.text, "done");
    assert_eq!(script.requests(), 3);

    let (server, script) = fake(vec![unavailable(), unavailable()]).await;
    let err = call(&server.uri(), 1).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Server { status: 503, .. }),
        "{err:?}"
    );
    assert_eq!(script.requests(), 2, "one try and one retry");

    let daily = google_error(
        429,
        "RESOURCE_EXHAUSTED",
        "Quota exceeded for metric: generate_content_free_tier_requests, limit: 250",
        json!([
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}
        ]),
    );
    let (server, script) = fake(vec![daily]).await;
    let err = call(&server.uri(), 2).await.unwrap_err();
    assert!(
        matches!(err, ModelError::InsufficientBalance { status: 429, .. }),
        "{err:?}"
    );
    assert_eq!(script.requests(), 1, "a per-day quota is not retried");
}

#[tokio::test]
async fn client_errors_are_typed_excerpted_and_never_hold_the_key() {
    let long = format!(
        "API key not valid: {KEY}. {}",
        "Please pass a valid API key. ".repeat(40)
    );
    let (server, script) = fake(vec![google_error(
        400,
        "INVALID_ARGUMENT",
        &long,
        json!([]),
    )])
    .await;
    let err = call(&server.uri(), 2).await.unwrap_err();
    let ModelError::InvalidRequest {
        status: 400,
        kind: InvalidRequestKind::Other,
        message,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(
        message.starts_with("API key not valid: [redacted]. Please pass"),
        "{message}"
    );
    assert!(
        message.len() <= 500 + "…".len() + " (status INVALID_ARGUMENT)".len(),
        "{}",
        message.len()
    );
    assert!(!err.to_string().contains(KEY));
    assert_eq!(script.requests(), 1, "400 is not retried");

    let (server, _) = fake(vec![google_error(
        403,
        "PERMISSION_DENIED",
        "Method doesn't allow unregistered callers",
        json!([]),
    )])
    .await;
    assert!(matches!(
        call(&server.uri(), 2).await.unwrap_err(),
        ModelError::Authentication { status: 403, .. }
    ));

    let (server, _) = fake(vec![google_error(
        404,
        "NOT_FOUND",
        "models/gemini-2.5-flash is not found for API version v1beta",
        json!([]),
    )])
    .await;
    let err = call(&server.uri(), 2).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Http {
            status: 404,
            message: format!(
                "models/gemini-2.5-flash is not found for API version v1beta (status \
                     NOT_FOUND); `{}/v1beta/models/gemini-2.5-flash:generateContent` was not \
                     found: check the base URL and the model name",
                server.uri()
            )
        }
    );
}

#[tokio::test]
async fn a_200_body_that_is_not_a_response_is_invalid() {
    let (server, _) = fake(vec![
        ResponseTemplate::new(200).set_body_string("<html>proxy</html>"),
    ])
    .await;
    assert!(matches!(
        call(&server.uri(), 0).await.unwrap_err(),
        ModelError::InvalidResponse(_)
    ));
}

#[test]
fn debug_output_hides_the_key() {
    let model = builder("http://127.0.0.1:9").build().unwrap();
    let shown = format!("{model:?} {:?}", builder("http://127.0.0.1:9"));
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("[redacted]"));
}

#[tokio::test]
async fn a_bad_key_is_an_authentication_error_naming_gemini_api_key() {
    // Trigger: Gemini answers a wrong key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
    let (server, _) = fake(vec![google_error(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]),
    )])
    .await;
    let e = call(&server.uri(), 2).await.unwrap_err();
    assert_eq!(
        e,
        ModelError::Authentication {
            status: 400,
            message: "API key not valid. Please pass a valid API key. (status INVALID_ARGUMENT); check GEMINI_API_KEY".into(),
        }
    );
    assert!(!e.is_retryable());
}

#[tokio::test]
async fn a_404_names_the_full_url_and_says_to_check_the_base_url_and_model() {
    // Trigger: a wrong model name or base URL (nothing mounted at the path: 404).
    let (server, _) = fake(vec![]).await;
    let e = call(&format!("{}/wrong", server.uri()), 0)
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(404));
    assert!(
        e.to_string().ends_with(&format!(
            "; `{}/wrong/v1beta/models/gemini-2.5-flash:generateContent` was not found: check \
             the base URL and the model name",
            server.uri()
        )),
        "{e}"
    );
}

#[tokio::test]
async fn a_base_url_with_the_models_path_is_refused_saying_what_to_drop() {
    // Trigger: a `generateContent` URL copied from the API reference as the base URL would
    // be posted to `.../models/gemini-2.5-flash:generateContent/v1beta/models/...`.
    let (server, script) = fake(vec![ok_text("hello")]).await;
    let api = format!("{}/v1beta", server.uri());
    for (base, dropped) in [
        (
            format!("{api}/models/gemini-2.5-flash:generateContent"),
            "/models/gemini-2.5-flash:generateContent",
        ),
        (
            format!("{api}/models/gemini-2.5-flash:streamGenerateContent/"),
            "/models/gemini-2.5-flash:streamGenerateContent",
        ),
        (format!("{api}/models"), "/models"),
    ] {
        let e = builder(&base).build().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "invalid base URL `{base}`: it ends in `{dropped}`, which the adapter appends \
                 itself; drop it and pass `{api}`"
            )
        );
    }
    // The suggested base URL works end to end.
    let out = call(&api, 0).await.unwrap();
    assert_eq!(out.message.text, "hello");
    assert_eq!(script.requests(), 1);
}

#[test]
fn a_base_url_without_a_scheme_is_a_config_error_saying_to_add_it() {
    // Trigger: GEMINI_BASE_URL=127.0.0.1:9 ("relative URL without a base").
    for base in ["127.0.0.1:9", "localhost:9"] {
        let e = builder(base).build().unwrap_err();
        assert!(
            e.to_string().contains("include `http://` or `https://`"),
            "{e}"
        );
    }
}

#[tokio::test]
async fn invalid_requests_name_their_kind_from_the_message_or_field_violations() {
    // Each error as the Gemini API sends it (sources in `gemini/error.rs`).
    let bad_request = |field: &str, description: &str| {
        json!([{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [
            {"field": field, "description": description}
        ]}])
    };
    let unknown = "Invalid JSON payload received. Unknown name \"additionalProperties\" at 'tools[0].function_declarations[0].parameters': Cannot find field.";
    let cases = vec![
        (
            google_error(
                400,
                "INVALID_ARGUMENT",
                "The input token count (132478) exceeds the maximum number of tokens allowed (131072).",
                json!([]),
            ),
            InvalidRequestKind::ContextWindowExceeded,
        ),
        (
            google_error(
                400,
                "INVALID_ARGUMENT",
                "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:read_file` , position 2. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                json!([]),
            ),
            InvalidRequestKind::ReasoningReplayMissing,
        ),
        (
            google_error(
                400,
                "INVALID_ARGUMENT",
                unknown,
                bad_request("tools[0].function_declarations[0].parameters", unknown),
            ),
            InvalidRequestKind::ToolSchemaRejected,
        ),
        (
            google_error(
                400,
                "INVALID_ARGUMENT",
                "Request contains an invalid argument.",
                json!([]),
            ),
            InvalidRequestKind::Other,
        ),
    ];
    let expected: Vec<_> = cases.iter().map(|c| c.1).collect();
    let (server, script) = fake(cases.into_iter().map(|c| c.0).collect()).await;
    for kind in expected {
        let err = call(&server.uri(), 0).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::InvalidRequest { status: 400, kind: got, .. } if *got == kind),
            "{kind:?}: {err:?}"
        );
        assert!(!err.is_retryable(), "{err:?}");
    }
    assert_eq!(script.requests(), 4);
}
