//! What the gateway tests share: a gateway served on a loopback port, an HTTP client that
//! keeps a login cookie, an SSE reader, and a model that streams word by word.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use halo_core::session::SessionStore;
use halo_core::testing::ScriptedModel;
use halo_core::{
    HaloAgent, ModelAdapter, ModelError, ModelEventStream, ModelRequest, ModelResponse,
    ModelStreamEvent, async_trait,
};
use halo_stream::gateway::{ChatContext, Gateway, GatewayBuilder};
use serde_json::{Value, json};

/// A scripted model whose streamed answers come word by word, `pace` apart, so a client
/// can leave in the middle of one.
#[derive(Clone)]
pub struct Paced {
    pub inner: ScriptedModel,
    pub pace: Duration,
    /// When set, each answer waits for a permit after its request is made.
    pub gate: Option<Arc<tokio::sync::Semaphore>>,
}

impl Paced {
    pub fn new(inner: ScriptedModel, pace: Duration) -> Paced {
        Paced {
            inner,
            pace,
            gate: None,
        }
    }
}

#[async_trait]
impl ModelAdapter for Paced {
    fn provider(&self) -> &str {
        "scripted"
    }
    fn model_name(&self) -> &str {
        "paced"
    }
    async fn generate(&self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.inner.generate(request).await
    }
    fn stream<'a>(&'a self, request: ModelRequest<'a>) -> ModelEventStream<'a> {
        let pace = self.pace;
        Box::pin(async_stream::stream! {
            let response = match self.inner.generate(request).await {
                Ok(response) => response,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            if let Some(gate) = &self.gate {
                gate.acquire().await.unwrap().forget();
            }
            let text = response.message.text.clone();
            let mut rest = text.as_str();
            while !rest.is_empty() {
                let cut = rest[1..].find(' ').map_or(rest.len(), |i| i + 1);
                tokio::time::sleep(pace).await;
                yield Ok(ModelStreamEvent::TextDelta(rest[..cut].to_owned()));
                rest = &rest[cut..];
            }
            for (index, call) in response.message.tool_calls.iter().enumerate() {
                yield Ok(ModelStreamEvent::ToolCallStart { index, id: call.id.to_string(), name: call.name.to_string() });
                yield Ok(ModelStreamEvent::ToolCallDelta { index, arguments: call.raw_arguments.to_string() });
            }
            yield Ok(ModelStreamEvent::Finish(response));
        })
    }
}

/// `n` words: `w1 w2 ... wn.`
pub fn words(n: usize) -> String {
    let words: Vec<String> = (1..=n).map(|i| format!("w{i}")).collect();
    format!("{}.", words.join(" "))
}

/// A gateway on a loopback port.
pub struct Server {
    pub url: String,
    pub token_file: PathBuf,
    _dir: Arc<tempfile::TempDir>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The password every test user has.
pub const PASSWORD: &str = "correct horse battery";

/// A builder over `store` whose agents run `model` with `build` applied, a cheap scrypt
/// cost, and a token file in `dir`.
pub fn builder(
    store: Arc<dyn SessionStore>,
    model: Paced,
    dir: &tempfile::TempDir,
    build: impl Fn(halo_core::HaloAgentBuilder) -> halo_core::HaloAgentBuilder + Send + Sync + 'static,
) -> GatewayBuilder {
    let shared: halo_core::SharedModel = Arc::new(model);
    Gateway::builder(store, move |chat: &ChatContext<'_>| {
        let _ = chat;
        Ok(build(
            HaloAgent::builder_shared(shared.clone()).max_steps(6),
        ))
    })
    .password_cost(4)
    .token_file(dir.path().join("run/token"))
}

impl Server {
    /// Serves `builder`'s gateway with the users `ann` and `bob`.
    pub async fn start(builder: GatewayBuilder, dir: Arc<tempfile::TempDir>) -> Server {
        let gateway = builder.build().await.unwrap();
        for user in ["ann", "bob"] {
            gateway.add_user(user, PASSWORD).await.unwrap();
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let router = gateway.router();
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Server {
            url,
            token_file: gateway.token_file().to_owned(),
            _dir: dir,
            task,
        }
    }

    /// A client logged in as `user`.
    pub async fn login(&self, user: &str) -> Client {
        let mut client = Client::new(&self.url);
        let r = client
            .post("/api/login", json!({"user": user, "password": PASSWORD}))
            .await;
        assert_eq!(r.status(), 200, "login of {user}");
        client.take_cookie(&r);
        client
    }
}

/// An HTTP client that sends its session cookie.
#[derive(Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
    pub cookie: Option<String>,
    pub bearer: Option<String>,
}

impl Client {
    pub fn new(base: &str) -> Client {
        Client {
            base: base.to_owned(),
            http: reqwest::Client::new(),
            cookie: None,
            bearer: None,
        }
    }

