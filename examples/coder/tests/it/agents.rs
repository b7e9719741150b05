//! The coder's `plan` and `subagent` through the CLI, against the OpenAI simulator: the
//! first request offers both, the startup line names them, and a sub-agent's work reaches
//! the task's answer.

use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use serde_json::json;

use crate::{coder_text, describe, run};

#[tokio::test]
async fn a_hosted_model_is_offered_plan_and_subagent_and_a_sub_agent_reads_a_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "the answer is 42\n").unwrap();
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call(
            "subagent",
            json!({"role": "reader", "task": "Read notes.md and say what it says."}),
        ),
        SimReply::tool_call("read", json!({"path": "notes.md"})),
        SimReply::text("notes.md says: the answer is 42"),
        SimReply::text("The notes say the answer is 42."),
    ]);
    let out = run(coder_text(&sim, dir.path(), &["What do my notes say?"])).await;
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("agents: plan, subagent"),
        "{}",
        describe(&out)
    );
    assert!(
        stdout.contains("The notes say the answer is 42."),
        "{}",
        describe(&out)
    );
    let bodies = sim.requests();
    assert_eq!(bodies.len(), 4);
    let names = |i: usize| -> Vec<String> {
        bodies[i]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let first = names(0);
    assert!(
        first.iter().any(|n| n == "plan") && first.iter().any(|n| n == "subagent"),
        "{first:?}"
    );
    // The sub-agent: the tools minus `subagent`, its own conversation, the file read.
    let sub = names(1);
    assert!(
        sub.iter().any(|n| n == "plan") && !sub.iter().any(|n| n == "subagent"),
        "{sub:?}"
    );
    assert_eq!(
        bodies[1]["messages"][1]["content"],
        "Read notes.md and say what it says."
    );
    let read = &bodies[2]["messages"].as_array().unwrap().last().unwrap()["content"];
    assert!(
        read.as_str().unwrap().contains("the answer is 42"),
        "{read}"
    );
    let result = &bodies[3]["messages"].as_array().unwrap().last().unwrap()["content"];
    assert_eq!(result, "notes.md says: the answer is 42");
}
