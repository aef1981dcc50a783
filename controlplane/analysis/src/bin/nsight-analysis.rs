//! `nsight-analysis`: the analysis service (recipes as jobs over the reports in storage).

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::Parser;
use nsight_analysis::{
    service::{serve, ServiceConfig},
    Limits, QueryLimits,
};
use nsight_contracts::gateway_only;
use nsight_storage::{LocalStore, StorageConfig, Store};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Runs analysis recipes over profiling reports in storage"
)]
struct Args {
    /// REST API address (behind the gateway's /analysis/ prefix).
    #[arg(long, env = "NSIGHT_ANALYSIS_HTTP", default_value = "0.0.0.0:8090")]
    http: SocketAddr,
    /// Directory for the durable job records (a volume in a cluster). Without it, jobs are
    /// forgotten on exit.
    #[arg(long, env = "NSIGHT_ANALYSIS_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// The compiled recipes: every *.wasm in this directory.
    #[arg(
        long,
        env = "NSIGHT_ANALYSIS_RECIPES_DIR",
        required_unless_present = "print_openapi"
    )]
    recipes_dir: Option<PathBuf>,
    /// storage-config.yaml (S3 or local), as the operator's storage secret.
    #[arg(
        long,
        env = "NSIGHT_CLOUD_STORAGE_CONFIG_FILE",
        conflicts_with = "storage_dir"
    )]
    storage_config: Option<PathBuf>,
    /// A local directory store instead of --storage-config.
    #[arg(long)]
    storage_dir: Option<PathBuf>,
    /// Jobs running at once; more wait in the queue.
    #[arg(long, default_value_t = 2)]
    max_concurrent_jobs: usize,
    /// Wasm fuel (roughly, instructions) per recipe run.
    #[arg(long, default_value_t = Limits::default().fuel)]
    fuel: u64,
    /// Linear memory per recipe instance, in MiB.
    #[arg(long, default_value_t = 512)]
    memory_mib: usize,
    /// Longest single call into SQLite (a prepare or one batch) before it is interrupted.
    #[arg(long, default_value_t = 60)]
    query_timeout_secs: u64,
    /// Memory SQLite may hold for all queries together, in MiB (the `sql` recipe's queries run
    /// in this process, outside the recipes' own memory limit); a query past it fails with the
    /// limit named.
    #[arg(long, default_value_t = 1024)]
    sqlite_memory_mib: u64,
    /// Answer the REST API only for requests that carry this file's secret in
    /// `x-nsight-gateway-token`, which the gateway adds (docs/security.md); without it the API
    /// answers any client that reaches the port.
    #[arg(long, env = "NSIGHT_GATEWAY_TOKEN_FILE", value_name = "FILE")]
    gateway_token_file: Option<PathBuf>,
    /// Print the REST API's OpenAPI document and exit.
    #[arg(long)]
    print_openapi: bool,
}

fn store(args: &Args) -> anyhow::Result<Store> {
    match (&args.storage_config, &args.storage_dir) {
        (Some(path), _) => {
            let loaded = StorageConfig::from_path(path)?;
            for field in &loaded.ignored_fields {
                tracing::warn!(field, "storage config field ignored");
            }
            Ok(Store::from_config(&loaded.config)?)
        }
        (None, Some(dir)) => {
            nsight_storage::private::create_dir_all(dir)?;
            Ok(Store::Local(LocalStore::open(dir)?))
        }
        (None, None) => anyhow::bail!(
            "no storage: pass --storage-config FILE (storage-config.yaml) or --storage-dir DIR"
        ),
    }
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
            serde_json::to_string_pretty(&nsight_analysis::service::openapi::document())?
        );
        return Ok(());
    }
    let Some(recipes_dir) = args.recipes_dir.clone() else {
        anyhow::bail!("pass --recipes-dir DIR (the compiled recipes, *.wasm)");
    };
    nsight_recipe_host::limit_sqlite_heap(args.sqlite_memory_mib.saturating_mul(1 << 20));
    let limits = Limits {
        fuel: args.fuel,
        memory_bytes: args.memory_mib.saturating_mul(1 << 20),
        query: QueryLimits {
            call_time: Duration::from_secs(args.query_timeout_secs),
            ..QueryLimits::default()
        },
    };
    let gateway_token =
        gateway_only::read(args.gateway_token_file.as_deref()).map_err(anyhow::Error::msg)?;
    if gateway_token.is_none() {
        tracing::warn!(
            "REST API WITHOUT --gateway-token-file: it answers any client that reaches its port"
        );
    }
    let running = serve(ServiceConfig {
        http_addr: args.http,
        state_dir: args.state_dir.clone(),
        recipes_dir,
        store: store(&args)?,
        max_concurrent_jobs: args.max_concurrent_jobs,
        limits,
        gateway_token,
    })
    .await
    .map_err(|e| anyhow::anyhow!(nsight_analysis::service::error_chain(&e)))?;
    // A line tests and supervisors can wait for.
    println!(
        "nsight-analysis ready http={} recipes={}",
        running.http_addr,
        running.recipes.join(",")
    );
    tokio::signal::ctrl_c().await?;
    Ok(())
}
