//! The coding agent's set-up, shared by the `coder` binary and the `model_tasks` example
//! (`cargo xtask bench models`), so the benchmark measures exactly what the demo runs.
//!
//! Every model gets [`SYSTEM`]. The small embedded model also gets only the read-only tools
//! ([`EMBEDDED_TOOLS`]), two worked examples as few-shot turns ([`embedded_examples`]), short
//! answers ([`embedded_options`]) and, in its adapter, `Auto` resolved by the conversation's
//! shape ([`embedded_config`]): [`embedded_agent`] applies all of it. Every model the coder
//! runs gets the [`strategies`]: `TieredStrategy` over the context window
//! ([`window_source`] says where the window came from), `BasicRepair` and `LoopSuppression`
//! (the `model_tasks` benchmark does not apply them yet; its tasks take two steps, where
//! they change nothing). [`approval`] holds the
//! session's safety hooks and the terminal approval prompt; [`agents`] the `plan` and
//! `subagent` tools a hosted model gets.

pub mod agents;
pub mod approval;
pub mod approvals;
pub mod terminal;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use halo_sandbox::ContainerSandbox;

use halo_adapters::tokens::O200kEstimator;
use halo_core::{
    AssistantMessage, ContextConfig, DynTool, GenerationOptions, HaloAgentBuilder, HaloError,
    Message, ModelAdapter, ToolCall, ToolResult,
};
use halo_strategies::{BasicRepair, LoopSuppression, TieredStrategy};

/// The system prompt.
pub const SYSTEM: &str = "You are a coding agent working in a project folder. \
Use the tools to look at files before you answer; paths are relative to the project folder. \
When you know the answer, reply briefly in plain text.";

/// The sandbox on `dir`: the default protection (`.git` at any depth, `.mcp.json`,
/// `.agent/mcp.json`: `halo_sandbox::PROTECTED_NAMES` and `PROTECTED_PATHS`) and every one of
/// `files` that lies inside `dir` (the session journal, `--mcp-config` files, the MCP
/// approvals folder), which a later run reads: a command must not write them.
///
/// # Errors
/// `dir` is no folder that can be opened.
pub fn sandbox(dir: &Path, files: &[&Path]) -> anyhow::Result<ContainerSandbox> {
    let sandbox = ContainerSandbox::new(dir)
        .with_context(|| format!("cannot use {} as the sandbox root", dir.display()))?
        .with_default_protection();
    let root = sandbox.root().to_path_buf();
    let inside: Vec<String> = files.iter().flat_map(|f| inside(&root, f)).collect();
    Ok(sandbox.with_protected_paths(inside)?)
}

/// Where `file` (which may not exist yet) lies in `root` (canonical), relative to it: as
/// its folder resolves and, for a link, as the link resolves. Empty when it lies outside.
pub fn inside(root: &Path, file: &Path) -> Vec<String> {
    let Ok(abs) = std::path::absolute(file) else {
        return Vec::new();
    };
    let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
        return Vec::new();
    };
    // The deepest folder above the file that exists, resolved, then the rest as given.
    let mut base = parent.to_path_buf();
    let mut rest = vec![name.to_owned()];
    let resolved = loop {
        if let Ok(real) = base.canonicalize() {
            break real;
        }
        match (base.file_name(), base.parent()) {
            (Some(n), Some(p)) => {
                rest.push(n.to_owned());
                base = p.to_path_buf();
            }
            _ => return Vec::new(),
        }
    };
    let mut forms = vec![rest.iter().rev().fold(resolved, |p, n| p.join(n))];
    if let Ok(real) = abs.canonicalize() {
        forms.push(real);
    }
    let mut out: Vec<String> = forms
        .iter()
        .filter_map(|p| p.strip_prefix(root).ok())
        .filter(|rel| !rel.as_os_str().is_empty())
        .filter_map(|rel| rel.to_str().map(str::to_string))
        .collect();
    out.dedup();
    out
}

/// The tools the small embedded model gets: it must not overwrite files it misreads.
pub const EMBEDDED_TOOLS: &[&str] = &["glob", "grep", "ls", "read"];

