//! The `mcpServers` configuration of Claude Desktop and Claude Code, which an MCP client reads
//! from `.mcp.json` / `.agent/mcp.json` and the library takes as [`McpConfig`].
//!
//! ```json
//! {"mcpServers": {
//!   "fs":   {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
//!            "env": {"DEBUG": "1"}, "cwd": "/tmp"},
//!   "docs": {"type": "http", "url": "http://127.0.0.1:3001/mcp",
//!            "headers": {"Authorization": "Bearer x"}},
//!   "old":  {"command": "old-server", "disabled": true, "timeout": 30000}
//! }}
//! ```
//!
//! An entry has either `command` (stdio) or `url` (streamable HTTP), never both; `type` is
//! optional and, when given, must agree (`stdio`, `http` or `streamable-http`). `timeout` is a
//! per-call timeout in milliseconds (a Halo extension). Keys this module does not know are
//! ignored, as other clients add their own. Errors name the file, the field and the server:
//! `mcpServers.fs.args: expected an array of strings`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

/// Every configured MCP server by name, in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfig {
    /// The servers, by the name the tools are prefixed with (`mcp__<name>__<tool>`).
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One `mcpServers` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// How to reach the server.
    pub transport: ServerTransport,
    /// `"disabled": true`: configured but not started.
    pub disabled: bool,
    /// The per-call timeout in milliseconds (`"timeout"`); `None`: the client's default.
    pub timeout_ms: Option<u64>,
}

impl ServerConfig {
    /// A stdio server: `command` with `args`, no extra environment, the current directory.
    pub fn stdio(
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        ServerConfig {
            transport: ServerTransport::Stdio(StdioConfig {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: BTreeMap::new(),
                cwd: None,
            }),
            disabled: false,
            timeout_ms: None,
        }
    }

    /// A streamable HTTP server at `url`, no extra headers.
    pub fn http(url: impl Into<String>) -> Self {
        ServerConfig {
            transport: ServerTransport::Http(HttpConfig {
                url: url.into(),
                headers: BTreeMap::new(),
            }),
            disabled: false,
            timeout_ms: None,
        }
    }
}

/// The transport of a server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerTransport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout (MCP
    /// basic/transports, stdio).
    Stdio(StdioConfig),
    /// Streamable HTTP (MCP basic/transports, Streamable HTTP).
    Http(HttpConfig),
}

/// `command`, `args`, `env`, `cwd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioConfig {
    /// The program, looked up on `PATH` when it has no slash.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The server's whole environment besides `PATH` (nothing else is inherited).
    pub env: BTreeMap<String, String>,
    /// The working directory (`None`: the client's).
    pub cwd: Option<PathBuf>,
}

/// `url`, `headers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// The MCP endpoint, e.g. `http://127.0.0.1:3001/mcp`.
    pub url: String,
    /// Headers sent with every request (e.g. `Authorization`).
    pub headers: BTreeMap<String, String>,
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    // The cause is in the message, so it is no `#[source]` too: an error chain (anyhow's
    // `{:#}`) would print it twice.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The IO error.
        error: std::io::Error,
    },
    /// The text is not JSON.
    #[error("{}: not valid JSON: {error}", file.display())]
    Json {
        /// The file (`<inline>` for a string).
        file: PathBuf,
        /// The parser's error, with line and column.
        error: serde_json::Error,
    },
    /// A field has the wrong shape.
    #[error("{}: {field}: {message}", file.display())]
    Invalid {
        /// The file (`<inline>` for a string).
        file: PathBuf,
        /// The field's path, e.g. `mcpServers.fs.args`.
        field: String,
        /// What is wrong, e.g. `expected an array of strings`.
        message: String,
    },
}

impl McpConfig {
    /// Parses the `mcpServers` JSON. A document without `mcpServers` has no servers.
    ///
    /// # Errors
    /// [`ConfigError::Json`] for text that is not JSON, [`ConfigError::Invalid`] naming the
    /// field for a wrong shape; `file` is only used in the messages.
    pub fn parse(text: &str, file: impl Into<PathBuf>) -> Result<Self, ConfigError> {
        let file = file.into();
        let value: Value = serde_json::from_str(text).map_err(|error| ConfigError::Json {
            file: file.clone(),
            error,
        })?;
        Self::from_value(&value).map_err(|(field, message)| ConfigError::Invalid {
            file,
            field,
            message,
        })
    }

