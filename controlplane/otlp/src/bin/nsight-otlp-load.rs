//! `nsight-otlp-load`: the load generator of `cargo xtask bench otlp`. Encodes N spans in
//! OTLP/HTTP protobuf batches (before the clock starts), sends them to a converter from several
//! threads, stops the collection, and prints one JSON line of figures: spans acknowledged per
//! second (fsynced), the stop's conversion time, end-to-end spans per second, and the
//! converter's memory (from /proc) before, after buffering and at its peak.

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Instant,
};

use anyhow::{bail, Context as _};
use clap::Parser;
use nsight_otlp::proto::{
    collector::ExportTraceServiceRequest,
    common::{any_value::Value, AnyValue, KeyValue},
    resource::Resource,
    trace::{ResourceSpans, ScopeSpans, Span},
};
use prost::Message;

#[derive(Debug, Parser)]
struct Args {
    /// The converter's OTLP/HTTP base URL.
    #[arg(long)]
    endpoint: String,
    #[arg(long, default_value_t = 1_000_000)]
    spans: usize,
    /// Spans per request.
    #[arg(long, default_value_t = 1_000)]
    batch: usize,
    /// Sending threads.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// The converter's pid, to read its memory.
    #[arg(long)]
    converter_pid: Option<u32>,
}

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn text(v: &str) -> Value {
    Value::StringValue(v.into())
}

/// One request of `n` spans starting at span number `first`: 4 threads, nested in pairs,
/// 16 names, an NVTX domain and payload on each, as the agent's mirroring would send them.
fn batch(first: usize, n: usize) -> Vec<u8> {
    let t0: u64 = 1_780_000_000_000_000_000;
    let spans = (first..first + n)
        .map(|i| {
            let at = t0 + (i as u64 / 2) * 10_000;
            let (start, end) = if i % 2 == 0 {
                (at, at + 9_000)
            } else {
                (at + 1_000, at + 5_000)
            };
            Span {
                trace_id: vec![1; 16],
                span_id: (i as u64 + 1).to_le_bytes().to_vec(),
                name: format!("step-{}", i % 16),
                start_time_unix_nano: start,
                end_time_unix_nano: end,
                attributes: vec![
                    kv("thread.id", Value::IntValue(1000 + (i as i64 / 2) % 4)),
                    kv("nvtx.domain", text("bench")),
                    kv("nvtx.payload", Value::IntValue(i as i64)),
                ],
                ..Default::default()
            }
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    kv("nsight.session", text("bench")),
                    kv("nsight.collection", text("1")),
                    kv("service.name", text("bench")),
                    kv("process.pid", Value::IntValue(4242)),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// (VmRSS, VmHWM) in MiB of `pid`.
fn memory(pid: Option<u32>) -> (f64, f64) {
    let Some(status) = pid.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
    else {
        return (0.0, 0.0);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let batches: Vec<Vec<u8>> = (0..args.spans.div_ceil(args.batch))
        .map(|b| {
            let first = b * args.batch;
            batch(first, args.batch.min(args.spans - first))
        })
        .collect();
    let bytes: usize = batches.iter().map(Vec::len).sum();
    let url = format!("{}/v1/traces", args.endpoint);
    let (rss_before, _) = memory(args.converter_pid);
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let workers: Vec<_> = (0..args.concurrency)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<()> {
                    let client = reqwest::blocking::Client::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(body) = batches.get(i) else {
                            return Ok(());
                        };
                        let r = client
                            .post(&url)
                            .header("Content-Type", "application/x-protobuf")
                            .body(body.clone())
                            .send()
                            .context("sending a batch")?;
                        if !r.status().is_success() {
                            bail!("batch {i}: {} {}", r.status(), r.text().unwrap_or_default());
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("a sender panicked"))??;
        }
        Ok(())
    })?;
    let ingest = started.elapsed().as_secs_f64();
    let (rss_buffered, _) = memory(args.converter_pid);
    let stop_started = Instant::now();
    let r = reqwest::blocking::Client::new()
        .post(format!("{}/v1/collections/bench/1/stop", args.endpoint))
        .timeout(std::time::Duration::from_secs(3600))
        .send()?;
    let status = r.status();
    let answer: serde_json::Value = r.json().context("the stop's answer")?;
    let stop = stop_started.elapsed().as_secs_f64();
    if !status.is_success() || answer["spans"].as_u64() != Some(args.spans as u64) {
        bail!(
            "the stop converted {answer} ({status}), not {} spans",
            args.spans
        );
    }
    let (_, peak) = memory(args.converter_pid);
    let spans = args.spans as f64;
    println!(
        "{}",
        serde_json::json!({
            "spans": args.spans,
            "batch": args.batch,
            "concurrency": args.concurrency,
            "bytes_per_span": bytes as f64 / spans,
            "ingest_s": ingest,
            "ingest_spans_per_s": spans / ingest,
            "stop_s": stop,
            "convert_spans_per_s": spans / stop,
            "end_to_end_spans_per_s": spans / (ingest + stop),
            "rss_before_mib": rss_before,
            "rss_buffered_mib": rss_buffered,
            "rss_peak_mib": peak,
            "reports": answer["reports"],
        })
    );
    Ok(())
}
