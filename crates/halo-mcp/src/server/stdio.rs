//! The server's stdio transport (MCP `basic/transports`, stdio: one JSON-RPC message per
//! line), which answers what it cannot serve instead of dropping it, as JSON-RPC 2.0 §5
//! asks: a line that is not JSON gets `-32700` (parse error); a batch (MCP removed JSON-RPC
//! batching in 2025-06-18), a JSON value that is not a message, or a line longer than
//! [`MAX_LINE`] gets `-32600` (invalid request); a request whose `params` do not fit its
//! method (a `tools/call` without a string `name`, `arguments` that are not an object) gets
//! `-32602` (invalid params) with its own id. A notification with bad params gets nothing
//! (JSON-RPC never answers a notification). rmcp's own stdio transport drops unparsable lines
//! silently and answers every other bad message with an id-less `-32600`.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Buf as _, BytesMut};
use futures::{SinkExt as _, StreamExt as _};
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, NumberOrString, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::JsonRpcMessageCodec;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Mutex;
use tokio_util::codec::{Decoder, FramedRead, FramedWrite};

/// The longest line read, in bytes (16 MiB, rmcp's stdio limit too); longer ones are
/// answered with `-32600` and skipped.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

type Writer<W> = Arc<Mutex<Option<FramedWrite<W, JsonRpcMessageCodec<ServerJsonRpcMessage>>>>>;

/// A server transport over a byte stream pair (stdin and stdout for stdio).
pub(crate) struct CheckedLines<R, W> {
    lines: FramedRead<R, Lines>,
    write: Writer<W>,
    /// Errors to send before the next message is read (kept here, so that a `receive`
    /// cancelled while writing loses none).
    replies: VecDeque<ServerJsonRpcMessage>,
    /// A reply was fed to the writer and is not flushed yet.
    unflushed: bool,
}

impl<R: AsyncRead, W: AsyncWrite> CheckedLines<R, W> {
    pub(crate) fn new(read: R, write: W) -> Self {
        CheckedLines {
            lines: FramedRead::new(read, Lines::default()),
            write: Arc::new(Mutex::new(Some(FramedWrite::new(
                write,
                JsonRpcMessageCodec::default(),
            )))),
            replies: VecDeque::new(),
            unflushed: false,
        }
    }
}

impl<R, W> CheckedLines<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// Writes the queued replies. `false` when the writer is gone.
    async fn send_replies(&mut self) -> bool {
        if self.replies.is_empty() && !self.unflushed {
            return true;
        }
        let mut write = self.write.lock().await;
        let Some(framed) = write.as_mut() else {
            return false;
        };
        while let Some(reply) = self.replies.front() {
            if framed.feed(reply.clone()).await.is_err() {
                return false;
            }
            self.replies.pop_front();
            self.unflushed = true;
        }
        if framed.flush().await.is_err() {
            return false;
        }
        self.unflushed = false;
        true
    }
}

impl<R, W> Transport<RoleServer> for CheckedLines<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        async move {
            match write.lock().await.as_mut() {
                Some(framed) => framed.send(item).await.map_err(Into::into),
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the transport is closed",
                )),
            }
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if !self.send_replies().await {
                return None;
            }
            let line = match self.lines.next().await? {
                Ok(line) => line,
                Err(e) => {
                    tracing::error!(error = %e, "reading the MCP client's messages failed");
                    return None;
                }
            };
            match line {
                Line::TooLong => self.replies.push_back(error(
                    None,
                    ErrorData::invalid_request(
                        format!(
                            "invalid request: the message is longer than {MAX_LINE} bytes and was skipped"
                        ),
                        None,
                    ),
                )),
                Line::Text(bytes) => match classify(&bytes) {
                    Verdict::Message(message) => return Some(message),
                    Verdict::Reply(reply) => self.replies.push_back(reply),
                    Verdict::Skip => {}
                },
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let framed = self.write.lock().await.take();
        if let Some(mut framed) = framed {
            futures::SinkExt::<ServerJsonRpcMessage>::close(&mut framed).await?;
        }
        Ok(())
    }
}

/// What to do with one line.
#[derive(Debug)]
enum Verdict {
    Message(ClientJsonRpcMessage),
    Reply(ServerJsonRpcMessage),
    Skip,
}

fn error(id: Option<RequestId>, data: ErrorData) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(data, id)
}

/// A JSON-RPC id: a number or a string (JSON-RPC 2.0 §4; `null` is no id).
fn request_id(value: Option<&Value>) -> Option<RequestId> {
    match value? {
        Value::Number(n) => n.as_i64().map(NumberOrString::Number),
        Value::String(s) => Some(NumberOrString::String(s.as_str().into())),
        _ => None,
    }
}

