//! `nsight-coordinator`: the coordinator server (REST for users, gRPC for agents).

use std::{net::SocketAddr, path::PathBuf};

use clap::Parser;
use nsight_coordinator::{
    server::{serve, ServerConfig},
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
    let running = serve(ServerConfig {
        http_addr: args.http,
        grpc_addr: args.grpc,
        state_dir: args.state_dir,
        agent_tls_dir: args.tls_dir,
        machine,
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
