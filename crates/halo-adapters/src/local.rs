//! The embedded model: a GGUF file run in-process by llama.cpp (through `llama-cpp-2`), with
//! its KV cache kept between calls.
//!
//! [`LocalAdapter`] implements [`ModelAdapter`] with no network and no API key. The default
//! model is SmolLM2-135M-Instruct, Q4_1 (98 MB); `cargo xtask model` fetches it into the cache
//! folder that [`default_model_path`] names, and `HALO_MODEL=/path/to/any.gguf` picks another.
//!
//! # The prompt
//!
//! Requests are rendered with the model's own chat template (the GGUF's
//! `tokenizer.chat_template`, applied by llama.cpp's `llama_chat_apply_template`), or the one
//! [`LocalConfig::chat_template`] names. A model without one gets a llama.cpp built-in
//! template by its `general.architecture`: Gemma's (`<start_of_turn>user` / `model` turns,
//! the system text put at the start of the first user turn) for the Gemma family, whose
//! pretrained checkpoints ship without a template, and ChatML for the rest. Nothing in the
//! format needs special tokens of its own: tool calls are plain text that the grammar
//! constrains, so any model can be held to them. The turns are:
//!
//! 1. a `system` turn: [`StablePrefix::system_text`], then, when there are tools, the tool
//!    section. It follows SmolLM2's function-calling format (a `<tools>` JSON list and
//!    `<tool_call>[...]</tool_call>` replies, from its model card), with compact JSON:
//!    ```text
//!    You have access to the following tools:
//!    <tools>[{"name":"read","description":"...","parameters":{...JSON Schema...}}]</tools>
//!
//!    To call tools, answer with only a list of calls in this format:
//!    <tool_call>[{"name":"func_name1","arguments":{"argument1":"value1"}}]</tool_call>
//!    Tool results come back inside <tool_response></tool_response>. When no tool call is needed, answer in plain text.
//!    ```
//! 2. the few-shot turns of the prefix, then the history, in order;
//! 3. assistant turns: their text, then their calls, exactly as generated:
//!    `<tool_call>[{"name":"read","arguments":{"path":"notes.txt"}}]</tool_call>`;
//! 4. tool results: one turn per run of consecutive results, with one block per result,
//!    `<tool_response>\n{content}\n</tool_response>` (`error: ` put before the content of an
//!    error result that does not already say so). The turn's role is `tool` when the chat
//!    template renders that role (ChatML, hence SmolLM2, does: SmolLM2 follows a result given
//!    in a `tool` turn much better than in a `user` turn), else `user`.
//!
//! User text goes through the tokenizer with special-token parsing on, as llama.cpp's server
//! does: text that spells a special token (`<|im_end|>`) becomes that token.
//!
//! # Constrained decoding
//!
//! Tool calls are decoded under a GBNF grammar built from the tools' JSON Schemas by
//! llama.cpp's own converter, so a returned call always names a tool of the request and its
//! arguments are JSON that fits that tool's schema. [`ToolChoice`] is enforced by the grammar:
//!
//! | `tool_choice` | decoding |
//! |---|---|
//! | `Auto` | free text; from the moment the model writes `<tool_call>` the grammar applies (a *lazy* grammar) |
//! | `Required` | the grammar applies from the first token: one `<tool_call>` block of one or more calls |
//! | `Tool(name)` | as `Required`, with `name` the only tool |
//! | `None` | free text; generation stops before a `<tool_call>` |
//!
//! A block cut short by `max_tokens` is returned as text with [`FinishReason::Length`], never
//! as a call. [`ResponseFormat::Json`] constrains the answer to JSON (fitting the schema, if
//! given); with tools under `Auto` the grammar allows either a tool-call block or the JSON
//! answer.
//!
//! SmolLM2-135M does not decide well by itself when to call a tool: under `Auto` it answers
//! from nothing, or calls the same tool again and again. [`AutoToolChoice::CallThenAnswer`]
//! resolves `Auto` by the shape of the conversation instead; with `rounds: 1`, few-shot turns
//! showing one call, its result and an answer, and read-only tools, the default model reads
//! the file a task names and then answers.
//!
//! # The KV cache
//!
//! The context keeps the tokens of the last call (prompt and generated). A new call tokenizes
//! its whole prompt, keeps the longest common token prefix with what the context holds, drops
//! the rest from the KV cache and evaluates only the new tokens (at least one, for the
//! logits). [`Usage::cache_read_tokens`] is exactly the number of kept tokens,
//! `input_tokens` the prompt's tokens, `cache_write_tokens` the evaluated ones (the rest),
//! and `output_tokens` the sampled tokens, the end-of-turn token included. Rendering is
//! append-only: each turn is tokenized on its own, so the tokens of a prompt are a prefix of
//! the tokens of any later prompt whose history only grew, and an agent step re-evaluates only
//! its new turns.
//!
//! The context holds one conversation: calls from different conversations share the cache
//! only up to where their prompts differ (the system prompt and tools, when equal).
//!
//! # Threads
//!
//! The model and its context live on a dedicated worker thread; [`LocalAdapter::generate`]
//! sends it the request and awaits the answer, so inference never blocks the async executor
//! and calls are served one at a time. llama.cpp's log lines go to `tracing` (target
//! `llama-cpp-2`); filter them with `llama-cpp-2=warn`.

mod grammar;
mod prompt;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{OnceLock, mpsc};
use std::time::Instant;

use async_trait::async_trait;
use halo_core::{
    AssistantMessage, FinishReason, GenerationOptions, Message, ModelAdapter, ModelCapabilities,
    ModelError, ModelEventStream, ModelRequest, ModelResponse, ModelStreamEvent, ResponseFormat,
    StablePrefix, ToolChoice, Usage,
};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use tokio::sync::oneshot;

