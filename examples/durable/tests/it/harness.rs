//! What every test stands on: its own network namespace, the Restate server, worker
//! processes, the load balancer in front of them, and a client of Restate's ingress.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

use crate::model::FakeModel;

/// The environment variable that marks the process re-executed inside the namespace.
const INSIDE: &str = "HALO_DURABLE_NETNS";

/// The Restate server binary: `HALO_RESTATE_SERVER`, else where `cargo xtask restate` (and
/// `cargo xtask ci`) installs it: the npm project `restate/` of this package, which pins
/// its version (`node_modules/@restatedev/restate-server-<os>-<cpu>/bin/restate-server`).
/// `Err` says why there is none.
fn restate_server() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("HALO_RESTATE_SERVER").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "HALO_RESTATE_SERVER names {}, which is not a file",
            path.display()
        );
        return Ok(path);
    }
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => return Err(format!("no Restate server build for {other}")),
    };
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "restate/node_modules/@restatedev/restate-server-{os}-{cpu}/bin/restate-server"
    ));
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no Restate server at {}: run `cargo xtask restate` to install it (cargo xtask ci does)",
            path.display()
        ))
    }
}

/// Runs `body` in a network namespace of its own with only loopback up: this process runs
/// itself again there (`unshare -rn`, the libtest filter `test` and `--exact`), and the
/// workers, the server and the fake model are all started inside. Outside, it only checks
/// the child's exit status.
///
/// Without a Restate server: a SKIP line outside CI, a failure in CI.
pub fn isolated<F>(test: &str, body: impl FnOnce(PathBuf) -> F)
where
    F: Future<Output = ()>,
{
    if std::env::var_os(INSIDE).is_some() {
        let server = restate_server().unwrap_or_else(|why| panic!("{why}"));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        runtime.block_on(body(server));
        return;
    }
    let server = match restate_server() {
        Ok(server) => server,
        Err(why) => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(!ci, "{test}: {why}");
            eprintln!(
                "\n==================== SKIP {test} ====================\n{why}\n\
                 (in CI, CI=true, this fails instead)\n"
            );
            return;
        }
    };
    let ip = ip().unwrap_or_else(|| {
        panic!(
            "`ip` (iproute2) is needed to bring loopback up in the test's network namespace: \
             apt-get install iproute2 (cargo xtask ci does)"
        )
    });
    let exe = std::env::current_exe().expect("the test binary's path");
    let started = Instant::now();
    // As root, a network namespace needs no user namespace (and a chroot, such as `cargo
    // xtask fresh`'s, allows none); otherwise the user namespace maps us to root in it.
    let mut unshare = Command::new("unshare");
    if !is_root() {
        unshare.arg("--map-root-user");
    }
    let status = unshare
        .args(["--net", "--", "sh", "-c"])
        .arg("\"$HALO_IP\" link set lo up && exec \"$0\" \"$@\"")
        .arg(&exe)
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(INSIDE, "1")
        .env("HALO_IP", &ip)
        .env("HALO_RESTATE_SERVER", &server)
        .status()
        .unwrap_or_else(|e| panic!("cannot run unshare (util-linux): {e}"));
    assert!(
        status.success(),
        "{test} failed inside its network namespace ({status}, after {:.1} s): see its output \
         above (`unshare: ... Operation not permitted`, or `ip` failing, means this machine \
         allows no user namespaces to this user: run as root, or on Ubuntu 24.04 allow them \
         with `sysctl kernel.apparmor_restrict_unprivileged_userns=0`)",
        started.elapsed().as_secs_f64()
    );
}

/// Whether this process runs as root (its `/proc/self` belongs to its effective user).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `ip` (iproute2): on the `PATH`, else where Debian puts it (`/usr/sbin`, off a user's
/// `PATH`).
fn ip() -> Option<PathBuf> {
    let on_path = Command::new("sh")
        .args(["-c", "command -v ip"])
        .stderr(Stdio::null())
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_default();
    [on_path.as_str(), "/usr/sbin/ip", "/sbin/ip"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_absolute() && p.is_file())
}

/// A child process killed (SIGKILL) and reaped when dropped.
#[derive(Debug)]
pub struct Proc(pub Child);

