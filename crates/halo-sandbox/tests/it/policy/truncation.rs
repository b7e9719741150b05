//! `OutputTruncation` through the agent loop: a 1 MB user-tool result is bounded.

use std::sync::Arc;

use halo_core::testing::ScriptedModel;
use halo_core::{NoArgs, Tool, ToolError, ToolOutput};
use halo_sandbox::policy::OutputTruncation;
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
