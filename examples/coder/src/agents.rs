//! The coder's agent tools with a hosted model: `plan` (3 to 5 steps run in the session's
//! own context, halo-strategies' [`Plan`]) and `subagent` (a fresh agent per role with the
//! session's tools, [`Subagent`]). The small embedded model does not get them: it keeps its
//! read-only tool set.
//!
//! Both run their inner tool calls through the session's hooks, so the permission policy
//! judges each `write` or `bash` a plan step or a sub-agent makes; the calls of `plan` and
//! `subagent` themselves only start work, and their annotations say they run the agent, so
//! the policy classes them as reads: they never wait at the approval prompt.

use halo_core::{HaloAgentBuilder, HaloError};
use halo_strategies::plan::PLAN_TOOL;
use halo_strategies::subagent::SUBAGENT_TOOL;
use halo_strategies::{Plan, Subagent};

/// The agent tools a hosted model gets, as the startup line names them.
pub const AGENT_TOOLS: &[&str] = &[PLAN_TOOL, SUBAGENT_TOOL];

/// Adds `plan` and `subagent` to a hosted model's agent.
///
/// # Errors
/// [`HaloError::Prefix`] when a tool of the same name is there already.
pub fn agent_tools(builder: HaloAgentBuilder) -> Result<HaloAgentBuilder, HaloError> {
    builder.tool(Plan::new())?.tool(Subagent::new())
}

#[cfg(test)]
mod tests {
    use halo_core::testing::ScriptedModel;
    use halo_core::{HaloAgent, Message};
    use halo_sandbox::VirtualSandbox;
    use halo_sandbox::policy::{PermissionPolicy, PermissionPreset};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_hosted_model_gets_plan_and_subagent_and_a_subagent_uses_the_sandbox_tools() {
        let sandbox = VirtualSandbox::new()
            .with_file("notes.md", "hello")
            .unwrap();
        let model = ScriptedModel::new()
            .tool_call(
                "subagent",
                json!({"role": "reader", "task": "read notes.md"}),
            )
            .tool_call("read", json!({"path": "notes.md"}))
            .text("the notes say hello")
            .text("They say hello.");
        let policy = PermissionPolicy::new(PermissionPreset::WorkspaceWrite);
        let builder = HaloAgent::builder(model.clone())
            .system(crate::SYSTEM)
            .tools(sandbox.tools())
            .unwrap()
            .hook(policy);
        let mut agent = agent_tools(builder).unwrap().build();
        let names: Vec<_> = agent
            .prefix()
            .tools()
            .iter()
            .map(|t| t.name.clone())
            .collect();
        for name in AGENT_TOOLS {
            assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
        }
        let out =
            futures::executor::block_on(agent.generate_text("What do my notes say?")).unwrap();
        assert_eq!(out.text, "They say hello.");
        // Not denied by the policy (no approver here), and the sub-agent read the file.
        assert_eq!(out.steps[0].tool_results[0].content, "the notes say hello");
        let requests = model.requests();
        let Some(Message::Tool(read)) = requests[2].history.last() else {
            panic!()
        };
        assert!(read.content.contains("hello") && !read.is_error, "{read:?}");
        assert!(!requests[1].tool_names.iter().any(|n| n == "subagent"));
        assert_eq!(out.stats.delegated_steps, 2);
    }

    #[test]
    fn the_embedded_model_keeps_its_read_only_tools() {
        let sandbox = VirtualSandbox::new();
        let builder = HaloAgent::builder(ScriptedModel::new());
        let agent = crate::embedded_agent(builder, sandbox.tools())
            .unwrap()
            .build();
        let names: Vec<_> = agent
            .prefix()
            .tools()
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, crate::EMBEDDED_TOOLS);
    }
}