    /// Reads and parses one file.
    ///
    /// # Errors
    /// [`ConfigError::Io`] when it cannot be read, else as [`parse`](Self::parse).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Self::parse(&text, path)
    }

    /// Loads every file in order and merges them: a later file's entry replaces an earlier
    /// one of the same name.
    ///
    /// # Errors
    /// The first file's error, as [`load`](Self::load).
    pub fn load_all<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
    ) -> Result<Self, ConfigError> {
        let mut config = McpConfig::default();
        for path in paths {
            config.merge(Self::load(path.as_ref())?);
        }
        Ok(config)
    }

    /// Adds `other`'s servers; on a name both have, `other`'s entry wins.
    pub fn merge(&mut self, other: McpConfig) {
        self.servers.extend(other.servers);
    }

    /// The servers that are not `disabled`.
    pub fn enabled(&self) -> impl Iterator<Item = (&str, &ServerConfig)> {
        self.servers
            .iter()
            .filter(|(_, s)| !s.disabled)
            .map(|(n, s)| (n.as_str(), s))
    }

    /// Validates a parsed JSON document; errors are (field path, message).
    fn from_value(value: &Value) -> Result<Self, (String, String)> {
        let root = value
            .as_object()
            .ok_or_else(|| ("(root)".to_string(), "expected a JSON object".to_string()))?;
        let mut servers = BTreeMap::new();
        let Some(entries) = root.get("mcpServers") else {
            // VS Code's `.vscode/mcp.json` keeps its servers under `servers`: say so rather
            // than read no server at all.
            if root.contains_key("servers") {
                return Err((
                    "servers".to_string(),
                    "this is VS Code's layout; Halo reads the `mcpServers` object of Claude Desktop and Claude Code: rename `servers` to `mcpServers`".to_string(),
                ));
            }
            return Ok(McpConfig { servers });
        };
        let entries = entries.as_object().ok_or_else(|| {
            (
                "mcpServers".to_string(),
                "expected an object of servers by name".to_string(),
            )
        })?;
        for (name, entry) in entries {
            let at = format!("mcpServers.{name}");
            if name.is_empty() {
                return Err((at, "a server name must not be empty".into()));
            }
            let entry = entry
                .as_object()
                .ok_or_else(|| (at.clone(), "expected an object".to_string()))?;
            servers.insert(name.clone(), server(&at, entry)?);
        }
        Ok(McpConfig { servers })
    }
}

impl<'de> Deserialize<'de> for McpConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        McpConfig::from_value(&value)
            .map_err(|(field, message)| serde::de::Error::custom(format!("{field}: {message}")))
    }
}

