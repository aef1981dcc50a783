//! `cargo xtask bench gateway`: the gateway control plane with a real Envoy and real ADS
//! clients, in three parts.
//!
//! - propagation: 100 successive IR changes, each adding a route; the time from `set_ir` until
//!   the new route answers through Envoy (polled every millisecond).
//! - fan-out: 200 concurrent ADS streams (tonic clients speaking the real SotW protocol, ACKing
//!   like Envoy) receive a 500-route update; the time from `set_ir` to each stream having the
//!   response, and the process CPU time per push.
//! - overhead: wrk against an upstream directly and through Envoy (req/s, p99).
//!
//! The ADS server and clients run in this process (xtask's dev profile), Envoy is the venv's
//! release build.

use std::{
    net::SocketAddr,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use nsight_e2e::{
    free_port,
    gateway::{named_upstream, LocalGateway},
    http,
};
use nsight_gateway::{
    bootstrap::AdsFlavor,
    cache::node_id,
    client::SotwClient,
    ir::{GatewayIr, Route},
    resources::ResourceType,
    server::XdsServer,
};

const WRK: &str = "/usr/bin/wrk";

pub fn gateway() -> Result<()> {
    let coordinator = named_upstream("coordinator");
    let ui = named_upstream("ui");
    let port = free_port();
    let base = GatewayIr::local()
        .listen("127.0.0.1", port, free_port())
        .coordinator(coordinator)
        .ui(ui)
        .build()?;
    let node = node_id::gateway("bench", "gw");
    let gw = LocalGateway::start(&node, AdsFlavor::Sotw);
    gw.xds().set_ir(&node, &base)?;
    gw.runtime
        .block_on(gw.envoy.wait_ready(Duration::from_secs(30)))
        .context("Envoy did not become ready")?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();

    let propagation = propagation(&gw, &node, &base, addr)?;
    let (fanout, cpu_ms_per_push, cpu_ms_total) = fan_out(&gw.runtime, 200, 500, 10)?;
    let direct = wrk(coordinator, "/coordinator/x")?;
    let through = wrk(addr, "/coordinator/x")?;

    println!("\ngateway benchmark (loopback, 2 cores shared)");
    println!(
        "  propagation IR change -> new route answers through Envoy, 100 changes (ms): p50 {:.1}  p99 {:.1}  max {:.1}  (target p99 < 200)",
        percentile(&propagation, 50.0),
        percentile(&propagation, 99.0),
        percentile(&propagation, 100.0)
    );
    println!(
        "  fan-out 200 ADS streams, 500-route update, 10 rounds (ms): p50 {:.1}  p99 {:.1}  max {:.1}  (target p99 < 250)",
        percentile(&fanout, 50.0),
        percentile(&fanout, 99.0),
        percentile(&fanout, 100.0)
    );
    println!(
        "  fan-out CPU (server + 200 clients in one process): {cpu_ms_total:.0} ms per round, {cpu_ms_per_push:.2} ms per push"
    );
    println!(
        "  wrk direct to upstream: {:.0} req/s, p99 {:.2} ms",
        direct.0, direct.1
    );
    println!(
        "  wrk through Envoy:      {:.0} req/s, p99 {:.2} ms",
        through.0, through.1
    );
    Ok(())
}

fn propagation(
    gw: &LocalGateway,
    node: &str,
    base: &GatewayIr,
    addr: SocketAddr,
) -> Result<Vec<f64>> {
    let mut ir = base.clone();
    let mut samples = Vec::new();
    for i in 0..100 {
        let prefix = format!("/p{i}/");
        let want = format!("coordinator {prefix}x");
        let listener = ir.listener_mut("gateway").context("no gateway listener")?;
        listener
            .routes
            .insert(0, Route::api(&prefix, "coordinator"));
        let path = format!("{prefix}x");
        let start = Instant::now();
        gw.xds().set_ir(node, &ir)?;
        loop {
            if let Ok(r) = http::get(addr, &path, &[]) {
                if r.body == want {
                    break;
                }
            }
            if start.elapsed() > Duration::from_secs(10) {
                bail!("route {prefix} did not answer within 10 s");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        samples.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples)
}

fn ir_with_routes(n: usize, round: usize) -> Result<GatewayIr> {
    let mut ir = GatewayIr::local()
        .listen("127.0.0.1", 1, 2)
        .coordinator(([127, 0, 0, 1], 3).into())
        .build()?;
    let listener = ir.listener_mut("gateway").context("no gateway listener")?;
    for i in 0..n {
        listener
            .routes
            .push(Route::api(&format!("/r{round}/{i}/"), "coordinator"));
    }
    Ok(ir)
}

/// Process CPU time (user + system) in milliseconds, from /proc/self/stat.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the `)`.
    (ticks(11) + ticks(12)) * 10.0
}

fn fan_out(
    rt: &tokio::runtime::Runtime,
    streams: usize,
    routes: usize,
    rounds: usize,
) -> Result<(Vec<f64>, f64, f64)> {
    rt.block_on(async move {
        let xds = XdsServer::serve(([127, 0, 0, 1], 0).into()).await?;
        let node = node_id::gateway("bench", "fanout");
        xds.set_ir(&node, &ir_with_routes(routes, 0)?)?;
        let names = ["gateway-routes"];
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(streams);
        let (got_tx, mut got_rx) = tokio::sync::mpsc::channel::<Instant>(streams * rounds);
        let mut tasks = Vec::new();
        for _ in 0..streams {
            let mut client = SotwClient::connect(xds.local_addr(), &node).await?;
            let (ready_tx, got_tx) = (ready_tx.clone(), got_tx.clone());
            tasks.push(tokio::spawn(async move {
                client.subscribe(ResourceType::Route, &names).await?;
                let first = client.next().await?;
                client.ack(&first, &names).await?;
                let _ = ready_tx.send(()).await;
                for _ in 0..rounds {
                    let r = client.next().await?;
                    let _ = got_tx.send(Instant::now()).await;
                    client.ack(&r, &names).await?;
                }
                Ok::<(), nsight_gateway::client::ClientError>(())
            }));
        }
        for _ in 0..streams {
            ready_rx
                .recv()
                .await
                .context("a client failed before its first ACK")?;
        }
        let mut latencies = Vec::new();
        let mut cpu_total = 0.0;
        for round in 1..=rounds {
            let ir = ir_with_routes(routes, round)?;
            tokio::time::sleep(Duration::from_millis(100)).await;
            let cpu_before = cpu_ms();
            let start = Instant::now();
            xds.set_ir(&node, &ir)?;
            for _ in 0..streams {
                let at = tokio::time::timeout(Duration::from_secs(30), got_rx.recv())
                    .await
                    .context("a stream did not receive the update within 30 s")?
                    .context("clients ended")?;
                latencies.push(at.duration_since(start).as_secs_f64() * 1000.0);
            }
            cpu_total += cpu_ms() - cpu_before;
        }
        for t in tasks {
            t.await??;
        }
        latencies.sort_by(f64::total_cmp);
        let per_round = cpu_total / rounds as f64;
        Ok((latencies, per_round / streams as f64, per_round))
    })
}

/// Runs wrk for 10 s (2 threads, 32 connections); returns (req/s, p99 ms).
fn wrk(addr: SocketAddr, path: &str) -> Result<(f64, f64)> {
    let out = Command::new(WRK)
        .args(["-t2", "-c32", "-d10s", "--latency"])
        .arg(format!("http://{addr}{path}"))
        .output()
        .with_context(|| format!("cannot run {WRK} (Debian package wrk; `cargo xtask setup`)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("wrk failed: {text}");
    }
    wrk_rps_p99(&text)
}

/// (req/s, p99 ms) from wrk's `--latency` output.
pub fn wrk_rps_p99(text: &str) -> Result<(f64, f64)> {
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .context("no Requests/sec in wrk's output")?;
    let p99 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .map(str::trim)
        .and_then(parse_wrk_duration)
        .context("no 99% latency in wrk's output")?;
    Ok((rps, p99))
}

/// `1.23ms`, `456.00us`, `1.02s` -> milliseconds.
fn parse_wrk_duration(v: &str) -> Option<f64> {
    if let Some(us) = v.strip_suffix("us") {
        return us.parse::<f64>().ok().map(|x| x / 1000.0);
    }
    if let Some(ms) = v.strip_suffix("ms") {
        return ms.parse().ok();
    }
    v.strip_suffix('s')?.parse::<f64>().ok().map(|x| x * 1000.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64)).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
