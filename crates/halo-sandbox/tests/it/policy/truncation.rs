//! `OutputTruncation` through the agent loop: a 1 MB user-tool result is bounded, and the
//! sandbox's own results pass the default bound unchanged.

use std::sync::Arc;

use halo_core::testing::ScriptedModel;
use halo_core::{NoArgs, Tool, ToolError, ToolOutput};
use halo_sandbox::policy::{DEFAULT_RESULT_LIMIT, OutputTruncation};
use halo_sandbox::{DEFAULT_OUTPUT_LIMIT, NOTES_MARGIN};
use serde_json::json;

use super::{Workspace, last_result, results};

/// A user tool that returns 1,000,000 bytes: `<start>`, a body of 2-byte `é`s, `<end>`.
struct Huge;

const HUGE_BYTES: usize = 1_000_000;

fn huge_text() -> String {
    let body = "é".repeat((HUGE_BYTES - "<start><end>".len()) / 2);
    format!("<start>{body}<end>")
}

impl Tool for Huge {
    type Args = NoArgs;
    fn name(&self) -> &str {
        "dump"
    }
    fn description(&self) -> &str {
        "Dumps a large report."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(huge_text()))
    }
}

#[tokio::test]
async fn a_one_megabyte_user_tool_result_is_cut_to_the_bound_with_head_and_tail() {
    let ws = Workspace::new();
    let model = ScriptedModel::new()
        .tool_call("dump", json!({}))
        .tool_call("read", json!({"path": "src/main.rs"}))
        .text("done");
    let mut agent = ws
        .builder(&model, vec![Arc::new(OutputTruncation::new(4096))])
        .tool(Huge)
        .unwrap()
        .build();

    let out = agent.generate_text("dump the report").await.unwrap();
    model.assert_consumed();

    let full = huge_text();
    assert_eq!(full.len(), HUGE_BYTES);
    let r = results(&out);
    let cut = &r[0].1;
    assert!(cut.len() <= 4096, "{} bytes", cut.len());
    assert!(cut.len() > 4000, "{} bytes", cut.len());
    let (head, rest) = cut.split_once("\n[... ").unwrap();
    let (omitted, tail) = rest.split_once(" bytes omitted ...]\n").unwrap();
    assert!(head.starts_with("<start>") && full.starts_with(head));
    assert!(tail.ends_with("<end>") && full.ends_with(tail));
    assert_eq!(
        head.len() + omitted.parse::<usize>().unwrap() + tail.len(),
        HUGE_BYTES
    );
    // The model reads the bounded result; small results pass unchanged.
    assert_eq!(&last_result(&model.requests()[1].history).content, cut);
    assert_eq!(r[1].1, "     1\tfn main() {}");
}

// Trigger: the default bound was exactly the tools' 32 KiB output limit, so a `read` that
// stopped at the limit lost bytes from its middle (its note still naming lines it no longer
// showed) and a big `bash` result lost its `stderr:` header.
#[tokio::test]
async fn sandbox_results_pass_the_default_truncation_unchanged() {
    let ws = Workspace::new();
    let lines: String = (1..=5000)
        .map(|i| format!("line {i:05} of a long file to read\n"))
        .collect();
    std::fs::write(ws.path("long.txt"), lines).unwrap();
    let read = json!({"path": "long.txt"});
    // About 108 KB on each stream.
    let bash = json!({"command": "seq 1 20000; seq 20001 40000 >&2"});
    let tools = ws.sandbox.tools();
    let own = async |name: &str, args: serde_json::Value| {
        let tool = tools.iter().find(|t| t.spec().name == name).unwrap();
        tool.call_json(
            args,
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap()
        .content
    };
    let own_read = own("read", read.clone()).await;
    let own_bash = own("bash", bash.clone()).await;
    // Both are over the tools' output limit, which is what the old default cut at.
    assert!(own_read.len() > DEFAULT_OUTPUT_LIMIT, "{}", own_read.len());
    assert!(own_bash.len() > DEFAULT_OUTPUT_LIMIT, "{}", own_bash.len());
    assert!(
        own_read.ends_with("call read with offset=800 to read more]"),
        "{own_read}"
    );
    assert!(own_bash.contains("\nstderr:\n20001\n"), "{own_bash}");

    let model = ScriptedModel::new()
        .tool_call("read", read)
        .tool_call("bash", bash)
        .text("done");
    let mut agent = ws.agent(&model, vec![Arc::new(OutputTruncation::default())]);
    let out = agent.generate_text("read and run").await.unwrap();
    model.assert_consumed();
    let r = results(&out);
    assert_eq!((r[0].1.as_str(), r[0].2), (own_read.as_str(), false));
    assert_eq!((r[1].1.as_str(), r[1].2), (own_bash.as_str(), false));
    assert_eq!(DEFAULT_RESULT_LIMIT, DEFAULT_OUTPUT_LIMIT + NOTES_MARGIN);
}
