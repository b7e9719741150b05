//! rig's side of `cargo xtask bench loop`: the 20-step tool loop of
//! `crates/halo-adapters/examples/loop_bench.rs` (19 `lookup` calls, then the answer) through
//! rig 0.44 — `rig_agent::AgentBuilder` on `rig_core`'s OpenAI chat-completions client with a
//! custom base URL — against xtask's loopback fake, run RUNS times on one agent.
//!
//! ```text
//! rig-loop BASE_URL RUNS
//! ```
//!
//! It prints one `loop-bench {json}` line with the figures Halo's side prints: CPU per step
//! (the process's `CLOCK_PROCESS_CPUTIME_ID` over the prompt calls only, on tokio's
//! current-thread runtime), wall time per step and peak RSS (`VmHWM`). The system prompt,
//! the tool's name, description and schema, and the questions are Halo's side's.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use rig_agent::AgentBuilder;
use rig_core::providers::openai::{OpenAIConfig, Route};
use rig_loop::{Lookup, SYSTEM, cpu_now};

const STEPS: usize = 20;

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

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, runs] = args.as_slice() else {
        bail!("usage: rig-loop BASE_URL RUNS");
    };
    let runs: usize = runs.parse().context("RUNS is a number")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let model = OpenAIConfig::new("loop-bench")
            .with_base_url(url.as_str())
            .with_route(Route::Chat)
            .client()
            .chat("loop-fake");
        let agent = AgentBuilder::new(model).preamble(SYSTEM).tool(Lookup).build();
        let (mut cpu, mut wall, mut steps) = (Duration::ZERO, Duration::ZERO, 0usize);
        for run in 0..runs {
            let question = format!("Question {run}: which values do the keys k0 to k18 hold?");
            let (started, started_cpu) = (Instant::now(), cpu_now());
            let out = agent.prompt(question).max_turns(STEPS).await;
            cpu += cpu_now() - started_cpu;
            wall += started.elapsed();
            let out = out.context("a timed run failed")?;
            if out.completion_calls.len() != STEPS || !out.output().starts_with("Done") {
                bail!(
                    "run {run} made {} model calls and answered {:?}",
                    out.completion_calls.len(),
                    out.output()
                );
            }
            steps += out.completion_calls.len();
        }
        let per_step = |d: Duration| d.as_secs_f64() * 1e6 / steps as f64;
        println!(
            r#"loop-bench {{"steps":{steps},"cpu_us_per_step":{:.3},"wall_us_per_step":{:.3},"peak_rss_kib":{}}}"#,
            per_step(cpu),
            per_step(wall),
            peak_rss_kib()
        );
        Ok(())
    })
}
