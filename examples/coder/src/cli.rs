//! The coder's command line (clap derive): a task, the folder, limits and permissions, the
//! session journal, and the output format.

use std::path::PathBuf;

use clap::Parser;

use crate::approval::Permissions;

/// A coding agent working in a sandboxed folder.
///
/// The model comes from the environment, first match wins: ANTHROPIC_API_KEY, GEMINI_API_KEY,
/// DEEPSEEK_API_KEY, OPENAI_API_KEY (each with optional *_BASE_URL and *_MODEL), else the
/// embedded model (HALO_MODEL, or the file `cargo xtask model` fetches).
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(name = "coder", version)]
pub struct Cli {
    /// What the agent should do, in quotes. With --session FILE holding a conversation, the
    /// conversation's next user turn.
    #[arg(
        value_name = "TASK",
        value_parser = non_empty,
        required_unless_present = "resume",
        conflicts_with = "resume"
    )]
    pub task: Option<String>,
    /// The folder the agent works in; its tools cannot reach outside it.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// The most model calls the run may make.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = at_least_one)]
    pub max_steps: usize,
    /// Only the reading tools: read, ls, glob, grep.
    #[arg(long)]
    pub read_only: bool,
    /// Run commands without asking (the command denylist still applies).
    #[arg(long, short)]
    pub yes: bool,
    /// Journal the conversation into FILE (JSON Lines, every committed step synced to disk).
    /// If FILE already holds a conversation, it is restored first and TASK is its next turn.
    #[arg(long, value_name = "FILE")]
    pub session: Option<PathBuf>,
    /// Continue the interrupted run of --session FILE (killed, stopped by --max-steps, or
    /// failed on a provider error) from its last committed step, instead of giving a TASK.
    #[arg(long, requires = "session")]
    pub resume: bool,
    /// Print every agent event as one JSON line on stdout, for scripts; an error ends the
    /// output with {"type":"error",...} and exit code 1. The other lines go to stderr.
    #[arg(long)]
    pub json: bool,
}

impl Cli {
    /// The permission flags.
    pub fn permissions(&self) -> Permissions {
        Permissions {
            read_only: self.read_only,
            yes: self.yes,
            json: self.json,
        }
    }
}

fn non_empty(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        Err("the task is empty; say what the agent should do, in quotes".into())
    } else {
        Ok(s.to_string())
    }
}

fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("a run needs at least 1 step".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a number of steps")),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;
    use clap::error::ErrorKind;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("coder").chain(args.iter().copied()))
    }

    fn kind(args: &[&str]) -> ErrorKind {
        parse(args).expect_err("should not parse").kind()
    }

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_parses_in_any_order() {
        let cli = parse(&[
            "--json",
            "--session",
            "s.jsonl",
            "Fix the bug",
            "--max-steps",
            "7",
            "--dir",
            "/tmp/x",
            "--read-only",
            "-y",
        ])
        .unwrap();
        assert_eq!(
            cli,
            Cli {
                task: Some("Fix the bug".into()),
                dir: PathBuf::from("/tmp/x"),
                max_steps: 7,
                read_only: true,
                yes: true,
                session: Some(PathBuf::from("s.jsonl")),
                resume: false,
                json: true,
            }
        );
        let cli = parse(&["task"]).unwrap();
        assert_eq!((cli.dir, cli.max_steps), (PathBuf::from("."), 10));
    }

    #[test]
    fn resume_takes_a_session_and_no_task() {
        let cli = parse(&["--session", "s.jsonl", "--resume"]).unwrap();
        assert!(cli.resume);
        assert_eq!(cli.task, None);
        assert_eq!(
            kind(&["--resume"]),
            ErrorKind::MissingRequiredArgument,
            "--resume needs --session"
        );
        assert_eq!(
            kind(&["--session", "s.jsonl", "--resume", "a task"]),
            ErrorKind::ArgumentConflict
        );
    }

    #[test]
    fn bad_command_lines_are_rejected_with_a_reason() {
        assert_eq!(kind(&[]), ErrorKind::MissingRequiredArgument);
        assert_eq!(
            kind(&["--session", "s.jsonl"]),
            ErrorKind::MissingRequiredArgument
        );
        assert_eq!(kind(&["  "]), ErrorKind::ValueValidation);
        assert_eq!(kind(&["t", "--max-steps", "0"]), ErrorKind::ValueValidation);
        assert_eq!(
            kind(&["t", "--max-steps", "many"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(kind(&["t", "--bogus"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["one task", "a second"]), ErrorKind::UnknownArgument);
        assert_eq!(kind(&["--help"]), ErrorKind::DisplayHelp);
        let err = parse(&["t", "--max-steps", "0"]).unwrap_err().to_string();
        assert!(err.contains("at least 1 step"), "{err}");
    }
}