/// The file name of the default model, SmolLM2-135M-Instruct quantized to Q4_1.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// How to get a model, appended to every "no model" error.
const MODEL_HINT: &str = "set HALO_MODEL=/path/to/any.gguf, or put the default model \
     (SmolLM2-135M-Instruct, 98 MB) at that path (`cargo xtask model` in a clone of the Halo \
     repository fetches it there)";

/// The model file to load: `$HALO_MODEL` when set, else
/// `<cache>/models/SmolLM2-135M-Instruct.Q4_1.gguf` where `<cache>` is `$HALO_CACHE_DIR`,
/// else `$XDG_CACHE_HOME/halo`, else `$HOME/.cache/halo` (else `.cache/halo` in the current
/// folder). The file need not exist.
pub fn default_model_path() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(path) = var("HALO_MODEL") {
        return PathBuf::from(path);
    }
    let cache = if let Some(dir) = var("HALO_CACHE_DIR") {
        PathBuf::from(dir)
    } else if let Some(dir) = var("XDG_CACHE_HOME") {
        PathBuf::from(dir).join("halo")
    } else {
        var("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(".cache")
            .join("halo")
    };
    cache.join("models").join(DEFAULT_MODEL_FILE)
}

/// Settings of a [`LocalAdapter`]. Build with `LocalConfig::default()` and the `with_*`
/// methods.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LocalConfig {
    /// Context window in tokens (prompt and answer); capped at the model's training context.
    /// Default 8192.
    pub context_tokens: u32,
    /// Most tokens evaluated per llama.cpp batch. Default 512.
    pub batch_tokens: u32,
    /// CPU threads; `None` uses every available core. Default `None`.
    pub threads: Option<u32>,
    /// Sampling seed when the request gives none. Default `0x5EED`.
    pub seed: u32,
    /// Most tokens generated per call when the request gives no `max_tokens`. Default 1024.
    pub max_tokens: u32,
    /// Sampling temperature when the request gives none; `0` picks the most likely token
    /// every time (greedy). Default 0.
    pub temperature: f32,
    /// How [`ToolChoice::Auto`] is resolved. Default [`AutoToolChoice::ModelDecides`].
    pub auto_tool_choice: AutoToolChoice,
    /// The chat template to render requests with instead of the model's own: the name of one
    /// of llama.cpp's built-in templates (`chatml`, `gemma`, `llama3`, ...) or a template text
    /// llama.cpp recognizes. Default `None`: the model's own template, or for a model without
    /// one, Gemma's turns for the Gemma family and ChatML for the rest.
    pub chat_template: Option<String>,
}

/// How a [`LocalAdapter`] resolves [`ToolChoice::Auto`].
///
/// A model as small as SmolLM2-135M rarely decides well when to call a tool: left alone it
/// answers from nothing, or calls the same tool again and again. `CallThenAnswer` takes the
/// decision away from it, by the shape of the conversation since the last user message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AutoToolChoice {
    /// The model decides: it answers in free text, or writes `<tool_call>`, from which point
    /// the grammar holds it to a block of one or more valid calls.
    #[default]
    ModelDecides,
    /// When the request has tools: the step right after a user message must call a tool (as
    /// [`ToolChoice::Required`]); the step after `rounds` tool-call rounds (since that user
    /// message) must answer (as [`ToolChoice::None`]); the model decides in between.
    /// `rounds` is at least 1. Made for SmolLM2-135M: with `rounds: 1` and one few-shot
    /// example of a call, its result and an answer, it reliably reads a file and then answers.
    CallThenAnswer {
        /// Tool-call rounds allowed per user message.
        rounds: u32,
    },
}

impl AutoToolChoice {
    /// The tool choice a request with `choice`, `history` and (`has_tools`) tools is decoded
    /// under.
    fn resolve(self, choice: &ToolChoice, history: &[Message], has_tools: bool) -> ToolChoice {
        let AutoToolChoice::CallThenAnswer { rounds } = self else {
            return choice.clone();
        };
        if *choice != ToolChoice::Auto || !has_tools {
            return choice.clone();
        }
        let since_user = history
            .iter()
            .rposition(|m| matches!(m, Message::User { .. }))
            .map(|at| &history[at + 1..]);
        let Some(since_user) = since_user else {
            return ToolChoice::Auto;
        };
        let made = since_user
            .iter()
            .filter(|m| !m.tool_calls().is_empty())
            .count();
        if since_user.is_empty() {
            ToolChoice::Required
        } else if made >= rounds.max(1) as usize {
            ToolChoice::None
        } else {
            ToolChoice::Auto
        }
    }
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            context_tokens: 8192,
            batch_tokens: 512,
            threads: None,
            seed: 0x5EED,
            max_tokens: 1024,
            temperature: 0.0,
            auto_tool_choice: AutoToolChoice::ModelDecides,
            chat_template: None,
        }
    }
}

impl LocalConfig {
    /// Sets [`context_tokens`](Self::context_tokens).
    pub fn with_context_tokens(mut self, n: u32) -> Self {
        self.context_tokens = n;
        self
    }
    /// Sets [`batch_tokens`](Self::batch_tokens).
    pub fn with_batch_tokens(mut self, n: u32) -> Self {
        self.batch_tokens = n;
        self
    }
    /// Sets [`threads`](Self::threads).
    pub fn with_threads(mut self, n: u32) -> Self {
        self.threads = Some(n);
        self
    }
    /// Sets [`seed`](Self::seed).
    pub fn with_seed(mut self, seed: u32) -> Self {
        self.seed = seed;
        self
    }
    /// Sets [`max_tokens`](Self::max_tokens).
    pub fn with_max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }
    /// Sets [`temperature`](Self::temperature).
    pub fn with_temperature(mut self, t: f32) -> Self {
        self.temperature = t;
        self
    }
    /// Sets [`auto_tool_choice`](Self::auto_tool_choice).
    pub fn with_auto_tool_choice(mut self, policy: AutoToolChoice) -> Self {
        self.auto_tool_choice = policy;
        self
    }
    /// Sets [`chat_template`](Self::chat_template).
    pub fn with_chat_template(mut self, template: impl Into<String>) -> Self {
        self.chat_template = Some(template.into());
        self
    }
}

