//! Sub-agents against the OpenAI simulator (halo-adapters' `sim`): the second sub-agent of
//! a role reads its prefix from the provider's cache (issue 14 "Done means").

use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::sim::openai::OpenAiSim;
use halo_adapters::sim::{SimReply, count_tokens};
use halo_core::{DynTool, HaloAgent, ToolError, ToolOutput, ToolSpec, async_trait};
use halo_strategies::Subagent;
use serde_json::{Value, json};

/// A tool with a long description, so a sub-agent's prefix passes OpenAI's 1,024-token
/// caching minimum. Named after `subagent`, so it comes after it in the caller's tools and
/// first in a sub-agent's: the sub-agents' prefix shares nothing with the caller's.
struct Wiki;

#[async_trait]
impl DynTool for Wiki {
    fn spec(&self) -> ToolSpec {
        let mut description = String::from("Looks a topic up in the team wiki. ");
        for i in 0..150 {
            description.push_str(&format!("Rule {i}: cite the page you read. "));
        }
        ToolSpec::new(
            "wiki",
            description,
            json!({"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}),
        )
    }
    async fn call_json(&self, args: Value) -> Result<ToolOutput, ToolError> {
        Ok(format!("wiki page on {}", args["topic"]).into())
    }
}

#[tokio::test]
async fn the_second_sub_agent_of_a_role_reads_its_prefix_from_the_cache() {
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("subagent", json!({"role": "researcher", "task": "otters"})),
        SimReply::text("Otters hold hands."),
        SimReply::tool_call("subagent", json!({"role": "researcher", "task": "beavers"})),
        SimReply::text("Beavers build dams."),
        SimReply::text("Done."),
    ]);
    let model = OpenAiCompatible::custom(sim.base_url(), "sim-model")
        .build()
        .unwrap();
    let mut agent = HaloAgent::builder(model)
        .system("You research animals with sub-agents.")
        .tool(Wiki)
        .unwrap()
        .agent_tool(Subagent::new())
        .unwrap()
        .build();
    let out = agent.generate_text("Otters, then beavers.").await.unwrap();
    assert_eq!(out.text, "Done.");
    assert_eq!(sim.remaining_replies(), 0);

    let records = sim.records();
    assert_eq!(records.len(), 5);
    let (first, second) = (&records[1], &records[3]);
    // Both sub-agents: the same tools and system prompt, only the task differs.
    assert_eq!(first.body["tools"], second.body["tools"]);
    assert_eq!(first.body["messages"][0], second.body["messages"][0]);
    assert_eq!(first.body["tools"].as_array().unwrap().len(), 1);
    // The first sub-agent of the role is a cold prefix; the second reads all of it but the
    // last partial 128-token block (and the task) from the cache.
    assert_eq!(first.cached_tokens, 0, "{first:?}");
    let task = count_tokens("beavers") + 8;
    assert!(second.prompt_tokens > 1_024);
    assert!(
        second.cached_tokens + 128 + task >= second.prompt_tokens,
        "cached {} of {}",
        second.cached_tokens,
        second.prompt_tokens
    );
    // The caller's stats hold the sub-agents' cache reads.
    let stats = agent.stats();
    assert_eq!(stats.delegated_steps, 2);
    let own: u64 = out
        .steps
        .iter()
        .map(|s| s.usage.cache_read_tokens.unwrap_or(0))
        .sum();
    assert_eq!(stats.cache_read_tokens, own + second.cached_tokens);
}
