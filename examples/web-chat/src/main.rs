//! `web-chat`: a browser chat on a Halo agent.
//!
//! An axum server on loopback serves a page (`web/index.html` and the esbuild bundle
//! `web/dist/app.js`, which runs the `ai` package's chat client) and answers its
//! `POST /api/chat` with the AI SDK UI Message Stream from [`halo_stream::create_halo_stream`].
//! Each chat id gets its own agent, kept across turns behind a mutex; the stream takes the
//! lock's owned guard, so the turn's messages land in that agent's log.
//!
//! ```text
//! cd examples/web-chat/web && npm ci && npm run build
//! cargo run -p web-chat -- [--port 3000] [--model scripted|openai|local] [--assets DIR]
//! ```
//!
//! `--model scripted` (default) is a deterministic model that asks `get_weather` once and
//! answers from the tool's result; `--model openai` is any OpenAI-compatible server, from
//! `OPENAI_API_KEY` (required), `OPENAI_BASE_URL` and `OPENAI_MODEL` (optional), as the coder
//! example reads them; `--model local` is the embedded llama.cpp model (build with
//! `--features local` and fetch it with `cargo xtask model`). The first line printed is
//! `listening on http://127.0.0.1:PORT/` (`--port 0` picks a free port). The favicon is
//! served from memory, so the browser's console shows no 404 even before the page is built.

mod model;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use halo_core::{HaloAgent, SharedModel, Tool, ToolError, ToolOutput};
use tokio::sync::Mutex;

/// Chats kept in memory; the oldest is dropped past this.
const MAX_CHATS: usize = 100;

struct App {
    model: SharedModel,
    assets: PathBuf,
    chats: Mutex<Chats>,
}

#[derive(Default)]
struct Chats {
    agents: HashMap<String, Arc<Mutex<HaloAgent>>>,
    order: Vec<String>,
}

/// The weather tool the agent calls: fixed answers, so runs are reproducible.
struct GetWeather;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct GetWeatherArgs {
    /// The city's name, e.g. "Paris".
    city: String,
}

impl Tool for GetWeather {
    type Args = GetWeatherArgs;
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "Current weather of a city."
    }
    async fn call(&self, args: GetWeatherArgs) -> Result<ToolOutput, ToolError> {
        let report = match args.city.to_lowercase().as_str() {
            "paris" => "sunny, 21 °C",
            "oslo" => "snow, -3 °C",
            "lisbon" => "clear, 24 °C",
            _ => "cloudy, 15 °C",
        };
        Ok(ToolOutput::text(report))
    }
}

fn new_agent(model: &SharedModel) -> anyhow::Result<HaloAgent> {
    Ok(HaloAgent::builder_shared(model.clone())
        .system("You are a weather assistant. Call get_weather, then answer in one sentence.")
        .tool(GetWeather)?
        .max_steps(4)
        .build())
}

/// The body `DefaultChatTransport` posts: the chat id and every message as a `UIMessage`.
#[derive(serde::Deserialize)]
struct ChatRequest {
    id: String,
    messages: Vec<UiMessage>,
}

#[derive(serde::Deserialize)]
struct UiMessage {
    role: String,
    #[serde(default)]
    parts: Vec<serde_json::Value>,
}

/// The text parts of the last message, if it is the user's.
fn last_user_text(messages: &[UiMessage]) -> Option<String> {
    let last = messages.last().filter(|m| m.role == "user")?;
    let text: Vec<&str> = last
        .parts
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    let text = text.join("\n");
    (!text.trim().is_empty()).then_some(text)
}