/// A request's prompt as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedPrompt {
    /// The prompt text after the chat template, ending with the assistant generation prompt.
    pub text: String,
    /// The prompt's token ids in the model's vocabulary; their count is
    /// [`Usage::input_tokens`] of a call with this request.
    pub tokens: Vec<i32>,
}

/// An in-process llama.cpp model. See the [module docs](self) for the prompt format, the
/// grammar and the cache.
///
/// ```no_run
/// # async fn demo() -> Result<(), halo_core::ModelError> {
/// use halo_adapters::local::{LocalAdapter, LocalConfig};
/// use halo_core::HaloAgent;
///
/// let model = LocalAdapter::load_default(LocalConfig::default())?;
/// let mut agent = HaloAgent::builder(model).system("You are terse.").build();
/// let answer = agent.generate_text("Say hello.").await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LocalAdapter {
    jobs: mpsc::Sender<Job>,
    model_name: String,
    path: PathBuf,
    context_tokens: u32,
}

impl LocalAdapter {
    /// Loads the GGUF model at `path` and starts its worker thread. Blocks while the model
    /// loads (about a second for the default model).
    ///
    /// # Errors
    /// [`ModelError::Local`] when the file is missing or llama.cpp cannot load it or create
    /// its context; the message says how to get a model.
    pub fn load(path: impl AsRef<Path>, config: LocalConfig) -> Result<Self, ModelError> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            return Err(ModelError::Local(format!(
                "no model file at {}; {MODEL_HINT}",
                path.display()
            )));
        }
        let backend = backend()?;
        let model_name = path
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(".gguf").to_string())
            .unwrap_or_else(|| "local".to_string());
        let (jobs, inbox) = mpsc::channel();
        let (ready_tx, ready) = mpsc::sync_channel(1);
        let thread_path = path.clone();
        std::thread::Builder::new()
            .name("halo-local-model".into())
            .spawn(move || worker_main(backend, &thread_path, config, &ready_tx, &inbox))
            .map_err(|e| ModelError::Local(format!("cannot start the model thread: {e}")))?;
        let context_tokens = ready.recv().map_err(|_| {
            ModelError::Local(format!(
                "the model thread stopped while loading {}",
                path.display()
            ))
        })??;
        Ok(LocalAdapter {
            jobs,
            model_name,
            path,
            context_tokens,
        })
    }

    /// Loads the model at [`default_model_path`].
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub fn load_default(config: LocalConfig) -> Result<Self, ModelError> {
        Self::load(default_model_path(), config)
    }

    /// Loads the model at [`default_model_path`] with the default [`LocalConfig`].
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub fn from_env() -> Result<Self, ModelError> {
        Self::load_default(LocalConfig::default())
    }

    /// The model file this adapter runs.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The context window in tokens (after capping at the model's training context).
    pub fn context_tokens(&self) -> u32 {
        self.context_tokens
    }

    /// Renders and tokenizes a request exactly as [`generate`](ModelAdapter::generate) would,
    /// without running the model.
    ///
    /// # Errors
    /// As `generate` for requests that cannot be rendered (an image part, a NUL byte).
    pub async fn render(&self, request: ModelRequest<'_>) -> Result<RenderedPrompt, ModelError> {
        let (reply, answer) = oneshot::channel();
        self.send(Job::Render(OwnedRequest::from(request), reply))?;
        answer.await.map_err(|_| stopped())?
    }

    fn send(&self, job: Job) -> Result<(), ModelError> {
        self.jobs.send(job).map_err(|_| stopped())
    }
}

#[async_trait]
impl ModelAdapter for LocalAdapter {
    fn provider(&self) -> &str {
        "local"
    }

    fn model_name(&self) -> &str {
        &self.model_name
    }

    /// JSON answers and tool calls are decoded under a grammar
    /// ([constrained decoding](self#constrained-decoding)): native structured output with
    /// and without tools, and forced tool calls. Active tools are not narrowed in the
    /// grammar; the agent answers a call of an inactive tool with an error result.
    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities::new()
            .with_native_output_with_tools(true)
            .with_forced_tool(true)
    }

    /// The loaded model's context, `n_ctx` ([`context_tokens`](Self::context_tokens)): the
    /// configured size capped at the model's training context.
    fn context_window(&self) -> Option<u64> {
        Some(u64::from(self.context_tokens))
    }

    /// Runs one call on the worker thread.
    ///
    /// # Errors
    /// [`ModelError::Local`] when the prompt does not fit the context window or llama.cpp
    /// fails to evaluate it; [`ModelError::Unsupported`] for an image part or a
    /// `tool_choice` naming no tool of the request.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the answer; the worker still finishes the call, so its
    /// KV cache stays consistent.
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let (reply, answer) = oneshot::channel();
        self.send(Job::Generate(OwnedRequest::from(request), reply))?;
        answer.await.map_err(|_| stopped())?
    }

    /// Runs one call on the worker thread, streaming answer text token by token. Text that
    /// may turn out to be a `<tool_call>` block or a stop sequence is held back until it is
    /// known not to be; tool calls arrive whole, after the text, once decoding has ended.
    ///
    /// # Cancel safety
    /// Dropping the stream stops generation at the next token; the KV cache keeps what was
    /// evaluated, so the next call stays consistent.
    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        let (events, receiver) = futures::channel::mpsc::unbounded();
        match self.send(Job::Stream(OwnedRequest::from(request), events)) {
            Ok(()) => Box::pin(receiver),
            Err(e) => Box::pin(futures::stream::once(futures::future::ready(Err(e)))),
        }
    }
}

