//! `nsight-tenant-operator`: the tenant API server (the NsightTenantOperator's Deployment).

use std::net::SocketAddr;

use clap::Parser;
use nsight_tenant::{core::StreamerTemplate, Config};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Launches capped, owned, idle-reaped Nsight Streamers for the Cloud UI"
)]
struct Args {
    /// REST API address (behind the gateway's /tenant/ prefix).
    #[arg(long, env = "NSIGHT_TENANT_HTTP", default_value = "0.0.0.0:8080")]
    http: SocketAddr,
    /// The namespace whose NsightStreamers it manages (its own).
    #[arg(long, env = "POD_NAMESPACE", required_unless_present = "print_openapi")]
    namespace: Option<String>,
    /// At most this many streamers at once (streamerLaunch.maxActive).
    #[arg(long, default_value_t = 10)]
    max_active: u32,
    /// A streamer neither launched nor read for this long is deleted (30m, 90s, 1h).
    #[arg(long, default_value = "30m", value_parser = nsight_tenant::core::parse_duration)]
    idle_timeout: std::time::Duration,
    /// The NsightCloudStorageConfig launched streamers read reports from.
    #[arg(long)]
    cloud_storage_ref: Option<String>,
    /// The image of launched streamers (their `spec.image`); without it the operator's default
    /// `<repository>/nsight-streamer:<tag>`.
    #[arg(long)]
    streamer_image: Option<String>,
    /// The RuntimeClass of launched streamers' Pods (their `spec.runtimeClassName`).
    #[arg(long)]
    streamer_runtime_class: Option<String>,
    /// The media ports, TURN relay and environment of launched streamers
    /// (`streamerLaunch.mediaPorts`, `turn`, `env`): a JSON object of those NsightStreamer spec
    /// fields, checked at start.
    #[arg(long, value_name = "JSON", value_parser = parse_media)]
    streamer_media: Option<nsight_api::StreamerMedia>,
    /// Answer the API only for requests that carry this file's secret in
    /// `x-nsight-gateway-token`, which the gateway adds (the operator mounts it); without it the
    /// API, and the identity header it trusts, answer any client that reaches the port.
    #[arg(long, env = "NSIGHT_GATEWAY_TOKEN_FILE", value_name = "FILE")]
    gateway_token_file: Option<std::path::PathBuf>,
    /// Print the REST API's OpenAPI document and exit.
    #[arg(long)]
    print_openapi: bool,
}

/// `--streamer-media`: the fields' shapes, then what `StreamerMedia::check` refuses.
fn parse_media(raw: &str) -> Result<nsight_api::StreamerMedia, String> {
    let media: nsight_api::StreamerMedia =
        serde_json::from_str(raw).map_err(|e| format!("not the media settings' JSON: {e}"))?;
    media.check("--streamer-media")?;
    Ok(media)
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
            serde_json::to_string_pretty(&nsight_contracts::openapi::tenant())?
        );
        return Ok(());
    }
    let Some(namespace) = args.namespace else {
        anyhow::bail!("--namespace is required");
    };
    let gateway_token = nsight_contracts::gateway_only::read(args.gateway_token_file.as_deref())
        .map_err(anyhow::Error::msg)?;
    if gateway_token.is_none() {
        tracing::warn!(
            "API WITHOUT --gateway-token-file: it answers, and trusts the identity header of, any client that reaches its port"
        );
    }
    let client = kube::Client::try_default().await?;
    let listener = tokio::net::TcpListener::bind(args.http).await?;
    tracing::info!(addr = %listener.local_addr()?, %namespace, max_active = args.max_active, idle = ?args.idle_timeout, "nsight-tenant-operator ready");
    let config = Config {
        max_active: args.max_active,
        idle: args.idle_timeout,
        template: StreamerTemplate {
            cloud_storage_ref: args.cloud_storage_ref,
            image: args.streamer_image,
            runtime_class_name: args.streamer_runtime_class,
            media: args.streamer_media.unwrap_or_default(),
        },
        gateway_token,
    };
    nsight_tenant::run(listener, client, &namespace, config).await?;
    Ok(())
}
