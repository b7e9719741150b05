//! Named agents and handoffs against the OpenAI simulator (halo-adapters' `sim`): a second
//! call of a named agent reads its prefix from the cache and its ledger says so; each
//! handoff is exactly one expected miss, never a bust.

use futures::StreamExt as _;
use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::sim::SimReply;
use halo_adapters::sim::openai::OpenAiSim;
use halo_core::handoff::Handoff;
use halo_core::{
    AgentEvent, CacheCheck, CacheVerdict, DynTool, HaloAgent, ToolContext, ToolError, ToolOutput,
    ToolSpec, async_trait,
};
use serde_json::{Value, json};

/// A tool with a long description, so each agent's prefix passes OpenAI's 1,024-token
/// caching minimum.
struct Manual(&'static str);

#[async_trait]
impl DynTool for Manual {
    fn spec(&self) -> ToolSpec {
        let mut description = format!("Looks a question up in the {} manual. ", self.0);
        for i in 0..150 {
            description.push_str(&format!("Rule {i}: cite the section you read. "));
        }
        ToolSpec::new(
            format!("{}_manual", self.0),
            description,
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        )
    }
    async fn call_json(&self, _: Value, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok("see section 2".into())
    }
}

fn model(sim: &OpenAiSim) -> OpenAiCompatible {
    OpenAiCompatible::custom(sim.base_url(), "sim-model")
        .build()
        .unwrap()
}

/// A streamed run of `agent` on `input`: its events.
async fn stream(agent: &mut HaloAgent, input: &str) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    let mut stream = std::pin::pin!(agent.stream_text(input));
    while let Some(event) = stream.next().await {
        events.push(event.unwrap());
    }
    events
}

#[tokio::test]
async fn a_second_call_of_a_named_agent_reads_its_prefix_from_the_cache() {
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("researcher", json!({"task": "otters"})),
        SimReply::text("Otters hold hands."),
        SimReply::tool_call("researcher", json!({"task": "beavers"})),
        SimReply::text("Beavers build dams."),
        SimReply::text("Done."),
    ]);
    let researcher = HaloAgent::builder(model(&sim))
        .name("researcher")
        .system("You research animals.")
        .tool(Manual("zoo"))
        .unwrap()
        .build()
        .as_tool("researcher", "Looks animal facts up; give it a topic.");
    let mut writer = HaloAgent::builder(model(&sim))
        .system("You write about animals.")
        .tool(researcher)
        .unwrap()
        .build();
    let events = stream(&mut writer, "Otters, then beavers.").await;
    assert_eq!(sim.remaining_replies(), 0);
    let records = sim.records();
    assert_eq!(records.len(), 5);
    let (first, second) = (&records[1], &records[3]);
    assert_eq!(first.body["tools"], second.body["tools"]);
    assert_eq!(first.body["messages"][0], second.body["messages"][0]);
    // The first call of the researcher is cold; the second reads all its prefix but the
    // last partial 128-token block (and the task) from the cache.
    assert_eq!(first.cached_tokens, 0, "{first:?}");
    assert!(second.prompt_tokens > 1_024);
    assert!(
        second.cached_tokens + 128 + 20 >= second.prompt_tokens,
        "cached {} of {}",
        second.cached_tokens,
        second.prompt_tokens
    );
    // The researcher's ledger, seen through its steps in the writer's stream: its second
    // call's request was predicted to read the prefix, and did.
    let checks: Vec<CacheCheck> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Inner(inner) => match &inner.event {
                AgentEvent::StepFinish(step) => Some(step.cache.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[0].verdict, CacheVerdict::Cold);
    assert_eq!(checks[1].verdict, CacheVerdict::Hit, "{:?}", checks[1]);
    assert!(checks[1].expected_cached_tokens.unwrap() > 1_000);
    assert_eq!(checks[1].observed_cached_tokens, Some(second.cached_tokens));
    // The writer's stats hold the researcher's calls.
    let stats = writer.stats();
    assert_eq!((stats.delegated_steps, stats.cache_busts), (2, 0));
}

#[tokio::test]
async fn each_handoff_is_one_expected_miss_and_never_a_bust() {
    let sim = OpenAiSim::openai().await.unwrap();
    sim.set_reply_script([
        SimReply::tool_call("transfer_to_billing", json!({})),
        SimReply::text("Your refund is on its way."),
        SimReply::tool_call("transfer_to_triage", json!({})),
        SimReply::text("Your order ships tomorrow."),
    ]);
    let triage = HaloAgent::builder(model(&sim))
        .name("triage")
        .system("You route customers and answer order questions.")
        .tool(Manual("orders"))
        .unwrap()
        .handoff(Handoff::to("billing").description("Refunds and invoices."))
        .unwrap()
        .build();
    let billing = HaloAgent::builder(model(&sim))
        .name("billing")
        .system("You handle refunds and invoices.")
        .tool(Manual("billing"))
        .unwrap()
        .handoff(Handoff::to("triage").description("Anything but billing."))
        .unwrap()
        .build();
    let mut agent = triage.with_peers([billing]).unwrap();
    let first = agent.generate_text("I was charged twice.").await.unwrap();
    assert_eq!(first.agent.as_deref(), Some("billing"));
    let second = agent.generate_text("And where is my order?").await.unwrap();
    assert_eq!(second.agent.as_deref(), Some("triage"));
    assert_eq!(sim.remaining_replies(), 0);

    let verdicts: Vec<CacheVerdict> = agent
        .cache_ledger()
        .checks()
        .map(|c| c.verdict.clone())
        .collect();
    assert_eq!(
        verdicts,
        [
            CacheVerdict::Cold,         // triage's first request
            CacheVerdict::ExpectedMiss, // billing's, after the first handoff
            CacheVerdict::Hit,          // billing again, the next turn
            CacheVerdict::ExpectedMiss, // triage's, after the second handoff
        ]
    );
    assert_eq!(agent.cache_ledger().expected_misses(), 2);
    assert_eq!(agent.cache_ledger().busts(), 0);
    let records = sim.records();
    // What the provider did: billing's first request read nothing of triage's; its second
    // read its own first; triage's return read its own first request's prefix again.
    assert_eq!(records[1].cached_tokens, 0);
    assert!(records[2].cached_tokens + 128 >= records[1].prompt_tokens);
    assert!(records[3].cached_tokens > 1_024);
    let stats = agent.stats();
    assert_eq!(
        (stats.prefix_fingerprint_changes, stats.cache_busts),
        (2, 0)
    );
}
