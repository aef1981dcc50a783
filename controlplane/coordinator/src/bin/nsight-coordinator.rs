//! `nsight-coordinator`: the coordinator server (REST for users, gRPC for agents).

use std::{net::SocketAddr, path::PathBuf};

use clap::Parser;
use nsight_contracts::gateway_only;
use nsight_coordinator::{
    server::{converters::Converters, reports::StorageSpec, serve, ServerConfig},
    state::Config,
};

#[derive(Debug, Parser)]
#[command(version, about = "Brokers profiling sessions between users and agents")]
struct Args {
    /// REST API address (behind the gateway's /coordinator/ prefix).
    #[arg(long, env = "NSIGHT_COORDINATOR_HTTP", default_value = "0.0.0.0:8080")]
    http: SocketAddr,
    /// Agent channel (gRPC) address.
    #[arg(long, env = "NSIGHT_COORDINATOR_GRPC", default_value = "0.0.0.0:8081")]
    grpc: SocketAddr,
    /// Directory for the durable state (a volume in a cluster). Without it, state is lost on exit.
    #[arg(long, env = "NSIGHT_COORDINATOR_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// An agent silent this long is declared disconnected (lost, if it was collecting).
    #[arg(long, default_value_t = 15_000)]
    heartbeat_timeout_ms: u64,
    /// After STOP, how long agents have to upload before they are reported as timed out.
    #[arg(long, default_value_t = 120_000)]
    upload_timeout_ms: u64,
    /// Mutual TLS for the agent channel: a directory with ca.crt, tls.crt, tls.key (a mounted
    /// TLS Secret). Required unless --insecure-agent-channel.
    #[arg(long, env = "NSIGHT_COORDINATOR_TLS_DIR")]
    tls_dir: Option<PathBuf>,
    /// Local mode: create a CA, a server certificate and an agent certificate in --tls-dir when
    /// it has none.
    #[arg(long, requires = "tls_dir")]
    generate_local_certs: bool,
    /// Serve the agent channel in plaintext (a trusted network only).
    #[arg(long, conflicts_with = "tls_dir")]
    insecure_agent_channel: bool,
    /// Report storage: a storage-config.yaml (S3 or local), as the operator mounts it.
    #[arg(long, env = "NSIGHT_CLOUD_STORAGE_CONFIG_FILE", value_name = "FILE")]
    storage_config: Option<PathBuf>,
    /// Report storage in a local directory (the local mode); excludes --storage-config.
    #[arg(long, value_name = "DIR", conflicts_with = "storage_config")]
    storage_dir: Option<PathBuf>,
    /// The base URL users download reports from (the gateway's storage proxy, e.g.
    /// http://localhost:9000); download URLs are signed for it.
    #[arg(long, env = "NSIGHT_STORAGE_PUBLIC_URL", value_name = "URL")]
    storage_public_url: Option<String>,
    /// Answer the REST API only for requests that carry this file's secret in
    /// `x-nsight-gateway-token`, which the gateway adds (docs/security.md); without it the API
    /// answers any client that reaches the port.
    #[arg(long, env = "NSIGHT_GATEWAY_TOKEN_FILE", value_name = "FILE")]
    gateway_token_file: Option<PathBuf>,
    /// An OTLP converter (`nsight-otlp`, its HTTP base URL) to tell when a collection ends, so
    /// that the spans mirrored for it become a report; repeat for several.
    #[arg(
        long = "otlp-converter",
        env = "NSIGHT_OTLP_CONVERTERS",
        value_name = "URL",
        value_delimiter = ','
    )]
    otlp_converters: Vec<String>,
    /// How long after a collection ends the converters are told (mirrored spans are still on
    /// their way through the sidecar and the collector).
    #[arg(long, default_value_t = 2_000)]
    otlp_stop_delay_ms: u64,
    /// Print the REST API's OpenAPI document and exit.
    #[arg(long)]
    print_openapi: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if args.print_openapi {
        println!(
            "{}",
            serde_json::to_string_pretty(&nsight_coordinator::server::openapi::document())?
        );
        return Ok(());
    }
    if args.tls_dir.is_none() && !args.insecure_agent_channel {
        anyhow::bail!(
            "the agent channel needs mutual TLS: pass --tls-dir DIR (with ca.crt, tls.crt, tls.key; \
             add --generate-local-certs to create them) or --insecure-agent-channel on a trusted network"
        );
    }
    if let (Some(dir), true) = (&args.tls_dir, args.generate_local_certs) {
        if nsight_coordinator::server::tls::ensure_local_certs(dir)? {
            tracing::info!(dir = %dir.display(), "generated local agent-channel certificates");
        }
    }
    let machine = Config {
        heartbeat_timeout_ms: args.heartbeat_timeout_ms,
        upload_timeout_ms: args.upload_timeout_ms,
        ..Config::default()
    };
    let storage = match (&args.storage_config, &args.storage_dir) {
        (Some(path), _) => {
            let loaded = nsight_storage::StorageConfig::from_path(path)?;
            for field in &loaded.ignored_fields {
                tracing::info!(%field, "storage config field not used by this implementation");
            }
            Some(loaded.config)
        }
        (None, Some(dir)) => Some(nsight_storage::StorageConfig::Local(
            nsight_storage::config::LocalConfig { root: dir.clone() },
        )),
        (None, None) => None,
    }
    .map(|config| StorageSpec {
        config,
        public_url: args.storage_public_url.clone(),
    });
    let gateway_token =
        gateway_only::read(args.gateway_token_file.as_deref()).map_err(anyhow::Error::msg)?;
    if gateway_token.is_none() {
        tracing::warn!(
            "REST API WITHOUT --gateway-token-file: it answers any client that reaches its port"
        );
    }
    let running = serve(ServerConfig {
        http_addr: args.http,
        grpc_addr: args.grpc,
        state_dir: args.state_dir,
        agent_tls_dir: args.tls_dir,
        machine,
        storage,
        gateway_token,
        converters: Some(Converters {
            urls: args.otlp_converters,
            delay: std::time::Duration::from_millis(args.otlp_stop_delay_ms),
        }),
    })
    .await?;
    // A line tests and supervisors can wait for.
    println!(
        "nsight-coordinator ready http={} grpc={}",
        running.http_addr, running.grpc_addr
    );
    tokio::signal::ctrl_c().await?;
    Ok(())
}
