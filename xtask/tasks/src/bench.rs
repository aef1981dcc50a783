//! `cargo xtask bench <name>`: benchmarks against real processes, printing the figures that go
//! into docs/benchmarks.md together with the command that produced them.
//!
//! `coordinator`: N simulated agents (real protocol, mutual TLS, a separate process) connected
//! to one release-built coordinator on loopback; measures START delivery to every agent, the time
//! until the coordinator has every acknowledgement, the coordinator's RSS, and REST status
//! latency while the agents are connected.
//!
//! `storage`: our S3 upload and download against the aws CLI (see `bench_storage.rs`).
//!
//! `auth`: no auth vs our Wasm API-key and JWT filters vs Envoy's jwt_authn (see `bench_auth.rs`).
//!
//! `recipes`: `cuda_gpu_kern_sum` through the Wasm host against sqlite3 and pandas (see
//! `bench_recipes.rs`).
//!
//! `otlp`: spans per second through the OTLP converter, ingest to stored report (see
//! `bench_otlp.rs`); `otlp-mirror`: what the agent's NVTX mirroring costs the profiled program
//! (see `bench_otlp_mirror.rs`).
//!
//! `ui`: the Cloud UI's size, first render and long lists in headless Chromium (see
//! `bench_ui.rs`).

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::Command,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, Context, Result};
use nsight_e2e::{free_port, http, process::Running, wait_for, wait_for_tcp, TempDir};

use crate::{cmd::run as run_cmd, paths::Layout, runner_layout::RunnerLayout};

/// `cargo build --release <args>` in the host target dir; the directory the binaries land in.
pub(crate) fn build_release(layout: &Layout, args: &[&str]) -> Result<PathBuf> {
    run_cmd(
        Command::new("cargo")
            .current_dir(&layout.root)
            .env("CARGO_TARGET_DIR", layout.host_target())
            .args(["build", "--release"])
            .args(args),
    )?;
    Ok(layout.host_target().join("release"))
}

pub fn run(layout: &Layout, args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("coordinator") => {
            let (agents, bin_dir) = coordinator_args(&args[1..])?;
            coordinator(layout, agents, bin_dir)
        }
        Some("storage") => {
            let size_mib = args
                .get(1)
                .map(|n| n.parse::<u64>())
                .transpose()
                .context("SIZE_MIB must be a number")?
                .unwrap_or(1024);
            crate::bench_storage::storage(layout, size_mib)
        }
        Some("gateway") => crate::bench_gateway::gateway(),
        Some("auth") => crate::bench_auth::auth(layout),
        Some("nvtx") => crate::bench_nvtx::nvtx(layout),
        Some("webhook") => crate::bench_webhook::webhook(layout),
        Some("operator") => crate::bench_operator::operator(layout),
        Some("timeline") => {
            let events = args
                .get(1)
                .map(|n| n.parse::<u64>())
                .transpose()
                .context("EVENTS must be a number")?
                .unwrap_or(10_000_000);
            crate::bench_timeline::timeline(layout, events)
        }
        Some("otlp") => {
            let spans = args
                .get(1)
                .map(|n| n.parse::<u64>())
                .transpose()
                .context("SPANS must be a number")?
                .unwrap_or(1_000_000);
            crate::bench_otlp::otlp(layout, spans)
        }
        Some("otlp-mirror") => {
            let pairs = args
                .get(1)
                .map(|n| n.parse::<u64>())
                .transpose()
                .context("PAIRS must be a number")?
                .unwrap_or(200_000);
            crate::bench_otlp_mirror::otlp_mirror(layout, pairs)
        }
        Some("ui") => {
            let count = |i: usize, what: &str, default: usize| -> Result<usize> {
                args.get(i)
                    .map(|n| n.parse::<usize>())
                    .transpose()
                    .with_context(|| format!("{what} must be a number"))
                    .map(|n| n.unwrap_or(default))
            };
            crate::bench_ui::ui(
                layout,
                count(1, "SESSIONS", 1_000)?,
                count(2, "JOBS", 10_000)?,
            )
        }
        Some("recipes") => {
            let (rows, runner) = recipes_args(&args[1..])?;
            crate::bench_recipes::recipes(layout, rows, runner)
        }
        _ => bail!(
            "usage: cargo xtask bench coordinator [AGENTS] [--bin-dir DIR] | storage [SIZE_MIB] \
             | gateway | nvtx | recipes [ROWS] [--layout plain|static|ordered] | timeline [EVENTS] | webhook | operator | auth \
             | otlp [SPANS] | otlp-mirror [PAIRS] | ui [SESSIONS] [JOBS]"
        ),
    }
}

/// `[AGENTS] [--bin-dir DIR]`: `--bin-dir` runs the `nsight-coordinator` and `nsight-agent-sim`
/// found there instead of building them (to compare another build in the same conditions).
fn coordinator_args(args: &[String]) -> Result<(u32, Option<PathBuf>)> {
    let mut agents = 10_000;
    let mut bin_dir = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--bin-dir" {
            let dir = rest.next().context("--bin-dir needs a directory")?;
            bin_dir = Some(PathBuf::from(dir));
        } else {
            agents = arg
                .parse()
                .with_context(|| format!("agent count must be a number, not `{arg}`"))?;
        }
    }
    Ok((agents, bin_dir))
}

/// `[ROWS] [--layout plain|static|ordered]` (default 10,000,000 rows, the ordered runner).
fn recipes_args(args: &[String]) -> Result<(u64, RunnerLayout)> {
    let mut rows = 10_000_000;
    let mut runner = RunnerLayout::Ordered;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--layout" {
            runner = RunnerLayout::parse(rest.next().context("--layout needs a value")?)?;
        } else {
            rows = arg
                .parse()
                .with_context(|| format!("ROWS must be a number, not `{arg}`"))?;
        }
    }
    Ok((rows, runner))
}

