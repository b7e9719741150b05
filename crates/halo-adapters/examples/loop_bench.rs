//! The per-step cost benchmark of a tool loop (`cargo xtask bench loop`, which runs this
//! example in release mode): CPU time per step of a 20-step tool loop (19 tool calls, then
//! an answer) through `HaloAgent::generate_text` and `OpenAiCompatible`, run many times.
//! It prints one `loop-bench {json}` line; xtask puts the figures side by side with rig's.
//!
//! ```text
//! loop_bench own    HISTORY RUNS          Halo's own work: no HTTP (see below)
//! loop_bench engine HISTORY RUNS          the same without the request body and parsing
//! loop_bench http   HISTORY RUNS BASE_URL the whole step, against a loopback fake
//! ```
//!
//! - **own**: the adapter is [`InProcess`], which does what `OpenAiCompatible::generate`
//!   does except the HTTP exchange: the request body is built with
//!   [`OpenAiCompatible::request_body`] (the bytes `generate` sends, written as `generate`
//!   writes them: only the messages added since the history's last body) and the canned
//!   `chat.completion` is read with [`OpenAiCompatible::parse_response`] (what `generate`
//!   does with a 2xx body). So the figure is the run engine, the ledger, tool dispatch and
//!   argument validation, the request serialization and the response parsing: everything
//!   of a step but the kernel, hyper and reqwest.
//! - **engine**: as `own`, but the adapter builds no body and hands out the response parsed
//!   beforehand (a clone): the run engine, the ledger and the tools alone. `own` − `engine`
//!   is the request body and the response parsing. (Timing those inside a step instead
//!   would add the clock's own cost: `CLOCK_PROCESS_CPUTIME_ID` is a system call.)
//! - **http**: the real `OpenAiCompatible::custom(BASE_URL, ..)` against xtask's loopback
//!   fake, which runs in the xtask process, so its CPU is not counted here.
//!
//! CPU is the process's (`CLOCK_PROCESS_CPUTIME_ID`, every thread; the runtime is tokio's
//! current-thread one) over the `generate_text` calls only: building the agent and
//! restoring its state before each run are not timed.
//!
//! HISTORY is the mean number of history messages per request. 20 is a fresh session (the
//! loop's requests carry 1, 3, …, 39 messages). A larger one is a session that already had
//! runs of this loop: the log is pre-filled with HISTORY − 60 messages of earlier runs, one
//! more run is made untimed (so the ledger and the history check have seen the log, as in
//! a live session), then one from a clone of that state (so the adapter has kept a body of
//! a history forked there), and every timed run starts from a clone of that state, carrying
//! HISTORY − 60 + 41, …, + 79 messages. The log's capacity is large enough that nothing
//! is evicted. A clone shares its history up to the clone with the earlier runs' clones
//! (`HistoryKey`), so the adapter reuses the body it kept of the previous run up to there,
//! as a live session reuses its previous step's.
//!
//! The canned responses are those of the fake in `xtask/src/bench_loop.rs`: a `lookup`
//! call while fewer than 19 tool results follow the last user message, then an answer;
//! constant usage (every request 50,000 input tokens, 49,000 of them cached).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use async_trait::async_trait;
use halo_adapters::openai::OpenAiCompatible;
use halo_core::{
    AssistantMessage, HaloAgent, Message, ModelAdapter, ModelError, ModelRequest, ModelResponse,
    RunState, SharedModel, ToolCall, ToolResult,
};

#[path = "bench_common/mod.rs"]
mod bench_common;
use bench_common::{Lookup, SYSTEM, cpu_now, value};

/// Model calls per run: 19 tool calls, then the answer.
const STEPS: usize = 20;
/// Messages one run adds to the log: its user message, 19 calls with their results, the answer.
const RUN_MESSAGES: usize = 2 + 2 * (STEPS - 1);
/// Largest log the benchmark makes, in messages (so nothing is evicted).
const LOG_CAPACITY: usize = 1 << 16;

