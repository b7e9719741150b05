//! `bash` in the OS sandbox, through the CLI: the coder with `--yes`, driven by the loopback
//! fake, asks `bash` to write outside its folder, to connect to the fake's own port and to
//! count the processes it sees; all three are blocked, and the model reads why. Without
//! bubblewrap, commands are refused with what to install.

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use serde_json::{Value, json};

use super::{coder_text, describe, run};

/// The tool results the model read, in order: the `tool` messages of the last request.
fn tool_results(sim: &OpenAiSim) -> Vec<String> {
    let requests = sim.requests();
    let last = requests.last().expect("a request");
    last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_cannot_write_outside_reach_the_network_or_see_other_processes() {
    let top = tempfile::tempdir().unwrap();
    let project = top.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("notes.txt"), "hello\n").unwrap();
    let outside = top.path().join("escape.txt");

    let sim = OpenAiSim::openai().await.unwrap();
    // `http://127.0.0.1:PORT/...`
    let base = sim.base_url();
    let port: u16 = base
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {base}"));
    sim.set_reply_script([
        SimReply::tool_call(
            "bash",
            json!({"command": format!("echo pwned > {}; echo pwned > ../escape.txt; echo done", outside.display())}),
        ),
        SimReply::tool_call(
            "bash",
            json!({"command": format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")}),
        ),
        SimReply::tool_call(
            "bash",
            json!({"command": "ls /proc | grep -c '^[0-9]'"}),
        ),
        SimReply::text("All three were blocked."),
    ]);
    let out = run(coder_text(&sim, &project, &["--yes", "Try to escape."])).await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("commands: OS sandbox (bubblewrap): writes only in the root"),
        "the startup lines say how commands are confined: {}",
        describe(&out)
    );

    let results = tool_results(&sim);
    assert_eq!(results.len(), 3, "{results:?}");
    // 1. Writes outside the folder fail, and nothing was written.
    assert!(!outside.exists(), "{} was written", outside.display());
    assert!(
        results[0].starts_with("exit code: 0\nstdout:\ndone\nstderr:\n")
            && results[0].matches("Permission denied").count()
                + results[0].matches("Read-only file system").count()
                + results[0].matches("No such file or directory").count()
                == 2,
        "{}",
        results[0]
    );
    // 2. The fake's own port cannot be reached: the command has a network of its own.
    assert!(
        results[1].starts_with("exit code: 1\nstderr:\n")
            && results[1].contains("Connection refused")
            && !results[1].contains("connected\n"),
        "{}",
        results[1]
    );
    // 3. It sees only its own processes: the namespace's init, bash, ls and grep at most.
    let seen: usize = results[2]
        .strip_prefix("exit code: 0\nstdout:\n")
        .unwrap_or_else(|| panic!("{}", results[2]))
        .trim()
        .parse()
        .unwrap();
    assert!(
        (1..=4).contains(&seen),
        "it saw {seen} processes: {}",
        results[2]
    );
    let on_host = std::fs::read_dir("/proc")
        .unwrap()
        .filter(|e| {
            e.as_ref().is_ok_and(|e| {
                e.file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            })
        })
        .count();
    assert!(
        on_host > seen,
        "the host has {on_host} processes, the command saw {seen}"
    );
}

// Without bubblewrap on the PATH, the coder says so at start and `bash` refuses with what to
// install, rather than running the command unconfined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_bubblewrap_commands_are_refused_with_what_to_install() {
    let project = tempfile::tempdir().unwrap();
    let marker = project.path().join("ran.txt");
    let empty = tempfile::tempdir().unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call(
            "bash",
            json!({"command": format!("echo ran > {}", marker.display())}),
        ),
        SimReply::text("It was refused."),
    ]);
    let mut cmd = coder_text(&sim, project.path(), &["--yes", "Run it."]);
    cmd.env("PATH", empty.path());
    let out = run(cmd).await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let refusal = "no OS sandbox for commands: bubblewrap (bwrap) is not installed; install it \
                   (`apt-get install bubblewrap` on Debian and Ubuntu, `dnf install bubblewrap` \
                   on Fedora)";
    assert!(
        stdout.contains("commands: commands refused: bubblewrap (bwrap) is not installed"),
        "{}",
        describe(&out)
    );
    assert_eq!(tool_results(&sim), [format!("error: {refusal}")]);
    assert!(!marker.exists(), "the command ran unconfined");
}