    /// Keeps the `halo_session` cookie a response sets.
    pub fn take_cookie(&mut self, r: &reqwest::Response) {
        let set = r.headers().get("set-cookie").unwrap().to_str().unwrap();
        self.cookie = Some(set.split(';').next().unwrap().to_owned());
    }

    fn auth(&self, mut r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if let Some(cookie) = &self.cookie {
            r = r.header("cookie", cookie);
        }
        if let Some(token) = &self.bearer {
            r = r.bearer_auth(token);
        }
        r
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.auth(self.http.get(format!("{}{path}", self.base)))
            .send()
            .await
            .unwrap()
    }

    pub async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.auth(self.http.post(format!("{}{path}", self.base)).json(&body))
            .send()
            .await
            .unwrap()
    }

    pub async fn post_json_only(&self, path: &str, body: Value) -> reqwest::Response {
        self.auth(
            self.http
                .post(format!("{}{path}", self.base))
                .header("accept", "application/json")
                .json(&body),
        )
        .send()
        .await
        .unwrap()
    }

    /// `POST /api/chat` with one user message, as `useChat` sends it.
    pub async fn send(&self, chat: &str, text: &str) -> reqwest::Response {
        self.post("/api/chat", user_message(chat, text)).await
    }
}

/// The body `useChat` posts for a first message.
pub fn user_message(chat: &str, text: &str) -> Value {
    json!({
        "id": chat,
        "trigger": "submit-message",
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}],
    })
}

/// One SSE frame: its `id` and its JSON (`None` for `[DONE]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: Option<u64>,
    pub data: Option<Value>,
}

/// Reads an SSE body frame by frame.
pub struct Sse {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: String,
}

impl Sse {
    pub fn new(r: reqwest::Response) -> Sse {
        assert_eq!(r.status(), 200, "an SSE response");
        assert_eq!(r.headers()["x-vercel-ai-ui-message-stream"], "v1");
        Sse {
            body: r.bytes_stream().boxed(),
            buf: String::new(),
        }
    }

    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let raw: String = self.buf.drain(..end + 2).collect();
                let mut frame = Frame {
                    id: None,
                    data: None,
                };
                for line in raw.lines() {
                    if let Some(id) = line.strip_prefix("id: ") {
                        frame.id = Some(id.parse().unwrap());
                    } else if let Some(data) = line.strip_prefix("data: ") {
                        frame.data =
                            (data != "[DONE]").then(|| serde_json::from_str(data).unwrap());
                    }
                }
                return Some(frame);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.body.next())
                .await
                .expect("the stream stalled for 30 s")?;
            self.buf
                .push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
    }

    /// Every frame to the end.
    pub async fn all(mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next().await {
            frames.push(frame);
        }
        frames
    }
}

/// The parts' types in order.
pub fn types(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| f.data.as_ref())
        .map(|d| d["type"].as_str().unwrap().to_owned())
        .collect()
}

/// The text deltas joined.
pub fn text(frames: &[Frame]) -> String {
    frames
        .iter()
        .filter_map(|f| f.data.as_ref())
        .filter(|d| d["type"] == "text-delta")
        .map(|d| d["delta"].as_str().unwrap())
        .collect()
}

/// A fresh temporary folder, shared by the server and the test.
pub fn temp() -> Arc<tempfile::TempDir> {
    Arc::new(tempfile::tempdir().unwrap())
}

/// A JSONL store in `dir`.
pub fn jsonl(dir: &tempfile::TempDir) -> Arc<dyn SessionStore> {
    Arc::new(halo_stream::journal::JsonlStore::open(dir.path().join("chats.jsonl")).unwrap())
}
