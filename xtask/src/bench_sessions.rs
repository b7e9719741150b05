//! `cargo xtask bench sessions`: many sessions in one process, Halo's `Halo` factory (one
//! agent per session, all sharing the factory's model, prefix and tools, journaled in a
//! `MemoryStore`) against rig 0.44 agents (one agent and one history per session), on the
//! same loopback OpenAI-compatible fake as `bench loop` ([`crate::bench_loop`]), printed
//! side by side:
//!
//! - memory per idle session at 1, 100, 1,000 and 10,000 sessions in one process: each
//!   session ran one turn of a [`STEPS`]-call tool loop and is kept; the resident set's and
//!   the live heap's growth over the sessions divided by their number, and what of it is the
//!   session's history (its log; for Halo also its journal in the in-memory store), so that
//!   what a session costs beyond its log shows; the median of [`REPEAT`] processes. Goal: at
//!   most [`GOAL_BYTES`] per idle session beyond its log, and less than rig's. The resident
//!   figures at 1 and 100 sessions are mostly the allocator's: the set grows by whole pages
//!   and the first sessions fit in pages the warm-up left; the heap figures are exact;
//! - steps per second with 1,000 sessions running at once (every session's turn started
//!   together on one current-thread runtime), best of [`REPEAT`] processes.
//!
//! Halo's side is `crates/halo-adapters/examples/sessions_bench.rs`, rig's
//! `xtask/bench/rig-loop/src/bin/rig-sessions.rs` (built as `bench loop` builds rig's side,
//! outside the workspace); their docs say what each figure is. Nothing is asserted.

use std::process::Command;

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::bench_loop::Fake;

/// Model calls per turn: 3 `lookup` calls, then the answer.
const STEPS: usize = 4;
/// Sessions in one process, for the memory figures.
const IDLE: [usize; 4] = [1, 100, 1_000, 10_000];
/// Sessions running at once, for the throughput figure.
const BUSY: usize = 1_000;
/// Processes per figure: the median of each memory figure is kept (the resident set grows
/// by whole pages, and a few sessions may fit in pages the warm-up left), the fastest
/// throughput.
const REPEAT: usize = 3;
/// The goal: bytes per idle session beyond its log (64 KiB).
const GOAL_BYTES: f64 = 64.0 * 1024.0;

/// Runs the benchmark.
///
/// # Errors
/// A build fails, a client fails or prints no figures.
pub fn run() -> anyhow::Result<()> {
    let root = crate::root();
    let target = crate::interop::target_dir(&root);
    crate::run_cmd(crate::cargo().args([
        "build",
        "--quiet",
        "--release",
        "-p",
        "halo-adapters",
        "--example",
        "sessions_bench",
    ]))?;
    let rig_target = target.join("rig-loop");
    crate::run_cmd(
        crate::cargo()
            .args([
                "build",
                "--quiet",
                "--release",
                "--locked",
                "--bin",
                "rig-sessions",
                "--manifest-path",
            ])
            .arg(root.join("xtask/bench/rig-loop/Cargo.toml"))
            .arg("--target-dir")
            .arg(&rig_target),
    )?;
    let clients = [
        ("Halo", target.join("release/examples/sessions_bench")),
        ("rig 0.44", rig_target.join("release/rig-sessions")),
    ];

    let fake = Fake::start(STEPS)?;
    let url = format!("http://{}/v1", fake.addr);
    let steps = STEPS.to_string();

    let mut idle = Vec::new();
    for (name, bin) in &clients {
        let mut row = Vec::new();
        for n in IDLE {
            let mut runs = Vec::new();
            for _ in 0..REPEAT {
                eprintln!("bench sessions: {name}, {n} idle sessions");
                let v = client(&fake, bin, &["idle", &n.to_string(), &steps, &url], true)?;
                runs.push(Idle::from(&v, n)?);
            }
            row.push(Idle::median(runs));
        }
        idle.push(row);
    }
    let mut busy = Vec::new();
    for (name, bin) in &clients {
        let mut kept: Option<Busy> = None;
        for _ in 0..REPEAT {
            eprintln!("bench sessions: {name}, {BUSY} sessions at once");
            let v = client(
                &fake,
                bin,
                &["busy", &BUSY.to_string(), &steps, &url],
                false,
            )?;
            let b = Busy::from(&v)?;
            if kept.as_ref().is_none_or(|k| b.steps_per_s > k.steps_per_s) {
                kept = Some(b);
            }
        }
        busy.push(kept.context("no run")?);
    }
    print_tables(&idle[0], &idle[1], &busy[0], &busy[1]);
    Ok(())
}