async fn chat(State(app): State<Arc<App>>, Json(request): Json<ChatRequest>) -> Response {
    let Some(input) = last_user_text(&request.messages) else {
        return (
            StatusCode::BAD_REQUEST,
            "the last message must be the user's, with a text part",
        )
            .into_response();
    };
    let agent = {
        let mut chats = app.chats.lock().await;
        match chats.agents.get(&request.id) {
            Some(agent) => agent.clone(),
            None => match new_agent(&app.model) {
                Ok(agent) => {
                    if chats.order.len() >= MAX_CHATS {
                        let oldest = chats.order.remove(0);
                        chats.agents.remove(&oldest);
                    }
                    let agent = Arc::new(Mutex::new(agent));
                    chats.order.push(request.id.clone());
                    chats.agents.insert(request.id.clone(), agent.clone());
                    agent
                }
                Err(e) => {
                    return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")).into_response();
                }
            },
        }
    };
    // Waits while another turn of the same chat is still streaming.
    let guard = agent.lock_owned().await;
    let options = halo_stream::StreamOptions::new().with_error_text(|e| e.to_string());
    let body = halo_stream::create_halo_stream_with(guard, input, options);
    let mut headers = HeaderMap::new();
    for (name, value) in halo_stream::UI_MESSAGE_STREAM_HEADERS {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    (headers, Body::from_stream(body)).into_response()
}

async fn asset(app: &App, rel: &str, content_type: &'static str) -> Response {
    let path = app.assets.join(rel);
    match tokio::fs::read(&path).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, content_type)], bytes).into_response(),
        Err(e) => (
            StatusCode::NOT_FOUND,
            format!(
                "cannot read {}: {e}; build the page with `npm ci && npm run build` in examples/web-chat/web",
                path.display()
            ),
        )
            .into_response(),
    }
}

/// The page's icon (a ring), for `<link rel="icon">` and browsers that ask `/favicon.ico`.
const FAVICON_SVG: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><circle cx="16" cy="16" r="11" fill="none" stroke="#e8a33d" stroke-width="5"/></svg>"##;

async fn favicon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "max-age=86400"),
        ],
        FAVICON_SVG,
    )
        .into_response()
}

async fn index(State(app): State<Arc<App>>) -> Response {
    asset(&app, "index.html", "text/html; charset=utf-8").await
}

async fn app_js(State(app): State<Arc<App>>) -> Response {
    asset(&app, "dist/app.js", "text/javascript; charset=utf-8").await
}

struct Args {
    port: u16,
    model: String,
    assets: PathBuf,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        port: 3000,
        model: "scripted".into(),
        assets: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/web")),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => args.port = value()?.parse().context("--port takes a number")?,
            "--model" => args.model = value()?,
            "--assets" => args.assets = PathBuf::from(value()?),
            other => bail!(
                "unknown argument `{other}`; usage: web-chat [--port N] [--model scripted|openai|local] [--assets DIR]"
            ),
        }
    }
    Ok(args)
}

/// The model `--model` names, and a line describing it.
fn pick_model(name: &str) -> anyhow::Result<(SharedModel, String)> {
    match name {
        "scripted" => Ok((
            Arc::new(model::WeatherScript),
            "scripted weather model".into(),
        )),
        "openai" => {
            let m = halo_adapters::openai::OpenAiCompatible::openai_from_env().context(
                "--model openai reads OPENAI_API_KEY (required), OPENAI_BASE_URL and OPENAI_MODEL",
            )?;
            let desc = format!(
                "OpenAI-compatible {} at {}",
                halo_core::ModelAdapter::model_name(&m),
                m.endpoint()
            );
            Ok((Arc::new(m), desc))
        }
        "local" => local_model(),
        other => bail!("unknown model `{other}`; use `scripted`, `openai` or `local`"),
    }
}

#[cfg(feature = "local")]
fn local_model() -> anyhow::Result<(SharedModel, String)> {
    use halo_adapters::local::{AutoToolChoice, LocalAdapter, LocalConfig, default_model_path};
    let config =
        LocalConfig::default().with_auto_tool_choice(AutoToolChoice::CallThenAnswer { rounds: 1 });
    let path = default_model_path();
    let desc = format!("embedded model {}", path.display());
    Ok((Arc::new(LocalAdapter::load(path, config)?), desc))
}

#[cfg(not(feature = "local"))]
fn local_model() -> anyhow::Result<(SharedModel, String)> {
    bail!("this build has no embedded model; build with `--features local`")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let (model, desc) = pick_model(&args.model)?;
    let app = Arc::new(App {
        model,
        assets: args.assets,
        chats: Mutex::new(Chats::default()),
    });
    let router = axum::Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/favicon.svg", get(favicon))
        .route("/favicon.ico", get(favicon))
        .route("/api/chat", post(chat))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    println!("listening on http://{}/", listener.local_addr()?);
    println!("model: {desc}");
    axum::serve(listener, router).await?;
    Ok(())
}
