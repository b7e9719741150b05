//! Streamed chat completions for the fakes: a builder of real `chat.completion.chunk` event
//! streams (OpenAI, DeepSeek and bare-server shapes; LF, CRLF or CR line endings), and a
//! hand-rolled loopback HTTP/1.1 server that writes a body in chosen byte pieces, with a
//! flush and a short sleep after each, and can cut the connection mid-event.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use wiremock::ResponseTemplate;

use super::fake::{Shape, check_body};

/// Line endings of a built stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Lf,
    CrLf,
    Cr,
}

impl Ending {
    fn eol(self) -> &'static str {
        match self {
            Ending::Lf => "\n",
            Ending::CrLf => "\r\n",
            Ending::Cr => "\r",
        }
    }
}

/// One item of a stream: a chunk's JSON, or a raw text block (written as given, with the
/// ending's line terminators).
#[derive(Debug, Clone)]
enum Item {
    Chunk(Value),
    Raw(String),
}

/// A builder of one streamed turn.
#[derive(Debug, Clone)]
pub struct Turn {
    shape: Shape,
    items: Vec<Item>,
}

impl Turn {
    /// A stream of this shape, opening with the role chunk (as every vendor sends).
    pub fn new(shape: Shape) -> Self {
        let mut turn = Turn {
            shape,
            items: Vec::new(),
        };
        let first = match shape {
            Shape::DeepSeek => {
                json!({"role": "assistant", "content": null, "reasoning_content": null})
            }
            Shape::OpenAi => json!({"role": "assistant", "content": "", "refusal": null}),
            Shape::Bare => json!({"role": "assistant", "content": ""}),
        };
        turn.items.push(Item::Chunk(turn.chunk(first, None)));
        turn
    }

