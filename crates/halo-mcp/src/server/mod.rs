//! Halo as an MCP server (the design's `createMCPServer`): a set of [`DynTool`]s, and the
//! same [`ToolHook`]s an agent runs (denylist, permission policy, truncation), served over
//! stdio or streamable HTTP with rmcp.
//!
//! - [`McpServer`] is the rmcp `ServerHandler`, written by hand because the tools are only
//!   known at runtime: `tools/list` lists them sorted by name, `tools/call` runs each call
//!   through a [`halo_core::Toolbox`], so a served call gets exactly the argument checks and
//!   hooks it gets inside an agent. The tool set can change while sessions are open
//!   ([`McpServer::add_tool`], [`McpServer::remove_tool`], [`McpServer::set_tools`]); each
//!   change sends `notifications/tools/list_changed`.
//! - Transports: [`McpServer::serve_stdio`] (bad lines answered with JSON-RPC errors), and
//!   [`McpServer::http_router`] / [`McpServer::serve_http`] (streamable HTTP at `/mcp` in
//!   axum, guarded by [`HttpOptions`]: a [`BearerToken`], a cap on sessions, idle expiry,
//!   calls cancelled with their session). Any other rmcp transport works too:
//!   `rmcp::ServiceExt::serve(server, transport)`.
//! - Bridge mode: the tools of external MCP servers, as `DynTool`s, are served next to the
//!   local ones ([`McpServerBuilder::bridge`]).
//! - The agent as a tool: [`ServedAgent`], a prompt in, the final text out, a progress
//!   notification per step ([`Progress`]).
//!
//! Protocol details and what is and is not supported: `docs/mcp.md`, section "Server".
//!
//! A server and rmcp's own client in one process, over an in-memory pipe:
//!
//! ```
//! use std::sync::Arc;
//! use halo_core::{Tool, ToolError, ToolOutput};
//! use halo_mcp::server::McpServer;
//! use rmcp::ServiceExt as _;
//! use rmcp::model::CallToolRequestParams;
//!
//! struct Add;
//! #[derive(serde::Deserialize, halo_core::JsonSchema)]
//! #[schemars(crate = "halo_core::schemars")]
//! struct Args { a: i64, b: i64 }
//! impl Tool for Add {
//!     type Args = Args;
//!     fn name(&self) -> &str { "add" }
//!     fn description(&self) -> &str { "Adds two integers." }
//!     async fn call(&self, x: Args) -> Result<ToolOutput, ToolError> {
//!         Ok((x.a + x.b).to_string().into())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let server = McpServer::builder().tool(Arc::new(Add)).build().unwrap();
//! let (client_io, server_io) = tokio::io::duplex(1 << 16);
//! tokio::spawn(async move { server.serve(server_io).await.unwrap().waiting().await });
//! let client = ().serve(client_io).await.unwrap();
//!
//! let tools = client.list_all_tools().await.unwrap();
//! assert_eq!(tools[0].name, "add");
//! let args = serde_json::json!({"a": 2, "b": 3}).as_object().unwrap().clone();
//! let result = client
//!     .call_tool(CallToolRequestParams::new("add").with_arguments(args))
//!     .await
//!     .unwrap();
//! assert_eq!(result.content[0].as_text().unwrap().text, "5");
//! assert_eq!(result.is_error, Some(false));
//! # }
//! ```

mod agent;
mod auth;
mod convert;
mod handler;
mod progress;
mod sessions;
mod stdio;
mod transport;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use halo_core::{DynTool, HaloError, PrefixError, ToolHook, Toolbox};
use rmcp::RoleServer;
use rmcp::service::Peer;
use tokio::sync::watch;

#[allow(deprecated)]
pub use agent::AgentAsTool;
pub use agent::ServedAgent;
pub use auth::{BearerToken, MIN_TOKEN_LEN, TokenError};
pub use progress::Progress;
pub use stdio::MAX_LINE;
pub use transport::{DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, HttpOptions, MCP_PATH};