/// The events that end a streamed call: the text `on_text` did not yet receive, each tool
/// call as a start and its whole argument string, then the finish.
fn final_events(response: ModelResponse, streamed: usize) -> Vec<ModelStreamEvent> {
    let mut events = Vec::new();
    if let Some(rest) = response
        .message
        .text
        .get(streamed..)
        .filter(|r| !r.is_empty())
    {
        events.push(ModelStreamEvent::TextDelta(rest.to_string()));
    }
    for (index, call) in response.message.tool_calls.iter().enumerate() {
        events.push(ModelStreamEvent::ToolCallStart {
            index,
            id: call.id.to_string(),
            name: call.name.to_string(),
        });
        events.push(ModelStreamEvent::ToolCallDelta {
            index,
            arguments: call.raw_arguments.to_string(),
        });
    }
    events.push(ModelStreamEvent::Finish(response));
    events
}

/// Releases generated answer text as soon as it is certain: never a `<tool_call>` block or
/// anything after its start, never a tail that could still become the start of that block or
/// of a stop sequence, never half a UTF-8 character. So what it released is always a prefix
/// of the call's final text, and the rest can follow at the end.
#[derive(Debug, Default)]
struct TextStreamer {
    /// Bytes of the output released so far.
    sent: usize,
    /// A `<tool_call>` block began: nothing more is released until the end.
    blocked: bool,
}

impl TextStreamer {
    fn ready(&mut self, output: &[u8], stops: &[&[u8]]) -> Option<String> {
        if self.blocked {
            return None;
        }
        let open = prompt::CALL_OPEN.as_bytes();
        let mut limit = output.len();
        if let Some(at) = output.windows(open.len()).position(|w| w == open) {
            limit = at;
            self.blocked = true;
        } else {
            for pattern in stops.iter().copied().chain([open]) {
                let held = (1..pattern.len())
                    .rev()
                    .find(|&k| output.ends_with(&pattern[..k]))
                    .unwrap_or(0);
                limit = limit.min(output.len() - held);
            }
        }
        let chunk = output.get(self.sent..limit)?;
        let valid = match std::str::from_utf8(chunk) {
            Ok(s) => s.len(),
            Err(e) => e.valid_up_to(),
        };
        if valid == 0 {
            return None;
        }
        self.sent += valid;
        Some(String::from_utf8_lossy(&chunk[..valid]).into_owned())
    }
}

fn stopped() -> ModelError {
    ModelError::Local(
        "the local model thread has stopped (see the logs for why); load the model again".into(),
    )
}

/// The process-wide llama.cpp backend, initialized once with its logs sent to `tracing`.
fn backend() -> Result<&'static LlamaBackend, ModelError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| ModelError::Local(format!("cannot initialize llama.cpp: {e}")))
}

/// A request with owned parts, sent to the worker.
struct OwnedRequest {
    prefix: StablePrefix,
    history: Vec<Message>,
    options: GenerationOptions,
}

impl From<ModelRequest<'_>> for OwnedRequest {
    fn from(r: ModelRequest<'_>) -> Self {
        OwnedRequest {
            prefix: r.prefix.clone(),
            history: r.history.to_vec(),
            options: r.options.clone(),
        }
    }
}

enum Job {
    Generate(
        OwnedRequest,
        oneshot::Sender<Result<ModelResponse, ModelError>>,
    ),
    Stream(
        OwnedRequest,
        futures::channel::mpsc::UnboundedSender<Result<ModelStreamEvent, ModelError>>,
    ),
    Render(
        OwnedRequest,
        oneshot::Sender<Result<RenderedPrompt, ModelError>>,
    ),
}

fn worker_main(
    backend: &'static LlamaBackend,
    path: &Path,
    config: LocalConfig,
    ready: &mpsc::SyncSender<Result<u32, ModelError>>,
    inbox: &mpsc::Receiver<Job>,
) {
    let model = match LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()) {
        Ok(m) => m,
        Err(e) => {
            let _ = ready.send(Err(ModelError::Local(format!(
                "llama.cpp cannot load {} as a GGUF model ({e}); {MODEL_HINT}",
                path.display()
            ))));
            return;
        }
    };
    let mut worker = match Worker::new(backend, &model, config) {
        Ok(w) => w,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    if ready.send(Ok(worker.n_ctx)).is_err() {
        return;
    }
    while let Ok(job) = inbox.recv() {
        match job {
            Job::Generate(request, reply) => {
                let result = guarded(&mut worker, |w| w.generate(&request, &mut |_| true));
                let _ = reply.send(result.map(|(response, _)| response));
            }
            Job::Stream(request, events) => {
                let mut sink = |delta: String| {
                    events
                        .unbounded_send(Ok(ModelStreamEvent::TextDelta(delta)))
                        .is_ok()
                };
                match guarded(&mut worker, |w| w.generate(&request, &mut sink)) {
                    Ok((response, streamed)) => {
                        for event in final_events(response, streamed) {
                            if events.unbounded_send(Ok(event)).is_err() {
                                break;
                            }
                        }
                    }
                    Err(e) => {
                        let _ = events.unbounded_send(Err(e));
                    }
                }
            }
            Job::Render(request, reply) => {
                let result = guarded(&mut worker, |w| {
                    w.render(&request).map(|(text, tokens)| RenderedPrompt {
                        text,
                        tokens: tokens.iter().map(|t| t.0).collect(),
                    })
                });
                let _ = reply.send(result);
            }
        }
    }
}

