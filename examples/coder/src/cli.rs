//! The coder's command line (clap derive): a task, the folder, limits and permissions, the
//! context window, the session journal, and the output format; or the `mcp-serve`
//! subcommand, which serves the coding tools as an MCP server instead of running a task.

use std::net::SocketAddr;
use std::path::PathBuf;

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use halo_sandbox::{ExecLimits, Limit, SandboxMode};

use crate::approval::Permissions;

/// A coding agent working in a sandboxed folder.
///
/// The model comes from the environment, first match wins: ANTHROPIC_API_KEY, GEMINI_API_KEY,
/// DEEPSEEK_API_KEY, OPENAI_API_KEY (each with optional *_BASE_URL and *_MODEL), else the
/// embedded model (HALO_MODEL, or the file `cargo xtask model` fetches).
#[derive(Debug, Clone, PartialEq, Eq, Parser)]
#[command(
    name = "coder",
    version,
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Instead of a task: `mcp-serve`, or `profile`.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// What the agent should do, in quotes. With --session FILE holding a conversation, the
    /// conversation's next user turn.
    #[arg(
        value_name = "TASK",
        value_parser = non_empty,
        required_unless_present = "resume",
        conflicts_with = "resume"
    )]
    pub task: Option<String>,
    /// The folder the agent works in: the file tools cannot reach outside it, and commands
    /// write only in it (they can still read the machine's files).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// The most model calls the run may make.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = at_least_one)]
    pub max_steps: usize,
    /// The model's context window in tokens. Once a request would use more than 85 % of it,
    /// old tool output is replaced in place, down to 55 %; from 95 % the older rounds are
    /// summarized into one turn (the task is kept). Default: the model's documented window
    /// (the adapters' per-model table), else 32000.
    #[arg(long, value_name = "N", value_parser = window_tokens)]
    pub context_window: Option<u64>,
    /// Only the reading tools: read, ls, glob, grep.
    #[arg(long)]
    pub read_only: bool,
    /// Run commands without asking (the command denylist still applies).
    #[arg(long, short)]
    pub yes: bool,
    /// How commands are confined: in an OS sandbox (bubblewrap) that lets them write only in
    /// DIR, not its .git (workspace-write), or nowhere (read-only); or unconfined, with no OS
    /// sandbox (full-access). --read-only always means read-only.
    /// Default: the profile's `sandbox`, else workspace-write.
    #[arg(long, value_enum, value_name = "MODE")]
    pub sandbox: Option<Sandbox>,
    /// Let commands in the OS sandbox use the network (off by default: each command gets a
    /// network namespace of its own, with only its own loopback).
    #[arg(long)]
    pub network: bool,
    /// Journal the conversation into FILE (JSON Lines, every committed step synced to disk),
    /// or into a shared store: postgres://USER@HOST:PORT/DB or redis://HOST:PORT, with
    /// ?session=NAME to name the session (default: `default`). If it already holds a
    /// conversation, it is restored first and TASK is its next turn. One coder at a time:
    /// a second one on the same session is refused.
    #[arg(long, value_name = "FILE|URL")]
    pub session: Option<String>,
    /// Continue the interrupted run of --session (killed, stopped by --max-steps, or
    /// failed on a provider error) from its last committed step, instead of giving a TASK.
    #[arg(long, requires = "session")]
    pub resume: bool,
    /// Print every agent event as one JSON line on stdout, for scripts; an error ends the
    /// output with {"type":"error",...} and exit code 1. The other lines go to stderr.
    #[arg(long)]
    pub json: bool,
    /// Also read MCP servers from FILE (the `mcpServers` JSON of Claude Desktop / Claude
    /// Code), after DIR/.mcp.json and DIR/.agent/mcp.json; repeatable, later files win per
    /// server name.
    #[arg(long = "mcp-config", value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,
    /// The profile to use (provider, model, base URL, context window, sandbox mode) from the
    /// user's config file ($HALO_CONFIG, else ~/.config/halo/config.toml); default: the
    /// session's own (with --session), else DIR/.agent/config.toml's `profile`, else the
    /// file's active one. DIR/.agent/config.toml's own keys override the profile's, and
    /// flags override both.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// What each command may use.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// What each command in the OS sandbox may use (`none`: no limit). A command over a limit
