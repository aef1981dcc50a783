//! `nsight-operator`: `manager` runs the controllers (with leader election, health and
//! metrics); `webhook` serves the injector over HTTPS.

use std::{path::PathBuf, sync::Arc};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use nsight_operator::{
    admission::StaticWorld,
    leader::Elector,
    manager::{self, Health},
    render::RenderSettings,
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
    /// Reconcile the Nsight custom resources into Deployments, Services, ConfigMaps and
    /// ServiceAccounts; serve /healthz, /readyz and /metrics.
    Manager(ManagerArgs),
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
        /// A fixed world (namespace labels and NsightOperatorProfileConfigs) as JSON, instead
        /// of none: see `admission::StaticWorld`.
        #[arg(long)]
        world: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct ManagerArgs {
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: std::net::SocketAddr,
    /// Watch only this namespace [default: all namespaces].
    #[arg(long, env = "NSIGHT_WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Registry and path of the component images (`<repository>/nsight-coordinator:<tag>`).
    #[arg(long, env = "NSIGHT_IMAGE_REPOSITORY", default_value_t = RenderSettings::default().image_repository)]
    image_repository: String,
    #[arg(long, env = "NSIGHT_IMAGE_TAG", default_value_t = RenderSettings::default().image_tag)]
    image_tag: String,
    /// The Envoy image of gateways.
    #[arg(long, env = "NSIGHT_ENVOY_IMAGE", default_value_t = RenderSettings::default().envoy_image)]
    envoy_image: String,
    /// Where gateways reach the operator's xDS server.
    #[arg(long, default_value_t = RenderSettings::default().xds_host)]
    xds_host: String,
    #[arg(long, default_value_t = RenderSettings::default().xds_port)]
    xds_port: u16,
    /// Run the controllers only while holding the leader Lease.
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the Lease [default: the watched namespace, else `nsight-operator`].
    #[arg(long, env = "POD_NAMESPACE")]
    lease_namespace: Option<String>,
    #[arg(long, default_value = "nsight-operator-leader")]
    lease_name: String,
    /// This replica's identity in the Lease [default: $POD_NAME, else $HOSTNAME, else the pid].
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Lease validity without renewal, seconds.
    #[arg(long, default_value_t = 15)]
    lease_duration_secs: u64,
    /// Renewal and retry period, seconds.
    #[arg(long, default_value_t = 2)]
    lease_retry_secs: u64,
}

async fn run_manager(args: ManagerArgs) -> Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("no Kubernetes client configuration (in-cluster or KUBECONFIG)")?;
    let health = Health::default();
    let listener = manager::bind(args.metrics_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.metrics_addr))?;
    tracing::info!(addr = %listener.local_addr()?, "health and metrics listening");
    tokio::spawn(manager::serve_health(listener, health.clone()));
    let elector = args.leader_elect.then(|| {
        let namespace = args
            .lease_namespace
            .clone()
            .or_else(|| args.namespace.clone())
            .unwrap_or_else(|| "nsight-operator".into());
        let identity = args
            .identity
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| format!("nsight-operator-{}", std::process::id()));
        let mut elector = Elector::new(client.clone(), &namespace, &args.lease_name, &identity);
        elector.duration = std::time::Duration::from_secs(args.lease_duration_secs);
        elector.retry = std::time::Duration::from_secs(args.lease_retry_secs);
        elector
    });
    let config = manager::Config {
        settings: RenderSettings {
            image_repository: args.image_repository,
            image_tag: args.image_tag,
            envoy_image: args.envoy_image,
            xds_host: args.xds_host,
            xds_port: args.xds_port,
        },
        namespace: args.namespace,
    };
    manager::run(client, config, health, elector)
        .await
        .context("stopping: another replica takes over")?;
    Ok(())
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
    let (listen, cert, key, agent_image, coordinator_url, tag, world) = match Cli::parse().command {
        Command::Manager(args) => return run_manager(args).await,
        Command::Webhook {
            listen,
            cert,
            key,
            agent_image,
            coordinator_url,
            tag,
            world,
        } => (listen, cert, key, agent_image, coordinator_url, tag, world),
    };
    let world = match world {
        Some(path) => {
            let text = std::fs::read(&path)
                .with_context(|| format!("cannot read the world file {}", path.display()))?;
            serde_json::from_slice::<StaticWorld>(&text).with_context(|| {
                format!(
                    "{} is not a world: {{\"namespaces\": {{ns: {{labels}}}}, \"configs\": [NsightOperatorProfileConfig]}}",
                    path.display()
                )
            })?
        }
        None => StaticWorld::default(),
    };
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
        world: Arc::new(world),
        settings: Arc::new(settings),
    };
    server::serve(listener, Arc::new(tls), server::router(webhook)).await?;
    Ok(())
}
