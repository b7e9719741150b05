//! halo-strategies' integration tests.
//!
//! Context strategies in a running agent, against a model that reports what a provider's
//! prompt cache would read (the leading bytes a request shares with the previous one): a
//! 200-step session keeps its requests inside the window with few rewrites and a high cached
//! share, and over random sessions the invariants of the seam hold (`session`, `truncate`,
//! `context_props`). Repair: the repair tables, loop detection, the strategies inside a
//! `HaloAgent` on the scripted model, and property tests (`agent`, `arguments`, `loops`,
//! `names`, `props`). Agents: the plan tool and plan-then-execute, sub-agents, teams (`plan`,
//! `subagent`, `team`; shared pieces in `agent_tools`); handoff loops and events from inside
//! (`swarm`).

mod agent;
mod agent_tools;
mod arguments;
mod context_props;
mod discardable;
mod loops;
mod names;
mod plan;
mod pressure;
mod props;
mod session;
mod subagent;
mod swarm;
mod team;
mod truncate;

/// A file of `tests/data`, parsed.
fn data(name: &str) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}
