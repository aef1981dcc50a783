//! `nsight-otlp`: the OTLP converter (docs/otlp.md). Receives OTLP/HTTP and OTLP/gRPC spans,
//! buffers them on disk per session and collection, and converts a collection to reports in
//! storage when it is stopped.

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use clap::Parser;
use nsight_otlp::{
    buffer::Limits,
    converter::{Config, Converter},
};
use nsight_storage::{config::LocalConfig, StorageConfig, Store};

#[derive(Debug, Parser)]
#[command(
    name = "nsight-otlp",
    about = "The OTLP converter: spans to Nsight Systems reports"
)]
struct Args {
    /// OTLP/HTTP (and the converter's endpoints) listen here.
    #[arg(long, env = "NSIGHT_OTLP_HTTP_LISTEN", default_value = "0.0.0.0:4318")]
    http_listen: SocketAddr,
    /// OTLP/gRPC listens here; `--grpc-listen off` turns it off.
    #[arg(long, env = "NSIGHT_OTLP_GRPC_LISTEN", default_value = "0.0.0.0:4317")]
    grpc_listen: String,
    /// Span buffer, report work files and the upload spool (keep it on a persistent volume).
    #[arg(long, env = "NSIGHT_OTLP_DATA_DIR")]
    data_dir: PathBuf,
    /// Reports go to this directory (local storage).
    #[arg(long, env = "NSIGHT_OTLP_STORAGE_DIR")]
    storage_dir: Option<PathBuf>,
    /// Reports go where this storage-config.yaml says (S3 or local).
    #[arg(long, env = "NSIGHT_CLOUD_STORAGE_CONFIG_FILE")]
    storage_config: Option<PathBuf>,
    /// Largest OTLP request body (HTTP) or message (gRPC).
    #[arg(long, default_value_t = 8 << 20)]
    max_body_bytes: usize,
    /// Bound of one collection's span buffer (bytes of OTLP protobuf).
    #[arg(long, default_value_t = 256 << 20)]
    max_collection_bytes: u64,
    /// Bound of the whole span buffer.
    #[arg(long, default_value_t = 1 << 30)]
    max_total_bytes: u64,
    /// Spans arriving after their collection's stop are converted once quiet this long.
    #[arg(long, default_value_t = 2000)]
    linger_ms: u64,
}

fn store(args: &Args) -> anyhow::Result<Store> {
    let config = match (&args.storage_dir, &args.storage_config) {
        (Some(dir), _) => StorageConfig::Local(LocalConfig { root: dir.clone() }),
        (None, Some(path)) => {
            let loaded = StorageConfig::from_path(path)?;
            for field in &loaded.ignored_fields {
                tracing::warn!(field, "storage config field not used by the converter");
            }
            loaded.config
        }
        (None, None) => anyhow::bail!(
            "no report storage: give --storage-config FILE (or NSIGHT_CLOUD_STORAGE_CONFIG_FILE) \
             or --storage-dir DIR"
        ),
    };
    Ok(Store::from_config(&config)?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NSIGHT_OTLP_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let converter = Converter::open(
        Config {
            data_dir: args.data_dir.clone(),
            limits: Limits {
                max_collection_bytes: args.max_collection_bytes,
                max_total_bytes: args.max_total_bytes,
            },
            max_body_bytes: args.max_body_bytes,
            linger: Duration::from_millis(args.linger_ms),
            host,
        },
        store(&args)?,
    )
    .with_context(|| {
        format!(
            "opening the converter's data in {}",
            args.data_dir.display()
        )
    })?;
    tokio::spawn(Arc::clone(&converter).run_background(Duration::from_millis(500)));
    if args.grpc_listen != "off" {
        let addr: SocketAddr = args
            .grpc_listen
            .parse()
            .with_context(|| format!("--grpc-listen {}", args.grpc_listen))?;
        let service = nsight_otlp::grpc::server(Arc::clone(&converter));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding OTLP/gRPC to {addr}"))?;
        tracing::info!(addr = %listener.local_addr()?, "OTLP/gRPC listening");
        tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            if let Err(e) = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await
            {
                tracing::error!(error = %e, "the OTLP/gRPC server stopped");
            }
        });
    }
    let listener = tokio::net::TcpListener::bind(args.http_listen)
        .await
        .with_context(|| format!("binding OTLP/HTTP to {}", args.http_listen))?;
    tracing::info!(addr = %listener.local_addr()?, "OTLP/HTTP listening");
    axum::serve(listener, nsight_otlp::http::router(converter)).await?;
    Ok(())
}
