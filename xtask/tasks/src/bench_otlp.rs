//! `cargo xtask bench otlp [SPANS]`: the OTLP converter end to end (release builds): N spans
//! (default 1,000,000) sent by `nsight-otlp-load` over OTLP/HTTP protobuf in batches of 1,000
//! from 4 threads to one `nsight-otlp` on loopback, each request acknowledged only once fsynced
//! in the span log; then the collection's stop converts them to a SQLite report and stores it
//! (local directory storage). Prints spans/s acknowledged, the stop's time, spans/s end to end,
//! and the converter's memory (RSS before, with the spans buffered on disk, and its peak, which
//! the conversion sets).

use std::process::Command;

use anyhow::{bail, Context, Result};
use nsight_e2e::{free_port, process::Running, wait_for_tcp, TempDir};

use crate::{bench::build_release, paths::Layout};

pub fn otlp(layout: &Layout, spans: u64) -> Result<()> {
    let bin = build_release(
        layout,
        &[
            "-p",
            "nsight-otlp",
            "--bin",
            "nsight-otlp",
            "--bin",
            "nsight-otlp-load",
        ],
    )?;
    let dir = TempDir::new("bench-otlp");
    let port = free_port();
    let mut cmd = Command::new(bin.join("nsight-otlp"));
    cmd.args(["--http-listen", &format!("127.0.0.1:{port}")])
        .args(["--grpc-listen", "off"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--storage-dir")
        .arg(dir.path().join("storage"))
        .args(["--max-collection-bytes", "8589934592"])
        .args(["--max-total-bytes", "8589934592"])
        .env("NSIGHT_OTLP_LOG", "warn");
    let converter = Running::spawn("nsight-otlp", cmd, &dir.path().join("converter.log"));
    if !wait_for_tcp(
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        std::time::Duration::from_secs(30),
    ) {
        bail!("the converter did not listen: {}", converter.log());
    }
    let load = Command::new(bin.join("nsight-otlp-load"))
        .args(["--endpoint", &format!("http://127.0.0.1:{port}")])
        .args(["--spans", &spans.to_string()])
        .args(["--converter-pid", &converter.pid().to_string()])
        .output()
        .context("running nsight-otlp-load")?;
    if !load.status.success() {
        bail!(
            "nsight-otlp-load failed: {}{}\nconverter: {}",
            String::from_utf8_lossy(&load.stdout),
            String::from_utf8_lossy(&load.stderr),
            converter.log()
        );
    }
    let line = String::from_utf8_lossy(&load.stdout);
    let f: serde_json::Value = serde_json::from_str(line.trim()).context("the load's figures")?;
    let num = |k: &str| f[k].as_f64().unwrap_or(f64::NAN);
    let per_million = (num("rss_buffered_mib") - num("rss_before_mib")) * 1e6 / num("spans");
    println!(
        "cargo xtask bench otlp {spans}  (load average {})",
        crate::bench::load_average()
    );
    println!(
        "  {} spans, {:.0} bytes/span of OTLP protobuf, batches of {}, {} sending threads",
        f["spans"],
        num("bytes_per_span"),
        f["batch"],
        f["concurrency"]
    );
    println!(
        "  acknowledged (fsynced): {:.0} spans/s ({:.2} s)",
        num("ingest_spans_per_s"),
        num("ingest_s")
    );
    println!(
        "  stop (convert + SQLite + store): {:.2} s, {:.0} spans/s",
        num("stop_s"),
        num("convert_spans_per_s")
    );
    println!("  end to end: {:.0} spans/s", num("end_to_end_spans_per_s"));
    println!(
        "  converter RSS: {:.1} MiB at start, {:.1} MiB with the spans buffered ({:.1} MiB per \
         million buffered spans), peak {:.1} MiB (the conversion)",
        num("rss_before_mib"),
        num("rss_buffered_mib"),
        per_million,
        num("rss_peak_mib")
    );
    Ok(())
}
