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
    /// Installs what a fresh Debian machine lacks (cmake, make, a C++ compiler, libclang, pip,
    /// node, Chromium: with apt-get, as root) and fetches the model file first.
    Ci {
        /// Run only the tidy check (file headers, leftovers, the crate layering).
        #[arg(long)]
        tidy: bool,
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
    /// Fetch the default GGUF model into the cache folder and print its path.
    Model,
    /// Set up what is missing, then run the coding agent (examples/coder) on TASK.
    ///
    /// With ANTHROPIC_API_KEY, GEMINI_API_KEY, DEEPSEEK_API_KEY or OPENAI_API_KEY set (picked
    /// in that order) it uses that provider; otherwise the embedded model, built on first use.
    Demo(DemoArgs),
    /// Check halo-stream with the `ai` npm package (node) and headless Chromium.
    Interop,
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
    /// The embedded model's prefill, cold against KV-cache reuse.
    LocalCache,
    /// SSE decode throughput and time to the first event.
    Sse,
    /// The sandbox's grep and glob against ripgrep on a 50,000-file tree.
    Tools,
}

/// `cargo xtask demo`'s arguments; the flags are the coder's own and are passed on to it.
#[derive(Debug, Args, PartialEq, Eq)]
pub struct DemoArgs {
    /// What the agent should do, in quotes. Default: a question about the sample folder.
    #[arg(value_parser = non_empty)]
    pub task: Option<String>,
    /// The folder the agent works in (default: a sample folder under target/).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The most model calls the run may make.
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,
    /// Only the reading tools.
    #[arg(long)]
    pub read_only: bool,
    /// Run commands without asking.
    #[arg(long, short)]
    pub yes: bool,
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
        Cmd::Model => {
            let path = crate::model::ensure_model()?;
            println!("{}", path.display());
            Ok(())
        }
        Cmd::Demo(args) => crate::demo::run(args),
        Cmd::Interop => crate::interop::run(),
        Cmd::Bench { name } => match name {
            Bench::Cache => crate::bench_cache::run(),
            Bench::LocalCache => crate::bench_local::run(),
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
            "ci", "fresh", "model", "demo", "interop", "bench", "release",
        ] {
            for flag in ["-h", "--help"] {
                assert_eq!(kind(&[sub, flag]), ErrorKind::DisplayHelp, "{sub} {flag}");
            }
        }
        assert_eq!(kind(&["--help"]), ErrorKind::DisplayHelp);
        let help = Cli::command().render_long_help().to_string();
        for sub in [
            "ci", "fresh", "model", "demo", "interop", "bench", "release",
        ] {
            assert!(help.contains(sub), "top-level help lists `{sub}`:\n{help}");
        }
    }

    #[test]
    fn unknown_arguments_are_rejected() {
        assert_eq!(kind(&["ci", "--bogus"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["ci", "extra"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["model", "--all"]), ErrorKind::UnknownArgument);
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
        assert_eq!(kind(&["demo", "  "]), ErrorKind::ValueValidation);
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
            "Fix the bug",
            "--max-steps",
            "7",
            "--dir",
            "/tmp/x",
            "--read-only",
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
                read_only: true,
                yes: true,
            }
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
