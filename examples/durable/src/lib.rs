//! The agent a durable worker serves ([`agent`]): a model behind an OpenAI-compatible URL
//! and three tools that write every call they start to a shared file, one line each, so a
//! test can count what ran and where:
//!
//! - `step` — idempotent (running it twice does what running it once does), so a call in
//!   flight when its worker dies runs again on the next worker;
//! - `send` — promises nothing, so a call in flight when its worker dies is closed as "may
//!   have run" and never runs a second time;
//! - `transfer` — runs only once someone approves it (`HaloSession/{id}/approve`).
//!
//! Each waits `hold_ms` (an argument) before it answers, to keep calls in flight for a
//! while. The worker binary (`durable-worker`) serves [`agent`] through
//! [`halo_stream::restate::HaloSession`], and [`workflow`], a research-write-review
//! workflow of three such agents, through [`halo_stream::restate::HaloWorkflow`].

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use halo_adapters::openai::{ConfigError, OpenAiCompatible};
use halo_core::tool::{Tool, ToolAnnotations, ToolContext, ToolError, ToolOutput};
use halo_core::workflow::{Step as WorkflowStep, Workflow};
use halo_core::{HaloAgent, HaloAgentBuilder, HaloError, SharedModel};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The system prompt of every session.
pub const SYSTEM: &str = "You run the steps the user asks for, one tool call at a time.";

/// What the agents of a worker share.
#[derive(Clone)]
pub struct Setup {
    /// The model, one client for every session.
    pub model: SharedModel,
    /// The file every tool call appends a line to when it starts ([`CallLine`]).
    pub calls: PathBuf,
}

impl std::fmt::Debug for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup")
            .field("model", &self.model.model_name())
            .field("calls", &self.calls)
            .finish()
    }
}

impl Setup {
    /// The model at the OpenAI-compatible base URL `model_url` (`http://127.0.0.1:PORT/v1`;
    /// its `prompt_cache_key` is the session id; no retries), and the calls file `calls`.
    ///
    /// # Errors
    /// When `model_url` is not a URL the client takes.
    pub fn new(model_url: &str, calls: PathBuf) -> Result<Setup, ConfigError> {
        let model = OpenAiCompatible::custom(model_url, "durable-fake")
            .prompt_cache_key(true)
            .max_retries(0)
            .build()?;
        Ok(Setup {
            model: Arc::new(model),
            calls,
        })
    }
}

/// One line of the calls file: `session \t tool \t call id \t pid`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallLine {
    /// The session (the Restate object key).
    pub session: String,
    /// The tool's name.
    pub tool: String,
    /// The call's id, as the model gave it.
    pub call_id: String,
    /// The process the call ran in.
    pub pid: u32,
}

impl CallLine {
    /// Reads every whole line of the calls file at `path` (none when it does not exist).
    ///
    /// # Errors
    /// The IO error of reading an existing file.
    pub fn read_all(path: &Path) -> std::io::Result<Vec<CallLine>> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split('\t');
                Some(CallLine {
                    session: fields.next()?.to_string(),
                    tool: fields.next()?.to_string(),
                    call_id: fields.next()?.to_string(),
                    pid: fields.next()?.parse().ok()?,
                })
            })
            .collect())
    }
}

/// The agent of session `session`: `setup`'s model, [`SYSTEM`], the tools `step`, `send`
/// and `transfer`, and approvals that pause the run.
///
/// # Errors
/// None in practice: [`HaloError`] if a tool's name clashed.
pub fn agent(session: &str, setup: &Setup) -> Result<HaloAgentBuilder, HaloError> {
    let log = Arc::new(CallLog {
        session: session.to_string(),
        path: setup.calls.clone(),
    });
    Ok(HaloAgent::builder_shared(setup.model.clone())
        .system(SYSTEM)
        .tool(Step(log.clone()))?
        .tool(Send(log.clone()))?
        .tool(Transfer(log))?
        .pause_for_approvals()
        .max_steps(64)
        .session_id(session))
}

/// The input of [`workflow`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Article {
    /// What the article is about.
    pub topic: String,
    /// How long the `write` step's tool call holds, in milliseconds.
    #[serde(default)]
    pub hold_ms: u64,
}

