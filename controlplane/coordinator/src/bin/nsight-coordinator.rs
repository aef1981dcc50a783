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
    let machine = Config {
        heartbeat_timeout_ms: args.heartbeat_timeout_ms,
        upload_timeout_ms: args.upload_timeout_ms,
        ..Config::default()
    };
    let running = serve(ServerConfig {
        http_addr: args.http,
        grpc_addr: args.grpc,
        state_dir: args.state_dir,
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
