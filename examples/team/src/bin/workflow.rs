//! `workflow`: research, then write, then review — a workflow of named agents saved step by
//! step to a session file, so a run killed between two steps goes on at the next one.
//!
//! ```text
//! cargo run -p team --bin workflow -- [--session FILE] [--hosted] [--wait-after STEP] TOPIC
//! ```
//!
//! - `--session FILE`: the JSON Lines session file (default `workflow.jsonl`); running again
//!   on the same file continues the workflow there, and a finished one runs nothing.
//! - `--hosted`: the hosted model the environment names (`team::hosted`); without it every
//!   agent answers from a script (an article on otters, whatever the topic).
//! - `--wait-after STEP`: once STEP's output is saved, wait forever (to be killed there: the
//!   example's kill test).
//!
//! Each line it prints: `resumed: A, B` (steps done by an earlier run), `[agent] ...` (an
//! agent's tool calls and answers), `saved STEP` (a step's output is in the session file),
//! then the article.

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use halo_core::session::{Append, JournalEvent, Lease, SessionError, SessionInfo, SessionStore};
use halo_core::workflow::WorkflowRecord;
use halo_core::{EventSink, async_trait};
use halo_stream::journal::JsonlStore;
use team::workflow::{Agents, article, final_article};

/// The session of the workflow in the file.
const SESSION: &str = "article";

/// A store that prints each saved step, and waits forever after `wait_after`'s.
struct Checkpoints {
    inner: JsonlStore,
    wait_after: Option<String>,
}

#[async_trait]
impl SessionStore for Checkpoints {
    async fn append(&self, append: Append<'_>) -> Result<u64, SessionError> {
        let saved: Vec<String> = append
            .events
            .iter()
            .filter_map(|e| match e {
                JournalEvent::Workflow {
                    record: WorkflowRecord::StepDone { step, .. },
                    ..
                } => Some(step.clone()),
                _ => None,
            })
            .collect();
        let n = self.inner.append(append).await?;
        for step in saved {
            println!("saved {step}");
            if self.wait_after.as_deref() == Some(step.as_str()) {
                println!("waiting after {step}");
                std::future::pending::<()>().await;
            }
        }
        Ok(n)
    }
    async fn load(&self, session: &str) -> Result<Vec<JournalEvent>, SessionError> {
        self.inner.load(session).await
    }
    async fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        self.inner.list().await
    }
    async fn delete(&self, session: &str) -> Result<(), SessionError> {
        self.inner.delete(session).await
    }
    async fn acquire(
        &self,
        session: &str,
        owner: &str,
        ttl_ms: u64,
        now_ms: u64,
    ) -> Result<Lease, SessionError> {
        self.inner.acquire(session, owner, ttl_ms, now_ms).await
    }
    async fn renew(&self, lease: &Lease, ttl_ms: u64, now_ms: u64) -> Result<Lease, SessionError> {
        self.inner.renew(lease, ttl_ms, now_ms).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), SessionError> {
        self.inner.release(lease).await
    }
}

struct Args {
    session: String,
    hosted: bool,
    wait_after: Option<String>,
    topic: String,
}

fn args() -> anyhow::Result<Args> {
    let mut args = Args {
        session: "workflow.jsonl".into(),
        hosted: false,
        wait_after: None,
        topic: String::new(),
    };
    let mut words = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--session" => args.session = it.next().context("--session needs a FILE")?,
            "--hosted" => args.hosted = true,
            "--wait-after" => {
                args.wait_after = Some(it.next().context("--wait-after needs a STEP")?)
            }
            other if other.starts_with("--") => bail!("unknown option {other}"),
            word => words.push(word.to_string()),
        }
    }
    args.topic = words.join(" ");
    if args.topic.trim().is_empty() {
        bail!("usage: workflow [--session FILE] [--hosted] [--wait-after STEP] TOPIC");
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let agents = if args.hosted {
        let model = team::hosted::pick_model()?;
        println!("model: {} ({})", model.model_name(), model.provider());
        Agents::on(&model)
    } else {
        Agents::scripted()
    };
    let workflow = article(&agents);
    let store = Checkpoints {
        inner: JsonlStore::open(&args.session)?,
        wait_after: args.wait_after,
    };
    let done = halo_core::workflow::WorkflowState::from_journal(&store.load(SESSION).await?);
    if let Some(done) = done.filter(|d| !d.outputs.is_empty()) {
        let steps: Vec<&str> = done.outputs.keys().map(String::as_str).collect();
        println!("resumed: {}", steps.join(", "));
    }
    let (sink, mut events) = EventSink::channel();
    let printer = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            if let Some(line) = team::describe(&event) {
                println!("{line}");
            }
        }
    });
    let run = workflow
        .run_watched(args.topic.trim(), &store, SESSION, Some(sink))
        .await;
    printer.await?;
    let run = run?;
    println!("ran: {}", run.ran.join(", "));
    println!(
        "\n{}",
        final_article(&run.state).unwrap_or_else(|| "(no article)".into())
    );
    Ok(())
}