/// The workflow of run `run`: `research`, then `write` on the research, then `review` of the
/// draft, each an agent of [`agent`] (session `RUN.STEP`, so its calls and requests are
/// told apart) that makes one `step` call and answers. Its input is an [`Article`].
///
/// The step prompts begin with the loopback fake model's script (`steps=1 tool=step
/// hold_ms=H`); the rest is the article's topic and the previous step's output.
///
/// # Errors
/// None in practice: [`HaloError`] if a tool's name clashed.
pub fn workflow(run: &str, setup: &Setup) -> Result<Workflow, HaloError> {
    let named = |step: &str, description: &str| -> Result<_, HaloError> {
        Ok(Arc::new(
            agent(&format!("{run}.{step}"), setup)?
                .build()
                .as_tool(step, description),
        ))
    };
    let research = named("research", "Finds facts on a topic.")?;
    let write = named("write", "Writes a draft from the research.")?;
    let review = named("review", "Reviews a draft.")?;
    Ok(Workflow::new("article")
        .then(WorkflowStep::text("research", research, |s| {
            let article: Article = s.input()?;
            Ok(format!(
                "steps=1 tool=step hold_ms=0 research {}",
                article.topic
            ))
        }))
        .then(WorkflowStep::text("write", write, |s| {
            let article: Article = s.input()?;
            Ok(format!(
                "steps=1 tool=step hold_ms={} write on: {}",
                article.hold_ms,
                s.text("research")?
            ))
        }))
        .then(WorkflowStep::text("review", review, |s| {
            Ok(format!(
                "steps=1 tool=step hold_ms=0 review: {}",
                s.text("write")?
            ))
        })))
}

/// Where a session's tools write their calls.
#[derive(Debug)]
struct CallLog {
    session: String,
    path: PathBuf,
}

impl CallLog {
    /// Appends the call's line: one `write` on a file opened for appending, so lines of
    /// several processes never interleave.
    fn record(&self, tool: &str, context: &ToolContext) -> Result<(), ToolError> {
        let line = format!(
            "{}\t{tool}\t{}\t{}\n",
            self.session,
            context.call().id,
            std::process::id()
        );
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|e| ToolError::Fatal(format!("cannot write {}: {e}", self.path.display())))
    }
}

/// The arguments of `step` and `send`.
#[derive(Debug, Deserialize, JsonSchema)]
struct StepArgs {
    /// The step's number.
    n: u32,
    /// How long the call takes, in milliseconds.
    #[serde(default)]
    hold_ms: u64,
}

/// `step`: idempotent.
struct Step(Arc<CallLog>);

impl Tool for Step {
    type Args = StepArgs;
    fn name(&self) -> &str {
        "step"
    }
    fn description(&self) -> &str {
        "Runs step n; running it twice is the same as once."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default().with_idempotent(true)
    }
    async fn call(&self, _: StepArgs) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Failed("step runs only inside an agent".into()))
    }
    async fn call_with(
        &self,
        args: StepArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.0.record("step", context)?;
        tokio::time::sleep(Duration::from_millis(args.hold_ms)).await;
        Ok(format!("step {} done", args.n).into())
    }
}

/// `send`: no promise, so never run twice.
struct Send(Arc<CallLog>);

impl Tool for Send {
    type Args = StepArgs;
    fn name(&self) -> &str {
        "send"
    }
    fn description(&self) -> &str {
        "Sends message n; it must not be sent twice."
    }
    async fn call(&self, _: StepArgs) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Failed("send runs only inside an agent".into()))
    }
    async fn call_with(
        &self,
        args: StepArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.0.record("send", context)?;
        tokio::time::sleep(Duration::from_millis(args.hold_ms)).await;
        Ok(format!("message {} sent", args.n).into())
    }
}

/// The arguments of `transfer`.
#[derive(Debug, Deserialize, JsonSchema)]
struct TransferArgs {
    /// The amount, in cents.
    amount: u64,
}

/// `transfer`: runs only once approved.
struct Transfer(Arc<CallLog>);

impl Tool for Transfer {
    type Args = TransferArgs;
    fn name(&self) -> &str {
        "transfer"
    }
    fn description(&self) -> &str {
        "Transfers an amount; someone approves each call first."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::default().with_needs_approval(true)
    }
    async fn call(&self, _: TransferArgs) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Failed(
            "transfer runs only inside an agent".into(),
        ))
    }
    async fn call_with(
        &self,
        args: TransferArgs,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.0.record("transfer", context)?;
        Ok(format!("transferred {} cents", args.amount).into())
    }
}
