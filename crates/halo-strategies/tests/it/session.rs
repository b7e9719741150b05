//! A model whose usage says what a prompt cache would read, tools of chosen sizes, and the
//! checks every session must pass.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use halo_core::model::{FinishReason, ModelError, ModelRequest, ModelResponse, Usage};
use halo_core::{
    AssistantMessage, CacheVerdict, ContextConfig, ContextStrategy, HaloAgent, HaloError, Message,
    ModelAdapter, Tool, ToolCall, ToolError, ToolOutput, async_trait,
};
use serde::Deserialize;
use serde_json::json;

/// One scripted model turn.
#[derive(Debug, Clone)]
pub enum Turn {
    /// Parallel calls of `read` returning this many bytes each (or of `fail` when `None`).
    Calls(Vec<Option<usize>>),
    /// The same, and a steering message sent while they run (injected at the next step
    /// boundary).
    Steer(Vec<Option<usize>>),
    /// A final answer.
    Text,
}

/// A request as the model saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub prefix: Vec<u8>,
    pub history: Vec<Message>,
    /// Its size in tokens (bytes / 4), and what a cache would read of it.
    pub tokens: u64,
    pub cached: u64,
    /// The ids of the calls the model answered it with.
    pub issued: Vec<String>,
}

impl Seen {
    /// Whether this was a compaction's summary request.
    pub fn is_summary(&self) -> bool {
        matches!(self.history.last(),
            Some(m @ Message::User { .. }) if m.text() == halo_core::context::COMPACTION_PROMPT)
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Turn>,
    /// Summary requests answered (the history's last message is the compaction prompt).
    summaries: usize,
    /// Whether summary requests fail as over the window.
    refuse_summaries: bool,
    /// Summary requests over this many tokens fail as over the window.
    summary_limit: Option<u64>,
    /// Requests over this many tokens are refused with the context-window error.
    limit: Option<u64>,
    /// Requests refused so.
    refused: usize,
    /// Where [`Turn::Steer`] sends its message.
    steering: Option<halo_core::SteeringHandle>,
    seen: Vec<Seen>,
    /// The bytes of the previous request, message by message (the prefix first).
    previous: Vec<Vec<u8>>,
    calls: usize,
}

/// Answers from a script; reports `input_tokens` as the request's bytes / 4 and
/// `cache_read_tokens` as the leading bytes it shares with the previous request / 4.
#[derive(Clone, Default)]
pub struct CacheModel(Arc<Mutex<State>>);

impl CacheModel {
    pub fn new(script: impl IntoIterator<Item = Turn>) -> Self {
        let model = CacheModel::default();
        model.0.lock().unwrap().script = script.into_iter().collect();
        model
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.0.lock().unwrap().seen.clone()
    }

    /// Summary requests asked so far.
    pub fn summaries(&self) -> usize {
        self.0.lock().unwrap().summaries
    }

    /// Refuses requests over `tokens` with the provider's context-window error, as a server
    /// with that window does.
    pub fn limit(&self, tokens: u64) {
        self.0.lock().unwrap().limit = Some(tokens);
    }

    /// Requests refused as over the limit.
    pub fn refused(&self) -> usize {
        self.0.lock().unwrap().refused
    }

    /// Makes summary requests over `tokens` fail with the provider's context-window error.
    pub fn limit_summaries(&self, tokens: u64) {
        self.0.lock().unwrap().summary_limit = Some(tokens);
    }

    /// Makes every summary request fail with the provider's context-window error.
    pub fn refuse_summaries(&self) {
        self.0.lock().unwrap().refuse_summaries = true;
    }
}

#[async_trait]
impl ModelAdapter for CacheModel {
    fn provider(&self) -> &str {
        "cache-sim"
    }