    fn model(&self) -> &'static str {
        match self.shape {
            Shape::OpenAi => "gpt-4o-mini-2024-07-18",
            Shape::DeepSeek => "deepseek-chat",
            Shape::Bare => "qwen2.5-7b-instruct",
        }
    }

    /// A chunk with one choice holding `delta`.
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        let mut chunk = json!({
            "id": "chatcmpl-stream",
            "object": "chat.completion.chunk",
            "created": 1_750_000_000,
            "model": self.model(),
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        match self.shape {
            Shape::OpenAi => {
                chunk["service_tier"] = json!("default");
                chunk["system_fingerprint"] = json!("fp_0123456789");
                chunk["usage"] = Value::Null;
                chunk["obfuscation"] = json!("x9");
            }
            Shape::DeepSeek => {
                chunk["system_fingerprint"] = json!("fp_deepseek_v3");
                chunk["usage"] = Value::Null;
            }
            Shape::Bare => {}
        }
        chunk
    }

    /// A text delta (DeepSeek also sends `reasoning_content: null` beside it).
    pub fn text(mut self, text: &str) -> Self {
        let delta = match self.shape {
            Shape::DeepSeek => json!({"content": text, "reasoning_content": null}),
            _ => json!({"content": text}),
        };
        self.items.push(Item::Chunk(self.chunk(delta, None)));
        self
    }

    /// A DeepSeek `reasoning_content` delta (`content: null` beside it).
    pub fn reasoning(mut self, text: &str) -> Self {
        let delta = json!({"content": null, "reasoning_content": text});
        self.items.push(Item::Chunk(self.chunk(delta, None)));
        self
    }

    /// A chunk whose delta carries these tool-call deltas (each built with [`start`] or
    /// [`args`]).
    pub fn calls(mut self, deltas: Vec<Value>) -> Self {
        let mut delta = json!({"tool_calls": deltas});
        if self.shape == Shape::DeepSeek {
            delta["content"] = Value::Null;
            delta["reasoning_content"] = Value::Null;
        }
        self.items.push(Item::Chunk(self.chunk(delta, None)));
        self
    }

    /// A call's arguments sent as one fragment per `piece` bytes (on char boundaries), each
    /// in its own chunk.
    pub fn args_in_pieces(mut self, index: u64, arguments: &str, piece: usize) -> Self {
        for fragment in char_pieces(arguments, piece) {
            self = self.calls(vec![args(index, &fragment)]);
        }
        self
    }

    /// The finish chunk (empty delta).
    pub fn finish(mut self, reason: &str) -> Self {
        self.items
            .push(Item::Chunk(self.chunk(json!({}), Some(reason))));
        self
    }

    /// DeepSeek: the finish chunk carries the usage (non-empty `choices`).
    pub fn finish_with_usage(mut self, reason: &str, usage: Value) -> Self {
        let mut chunk = self.chunk(
            json!({"content": "", "reasoning_content": null}),
            Some(reason),
        );
        chunk["usage"] = usage;
        self.items.push(Item::Chunk(chunk));
        self
    }

    /// OpenAI's `include_usage` chunk: empty `choices`, the whole request's usage.
    pub fn usage_chunk(mut self, usage: Value) -> Self {
        let mut chunk = self.chunk(json!({}), None);
        chunk["choices"] = json!([]);
        chunk["usage"] = usage;
        self.items.push(Item::Chunk(chunk));
        self
    }

    /// Any chunk JSON, as given.
    pub fn raw_chunk(mut self, chunk: Value) -> Self {
        self.items.push(Item::Chunk(chunk));
        self
    }

    /// Raw event-stream text (its `\n`s become the ending's terminators).
    pub fn raw(mut self, text: &str) -> Self {
        self.items.push(Item::Raw(text.to_string()));
        self
    }

    /// `data: [DONE]`.
    pub fn done(self) -> Self {
        self.raw("data: [DONE]\n\n")
    }

    /// The body bytes: each chunk as one `data: ` line (compact JSON), then a blank line.
    pub fn body(&self, ending: Ending) -> Vec<u8> {
        self.render(ending, |json| format!("data: {json}\n\n"))
    }

    /// The body with `data:` (no space) before each chunk.
    pub fn body_without_space(&self, ending: Ending) -> Vec<u8> {
        self.render(ending, |json| format!("data:{json}\n\n"))
    }

    /// The body with each chunk pretty-printed over several `data:` lines.
    pub fn body_multiline(&self, ending: Ending) -> Vec<u8> {
        self.render(ending, |json| {
            let pretty = serde_json::to_string_pretty(json).expect("json");
            let mut out = String::new();
            for line in pretty.lines() {
                out.push_str("data: ");
                out.push_str(line);
                out.push('\n');
            }
            out.push('\n');
            out
        })
    }

    fn render(&self, ending: Ending, chunk: impl Fn(&Value) -> String) -> Vec<u8> {
        let mut out = String::new();
        for item in &self.items {
            let text = match item {
                Item::Chunk(v) => chunk(v),
                Item::Raw(t) => t.clone(),
            };
            out.push_str(&text.replace('\n', ending.eol()));
        }
        out.into_bytes()
    }

    /// A wiremock 200 answer with the LF body.
    pub fn respond(&self) -> ResponseTemplate {
        sse_response(self.body(Ending::Lf))
    }
}

