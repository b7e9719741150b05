//! Halo's side of the many-sessions benchmark (`cargo xtask bench sessions`, which runs this
//! example in release mode against its loopback OpenAI-compatible fake and puts the figures
//! beside rig's): sessions of one [`Halo`] factory over a [`MemoryStore`], on
//! `OpenAiCompatible`. It prints one `sessions-bench {json}` line.
//!
//! ```text
//! sessions_bench idle SESSIONS STEPS BASE_URL   memory per idle session
//! sessions_bench busy SESSIONS STEPS BASE_URL   steps per second, every session at once
//! ```
//!
//! - **idle**: after one warm-up session (the connection, the adapter's serialized prefix,
//!   lazily built statics), SESSIONS sessions are made one after the other, each running one
//!   turn of the fake's tool loop (STEPS model calls: STEPS − 1 `lookup` calls, then the
//!   answer), and all are kept (in a vector with room for all made beforehand: its bytes,
//!   each session's inline size, count as the sessions'). Printed: the resident set (`/proc/self/statm`) and the live
//!   heap bytes (a counting global allocator) before and after, the heap bytes of the
//!   sessions' histories (each log cloned and measured) and of their journals in the store
//!   (each loaded and measured): what a session holds beyond those is the rest.
//! - **busy**: SESSIONS sessions are made (empty), then all run one turn at once on the
//!   current-thread runtime; printed are the steps made, the wall time and the process's
//!   CPU time (`CLOCK_PROCESS_CPUTIME_ID`) of that phase.
//!
//! The system prompt and the tool are those of `loop_bench.rs` (`bench_common/mod.rs`).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use halo_adapters::openai::OpenAiCompatible;
use halo_core::session::SessionStore;
use halo_core::{Halo, HaloAgent, MemoryStore, Session, SharedModel};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[path = "bench_common/mod.rs"]
mod bench_common;
use bench_common::{Lookup, SYSTEM, cpu_now};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

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

/// The heap bytes `make` allocates and keeps, its value dropped after measuring.
fn measured<T>(make: impl FnOnce() -> T) -> i64 {
    let before = heap();
    let value = make();
    let bytes = heap() - before;
    drop(value);
    bytes
}

fn question(i: usize) -> String {
    format!("Question {i}: which values do the keys need?")
}

/// Runs one turn; checks it made `steps` model calls and answered.
async fn turn(session: &mut Session, i: usize, steps: usize) -> anyhow::Result<usize> {
    let out = session
        .generate_text(question(i))
        .await
        .with_context(|| format!("session {i}'s turn failed"))?;
    if out.steps.len() != steps || !out.text.starts_with("Done") {
        bail!(
            "session {i} took {} steps and answered {:?}",
            out.steps.len(),
            out.text
        );
    }
    Ok(out.steps.len())
}

async fn idle(
    halo: &Halo,
    store: &MemoryStore,
    sessions: usize,
    steps: usize,
) -> anyhow::Result<String> {
    let mut warm = halo.session("warm-up").await?;
    turn(&mut warm, 0, steps).await?;
    drop(warm);
    let (rss_before, heap_before) = (rss(), heap());
    let mut kept = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let mut session = halo.session(format!("session-{i}")).await?;
        turn(&mut session, i, steps).await?;
        kept.push(session);
    }
    let (rss_after, heap_after) = (rss(), heap());
    let mut log_bytes = 0;
    let mut journal_bytes = 0;
    for session in &kept {
        log_bytes += measured(|| session.log().clone());
        journal_bytes += measured(|| store.session_events(session.id()));
    }
    let messages: usize = kept.iter().map(|s| s.log().len()).sum();
    Ok(format!(
        r#"{{"sessions":{sessions},"messages_per_session":{},"rss_before":{rss_before},"rss_after":{rss_after},"heap_before":{heap_before},"heap_after":{heap_after},"log_bytes":{log_bytes},"journal_bytes":{journal_bytes}}}"#,
        messages / sessions.max(1)
    ))
}

async fn busy(halo: &Halo, sessions: usize, steps: usize) -> anyhow::Result<String> {
    let mut all = Vec::with_capacity(sessions);
    for i in 0..sessions {
        all.push(halo.session(format!("session-{i}")).await?);
    }
    let (started, started_cpu) = (Instant::now(), cpu_now());
    let done =
        futures::future::join_all(all.iter_mut().enumerate().map(|(i, s)| turn(s, i, steps))).await;
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

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: sessions_bench idle|busy SESSIONS STEPS BASE_URL";
    let [mode, sessions, steps, url] = args.as_slice() else {
        bail!(usage);
    };
    let sessions: usize = sessions.parse().context(usage)?;
    let steps: usize = steps.parse().context(usage)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let line = runtime.block_on(async {
        let model: SharedModel =
            Arc::new(OpenAiCompatible::custom(url.as_str(), "loop-fake").build()?);
        let store = MemoryStore::new();
        let shared: Arc<dyn SessionStore> = Arc::new(store.clone());
        let template = HaloAgent::builder_shared(model)
            .system(SYSTEM)
            .tool(Lookup)?
            .max_steps(steps);
        let halo = Halo::new(template, shared);
        match mode.as_str() {
            "idle" => idle(&halo, &store, sessions, steps).await,
            "busy" => busy(&halo, sessions, steps).await,
            _ => bail!(usage),
        }
    })?;
    println!("sessions-bench {line}");
    Ok(())
}
