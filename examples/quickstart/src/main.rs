//! `quickstart`: the smallest Halo agent, offline. README.md ("Use Halo in your crate") shows
//! this file below these header lines, and `tests/readme.rs` checks the two are equal.

use std::io::Write as _;

use futures::StreamExt as _;
use halo_adapters::openai::OpenAiCompatible;
use halo_adapters::sim::{SimReply, openai::OpenAiSim};
use halo_core::{AgentEvent, HaloAgent, Tool, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::json;

/// A typed tool: the model's arguments are checked against the JSON Schema derived from
/// `WeatherArgs`, then deserialized into it.
struct Weather;

#[derive(Deserialize, schemars::JsonSchema)]
struct WeatherArgs {
    /// The city's name, such as "Oslo".
    city: String,
}

impl Tool for Weather {
    type Args = WeatherArgs;
    fn name(&self) -> &str {
        "weather"
    }
    fn description(&self) -> &str {
        "The current weather in a city."
    }
    async fn call(&self, args: WeatherArgs) -> Result<ToolOutput, ToolError> {
        Ok(format!("{}: snow, -3 °C", args.city).into())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A loopback fake of an OpenAI-compatible server (halo-adapters feature `sim`) that
    // answers from a script: a call of our tool, then the answer. It counts cached tokens by
    // DeepSeek's rule, which caches any repeated prefix (OpenAI's starts at 1,024 tokens).
    let sim = OpenAiSim::deepseek().await?;
    sim.set_reply_script([
        SimReply::tool_call("weather", json!({"city": "Oslo"})),
        SimReply::text("It is snowing in Oslo, at -3 °C."),
    ]);
    let model = OpenAiCompatible::custom(sim.base_url(), "sim-model").build()?;
    println!("model: {}", model.endpoint());

    let mut agent = HaloAgent::builder(model)
        .system("You answer questions about the weather. Use the weather tool.")
        .tool(Weather)?
        .build();

    let question = "What is the weather in Oslo?";
    println!("user: {question}");
    let mut events = std::pin::pin!(agent.stream_text(question));
    let mut in_text = false; // whether a line of answer text is open
    while let Some(event) = events.next().await {
        match event? {
            AgentEvent::TextDelta(delta) => {
                if !in_text {
                    print!("assistant: ");
                    in_text = true;
                }
                print!("{delta}");
                std::io::stdout().flush()?;
            }
            AgentEvent::ToolCall(call) => {
                println!("tool call: {} {}", call.name, call.replay_arguments());
            }
            AgentEvent::ToolResult(result) => {
                let error = if result.is_error { " (error)" } else { "" };
                println!("tool result{error}: {}", result.content);
            }
            AgentEvent::StepFinish(_) if in_text => {
                println!();
                in_text = false;
            }
            AgentEvent::Finish(out) => println!("stats: {}", out.stats),
            _ => {}
        }
    }
    Ok(())
}