fn classify(line: &[u8]) -> Verdict {
    let line = line
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(line)
        .trim_ascii();
    if line.is_empty() {
        return Verdict::Skip;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            return Verdict::Reply(error(
                None,
                ErrorData::parse_error(
                    format!(
                        "parse error: the line is not JSON ({e}); send one JSON-RPC message per line"
                    ),
                    None,
                ),
            ));
        }
    };
    let Value::Object(object) = value else {
        let message = if value.is_array() {
            "invalid request: batches are not supported (MCP removed JSON-RPC batching in 2025-06-18); send each message on its own line"
        } else {
            "invalid request: expected a JSON-RPC message object"
        };
        return Verdict::Reply(error(None, ErrorData::invalid_request(message, None)));
    };
    let id = request_id(object.get("id"));
    let method = object
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_string);
    let versioned = object.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
    let is_notification = !object.contains_key("id");
    match serde_json::from_value::<ClientJsonRpcMessage>(Value::Object(object)) {
        // rmcp reads a request of a known method whose params do not fit it as a custom
        // request (which the handler would answer "method not found").
        Ok(ClientJsonRpcMessage::Request(request)) if matches!(&request.request, ClientRequest::CustomRequest(custom) if is_typed_method(&custom.method)) =>
        {
            let method = request.request.method().to_string();
            let why = typed_params_error(&method, request.request);
            Verdict::Reply(error(
                Some(request.id),
                ErrorData::invalid_params(format!("invalid params for `{method}`: {why}"), None),
            ))
        }
        Ok(message) => Verdict::Message(message),
        Err(e) => match (versioned, id, method) {
            (true, Some(id), Some(method)) => Verdict::Reply(error(
                Some(id),
                ErrorData::invalid_params(format!("invalid params for `{method}`: {e}"), None),
            )),
            (true, None, Some(method)) if is_notification => {
                tracing::debug!(%method, error = %e, "ignoring a notification with bad params");
                Verdict::Skip
            }
            (versioned, id, _) => {
                let why = if versioned {
                    format!("{e}")
                } else {
                    "`jsonrpc` must be \"2.0\"".to_string()
                };
                Verdict::Reply(error(
                    id,
                    ErrorData::invalid_request(format!("invalid request: {why}"), None),
                ))
            }
        },
    }
}

/// The request methods rmcp reads into a typed `ClientRequest` when their params fit.
fn is_typed_method(method: &str) -> bool {
    use rmcp::model::ConstString as _;
    use rmcp::model::{
        CallToolRequestMethod, CompleteRequestMethod, DiscoverRequestMethod,
        GetPromptRequestMethod, InitializeResultMethod, ListPromptsRequestMethod,
        ListResourceTemplatesRequestMethod, ListResourcesRequestMethod, ListToolsRequestMethod,
        PingRequestMethod, ReadResourceRequestMethod, SetLevelRequestMethod,
        SubscribeRequestMethod, SubscriptionsListenRequestMethod, UnsubscribeRequestMethod,
    };
    [
        CallToolRequestMethod::VALUE,
        CompleteRequestMethod::VALUE,
        DiscoverRequestMethod::VALUE,
        GetPromptRequestMethod::VALUE,
        InitializeResultMethod::VALUE,
        ListPromptsRequestMethod::VALUE,
        ListResourceTemplatesRequestMethod::VALUE,
        ListResourcesRequestMethod::VALUE,
        ListToolsRequestMethod::VALUE,
        PingRequestMethod::VALUE,
        ReadResourceRequestMethod::VALUE,
        SetLevelRequestMethod::VALUE,
        SubscribeRequestMethod::VALUE,
        SubscriptionsListenRequestMethod::VALUE,
        UnsubscribeRequestMethod::VALUE,
    ]
    .contains(&method)
}

/// Why `request`'s params do not fit its method: serde's words for `tools/call`.
fn typed_params_error(method: &str, request: ClientRequest) -> String {
    use rmcp::model::ConstString as _;
    if let ClientRequest::CustomRequest(custom) = request
        && method == rmcp::model::CallToolRequestMethod::VALUE
        && let Err(e) = serde_json::from_value::<rmcp::model::CallToolRequestParams>(
            custom.params.unwrap_or(Value::Null),
        )
    {
        return e.to_string();
    }
    format!("they do not fit `{method}`")
}

/// One line of input.
#[derive(Debug)]
enum Line {
    /// A whole line, without its newline.
    Text(BytesMut),
    /// A line over [`MAX_LINE`] bytes; reported once, its bytes dropped.
    TooLong,
}

/// Splits bytes into lines of at most [`MAX_LINE`] bytes; never fails, so the stream of
/// lines never ends early (tokio-util's `FramedRead` stops after a decoder error).
#[derive(Debug, Default)]
struct Lines {
    /// Skipping the rest of a line already reported as too long.
    discarding: bool,
    /// How far `buf` was searched for a newline.
    searched: usize,
}

