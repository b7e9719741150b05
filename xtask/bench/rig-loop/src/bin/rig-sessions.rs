//! rig's side of `cargo xtask bench sessions`: what `crates/halo-adapters/examples/
//! sessions_bench.rs` does with Halo's sessions, with rig 0.44 agents, one per session (an
//! agent built by `rig_agent::AgentBuilder` on one shared `rig_core` OpenAI chat-completions
//! model, and the session's history, a `Vec<Message>` run with `Agent::chat`), against
//! xtask's loopback fake. It prints one `sessions-bench {json}` line with the figures Halo's
//! side prints.
//!
//! ```text
//! rig-sessions idle SESSIONS STEPS BASE_URL   memory per idle session
//! rig-sessions busy SESSIONS STEPS BASE_URL   steps per second, every session at once
//! ```
//!
//! In `idle` the history bytes are those of a clone of each history plus its unused
//! capacity; rig keeps no journal, so that figure is 0.

use std::time::Instant;

use anyhow::{Context as _, bail};
use rig_agent::{Agent, AgentBuilder};
use rig_core::completion::Message;
use rig_core::providers::openai::{OpenAIConfig, Route};
use rig_loop::{Lookup, SYSTEM, cpu_now};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// One session: its agent and its history.
struct Session {
    agent: Agent,
    history: Vec<Message>,
}

/// Live heap bytes (allocated and not yet freed).
fn heap() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

/// The resident set, in bytes (`/proc/self/statm`'s second field, in pages).
fn rss() -> i64 {
    let pages: i64 = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    pages * rustix::param::page_size() as i64
}

fn question(i: usize) -> String {
    format!("Question {i}: which values do the keys need?")
}

/// Runs one turn; checks it made `steps` model calls and answered.
async fn turn(session: &mut Session, i: usize, steps: usize) -> anyhow::Result<usize> {
    let out = session
        .agent
        .chat(question(i), &mut session.history)
        .await
        .with_context(|| format!("session {i}'s turn failed"))?;
    if out.completion_calls.len() != steps || !out.output().starts_with("Done") {
        bail!(
            "session {i} made {} model calls and answered {:?}",
            out.completion_calls.len(),
            out.output()
        );
    }
    Ok(out.completion_calls.len())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: rig-sessions idle|busy SESSIONS STEPS BASE_URL";
    let [mode, sessions, steps, url] = args.as_slice() else {
        bail!(usage);
    };
    let sessions: usize = sessions.parse().context(usage)?;
    let steps: usize = steps.parse().context(usage)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let line = runtime.block_on(async {
        let model = OpenAIConfig::new("sessions-bench")
            .with_base_url(url.as_str())
            .with_route(Route::Chat)
            .client()
            .chat("loop-fake");
        let session = || Session {
            agent: AgentBuilder::new(model.clone())
                .preamble(SYSTEM)
                .tool(Lookup)
                .default_max_turns(steps)
                .build(),
            history: Vec::new(),
        };
        match mode.as_str() {
            "idle" => {
                let mut warm = session();
                turn(&mut warm, 0, steps).await?;
                drop(warm);
                let (rss_before, heap_before) = (rss(), heap());
                let mut kept = Vec::with_capacity(sessions);
                for i in 0..sessions {
                    let mut s = session();
                    turn(&mut s, i, steps).await?;
                    kept.push(s);
                }
                let (rss_after, heap_after) = (rss(), heap());
                let mut log_bytes = 0;
                for s in &kept {
                    let before = heap();
                    let copy = s.history.clone();
                    log_bytes += heap() - before;
                    drop(copy);
                    log_bytes += ((s.history.capacity() - s.history.len())
                        * std::mem::size_of::<Message>()) as i64;
                }
                let messages: usize = kept.iter().map(|s| s.history.len()).sum();
                Ok(format!(
                    r#"{{"sessions":{sessions},"messages_per_session":{},"rss_before":{rss_before},"rss_after":{rss_after},"heap_before":{heap_before},"heap_after":{heap_after},"log_bytes":{log_bytes},"journal_bytes":0}}"#,
                    messages / sessions.max(1)
                ))
            }
            "busy" => {
                let mut all: Vec<Session> = (0..sessions).map(|_| session()).collect();
                let (started, started_cpu) = (Instant::now(), cpu_now());
                let done = futures::future::join_all(
                    all.iter_mut().enumerate().map(|(i, s)| turn(s, i, steps)),
                )
                .await;
                let (wall, cpu) = (started.elapsed(), cpu_now() - started_cpu);
                let mut made = 0;
                for d in done {
                    made += d?;
                }
                Ok(format!(
                    r#"{{"sessions":{sessions},"steps":{made},"wall_s":{:.6},"cpu_s":{:.6}}}"#,
                    wall.as_secs_f64(),
                    cpu.as_secs_f64()
                ))
            }
            _ => bail!(usage),
        }
    })?;
    println!("sessions-bench {line}");
    Ok(())
}