/// Runs a job; a panic in it (a bug, or an `expect` inside `llama-cpp-2`) becomes an error,
/// and the KV cache is emptied since its bookkeeping may no longer be true. The worker lives on.
fn guarded<T>(
    worker: &mut Worker<'_>,
    job: impl FnOnce(&mut Worker<'_>) -> Result<T, ModelError>,
) -> Result<T, ModelError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&mut *worker))) {
        Ok(result) => result,
        Err(panic) => {
            worker.ctx.clear_kv_cache();
            worker.cached.clear();
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(ModelError::Local(format!(
                "the local model call panicked ({message}); its cache was reset and the call can be retried"
            )))
        }
    }
}

/// The model, its context and what the context's KV cache holds.
struct Worker<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    template: LlamaChatTemplate,
    tool_role: &'static str,
    /// The tokens whose keys and values are in the KV cache, at positions 0, 1, ...
    cached: Vec<LlamaToken>,
    config: LocalConfig,
    n_ctx: u32,
    n_batch: usize,
    calls_made: u64,
}

impl<'m> Worker<'m> {
    fn new(
        backend: &LlamaBackend,
        model: &'m LlamaModel,
        config: LocalConfig,
    ) -> Result<Self, ModelError> {
        let n_ctx = config.context_tokens.clamp(16, model.n_ctx_train().max(16));
        let n_batch = config.batch_tokens.clamp(1, n_ctx);
        let threads = config
            .threads
            .or_else(|| {
                std::thread::available_parallelism()
                    .ok()
                    .and_then(|n| u32::try_from(n.get()).ok())
            })
            .unwrap_or(1)
            .clamp(1, 512) as i32;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(n_batch)
            .with_n_ubatch(n_batch)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let ctx = model.new_context(backend, params).map_err(|e| {
            ModelError::Local(format!(
                "llama.cpp cannot create a context of {n_ctx} tokens ({e}); \
                 try a smaller LocalConfig::context_tokens"
            ))
        })?;
        let (template, tool_role) = chat_template(model, config.chat_template.as_deref())?;
        Ok(Worker {
            model,
            ctx,
            batch: LlamaBatch::new(n_batch as usize, 1),
            template,
            tool_role,
            cached: Vec::new(),
            config,
            n_ctx,
            n_batch: n_batch as usize,
            calls_made: 0,
        })
    }

    fn apply_template(
        &self,
        chat: &[LlamaChatMessage],
        add_ass: bool,
    ) -> Result<String, ModelError> {
        self.model
            .apply_chat_template(&self.template, chat, add_ass)
            .map_err(|e| ModelError::Local(format!("cannot apply the model's chat template ({e})")))
    }