/// The load average over 1, 5 and 15 minutes, as /proc/loadavg prints it.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64)).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn rss_mb(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn get_json(addr: SocketAddr, path: &str) -> Result<serde_json::Value> {
    let r = http::get(addr, path, &[])?;
    if r.status != 200 {
        bail!("GET {path}: {} {}", r.status, r.body);
    }
    Ok(serde_json::from_str(&r.body)?)
}

fn coordinator(layout: &Layout, agents: u32, bin_dir: Option<PathBuf>) -> Result<()> {
    let bin = match bin_dir {
        Some(dir) => dir,
        None => build_release(layout, &["-p", "nsight-coordinator", "-p", "nsight-agent"])?,
    };
    let load_before = load_average();
    let dir = TempDir::new("bench-coordinator");
    let http_addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let grpc_addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let tls = dir.path().join("tls");
    let mut c = Command::new(bin.join("nsight-coordinator"));
    c.arg("--http")
        .arg(http_addr.to_string())
        .arg("--grpc")
        .arg(grpc_addr.to_string())
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--tls-dir")
        .arg(&tls)
        .args(["--generate-local-certs", "--heartbeat-timeout-ms", "60000"])
        .env("RUST_LOG", "warn");
    let coordinator = Running::spawn("nsight-coordinator", c, &dir.path().join("coordinator.log"));
    if !wait_for_tcp(http_addr, Duration::from_secs(30)) {
        bail!("coordinator did not start: {}", coordinator.log());
    }
    let pid = coordinator.pid();

    let events = dir.path().join("events.jsonl");
    let mut sim = Command::new(bin.join("nsight-agent-sim"));
    sim.arg("--coordinator")
        .arg(format!("https://{grpc_addr}"))
        .arg("--tls-dir")
        .arg(&tls)
        .arg("--count")
        .arg(agents.to_string())
        .args(["--ramp-us", "1000"]);
    let _sims = Running::spawn("nsight-agent-sim", sim, &events);

    let connect_start = Instant::now();
    let connected = wait_for(Duration::from_secs(600), || {
        let status = get_json(http_addr, "/v1/status?tag=default&limit=0").ok()?;
        let n = status["agentCounts"]["connected"].as_u64().unwrap_or(0);
        (n >= u64::from(agents)).then_some(())
    });
    if connected.is_none() {
        bail!(
            "not all {agents} agents connected; see {}",
            coordinator.log()
        );
    }
    let connect_secs = connect_start.elapsed().as_secs_f64();
    let rss_connected = rss_mb(pid, "VmRSS:");

    // REST status latency with every agent connected.
    let mut status_ms: Vec<f64> = (0..200)
        .map(|_| {
            let t = Instant::now();
            let ok = get_json(http_addr, "/v1/status?tag=default").is_ok();
            (ok, t.elapsed().as_secs_f64() * 1000.0)
        })
        .filter(|(ok, _)| *ok)
        .map(|(_, ms)| ms)
        .collect();
    status_ms.sort_by(f64::total_cmp);

    // START broadcast: from the REST call to each agent receiving it, and to all acknowledged.
    let t0 = now_ms();
    let t0_instant = Instant::now();
    let r = http::post_json(http_addr, "/v1/start", r#"{"tag":"default"}"#)?;
    if r.status != 200 {
        bail!("start failed: {} {}", r.status, r.body);
    }
    let all_acked = wait_for(Duration::from_secs(120), || {
        let status = get_json(http_addr, "/v1/status?tag=default&limit=0").ok()?;
        let acked = status["activeCollection"]["outcomeCounts"]["started"]
            .as_u64()
            .unwrap_or(0);
        (acked >= u64::from(agents)).then(|| t0_instant.elapsed().as_secs_f64() * 1000.0)
    })
    .context("not every agent acknowledged START within 120 s")?;
    let text = std::fs::read_to_string(&events)?;
    let mut delivery: Vec<f64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "started")
        .filter_map(|e| e["atMs"].as_u64())
        .map(|at| at.saturating_sub(t0) as f64)
        .collect();
    delivery.sort_by(f64::total_cmp);
    let rss_peak = rss_mb(pid, "VmHWM:");

    println!("\ncoordinator benchmark: {agents} agents (mutual TLS, separate process), loopback, 2 cores");
    println!("  binaries                          {}", bin.display());
    println!(
        "  load average (1/5/15 min)         {load_before} at start, {} at the end",
        load_average()
    );
    println!(
        "  all agents connected after        {connect_secs:.1} s (ramped: one new agent per ms)"
    );
    println!(
        "  START delivered to agents (ms)    p50 {:.0}  p99 {:.0}  max {:.0}  (n={})",
        percentile(&delivery, 50.0),
        percentile(&delivery, 99.0),
        percentile(&delivery, 100.0),
        delivery.len()
    );
    println!("  all {agents} acks recorded after   {all_acked:.0} ms (status polled)");
    println!(
        "  GET /v1/status (default limit: 100 agents listed, counts of all), 200 calls (ms): p50 {:.1}  p99 {:.1}  max {:.1}",
        percentile(&status_ms, 50.0),
        percentile(&status_ms, 99.0),
        percentile(&status_ms, 100.0)
    );
    println!("  coordinator RSS connected {rss_connected:.0} MB, peak {rss_peak:.0} MB");
    Ok(())
}