/// fails, and its result names the limit and the flag. Not applied with --sandbox
/// full-access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct LimitArgs {
    /// Memory a command's processes may hold together, and one process may allocate
    /// (4G, 512M, ...; binary units).
    #[arg(long, value_name = "SIZE", default_value = "4G", value_parser = size)]
    pub max_memory: Cap,
    /// Processes and threads a command may run at once.
    #[arg(long, value_name = "N", default_value = "1024", value_parser = count)]
    pub max_processes: Cap,
    /// The largest file a command may write.
    #[arg(long, value_name = "SIZE", default_value = "4G", value_parser = size)]
    pub max_file_size: Cap,
    /// CPU seconds each process of a command may use.
    #[arg(long, value_name = "SECS", default_value = "600", value_parser = count)]
    pub max_cpu: Cap,
    /// The size of a command's private /tmp (and of /dev/shm and /run), which live in memory.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = size)]
    pub max_tmp: Cap,
}

/// A limit's value: `None` for `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap(pub Option<u64>);

impl LimitArgs {
    /// The limits for the sandbox, each naming its flag in a result.
    pub fn exec_limits(&self) -> ExecLimits {
        let mut limits = ExecLimits::none();
        limits.memory = self.max_memory.0;
        limits.processes = self.max_processes.0;
        limits.file_size = self.max_file_size.0;
        limits.cpu_time = self.max_cpu.0.map(Duration::from_secs);
        limits.tmp_size = self.max_tmp.0;
        limits
            .with_hint(Limit::Memory, "--max-memory")
            .with_hint(Limit::Processes, "--max-processes")
            .with_hint(Limit::FileSize, "--max-file-size")
            .with_hint(Limit::CpuTime, "--max-cpu")
            .with_hint(Limit::TmpSize, "--max-tmp")
    }
}

fn size(s: &str) -> Result<Cap, String> {
    if s == "none" {
        return Ok(Cap(None));
    }
    match parse_size::Config::new().with_binary().parse_size(s) {
        Ok(0) => Err("a limit of 0 lets nothing run; give a size such as 512M, or `none`".into()),
        Ok(n) => Ok(Cap(Some(n))),
        Err(e) => Err(format!(
            "`{s}` is not a size ({e}); give one such as 4G or 512M, or `none`"
        )),
    }
}

fn count(s: &str) -> Result<Cap, String> {
    match s.parse::<u64>() {
        _ if s == "none" => Ok(Cap(None)),
        Ok(0) => Err("a limit of 0 lets nothing run; give a number, or `none`".into()),
        Ok(n) => Ok(Cap(Some(n))),
        Err(_) => Err(format!("`{s}` is not a number; give one, or `none`")),
    }
}

/// The subcommands.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Serve the coding tools (read, write, edit, ls, glob, grep, bash) confined to DIR as
    /// an MCP server: on stdio (nothing but JSON-RPC on stdout, logs on stderr), or over
    /// streamable HTTP at http://ADDR/mcp with --http. Each call runs through the command
    /// denylist, the permission policy and output truncation. Without --yes, commands
    /// (bash) are denied: no one can approve them over MCP.
    McpServe(ServeArgs),
    /// The named profiles of the user's config file ($HALO_CONFIG, else
    /// ~/.config/halo/config.toml): list them, pick the active one, set a key. The file keeps
    /// its comments and order.
    Profile(ProfileArgs),
}

/// `coder profile`'s action.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ProfileArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: ProfileAction,
}

/// `coder profile list | use NAME | set KEY VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ProfileAction {
    /// The profiles, the active one marked `*`, with their settings.
    List,
    /// Make NAME the active profile.
    Use {
        /// The profile.
        name: String,
    },
    /// Set KEY (provider, model, base_url, context_window, sandbox) of a profile to VALUE;
    /// the profile is made when missing.
    Set {
        /// provider | model | base_url | context_window | sandbox.
        key: String,
        /// The value: for provider anthropic, gemini, deepseek, openai or local; for
        /// sandbox read-only, workspace-write or full-access; for context_window a number of
        /// tokens.
        value: String,
        /// The profile to change (default: the active one, else `default`).
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
    },
}

