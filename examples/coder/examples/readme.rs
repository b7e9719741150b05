//! The library example of README.md, compiled here so it cannot rot (`cargo xtask ci --tidy`
//! checks that README.md shows exactly this code, minus these header lines).

use halo_adapters::openai::OpenAiCompatible;
use halo_core::HaloAgent;
use halo_sandbox::ContainerSandbox;
use halo_sandbox::policy::CommandDenylist;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let model = OpenAiCompatible::deepseek_from_env()?; // DEEPSEEK_API_KEY
    let sandbox = ContainerSandbox::new("./my-project")?; // read, write, edit, ls, glob, grep, bash
    let mut agent = HaloAgent::builder(model)
        .system("You are a careful coding agent. Use the tools; answer briefly.")
        .tools(sandbox.tools())?
        .hook(CommandDenylist::new()) // refuses `rm -rf /`, `mkfs`, `curl … | sh`, …
        .max_steps(30)
        .build();

    let out = agent
        .generate_text("Which function in src/ parses input? Fix its bug.")
        .await?;
    println!("{}", out.text);
    let s = out.stats;
    println!(
        "{} steps, {} input tokens, {} cached ({:.0} % hit)",
        s.steps,
        s.input_tokens,
        s.cache_read_tokens,
        100.0 * s.cache_hit_ratio()
    );
    Ok(())
}
