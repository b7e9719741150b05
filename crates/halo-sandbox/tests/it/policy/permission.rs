//! `PermissionPolicy` through the agent loop: each preset, asking, unclassified tools, and a
//! preset switch that leaves the prefix alone.

use std::sync::Arc;

use halo_core::testing::ScriptedModel;
use halo_core::{NoArgs, Tool, ToolError, ToolOutput};
use halo_sandbox::policy::{
    AccessClass, ApprovalAnswer, PermissionPolicy, PermissionPreset, skipped_message,
};
use serde_json::json;

use super::{Answers, Workspace, results};

/// A user tool that answers `pong`.
struct Ping;

impl Tool for Ping {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "ping"
    }
    fn description(&self) -> &str {
        "Answers pong."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("pong"))
    }
}

/// A write, a command, a read, and the user tool, then an answer.
fn mixed_script() -> ScriptedModel {
    ScriptedModel::new()
        .tool_call("write", json!({"path": "new.txt", "content": "hello"}))
        .tool_call("bash", json!({"command": "touch ran.txt"}))
        .tool_call("read", json!({"path": "src/main.rs"}))
        .tool_call("ping", json!({}))
        .text("done")
}

#[tokio::test]
async fn read_only_denies_write_bash_and_unclassified_tools_and_says_what_is_allowed() {
    let ws = Workspace::new();
    let model = mixed_script();
    let policy = PermissionPolicy::new(PermissionPreset::ReadOnly);
    let mut agent = ws
        .builder(&model, vec![Arc::new(policy)])
        .tool(Ping)
        .unwrap()
        .build();
    let before = ws.snapshot();

    let out = agent.generate_text("change things").await.unwrap();
    model.assert_consumed();

    let r = results(&out);
    // The agent's tools the preset allows, by their annotations (sorted by name).
    let allowed = "use glob, grep, ls or read";
    assert_eq!(
        r[0].1,
        format!("this session is read-only: `write` is not allowed; {allowed}")
    );
    assert_eq!(
        r[1].1,
        format!("this session is read-only: `bash` is not allowed; {allowed}")
    );
    assert_eq!(r[2].1, "     1\tfn main() {}");
    assert_eq!(
        r[3].1,
        format!("this session is read-only: `ping` is not allowed; {allowed}")
    );
    assert_eq!(
        r.iter().map(|x| x.2).collect::<Vec<_>>(),
        [true, true, false, true]
    );
    assert_eq!(ws.snapshot(), before);
}

#[tokio::test]
async fn read_only_allows_a_user_tool_classified_as_read() {
    let ws = Workspace::new();
    let model = ScriptedModel::new()
        .tool_call("ping", json!({}))
        .text("done");
    let policy =
        PermissionPolicy::new(PermissionPreset::ReadOnly).classify("ping", AccessClass::Read);
    let mut agent = ws
        .builder(&model, vec![Arc::new(policy)])
        .tool(Ping)
        .unwrap()
        .build();

    let out = agent.generate_text("ping").await.unwrap();

    assert_eq!(
        results(&out)[0],
        ("ping".to_string(), "pong".to_string(), false)
    );
}

#[tokio::test]
async fn workspace_write_allows_writes_and_asks_before_commands() {
    let ws = Workspace::new();
    let answers = Answers::new([ApprovalAnswer::Run, ApprovalAnswer::Skip]);
    let model = ScriptedModel::new()
        .tool_call("write", json!({"path": "new.txt", "content": "hello"}))
        .tool_call("bash", json!({"command": "echo one > one.txt"}))
        .tool_call("bash", json!({"command": "touch two.txt"}))
        .text("done");
    let policy =
        PermissionPolicy::new(PermissionPreset::WorkspaceWrite).with_approver(answers.clone());
    let mut agent = ws.agent(&model, vec![Arc::new(policy)]);

    let out = agent.generate_text("make files").await.unwrap();
    model.assert_consumed();

    // Only the commands were asked about.
    assert_eq!(
        answers.asked(),
        [
            ("bash".to_string(), "echo one > one.txt".to_string()),
            ("bash".to_string(), "touch two.txt".to_string())
        ]
    );
    let r = results(&out);
    assert_eq!(r[0].1, "wrote 5 bytes to `new.txt`");
    assert!(!r[1].2 && r[1].1.contains("exit code: 0"), "{:?}", r[1]);
    assert_eq!(r[2].1, skipped_message("bash"));
    assert!(r[2].2);
    assert_eq!(
        std::fs::read_to_string(ws.path("new.txt")).unwrap(),
        "hello"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path("one.txt")).unwrap(),
        "one\n"
    );
    assert!(!ws.exists("two.txt"), "the skipped command ran");
}

#[tokio::test]
async fn workspace_write_with_no_one_to_ask_denies_commands_at_once_and_says_why() {
    let ws = Workspace::new();
    let model = ScriptedModel::new()
        .tool_call("bash", json!({"command": "touch ran.txt"}))
        .text("done");
    let mut agent = ws.agent(
        &model,
        vec![Arc::new(PermissionPolicy::new(
            PermissionPreset::WorkspaceWrite,
        ))],
    );

    let out = agent.generate_text("run it").await.unwrap();

    assert_eq!(
        results(&out)[0].1,
        "`bash` did not run: it needs the user's approval (it runs commands or reaches beyond the workspace), which no one can give in this session; go on without it, or ask the user to allow it"
    );
    assert!(!ws.exists("ran.txt"));
}

#[tokio::test]
async fn full_access_allows_everything_without_asking() {
    let ws = Workspace::new();
    let answers = Answers::new([]);
    let model = mixed_script();
    let policy = PermissionPolicy::new(PermissionPreset::FullAccess).with_approver(answers.clone());
    let mut agent = ws
        .builder(&model, vec![Arc::new(policy)])
        .tool(Ping)
        .unwrap()
        .build();

    let out = agent.generate_text("do it all").await.unwrap();
    model.assert_consumed();

    let r = results(&out);
    assert!(r.iter().all(|x| !x.2), "{r:?}");
    assert_eq!(r[3].1, "pong");
    assert!(ws.exists("new.txt") && ws.exists("ran.txt"));
    assert!(answers.asked().is_empty());
}

#[tokio::test]
async fn switching_the_preset_mid_session_keeps_the_prefix() {
    let ws = Workspace::new();
    let model = ScriptedModel::new()
        .tool_call("write", json!({"path": "a.txt", "content": "a"}))
        .text("could not")
        .tool_call("write", json!({"path": "a.txt", "content": "a"}))
        .text("wrote it");
    let policy = Arc::new(PermissionPolicy::new(PermissionPreset::ReadOnly));
    let mut agent = ws.agent(&model, vec![policy.clone()]);
    let fingerprint = agent.prefix().fingerprint();

    let first = agent.generate_text("write a.txt").await.unwrap();
    policy.set_preset(PermissionPreset::FullAccess);
    let second = agent.generate_text("now you may").await.unwrap();
    model.assert_consumed();

    assert!(results(&first)[0].2);
    assert_eq!(results(&second)[0].1, "wrote 1 bytes to `a.txt`");
    assert_eq!(agent.prefix().fingerprint(), fingerprint);
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(|r| r.fingerprint == fingerprint));
    assert!(
        requests
            .windows(2)
            .all(|w| w[0].prefix_bytes == w[1].prefix_bytes)
    );
    assert_eq!(agent.stats().prefix_fingerprint_changes, 0);
}