/// `coder mcp-serve`'s flags.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ServeArgs {
    /// The folder the tools work in: the file tools cannot reach outside it, and `bash`
    /// writes only in it (its commands can still read the machine's files).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Only the reading tools: read, ls, glob, grep.
    #[arg(long)]
    pub read_only: bool,
    /// Run commands (bash) without approval (the denylist and the OS sandbox still apply).
    #[arg(long, short)]
    pub yes: bool,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio; ADDR is a loopback
    /// address and port, e.g. 127.0.0.1:8765 (the server accepts only loopback Host
    /// headers). Every request must carry `Authorization: Bearer <token>`: the token of
    /// --token-file, else of HALO_MCP_TOKEN, else a new random one written to a file only
    /// you can read ($XDG_RUNTIME_DIR/halo-coder-mcp/, else a private folder in the temp
    /// dir), whose path is printed at start and which is removed on Ctrl-C.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// With --http: the bearer token is the first line of FILE (at least 16 characters:
    /// letters, digits, - . _ ~ + /).
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<PathBuf>,
    /// With --http: also print the token on stderr at start.
    #[arg(long, requires = "http")]
    pub print_token: bool,
    /// With --http: the most sessions at once; an MCP client beyond them is refused (HTTP
    /// 503 with a JSON-RPC error) until one is closed or expires.
    #[arg(long, value_name = "N", default_value_t = halo_mcp::server::DEFAULT_MAX_SESSIONS, value_parser = at_least_one_session, requires = "http")]
    pub max_sessions: usize,
    /// With --http: a session with no call running and no message for SECONDS is closed
    /// (its client must start a new one); closing a session, or a client disconnecting
    /// mid-call, stops its running commands.
    #[arg(long, value_name = "SECONDS", default_value_t = halo_mcp::server::DEFAULT_IDLE_TIMEOUT.as_secs(), value_parser = seconds, requires = "http")]
    pub idle_timeout: u64,
    /// Bridge mode: also serve the tools of the MCP servers in FILE (`mcpServers` JSON, as
    /// `coder --mcp-config`), named `mcp__<server>__<tool>`, through the same hooks (they
    /// count as commands: denied without --yes and with --read-only). Repeatable.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,
    /// What each command may use.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// `--sandbox MODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Sandbox {
    /// Commands may write nothing.
    ReadOnly,
    /// Commands may write in DIR but not its .git; /tmp is private.
    WorkspaceWrite,
    /// No OS sandbox: commands can do anything you can.
    FullAccess,
}

impl Cli {
    /// How commands are confined: `--read-only` makes it read-only whatever `--sandbox` says.
    pub fn sandbox_mode(&self) -> SandboxMode {
        match (
            self.read_only,
            self.sandbox.unwrap_or(Sandbox::WorkspaceWrite),
        ) {
            (true, _) | (false, Sandbox::ReadOnly) => SandboxMode::ReadOnly,
            (false, Sandbox::WorkspaceWrite) => SandboxMode::WorkspaceWrite,
            (false, Sandbox::FullAccess) => SandboxMode::FullAccess,
        }
    }

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
    } else if s == "profile" {
        Err("`profile` is a subcommand: give it first (coder profile list | use NAME | set KEY VALUE)".into())
    } else if s == "mcp-serve" {
        // `coder --max-steps 3 mcp-serve`: the subcommand came after a task's flag.
        Err("`mcp-serve` is a subcommand: give it first, with only its own flags (coder mcp-serve --dir DIR [--read-only] [--yes] [--http ADDR])".into())
    } else {
        Ok(s.to_string())
    }
}

/// The smallest `--context-window`: below it even a task and one tool result do not fit.
pub const MIN_CONTEXT_WINDOW: u64 = 1024;

