//! `coder`: Halo's main job — a coding agent working in a sandboxed folder.
//!
//! ```text
//! cargo run -p coder -- "TASK" [--dir DIR] [--max-steps N] [--read-only] [--yes]
//! ```
//!
//! The model is picked from the environment, first match wins: `ANTHROPIC_API_KEY`
//! (optional `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`) uses Anthropic; `GEMINI_API_KEY`
//! (optional `GEMINI_BASE_URL`, `GEMINI_MODEL`) Gemini; `DEEPSEEK_API_KEY` (optional
//! `DEEPSEEK_BASE_URL`, `DEEPSEEK_MODEL`) DeepSeek; `OPENAI_API_KEY` (optional
//! `OPENAI_BASE_URL`, `OPENAI_MODEL`) any OpenAI-compatible server; otherwise the embedded
//! model (`HALO_MODEL`, or the file `cargo xtask model` fetches). The agent gets the sandbox's
//! tools (`read`, `write`, `edit`, `ls`, `glob`, `grep`, `bash`) confined to DIR. The run streams
//! (`HaloAgent::stream_text`): the model's text token by token, each tool call as it is
//! decided, its (shortened) result, then a stats line.
//!
//! Safety hooks (`approval.rs`): a command denylist, a permission policy and output
//! truncation. By default file edits run and each command asks `[Y]es / [N]o / [Q]uit` on
//! the terminal; `--read-only` allows only reading, `--yes` runs commands without asking.
//! The small embedded model always runs read-only.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use std::io::Write as _;

use coder::{EMBEDDED_TOOLS, SYSTEM, approval};
use futures::StreamExt as _;
use halo_core::{AgentEvent, FinishReason, GenerateTextResult, HaloAgent, HaloError, SharedModel};
use halo_sandbox::ContainerSandbox;

struct Args {
    task: String,
    dir: PathBuf,
    max_steps: usize,
    permissions: approval::Permissions,
}

const USAGE: &str = "usage: coder \"TASK\" [--dir DIR] [--max-steps N] [--read-only] [--yes]";

fn parse_args() -> anyhow::Result<Args> {
    let mut task = None;
    let mut dir = PathBuf::from(".");
    let mut max_steps = 10;
    let mut permissions = approval::Permissions::default();
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dir" => dir = PathBuf::from(it.next().context("--dir needs a folder")?),
            "--max-steps" => {
                max_steps = it.next().context("--max-steps needs a number")?.parse()?
            }
            "--read-only" => permissions.read_only = true,
            "-y" | "--yes" => permissions.yes = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            s if s.starts_with("--") => bail!("unknown option `{s}`"),
            s if task.is_none() => task = Some(s.to_string()),
            s => bail!("unexpected argument `{s}`; put the task in quotes"),
        }
    }
    let task = task.context(USAGE)?;
    Ok(Args {
        task,
        dir,
        max_steps,
        permissions,
    })
}

fn set(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.is_empty())
}

/// The model the environment names.
struct Picked {
    model: SharedModel,
    /// A one-line description.
    desc: String,
    /// Whether it is the small embedded model.
    small: bool,
    /// The Gemini adapter, whose `cachedContents` object is deleted at the end of the session
    /// (it would otherwise be billed for storage until its TTL ends).
    gemini: Option<Arc<halo_adapters::gemini::GeminiAdapter>>,
}

impl Picked {
    fn remote(model: SharedModel, desc: String) -> Self {
        Picked {
            model,
            desc,
            small: false,
            gemini: None,
        }
    }
}

