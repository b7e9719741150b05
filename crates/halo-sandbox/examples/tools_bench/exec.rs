//! The exec section of `tools_bench`: what the OS sandbox adds to a command's wall time.
//!
//! Three columns run the same `bash -c` commands (`true`, and `ls -la` in a root of 20
//! files): **unconfined** (`Sandbox::exec` of a `ContainerSandbox` in
//! `SandboxMode::FullAccess`), **bubblewrap** (`Sandbox::exec` in `WorkspaceWrite`, the
//! default: bwrap with its namespaces and mounts), and **landlock** (the same spawn with a
//! Landlock ruleset and a seccomp filter applied in the child instead, [`super::landlock`]).
//! Each call is timed from the call to its output, on a tokio runtime, as an agent's tool
//! call would be: 10 warm-up rounds, then 200; each round runs every command in every column,
//! in an order rotated round by round, so drift on the shared cores hits all columns alike.
//! Printed: p50 and p95 (nearest rank) per cell, the time added at p50 over unconfined, and a
//! verdict against the goal of at most 20 ms added per command at p50. Nothing is asserted on
//! time; a command that fails, or a sandbox that lets a write outside the root through, ends
//! the run with an error, as its figures would mean nothing.
//!
//! Before timing, a confinement check runs each probe once in each column, so the figures are
//! those of working sandboxes and show what each one confines.

use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use halo_core::sandbox::{ExecRequest, Sandbox};
use halo_sandbox::{ContainerSandbox, SandboxMode};

use super::landlock::LandlockExec;

/// Warm-up rounds, not timed.
const WARMUP: usize = 10;
/// Timed rounds: samples per cell.
const ROUNDS: usize = 200;
/// Files in the root `ls -la` lists.
const FILES: usize = 20;
/// The goal: at most this many milliseconds added per command at p50.
const GOAL_MS: f64 = 20.0;

const COMMANDS: [(&str, &str); 2] = [("true", "true"), ("ls -la (20 files)", "ls -la")];

/// What a command gave back, from either spawn path.
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Column {
    Unconfined,
    Bubblewrap,
    Landlock,
}

const COLUMNS: [Column; 3] = [Column::Unconfined, Column::Bubblewrap, Column::Landlock];

impl Column {
    fn name(self) -> &'static str {
        match self {
            Column::Unconfined => "unconfined",
            Column::Bubblewrap => "bubblewrap",
            Column::Landlock => "landlock",
        }
    }
}

struct Runner {
    runtime: tokio::runtime::Runtime,
    unconfined: ContainerSandbox,
    bubblewrap: ContainerSandbox,
    landlock: LandlockExec,
}

impl Runner {
    fn run(&self, column: Column, command: &str) -> Result<Outcome, String> {
        let request = ExecRequest {
            command: command.to_string(),
            timeout: Duration::from_secs(10),
            output_limit: 64 * 1024,
        };
        let via_sandbox = |sandbox: &ContainerSandbox| {
            self.runtime
                .block_on(sandbox.exec(request.clone()))
                .map(|o| Outcome {
                    exit_code: o.exit_code,
                    stdout: o.stdout,
                    stderr: o.stderr,
                })
                .map_err(|e| e.to_string())
        };
        match column {
            Column::Unconfined => via_sandbox(&self.unconfined),
            Column::Bubblewrap => via_sandbox(&self.bubblewrap),
            Column::Landlock => self
                .runtime
                .block_on(self.landlock.exec(command))
                .map_err(|e| e.to_string()),
        }
    }
}