fn window_tokens(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n < MIN_CONTEXT_WINDOW => Err(format!(
            "a context window of {n} tokens is too small; give at least {MIN_CONTEXT_WINDOW}"
        )),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a number of tokens")),
    }
}

fn at_least_one_session(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("the server needs room for at least 1 session".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a number of sessions")),
    }
}

fn seconds(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("an idle timeout of 0 s would close every session at once".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a number of seconds")),
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
            "--sandbox",
            "full-access",
            "--network",
            "--context-window",
            "16000",
            "--mcp-config",
            "a.json",
            "--mcp-config",
            "b.json",
        ])
        .unwrap();
        assert_eq!(
            cli,
            Cli {
                command: None,
                task: Some("Fix the bug".into()),
                dir: PathBuf::from("/tmp/x"),
                max_steps: 7,
                context_window: Some(16_000),
                read_only: true,
                yes: true,
                sandbox: Some(Sandbox::FullAccess),
                network: true,
                session: Some("s.jsonl".into()),
                resume: false,
                json: true,
                mcp_config: vec![PathBuf::from("a.json"), PathBuf::from("b.json")],
                profile: None,
                limits: parse(&["t"]).unwrap().limits,
            }
        );
        assert_eq!(
            cli.sandbox_mode(),
            SandboxMode::ReadOnly,
            "--read-only wins"
        );
        let cli = parse(&["task"]).unwrap();
        assert_eq!(
            (&cli.dir, cli.max_steps, cli.context_window),
            (&PathBuf::from("."), 10, None)
        );
        assert_eq!(
            (cli.sandbox_mode(), cli.network),
            (SandboxMode::WorkspaceWrite, false)
        );
        let cli = parse(&["task", "--sandbox", "full-access"]).unwrap();
        assert_eq!(cli.sandbox_mode(), SandboxMode::FullAccess);
        assert_eq!(kind(&["t", "--sandbox", "none"]), ErrorKind::InvalidValue);
    }

    #[test]
    fn mcp_serve_is_a_subcommand_and_a_task_still_parses() {
        let cli = parse(&["mcp-serve", "--dir", "/tmp/x", "--read-only", "--yes"]).unwrap();
        assert_eq!(
            cli.command,
            Some(Command::McpServe(ServeArgs {
                dir: PathBuf::from("/tmp/x"),
                read_only: true,
                yes: true,
                http: None,
                token_file: None,
                print_token: false,
                max_sessions: 32,
                idle_timeout: 1800,
                mcp_config: vec![],
                limits: parse(&["t"]).unwrap().limits,
            }))
        );
        let cli = parse(&[
            "mcp-serve",
            "--mcp-config",
            "a.json",
            "--mcp-config",
            "b.json",
        ])
        .unwrap();
        let Some(Command::McpServe(args)) = cli.command else {
            panic!("mcp-serve")
        };
        assert_eq!(
            args.mcp_config,
            [PathBuf::from("a.json"), PathBuf::from("b.json")]
        );
        let cli = parse(&["mcp-serve", "--http", "127.0.0.1:8765"]).unwrap();
        let Some(Command::McpServe(args)) = cli.command else {
            panic!("mcp-serve")
        };
        assert_eq!(args.http, Some("127.0.0.1:8765".parse().unwrap()));
        assert_eq!(args.dir, PathBuf::from("."));
        let cli = parse(&[
            "mcp-serve",
            "--http",
            "127.0.0.1:0",
            "--token-file",
            "t.txt",
            "--print-token",
            "--max-sessions",
            "4",
            "--idle-timeout",
            "60",
        ])
        .unwrap();
        let Some(Command::McpServe(args)) = cli.command else {
            panic!("mcp-serve")
        };
        assert_eq!(
            (
                args.token_file,
                args.print_token,
                args.max_sessions,
                args.idle_timeout
            ),
            (Some(PathBuf::from("t.txt")), true, 4, 60)
        );
        for http_only in [
            &["mcp-serve", "--token-file", "t.txt"][..],
            &["mcp-serve", "--max-sessions", "4"],
            &["mcp-serve", "--idle-timeout", "60"],
        ] {
            assert_eq!(
                kind(http_only),
                ErrorKind::MissingRequiredArgument,
                "{http_only:?}"
            );
        }
        for bad in [
            &["mcp-serve", "--http", "127.0.0.1:0", "--max-sessions", "0"][..],
            &["mcp-serve", "--http", "127.0.0.1:0", "--idle-timeout", "0"],
            &[
                "mcp-serve",
                "--http",
                "127.0.0.1:0",
                "--idle-timeout",
                "30m",
            ],
        ] {
            assert_eq!(kind(bad), ErrorKind::ValueValidation, "{bad:?}");
        }
        assert_eq!(
            kind(&["mcp-serve", "--http", "localhost"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(
            kind(&["mcp-serve", "--max-steps", "3"]),
            ErrorKind::UnknownArgument
        );
        // The task form is unchanged, a task that merely mentions the word too.
        let cli = parse(&["serve the mcp-serve docs", "--dir", "d"]).unwrap();
        assert_eq!(
            (cli.command, cli.task.as_deref()),
            (None, Some("serve the mcp-serve docs"))
        );
    }

    #[test]
    fn limit_flags_default_to_the_sandboxs_defaults_and_parse_sizes() {
        let defaults = parse(&["t"]).unwrap().limits.exec_limits();
        let library = ExecLimits::default();
        assert_eq!(
            (
                defaults.memory,
                defaults.processes,
                defaults.file_size,
                defaults.cpu_time,
                defaults.tmp_size
            ),
            (
                library.memory,
                library.processes,
                library.file_size,
                library.cpu_time,
                library.tmp_size
            )
        );
        assert_eq!(
            defaults.describe(Limit::Memory),
            "memory limit 4 GiB reached (--max-memory)"
        );
        let cli = parse(&[
            "t",
            "--max-memory",
            "512M",
            "--max-processes",
            "none",
            "--max-file-size",
            "1GiB",
            "--max-cpu",
            "30",
            "--max-tmp",
            "64m",
        ])
        .unwrap();
        let limits = cli.limits.exec_limits();
        assert_eq!(limits.memory, Some(512 << 20));
        assert_eq!(limits.processes, None);
        assert_eq!(limits.file_size, Some(1 << 30));
        assert_eq!(limits.cpu_time, Some(Duration::from_secs(30)));
        assert_eq!(limits.tmp_size, Some(64 << 20));
        let serve = parse(&["mcp-serve", "--max-memory", "1G"]).unwrap();
        let Some(Command::McpServe(args)) = serve.command else {
            panic!("mcp-serve")
        };
        assert_eq!(args.limits.exec_limits().memory, Some(1 << 30));
        for bad in [
            ["--max-memory", "0"],
            ["--max-memory", "lots"],
            ["--max-cpu", "1.5"],
        ] {
            assert_eq!(
                kind(&["t", bad[0], bad[1]]),
                ErrorKind::ValueValidation,
                "{bad:?}"
            );
        }
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
        // A second word is read as a subcommand (`mcp-serve`), which a task excludes.
        assert_eq!(kind(&["one task", "a second"]), ErrorKind::ArgumentConflict);
        assert_eq!(kind(&["a task", "mcp-serve"]), ErrorKind::ArgumentConflict);
        assert_eq!(
            kind(&["--max-steps", "3", "mcp-serve", "--dir", "d"]),
            ErrorKind::ValueValidation,
            "the task's flags are not mcp-serve's"
        );
        assert_eq!(kind(&["--help"]), ErrorKind::DisplayHelp);
        let err = parse(&["t", "--max-steps", "0"]).unwrap_err().to_string();
        assert!(err.contains("at least 1 step"), "{err}");
        for bad in ["0", "1023", "16k", ""] {
            assert_eq!(
                kind(&["t", "--context-window", bad]),
                ErrorKind::ValueValidation,
                "--context-window {bad:?}"
            );
        }
        let err = parse(&["t", "--context-window", "100"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("at least 1024"), "{err}");
        assert_eq!(
            parse(&["t", "--context-window", "1024"])
                .unwrap()
                .context_window,
            Some(1024)
        );
    }
}
