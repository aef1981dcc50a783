//! `cargo xtask bench otlp-mirror [PAIRS]`: what the agent's NVTX mirroring costs the profiled
//! program. The NVTX bench program (`bench_nvtx::PROGRAM`, gcc -O2: PAIRS push/pop pairs in a
//! tight loop, timed inside the program) runs under the release `nsight-agent run --mode launch
//! --backend nvtx`, alternately without and with `--otlp-mirror` to a release `nsight-otlp` on
//! loopback (OTLP/gRPC), 5 times each. Prints the loop's ns per pair (median) both ways, the
//! agent's whole run (start to exit: the program, the dump, the report, and with mirroring the
//! export until the queue is flushed) both ways, and the spans the agent says it sent.
//!
//! The mirroring reads the dump the process hands over at its end, so it cannot slow the loop;
//! this measures that it does not, and what it adds after the program ends.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use nsight_e2e::{free_port, process::Running, wait_for_tcp, TempDir};

use crate::{
    bench::build_release,
    bench_nvtx::{build_program, median},
    paths::Layout,
};

const RUNS: usize = 5;

struct Run {
    ns_per_pair: f64,
    wall_s: f64,
    sent: Option<u64>,
}

/// `sent=N` from the agent's "NVTX mirroring" line (plain text: stderr is not a terminal).
fn sent_of(log: &str) -> Option<u64> {
    log.lines()
        .filter(|l| l.contains("NVTX mirroring"))
        .find_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("sent=")))
        .and_then(|n| n.parse().ok())
}

fn once(
    agent: &std::path::Path,
    program: &std::path::Path,
    pairs: u64,
    store: &std::path::Path,
    mirror: Option<&str>,
) -> Result<Run> {
    let mut cmd = Command::new(agent);
    cmd.args([
        "run",
        "--mode",
        "launch",
        "--backend",
        "nvtx",
        "--storage-dir",
    ])
    .arg(store);
    if let Some(endpoint) = mirror {
        cmd.args(["--otlp-mirror", endpoint]);
    }
    cmd.arg("--")
        .arg(program)
        .arg(pairs.to_string())
        .env("NSIGHT_AGENT_LOG", "info");
    let t = Instant::now();
    let out = cmd.output().context("running nsight-agent")?;
    let wall_s = t.elapsed().as_secs_f64();
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || log.contains("profiling disabled") {
        bail!("the agent did not profile its program: {log}");
    }
    let ns: f64 = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .context("the program printed no time")?
        .parse()?;
    Ok(Run {
        ns_per_pair: ns / pairs as f64,
        wall_s,
        sent: sent_of(&log),
    })
}

pub fn otlp_mirror(layout: &Layout, pairs: u64) -> Result<()> {
    let bin = build_release(
        layout,
        &[
            "-p",
            "nsight-agent",
            "--bin",
            "nsight-agent",
            "-p",
            "nsight-otlp",
            "--bin",
            "nsight-otlp",
        ],
    )?;
    // The injection library (a cdylib: `--bin` filters would leave it out).
    build_release(layout, &["-p", "nsight-agent-nvtx"])?;
    let dir = TempDir::new("bench-otlp-mirror");
    let program = build_program(layout, dir.path())?;
    let (http, grpc) = (free_port(), free_port());
    let mut cmd = Command::new(bin.join("nsight-otlp"));
    cmd.args(["--http-listen", &format!("127.0.0.1:{http}")])
        .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--storage-dir")
        .arg(dir.path().join("converted"))
        .env("NSIGHT_OTLP_LOG", "warn");
    let converter = Running::spawn("nsight-otlp", cmd, &dir.path().join("converter.log"));
    if !wait_for_tcp(([127, 0, 0, 1], grpc).into(), Duration::from_secs(30)) {
        bail!("the converter did not listen: {}", converter.log());
    }
    let endpoint = format!("http://127.0.0.1:{grpc}");
    let agent = bin.join("nsight-agent");
    let store = dir.path().join("store");
    let (mut plain, mut mirrored) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        plain.push(once(&agent, &program, pairs, &store, None)?);
        mirrored.push(once(&agent, &program, pairs, &store, Some(&endpoint))?);
    }
    let loop_ns = |runs: &[Run]| median(runs.iter().map(|r| r.ns_per_pair).collect());
    let wall = |runs: &[Run]| median(runs.iter().map(|r| r.wall_s).collect());
    let sent: Vec<String> = mirrored
        .iter()
        .map(|r| r.sent.map_or("?".into(), |n| n.to_string()))
        .collect();
    println!(
        "cargo xtask bench otlp-mirror {pairs}  (load average {})",
        crate::bench::load_average()
    );
    println!(
        "  {pairs} NVTX push/pop pairs under `nsight-agent run --backend nvtx`, median of {RUNS} \
         runs each (release builds, gcc -O2)"
    );
    println!(
        "  loop: {:.1} ns/pair without mirroring, {:.1} ns/pair with: {:+.1} ns/pair",
        loop_ns(&plain),
        loop_ns(&mirrored),
        loop_ns(&mirrored) - loop_ns(&plain)
    );
    println!(
        "  agent run (program, dump, report; with mirroring the export too): {:.2} s without, \
         {:.2} s with: {:+.2} s",
        wall(&plain),
        wall(&mirrored),
        wall(&mirrored) - wall(&plain)
    );
    println!("  spans sent per mirrored run: {}", sent.join(", "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sent_count_comes_from_the_mirroring_line() {
        let log = "2026 INFO nsight_agent: stored\n\
                   2026 INFO nsight_agent::mirror_export: NVTX mirroring endpoint=http://x sent=200000 not_mirrored=0\n";
        assert_eq!(sent_of(log), Some(200_000));
        assert_eq!(sent_of("nothing"), None);
    }
}