fn server(at: &str, entry: &Map<String, Value>) -> Result<ServerConfig, (String, String)> {
    let field = |key: &str| format!("{at}.{key}");
    let string = |key: &str| -> Result<Option<String>, (String, String)> {
        match entry.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err((field(key), "expected a string".into())),
        }
    };
    let map = |key: &str| -> Result<BTreeMap<String, String>, (String, String)> {
        match entry.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err((format!("{at}.{key}.{k}"), "expected a string".into())),
                })
                .collect(),
            Some(_) => Err((field(key), "expected an object of strings".into())),
        }
    };
    let kind = string("type")?;
    let command = string("command")?;
    let url = string("url")?;
    let disabled = match entry.get("disabled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err((field("disabled"), "expected true or false".into())),
    };
    let timeout_ms = match entry.get("timeout") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(ms) if ms > 0 => Some(ms),
            _ => {
                return Err((
                    field("timeout"),
                    "expected a positive number of milliseconds".into(),
                ));
            }
        },
    };
    let transport = match (command, url) {
        (Some(_), Some(_)) => {
            return Err((
                at.to_string(),
                "has both `command` (stdio) and `url` (http); keep one".into(),
            ));
        }
        (None, None) => {
            return Err((
                at.to_string(),
                "needs `command` (a stdio server) or `url` (a streamable HTTP server)".into(),
            ));
        }
        (Some(command), None) => {
            if let Some(kind) = kind.as_deref().filter(|k| *k != "stdio") {
                return Err((
                    field("type"),
                    format!("`{kind}` does not fit `command`; use \"stdio\" or drop `type`"),
                ));
            }
            if command.is_empty() {
                return Err((field("command"), "must not be empty".into()));
            }
            let args = match entry.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| a.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| (field("args"), "expected an array of strings".to_string()))?,
                Some(_) => return Err((field("args"), "expected an array of strings".into())),
            };
            ServerTransport::Stdio(StdioConfig {
                command,
                args,
                env: map("env")?,
                cwd: string("cwd")?.map(PathBuf::from),
            })
        }
        (None, Some(url)) => {
            match kind.as_deref() {
                None | Some("http" | "streamable-http" | "streamableHttp") => {}
                Some("sse") => {
                    return Err((
                        field("type"),
                        "the legacy HTTP+SSE transport is not supported; use a streamable HTTP endpoint (\"type\": \"http\")".into(),
                    ));
                }
                Some(kind) => {
                    return Err((
                        field("type"),
                        format!("`{kind}` does not fit `url`; use \"http\" or drop `type`"),
                    ));
                }
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err((field("url"), "expected an http:// or https:// URL".into()));
            }
            let headers = map("headers")?;
            for (name, value) in &headers {
                if http::HeaderName::try_from(name.as_str()).is_err()
                    || http::HeaderValue::try_from(value.as_str()).is_err()
                {
                    return Err((
                        format!("{at}.headers.{name}"),
                        "not a valid HTTP header".into(),
                    ));
                }
            }
            ServerTransport::Http(HttpConfig { url, headers })
        }
    };
    Ok(ServerConfig {
        transport,
        disabled,
        timeout_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        McpConfig::parse(text, "x.json").unwrap_err().to_string()
    }

    #[test]
    fn vs_codes_servers_key_is_an_error_that_says_what_to_rename() {
        let e =
            McpConfig::parse(r#"{"servers": {"x": {"command": "y"}}}"#, "mcp.json").unwrap_err();
        assert_eq!(
            e.to_string(),
            "mcp.json: servers: this is VS Code's layout; Halo reads the `mcpServers` object of Claude Desktop and Claude Code: rename `servers` to `mcpServers`"
        );
        assert!(
            McpConfig::parse("{}", "mcp.json")
                .unwrap()
                .servers
                .is_empty()
        );
    }

    #[test]
    fn an_io_or_json_error_prints_its_cause_once() {
        let e = McpConfig::parse("{,}", "bad.json").unwrap_err();
        assert!(std::error::Error::source(&e).is_none(), "{e}");
        assert!(
            e.to_string().starts_with("bad.json: not valid JSON: "),
            "{e}"
        );
    }

    #[test]
    fn parses_stdio_and_http_entries_as_claude_writes_them() {
        let config = McpConfig::parse(
            r#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "pkg"], "env": {"A": "1"}, "cwd": "/tmp"},
                "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-Key": "k"}},
                "web2": {"type": "streamable-http", "url": "https://example.com/mcp"},
                "off": {"type": "stdio", "command": "srv", "disabled": true, "timeout": 1500}
            }, "otherKey": 1}"#,
            "x.json",
        )
        .unwrap();
        assert_eq!(config.servers.len(), 4);
        let ServerTransport::Stdio(fs) = &config.servers["fs"].transport else {
            panic!()
        };
        assert_eq!(fs.command, "npx");
        assert_eq!(fs.args, ["-y", "pkg"]);
        assert_eq!(fs.env["A"], "1");
        assert_eq!(fs.cwd.as_deref(), Some(Path::new("/tmp")));
        let ServerTransport::Http(web) = &config.servers["web"].transport else {
            panic!()
        };
        assert_eq!(web.headers["X-Key"], "k");
        assert!(config.servers["off"].disabled);
        assert_eq!(config.servers["off"].timeout_ms, Some(1500));
        let enabled: Vec<&str> = config.enabled().map(|(n, _)| n).collect();
        assert_eq!(enabled, ["fs", "web", "web2"]);
    }

    #[test]
    fn a_document_without_servers_is_empty() {
        assert!(McpConfig::parse("{}", "x").unwrap().servers.is_empty());
    }

    #[test]
    fn bad_fields_are_named_with_their_server() {
        assert_eq!(
            err(r#"{"mcpServers": {"fs": {"command": "x", "args": "-y"}}}"#),
            "x.json: mcpServers.fs.args: expected an array of strings"
        );
        assert_eq!(
            err(r#"{"mcpServers": {"fs": {"command": "x", "args": ["a", 1]}}}"#),
            "x.json: mcpServers.fs.args: expected an array of strings"
        );
        assert_eq!(
            err(r#"{"mcpServers": {"fs": {"command": 3}}}"#),
            "x.json: mcpServers.fs.command: expected a string"
        );
        assert_eq!(
            err(r#"{"mcpServers": {"fs": {"command": "x", "env": {"A": 1}}}}"#),
            "x.json: mcpServers.fs.env.A: expected a string"
        );
        assert_eq!(
            err(r#"{"mcpServers": {"w": {"url": "http://h/mcp", "headers": ["a"]}}}"#),
            "x.json: mcpServers.w.headers: expected an object of strings"
        );
        assert_eq!(
            err(r#"{"mcpServers": {"w": {"url": "ftp://h"}}}"#),
            "x.json: mcpServers.w.url: expected an http:// or https:// URL"
        );
        assert_eq!(
            err(r#"{"mcpServers": {"w": {"command": "x", "disabled": "yes"}}}"#),
            "x.json: mcpServers.w.disabled: expected true or false"
        );
        assert_eq!(
            err(r#"{"mcpServers": {"w": {"command": "x", "timeout": -1}}}"#),
            "x.json: mcpServers.w.timeout: expected a positive number of milliseconds"
        );
        assert!(
            err(r#"{"mcpServers": {"w": {"type": "sse", "url": "http://h"}}}"#)
                .starts_with("x.json: mcpServers.w.type: the legacy HTTP+SSE transport")
        );
        assert!(
            err(r#"{"mcpServers": {"w": {"type": "http", "command": "x"}}}"#)
                .starts_with("x.json: mcpServers.w.type: `http` does not fit `command`")
        );
        assert_eq!(
            err(r#"{"mcpServers": []}"#),
            "x.json: mcpServers: expected an object of servers by name"
        );
        assert!(err("{not json").starts_with("x.json: not valid JSON: "));
    }

    #[test]
    fn both_or_neither_of_command_and_url_is_an_error_naming_the_server() {
        assert_eq!(
            err(r#"{"mcpServers": {"both": {"command": "x", "url": "http://h"}}}"#),
            "x.json: mcpServers.both: has both `command` (stdio) and `url` (http); keep one"
        );
        assert_eq!(
            err(r#"{"mcpServers": {"none": {"args": []}}}"#),
            "x.json: mcpServers.none: needs `command` (a stdio server) or `url` (a streamable HTTP server)"
        );
    }

    #[test]
    fn later_files_win_per_server_name() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.json");
        std::fs::write(
            &a,
            r#"{"mcpServers": {"x": {"command": "one"}, "y": {"command": "y"}}}"#,
        )
        .unwrap();
        std::fs::write(&b, r#"{"mcpServers": {"x": {"url": "http://h/mcp"}}}"#).unwrap();
        let config = McpConfig::load_all([&a, &b]).unwrap();
        assert!(matches!(
            config.servers["x"].transport,
            ServerTransport::Http(_)
        ));
        assert!(matches!(
            config.servers["y"].transport,
            ServerTransport::Stdio(_)
        ));
        let missing = McpConfig::load(&dir.path().join("nope.json")).unwrap_err();
        assert!(matches!(missing, ConfigError::Io { .. }), "{missing}");
    }

    #[test]
    fn the_config_deserializes_through_serde() {
        let config: McpConfig =
            serde_json::from_str(r#"{"mcpServers": {"e": {"command": "srv"}}}"#).unwrap();
        assert_eq!(
            config.servers["e"],
            ServerConfig::stdio("srv", Vec::<String>::new())
        );
        let bad = serde_json::from_str::<McpConfig>(r#"{"mcpServers": {"e": {}}}"#).unwrap_err();
        assert!(bad.to_string().starts_with("mcpServers.e: needs"), "{bad}");
    }
}
