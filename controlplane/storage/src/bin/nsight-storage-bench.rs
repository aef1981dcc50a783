//! `nsight-storage-bench put|get --endpoint URL --bucket B --key K --file F [--sha256 HEX]`: one
//! upload or download through [`S3Store`] (multipart put from the file, with the file's known
//! digest as the agent's uploader does; parallel ranged get to the file, verified against that
//! digest), for `cargo xtask bench storage`. Credentials from `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY`. Prints `{"op":..,"bytes":..,"seconds":..}`.

use std::{path::PathBuf, time::Instant};

use anyhow::{bail, Context, Result};
use nsight_storage::{
    download::{download_to_file_with, DownloadOptions},
    PutOptions, ReportStore, S3Settings, S3Store, Secret,
};

const USAGE: &str =
    "usage: nsight-storage-bench put|get --endpoint URL --bucket B --key K --file F [--sha256 HEX] [--concurrency N]";

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let op = args.first().context(USAGE)?.clone();
    let flag = |name: &str| -> Result<String> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .with_context(|| format!("missing {name}; {USAGE}"))
    };
    let (endpoint, bucket, key) = (flag("--endpoint")?, flag("--bucket")?, flag("--key")?);
    let file = PathBuf::from(flag("--file")?);
    let access = std::env::var("AWS_ACCESS_KEY_ID").context("AWS_ACCESS_KEY_ID is not set")?;
    let secret =
        std::env::var("AWS_SECRET_ACCESS_KEY").context("AWS_SECRET_ACCESS_KEY is not set")?;
    // `--concurrency N` overrides the defaults (parts or ranges in flight), for tuning.
    let concurrency: Option<usize> = flag("--concurrency").ok().and_then(|n| n.parse().ok());
    let mut settings = S3Settings::new(&bucket, Some(&endpoint), &access, Secret::new(secret));
    let mut download = DownloadOptions::default();
    if let Some(n) = concurrency {
        settings.upload_concurrency = n;
        download.concurrency = n;
    }
    let store = S3Store::new(settings)?;
    let start = Instant::now();
    let bytes = match op.as_str() {
        "put" => {
            let options = match flag("--sha256") {
                Ok(hex) => PutOptions::with_sha256(&hex),
                Err(_) => PutOptions::default(),
            };
            store.put_file_with(&key, &file, &options).await?.size
        }
        "get" => download_to_file_with(&store, &key, &file, download).await?,
        _ => bail!(USAGE),
    };
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({"op": op, "bytes": bytes, "seconds": seconds})
    );
    Ok(())
}
