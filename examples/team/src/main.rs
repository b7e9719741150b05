//! `team`: a team of named agents on a hosted model.
//!
//! ```text
//! cargo run -p team -- "TASK"
//! ```
//!
//! The model is picked from the environment as the coder picks it (`team::hosted`). The
//! lead proposes the members, then calls them as its tools in turn — their work streamed,
//! tagged with their names — the last reviews, and the lead gives the result
//! (`team::run_team`).

use anyhow::bail;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let task = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    if task.trim().is_empty() {
        bail!("usage: team \"TASK\"");
    }
    let model = team::hosted::pick_model()?;
    println!("model: {} ({})", model.model_name(), model.provider());
    team::run_team(model, Vec::new(), &task, |line| println!("{line}")).await?;
    Ok(())
}
