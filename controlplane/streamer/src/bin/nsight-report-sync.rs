//! `nsight-report-sync`: a streamer Pod's init container. Copies the reports of one session
//! (or one report and its SQLite export) from the namespace's storage into the Pod's reports
//! volume, each file checked against the size the listing gave, then writes the manifest
//! (`.nsight-sync.json`). Exits non-zero with the reason when storage cannot be read, so the
//! Pod shows `Init:Error` and the streamer is not Ready, instead of a GUI with missing files.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use clap::Parser;
use nsight_storage::{ReportStore as _, StorageConfig, Store};
use nsight_streamer::{plan, Manifest, SyncItem, MANIFEST};
use tokio::io::AsyncWriteExt as _;

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Copies a session's reports from storage into a streamer Pod"
)]
struct Args {
    /// The storage config (`storage-config.yaml`) the operator mounts.
    #[arg(long, env = "NSIGHT_CLOUD_STORAGE_CONFIG_FILE", value_name = "FILE")]
    storage_config: PathBuf,
    /// The session whose reports to copy.
    #[arg(long, env = "NSIGHT_SESSION_ID")]
    session: String,
    /// Only this report (its object key) and its SQLite export.
    #[arg(long, env = "NSIGHT_REPORT")]
    report: Option<String>,
    /// The reports volume.
    #[arg(long, env = "NSIGHT_REPORTS_DIR", default_value = "/reports")]
    dest: PathBuf,
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let loaded = StorageConfig::from_path(&args.storage_config)?;
    let store = Store::from_config(&loaded.config)?;
    let listing = store
        .list("")
        .await
        .with_context(|| format!("cannot list the reports in {}", store.describe()))?;
    let items = plan(&listing, &args.session, args.report.as_deref())?;
    let mut total = 0u64;
    for item in &items {
        copy(&store, item, &args.dest).await?;
        total += item.bytes;
    }
    let manifest = Manifest {
        session_id: args.session.clone(),
        report: args.report.clone(),
        files: items,
    };
    let path = args.dest.join(MANIFEST);
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    if manifest.files.is_empty() {
        tracing::warn!(session = %args.session, store = %store.describe(), "the session has no report in storage yet: nothing to open");
    }
    tracing::info!(session = %args.session, files = manifest.files.len(), bytes = total, dest = %args.dest.display(), "reports synced");
    Ok(())
}

/// Streams one object to `<dest>/<path>` through a temporary name, renamed once every byte
/// the listing announced has arrived (a shorter or longer object fails the sync).
async fn copy(store: &Store, item: &SyncItem, dest: &Path) -> Result<()> {
    let Some(target) = nsight_storage::layout::join_under(dest, &item.path) else {
        bail!(
            "refusing to write {} outside {}",
            item.path.display(),
            dest.display()
        );
    };
    if let Some(dir) = target.parent() {
        tokio::fs::create_dir_all(dir)
            .await
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let partial = target.with_extension("partial");
    let mut reader = store
        .get(&item.key, None)
        .await
        .with_context(|| format!("cannot read {} from {}", item.key, store.describe()))?;
    let mut file = tokio::fs::File::create(&partial)
        .await
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let written = tokio::io::copy(&mut reader, &mut file)
        .await
        .with_context(|| format!("copying {} to {}", item.key, partial.display()))?;
    file.flush().await?;
    file.sync_all().await?;
    if written != item.bytes {
        let _ = tokio::fs::remove_file(&partial).await;
        bail!(
            "{} arrived with {written} bytes, but the listing said {}; run the sync again",
            item.key,
            item.bytes
        );
    }
    tokio::fs::rename(&partial, &target)
        .await
        .with_context(|| format!("cannot rename {} into place", partial.display()))?;
    tracing::info!(key = %item.key, path = %item.path.display(), bytes = written, "copied");
    Ok(())
}