/// Few-shot turns for the small embedded model: a call, its result and an answer, twice
/// (with one example it copies the example's path).
pub fn embedded_examples() -> Vec<Message> {
    let c1 = ToolCall::new("example_1", "read", r#"{"path":"todo.md"}"#);
    let c2 = ToolCall::new("example_2", "read", r#"{"path":"docs/setup.txt"}"#);
    let calls = |c: &ToolCall| {
        Message::Assistant(AssistantMessage {
            tool_calls: vec![c.clone()],
            ..Default::default()
        })
    };
    vec![
        Message::user("What is in todo.md?"),
        calls(&c1),
        Message::Tool(ToolResult::ok(&c1, "     1\t- fix the login bug")),
        Message::assistant("todo.md says: fix the login bug."),
        Message::user("Read docs/setup.txt and tell me how to install."),
        calls(&c2),
        Message::Tool(ToolResult::ok(&c2, "     1\tRun `make install`.")),
        Message::assistant("To install, run `make install`."),
    ]
}

/// The generation options of the small embedded model: answers of at most 96 tokens.
pub fn embedded_options() -> GenerationOptions {
    GenerationOptions::default().with_max_tokens(96)
}

/// The adapter settings of the small embedded model: it does not decide well by itself when
/// to call a tool, so `Auto` is resolved by the conversation's shape (call a tool right
/// after the user's message, answer after one round of results). Greedy decoding (the
/// default temperature 0), so a task gets the same answer every time.
#[cfg(feature = "local")]
pub fn embedded_config() -> halo_adapters::local::LocalConfig {
    use halo_adapters::local::{AutoToolChoice, LocalConfig};
    LocalConfig::default().with_auto_tool_choice(AutoToolChoice::CallThenAnswer { rounds: 1 })
}

/// Gives `builder` the small embedded model's set-up: [`SYSTEM`], the [`EMBEDDED_TOOLS`] out
/// of `tools`, the few-shot turns and the options.
///
/// # Errors
/// As [`HaloAgentBuilder::tools`].
pub fn embedded_agent(
    builder: HaloAgentBuilder,
    mut tools: Vec<Arc<dyn DynTool>>,
) -> Result<HaloAgentBuilder, HaloError> {
    tools.retain(|t| EMBEDDED_TOOLS.contains(&t.spec().name.as_str()));
    builder
        .system(SYSTEM)
        .few_shot(embedded_examples())
        .options(embedded_options())
        .tools(tools)
}

/// Where the coder's [`TieredStrategy`] starts evicting old tool output in place, as a
/// share of the context window.
pub const EVICT_AT: f64 = 0.85;

/// Where it drops whole tool rounds from the front, when eviction was not enough.
pub const TRUNCATE_AT: f64 = 0.95;

/// Where each of its layers stops.
pub const LOW_WATER: f64 = 0.55;

/// The share of the window a compaction keeps as it was (the newest rounds); the rest is
/// summarized by the model.
pub const KEEP_RECENT: f64 = 0.25;

/// Gives `builder` the coder's strategies, for every model:
/// - context: [`TieredStrategy`]: from [`EVICT_AT`] old tool results and long arguments are
///   replaced in place by `{"$evicted": N}`; from [`TRUNCATE_AT`], or when that is not enough,
///   the model summarizes all but the newest [`KEEP_RECENT`] of the window into one turn after
///   the task (dropped instead if the summary request fails), each in one chunk down to
///   [`LOW_WATER`]; over
///   `context_window` tokens, or,
///   when that is `None`, the model's own window (its adapter's per-model table, read at
///   build time), else [`halo_core::DEFAULT_CONTEXT_WINDOW`];
/// - [`BasicRepair`]: tool names and argument strings repaired before a turn is logged;
/// - [`LoopSuppression`] with its defaults: a repeated call, an alternation, a repeated
///   error or a monologue is nudged once, then ends the run.
///
/// With the small embedded model they change nothing in a normal task (one round of calls,
/// then the answer): no rewrite far below its window, nothing to repair in a well-formed call,
/// no loop in two steps (`tests::the_embedded_set_up_answers_with_the_strategies_on`).
pub fn strategies(builder: HaloAgentBuilder, context_window: Option<u64>) -> HaloAgentBuilder {
    let tiered = TieredStrategy::new()
        .with_marks(EVICT_AT, TRUNCATE_AT, LOW_WATER)
        .with_compaction(KEEP_RECENT);
    // Counted with o200k_base (calibrated against the provider's counts), not bytes / 4.
    let mut context =
        ContextConfig::for_model(Arc::new(tiered)).with_estimator(Arc::new(O200kEstimator));
    if let Some(tokens) = context_window {
        context = context.with_context_window(tokens);
    }
    builder
        .context(context)
        .repair(BasicRepair::new())
        .loop_guard(LoopSuppression::default())
}

/// Where the context window [`strategies`] gives the agent comes from, for the startup line:
/// `--context-window` when the flag set it, else the model's table, else the default.
pub fn window_source(flag: Option<u64>, model: &dyn ModelAdapter) -> &'static str {
    match (flag, model.context_window()) {
        (Some(_), _) => "--context-window",
        (None, Some(_)) => "the model's documented window",
        (None, None) => "default: the model's window is unknown; set --context-window",
    }
}

#[cfg(test)]
mod tests {
    use halo_core::testing::ScriptedModel;
    use halo_core::{DEFAULT_CONTEXT_WINDOW, HaloAgent, ToolSpec, async_trait};
    use halo_core::{ToolContext, ToolError, ToolOutput};
    use serde_json::{Value, json};

    use super::*;

    // A later run's file inside DIR is protected however it is named: missing folders, a
    // link into DIR, `..`; one outside DIR is not.
    #[test]
    fn files_inside_the_folder_are_found_however_they_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = base.join("project");
        std::fs::create_dir_all(root.join("sessions")).unwrap();
        std::fs::create_dir_all(base.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink("sessions/real.jsonl", root.join("link.jsonl")).unwrap();
        std::fs::write(root.join("sessions/real.jsonl"), "").unwrap();
        assert_eq!(
            inside(&root, &root.join("sessions/s.jsonl")),
            ["sessions/s.jsonl"]
        );
        assert_eq!(
            inside(&root, &root.join("new/deep/s.jsonl")),
            ["new/deep/s.jsonl"]
        );
        assert_eq!(
            inside(&root, &root.join("link.jsonl")),
            ["link.jsonl", "sessions/real.jsonl"]
        );
        assert_eq!(
            inside(&root, &base.join("elsewhere/../project/s.jsonl")),
            ["s.jsonl"]
        );
        assert!(inside(&root, &base.join("elsewhere/s.jsonl")).is_empty());
        assert!(inside(&root, &root).is_empty());
        let sandbox = sandbox(&root, &[&root.join("sessions/s.jsonl")]).unwrap();
        assert_eq!(sandbox.protected_names(), [".git"]);
        let paths: Vec<&str> = sandbox
            .protected_paths()
            .iter()
            .map(|p| p.as_str())
            .collect();
        assert_eq!(paths, [".mcp.json", ".agent/mcp.json", "sessions/s.jsonl"]);
    }

    /// `read`, as the embedded model sees it.
    struct Read;

    #[async_trait]
    impl DynTool for Read {
        fn spec(&self) -> ToolSpec {
            ToolSpec::new(
                "read",
                "Reads a file.",
                json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                }),
            )
        }
        async fn call_json(&self, args: Value, _cx: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(format!(
                "     1\tcontents of {}",
                args["path"].as_str().unwrap_or("?")
            )
            .into())
        }
    }

    #[test]
    fn the_window_is_the_flags_else_the_models_else_the_default() {
        let agent =
            |model: ScriptedModel, flag| strategies(HaloAgent::builder(model), flag).build();
        let known = || ScriptedModel::new().with_context_window(128_000);
        assert_eq!(agent(known(), Some(16_000)).context_window(), Some(16_000));
        assert_eq!(agent(known(), None).context_window(), Some(128_000));
        assert_eq!(
            agent(ScriptedModel::new(), None).context_window(),
            Some(DEFAULT_CONTEXT_WINDOW)
        );
        assert_eq!(window_source(Some(16_000), &known()), "--context-window");
        assert_eq!(
            window_source(None, &known()),
            "the model's documented window"
        );
        assert!(window_source(None, &ScriptedModel::new()).starts_with("default"));
    }

    // The embedded path (few-shot turns in the prefix, one round of calls, then the answer)
    // with the strategies on, on a window as small as the embedded model's n_ctx (4096): the
    // run ends with the answer, nothing is rewritten, repaired or nudged.
    #[test]
    fn the_embedded_set_up_answers_with_the_strategies_on() {
        let model = ScriptedModel::new()
            .with_context_window(4096)
            .tool_call("read", json!({"path": "README.md"}))
            .text("A tiny project.");
        let builder =
            embedded_agent(HaloAgent::builder(model.clone()), vec![Arc::new(Read)]).unwrap();
        let mut agent = strategies(builder, None).build();
        assert_eq!(agent.context_window(), Some(4096));
        let out =
            futures::executor::block_on(agent.generate_text("What is README.md about?")).unwrap();
        assert_eq!(out.text, "A tiny project.");
        assert_eq!(out.steps.len(), 2);
        assert_eq!(
            out.steps[0].tool_results[0].content,
            "     1\tcontents of README.md"
        );
        assert_eq!(
            (
                out.stats.history_rewrites,
                out.stats.tool_call_repairs,
                agent.log().len()
            ),
            (0, 0, 4),
            "no rewrite, no repair, no nudge in the log"
        );
        model.assert_consumed();
    }
}