    fn model_name(&self) -> &str {
        "cache-sim"
    }

    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mut state = self.0.lock().unwrap();
        let mut parts = vec![request.prefix.canonical_bytes().to_vec()];
        parts.extend(
            request
                .history
                .iter()
                .map(|m| serde_json::to_vec(m).unwrap()),
        );
        let total: usize = parts.iter().map(Vec::len).sum();
        let shared: usize = parts
            .iter()
            .zip(&state.previous)
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a.len())
            .sum();
        let (tokens, cached) = ((total / 4) as u64, (shared / 4) as u64);
        if state.limit.is_some_and(|limit| tokens > limit) {
            state.refused += 1;
            return Err(ModelError::InvalidRequest {
                status: 400,
                kind: halo_core::InvalidRequestKind::ContextWindowExceeded,
                message: format!("{tokens} tokens > {} maximum", state.limit.unwrap_or(0)),
            });
        }
        let summary = matches!(request.history.last(),
            Some(m @ Message::User { .. }) if m.text() == halo_core::context::COMPACTION_PROMPT);
        if summary {
            state.summaries += 1;
            // Refused before it is seen or cached, as a provider refuses it.
            if state.refuse_summaries || state.summary_limit.is_some_and(|l| tokens > l) {
                return Err(ModelError::InvalidRequest {
                    status: 400,
                    kind: halo_core::InvalidRequestKind::ContextWindowExceeded,
                    message: "the summary request is over the window".into(),
                });
            }
        }
        state.seen.push(Seen {
            prefix: parts[0].clone(),
            history: request.history.to_vec(),
            tokens,
            cached,
            issued: Vec::new(),
        });
        state.previous = parts;
        if summary {
            let files = request
                .history
                .iter()
                .filter(|m| matches!(m, Message::Tool(_)))
                .count();
            return Ok(ModelResponse {
                id: None,
                message: AssistantMessage {
                    text: format!("Read {files} files; the bug is in the parser's number rule."),
                    ..AssistantMessage::default()
                },
                finish_reason: FinishReason::Stop,
                usage: Usage {
                    input_tokens: Some(tokens),
                    output_tokens: Some(20),
                    cache_read_tokens: Some(cached),
                    ..Usage::default()
                },
                model: None,
                provider: None,
            });
        }
        let turn = state.script.pop_front().unwrap_or(Turn::Text);
        let usage = Usage {
            input_tokens: Some(tokens),
            output_tokens: Some(10),
            cache_read_tokens: Some(cached),
            ..Usage::default()
        };
        let turn = match turn {
            Turn::Steer(sizes) => {
                if let Some(steering) = &state.steering {
                    steering.send("Also check the tests.");
                }
                Turn::Calls(sizes)
            }
            turn => turn,
        };
        let message = match turn {
            Turn::Text | Turn::Steer(_) => AssistantMessage {
                text: "done".into(),
                ..AssistantMessage::default()
            },
            Turn::Calls(sizes) => AssistantMessage {
                tool_calls: sizes
                    .iter()
                    .map(|size| {
                        state.calls += 1;
                        let id = format!("call_{}", state.calls);
                        match size {
                            Some(bytes) => {
                                ToolCall::new(id, "read", json!({"bytes": bytes}).to_string())
                            }
                            None => ToolCall::new(id, "fail", "{}"),
                        }
                    })
                    .collect(),
                ..AssistantMessage::default()
            },
        };
        if let Some(last) = state.seen.last_mut() {
            last.issued = message
                .tool_calls
                .iter()
                .map(|c| c.id.to_string())
                .collect();
        }
        let finish_reason = if message.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        Ok(ModelResponse {
            id: None,
            message,
            finish_reason,
            usage,
            model: None,
            provider: None,
        })
    }
}

/// `read {bytes}`: that many bytes of text, varied so no two results are alike.
pub struct Read;

#[derive(Deserialize, schemars::JsonSchema)]
pub struct ReadArgs {
    /// How many bytes to return.
    bytes: usize,
}

impl Tool for Read {
    type Args = ReadArgs;
    fn name(&self) -> &str {
        "read"
    }
    fn description(&self) -> &str {
        "Reads a file."
    }
    async fn call(&self, args: ReadArgs) -> Result<ToolOutput, ToolError> {
        let line = "fn main() { println!(\"hello\"); } // a line of a source file\n";
        let text: String = line.chars().cycle().take(args.bytes).collect();
        Ok(ToolOutput::text(text))
    }
}

/// `fail`: always an error result.
pub struct Fail;

#[derive(Deserialize, schemars::JsonSchema)]
pub struct FailArgs {}

impl Tool for Fail {
    type Args = FailArgs;
    fn name(&self) -> &str {
        "fail"
    }
    fn description(&self) -> &str {
        "Fails."
    }
    async fn call(&self, _: FailArgs) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Failed("no such file".into()))
    }
}

/// What a session did.
pub struct Report {
    pub seen: Vec<Seen>,
    pub rewrites: u64,
    pub compactions: u64,
    pub expected_misses: usize,
    pub busts: usize,
    pub result: Result<(), HaloError>,
}

impl Report {
    /// Cached share of all input tokens.
    pub fn cached_share(&self) -> f64 {
        let (cached, total) = self
            .seen
            .iter()
            .fold((0, 0), |(c, t), s| (c + s.cached, t + s.tokens));
        cached as f64 / total.max(1) as f64
    }

