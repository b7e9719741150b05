//! The embedded llama.cpp model, run for real on the default model (SmolLM2-135M-Instruct).
//!
//! The model file is found with `default_model_path()`; CI fetches it first with
//! `cargo xtask model`. Without it these tests fail and say so, unless `HALO_SKIP_LOCAL=1`.
//! One model is loaded per test binary and shared; tests take turns on it (its KV cache holds
//! one conversation, and the cache test counts on what it holds). It runs with the
//! configuration the demo uses for this model: `AutoToolChoice::CallThenAnswer { rounds: 1 }`.

use std::sync::{Arc, OnceLock};

use halo_adapters::local::{AutoToolChoice, LocalAdapter, LocalConfig, default_model_path};
use halo_core::tool::{Tool, ToolError, ToolOutput};
use halo_core::{
    AssistantMessage, FinishReason, GenerationOptions, HaloAgent, Message, ModelAdapter,
    ModelError, ModelRequest, ModelResponse, StablePrefix, ToolCall, ToolChoice, ToolRegistry,
    ToolResult,
};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::{Mutex, MutexGuard};

/// The shared model, and the lock tests hold while they use it.
struct Shared {
    model: Arc<LocalAdapter>,
    turn: Mutex<()>,
}

/// The shared model, or `None` when `HALO_SKIP_LOCAL=1` and there is no model file.
fn shared() -> Option<&'static Shared> {
    static SHARED: OnceLock<Option<Shared>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let path = default_model_path();
            if !path.is_file() && std::env::var("HALO_SKIP_LOCAL").as_deref() == Ok("1") {
                eprintln!("skipping: HALO_SKIP_LOCAL=1 and no model at {}", path.display());
                return None;
            }
            assert!(
                path.is_file(),
                "no model at {}: run `cargo xtask model` first (or set HALO_SKIP_LOCAL=1 to skip these tests)",
                path.display()
            );
            let config = LocalConfig::default()
                .with_context_tokens(4096)
                .with_auto_tool_choice(AutoToolChoice::CallThenAnswer { rounds: 1 });
            let model = LocalAdapter::load(&path, config)
                .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()));
            Some(Shared {
                model: Arc::new(model),
                turn: Mutex::new(()),
            })
        })
        .as_ref()
}

async fn model() -> Option<(Arc<LocalAdapter>, MutexGuard<'static, ()>)> {
    let shared = shared()?;
    let turn = shared.turn.lock().await;
    Some((shared.model.clone(), turn))
}

struct Read;

#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    /// Path of the file, relative to the project root.
    path: String,
}

impl Tool for Read {
    type Args = ReadArgs;
    fn name(&self) -> &str {
        "read"
    }
    fn description(&self) -> &str {
        "Reads a text file and returns its content."
    }
    async fn call(&self, args: ReadArgs) -> Result<ToolOutput, ToolError> {
        match args.path.trim_start_matches("./") {
            "notes.txt" => Ok("     1\tBuy milk.\n     2\tCall Alice at 5 pm.".into()),
            other => Err(ToolError::Failed(format!(
                "no file named {other}; the only file is notes.txt"
            ))),
        }
    }
}

fn prefix_with_read() -> StablePrefix {
    StablePrefix::new("You are a coding agent. Use the tools to look at files.")
        .with_tool(halo_core::DynTool::spec(&Read))
        .unwrap()
}

