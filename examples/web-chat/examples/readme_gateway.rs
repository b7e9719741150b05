//! The gateway example of README.md ("Agents as a web service"), compiled here so it cannot
//! rot (`cargo xtask ci`'s tidy step checks that README.md shows exactly this code, minus
//! these header lines).

use halo_adapters::openai::OpenAiCompatible;
use halo_core::HaloAgent;
use halo_stream::gateway::{ChatContext, Gateway};
use halo_stream::postgres::PostgresStore;
use std::sync::Arc;
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let store = Arc::new(PostgresStore::connect("postgres://halo@db/halo").await?);
    let model = Arc::new(OpenAiCompatible::deepseek_from_env()?);
    let gateway = Gateway::builder(store, move |_: &ChatContext<'_>| {
        Ok(HaloAgent::builder_shared(model.clone()).system("Be brief."))
    })
    .shared(true) // more than one gateway process on this store
    .build()
    .await?;
    gateway.add_user("ann", &std::env::var("PASSWORD")?).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    Ok(axum::serve(listener, gateway.router()).await?)
}
