//! `nsight-operator`: `webhook` serves the injector over HTTPS. Controllers come next.

use std::{path::PathBuf, sync::Arc};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use nsight_operator::{
    admission::StaticWorld,
    server::{self, Webhook},
    settings::Settings,
};

#[derive(Parser)]
#[command(name = "nsight-operator", about = "The Nsight operator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the injector webhook (POST /mutate, GET /healthz) over HTTPS.
    Webhook {
        #[arg(long, default_value = "0.0.0.0:8443")]
        listen: std::net::SocketAddr,
        /// PEM certificate chain.
        #[arg(long)]
        cert: PathBuf,
        /// PEM private key.
        #[arg(long)]
        key: PathBuf,
        /// Image of the tools init container.
        #[arg(long, env = "NSIGHT_AGENT_IMAGE")]
        agent_image: Option<String>,
        /// Coordinator URL given to agents.
        #[arg(long, env = "NSIGHT_COORDINATOR_URL")]
        coordinator_url: Option<String>,
        #[arg(long, default_value = "default")]
        tag: String,
    },
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NSIGHT_OPERATOR_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let Command::Webhook {
        listen,
        cert,
        key,
        agent_image,
        coordinator_url,
        tag,
    } = Cli::parse().command;
    let mut settings = Settings {
        coordinator_url,
        tag,
        ..Settings::default()
    };
    if let Some(image) = agent_image {
        settings.agent_image = image;
    }
    let tls = server::tls_config(&cert, &key)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    tracing::info!(addr = %listener.local_addr()?, "injector webhook listening");
    let webhook = Webhook {
        world: Arc::new(StaticWorld::default()),
        settings: Arc::new(settings),
    };
    server::serve(listener, Arc::new(tls), server::router(webhook)).await?;
    Ok(())
}
