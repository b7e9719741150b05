//! `cargo xtask bench models`: embedded models side by side on read-only tool tasks with
//! checkable answers.
//!
//! ```text
//! cargo run -p coder --example model_tasks -- NAME=MODEL.gguf [NAME=MODEL.gguf ..] [--only TASK] [--verbose]
//! ```
//!
//! Each task is one run of the coder's agent loop with the coder's set-up for the embedded
//! model ([`coder::embedded_agent`], [`coder::embedded_config`]: the read-only tools, the
//! few-shot turns, `CallThenAnswer { rounds: 1 }`, greedy decoding) and its session hooks,
//! over the sample folder `examples/coder/sample` (the one `cargo xtask demo` copies). The
//! model is loaded afresh for each task, so every task starts from a cold KV cache exactly as
//! a `cargo xtask demo` run does. That matters at this size: in one run with each model kept
//! loaded across tasks (the task's tokens then evaluated in a batch of their own rather than
//! with the prompt's last 512-token chunk, which presumably rounds the logits differently),
//! 3 of SmolLM2's 4 right answers turned wrong and one wrong answer right. The models take
//! turns task by task, so a busy machine slows them alike. A task is right when the final
//! answer matches every pattern of the task (case-insensitive regular expressions) and at
//! least one tool call returned a result that is not an error. Seconds are the agent run's
//! wall time, without loading the model. It prints figures; nothing is asserted.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use coder::approval::{self, Permissions};
use halo_adapters::local::LocalAdapter;
use halo_core::{GenerateTextResult, HaloAgent};
use halo_sandbox::ContainerSandbox;
use regex::RegexBuilder;

/// A task and what its answer must contain.
struct Task {
    /// A short name for the table.
    id: &'static str,
    /// What the user asks.
    prompt: &'static str,
    /// Patterns the answer must all match (case-insensitive).
    expect: &'static [&'static str],
}

/// The tasks, over the files of `examples/coder/sample`.
const TASKS: &[Task] = &[
    Task {
        id: "release-day",
        prompt: "What day is the release planned for? Look in notes.txt.",
        expect: &["friday"],
    },
    Task {
        id: "changelog-owner",
        prompt: "Who owns the changelog, according to notes.txt?",
        expect: &["alice"],
    },
    Task {
        id: "flaky-test-owner",
        prompt: "Who fixes the flaky test, according to notes.txt?",
        expect: &["bob"],
    },
    Task {
        id: "notes-summary",
        prompt: "What does notes.txt say? Answer in one sentence.",
        expect: &["friday|alice|bob"],
    },
    Task {
        id: "config-port",
        prompt: "What port does config.toml set?",
        expect: &["8080"],
    },
    Task {
        id: "config-host",
        prompt: "What host does config.toml set?",
        expect: &[r"127\.0\.0\.1"],
    },
    Task {
        id: "readme",
        prompt: "What does README.md say this project is?",
        expect: &["tiny project|halo demo"],
    },
    Task {
        id: "parser-function",
        prompt: "Which function in src/parser.rs parses the input?",
        expect: &["parse_list"],
    },
    Task {
        id: "main-prints",
        prompt: "What does src/main.rs print?",
        expect: &["sum"],
    },
    Task {
        id: "ls-src",
        prompt: "List the files in the src folder.",
        expect: &[r"parser\.rs", r"main\.rs"],
    },
    Task {
        id: "grep-flaky",
        prompt: "Which file mentions the flaky test?",
        expect: &[r"notes\.txt"],
    },
    Task {
        id: "notes-lines",
        prompt: "How many lines does notes.txt have?",
        expect: &[r"\b4\b|\bfour\b"],
    },
];

/// One task's outcome for one model.
struct Outcome {
    right: bool,
    /// A tool call returned a result that is not an error.
    tool_ok: bool,
    /// The calls made, as `name arguments`.
    calls: Vec<String>,
    /// The final answer, or the error.
    answer: String,
    seconds: f64,
    input_tokens: u64,
    cached_tokens: u64,
    output_tokens: u64,
}

struct Args {
    models: Vec<(String, PathBuf)>,
    only: Option<String>,
    verbose: bool,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        models: Vec::new(),
        only: None,
        verbose: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--only" => args.only = Some(it.next().context("--only needs a task name")?),
            "--verbose" => args.verbose = true,
            s if s.starts_with("--") => bail!("unknown option `{s}`"),
            s => {
                let (name, path) = s
                    .split_once('=')
                    .with_context(|| format!("`{s}`: give models as NAME=PATH"))?;
                args.models.push((name.to_string(), PathBuf::from(path)));
            }
        }
    }
    if args.models.is_empty() {
        bail!("usage: model_tasks NAME=MODEL.gguf [NAME=MODEL.gguf ..] [--only TASK] [--verbose]");
    }
    Ok(args)
}

