//! Compile-time checks: the object-safe traits stay object-safe, and the agent's futures
//! stay `Send` (so agents run on multi-threaded executors and inside `tokio::spawn`).

use halo_core::sandbox::{ExecRequest, SandboxPath};
use halo_core::{
    DynTool, HaloAgent, ModelAdapter, ModelRequest, Sandbox, SessionStore, SharedModel,
    SharedSandbox, ToolCall, ToolContext, ToolHook, ToolResult, ToolSource,
};

fn assert_send<T: Send>(_: &T) {}

#[allow(dead_code)]
fn dyn_traits_are_object_safe(
    model: SharedModel,
    sandbox: SharedSandbox,
    tool: std::sync::Arc<dyn DynTool>,
    hook: std::sync::Arc<dyn ToolHook>,
    source: std::sync::Arc<dyn ToolSource>,
    store: std::sync::Arc<dyn SessionStore>,
) {
    let _: &dyn SessionStore = &*store;
    let _: &dyn ModelAdapter = &*model;
    let _: &dyn Sandbox = &*sandbox;
    let _: &dyn DynTool = &*tool;
    let _: &dyn ToolHook = &*hook;
    let _: &dyn ToolSource = &*source;
}

#[allow(dead_code)]
fn model_futures_are_send(model: &dyn ModelAdapter, request: ModelRequest<'_>) {
    assert_send(&model.generate(request));
    assert_send(&model.stream(request));
}

#[allow(dead_code)]
fn sandbox_futures_are_send(sandbox: &dyn Sandbox, path: &SandboxPath, exec: ExecRequest) {
    assert_send(&sandbox.read(path));
    assert_send(&sandbox.exec(exec));
}

#[allow(dead_code)]
fn tool_future_is_send(tool: &dyn DynTool, cx: &ToolContext) {
    assert_send(&tool.call_json(serde_json::json!({}), cx));
}

#[allow(dead_code)]
fn hook_futures_are_send(hook: &dyn ToolHook, cx: &ToolContext, result: ToolResult) {
    assert_send(&hook.before_tool_call(cx, &serde_json::Value::Null));
    assert_send(&hook.after_tool_call(cx, result));
}

#[allow(dead_code)]
fn toolbox_is_shareable_and_its_run_future_is_send(tools: &halo_core::Toolbox, call: &ToolCall) {
    fn assert_sync<T: Send + Sync>(_: &T) {}
    assert_sync(tools);
    assert_send(&tools.run(call));
}

#[allow(dead_code)]
fn driver_futures_are_send(agent: &mut HaloAgent, call: &ToolCall) {
    let driver = agent.driver();
    assert_send(&driver.run_tool(call));
    assert_send(&driver.prepare_step(1));
}

#[allow(dead_code)]
fn approval_futures_are_send(agent: &mut HaloAgent) {
    assert_send(&agent.approve("c1"));
    assert_send(&agent.reject("c1", "no"));
    assert_send(&agent.submit_tool_result("c1", "ok"));
}

#[allow(dead_code)]
fn generate_text_future_is_send(agent: &mut HaloAgent) {
    let fut = agent.generate_text("hi");
    assert_send(&fut);
}

#[allow(dead_code)]
fn resume_futures_are_send(agent: &mut HaloAgent) {
    assert_send(&agent.resume());
}

#[allow(dead_code)]
fn resume_stream_is_send(agent: &mut HaloAgent) {
    assert_send(&agent.resume_stream());
}

#[allow(dead_code)]
fn stream_text_is_send(agent: &mut HaloAgent) {
    let stream = agent.stream_text("hi");
    assert_send(&stream);
}

#[test]
fn agent_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<HaloAgent>();
    check::<SharedModel>();
    check::<SharedSandbox>();
}