/// The model named by the environment.
fn pick_model() -> anyhow::Result<Picked> {
    use halo_adapters::anthropic::AnthropicAdapter;
    use halo_adapters::gemini::GeminiAdapter;
    use halo_adapters::openai::OpenAiCompatible;
    if set("ANTHROPIC_API_KEY") {
        let m = AnthropicAdapter::from_env()?;
        let desc = format!(
            "Anthropic {} at {}",
            halo_core::DynModelAdapter::model_name(&m),
            m.endpoint()
        );
        return Ok(Picked::remote(Arc::new(m), desc));
    }
    if set("GEMINI_API_KEY") {
        let m = Arc::new(GeminiAdapter::from_env()?);
        let desc = format!(
            "Gemini {} at {}",
            halo_core::DynModelAdapter::model_name(&*m),
            m.endpoint()
        );
        return Ok(Picked {
            gemini: Some(Arc::clone(&m)),
            ..Picked::remote(m, desc)
        });
    }
    if set("DEEPSEEK_API_KEY") {
        let m = OpenAiCompatible::deepseek_from_env()?;
        let desc = format!(
            "DeepSeek {} at {}",
            halo_core::DynModelAdapter::model_name(&m),
            m.endpoint()
        );
        return Ok(Picked::remote(Arc::new(m), desc));
    }
    if set("OPENAI_API_KEY") {
        let m = OpenAiCompatible::openai_from_env()?;
        let desc = format!(
            "OpenAI-compatible {} at {}",
            halo_core::DynModelAdapter::model_name(&m),
            m.endpoint()
        );
        return Ok(Picked::remote(Arc::new(m), desc));
    }
    local_model()
}

/// The embedded model, with the adapter settings of [`coder::embedded_config`].
#[cfg(feature = "local")]
fn local_model() -> anyhow::Result<Picked> {
    use halo_adapters::local::{LocalAdapter, default_model_path};
    let path = default_model_path();
    let m = LocalAdapter::load(&path, coder::embedded_config())?;
    Ok(Picked {
        small: true,
        ..Picked::remote(Arc::new(m), format!("embedded model {}", path.display()))
    })
}

#[cfg(not(feature = "local"))]
fn local_model() -> anyhow::Result<Picked> {
    bail!(
        "no API key set and this build has no embedded model; set ANTHROPIC_API_KEY, GEMINI_API_KEY, DEEPSEEK_API_KEY or OPENAI_API_KEY, or build with `--features local`"
    )
}

/// At most `max` characters of `s` on one line, with a note of how much was cut.
fn shorten(s: &str, max: usize) -> String {
    let flat = s.replace('\n', "⏎");
    let n = flat.chars().count();
    if n <= max {
        flat
    } else {
        let head: String = flat.chars().take(max).collect();
        format!("{head}… ({} more chars)", n - max)
    }
}