    pub fn peak_tokens(&self) -> u64 {
        self.seen.iter().map(|s| s.tokens).max().unwrap_or(0)
    }
}

/// Runs `script` as one task through an agent with `strategy` on a `window`-token context.
pub fn run(strategy: Arc<dyn ContextStrategy>, window: u64, script: Vec<Turn>) -> Report {
    run_on(
        CacheModel::new(script.clone()),
        strategy,
        window,
        script.len(),
    )
}

/// As [`run`], on a model made beforehand (to refuse summaries, say) holding a script of
/// `turns` turns.
pub fn run_on(
    model: CacheModel,
    strategy: Arc<dyn ContextStrategy>,
    window: u64,
    turns: usize,
) -> Report {
    run_with(model, strategy, window, turns, &[])
}

/// As [`run_on`], with discardable entries of these sizes (bytes; loaded skill bodies, say)
/// in the log ahead of the task.
pub fn run_with(
    model: CacheModel,
    strategy: Arc<dyn ContextStrategy>,
    window: u64,
    turns: usize,
    discardable: &[usize],
) -> Report {
    let steps = turns + 1;
    let mut agent = HaloAgent::builder(model.clone())
        .system("You are a coding agent. Read what you need, then answer.")
        .tool(Read)
        .unwrap()
        .tool(Fail)
        .unwrap()
        .max_steps(steps)
        .context(ContextConfig::new(strategy, window))
        .build();
    model.0.lock().unwrap().steering = Some(agent.steering());
    for (i, bytes) in discardable.iter().enumerate() {
        agent
            .log_mut()
            .push_discardable(Message::user(format!("Skill {i}: {}", "s".repeat(*bytes))));
    }
    let result =
        futures::executor::block_on(agent.generate_text("Find the bug in the parser.")).map(|_| ());
    let checks: Vec<_> = agent.cache_ledger().checks().cloned().collect();
    for check in &checks {
        if check.history_rewritten {
            assert_eq!(
                check.verdict,
                CacheVerdict::ExpectedMiss,
                "a rewrite the ledger did not predict: {check:?}"
            );
        }
    }
    Report {
        seen: model.seen(),
        rewrites: agent.stats().history_rewrites,
        compactions: agent.stats().compactions,
        // The checks follow the accepted requests one for one; a summary request made in
        // halves is an expected miss of its own, not a rewrite of the history.
        expected_misses: checks
            .iter()
            .zip(model.seen())
            .filter(|(c, s)| c.verdict == CacheVerdict::ExpectedMiss && !s.is_summary())
            .count(),
        busts: checks.iter().filter(|c| c.is_bust()).count(),
        result,
    }
}

/// The seam's invariants over one session's requests.
pub fn check_invariants(report: &Report) {
    let seen = &report.seen;
    // The prefix never changes.
    for s in seen {
        assert_eq!(s.prefix, seen[0].prefix, "the prefix bytes changed");
    }
    for (i, s) in seen.iter().enumerate() {
        // Every call has exactly one result, every result its call.
        let mut calls = HashSet::new();
        let mut results: HashMap<&str, usize> = HashMap::new();
        for m in &s.history {
            match m {
                Message::Assistant(a) => calls.extend(a.tool_calls.iter().map(|c| c.id.as_str())),
                Message::Tool(r) => *results.entry(r.tool_call_id.as_str()).or_default() += 1,
                _ => {}
            }
        }
        for id in &calls {
            assert_eq!(
                results.get(id),
                Some(&1),
                "request {i}: call {id} has no single result"
            );
        }
        for id in results.keys() {
            assert!(calls.contains(id), "request {i}: result {id} has no call");
        }
    }
    // The live round — the calls the model just made, with their results it has not seen —
    // is in the next request whole, whatever the strategy dropped.
    // (A summary request made in halves carries only part of the history: the next real
    // request is what must hold the live round.)
    let real: Vec<&Seen> = seen.iter().filter(|s| !s.is_summary()).collect();
    for pair in real.windows(2) {
        for id in &pair[0].issued {
            assert!(
                pair[1]
                    .history
                    .iter()
                    .any(|m| matches!(m, Message::Tool(r) if r.tool_call_id == id)),
                "the live round's result for {id} was evicted"
            );
        }
    }
    assert_eq!(
        report.busts, 0,
        "busts in a session without unplanned changes"
    );
    assert_eq!(
        report.expected_misses as u64, report.rewrites,
        "every rewrite is one expected miss"
    );
}