/// Runs the section: the confinement check, then the timings.
pub fn run() -> Result<(), Box<dyn std::error::Error>> {
    // Beside this binary, not under /tmp: bubblewrap's /tmp is a private tmpfs, where a write
    // "outside the root" would land privately rather than be refused.
    let exe = std::env::current_exe()?;
    let dir = tempfile::tempdir_in(exe.parent().ok_or("no folder for the bench root")?)?;
    let base = dir.path().canonicalize()?;
    let root = base.join("root");
    std::fs::create_dir(&root)?;
    for i in 0..FILES {
        std::fs::write(root.join(format!("file_{i:02}.txt")), format!("file {i}\n"))?;
    }
    let runner = Runner {
        runtime: tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
        unconfined: ContainerSandbox::new(&root)?.with_mode(SandboxMode::FullAccess),
        bubblewrap: ContainerSandbox::new(&root)?.with_mode(SandboxMode::WorkspaceWrite),
        landlock: LandlockExec::new(&root)?,
    };

    println!(
        "exec: `bash -c COMMAND` in a root of {FILES} files; unconfined and bubblewrap through \
         Sandbox::exec (FullAccess, WorkspaceWrite), landlock spawned alike with a Landlock \
         ruleset + seccomp filter applied in the child"
    );
    println!("{}\n", runner.landlock.status()?);
    check(&runner, &base)?;
    time(&runner)
}

/// One probe of the confinement check: a command per column and how to read its outcome.
struct Probe {
    name: &'static str,
    command: String,
    read: fn(&Outcome, &mut Probes) -> String,
}

/// What the probes look at on the host besides the outcome.
struct Probes {
    /// The file the write outside the root would make.
    outside: PathBuf,
    /// Where the UDP probe's datagram would arrive.
    udp: UdpSocket,
}

fn allowed(o: &Outcome, _: &mut Probes) -> String {
    if o.exit_code == Some(0) {
        "allowed"
    } else {
        "refused"
    }
    .into()
}

fn check(runner: &Runner, base: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let outside = base.join("outside.txt");
    let tcp = TcpListener::bind("127.0.0.1:0")?;
    let udp = UdpSocket::bind("127.0.0.1:0")?;
    udp.set_read_timeout(Some(Duration::from_millis(300)))?;
    let udp_port = udp.local_addr()?.port();
    // Removed when dropped, also when the check fails.
    let host_tmp = tempfile::Builder::new()
        .prefix("halo-tools-bench-")
        .tempfile_in("/tmp")?;
    let mut probes = Probes {
        outside: outside.clone(),
        udp,
    };
    let list = [
        Probe {
            name: "write outside the root",
            command: format!("echo x > {}", outside.display()),
            read: |o, p| match (p.outside.exists(), o.exit_code) {
                (true, _) => "allowed".into(),
                // Written where the host does not see it (a private mount).
                (false, Some(0)) => "private".into(),
                (false, _) => "refused".into(),
            },
        },
        Probe {
            name: "write inside the root",
            command: "echo x > probe.txt && rm probe.txt".into(),
            read: allowed,
        },
        Probe {
            name: "TCP connect to the host",
            command: format!("exec 3<>/dev/tcp/127.0.0.1/{}", tcp.local_addr()?.port()),
            read: allowed,
        },
        Probe {
            name: "UDP datagram to the host",
            command: format!("echo x > /dev/udp/127.0.0.1/{udp_port}"),
            read: |_, p| {
                let mut buf = [0u8; 16];
                if p.udp.recv(&mut buf).is_ok() {
                    "arrived"
                } else {
                    "stopped"
                }
                .into()
            },
        },
        Probe {
            name: "signal the bench process",
            command: format!("kill -0 {}", std::process::id()),
            read: allowed,
        },
        Probe {
            name: "processes in /proc",
            command: "ls /proc | grep -c '^[0-9]'".into(),
            read: |o, _| o.stdout.trim().to_string(),
        },
        Probe {
            name: "the host's /tmp seen",
            command: format!("test -e {}", host_tmp.path().display()),
            read: |o, _| if o.exit_code == Some(0) { "yes" } else { "no" }.into(),
        },
        Probe {
            name: "make a namespace (unshare)",
            command: "unshare --user true".into(),
            read: allowed,
        },
    ];
    println!(
        "confinement check, each probe once     {:>12} {:>12} {:>12}",
        "unconfined", "bubblewrap", "landlock"
    );
    let mut leaked = Vec::new();
    let mut refusal = String::new();
    for probe in &list {
        let mut cells = Vec::new();
        for column in COLUMNS {
            let _ = std::fs::remove_file(&outside);
            let out = runner.run(column, &probe.command)?;
            let cell = (probe.read)(&out, &mut probes);
            if probe.name.starts_with("write outside") && column != Column::Unconfined {
                if outside.exists() {
                    leaked.push(column.name());
                } else if column == Column::Landlock {
                    refusal = out.stderr.trim().to_string();
                }
            }
            cells.push(cell);
        }
        println!(
            "  {:<36} {:>12} {:>12} {:>12}",
            probe.name, cells[0], cells[1], cells[2]
        );
    }
    let _ = std::fs::remove_file(&outside);
    if !leaked.is_empty() {
        return Err(format!(
            "a write outside the root got through in {}: not a working sandbox, no figures",
            leaked.join(", ")
        )
        .into());
    }
    println!("  landlock's answer to the write outside: {refusal}");
    println!(
        "  landlock cannot: hide the machine's processes or kill a `setsid`/double-fork \
         escapee on timeout (no PID namespace), give a private /tmp, or stop UDP before \
         Landlock ABI 10\n"
    );
    Ok(())
}