impl Proc {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// `kill -9`, and wait for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `n` bytes of the file at `path`, for failure messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut start = text.len().saturating_sub(n);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// Polls `probe` every 50 ms until it gives `Some`, for at most `limit`.
pub async fn wait_for<T, F: Future<Output = Option<T>>>(
    what: &str,
    limit: Duration,
    mut probe: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the calls file `calls` has a line of `session` and `call_id`; returns it.
pub async fn started(calls: &Path, session: &str, call_id: &str) -> durable::CallLine {
    wait_for(
        &format!("{session} to start {call_id}"),
        Duration::from_secs(60),
        || async {
            durable::CallLine::read_all(calls)
                .ok()?
                .into_iter()
                .find(|l| l.session == session && l.call_id == call_id)
        },
    )
    .await
}

/// A Restate server on 127.0.0.1 (ingress :8080, admin :9070, node :5122: the namespace is
/// the test's own), its data and log in a temporary folder.
pub struct Restate {
    _proc: Proc,
    pub dir: tempfile::TempDir,
    pub ingress: String,
    pub admin: String,
    /// From spawn to both the admin API and the ingress answering their health checks.
    pub started_in: Duration,
    pub http: reqwest::Client,
}

impl Restate {
    pub async fn start(server: &Path) -> Restate {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let log = dir.path().join("restate.log");
        let out = std::fs::File::create(&log).expect("the server's log file");
        let started = Instant::now();
        let child = Command::new(server)
            .args(["--no-logo", "--bind-ip", "127.0.0.1", "--base-dir"])
            .arg(dir.path().join("data"))
            .args(["--default-num-partitions", "4"])
            .env("RESTATE_LOG_FILTER", "warn")
            .env("DO_NOT_TRACK", "1")
            .stdout(out.try_clone().expect("the log file"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", server.display()));
        let proc = Proc(child);
        let http = reqwest::Client::new();
        let (ingress, admin) = (
            "http://127.0.0.1:8080".to_string(),
            "http://127.0.0.1:9070".to_string(),
        );
        for url in [
            format!("{admin}/health"),
            format!("{ingress}/restate/health"),
        ] {
            let ok = wait_until_ok(&http, &url, Duration::from_secs(60)).await;
            assert!(
                ok,
                "Restate did not answer {url}; its log:\n{}",
                tail(&log, 4000)
            );
        }
        let started_in = started.elapsed();
        eprintln!(
            "restate-server: healthy {:.2} s after spawn",
            started_in.as_secs_f64()
        );
        Restate {
            _proc: proc,
            dir,
            ingress,
            admin,
            started_in,
            http,
        }
    }

    /// Registers the deployment at `uri` (Restate discovers its services there).
    pub async fn register(&self, uri: &str) {
        let response = self
            .http
            .post(format!("{}/deployments", self.admin))
            .json(&json!({"uri": uri}))
            .send()
            .await
            .expect("the admin API answers");
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        assert!(status.is_success(), "registering {uri}: {status} {body}");
    }

    /// Starts a run of `session` on `text` (`run/send`, with the idempotency key
    /// `SESSION: TEXT`); returns the invocation id.
    pub async fn send_run(&self, session: &str, text: &str) -> String {
        let url = format!("{}/HaloSession/{session}/run/send", self.ingress);
        let response = wait_for(
            "the ingress to know HaloSession",
            Duration::from_secs(20),
            || {
                let request = self
                    .http
                    .post(&url)
                    .header("idempotency-key", format!("{session}: {text}"))
                    .json(&json!({"text": text}));
                async move {
                    let response = request.send().await.ok()?;
                    (response.status() != reqwest::StatusCode::NOT_FOUND).then_some(response)
                }
            },
        )
        .await;
        let status = response.status();
        let body: Value = response.json().await.expect("a JSON answer");
        assert!(
            status.is_success(),
            "run/send of {session}: {status} {body}"
        );
        body["invocationId"]
            .as_str()
            .unwrap_or_else(|| panic!("no invocationId in {body}"))
            .to_string()
    }

    /// Starts a run of the workflow object `run` on `input` (`HaloWorkflow/{run}/run/send`);
    /// returns the invocation id.
    pub async fn send_workflow(&self, run: &str, input: &Value) -> String {
        let url = format!("{}/HaloWorkflow/{run}/run/send", self.ingress);
        let response = wait_for(
            "the ingress to know HaloWorkflow",
            Duration::from_secs(20),
            || {
                let request = self.http.post(&url).json(input);
                async move {
                    let response = request.send().await.ok()?;
                    (response.status() != reqwest::StatusCode::NOT_FOUND).then_some(response)
                }
            },
        )
        .await;
        let status = response.status();
        let body: Value = response.json().await.expect("a JSON answer");
        assert!(status.is_success(), "run/send of {run}: {status} {body}");
        body["invocationId"]
            .as_str()
            .unwrap_or_else(|| panic!("no invocationId in {body}"))
            .to_string()
    }

    /// Waits for the invocation `id` to end (`GET /restate/invocation/{id}/attach`) with
    /// `client`; its output, or the error status and text.
    pub async fn attach(&self, client: &reqwest::Client, id: &str) -> Result<Value, (u16, String)> {
        let url = format!("{}/restate/invocation/{id}/attach", self.ingress);
        let response = client
            .get(url)
            .send()
            .await
            .map_err(|e| (0, e.to_string()))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| (0, e.to_string()))?;
        if !status.is_success() {
            return Err((status.as_u16(), text));
        }
        serde_json::from_str(&text).map_err(|e| (status.as_u16(), format!("{e}: {text}")))
    }

    /// Calls `handler` of the session object `session` with `input` through the ingress,
    /// with `client`: the status and the body.
    pub async fn call(
        &self,
        client: &reqwest::Client,
        session: &str,
        handler: &str,
        input: Option<Value>,
    ) -> (u16, String) {
        let url = format!("{}/HaloSession/{session}/{handler}", self.ingress);
        let mut request = client.post(url);
        if let Some(input) = input {
            request = request.json(&input);
        }
        let response = request.send().await.expect("the ingress answers");
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }

    /// Cancels the invocation `id` (`PATCH /invocations/{id}/cancel` of the admin API).
    pub async fn cancel(&self, id: &str) {
        let response = self
            .http
            .patch(format!("{}/invocations/{id}/cancel", self.admin))
            .send()
            .await
            .expect("the admin API answers");
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        assert!(status.is_success(), "cancelling {id}: {status} {body}");
    }

    /// The session's `view`.
    pub async fn view(&self, session: &str) -> Value {
        let (status, body) = self.call(&self.http, session, "view", None).await;
        assert_eq!(status, 200, "view of {session}: {body}");
        serde_json::from_str(&body).expect("view is JSON")
    }

    /// Rows of a SQL query over Restate's introspection tables (`POST /query` of the admin
    /// API).
    pub async fn query(&self, sql: &str) -> Vec<Value> {
        let response = self
            .http
            .post(format!("{}/query", self.admin))
            .header("accept", "application/json")
            .json(&json!({"query": sql}))
            .send()
            .await
            .expect("the admin API answers");
        let status = response.status();
        let body: Value = response.json().await.expect("a JSON answer");
        assert!(status.is_success(), "query {sql}: {status} {body}");
        body["rows"].as_array().cloned().unwrap_or_default()
    }
}

async fn wait_until_ok(http: &reqwest::Client, url: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(r) = http.get(url).send().await
            && r.status().is_success()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A `durable-worker` process on `127.0.0.1:port`, its output in `log`.
pub struct Worker {
    pub proc: Proc,
    pub port: u16,
}

impl Worker {
    pub async fn start(port: u16, model_url: &str, calls: &Path, log: &Path) -> Worker {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("the worker's log file");
        let child = Command::new(env!("CARGO_BIN_EXE_durable-worker"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--model-url", model_url])
            .arg("--calls")
            .arg(calls)
            .stdout(out.try_clone().expect("the log file"))
            .stderr(out)
            .spawn()
            .expect("durable-worker starts");
        let proc = Proc(child);
        wait_for(
            &format!("durable-worker on port {port}"),
            Duration::from_secs(30),
            || async move {
                TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()
                    .map(|_| ())
            },
        )
        .await;
        Worker { proc, port }
    }
}

/// Two workers (ports 9081 and 9082) behind one registered address, on `model`, writing
/// their calls to `calls.tsv` and their output to `workers.log` in the server's folder.
pub async fn cluster(restate: &Restate, model: &FakeModel) -> ([Worker; 2], Balancer) {
    let dir = restate.dir.path();
    let (calls, log) = (dir.join("calls.tsv"), dir.join("workers.log"));
    let workers = [
        Worker::start(9081, &model.url, &calls, &log).await,
        Worker::start(9082, &model.url, &calls, &log).await,
    ];
    let balancer = Balancer::start(workers.iter().map(|w| w.port).collect()).await;
    restate.register(&balancer.uri()).await;
    (workers, balancer)
}

/// A TCP load balancer on 127.0.0.1: each connection goes to the next backend that
/// accepts one (round robin), as a Kubernetes Service spreads connections over its pods.
pub struct Balancer {
    pub addr: SocketAddr,
    /// Connections open to each backend now.
    pub open: Arc<Vec<AtomicUsize>>,
    /// Connections made to each backend in all.
    pub made: Arc<Vec<AtomicUsize>>,
    task: tokio::task::JoinHandle<()>,
}

impl Balancer {
    pub async fn start(backends: Vec<u16>) -> Balancer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let open: Arc<Vec<AtomicUsize>> =
            Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
        let made: Arc<Vec<AtomicUsize>> =
            Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
        let (open2, made2) = (open.clone(), made.clone());
        let task = tokio::spawn(async move {
            let mut next = 0usize;
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                let start = next;
                next = (next + 1) % backends.len();
                let backends = backends.clone();
                let (open, made) = (open2.clone(), made2.clone());
                tokio::spawn(async move {
                    for k in 0..backends.len() {
                        let i = (start + k) % backends.len();
                        let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", backends[i])).await
                        else {
                            continue;
                        };
                        made[i].fetch_add(1, Ordering::SeqCst);
                        open[i].fetch_add(1, Ordering::SeqCst);
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        open[i].fetch_sub(1, Ordering::SeqCst);
                        return;
                    }
                });
            }
        });
        Balancer {
            addr,
            open,
            made,
            task,
        }
    }

    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