/// The `chat.completion` the fake answers after `tool_results` tool results (since the last
/// user message): a `lookup` call, or the answer once the loop made its 19 calls. Byte for
/// byte the one in `xtask/src/bench_loop.rs`.
fn completion(tool_results: usize) -> String {
    let usage = r#""usage":{"prompt_tokens":50000,"completion_tokens":12,"total_tokens":50012,"prompt_tokens_details":{"cached_tokens":49000}}"#;
    if tool_results + 1 < STEPS {
        let n = tool_results;
        format!(
            r#"{{"id":"chatcmpl-loop","object":"chat.completion","created":1700000000,"model":"loop-fake","choices":[{{"index":0,"message":{{"role":"assistant","content":null,"tool_calls":[{{"id":"call_{n}","type":"function","function":{{"name":"lookup","arguments":"{{\"key\":\"k{n}\"}}"}}}}]}},"finish_reason":"tool_calls"}}],{usage}}}"#
        )
    } else {
        format!(
            r#"{{"id":"chatcmpl-loop","object":"chat.completion","created":1700000000,"model":"loop-fake","choices":[{{"index":0,"message":{{"role":"assistant","content":"Done: looked up k0 to k{} and found every value."}},"finish_reason":"stop"}}],{usage}}}"#,
            STEPS - 2
        )
    }
}

/// `OpenAiCompatible` without the HTTP exchange: the request body `generate` would send is
/// built (and its length counted), and the canned response parsed as `generate` parses a
/// 2xx body.
struct InProcess {
    inner: OpenAiCompatible,
    /// `completion(n)` for each n, rendered once.
    responses: Vec<Vec<u8>>,
    /// The same, parsed once (for `engine` mode).
    parsed: Vec<ModelResponse>,
    /// Whether to build the body and parse the response (`own`), or only hand out the
    /// parsed response (`engine`).
    wire: bool,
    body_bytes: AtomicU64,
    history_messages: AtomicU64,
    calls: AtomicU64,
}

impl InProcess {
    /// Zeroes the counters (after the warm-up run).
    fn reset(&self) {
        for counter in [&self.body_bytes, &self.history_messages, &self.calls] {
            counter.store(0, Ordering::Relaxed);
        }
    }
}

#[async_trait]
impl ModelAdapter for InProcess {
    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.history_messages
            .fetch_add(request.history.len() as u64, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        let n = tool_results_since_user(request.history).min(STEPS - 1);
        if !self.wire {
            return Ok(self.parsed[n].clone());
        }
        let body = self.inner.request_body(&request)?;
        self.body_bytes
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        black_box(&body);
        self.inner.parse_response(&self.responses[n])
    }
}

/// Tool results after the last user message (what the fake counts in the body).
fn tool_results_since_user(history: &[Message]) -> usize {
    history
        .iter()
        .rev()
        .take_while(|m| !matches!(m, Message::User { .. }))
        .filter(|m| matches!(m, Message::Tool(_)))
        .count()
}

/// The messages one earlier run of the loop left in the log (run `i`).
fn past_run(i: usize) -> Vec<Message> {
    let mut out = vec![Message::user(format!(
        "Question {i}: which values do the keys k0 to k18 hold?"
    ))];
    for n in 0..STEPS - 1 {
        let key = format!("k{n}");
        let call = ToolCall::new(
            format!("call_{n}"),
            "lookup",
            format!(r#"{{"key":"{key}"}}"#),
        );
        out.push(Message::Assistant(AssistantMessage {
            tool_calls: vec![call.clone()],
            ..AssistantMessage::default()
        }));
        out.push(Message::Tool(ToolResult::ok(&call, value(&key))));
    }
    out.push(Message::assistant(
        "Done: looked up k0 to k18 and found every value.",
    ));
    out
}

/// `messages` messages of earlier runs, cut where the history is complete (never between a
/// call and its result).
fn prefill(messages: usize) -> Vec<Message> {
    let mut out: Vec<Message> = (0..)
        .map(past_run)
        .take(messages.div_ceil(RUN_MESSAGES))
        .flatten()
        .collect();
    out.truncate(messages);
    while matches!(out.last(), Some(Message::Assistant(a)) if !a.tool_calls.is_empty()) {
        out.pop();
    }
    out
}

/// The process's peak resident set (`VmHWM` of `/proc/self/status`), in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn agent(model: &SharedModel, state: Option<RunState>) -> anyhow::Result<HaloAgent> {
    let mut builder = HaloAgent::builder_shared(model.clone())
        .system(SYSTEM)
        .tool(Lookup)?
        .max_steps(STEPS)
        .log_capacity(LOG_CAPACITY);
    if let Some(state) = state {
        builder = builder.run_state(state);
    }
    let agent = builder.build();
    // The fingerprint is computed once per prefix; a long-lived agent has it already.
    black_box(agent.prefix().fingerprint());
    Ok(agent)
}

