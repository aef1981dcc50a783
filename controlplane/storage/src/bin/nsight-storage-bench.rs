//! `nsight-storage-bench put|get --endpoint URL --bucket B --key K --file F`: one upload or
//! download through [`S3Store`] (multipart put from the file; streaming get to the file), for
//! `cargo xtask bench storage`. Credentials from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`.
//! Prints `{"op":..,"bytes":..,"seconds":..}`.

use std::{path::PathBuf, time::Instant};

use anyhow::{bail, Context, Result};
use nsight_storage::{download::download_to_file, ReportStore, S3Settings, S3Store, Secret};

const USAGE: &str =
    "usage: nsight-storage-bench put|get --endpoint URL --bucket B --key K --file F";

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
    let store = S3Store::new(S3Settings::new(
        &bucket,
        Some(&endpoint),
        &access,
        Secret::new(secret),
    ))?;
    let start = Instant::now();
    let bytes = match op.as_str() {
        "put" => store.put_file(&key, &file).await?.size,
        "get" => download_to_file(&store, &key, &file).await?,
        _ => bail!(USAGE),
    };
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({"op": op, "bytes": bytes, "seconds": seconds})
    );
    Ok(())
}