    /// The prompt text and tokens of a request. Each turn is tokenized on its own (and an
    /// assistant turn's generation prompt apart from its content), so a longer history only
    /// appends tokens.
    fn render(&self, request: &OwnedRequest) -> Result<(String, Vec<LlamaToken>), ModelError> {
        let turns = prompt::turns(&request.prefix, &request.history, self.tool_role)?;
        let chat = turns
            .iter()
            .map(|t| LlamaChatMessage::new(t.role.to_string(), t.content.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| {
                ModelError::Unsupported(
                    "a message contains a NUL byte, which llama.cpp cannot take; remove it".into(),
                )
            })?;
        let vocab = self.model.vocab();
        let tokenize = |s: &str, out: &mut Vec<LlamaToken>| {
            vocab.tokenize_into(s.as_bytes(), out, false, true);
        };
        let mut tokens = Vec::new();
        if vocab.should_add_bos() {
            tokens.push(vocab.bos());
        }
        // Turn boundaries: each prefix of the chat must render to a prefix of the next one.
        let mut segments = Vec::with_capacity(chat.len() + 1);
        let mut rendered = String::new();
        for k in 1..=chat.len() {
            let next = self.apply_template(&chat[..k], false)?;
            match next.strip_prefix(rendered.as_str()) {
                Some(segment) => segments.push(segment.to_string()),
                None => {
                    // Not an append-only template: tokenize the whole prompt at once.
                    let text = self.apply_template(&chat, true)?;
                    let tokens = vocab.tokenize(text.as_bytes(), true, true);
                    return Ok((text, tokens));
                }
            }
            rendered = next;
        }
        let text = self.apply_template(&chat, true)?;
        let generation_prompt = text.get(rendered.len()..).unwrap_or_default().to_string();
        for (turn, segment) in turns.iter().zip(&segments) {
            match segment.strip_prefix(generation_prompt.as_str()) {
                Some(content) if turn.role == "assistant" && !generation_prompt.is_empty() => {
                    tokenize(&generation_prompt, &mut tokens);
                    tokenize(content, &mut tokens);
                }
                _ => tokenize(segment, &mut tokens),
            }
        }
        tokenize(&generation_prompt, &mut tokens);
        Ok((text, tokens))
    }

    /// Runs one call. `on_text` receives answer text as it is generated (see
    /// [`TextStreamer`]) and returns `false` to stop generating (the consumer is gone).
    /// Returns the response and how many bytes of its text `on_text` received.
    fn generate(
        &mut self,
        request: &OwnedRequest,
        on_text: &mut dyn FnMut(String) -> bool,
    ) -> Result<(ModelResponse, usize), ModelError> {
        let options = &request.options;
        let json_answer = match &options.response_format {
            ResponseFormat::Text => None,
            ResponseFormat::Json { schema } => Some(schema.as_ref()),
        };
        let choice = self.config.auto_tool_choice.resolve(
            &options.tool_choice,
            &request.history,
            !request.prefix.tools().is_empty(),
        );
        let constraint = grammar::constraint(request.prefix.tools(), &choice, json_answer)?;
        let mut grammar = match &constraint.grammar {
            Some(text) => Some(self.grammar_sampler(text, constraint.trigger)?),
            None => None,
        };
        let (_, prompt) = self.render(request)?;
        let n_prompt = prompt.len();
        let max_new = options.max_tokens.unwrap_or(self.config.max_tokens).max(1) as usize;
        if n_prompt + 1 > self.n_ctx as usize {
            return Err(ModelError::Local(format!(
                "the prompt has {n_prompt} tokens but the context window holds {}; \
                 shorten the history (a smaller log capacity) or load the model with a larger \
                 LocalConfig::context_tokens",
                self.n_ctx
            )));
        }

        let started = Instant::now();
        let (reused, mut logits_at) = self.prefill(&prompt)?;
        let prefill_ms = started.elapsed().as_secs_f64() * 1000.0;

        let mut chain = self.picker(options);
        let mut stops: Vec<&[u8]> = options
            .stop
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.as_bytes())
            .collect();
        if !constraint.tools_allowed && !request.prefix.tools().is_empty() {
            // `tool_choice: none` with tools in the prompt: a call the model starts ends the answer.
            stops.push(prompt::CALL_OPEN.as_bytes());
        }
        let vocab = self.model.vocab();
        let mut output: Vec<u8> = Vec::new();
        let mut generated = 0usize;
        let mut finish = FinishReason::Length;
        let mut streamer = TextStreamer::default();
        let started = Instant::now();
        loop {
            let token = self.sample(logits_at, grammar.as_mut(), &mut chain)?;
            generated += 1;
            if vocab.is_eog(token) || vocab.is_control(token) {
                finish = FinishReason::Stop;
                break;
            }
            if let Some(g) = grammar.as_mut() {
                g.try_accept(token).map_err(|e| {
                    ModelError::Local(format!("the grammar refused a sampled token ({e})"))
                })?;
            }
            vocab.token_to_piece_into(token, &mut output, false, None);
            if let Some(cut) = stop_at(&output, &stops, constraint.tools_allowed) {
                output.truncate(cut);
                finish = FinishReason::Stop;
                break;
            }
            if let Some(delta) = streamer.ready(&output, &stops)
                && !on_text(delta)
            {
                break;
            }
            if generated >= max_new || self.cached.len() >= self.n_ctx as usize {
                break;
            }
            self.batch.clear();
            let pos = self.cached.len() as i32;
            self.batch
                .add(token, pos, &[0], true)
                .map_err(|e| ModelError::Local(format!("cannot queue a token ({e})")))?;
            self.decode()?;
            self.cached.push(token);
            logits_at = 0;
        }
        let decode_ms = started.elapsed().as_secs_f64() * 1000.0;
        tracing::debug!(
            prompt_tokens = n_prompt,
            reused_tokens = reused,
            prefill_ms,
            generated_tokens = generated,
            decode_ms,
            "local model call"
        );

        let output = String::from_utf8_lossy(&output).into_owned();
        let parsed = if constraint.tools_allowed {
            let base = self.calls_made;
            let mut n = 0;
            prompt::parse_output(&output, || {
                n += 1;
                format!("call_{base}_{n}")
            })
        } else {
            prompt::Parsed {
                text: output,
                calls: Vec::new(),
            }
        };
        self.calls_made += 1;
        if !parsed.calls.is_empty() {
            finish = FinishReason::ToolCalls;
        }
        let response = ModelResponse {
            id: None,
            message: AssistantMessage {
                text: parsed.text,
                reasoning: Vec::new(),
                tool_calls: parsed.calls,
            },
            finish_reason: finish,
            usage: Usage {
                input_tokens: Some(n_prompt as u64),
                output_tokens: Some(generated as u64),
                cache_read_tokens: Some(reused as u64),
                cache_write_tokens: Some((n_prompt - reused) as u64),
                reasoning_tokens: None,
            },
            model: Some(
                self.model
                    .meta_val_str("general.name")
                    .unwrap_or_else(|_| "local".into()),
            ),
            provider: None,
        };
        Ok((response, streamer.sent))
    }

    /// Keeps the longest common prefix of `prompt` with the cache (all but at least one
    /// token), drops the rest, evaluates the remainder. Returns the kept count and the batch
    /// index of the last prompt token's logits.
    fn prefill(&mut self, prompt: &[LlamaToken]) -> Result<(usize, i32), ModelError> {
        let common = self
            .cached
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        let mut reused = common.min(prompt.len().saturating_sub(1));
        if reused < self.cached.len() {
            let from = u32::try_from(reused).unwrap_or(u32::MAX);
            let removed = self
                .ctx
                .clear_kv_cache_seq(Some(0), Some(from), None)
                .unwrap_or(false);
            if !removed {
                self.ctx.clear_kv_cache();
                reused = 0;
            }
            self.cached.truncate(reused);
        }
        let mut logits_at = 0;
        let n_batch = self.n_batch;
        for chunk in prompt[reused..].chunks(n_batch) {
            self.batch.clear();
            let start = self.cached.len();
            for (j, token) in chunk.iter().enumerate() {
                let last = start + j + 1 == prompt.len();
                self.batch
                    .add(*token, (start + j) as i32, &[0], last)
                    .map_err(|e| ModelError::Local(format!("cannot queue a token ({e})")))?;
            }
            self.decode()?;
            self.cached.extend_from_slice(chunk);
            logits_at = chunk.len() as i32 - 1;
        }
        Ok((reused, logits_at))
    }

    /// Evaluates the batch; on failure the cache is emptied so its bookkeeping stays true.
    fn decode(&mut self) -> Result<(), ModelError> {
        self.ctx.decode(&mut self.batch).map_err(|e| {
            self.ctx.clear_kv_cache();
            self.cached.clear();
            ModelError::Local(format!(
                "llama.cpp failed to evaluate tokens ({e}); the context holds {} tokens",
                self.n_ctx
            ))
        })
    }

