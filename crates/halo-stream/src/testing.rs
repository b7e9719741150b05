//! Real PostgreSQL and Redis servers for tests (feature `testing`), started from the
//! binaries the system's packages installed (Debian: `postgresql`, `redis-server`), each in
//! a temporary folder of its own, listening on a free port of 127.0.0.1 only, and stopped
//! when dropped.
//!
//! Tests use [`PostgresServer::for_test`] and [`RedisServer::for_test`]: without the
//! binaries they print a loud `SKIP` line and return `None`, except in CI (`CI=true`), where
//! a missing server fails the test (`cargo xtask ci` installs both with apt-get).
//!
//! PostgreSQL's `initdb` refuses to run as root: as root, the server runs as the `postgres`
//! user that the Debian package creates, in folders handed to it.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Why a server could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerError {
    /// Its binaries are not installed: what is missing and how to install it.
    Missing(String),
    /// It is installed but did not start: why (with the end of its log).
    Failed(String),
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerError::Missing(why) | ServerError::Failed(why) => f.write_str(why),
        }
    }
}

/// Whether this is a CI run (`CI` set to `true` or `1`), where a missing server is an error.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A started server, or `None` after a loud skip line when its binaries are missing outside
/// CI.
///
/// # Panics
/// When the server is missing in CI, or installed but failing to start.
fn for_test<T>(test: &str, started: Result<T, ServerError>) -> Option<T> {
    match started {
        Ok(server) => Some(server),
        Err(ServerError::Missing(why)) if !in_ci() => {
            eprintln!(
                "\n==================== SKIP {test} ====================\n{why}\n\
                 (in CI, CI=true, this fails instead; `cargo xtask ci` installs it)\n"
            );
            None
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

/// A free TCP port on 127.0.0.1 (free when asked: a server started right after takes it).
fn free_port() -> Result<u16, ServerError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| ServerError::Failed(format!("cannot find a free port: {e}")))
}

/// The last `n` bytes of the file at `path`, for error messages.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.len().saturating_sub(n);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..].to_string()
}

/// Whether this process runs as root.
#[cfg(unix)]
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

#[cfg(not(unix))]
fn is_root() -> bool {
    false
}

/// The uid and gid of the system user `name`, from `/etc/passwd`.
fn system_user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() > 3 && fields[0] == name)
            .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
            .flatten()
    })
}

/// The folder of PostgreSQL's server binaries (`initdb`, `pg_ctl`, `postgres`): the one
/// `HALO_POSTGRES_BIN` names, else `pg_config --bindir`, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian keeps them off the `PATH`), else the `PATH`.
pub fn postgres_bin_dir() -> Option<PathBuf> {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os("HALO_POSTGRES_BIN") {
        return Some(PathBuf::from(dir)).filter(|d| has_server(d));
    }
    let from_pg_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(dir) = from_pg_config.filter(|d| has_server(d)) {
        return Some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, dir)| has_server(dir))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Some(dir);
    }
    std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).find(|d| has_server(d)))
}

/// A PostgreSQL server in a temporary folder, on a free loopback port, with one superuser
/// `halo` that needs no password. Stopped (`pg_ctl stop -m immediate`) when dropped.
#[derive(Debug)]
pub struct PostgresServer {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    /// The user the server runs as, when not this process's (running as root).
    user: Option<(u32, u32)>,
    _dir: tempfile::TempDir,
}

