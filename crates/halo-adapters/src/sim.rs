//! Provider prompt-cache simulators (feature `sim`): loopback HTTP fakes of the OpenAI,
//! DeepSeek, Anthropic and Gemini APIs that speak each provider's wire format and compute
//! the cached-token usage the way each provider documents it.
//!
//! The adapters' tests and `cargo xtask bench cache` run against them. Every simulator:
//! - serves on `127.0.0.1:<random port>` ([`serve`]) and is given to an adapter as its base
//!   URL;
//! - answers from a FIFO script of [`SimReply`]s (text or tool calls), rendered in the
//!   provider's JSON or SSE shape;
//! - counts tokens with a real BPE tokenizer ([`count_tokens`], OpenAI's `o200k_base` via
//!   `tiktoken-rs`), so cache figures are in tokens, not bytes;
//! - records every request body it receives.
//!
//! The OpenAI, DeepSeek and Anthropic simulators can be told to drop their cache
//! (`drop_cache`) to provoke a cache bust. [`gemini::GeminiSim::drop_cache`] drops only
//! Gemini's implicit cache: its explicit `cachedContents` objects are resources that stay
//! until they expire or are deleted, so a bust of one is provoked with
//! [`gemini::GeminiSim::expire_all`] (or by moving its clock past `expireTime`).
//!
//! The cache rules per provider live in the submodules, each citing its provider's
//! documentation.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

/// The methods of the reply script every simulator has (its state holds a [`Harness`] as
/// `harness`, behind a `lock()`): `push_reply`, `set_reply_script`, `remaining_replies`
/// and `context_window`. Each simulator writes its own `set_context_window`, whose docs
/// say which error its provider answers.
macro_rules! script_methods {
    () => {
        /// Appends one reply to the script.
        pub fn push_reply(&self, reply: $crate::sim::SimReply) {
            self.lock().harness.push(reply);
        }

        /// Replaces the script with `replies`, answered in order.
        pub fn set_reply_script(&self, replies: impl IntoIterator<Item = $crate::sim::SimReply>) {
            self.lock().harness.set_script(replies);
        }

        /// Replies not yet used.
        pub fn remaining_replies(&self) -> usize {
            self.lock().harness.remaining()
        }

        /// The context window set with `set_context_window`, in tokens (`None`: no
        /// limit), to give the agent under test the same window.
        pub fn context_window(&self) -> Option<u64> {
            self.lock().harness.window()
        }
    };
}

pub mod anthropic;
pub mod breakpoints;
pub mod gemini;
pub mod openai;
pub mod responses;

/// The tokenizer every simulator counts with: OpenAI's `o200k_base`.
use crate::tokens::bpe;

/// The token ids of `text` under `o200k_base` (special tokens are treated as plain text).
pub fn tokens(text: &str) -> Vec<u32> {
    bpe().encode_ordinary(text)
}

/// The number of `o200k_base` tokens in `text`.
pub fn count_tokens(text: &str) -> u64 {
    tokens(text).len() as u64
}

/// One scripted model answer a simulator renders in its provider's wire format.
///
/// A simulator answers each request with the next reply of its script and fails a request
/// that finds the script empty (HTTP 418). An agent run makes one model call per step, so
/// a run with one round of tools needs two replies: the tool call, then the text answer the
/// model gives after reading the result. The fake also works from your own crate (feature
/// `sim`) to try an agent and its tools without a provider:
///
/// ```
/// use halo_adapters::openai::OpenAiCompatible;
/// use halo_adapters::sim::{SimReply, openai::OpenAiSim};
/// use halo_core::{HaloAgent, Tool, ToolError, ToolOutput};
/// use serde_json::json;
///
/// struct Shout;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct ShoutArgs {
///     /// The text to upper-case.
///     text: String,
/// }
/// impl Tool for Shout {
///     type Args = ShoutArgs;
///     fn name(&self) -> &str { "shout" }
///     fn description(&self) -> &str { "Upper-cases a text." }
///     async fn call(&self, args: ShoutArgs) -> Result<ToolOutput, ToolError> {
///         Ok(args.text.to_uppercase().into())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let sim = OpenAiSim::openai().await?;
/// sim.set_reply_script([
///     SimReply::tool_call("shout", json!({"text": "hello"})),
///     SimReply::text("It says HELLO."),
/// ]);
/// let model = OpenAiCompatible::custom(sim.base_url(), "sim-model").build()?;
/// let mut agent = HaloAgent::builder(model).tool(Shout)?.build();
///
/// let out = agent.generate_text("Shout hello.").await?;
/// assert_eq!(out.steps[0].tool_results[0].content, "HELLO");
/// assert_eq!(out.text, "It says HELLO.");
/// // The second request carried the call and its result.
/// let second = &sim.requests()[1];
/// assert_eq!(second["messages"][2]["role"], "tool");
/// assert_eq!(second["messages"][2]["content"], "HELLO");
/// assert_eq!(sim.remaining_replies(), 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum SimReply {
    /// A plain text answer (finish reason "stop" / `end_turn` / `STOP`).
    Text(String),
    /// One or more tool calls: `(tool name, arguments object)`, in order.
    ToolCalls(Vec<(String, Value)>),
}

impl SimReply {
    /// A text answer: the model's final reply of a run (finish reason "stop").
    pub fn text(text: impl Into<String>) -> Self {
        SimReply::Text(text.into())
    }