    fn grammar_sampler(
        &self,
        grammar: &str,
        trigger: Option<&str>,
    ) -> Result<LlamaSampler, ModelError> {
        let sampler = match trigger {
            Some(trigger) => {
                LlamaSampler::grammar_lazy(self.model, grammar, "root", [trigger], &[])
            }
            None => LlamaSampler::grammar(self.model, grammar, "root"),
        };
        sampler.map_err(|e| {
            tracing::warn!(grammar, "llama.cpp rejected a grammar");
            ModelError::Local(format!(
                "llama.cpp rejected the grammar built from the tool schemas ({e}); \
                 simplify the parameter schemas"
            ))
        })
    }

    fn picker(&self, options: &GenerationOptions) -> Picker {
        let temperature = options.temperature.unwrap_or(self.config.temperature);
        if temperature <= 0.0 || temperature.is_nan() {
            return Picker::Greedy;
        }
        let seed = options.seed.map_or(self.config.seed, |s| s as u32);
        Picker::Chain(LlamaSampler::chain_simple([
            LlamaSampler::top_k(40),
            LlamaSampler::top_p(0.95, 1),
            LlamaSampler::min_p(0.05, 1),
            LlamaSampler::temp(temperature),
            LlamaSampler::dist(seed),
        ]))
    }

    /// Picks the next token from the logits at batch index `at`. The chain picks from all
    /// tokens; when a grammar is given and refuses that pick, the grammar masks every token it
    /// forbids and the chain picks again (llama.cpp's `common_sampler` does the same: checking
    /// one token is much cheaper than masking the vocabulary). Nothing is accepted here:
    /// `LlamaSampler::sample` would accept into the grammar itself, and a second accept of
    /// the same token makes llama.cpp throw through the FFI boundary, aborting the process.
    fn sample(
        &self,
        at: i32,
        grammar: Option<&mut LlamaSampler>,
        chain: &mut Picker,
    ) -> Result<LlamaToken, ModelError> {
        let logits = self.ctx.get_logits_ith(at);
        let token = chain.pick(logits, None)?;
        let Some(grammar) = grammar else {
            return Ok(token);
        };
        let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
        one.apply_sampler(grammar);
        if one
            .data
            .first()
            .is_some_and(|d| d.logit() > f32::NEG_INFINITY)
        {
            return Ok(token);
        }
        chain.pick(logits, Some(grammar))
    }
}

/// Picks a token from logits: the most likely one (greedy), or a sample from a sampler chain.
enum Picker {
    Greedy,
    Chain(LlamaSampler),
}

impl Picker {
    fn pick(
        &mut self,
        logits: &[f32],
        grammar: Option<&mut LlamaSampler>,
    ) -> Result<LlamaToken, ModelError> {
        if grammar.is_none() && matches!(self, Picker::Greedy) {
            // The argmax without building a candidate array of the whole vocabulary.
            let best = logits
                .iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |best, (i, &l)| {
                    if l > best.1 { (i, l) } else { best }
                });
            return Ok(LlamaToken(best.0 as i32));
        }
        let mut candidates = LlamaTokenDataArray::new(
            logits
                .iter()
                .enumerate()
                .map(|(i, &l)| LlamaTokenData::new(LlamaToken(i as i32), l, 0.0))
                .collect(),
            false,
        );
        if let Some(grammar) = grammar {
            candidates.apply_sampler(grammar);
            if !candidates
                .data
                .iter()
                .any(|d| d.logit() > f32::NEG_INFINITY)
            {
                return Err(ModelError::Local(
                    "the grammar allows no next token; the tool schemas may be unsatisfiable"
                        .into(),
                ));
            }
        }
        match self {
            Picker::Greedy => candidates.apply_sampler(&mut LlamaSampler::greedy()),
            Picker::Chain(chain) => candidates.apply_sampler(chain),
        }
        candidates
            .selected_token()
            .ok_or_else(|| ModelError::Local("the sampler picked no token".into()))
    }
}

/// The llama.cpp built-in template for a model whose GGUF has no chat template of its own, by
/// its `general.architecture`: Gemma's turn format for the Gemma family (whose pretrained
/// checkpoints ship without a template but whose vocabulary has the `<start_of_turn>` and
/// `<end_of_turn>` tokens), ChatML for the rest.
fn builtin_template(architecture: &str) -> &'static str {
    if architecture.starts_with("gemma") {
        "gemma"
    } else {
        "chatml"
    }
}

