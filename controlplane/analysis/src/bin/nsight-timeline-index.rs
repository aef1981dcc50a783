//! `nsight-timeline-index REPORT.sqlite [--tiles N]`: builds the timeline index of one report the
//! way the analysis service does, then cuts N tiles (default 2000) at random levels and places of
//! random tracks. Prints one JSON line: tracks, events, the build time, the index's size, and the
//! tile times and sizes. Used by `cargo xtask bench timeline`; peak RSS comes from outside
//! (`/usr/bin/time`).

use std::{path::PathBuf, process::ExitCode, time::Instant};

use anyhow::{bail, Context, Result};
use nsight_analysis::timeline::load;
use nsight_contracts::timeline::tile_span_ns;

const USAGE: &str = "usage: nsight-timeline-index REPORT.sqlite [--tiles N]";

fn run() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut report = None;
    let mut tiles = 2000u32;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tiles" => {
                tiles = args
                    .next()
                    .context(USAGE)?
                    .parse()
                    .context("--tiles needs a number")?
            }
            _ if report.is_none() => report = Some(PathBuf::from(a)),
            _ => bail!("unexpected `{a}`; {USAGE}"),
        }
    }
    let report = report.context(USAGE)?;
    let started = Instant::now();
    let index = load::load(&report)?;
    let build_ms = started.elapsed().as_secs_f64() * 1000.0;
    let tracks: Vec<u32> = index.event_tracks();
    if tracks.is_empty() {
        bail!("{} has no events", report.display());
    }
    // A small xorshift: the same tiles on every run.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let span = index.end_ns - index.start_ns;
    let mut times = Vec::with_capacity(tiles as usize);
    let mut max_bytes = 0usize;
    let mut top_ms = 0.0;
    for i in 0..tiles {
        let track = tracks[(next() % tracks.len() as u64) as usize];
        let level = if i == 0 {
            index.top_level
        } else {
            index.top_level - (next() % u64::from(index.top_level.min(16) + 1)) as u8
        };
        let count = (span / tile_span_ns(level) + 1) as u64;
        let at = if i == 0 { 0 } else { next() % count };
        let t = Instant::now();
        let bytes = index
            .tile(track, level, at)
            .map(|t| t.encode().len())
            .unwrap_or(0);
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        if i == 0 {
            top_ms = ms;
        }
        times.push(ms);
        max_bytes = max_bytes.max(bytes);
    }
    times.sort_by(f64::total_cmp);
    let pct = |p: usize| times[(times.len() * p / 100).min(times.len() - 1)];
    let events: u64 = index.tracks.iter().map(|t| t.events).sum();
    println!(
        "{{\"tracks\":{},\"events\":{events},\"build_ms\":{build_ms:.1},\"index_mib\":{:.1},\
         \"top_tile_ms\":{top_ms:.3},\"tile_ms_p50\":{:.3},\"tile_ms_p99\":{:.3},\"tile_ms_max\":{:.3},\
         \"tile_max_kib\":{:.1},\"top_level\":{}}}",
        index.tracks.len(),
        index.heap_bytes() as f64 / 1048576.0,
        pct(50),
        pct(99),
        times[times.len() - 1],
        max_bytes as f64 / 1024.0,
        index.top_level
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nsight-timeline-index: {e:#}");
            ExitCode::FAILURE
        }
    }
}