    /// A text answer holding `value` as compact JSON: a scripted structured-output answer
    /// (what a model writes under OpenAI's `json_schema`, Gemini's `responseSchema` or
    /// Anthropic's `output_config.format`).
    pub fn json(value: &Value) -> Self {
        SimReply::Text(value.to_string())
    }

    /// A single call of the tool `name` with an `arguments` object, such as
    /// `SimReply::tool_call("weather", json!({"city": "Oslo"}))`. The agent checks the
    /// arguments against the tool's schema, as it does a real model's; arguments that do
    /// not fit become an error result the next reply answers. The simulator gives the call
    /// an id in its provider's format.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        SimReply::ToolCalls(vec![(name.into(), arguments)])
    }
}

/// The error message of a request that finds the reply script empty (HTTP 418).
pub const SCRIPT_EXHAUSTED: &str = "the simulator's reply script is exhausted: script one SimReply per model call (a tool call, then the answer after its result)";

/// A running loopback server; the server task stops when this is dropped.
#[derive(Debug)]
pub struct SimServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl SimServer {
    /// `http://127.0.0.1:<port>` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `router` on `127.0.0.1` at a free port, on the current tokio runtime.
///
/// # Errors
/// The IO error when no loopback port can be bound.
pub async fn serve(router: axum::Router) -> std::io::Result<SimServer> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        // The server ends only when the task is aborted (the SimServer is dropped).
        let _ = axum::serve(listener, router).await;
    });
    Ok(SimServer { addr, task })
}

/// The length of the longest common prefix of two token sequences.
pub fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A simulator's state, locked. A panic while holding the lock leaves consistent data
/// (records are pushed whole), so a poisoned lock is used as it is.
fn lock<S>(state: &Mutex<S>) -> MutexGuard<'_, S> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Tokens per text, computed once (histories repeat, so most pieces are seen before).
#[derive(Debug, Default)]
struct TokenMemo(HashMap<String, Arc<[u32]>>);

impl TokenMemo {
    /// The `o200k_base` tokens of `text`.
    fn tokens(&mut self, text: &str) -> Arc<[u32]> {
        if let Some(t) = self.0.get(text) {
            return t.clone();
        }
        let t: Arc<[u32]> = tokens(text).into();
        self.0.insert(text.to_string(), t.clone());
        t
    }
}

/// Every token sequence a simulator was sent, for `seen_prefix_tokens`; dropping the cache
/// keeps it.
#[derive(Debug, Default)]
struct Seen(Vec<Arc<[u32]>>);

impl Seen {
    /// The longest common prefix, in tokens, of `seq` and anything sent before (0 when
    /// nothing was).
    fn longest_prefix(&self, seq: &[u32]) -> usize {
        self.0
            .iter()
            .map(|earlier| common_prefix(earlier, seq))
            .max()
            .unwrap_or(0)
    }

    /// Remembers `seq` as sent.
    fn push(&mut self, seq: Arc<[u32]>) {
        self.0.push(seq);
    }
}

/// The reply to a compaction's summary request (the request's last message carries
/// [`COMPACTION_PROMPT`](halo_core::context::COMPACTION_PROMPT)), answered by every simulator
/// without taking a reply from its script: a text summary that names how many tool results
/// the history held. `last` is the request's last message or content, in any provider's
/// shape; `None` for any other request.
pub(crate) fn summary_reply(history: Option<&Value>) -> Option<SimReply> {
    let history = history?.as_array()?;
    let last = history.last()?;
    if !last
        .to_string()
        .contains(halo_core::context::COMPACTION_PROMPT)
    {
        return None;
    }
    let text = Value::Array(history.clone()).to_string();
    let results = text.matches("\"tool_call_id\"").count()
        + text.matches("\"tool_result\"").count()
        + text.matches("\"functionResponse\"").count();
    Some(SimReply::text(format!(
        "The session so far: {results} tool results were read; the task is under way."
    )))
}

/// What every simulator keeps besides its cache: the FIFO reply script and the context
/// window it enforces.
#[derive(Debug, Default)]
pub(crate) struct Harness {
    script: VecDeque<SimReply>,
    context_window: Option<u64>,
}

impl Harness {
    pub(crate) fn push(&mut self, reply: SimReply) {
        self.script.push_back(reply);
    }

    pub(crate) fn set_script(&mut self, replies: impl IntoIterator<Item = SimReply>) {
        self.script = replies.into_iter().collect();
    }

    pub(crate) fn remaining(&self) -> usize {
        self.script.len()
    }

    /// The context window in tokens (`None`: no limit).
    pub(crate) fn window(&self) -> Option<u64> {
        self.context_window
    }

    pub(crate) fn set_window(&mut self, tokens: Option<u64>) {
        self.context_window = tokens;
    }

    /// The window, when a request of `tokens` exceeds it.
    pub(crate) fn exceeded(&self, tokens: u64) -> Option<u64> {
        self.context_window.filter(|&w| tokens > w)
    }

    /// The answer to a request whose history (messages or contents, in the provider's
    /// shape) is `history`: a compaction's summary ([`summary_reply`], which uses no
    /// scripted reply), else the script's next reply; `None` when the script is exhausted.
    pub(crate) fn reply(&mut self, history: Option<&Value>) -> Option<SimReply> {
        summary_reply(history).or_else(|| self.script.pop_front())
    }
}

/// `s` split into pieces of about `size` bytes on character boundaries (how the
/// simulators stream a text or an argument string).
pub(crate) fn pieces(s: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + size).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    out
}