/// A 200 `text/event-stream` answer with this body.
pub fn sse_response(body: Vec<u8>) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// The first delta of a call: index, id, type and name, with `arguments: ""` (OpenAI's form).
pub fn start(index: u64, id: &str, name: &str) -> Value {
    json!({"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}})
}

/// A later delta of a call: index and an arguments fragment only.
pub fn args(index: u64, fragment: &str) -> Value {
    json!({"index": index, "function": {"arguments": fragment}})
}

/// `s` in pieces of at most `n` bytes, cut on char boundaries.
pub fn char_pieces(s: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in s.chars() {
        if !current.is_empty() && current.len() + c.len_utf8() > n {
            out.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// `bytes` in pieces of `n` bytes (any byte, even inside a character or a terminator).
pub fn byte_pieces(bytes: &[u8], n: usize) -> Vec<Vec<u8>> {
    bytes.chunks(n.max(1)).map(<[u8]>::to_vec).collect()
}

/// How [`SplitServer`] answers one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 `text/event-stream`, chunked transfer encoding, one HTTP chunk per piece.
    Pieces(Vec<Vec<u8>>),
    /// As `Pieces`, then the connection is closed without the final chunk: a cut.
    CutAfter(Vec<Vec<u8>>),
    /// 200 `text/event-stream` without a length, ended by closing the connection (a clean
    /// end of the body as far as HTTP goes).
    CloseDelimited(Vec<Vec<u8>>),
    /// A status with a JSON body.
    Status(u16, String),
}

#[derive(Default)]
struct ServerState {
    replies: std::collections::VecDeque<Reply>,
    requests: Vec<Vec<u8>>,
    violations: Vec<String>,
}

/// A loopback HTTP/1.1 server answering `POST /v1/chat/completions` from a FIFO script of
/// [`Reply`]s, writing bodies piece by piece (flush, 1 ms sleep), recording request bodies
/// and checking the tool-pairing invariant on each (like [`super::fake::FakeChat`]).
pub struct SplitServer {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<ServerState>>,
    task: tokio::task::JoinHandle<()>,
}

impl SplitServer {
    /// Starts a server with this script.
    pub async fn start(replies: impl IntoIterator<Item = Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(ServerState {
            replies: replies.into_iter().collect(),
            ..ServerState::default()
        }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(serve(socket, state));
            }
        });
        SplitServer { addr, state, task }
    }

    /// The base URL to give the adapter.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request body so far.
    pub fn requests(&self) -> Vec<Vec<u8>> {
        self.state.lock().expect("lock").requests.clone()
    }

    /// Asserts the script was used up and every body kept the tool pairing.
    pub fn finish(&self) {
        let state = self.state.lock().expect("lock");
        assert!(state.violations.is_empty(), "{:?}", state.violations);
        assert!(
            state.replies.is_empty(),
            "{} scripted replies were never requested",
            state.replies.len()
        );
    }
}

impl Drop for SplitServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut socket: tokio::net::TcpStream, state: Arc<Mutex<ServerState>>) {
    // Read the head, then `content-length` bytes of body.
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        match socket.read(&mut tmp).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match socket.read(&mut tmp).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
    let body = buf[head_end..head_end + length].to_vec();
    let reply = {
        let mut s = state.lock().expect("lock");
        let n = s.requests.len() + 1;
        if let Err(why) = check_body(&body) {
            s.violations.push(format!("request {n}: {why}"));
        }
        s.requests.push(body);
        s.replies.pop_front()
    };
    let Some(reply) = reply else {
        let _ = socket
            .write_all(
                b"HTTP/1.1 418 I'm a teapot\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            )
            .await;
        return;
    };
    let pause = || tokio::time::sleep(Duration::from_millis(1));
    match reply {
        Reply::Status(status, body) => {
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
        }
        Reply::Pieces(pieces) => {
            write_chunked(&mut socket, &pieces, pause).await;
            let _ = socket.write_all(b"0\r\n\r\n").await;
        }
        Reply::CutAfter(pieces) => {
            write_chunked(&mut socket, &pieces, pause).await;
        }
        Reply::CloseDelimited(pieces) => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            let _ = socket.write_all(head.as_bytes()).await;
            for piece in &pieces {
                let _ = socket.write_all(piece).await;
                let _ = socket.flush().await;
                pause().await;
            }
        }
    }
    let _ = socket.flush().await;
    let _ = socket.shutdown().await;
}

async fn write_chunked<F, Fut>(socket: &mut tokio::net::TcpStream, pieces: &[Vec<u8>], pause: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    let _ = socket.write_all(head.as_bytes()).await;
    for piece in pieces.iter().filter(|p| !p.is_empty()) {
        let mut frame = format!("{:x}\r\n", piece.len()).into_bytes();
        frame.extend_from_slice(piece);
        frame.extend_from_slice(b"\r\n");
        let _ = socket.write_all(&frame).await;
        let _ = socket.flush().await;
        pause().await;
    }
}