impl Decoder for Lines {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        loop {
            let newline = buf[self.searched..]
                .iter()
                .position(|b| *b == b'\n')
                .map(|i| i + self.searched);
            match newline {
                Some(end) => {
                    let mut line = buf.split_to(end + 1);
                    line.truncate(end);
                    self.searched = 0;
                    if std::mem::take(&mut self.discarding) {
                        continue;
                    }
                    if line.len() > MAX_LINE {
                        return Ok(Some(Line::TooLong));
                    }
                    return Ok(Some(Line::Text(line)));
                }
                None if self.discarding => {
                    buf.clear();
                    self.searched = 0;
                    return Ok(None);
                }
                None if buf.len() > MAX_LINE => {
                    buf.advance(buf.len());
                    self.searched = 0;
                    self.discarding = true;
                    return Ok(Some(Line::TooLong));
                }
                None => {
                    self.searched = buf.len();
                    return Ok(None);
                }
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        self.searched = 0;
        if buf.is_empty() || std::mem::take(&mut self.discarding) {
            buf.clear();
            return Ok(None);
        }
        // The last line may lack its newline.
        Ok(Some(Line::Text(buf.split_to(buf.len()))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reply(line: &str) -> Value {
        match classify(line.as_bytes()) {
            Verdict::Reply(reply) => serde_json::to_value(reply).unwrap(),
            other => panic!("expected a reply to {line:?}, got {other:?}"),
        }
    }

    fn code_and_id(line: &str) -> (i64, Value) {
        let r = reply(line);
        (r["error"]["code"].as_i64().unwrap(), r["id"].clone())
    }

    #[test]
    fn garbage_gets_the_json_rpc_error_it_deserves() {
        assert_eq!(code_and_id("not json"), (-32700, Value::Null));
        assert_eq!(
            code_and_id("{\"jsonrpc\": \"2.0\", "),
            (-32700, Value::Null)
        );
        assert_eq!(
            code_and_id(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            (-32600, Value::Null)
        );
        assert_eq!(code_and_id("[]"), (-32600, Value::Null));
        assert_eq!(code_and_id("42"), (-32600, Value::Null));
        assert_eq!(code_and_id(r#"{"foo": 1}"#), (-32600, Value::Null));
        assert_eq!(
            code_and_id(r#"{"id": 7, "method": "ping"}"#),
            (-32600, json!(7)),
            "no jsonrpc member"
        );
        assert!(
            reply("[1]")["error"]["message"]
                .as_str()
                .unwrap()
                .contains("batches are not supported")
        );
    }

    #[test]
    fn bad_tools_call_params_are_invalid_params_with_the_request_id() {
        for params in [
            json!({"name": 5}),
            json!({}),
            json!({"name": "x", "arguments": [1]}),
        ] {
            let line =
                json!({"jsonrpc": "2.0", "id": "c1", "method": "tools/call", "params": params});
            let r = reply(&line.to_string());
            assert_eq!(r["error"]["code"], -32602, "{params}");
            assert_eq!(r["id"], "c1");
            assert!(
                r["error"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("invalid params for `tools/call`"),
                "{r}"
            );
        }
    }

    #[test]
    fn valid_messages_pass_and_bad_notifications_are_not_answered() {
        let ok = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ls","arguments":{}}}"#;
        assert!(matches!(classify(ok.as_bytes()), Verdict::Message(_)));
        assert!(matches!(
            classify(
                b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\r"
            ),
            Verdict::Message(_)
        ));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}"#),
            Verdict::Skip
        ));
        assert!(matches!(classify(b"   "), Verdict::Skip));
    }

    #[test]
    fn lines_split_at_newlines_and_an_overlong_line_is_reported_once() {
        let mut lines = Lines::default();
        let mut buf = BytesMut::from(&b"a\nbc"[..]);
        assert!(matches!(lines.decode(&mut buf).unwrap(), Some(Line::Text(l)) if &l[..] == b"a"));
        assert!(lines.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"d\n");
        assert!(matches!(lines.decode(&mut buf).unwrap(), Some(Line::Text(l)) if &l[..] == b"bcd"));

        let mut buf = BytesMut::from(&vec![b'x'; MAX_LINE + 1][..]);
        assert!(matches!(
            lines.decode(&mut buf).unwrap(),
            Some(Line::TooLong)
        ));
        buf.extend_from_slice(b"more of it");
        assert!(lines.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"xx\n{}\n");
        assert!(matches!(lines.decode(&mut buf).unwrap(), Some(Line::Text(l)) if &l[..] == b"{}"));
        let mut buf = BytesMut::from(&b"last"[..]);
        assert!(
            matches!(lines.decode_eof(&mut buf).unwrap(), Some(Line::Text(l)) if &l[..] == b"last")
        );
    }
}