impl PostgresServer {
    /// `initdb` and `pg_ctl start` in a new temporary folder (about 5 s).
    ///
    /// # Errors
    /// [`ServerError::Missing`] without the binaries, [`ServerError::Failed`] when the
    /// server does not start.
    pub fn start() -> Result<Self, ServerError> {
        let bin = postgres_bin_dir().ok_or_else(|| {
            ServerError::Missing(
                "PostgreSQL's server binaries (initdb, pg_ctl) are not installed: \
                 `apt-get install postgresql` on Debian and Ubuntu (they land in \
                 /usr/lib/postgresql/VERSION/bin), or set HALO_POSTGRES_BIN to their folder"
                    .into(),
            )
        })?;
        let user = if is_root() {
            Some(system_user("postgres").ok_or_else(|| {
                ServerError::Failed(
                    "initdb refuses to run as root, and there is no `postgres` user to run it \
                     as (the Debian package makes one); add one with `useradd --system postgres`"
                        .into(),
                )
            })?)
        } else {
            None
        };
        let failed = |what: &str, e: std::io::Error| ServerError::Failed(format!("{what}: {e}"));
        let dir = tempfile::Builder::new()
            .prefix("halo-postgres-")
            .tempdir()
            .map_err(|e| failed("cannot make a temporary folder", e))?;
        let data = dir.path().join("data");
        let run = dir.path().join("run");
        for d in [&data, &run] {
            std::fs::create_dir(d).map_err(|e| failed("cannot make a folder", e))?;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode =
                |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
            mode(dir.path(), 0o755).map_err(|e| failed("cannot open the temporary folder", e))?;
            mode(&data, 0o700).map_err(|e| failed("cannot set the data folder's mode", e))?;
            if let Some((uid, gid)) = user {
                for d in [&data, &run] {
                    std::os::unix::fs::chown(d, Some(uid), Some(gid))
                        .map_err(|e| failed("cannot hand a folder to the postgres user", e))?;
                }
            }
        }
        let mut server = PostgresServer {
            bin,
            data,
            port: 0,
            user,
            _dir: dir,
        };
        let out = server
            .command("initdb")
            .args([
                "-U",
                "halo",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
                "-D",
            ])
            .arg(&server.data)
            .output()
            .map_err(|e| failed("cannot run initdb", e))?;
        if !out.status.success() {
            return Err(ServerError::Failed(format!(
                "initdb failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let log = run.join("postgres.log");
        let mut last = String::new();
        // The free port may be taken between asking and binding: try a few.
        for _ in 0..3 {
            server.port = free_port()?;
            let options = format!(
                "-p {} -c listen_addresses=127.0.0.1 -k {}",
                server.port,
                run.display()
            );
            let status = server
                .command("pg_ctl")
                .args(["-w", "-t", "60", "-o", &options, "-l"])
                .arg(&log)
                .arg("-D")
                .arg(&server.data)
                .arg("start")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| failed("cannot run pg_ctl", e))?;
            if status.success() {
                return Ok(server);
            }
            last = tail(&log, 2_000);
        }
        Err(ServerError::Failed(format!(
            "the PostgreSQL server did not start; the end of its log:\n{last}"
        )))
    }

    /// [`start`](Self::start) for the test `test`: `None` (after a loud skip line) when
    /// PostgreSQL is not installed, outside CI.
    ///
    /// # Panics
    /// When it is missing in CI or does not start.
    pub fn for_test(test: &str) -> Option<Self> {
        for_test(test, Self::start())
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.current_dir(self.data.parent().unwrap_or(Path::new("/")))
            .env("LC_ALL", "C")
            .stdin(Stdio::null());
        #[cfg(unix)]
        if let Some((uid, gid)) = self.user {
            use std::os::unix::process::CommandExt as _;
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of its `postgres` database: `postgres://halo@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://halo@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["-m", "immediate", "-w", "-D"])
            .arg(&self.data)
            .arg("stop")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The `redis-server` binary: on the `PATH`, or `/usr/bin/redis-server`.
pub fn redis_server_bin() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("redis-server"))
                .find(|p| p.is_file())
        })
        .or_else(|| Some(PathBuf::from("/usr/bin/redis-server")).filter(|p| p.is_file()))
}

/// A Redis server on a free loopback port, with the append-only file on (`appendfsync
/// always`) and no snapshots, in a temporary folder. Killed when dropped.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts `redis-server` and waits until it answers `PING`.
    ///
    /// # Errors
    /// [`ServerError::Missing`] without the binary, [`ServerError::Failed`] when the
    /// server does not start.
    pub fn start() -> Result<Self, ServerError> {
        let bin = redis_server_bin().ok_or_else(|| {
            ServerError::Missing(
                "redis-server is not installed: `apt-get install redis-server` on Debian and Ubuntu"
                    .into(),
            )
        })?;
        let dir = tempfile::Builder::new()
            .prefix("halo-redis-")
            .tempdir()
            .map_err(|e| ServerError::Failed(format!("cannot make a temporary folder: {e}")))?;
        let log = dir.path().join("redis.log");
        let mut last = String::new();
        for _ in 0..3 {
            let port = free_port()?;
            let child = Command::new(&bin)
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args([
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--save",
                    "",
                ])
                .args(["--daemonize", "no", "--logfile"])
                .arg(&log)
                .arg("--dir")
                .arg(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| ServerError::Failed(format!("cannot run redis-server: {e}")))?;
            let mut child = child;
            if wait_ready(&mut child, port, Duration::from_secs(20)) {
                return Ok(RedisServer { child, port, dir });
            }
            last = tail(&log, 2_000);
            let _ = child.kill();
            let _ = child.wait();
        }
        Err(ServerError::Failed(format!(
            "redis-server did not start; the end of its log:\n{last}"
        )))
    }

    /// [`start`](Self::start) for the test `test`: `None` (after a loud skip line) when
    /// Redis is not installed, outside CI.
    ///
    /// # Panics
    /// When it is missing in CI or does not start.
    pub fn for_test(test: &str) -> Option<Self> {
        for_test(test, Self::start())
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its URL: `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The folder of its append-only file.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Whether the Redis server `child` on `port` answers `PING` within `within`.
fn wait_ready(child: &mut Child, port: u16, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut reply = [0u8; 7];
            if stream.write_all(b"PING\r\n").is_ok()
                && stream.read_exact(&mut reply).is_ok()
                && &reply == b"+PONG\r\n"
            {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