fn time(runner: &Runner) -> Result<(), Box<dyn std::error::Error>> {
    // samples[command][column]
    let mut samples = vec![vec![Vec::with_capacity(ROUNDS); COLUMNS.len()]; COMMANDS.len()];
    for round in 0..WARMUP + ROUNDS {
        for (c, (_, command)) in COMMANDS.iter().enumerate() {
            for k in 0..COLUMNS.len() {
                let col = (round + k) % COLUMNS.len();
                let start = Instant::now();
                let out = runner.run(COLUMNS[col], command)?;
                let took = start.elapsed();
                if out.exit_code != Some(0) {
                    return Err(format!(
                        "`{command}` failed in {} ({:?}): {}",
                        COLUMNS[col].name(),
                        out.exit_code,
                        out.stderr.trim()
                    )
                    .into());
                }
                if round >= WARMUP {
                    samples[c][col].push(took);
                }
            }
        }
    }

    println!("wall ms per command, {ROUNDS} interleaved runs per cell after {WARMUP} warm-up");
    println!(
        "{:<20} {:>15} {:>15} {:>15}   {:>18}",
        "", "unconfined", "bubblewrap", "landlock", "added at p50"
    );
    println!(
        "{:<20} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}   {:>9} {:>8}",
        "command", "p50", "p95", "p50", "p95", "p50", "p95", "bwrap", "landlock"
    );
    let mut worst_added: f64 = 0.0;
    for (c, (name, _)) in COMMANDS.iter().enumerate() {
        let p: Vec<(f64, f64)> = samples[c]
            .iter_mut()
            .map(|s| (percentile(s, 0.50), percentile(s, 0.95)))
            .collect();
        let added_bwrap = p[1].0 - p[0].0;
        let added_landlock = p[2].0 - p[0].0;
        worst_added = worst_added.max(added_bwrap);
        println!(
            "{:<20} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2}   {:>+9.2} {:>+8.2}",
            name, p[0].0, p[0].1, p[1].0, p[1].1, p[2].0, p[2].1, added_bwrap, added_landlock
        );
    }
    // Judged as printed, to two decimals.
    let shown = format!("{worst_added:.2}");
    let meets = shown.parse::<f64>().is_ok_and(|w| w <= GOAL_MS);
    println!(
        "\nbubblewrap adds at most {shown} ms per command at p50 (goal: at most {GOAL_MS:.0} ms): {}",
        if meets {
            "meets the goal"
        } else {
            "over the goal"
        }
    );
    Ok(())
}

/// The nearest-rank percentile of `samples` in milliseconds (sorts them).
fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort_unstable();
    let rank = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1].as_secs_f64() * 1000.0
}
