//! A tool result marked discardable (a loaded skill body) is the first thing
//! `TieredStrategy` evicts, ahead of older plain results.

use std::sync::Arc;

use halo_core::testing::ScriptedModel;
use halo_core::{ContextConfig, HaloAgent, Message, NoArgs, Tool, ToolError, ToolOutput};
use halo_strategies::{TieredStrategy, is_evicted};
use serde_json::json;

struct Big {
    name: &'static str,
    discardable: bool,
}

impl Tool for Big {
    type Args = NoArgs;
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Returns 4,000 bytes."
    }
    async fn call(&self, _: NoArgs) -> Result<ToolOutput, ToolError> {
        let out = ToolOutput::text(self.name.repeat(4000 / self.name.len()));
        Ok(if self.discardable {
            out.discardable()
        } else {
            out
        })
    }
}

#[test]
fn a_loaded_skill_is_evicted_before_older_tool_results() {
    let model = ScriptedModel::new()
        .tool_call("read", json!({}))
        .tool_call("read", json!({}))
        .tool_call("read", json!({}))
        .tool_call("load_skill", json!({}))
        .tool_call("read", json!({}))
        .text("done");
    let mut agent = HaloAgent::builder(model)
        .tool(Big {
            name: "read",
            discardable: false,
        })
        .unwrap()
        .tool(Big {
            name: "load_skill",
            discardable: true,
        })
        .unwrap()
        // The order of eviction at a fixed low-water mark (each step here adds a fifth of the
        // window, so a mark that follows the growth would evict every older result at once).
        .context(ContextConfig::new(
            Arc::new(TieredStrategy::new().room_for_steps(0)),
            5_600,
        ))
        .build();
    futures::executor::block_on(agent.generate_text("task")).unwrap();
    assert!(agent.stats().history_rewrites >= 1);
    let log = agent.log().to_vec();
    let results: Vec<(usize, &str, bool)> = log
        .iter()
        .enumerate()
        .filter_map(|(i, m)| match m {
            Message::Tool(r) => Some((i, r.tool_name.as_str(), is_evicted(&r.content))),
            _ => None,
        })
        .collect();
    let names: Vec<&str> = results.iter().map(|r| r.1).collect();
    assert_eq!(names, ["read", "read", "read", "load_skill", "read"]);
    let (skill_at, _, skill_evicted) = results[3];
    assert!(
        agent.log().is_discardable(skill_at),
        "the mark survives the rewrite"
    );
    assert!(skill_evicted, "{results:?}");
    assert!(
        !results[2].2,
        "a newer plain result is kept while the skill goes: {results:?}"
    );
    assert!(!results[4].2, "the live round is kept");
}
