//! `web-chat`: a browser chat on a Halo agent, the showcase of halo-stream's gateway.
//!
//! An axum server on loopback serves the page (`web/index.html` and the esbuild bundle
//! `web/dist/app.js`, which runs the `ai` package's chat client) and mounts
//! [`halo_stream::gateway::Gateway`]'s routes: login, chats listed from the store, runs
//! that survive refreshes and restarts, the approval card, steering while a run goes on.
//!
//! ```text
//! cd examples/web-chat/web && npm ci && npm run build
//! WEB_CHAT_USERS=ann:correct-horse cargo run -p web-chat -- [--port 3000] [--store FILE|URL]
//!     [--model scripted|openai|local] [--coding-tools DIR] [--shared] [--token-file PATH]
//! ```
//!
//! `WEB_CHAT_USERS` (`name:password,name:password`) creates the users the store does not
//! have yet (a password changed in the page stays changed). `--store` is a JSONL file
//! (default `$XDG_DATA_HOME/halo/web-chat.jsonl`), or a `postgres://` / `redis://` URL; `--shared` when several
//! web-chat processes use that database. `--model scripted` (default) is a deterministic
//! model (`src/model.rs`); `--model openai` any OpenAI-compatible server (`OPENAI_API_KEY`,
//! `OPENAI_BASE_URL`, `OPENAI_MODEL`); `--model local` the embedded model (build with
//! `--features local`); `--profile NAME` the model of a named profile of the user's config
//! file (as `coder --profile`). `--coding-tools DIR` adds the coding tools over DIR, `bash` asking
//! for approval in the page. The first line printed is `listening on http://127.0.0.1:PORT/`
//! (`--port 0` picks a free port), then the machine token's file.

mod agent;
mod model;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use halo_core::session::SessionStore;
use halo_stream::gateway::{ChatContext, Gateway};

struct Args {
    port: u16,
    model: String,
    assets: PathBuf,
    store: String,
    shared: bool,
    token_file: Option<PathBuf>,
    coding_tools: Option<PathBuf>,
    lease_ttl_ms: Option<u64>,
    profile: Option<String>,
}

const USAGE: &str = "usage: web-chat [--port N] [--store FILE|URL] [--shared] \
    [--model scripted|openai|local] [--coding-tools DIR] [--token-file PATH] \
    [--profile NAME] [--lease-ttl-ms N] [--assets DIR]";

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        port: 3000,
        model: "scripted".into(),
        assets: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/web")),
        store: default_store(),
        shared: false,
        token_file: None,
        coding_tools: None,
        lease_ttl_ms: None,
        profile: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => args.port = value()?.parse().context("--port takes a number")?,
            "--model" => args.model = value()?,
            "--assets" => args.assets = PathBuf::from(value()?),
            "--store" => args.store = value()?,
            "--shared" => args.shared = true,
            "--profile" => args.profile = Some(value()?),
            "--token-file" => args.token_file = Some(PathBuf::from(value()?)),
            "--coding-tools" => args.coding_tools = Some(PathBuf::from(value()?)),
            "--lease-ttl-ms" => {
                args.lease_ttl_ms = Some(value()?.parse().context("--lease-ttl-ms takes a number")?)
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument `{other}`; {USAGE}"),
        }
    }
    Ok(args)
}

/// `$XDG_DATA_HOME/halo/web-chat.jsonl` (`~/.local/share/...` without it).
fn default_store() -> String {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(std::env::temp_dir);
    data.join("halo")
        .join("web-chat.jsonl")
        .display()
        .to_string()
}

/// The store `--store` names (a file's folder is made when missing).
async fn open_store(store: &str) -> anyhow::Result<Arc<dyn SessionStore>> {
    Ok(
        if store.starts_with("postgres://") || store.starts_with("postgresql://") {
            Arc::new(halo_stream::postgres::PostgresStore::connect(store).await?)
        } else if store.starts_with("redis://") {
            Arc::new(halo_stream::redis::RedisStore::connect(store).await?)
        } else {
            let path = std::path::Path::new(store);
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            Arc::new(halo_stream::journal::JsonlStore::open(store)?)
        },
    )
}

/// `name:password` pairs from `WEB_CHAT_USERS`.
fn users_from_env() -> anyhow::Result<Vec<(String, String)>> {
    let Ok(list) = std::env::var("WEB_CHAT_USERS") else {
        return Ok(Vec::new());
    };
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|pair| {
            let (name, password) = pair
                .split_once(':')
                .context("WEB_CHAT_USERS holds name:password pairs, separated by commas")?;
            Ok((name.trim().to_owned(), password.to_owned()))
        })
        .collect()
}

struct Assets {
    dir: PathBuf,
}

async fn asset(assets: &Assets, rel: &str, content_type: &'static str) -> Response {
    let path = assets.dir.join(rel);
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

async fn index(State(assets): State<Arc<Assets>>) -> Response {
    asset(&assets, "index.html", "text/html; charset=utf-8").await
}

async fn app_js(State(assets): State<Arc<Assets>>) -> Response {
    asset(&assets, "dist/app.js", "text/javascript; charset=utf-8").await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let (model, desc) = match &args.profile {
        Some(name) => agent::profile_model(name)?,
        None => agent::pick_model(&args.model)?,
    };
    let coding_tools = match &args.coding_tools {
        Some(dir) => Some(
            halo_sandbox::ContainerSandbox::new(dir)
                .with_context(|| format!("--coding-tools {}", dir.display()))?,
        ),
        None => None,
    };
    let recipe = agent::Recipe {
        model,
        coding_tools,
    };
    let store = open_store(&args.store)
        .await
        .with_context(|| format!("--store {}", args.store))?;
    let mut builder = Gateway::builder(store, move |chat: &ChatContext<'_>| recipe.builder(chat))
        .shared(args.shared)
        .stream_options(
            halo_stream::StreamOptions::new()
                .with_step_usage(true)
                .with_error_text(|e| e.to_string()),
        );
    if let Some(path) = &args.token_file {
        builder = builder.token_file(path);
    }
    if let Some(ms) = args.lease_ttl_ms {
        builder = builder.lease_ttl_ms(ms);
    }
    let gateway = builder.build().await?;
    for (name, password) in users_from_env()? {
        if gateway.add_user(&name, &password).await? {
            eprintln!("web-chat: created user {name}");
        }
    }
    let assets = Arc::new(Assets { dir: args.assets });
    let pages = axum::Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/favicon.svg", get(favicon))
        .route("/favicon.ico", get(favicon))
        .with_state(assets);
    let router = pages.merge(gateway.router());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    println!("listening on http://{}/", listener.local_addr()?);
    println!("machine token: {}", gateway.token_file().display());
    println!("model: {desc}");
    axum::serve(listener, router).await?;
    Ok(())
}