fn common_prefix(a: &[i32], b: &[i32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[tokio::test]
async fn second_call_reads_exactly_the_shared_prefix_from_the_cache() {
    let Some((model, _turn)) = model().await else {
        return;
    };
    let prefix = prefix_with_read();
    let options = GenerationOptions::default()
        .with_tool_choice(ToolChoice::None)
        .with_max_tokens(8);
    let first = [Message::user("What is two plus two?")];
    let second = [Message::user("Name a colour of the sky.")];
    let request = |history| ModelRequest::new(&prefix, history, &options);

    let tokens_1 = model.render(request(&first)).await.unwrap().tokens;
    let tokens_2 = model.render(request(&second)).await.unwrap().tokens;
    let shared = common_prefix(&tokens_1, &tokens_2);
    assert!(shared > 50, "the system turn is shared: {shared} tokens");

    let r1 = model.generate(request(&first)).await.unwrap();
    assert_eq!(r1.usage.input_tokens, Some(tokens_1.len() as u64));
    let r2 = model.generate(request(&second)).await.unwrap();
    assert_eq!(r2.usage.input_tokens, Some(tokens_2.len() as u64));
    assert_eq!(r2.usage.cache_read_tokens, Some(shared as u64));
    assert_eq!(
        r2.usage.cache_write_tokens,
        Some((tokens_2.len() - shared) as u64)
    );
}

#[tokio::test]
async fn required_tool_choice_gives_a_call_that_fits_the_schema() {
    let Some((model, _turn)) = model().await else {
        return;
    };
    let prefix = prefix_with_read();
    let mut registry = ToolRegistry::new();
    registry.insert(Arc::new(Read)).unwrap();
    let options = GenerationOptions::default()
        .with_tool_choice(ToolChoice::Required)
        .with_max_tokens(64);
    let history = [Message::user("Show me what is in notes.txt")];
    let response = model
        .generate(ModelRequest::new(&prefix, &history, &options))
        .await
        .unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert!(!response.message.tool_calls.is_empty());
    for call in &response.message.tool_calls {
        let args = registry
            .check(call)
            .unwrap_or_else(|e| panic!("{e}: {}", call.raw_arguments));
        assert!(args["path"].is_string(), "{args}");
    }
}

#[tokio::test]
async fn agent_calls_a_tool_then_answers_with_the_cache_warm() {
    let Some((model, _turn)) = model().await else {
        return;
    };
    // The demo's set-up for SmolLM2-135M: one few-shot example of a call, its result and an
    // answer (and `CallThenAnswer { rounds: 1 }` in the adapter).
    let example = ToolCall::new("example_1", "read", r#"{"path":"todo.md"}"#);
    let mut agent = HaloAgent::builder_shared(model)
        .system("You are a coding agent. Use the tools to look at files.")
        .tool(Read)
        .unwrap()
        .few_shot([
            Message::user("What is in todo.md?"),
            Message::Assistant(AssistantMessage {
                tool_calls: vec![example.clone()],
                ..AssistantMessage::default()
            }),
            Message::Tool(ToolResult::ok(&example, "     1\t- fix the login bug")),
            Message::assistant("todo.md says: fix the login bug."),
        ])
        .max_steps(4)
        .options(GenerationOptions::default().with_max_tokens(128))
        .build();
    let result = agent
        .generate_text("What does notes.txt say?")
        .await
        .unwrap();
    let first = &result.steps[0];
    assert_eq!(first.finish_reason, FinishReason::ToolCalls);
    assert_eq!(first.message.tool_calls[0].name, "read");
    assert!(!first.tool_results[0].content.is_empty());
    assert_eq!(result.steps.len(), 2, "{:?}", result.steps);
    assert!(result.steps[1].message.tool_calls.is_empty());
    assert!(!result.text.trim().is_empty());
    for step in &result.steps[1..] {
        assert!(
            step.usage.cache_read_tokens.is_some_and(|n| n > 0),
            "{:?}",
            step.usage
        );
    }
}

#[tokio::test]
async fn a_prompt_longer_than_the_context_is_an_error() {
    if shared().is_none() {
        return;
    }
    let small = LocalAdapter::load(
        default_model_path(),
        LocalConfig::default().with_context_tokens(64),
    )
    .unwrap();
    let prefix = prefix_with_read();
    let options = GenerationOptions::default();
    let history = [Message::user("What does notes.txt say?")];
    let err = small
        .generate(ModelRequest::new(&prefix, &history, &options))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Local(m) if m.contains("context window holds 64")),
        "{err:?}"
    );
}

#[tokio::test]
async fn gemmas_template_puts_the_system_text_in_the_first_user_turn_and_only_appends() {
    if shared().is_none() {
        return;
    }
    // A Gemma GGUF without a template of its own (the pretrained Gemma 3 270M) gets llama.cpp's
    // built-in `gemma` template; the default model's vocabulary stands in for Gemma's here
    // (the text is the same, the token ids differ).
    let model = LocalAdapter::load(
        default_model_path(),
        LocalConfig::default()
            .with_context_tokens(2048)
            .with_chat_template("gemma"),
    )
    .unwrap();
    let prefix = prefix_with_read();
    let options = GenerationOptions::default();
    let call = ToolCall::new("c1", "read", r#"{"path":"notes.txt"}"#);
    let asked = vec![Message::user("What does notes.txt say?")];
    let mut answered = asked.clone();
    answered.extend([
        Message::Assistant(AssistantMessage {
            tool_calls: vec![call.clone()],
            ..AssistantMessage::default()
        }),
        Message::Tool(ToolResult::ok(&call, "Buy milk.")),
    ]);
    let render = |history| model.render(ModelRequest::new(&prefix, history, &options));
    let first = render(&asked).await.unwrap();
    let second = render(&answered).await.unwrap();
    assert!(
        first.text.starts_with(
            "<start_of_turn>user\nYou are a coding agent. Use the tools to look at files.\n\n\
             You have access to the following tools:\n<tools>[{\"name\":\"read\""
        ),
        "{}",
        first.text
    );
    assert!(
        first
            .text
            .ends_with("What does notes.txt say?<end_of_turn>\n<start_of_turn>model\n"),
        "{}",
        first.text
    );
    assert_eq!(
        &second.text[first.text.len()..],
        "<tool_call>[{\"name\":\"read\",\"arguments\":{\"path\":\"notes.txt\"}}]</tool_call>\
         <end_of_turn>\n<start_of_turn>tool\n<tool_response>\nBuy milk.\n</tool_response>\
         <end_of_turn>\n<start_of_turn>model\n"
    );
    // Append-only: the second prompt's tokens start with all of the first one's.
    assert!(second.tokens.len() > first.tokens.len());
    assert_eq!(second.tokens[..first.tokens.len()], first.tokens[..]);
}

#[test]
fn a_chat_template_llama_cpp_cannot_apply_is_an_error_that_says_so() {
    if shared().is_none() {
        return;
    }
    let err = LocalAdapter::load(
        default_model_path(),
        LocalConfig::default().with_chat_template("no-such-template"),
    )
    .unwrap_err();
    assert!(
        matches!(&err, ModelError::Local(m) if m.contains("`no-such-template`")),
        "{err:?}"
    );
}

// `generate` and `render` futures are `Send` (checked at compile time, never run).
const _: fn(&LocalAdapter, ModelRequest<'_>) = |model, request| {
    fn send<T: Send>(_: T) {}
    send(model.generate(request));
    send(model.render(request));
};

#[test]
fn a_missing_model_file_is_an_error_that_says_how_to_get_one() {
    let err =
        LocalAdapter::load("/nonexistent/halo/model.gguf", LocalConfig::default()).unwrap_err();
    let ModelError::Local(message) = &err else {
        panic!("{err:?}");
    };
    assert!(message.contains("cargo xtask model"), "{message}");
    assert!(message.contains("HALO_MODEL"), "{message}");
}

#[test]
fn a_file_that_is_not_gguf_is_an_error_not_a_crash() {
    let dir = std::env::temp_dir().join(format!("halo-local-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("not-a-model.gguf");
    std::fs::write(&path, b"this is not a gguf file").unwrap();
    let err = LocalAdapter::load(&path, LocalConfig::default()).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        matches!(&err, ModelError::Local(m) if m.contains("cannot load")),
        "{err:?}"
    );
}

/// Collects a streamed call's text deltas and its finish.
async fn stream_call(
    model: &LocalAdapter,
    prefix: &StablePrefix,
    history: &[Message],
    options: &GenerationOptions,
) -> (Vec<String>, Vec<halo_core::ModelStreamEvent>, ModelResponse) {
    use futures::StreamExt;
    let request = ModelRequest::new(prefix, history, options);
    let events: Vec<_> = model.stream(request).collect().await;
    let mut deltas = Vec::new();
    let mut others = Vec::new();
    let mut finish = None;
    for e in events {
        match e.expect("no error mid-stream") {
            halo_core::ModelStreamEvent::TextDelta(d) => deltas.push(d),
            halo_core::ModelStreamEvent::Finish(r) => finish = Some(r),
            other => others.push(other),
        }
    }
    (
        deltas,
        others,
        finish.expect("the stream ends with its finish"),
    )
}

#[tokio::test]
async fn streamed_text_arrives_token_by_token_and_adds_up_to_the_answer() {
    let Some((model, _turn)) = model().await else {
        return;
    };
    let prefix = StablePrefix::new("You are a helpful assistant.");
    let options = GenerationOptions::default().with_max_tokens(24);
    let history = [Message::user("Count from one to five in words.")];
    let (deltas, others, finish) = stream_call(&model, &prefix, &history, &options).await;
    assert!(others.is_empty(), "{others:?}");
    assert!(deltas.len() > 3, "several deltas, not one: {deltas:?}");
    assert_eq!(deltas.concat(), finish.message.text);
    assert!(
        finish
            .usage
            .output_tokens
            .is_some_and(|n| n as usize >= deltas.len())
    );
    // The same request through `generate` gives the same answer (greedy sampling).
    let again = model
        .generate(ModelRequest::new(&prefix, &history, &options))
        .await
        .unwrap();
    assert_eq!(again.message.text, finish.message.text);
}

#[tokio::test]
async fn a_streamed_tool_call_arrives_whole_after_the_text() {
    let Some((model, _turn)) = model().await else {
        return;
    };
    let prefix = prefix_with_read();
    let options = GenerationOptions::default().with_tool_choice(ToolChoice::Required);
    let history = [Message::user("What does notes.txt say?")];
    let (deltas, others, finish) = stream_call(&model, &prefix, &history, &options).await;
    assert_eq!(deltas.concat(), finish.message.text);
    assert_eq!(finish.message.tool_calls.len(), others.len() / 2);
    let call = &finish.message.tool_calls[0];
    assert_eq!(
        others[..2],
        [
            halo_core::ModelStreamEvent::ToolCallStart {
                index: 0,
                id: call.id.to_string(),
                name: "read".into()
            },
            halo_core::ModelStreamEvent::ToolCallDelta {
                index: 0,
                arguments: call.raw_arguments.to_string()
            },
        ]
    );
    assert_eq!(finish.finish_reason, FinishReason::ToolCalls);
}
