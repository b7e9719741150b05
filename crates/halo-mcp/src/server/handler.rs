//! The rmcp `ServerHandler` of [`McpServer`]: `initialize` / `server/discover` info,
//! `tools/list`, `tools/call` through the hook pipeline, and `tools/list_changed` for both
//! protocol eras (MCP 2025-11-25 `server/tools`; 2026-07-28 `basic/patterns/subscriptions`).

use halo_core::{HaloError, ToolCall};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use super::McpServer;
use super::convert::{call_result, error_result, mcp_tool};
use super::progress::Progress;

impl McpServer {
    /// Every served tool in MCP's shape, sorted by name.
    fn mcp_tools(&self) -> Vec<Tool> {
        let toolbox = self.toolbox();
        toolbox
            .specs()
            .map(|spec| mcp_tool(spec, toolbox.annotations(&spec.name).unwrap_or_default()))
            .collect()
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let info = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            self.shared.name.clone(),
            self.shared.version.clone(),
        ));
        match &self.shared.instructions {
            Some(text) => info.with_instructions(text.clone()),
            None => info,
        }
    }

    /// One page with every tool (a served set is small; `nextCursor` is never set).
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.mcp_tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let toolbox = self.toolbox();
        let spec = toolbox.specs().find(|s| s.name == name)?;
        Some(mcp_tool(
            spec,
            toolbox.annotations(name).unwrap_or_default(),
        ))
    }

    /// Runs the call through the toolbox (argument checks, hooks, tool). An unknown tool is
    /// a JSON-RPC invalid-params error (the spec's protocol error); everything else is a
    /// result, `isError: true` for argument errors, denials, a tool's failure, a hook's
    /// abort, a fatal tool error, a timeout or a cancellation.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let toolbox = self.toolbox();
        if !toolbox.contains(&request.name) {
            let names: Vec<&str> = toolbox.specs().map(|s| s.name.as_str()).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`; the available tools are: {}",
                    request.name,
                    if names.is_empty() {
                        "(none)".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
                None,
            ));
        }
        let raw = request
            .arguments
            .map(|args| Value::Object(args).to_string())
            .unwrap_or_default();
        let call = ToolCall::new(context.id.to_string(), request.name.to_string(), raw);
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| Progress::new(context.peer.clone(), token));
        let timeout = self.shared.call_timeout;
        let run = tokio::time::timeout(timeout, Progress::scope(progress, toolbox.run(&call)));
        let result = tokio::select! {
            outcome = run => match outcome {
                Ok(Ok(result)) => call_result(result),
                Ok(Err(HaloError::Aborted { tool, reason })) => error_result(format!(
                    "`{tool}` was not run: a hook of this server stopped it ({reason})"
                )),
                Ok(Err(HaloError::ToolFatal { tool, message })) => error_result(format!(
                    "`{tool}` failed and cannot run in this server now: {message}"
                )),
                Ok(Err(other)) => error_result(format!("`{}` failed: {other}", call.name)),
                Err(_) => error_result(format!(
                    "`{}` did not finish within {timeout:?} and was stopped; what it did until then is not undone",
                    call.name
                )),
            },
            () = context.ct.cancelled() => error_result(format!(
                "`{}` was cancelled by the client", call.name
            )),
        };
        Ok(result.into())
    }

    /// A legacy session is ready: remember its peer, to tell it when the tools change.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.register_peer(context.peer);
    }

    /// 2026-07-28 sessions may listen for `tools/list_changed`, nothing else.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// One `subscriptions/listen` stream: a `tools/list_changed` per change of the tool
    /// set, until the client cancels or the server stops.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.shared.changes.subscribe();
        changes.mark_unchanged();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    if context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}