/// Runs one client process; its `sessions-bench` figures. With `warm_up`, one more session
/// than the figures count ran a turn (the idle mode's warm-up session).
fn client(
    fake: &Fake,
    bin: &std::path::Path,
    args: &[&str],
    warm_up: bool,
) -> anyhow::Result<Value> {
    fake.take();
    let out = Command::new(bin)
        .args(args)
        .output()
        .with_context(|| format!("starting {}", bin.display()))?;
    let served = fake.take();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "a benchmark client failed ({}):\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let Some(json) = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sessions-bench "))
    else {
        bail!("a benchmark client printed no `sessions-bench` line:\n{stdout}");
    };
    if served.bad > 0 {
        bail!("the fake could not read {} requests", served.bad);
    }
    let v: Value = serde_json::from_str(json).with_context(|| format!("parsing {json}"))?;
    let sessions = v["sessions"].as_u64().unwrap_or(0) as usize;
    let expected = ((sessions + usize::from(warm_up)) * STEPS) as u64;
    if served.requests != expected {
        bail!(
            "the fake served {} requests, not {expected}: {json}",
            served.requests
        );
    }
    Ok(v)
}

/// One idle-mode process's figures, per session, in bytes.
#[derive(Debug, Clone, Copy)]
struct Idle {
    resident: f64,
    heap: f64,
    log: f64,
    journal: f64,
    messages: u64,
}

impl Idle {
    fn from(v: &Value, n: usize) -> anyhow::Result<Idle> {
        let num = |k: &str| {
            v.get(k)
                .and_then(Value::as_f64)
                .with_context(|| format!("no `{k}` in {v}"))
        };
        let n = n as f64;
        Ok(Idle {
            resident: (num("rss_after")? - num("rss_before")?) / n,
            heap: (num("heap_after")? - num("heap_before")?) / n,
            log: num("log_bytes")? / n,
            journal: num("journal_bytes")? / n,
            messages: num("messages_per_session")? as u64,
        })
    }

    /// Each figure's median over `runs` (processes of one size).
    fn median(runs: Vec<Idle>) -> Idle {
        let mid = |f: fn(&Idle) -> f64| {
            let mut xs: Vec<f64> = runs.iter().map(f).collect();
            xs.sort_by(f64::total_cmp);
            xs[xs.len() / 2]
        };
        Idle {
            resident: mid(|x| x.resident),
            heap: mid(|x| x.heap),
            log: mid(|x| x.log),
            journal: mid(|x| x.journal),
            messages: runs.first().map_or(0, |x| x.messages),
        }
    }

    /// Resident bytes beyond the session's log and journal.
    fn beyond_resident(&self) -> f64 {
        self.resident - self.log - self.journal
    }

    /// Heap bytes beyond the session's log and journal.
    fn beyond_heap(&self) -> f64 {
        self.heap - self.log - self.journal
    }
}

/// One busy-mode process's figures.
#[derive(Debug, Clone, Copy)]
struct Busy {
    steps_per_s: f64,
    cpu_us_per_step: f64,
}

impl Busy {
    fn from(v: &Value) -> anyhow::Result<Busy> {
        let num = |k: &str| {
            v.get(k)
                .and_then(Value::as_f64)
                .with_context(|| format!("no `{k}` in {v}"))
        };
        let steps = num("steps")?;
        if steps != (BUSY * STEPS) as f64 {
            bail!("a client made {steps} steps, not {}: {v}", BUSY * STEPS);
        }
        Ok(Busy {
            steps_per_s: steps / num("wall_s")?,
            cpu_us_per_step: num("cpu_s")? * 1e6 / steps,
        })
    }
}