/// Runs the timed loop; `timed` is called once, after the untimed warm-up.
async fn bench(
    model: SharedModel,
    history: usize,
    runs: usize,
    timed: impl Fn(),
) -> anyhow::Result<String> {
    // The state every timed run starts from.
    let template = if history <= RUN_MESSAGES / 2 {
        None
    } else {
        let before = history.saturating_sub(RUN_MESSAGES + RUN_MESSAGES / 2);
        let mut warm = agent(&model, None)?;
        for m in prefill(before) {
            warm.log_mut().push(m);
        }
        warm.generate_text("Warm-up question: which values do k0 to k18 hold?")
            .await
            .context("the warm-up run failed")?;
        let template = warm.run_state().clone();
        // One more untimed run, from a clone like every timed run: the adapter keeps the
        // body of a history that forked where the timed runs' fork, as a live session
        // keeps its last step's (without it the first timed run writes the whole history).
        agent(&model, Some(template.clone()))?
            .generate_text("Warm-up question: which values do k0 to k18 hold?")
            .await
            .context("the second warm-up run failed")?;
        Some(template)
    };
    timed();
    let mut cpu = Duration::ZERO;
    let mut wall = Duration::ZERO;
    let mut steps = 0usize;
    for run in 0..runs {
        let mut agent = agent(&model, template.clone())?;
        let question = format!("Question {run}: which values do the keys k0 to k18 hold?");
        let (started, started_cpu) = (Instant::now(), cpu_now());
        let out = agent.generate_text(question).await;
        cpu += cpu_now() - started_cpu;
        wall += started.elapsed();
        let out = out.context("a timed run failed")?;
        if out.steps.len() != STEPS || !out.text.starts_with("Done") {
            bail!(
                "run {run} took {} steps and answered {:?}",
                out.steps.len(),
                out.text
            );
        }
        steps += out.steps.len();
    }
    let per_step = |d: Duration| d.as_secs_f64() * 1e6 / steps as f64;
    Ok(format!(
        r#"{{"steps":{steps},"cpu_us_per_step":{:.3},"wall_us_per_step":{:.3},"peak_rss_kib":{}"#,
        per_step(cpu),
        per_step(wall),
        peak_rss_kib()
    ))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: loop_bench own|engine HISTORY RUNS | loop_bench http HISTORY RUNS BASE_URL";
    let (mode, history, runs) = match args.as_slice() {
        [mode, history, runs, ..] => (
            mode.as_str(),
            history.parse::<usize>().context(usage)?,
            runs.parse::<usize>().context(usage)?,
        ),
        _ => bail!(usage),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let line = match (mode, args.get(3)) {
        (mode @ ("own" | "engine"), None) => {
            let inner = OpenAiCompatible::custom("http://127.0.0.1:9", "loop-fake").build()?;
            let responses: Vec<Vec<u8>> = (0..STEPS).map(|n| completion(n).into_bytes()).collect();
            let parsed = responses
                .iter()
                .map(|r| inner.parse_response(r))
                .collect::<Result<_, _>>()?;
            let model = Arc::new(InProcess {
                inner,
                responses,
                parsed,
                wire: mode == "own",
                body_bytes: AtomicU64::new(0),
                history_messages: AtomicU64::new(0),
                calls: AtomicU64::new(0),
            });
            let shared: SharedModel = model.clone();
            let mut line = runtime.block_on(bench(shared, history, runs, || model.reset()))?;
            let calls = model.calls.load(Ordering::Relaxed).max(1) as f64;
            line.push_str(&format!(
                r#","request_bytes_per_step":{:.0},"mean_history":{:.1}}}"#,
                model.body_bytes.load(Ordering::Relaxed) as f64 / calls,
                model.history_messages.load(Ordering::Relaxed) as f64 / calls,
            ));
            line
        }
        ("http", Some(url)) => {
            let model: SharedModel =
                Arc::new(OpenAiCompatible::custom(url.as_str(), "loop-fake").build()?);
            let mut line = runtime.block_on(bench(model, history, runs, || ()))?;
            line.push('}');
            line
        }
        _ => bail!(usage),
    };
    println!("loop-bench {line}");
    Ok(())
}