/// Runs `task` once, with a new agent on the model at `path`, loaded afresh.
async fn run_task(path: &Path, sample: &Path, task: &Task) -> anyhow::Result<Outcome> {
    let model = LocalAdapter::load(path, coder::embedded_config())
        .with_context(|| format!("cannot load {}", path.display()))?;
    let sandbox = ContainerSandbox::new(sample)?;
    let mut builder = coder::embedded_agent(HaloAgent::builder(model), sandbox.tools())?;
    let (hooks, _) = approval::session_hooks(Permissions {
        read_only: true,
        yes: false,
        json: false,
    });
    for hook in hooks {
        builder = builder.hook_shared(hook);
    }
    let mut agent = builder.build();
    let started = Instant::now();
    let result = agent.generate_text(task.prompt).await;
    let seconds = started.elapsed().as_secs_f64();
    let out: GenerateTextResult = match result {
        Ok(out) => out,
        Err(halo_core::HaloError::MaxStepsReached { partial, .. }) => *partial,
        Err(e) => {
            return Ok(Outcome {
                right: false,
                tool_ok: false,
                calls: Vec::new(),
                answer: format!("error: {e}"),
                seconds,
                input_tokens: 0,
                cached_tokens: 0,
                output_tokens: 0,
            });
        }
    };
    let calls = out
        .steps
        .iter()
        .flat_map(|s| &s.message.tool_calls)
        .map(|c| format!("{} {}", c.name, c.replay_arguments()))
        .collect();
    let tool_ok = out
        .steps
        .iter()
        .flat_map(|s| &s.tool_results)
        .any(|r| !r.is_error);
    let matches = task.expect.iter().all(|p| {
        RegexBuilder::new(p)
            .case_insensitive(true)
            .build()
            .is_ok_and(|re| re.is_match(&out.text))
    });
    Ok(Outcome {
        right: matches && tool_ok,
        tool_ok,
        calls,
        answer: out.text.trim().to_string(),
        seconds,
        input_tokens: out.stats.input_tokens,
        cached_tokens: out.stats.cache_read_tokens,
        output_tokens: out.stats.output_tokens,
    })
}

/// `s` on one line, at most `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max).collect::<String>())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,llama-cpp-2=error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = parse_args()?;
    let sample = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sample");
    let tasks: Vec<&Task> = TASKS
        .iter()
        .filter(|t| args.only.as_deref().is_none_or(|o| o == t.id))
        .collect();
    if tasks.is_empty() {
        bail!("no task named {:?}", args.only);
    }

    // outcomes[model][task]; the models take turns task by task, so a busy machine slows
    // them alike.
    let mut outcomes: Vec<Vec<Outcome>> = args.models.iter().map(|_| Vec::new()).collect();
    for task in &tasks {
        for ((name, path), row) in args.models.iter().zip(&mut outcomes) {
            let o = run_task(path, &sample, task).await?;
            eprintln!(
                "{name} {}: {} in {:.1} s{}",
                task.id,
                if o.right { "right" } else { "wrong" },
                o.seconds,
                if args.verbose {
                    format!(" [{}] {:?}", o.calls.join("; "), o.answer)
                } else {
                    String::new()
                }
            );
            row.push(o);
        }
    }

    let names: Vec<&str> = args.models.iter().map(|(n, _)| n.as_str()).collect();
    println!(
        "\n{} read-only tool tasks over examples/coder/sample; each a new agent with the coder's embedded-model set-up, greedy decoding\n",
        tasks.len()
    );
    println!("| task | {} |", names.join(" | "));
    println!("|---|{}", "---|".repeat(names.len()));
    for (i, task) in tasks.iter().enumerate() {
        let cells: Vec<String> = outcomes
            .iter()
            .map(|row| {
                let o = &row[i];
                let verdict = if o.right { "right" } else { "wrong" };
                let first = o
                    .calls
                    .first()
                    .map_or("no call".to_string(), |c| one_line(c, 40));
                format!("{verdict} ({first})")
            })
            .collect();
        println!("| {} | {} |", task.id, cells.join(" | "));
    }
    let total = tasks.len();
    let summary = |label: &str, f: &dyn Fn(&[Outcome]) -> String| {
        let cells: Vec<String> = outcomes.iter().map(|row| f(row)).collect();
        println!("| {label} | {} |", cells.join(" | "));
    };
    summary("**right**", &|row| {
        format!("**{} / {total}**", row.iter().filter(|o| o.right).count())
    });
    summary("a tool call returned a result", &|row| {
        format!("{} / {total}", row.iter().filter(|o| o.tool_ok).count())
    });
    summary("mean seconds per task", &|row| {
        format!(
            "{:.1}",
            row.iter().map(|o| o.seconds).sum::<f64>() / total as f64
        )
    });
    summary("input tokens (read from the KV cache)", &|row| {
        format!(
            "{} ({})",
            row.iter().map(|o| o.input_tokens).sum::<u64>(),
            row.iter().map(|o| o.cached_tokens).sum::<u64>()
        )
    });
    summary("output tokens", &|row| {
        row.iter().map(|o| o.output_tokens).sum::<u64>().to_string()
    });

    println!("\nanswers:");
    for (name, row) in names.iter().zip(&outcomes) {
        for (task, o) in tasks.iter().zip(row) {
            println!(
                "  {name} {} ({}): {}",
                task.id,
                if o.right { "right" } else { "wrong" },
                one_line(&o.answer, 160)
            );
        }
    }
    Ok(())
}