/// The chat template (`chosen`, else the model's own, else when it has none or llama.cpp
/// cannot apply it the built-in template [`builtin_template`] names) and the role tool
/// results take.
fn chat_template(
    model: &LlamaModel,
    chosen: Option<&str>,
) -> Result<(LlamaChatTemplate, &'static str), ModelError> {
    let probe = LlamaChatMessage::new("user".into(), "hi".into()).ok();
    let applies = |t: &LlamaChatTemplate| {
        probe.as_ref().is_some_and(|p| {
            model
                .apply_chat_template(t, std::slice::from_ref(p), true)
                .is_ok()
        })
    };
    let template = match chosen {
        Some(name) => LlamaChatTemplate::new(name)
            .ok()
            .filter(applies)
            .ok_or_else(|| {
                ModelError::Local(format!(
                    "llama.cpp cannot apply the chat template `{name}` of LocalConfig::chat_template; \
                     name one of its built-in templates (chatml, gemma, llama3, ...) or give a \
                     template it recognizes"
                ))
            })?,
        None => match model.chat_template(None).ok().filter(applies) {
            Some(t) => t,
            None => {
            let architecture = model.meta_val_str("general.architecture").unwrap_or_default();
            let name = builtin_template(&architecture);
            tracing::info!(
                architecture,
                template = name,
                "the model has no chat template llama.cpp can apply; using a built-in one"
            );
            LlamaChatTemplate::new(name).map_err(|e| {
                ModelError::Local(format!("cannot name the {name} template ({e})"))
            })?
        }
        },
    };
    // Tool results take the role `tool` when the template renders that role as given (ChatML
    // and its kin do: SmolLM2 follows a tool_response in a `tool` turn far better than in a
    // `user` turn), and `user` otherwise.
    let probe = ["system", "user", "tool"]
        .iter()
        .map(|role| LlamaChatMessage::new((*role).into(), format!("halo-probe-{role}")))
        .collect::<Result<Vec<_>, _>>()
        .ok();
    let renders_tool_role = probe
        .and_then(|chat| model.apply_chat_template(&template, &chat, false).ok())
        .is_some_and(|text| {
            text.find("tool")
                .zip(text.find("halo-probe-tool"))
                .is_some_and(|(role, content)| role < content)
        });
    let tool_role = if renders_tool_role { "tool" } else { "user" };
    Ok((template, tool_role))
}

/// Where to cut `output` for the first stop sequence. Once a tool-call block has started
/// (`tools_allowed`), stop sequences no longer apply.
fn stop_at(output: &[u8], stops: &[&[u8]], tools_allowed: bool) -> Option<usize> {
    if stops.is_empty() {
        return None;
    }
    let open = prompt::CALL_OPEN.as_bytes();
    let end = if tools_allowed {
        output
            .windows(open.len())
            .position(|w| w == open)
            .unwrap_or(output.len())
    } else {
        output.len()
    };
    stops
        .iter()
        .filter_map(|s| output[..end].windows(s.len()).position(|w| w == *s))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `pieces` one at a time; returns what the streamer released at each step.
    fn stream_pieces(pieces: &[&[u8]], stops: &[&[u8]]) -> (Vec<String>, usize) {
        let mut streamer = TextStreamer::default();
        let mut output = Vec::new();
        let mut released = Vec::new();
        for p in pieces {
            output.extend_from_slice(p);
            if let Some(d) = streamer.ready(&output, stops) {
                released.push(d);
            }
        }
        (released, streamer.sent)
    }

    #[test]
    fn a_model_without_a_template_gets_its_familys_built_in_one() {
        for arch in ["gemma", "gemma2", "gemma3", "gemma3n"] {
            assert_eq!(builtin_template(arch), "gemma", "{arch}");
        }
        for arch in ["llama", "qwen2", "phi3", ""] {
            assert_eq!(builtin_template(arch), "chatml", "{arch}");
        }
    }

    #[test]
    fn text_streamer_releases_text_as_it_comes() {
        let (r, sent) = stream_pieces(&[b"Hel", b"lo", b" world"], &[]);
        assert_eq!(r, ["Hel", "lo", " world"]);
        assert_eq!(sent, 11);
    }

    #[test]
    fn text_streamer_holds_back_what_may_start_a_tool_call_or_a_stop() {
        // `<tool` could start `<tool_call>`: held until it can't.
        let (r, _) = stream_pieces(&[b"a <to", b"ol", b"box"], &[]);
        assert_eq!(r, ["a ", "<toolbox"]);
        // Once the block starts, nothing more is released.
        let (r, sent) = stream_pieces(&[b"x<tool_", b"call>[", b"]</tool_call>after"], &[]);
        assert_eq!((r, sent), (vec!["x".to_string()], 1));
        // A partial stop sequence is held (a whole one is cut from the output before the
        // streamer sees it).
        let (r, sent) = stream_pieces(&[b"one E", b"N"], &[b"END"]);
        assert_eq!((r, sent), (vec!["one ".to_string()], 4));
    }

    #[test]
    fn text_streamer_never_splits_a_utf8_character() {
        let euro = "€".as_bytes();
        let (r, sent) = stream_pieces(&[b"5 ", &euro[..1], &euro[1..], b"!"], &[]);
        assert_eq!(r, ["5 ", "€", "!"]);
        assert_eq!(sent, 6);
    }
    use halo_core::{ToolCall, ToolResult};

    #[test]
    fn call_then_answer_forces_a_call_after_the_user_and_an_answer_after_the_rounds() {
        let policy = AutoToolChoice::CallThenAnswer { rounds: 1 };
        let call = ToolCall::new("c1", "read", "{}");
        let step = Message::Assistant(AssistantMessage {
            tool_calls: vec![call.clone()],
            ..Default::default()
        });
        let result = Message::Tool(ToolResult::ok(&call, "x"));
        let mut history = vec![Message::user("old"), Message::assistant("hi")];
        history.push(Message::user("read it"));
        let auto = ToolChoice::Auto;
        assert_eq!(policy.resolve(&auto, &history, true), ToolChoice::Required);
        assert_eq!(policy.resolve(&auto, &history, false), ToolChoice::Auto);
        history.extend([step.clone(), result.clone()]);
        assert_eq!(policy.resolve(&auto, &history, true), ToolChoice::None);
        let two = AutoToolChoice::CallThenAnswer { rounds: 2 };
        assert_eq!(two.resolve(&auto, &history, true), ToolChoice::Auto);
        history.extend([step, result]);
        assert_eq!(two.resolve(&auto, &history, true), ToolChoice::None);
        assert_eq!(
            policy.resolve(&ToolChoice::Tool("x".into()), &history, true),
            ToolChoice::Tool("x".into())
        );
        assert_eq!(
            AutoToolChoice::ModelDecides.resolve(&auto, &history[..3], true),
            ToolChoice::Auto
        );
    }
}
