//! Sub-agents against the OpenAI simulator (halo-adapters' `sim`): the second sub-agent of
//! a role reads its prefix from the provider's cache (issue 14 "Done means").

use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::sim::openai::OpenAiSim;
use halo_adapters::sim::{SimReply, count_tokens};
use halo_core::{DynTool, HaloAgent, ToolContext, ToolError, ToolOutput, ToolSpec, async_trait};
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
    async fn call_json(&self, args: Value, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
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
        .tool(Subagent::new())
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

#[tokio::test]
async fn a_plans_requests_read_the_callers_prefix_and_history_from_the_cache() {
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("plan", json!({"task": "otter facts"})),
        SimReply::json(&json!({"steps": ["look up otters", "pick three facts", "write them"]})),
        SimReply::tool_call("wiki", json!({"topic": "otters"})),
        SimReply::text("read the page"),
        SimReply::text("hands, tools, fur"),
        SimReply::text("Otters hold hands, use tools and have dense fur."),
        SimReply::text("Done."),
    ]);
    // The OpenAI profile: active tools go out as `allowed_tools`.
    let model = OpenAiCompatible::openai("gpt-4o-mini")
        .api_key("sk-sim")
        .base_url(sim.base_url())
        .max_retries(0)
        .build()
        .unwrap();
    let mut agent = HaloAgent::builder(model)
        .system("You research animals.")
        .tool(Wiki)
        .unwrap()
        .tool(halo_strategies::Plan::new())
        .unwrap()
        .build();
    let out = agent.generate_text("Three otter facts.").await.unwrap();
    assert_eq!(out.text, "Done.");
    assert_eq!(sim.remaining_replies(), 0);
    let records = sim.records();
    assert_eq!(records.len(), 7);
    // The same tools array in every request; the fork's carry allowed_tools without `plan`.
    for r in &records {
        assert_eq!(r.body["tools"], records[0].body["tools"]);
    }
    assert_eq!(records[0].body["tool_choice"], json!("auto"));
    for r in &records[1..6] {
        assert_eq!(
            r.body["tool_choice"]["allowed_tools"]["tools"],
            json!([{"type": "function", "function": {"name": "wiki"}}])
        );
    }
    // Every request after the first reads at least all the first one sent, but the last
    // partial 128-token block.
    for r in &records[1..] {
        assert!(
            r.cached_tokens + 128 > records[0].prompt_tokens,
            "cached {} of the first request's {}",
            r.cached_tokens,
            records[0].prompt_tokens
        );
    }
    let stats = agent.stats();
    assert_eq!(stats.delegated_steps, 5);
    assert_eq!(
        (stats.cache_busts, stats.prefix_fingerprint_changes),
        (0, 0)
    );
    let verdicts: Vec<_> = agent
        .cache_ledger()
        .checks()
        .map(|c| c.verdict.clone())
        .collect();
    assert_eq!(
        verdicts,
        [halo_core::CacheVerdict::Cold, halo_core::CacheVerdict::Hit]
    );
}
