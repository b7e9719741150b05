//! GPT-5.6+ explicit prompt caching on chat completions: `prompt_cache_options`, the
//! planner's breakpoints in the body, and the simulator's breakpoint cache (reads exact,
//! writes reported and billed) seen through the agent's stats.

use halo_adapters::openai::{OpenAiCompatible, PromptCacheMode};
use halo_adapters::sim::SimReply;
use halo_adapters::sim::breakpoints::input_cost;
use halo_adapters::sim::openai::OpenAiSim;
use halo_core::tool::{Tool, ToolError, ToolOutput};
use halo_core::{GenerationOptions, HaloAgent};
use serde_json::{Value, json};

struct Cat;
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct CatArgs {
    /// The path.
    path: String,
}
impl Tool for Cat {
    type Args = CatArgs;
    fn name(&self) -> &str {
        "cat"
    }
    fn description(&self) -> &str {
        "Prints a file."
    }
    async fn call(&self, a: CatArgs) -> Result<ToolOutput, ToolError> {
        Ok(format!("{}\n{}", a.path, "let x = 1;\n".repeat(60)).into())
    }
}

fn system() -> String {
    (0..1500).map(|i| format!("rule{i} ")).collect()
}

async fn run(mode: PromptCacheMode) -> (OpenAiSim, halo_core::GenerateTextResult) {
    let sim = OpenAiSim::openai().await.unwrap();
    let mut script: Vec<SimReply> = (0..3)
        .map(|i| SimReply::tool_call("cat", json!({"path": format!("f{i}.rs")})))
        .collect();
    script.push(SimReply::text("done"));
    sim.set_reply_script(script);
    let model = OpenAiCompatible::openai("gpt-5.6")
        .api_key("sk-sim-prompt-cache")
        .base_url(sim.base_url())
        .prompt_cache(mode)
        .max_retries(0)
        .build()
        .unwrap();
    let mut agent = HaloAgent::builder(model)
        .system(system())
        .session_id("s")
        .tool(Cat)
        .unwrap()
        .build();
    let out = agent.generate_text("Print three files.").await.unwrap();
    (sim, out)
}

fn marked(message: &Value) -> bool {
    message.to_string().contains("prompt_cache_breakpoint")
}

#[tokio::test]
async fn explicit_mode_marks_the_prefix_and_the_newest_message_and_reads_each_request_back() {
    let (sim, out) = run(PromptCacheMode::Explicit).await;
    let records = sim.records();
    assert_eq!(records.len(), 4);
    for (n, r) in records.iter().enumerate() {
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            r.body["prompt_cache_options"],
            json!({"mode": "explicit", "ttl": "30m"})
        );
        let messages = r.body["messages"].as_array().unwrap();
        let marks: Vec<usize> = (0..messages.len())
            .filter(|&i| marked(&messages[i]))
            .collect();
        assert_eq!(marks, [0, messages.len() - 1], "request {n}");
        assert_eq!(
            messages[0]["content"][0]["prompt_cache_breakpoint"],
            json!({"mode": "explicit"})
        );
    }
    assert_eq!(records[0].cache_write_tokens, records[0].prompt_tokens);
    for r in &records[1..] {
        assert_eq!(
            r.cached_tokens, r.seen_prefix_tokens,
            "exact reads at the last breakpoint"
        );
        assert_eq!(r.cache_write_tokens, r.prompt_tokens - r.cached_tokens);
    }
    let written: u64 = records.iter().map(|r| r.cache_write_tokens).sum();
    assert_eq!(out.stats.cache_write_tokens, written);
    assert_eq!(out.stats.cache_busts, 0);
}

#[tokio::test]
async fn default_and_implicit_modes_cache_at_the_implicit_breakpoint_and_cost_the_same_writes() {
    let (default_sim, default_out) = run(PromptCacheMode::Default).await;
    let (implicit_sim, implicit_out) = run(PromptCacheMode::Implicit).await;
    for r in &default_sim.records() {
        assert!(r.body.get("prompt_cache_options").is_none());
        assert!(
            !marked(&r.body["messages"]),
            "no markers in the default mode"
        );
    }
    for r in &implicit_sim.records() {
        assert_eq!(r.body["prompt_cache_options"]["mode"], "implicit");
    }
    // Both read every earlier request back through the implicit breakpoint.
    for records in [default_sim.records(), implicit_sim.records()] {
        for r in &records[1..] {
            assert_eq!(r.cached_tokens, r.seen_prefix_tokens);
        }
    }
    assert_eq!(
        default_out.stats.cache_busts + implicit_out.stats.cache_busts,
        0
    );
    let cost = |records: &[halo_adapters::sim::openai::SimRecord]| -> f64 {
        records
            .iter()
            .map(|r| input_cost(r.prompt_tokens, r.cached_tokens, r.cache_write_tokens))
            .sum()
    };
    let (d, i) = (cost(&default_sim.records()), cost(&implicit_sim.records()));
    assert!((d - i).abs() < 1e-6, "{d} vs {i}");
    let _ = GenerationOptions::default();
}
