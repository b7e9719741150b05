//! Two web-chat processes on one PostgreSQL server (started for the test): a run started
//! through one pauses for approval, is approved through the other, and finishes; the first
//! follows the end of the run from the store.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

use halo_stream::testing::PostgresServer;
use serde_json::{Value, json};

/// A web-chat process, killed when dropped.
struct WebChat {
    child: Child,
    url: String,
}

impl Drop for WebChat {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(store: &str, dir: &std::path::Path, name: &str) -> WebChat {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_web-chat"))
        .args([
            "--port",
            "0",
            "--shared",
            "--store",
            store,
            "--coding-tools",
        ])
        .arg(&project)
        .arg("--token-file")
        .arg(dir.join(name).join("token"))
        .env("WEB_CHAT_USERS", "ann:ann-password-1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    // The rest of its output, read so it never writes to a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("web-chat printed {line:?}"))
        .trim_end_matches('/')
        .to_owned();
    WebChat { child, url }
}

/// The JSON parts of an SSE body.
fn parts(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

fn text(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|p| p["type"] == "text-delta")
        .map(|p| p["delta"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_on_one_process_is_approved_through_the_other_and_finishes() {
    let Some(server) = PostgresServer::for_test(
        "a_run_started_on_one_process_is_approved_through_the_other_and_finishes",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = server.url();
    let a = start(&url, dir.path(), "a");
    let b = start(&url, dir.path(), "b");
    let http = reqwest::Client::new();

    let login = http
        .post(format!("{}/api/login", a.url))
        .json(&json!({"user": "ann", "password": "ann-password-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let cookie = login.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_owned();

    let body = json!({
        "id": "across",
        "messages": [{"id": "u1", "role": "user",
                      "parts": [{"type": "text", "text": "Please run `echo from-a` now"}]}],
    });
    let started = http
        .post(format!("{}/api/chat", a.url))
        .header("cookie", &cookie)
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let started = parts(&started);
    let request = started
        .iter()
        .find(|p| p["type"] == "tool-approval-request")
        .unwrap_or_else(|| panic!("no approval request in {started:?}"));
    let call = request["toolCallId"].as_str().unwrap();

    // The browser's cookie is good on the other process: the session is in the store.
    let approved = http
        .post(format!("{}/api/chats/across/approvals/{call}", b.url))
        .header("cookie", &cookie)
        .json(&json!({"approved": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 202);
    let after = approved.json::<Value>().await.unwrap()["after"]
        .as_u64()
        .unwrap();

    let rest = http
        .get(format!("{}/api/chat/across/stream?after={after}", a.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let rest = parts(&rest);
    let output = rest
        .iter()
        .find(|p| p["type"] == "tool-output-available")
        .unwrap_or_else(|| panic!("no tool output in {rest:?}"));
    assert!(output["output"].as_str().unwrap().contains("from-a"));
    assert!(text(&rest).starts_with("The command said: "));
    assert!(text(&rest).contains("from-a"));
    assert_eq!(rest.last().unwrap()["type"], "finish");

    // Both processes show the finished chat.
    for process in [&a, &b] {
        let page: Value = http
            .get(format!("{}/api/chats/across", process.url))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(page["resume"], false);
        assert_eq!(page["messages"].as_array().unwrap().len(), 2);
    }
}