/// How long one `tools/call` may take by default before it is answered with an error
/// result: 300 s.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// Why a server could not be set up or stopped serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A tool was refused: a duplicate name, a name outside `[a-zA-Z0-9_-]{1,64}`, or a
    /// parameter schema that is not an object schema.
    #[error("cannot serve the tool: {0}")]
    InvalidTool(#[from] PrefixError),
    /// The client's handshake failed (stdio closed before it, a malformed first message).
    #[error("the MCP session did not start: {0}")]
    Initialize(String),
    /// Binding, accepting or reading failed.
    #[error("the MCP server's IO failed: {0}")]
    Io(#[from] std::io::Error),
    /// The session's task ended abnormally.
    #[error("the MCP session ended abnormally: {0}")]
    Session(String),
}

impl From<HaloError> for ServeError {
    fn from(e: HaloError) -> Self {
        match e {
            HaloError::Prefix(p) => ServeError::InvalidTool(p),
            other => ServeError::Session(other.to_string()),
        }
    }
}

/// Builds an [`McpServer`].
pub struct McpServerBuilder {
    name: String,
    version: String,
    instructions: Option<String>,
    tools: Vec<Arc<dyn DynTool>>,
    hooks: Vec<Arc<dyn ToolHook>>,
    call_timeout: Duration,
}

impl McpServerBuilder {
    /// The `serverInfo` clients see (default: `halo` and this crate's version).
    pub fn name(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// The `instructions` of the `initialize` / `server/discover` result.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Serves one more tool.
    pub fn tool(mut self, tool: Arc<dyn DynTool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Serves these tools too.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Arc<dyn DynTool>>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Bridge mode: serves external MCP servers' tools next to the local ones. The MCP
    /// client (`halo_mcp::client`) gives each external tool as a `DynTool` named
    /// `mcp__<server>__<tool>`, so this is [`tools`](Self::tools) by another name: the
    /// bridged calls go through this server's hooks too, then to their own server.
    pub fn bridge(self, external: impl IntoIterator<Item = Arc<dyn DynTool>>) -> Self {
        self.tools(external)
    }

    /// Adds a tool hook after the existing ones; every call runs through the hooks in this
    /// order, as in an agent ([`halo_core::hook`]).
    ///
    /// **Approval hooks must answer *deny* when no one can be asked.** An MCP server has no
    /// terminal of its own: a hook that waits for a person who is not there would hold the
    /// client's call until [`call_timeout`](Self::call_timeout). Give the server an approval
    /// policy without an approver (`halo_sandbox::policy::PermissionPolicy` then denies what
    /// it would ask about, and the client reads why), or one that answers at once.
    pub fn hook(mut self, hook: Arc<dyn ToolHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Adds these hooks, in order (see [`hook`](Self::hook)).
    pub fn hooks(mut self, hooks: impl IntoIterator<Item = Arc<dyn ToolHook>>) -> Self {
        self.hooks.extend(hooks);
        self
    }

    /// How long one `tools/call` may run (hooks included) before the client gets an error
    /// result saying it timed out; the call's future is dropped. Default
    /// [`DEFAULT_CALL_TIMEOUT`]. The guarantee that a call never hangs, whatever a tool or
    /// hook does.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The server.
    ///
    /// # Errors
    /// [`ServeError::InvalidTool`] for a duplicate or invalid tool.
    pub fn build(self) -> Result<McpServer, ServeError> {
        let mut tools = BTreeMap::new();
        for tool in self.tools {
            let name = tool.spec().name;
            if tools.contains_key(&name) {
                return Err(PrefixError::DuplicateTool(name).into());
            }
            tools.insert(name, tool);
        }
        let toolbox = toolbox(&tools, &self.hooks)?;
        let (changes, _) = watch::channel(0);
        Ok(McpServer {
            shared: Arc::new(Shared {
                name: self.name,
                version: self.version,
                instructions: self.instructions,
                hooks: self.hooks,
                call_timeout: self.call_timeout,
                state: Mutex::new(State {
                    tools,
                    toolbox: Arc::new(toolbox),
                }),
                changes,
                peers: Mutex::new(Vec::new()),
            }),
        })
    }
}

/// A Halo tool set served as an MCP server: the rmcp `ServerHandler`.
///
/// Cheap to clone; clones share the tools, hooks and sessions (streamable HTTP makes one
/// handler per session from a clone). Change the tools at any time; open sessions are told.
///
/// ```
/// use std::sync::Arc;
/// use halo_core::{Tool, ToolError, ToolOutput};
/// use halo_mcp::server::McpServer;
///
/// struct Hello;
/// #[derive(serde::Deserialize, halo_core::JsonSchema)]
/// #[schemars(crate = "halo_core::schemars")]
/// struct Args { name: String }
/// impl Tool for Hello {
///     type Args = Args;
///     fn name(&self) -> &str { "hello" }
///     fn description(&self) -> &str { "Greets someone." }
///     async fn call(&self, a: Args) -> Result<ToolOutput, ToolError> {
///         Ok(format!("hello, {}", a.name).into())
///     }
/// }
///
/// let server = McpServer::builder().tool(Arc::new(Hello)).build().unwrap();
/// assert_eq!(server.tool_names(), ["hello"]);
/// // server.serve_stdio().await?  — or server.serve_http(listener, options, shutdown).await?
/// ```
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    version: String,
    instructions: Option<String>,
    hooks: Vec<Arc<dyn ToolHook>>,
    call_timeout: Duration,
    state: Mutex<State>,
    /// Bumped on every tool-set change; each `subscriptions/listen` stream (2026-07-28
    /// sessions) watches it.
    changes: watch::Sender<u64>,
    /// The peers of legacy (2025-11-25 and older) sessions, told of changes directly.
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

struct State {
    tools: BTreeMap<String, Arc<dyn DynTool>>,
    /// Built from `tools` and the hooks at each change; a call holds the one it started with.
    toolbox: Arc<Toolbox>,
}

fn toolbox(
    tools: &BTreeMap<String, Arc<dyn DynTool>>,
    hooks: &[Arc<dyn ToolHook>],
) -> Result<Toolbox, ServeError> {
    let mut toolbox = Toolbox::new();
    for tool in tools.values() {
        toolbox.add_tool(tool.clone())?;
    }
    for hook in hooks {
        toolbox.push_hook(hook.clone());
    }
    Ok(toolbox)
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.shared.name)
            .field("tools", &self.tool_names())
            .field("hooks", &self.shared.hooks.len())
            .finish()
    }
}

impl McpServer {
    /// A builder with no tools and no hooks.
    pub fn builder() -> McpServerBuilder {
        McpServerBuilder {
            name: "halo".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            instructions: None,
            tools: Vec::new(),
            hooks: Vec::new(),
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }

    /// The served tools' names, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        self.lock().tools.keys().cloned().collect()
    }

    /// The tool set calls start with now.
    pub(crate) fn toolbox(&self) -> Arc<Toolbox> {
        self.lock().toolbox.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves a consistent state (it is replaced whole).
        self.shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a tool while serving; open sessions get `notifications/tools/list_changed`.
    /// Calls already running keep the tool set they started with.
    ///
    /// # Errors
    /// [`ServeError::InvalidTool`]; nothing changes.
    pub async fn add_tool(&self, tool: Arc<dyn DynTool>) -> Result<(), ServeError> {
        self.change(|tools| {
            let name = tool.spec().name;
            if tools.contains_key(&name) {
                return Err(PrefixError::DuplicateTool(name).into());
            }
            tools.insert(name, tool);
            Ok(true)
        })
        .await
        .map(drop)
    }

    /// Removes a tool while serving; returns whether it was there. Open sessions are told
    /// when it was.
    pub async fn remove_tool(&self, name: &str) -> bool {
        self.change(|tools| Ok(tools.remove(name).is_some()))
            .await
            .unwrap_or(false)
    }

    /// Replaces every tool at once (one `list_changed`): what a bridge does when an external
    /// server's tool list changed.
    ///
    /// # Errors
    /// [`ServeError::InvalidTool`]; nothing changes.
    pub async fn set_tools(
        &self,
        tools: impl IntoIterator<Item = Arc<dyn DynTool>>,
    ) -> Result<(), ServeError> {
        let mut new = BTreeMap::new();
        for tool in tools {
            let name = tool.spec().name;
            if new.contains_key(&name) {
                return Err(PrefixError::DuplicateTool(name).into());
            }
            new.insert(name, tool);
        }
        self.change(move |tools| {
            *tools = new;
            Ok(true)
        })
        .await
        .map(drop)
    }

    /// Bridge mode that follows the external servers: keeps the served tools equal to
    /// `local` plus `source`'s current tools (an [`McpToolSet`](crate::McpToolSet), whose
    /// version changes when an external server's tool list does), checking the version
    /// every `every` and replacing the set when it changed ([`set_tools`](Self::set_tools):
    /// one `list_changed` to the clients). Runs until dropped: spawn it beside the server.
    /// A set the server refuses (two tools of one name) is logged and left as it was.
    ///
    /// The source's version is read when this is called, not when the future first runs,
    /// so a change made right after the call is not missed.
    pub fn follow_source(
        self,
        local: Vec<Arc<dyn DynTool>>,
        source: Arc<dyn halo_core::ToolSource>,
        every: Duration,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut seen = source.version();
        async move {
            loop {
                tokio::time::sleep(every).await;
                let version = source.version();
                if version == seen {
                    continue;
                }
                seen = version;
                let tools = local.iter().cloned().chain(source.tools());
                if let Err(e) = self.set_tools(tools).await {
                    tracing::warn!(error = %e, "the bridged tools changed into a set this server refuses");
                }
            }
        }
    }

    /// Applies `edit` to the tool map; when it reports a change, rebuilds the toolbox and
    /// tells every session. Returns whether it changed.
    async fn change(
        &self,
        edit: impl FnOnce(&mut BTreeMap<String, Arc<dyn DynTool>>) -> Result<bool, ServeError>,
    ) -> Result<bool, ServeError> {
        {
            let mut state = self.lock();
            let mut tools = state.tools.clone();
            if !edit(&mut tools)? {
                return Ok(false);
            }
            let toolbox = toolbox(&tools, &self.shared.hooks)?;
            *state = State {
                tools,
                toolbox: Arc::new(toolbox),
            };
        }
        self.notify_changed().await;
        Ok(true)
    }

    /// Sends `notifications/tools/list_changed` to every open session: directly on legacy
    /// sessions, on their `subscriptions/listen` streams for 2026-07-28 ones.
    async fn notify_changed(&self) {
        self.shared.changes.send_modify(|n| *n += 1);
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self
                .shared
                .peers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!(error = %e, "a session closed before list_changed reached it");
            }
        }
    }

    /// Remembers a legacy session's peer for change notifications.
    pub(crate) fn register_peer(&self, peer: Peer<RoleServer>) {
        let mut peers = self
            .shared
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        peers.retain(|p| !p.is_transport_closed());
        peers.push(peer);
    }
}