/// Bytes as KiB with one decimal.
fn kib(bytes: f64) -> String {
    format!("{:.1} KiB", bytes / 1024.0)
}

fn print_tables(halo: &[Idle], rig: &[Idle], halo_busy: &Busy, rig_busy: &Busy) {
    println!();
    println!(
        "idle sessions in one process, after one turn each ({STEPS} model calls: {} lookups, then the answer; {} messages of history), loopback fake; median of {REPEAT} processes",
        STEPS - 1,
        halo[0].messages
    );
    println!();
    let head = |name: &str| {
        print!("  {name:<34}");
        for n in IDLE {
            print!("{:>12}", format!("{n}"));
        }
        println!("   goal");
    };
    let row = |name: &str, xs: &[Idle], f: &dyn Fn(&Idle) -> String, goal: &str| {
        print!("  {name:<34}");
        for x in xs {
            print!("{:>12}", f(x));
        }
        println!("   {goal}");
    };
    head("sessions");
    println!("  Halo (factory, MemoryStore)");
    row("  resident per session", halo, &|x| kib(x.resident), "");
    row("  heap per session", halo, &|x| kib(x.heap), "");
    row("  of which its log", halo, &|x| kib(x.log), "");
    row(
        "  of which its journal (store)",
        halo,
        &|x| kib(x.journal),
        "",
    );
    row(
        "  resident beyond its log",
        halo,
        &|x| kib(x.beyond_resident()),
        &format!("≤ {}", kib(GOAL_BYTES)),
    );
    row("  heap beyond its log", halo, &|x| kib(x.beyond_heap()), "");
    println!("  rig 0.44 (one agent per session)");
    row("  resident per session", rig, &|x| kib(x.resident), "");
    row("  heap per session", rig, &|x| kib(x.heap), "");
    row("  of which its history", rig, &|x| kib(x.log), "");
    row(
        "  resident beyond its history",
        rig,
        &|x| kib(x.beyond_resident()),
        "",
    );
    row(
        "  heap beyond its history",
        rig,
        &|x| kib(x.beyond_heap()),
        "",
    );
    let ratio = |name: &str, f: fn(&Idle) -> f64, goal: &str| {
        print!("  {name:<34}");
        for (h, r) in halo.iter().zip(rig) {
            // A resident set that did not grow (the sessions fit in pages already mapped)
            // gives no ratio.
            let shown = if f(h) > 0.0 && f(r) > 0.0 {
                format!("{:.2}×", f(h) / f(r))
            } else {
                "n/a".to_string()
            };
            print!("{shown:>12}");
        }
        println!("   {goal}");
    };
    ratio("Halo/rig, resident per session", |x| x.resident, "");
    ratio("Halo/rig, heap per session", |x| x.heap, "");
    ratio(
        "Halo/rig, resident beyond log",
        Idle::beyond_resident,
        "< 1.00×",
    );
    ratio("Halo/rig, heap beyond log", Idle::beyond_heap, "< 1.00×");
    println!();
    println!(
        "{BUSY} sessions running at once (one turn each, {} model calls), best of {REPEAT} processes",
        BUSY * STEPS
    );
    println!(
        "  {:<34}{:>12}{:>12}{:>12}",
        "", "Halo", "rig 0.44", "Halo/rig"
    );
    println!(
        "  {:<34}{:>12}{:>12}{:>12}",
        "steps per second",
        format!("{:.0}", halo_busy.steps_per_s),
        format!("{:.0}", rig_busy.steps_per_s),
        format!("{:.2}×", halo_busy.steps_per_s / rig_busy.steps_per_s)
    );
    println!(
        "  {:<34}{:>12}{:>12}{:>12}",
        "client CPU per step",
        format!("{:.1} µs", halo_busy.cpu_us_per_step),
        format!("{:.1} µs", rig_busy.cpu_us_per_step),
        format!(
            "{:.2}×",
            halo_busy.cpu_us_per_step / rig_busy.cpu_us_per_step
        )
    );
}
