//! A standalone `Toolbox` (what an MCP server runs calls through): the same checks and hook
//! pipeline as inside an agent, specs sorted, tools added and removed at runtime.

use std::sync::{Arc, Mutex};

use halo_core::testing::ScriptedModel;
use halo_core::{
    HaloAgent, HaloError, PrefixError, Tool, ToolAnnotations, ToolCall, ToolCallDecision,
    ToolContext, ToolError, ToolHook, ToolOutput, ToolResult, Toolbox, async_trait,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct TextArgs {
    /// Some text.
    text: String,
}

/// `say`: returns the text; `fatal` makes it fail fatally.
struct Say(&'static str);

impl Tool for Say {
    type Args = TextArgs;
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "Says the text."
    }
    fn annotations(&self) -> ToolAnnotations {
        ToolAnnotations::READ_ONLY
    }
    async fn call(&self, a: TextArgs) -> Result<ToolOutput, ToolError> {
        match a.text.as_str() {
            "fatal" => Err(ToolError::Fatal("the disk is gone".into())),
            "fail" => Err(ToolError::Failed("it did not work".into())),
            _ => Ok(ToolOutput::text(format!("said {}", a.text))),
        }
    }
}

/// Denies `deny`, aborts on `abort`, rewrites `rewrite` to `rewritten`, and tags every
/// result with ` [seen]`; records what it saw.
#[derive(Default)]
struct Policy(Mutex<Vec<String>>);

#[async_trait]
impl ToolHook for Policy {
    async fn before_tool_call(&self, cx: &ToolContext, args: &Value) -> ToolCallDecision {
        let call = cx.call();
        self.0
            .lock()
            .unwrap()
            .push(format!("before {} {args}", call.name));
        match args["text"].as_str() {
            Some("deny") => ToolCallDecision::Deny("no one can approve this".into()),
            Some("abort") => ToolCallDecision::Abort("stop everything".into()),
            Some("rewrite") => ToolCallDecision::Rewrite(json!({"text": "rewritten"})),
            _ => ToolCallDecision::Allow,
        }
    }
    async fn after_tool_call(&self, cx: &ToolContext, mut result: ToolResult) -> ToolResult {
        let call = cx.call();
        self.0.lock().unwrap().push(format!("after {}", call.name));
        result.content = format!("{} [seen]", result.content).into();
        result
    }
}

fn call(name: &str, args: &str) -> ToolCall {
    ToolCall::new("c", name, args)
}

fn toolbox(policy: &Arc<Policy>) -> Toolbox {
    let mut tools = Toolbox::new();
    tools.add_tool(Arc::new(Say("say"))).unwrap();
    tools.add_tool(Arc::new(Say("echo"))).unwrap();
    tools.push_hook(policy.clone());
    tools
}

#[tokio::test]
async fn a_standalone_toolbox_runs_calls_through_the_hooks_like_an_agent() {
    let policy = Arc::new(Policy::default());
    let tools = toolbox(&policy);

    let ok = tools.run(&call("say", r#"{"text":"hi"}"#)).await.unwrap();
    assert_eq!(
        (ok.content.as_str(), ok.is_error),
        ("said hi [seen]", false)
    );
    let rewritten = tools
        .run(&call("say", r#"{"text":"rewrite"}"#))
        .await
        .unwrap();
    assert_eq!(rewritten.content, "said rewritten [seen]");
    let denied = tools.run(&call("say", r#"{"text":"deny"}"#)).await.unwrap();
    assert_eq!(
        (denied.content.as_str(), denied.is_error),
        ("no one can approve this [seen]", true)
    );
    let failed = tools.run(&call("say", r#"{"text":"fail"}"#)).await.unwrap();
    assert_eq!(
        (failed.content.as_str(), failed.is_error),
        ("error: it did not work [seen]", true)
    );
    // Bad arguments never reach the before-hooks; the after-hooks still see the error.
    let bad = tools.run(&call("say", r#"{"text":3}"#)).await.unwrap();
    assert!(bad.is_error);
    assert!(
        bad.content
            .starts_with("the arguments of `say` do not match its schema: at /text:"),
        "{}",
        bad.content
    );
    let unknown = tools.run(&call("nope", "{}")).await.unwrap();
    assert_eq!(
        unknown.content,
        "unknown tool `nope`; the available tools are: echo, say [seen]"
    );

    match tools.run(&call("say", r#"{"text":"abort"}"#)).await {
        Err(HaloError::Aborted { tool, reason }) => {
            assert_eq!((tool.as_str(), reason.as_str()), ("say", "stop everything"))
        }
        other => panic!("expected an abort, got {other:?}"),
    }
    match tools.run(&call("say", r#"{"text":"fatal"}"#)).await {
        Err(HaloError::ToolFatal { tool, message }) => {
            assert_eq!(
                (tool.as_str(), message.as_str()),
                ("say", "the disk is gone")
            )
        }
        other => panic!("expected a fatal error, got {other:?}"),
    }
    assert_eq!(
        policy.0.lock().unwrap()[..4],
        [
            r#"before say {"text":"hi"}"#,
            "after say",
            r#"before say {"text":"rewrite"}"#,
            "after say",
        ]
    );

    // The same call through an agent with the same tool and hook reads the same.
    let model = ScriptedModel::new()
        .tool_call("say", json!({"text": "deny"}))
        .text("done");
    let mut agent = HaloAgent::builder(model.clone())
        .tool(Say("say"))
        .unwrap()
        .hook_shared(Arc::new(Policy::default()))
        .build();
    let out = agent.generate_text("go").await.unwrap();
    assert_eq!(
        out.steps[0].tool_results[0].content,
        "no one can approve this [seen]"
    );
}

#[test]
fn specs_are_sorted_and_tools_come_and_go() {
    let policy = Arc::new(Policy::default());
    let mut tools = toolbox(&policy);
    let names = |t: &Toolbox| t.specs().map(|s| s.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&tools), ["echo", "say"]);
    assert_eq!(tools.annotations("say"), Some(ToolAnnotations::READ_ONLY));
    assert_eq!(tools.annotations("nope"), None);
    assert_eq!(tools.hook_count(), 1);
    assert!(tools.contains("echo"));
    let schema = &tools.specs().next().unwrap().parameters;
    assert_eq!(schema["required"], json!(["text"]));

    assert!(matches!(
        tools.add_tool(Arc::new(Say("say"))),
        Err(HaloError::Prefix(PrefixError::DuplicateTool(n))) if n == "say"
    ));
    assert!(matches!(
        tools.add_tool(Arc::new(Say("has space"))),
        Err(HaloError::Prefix(PrefixError::InvalidToolName(n))) if n == "has space"
    ));
    assert_eq!(names(&tools), ["echo", "say"]);

    assert!(tools.remove_tool("echo"));
    assert!(!tools.remove_tool("echo"));
    assert_eq!(names(&tools), ["say"]);
    tools.add_tool(Arc::new(Say("alpha"))).unwrap();
    assert_eq!(names(&tools), ["alpha", "say"]);
}
