//! `durable-worker`: one worker process of durable Halo sessions. It serves the
//! `HaloSession` and `HaloSteering` virtual objects over HTTP/2 for a Restate server, with
//! the agent of [`durable::agent`], and `HaloWorkflow` with [`durable::workflow`].
//!
//! ```text
//! durable-worker --listen 127.0.0.1:9080 --model-url http://127.0.0.1:8000/v1 --calls calls.tsv
//! ```
//!
//! Start as many as you like behind one address, then register that address with Restate
//! once: `curl -X POST http://127.0.0.1:9070/deployments -H 'content-type: application/json'
//! -d '{"uri": "http://127.0.0.1:9080"}'`. See `docs/durable.md`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use halo_stream::restate::{HaloSession, HaloWorkflow, endpoint_with, serve_endpoint};

struct Args {
    listen: SocketAddr,
    model_url: String,
    calls: PathBuf,
}

const USAGE: &str = "usage: durable-worker --listen ADDR:PORT --model-url URL --calls FILE";

fn args() -> anyhow::Result<Args> {
    let mut listen = None;
    let mut model_url = None;
    let mut calls = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--listen" => {
                let v = value()?;
                listen = Some(
                    v.parse()
                        .with_context(|| format!("--listen {v}: not ADDR:PORT"))?,
                );
            }
            "--model-url" => model_url = Some(value()?),
            "--calls" => calls = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}\n{USAGE}"),
        }
    }
    match (listen, model_url, calls) {
        (Some(listen), Some(model_url), Some(calls)) => Ok(Args {
            listen,
            model_url,
            calls,
        }),
        _ => bail!("{USAGE}"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = args()?;
    let setup = durable::Setup::new(&args.model_url, args.calls)
        .with_context(|| format!("--model-url {}", args.model_url))?;
    let for_workflows = setup.clone();
    let session = HaloSession::new(move |id: &str| Ok(durable::agent(id, &setup)?));
    let workflows = HaloWorkflow::new(move |run: &str| Ok(durable::workflow(run, &for_workflows)?));
    eprintln!("durable-worker: serving on {}", args.listen);
    serve_endpoint(
        endpoint_with(session, Some(workflows)),
        args.listen,
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    )
    .await
    .with_context(|| format!("cannot listen on {}", args.listen))
}