fn print_stats(out: &GenerateTextResult, started: Instant) {
    for (i, step) in out.steps.iter().enumerate() {
        let u = &step.usage;
        let fmt = |v: Option<u64>| v.map_or("?".to_string(), |n| n.to_string());
        println!(
            "  step {}: input {} tokens, cached {} read / {} written, output {}",
            i + 1,
            fmt(u.input_tokens),
            fmt(u.cache_read_tokens),
            fmt(u.cache_write_tokens),
            fmt(u.output_tokens)
        );
        if let halo_core::CacheVerdict::Bust { cause } = &step.cache.verdict {
            println!("    cache bust: {cause}");
        }
    }
    let s = &out.stats;
    // Providers that report no cache writes (OpenAI, DeepSeek) show `?`, not 0.
    let written = if out
        .steps
        .iter()
        .any(|st| st.usage.cache_write_tokens.is_some())
    {
        s.cache_write_tokens.to_string()
    } else {
        "?".to_string()
    };
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    println!(
        "stats: {}, {}, input {} tokens, output {} tokens, cached {} tokens read / {written} written (expected {} read, {}), hit ratio {:.1} %, wall time {:.1} s",
        plural(s.steps, "step", "steps"),
        plural(s.tool_calls, "tool call", "tool calls"),
        s.input_tokens,
        s.output_tokens,
        s.cache_read_tokens,
        s.expected_cached_tokens,
        plural(s.cache_busts, "cache bust", "cache busts"),
        100.0 * s.cache_hit_ratio(),
        started.elapsed().as_secs_f64()
    );
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
    let sandbox = ContainerSandbox::new(&args.dir)
        .with_context(|| format!("cannot use {} as the sandbox root", args.dir.display()))?;
    let Picked {
        model,
        desc,
        small,
        gemini,
    } = pick_model()?;
    println!("model: {desc}");
    println!("folder: {}", args.dir.display());
    println!("task: {}", args.task);

    let mut builder = HaloAgent::builder_shared(model)
        .system(SYSTEM)
        .max_steps(args.max_steps);
    let tools = sandbox.tools();
    let mut permissions = args.permissions;
    if small {
        if permissions.yes {
            println!("(--yes has no effect: the small embedded model always runs read-only)");
        }
        permissions.read_only = true;
        // A small embedded model gets the read-only tools and two worked examples.
        builder = coder::embedded_agent(builder, tools)?;
        println!(
            "tools: {} (read-only, for the small embedded model)",
            EMBEDDED_TOOLS.join(", ")
        );
    } else {
        builder = builder.tools(tools)?;
    }
    let (hooks, policy) = approval::session_hooks(permissions);
    println!("policy: {policy}");
    for hook in hooks {
        builder = builder.hook_shared(hook);
    }
    let mut agent = builder.build();
    println!(
        "prefix: {} tools, fingerprint {}",
        agent.prefix().tools().len(),
        agent.prefix().fingerprint()
    );

    let started = Instant::now();
    let outcome = run(&mut agent, args.task, started).await;
    if let Some(gemini) = gemini {
        match gemini.delete_cached_content().await {
            Ok(Some(name)) => println!("deleted the session's Gemini cached content {name}"),
            Ok(None) => {}
            Err(e) => eprintln!("could not delete the Gemini cached content: {e}"),
        }
    }
    outcome
}

/// Streams one run of the agent on `task`, printing text, tool calls, results and stats.
async fn run(agent: &mut HaloAgent, task: String, started: Instant) -> anyhow::Result<()> {
    let mut events = std::pin::pin!(agent.stream_text(task));
    // Whether the current step has printed text (so the next line starts fresh).
    let mut in_text = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(AgentEvent::TextDelta(delta)) => {
                if !in_text {
                    println!();
                    in_text = true;
                }
                print!("{delta}");
                std::io::stdout().flush()?;
            }
            Ok(AgentEvent::ToolCall(call)) => {
                end_text(&mut in_text);
                println!("→ {} {}", call.name, shorten(call.replay_arguments(), 200));
            }
            Ok(AgentEvent::ToolResult(result)) => {
                let tag = if result.is_error { " (error)" } else { "" };
                println!(
                    "← {}{tag} {}",
                    result.tool_name,
                    shorten(&result.content, 300)
                );
            }
            Ok(AgentEvent::StepFinish(_)) => end_text(&mut in_text),
            Ok(AgentEvent::Finish(out)) => {
                end_text(&mut in_text);
                if out.finish_reason() == Some(&FinishReason::Length) {
                    println!("(the answer was cut off at the max_tokens limit)");
                }
                println!();
                print_stats(&out, started);
            }
            Ok(_) => {}
            Err(HaloError::MaxStepsReached { max_steps, partial }) => {
                end_text(&mut in_text);
                println!(
                    "\nstopped: the model still wanted tools after {max_steps} steps (raise --max-steps)\n"
                );
                print_stats(&partial, started);
            }
            Err(HaloError::Aborted { tool, .. }) => {
                end_text(&mut in_text);
                println!("\nstopped: you quit at the approval prompt for `{tool}`");
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Ends a line of streamed text, if one is open.
fn end_text(in_text: &mut bool) {
    if std::mem::take(in_text) {
        println!();
    }
}
