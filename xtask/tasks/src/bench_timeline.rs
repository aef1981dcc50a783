//! `cargo xtask bench timeline [EVENTS]`: the timeline index (docs/timeline.md) on a synthetic
//! export of EVENTS events (default 10,000,000: half kernels on four streams, half CUDA API
//! calls on one thread), made once under the cache dir from the rows of the largest real export
//! (shared/testdata/nsys/gtls/report1.sqlite: every column kept, names from its distribution,
//! times rewritten so that rows do not overlap), and on that real export:
//!
//! - ours: `nsight-timeline-index` (release): the index built as the service builds it, then
//!   2,000 tiles cut at random tracks, levels and places (p50, p99, max, largest tile);
//! - the reference: the sqlite3 CLI reading the same columns of the same rows (the floor any
//!   index builder that reads SQLite pays).
//!
//! Budgets from the timeline issue: built in under 30 s per GB of SQLite, peak RSS under the
//! file's size. Wall times and peak RSS (`/usr/bin/time`) are of whole processes.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::{
    bench::build_release,
    bench_recipes::{measure, Measured},
    cmd::run as run_cmd,
    paths::Layout,
};

/// The synthetic export with `events` events, made once.
fn synthetic(layout: &Layout, source: &Path, events: u64) -> Result<PathBuf> {
    let dir = layout.cache.join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("timeline-{events}.sqlite"));
    if path.exists() {
        return Ok(path);
    }
    let partial = dir.join(format!("timeline-{events}.sqlite.partial"));
    let _ = std::fs::remove_file(&partial);
    eprintln!("generating {} ({events} events)", path.display());
    let half = events / 2;
    let sql = format!(
        "ATTACH 'file:{src}?mode=ro' AS src;
         CREATE TABLE StringIds AS SELECT * FROM src.StringIds;
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM src.CUPTI_ACTIVITY_KIND_KERNEL WHERE 0;
         CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME AS SELECT * FROM src.CUPTI_ACTIVITY_KIND_RUNTIME WHERE 0;
         CREATE TEMP TABLE k AS SELECT * FROM src.CUPTI_ACTIVITY_KIND_KERNEL;
         CREATE TEMP TABLE r AS SELECT * FROM src.CUPTI_ACTIVITY_KIND_RUNTIME;
         WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < {last}),
         t AS MATERIALIZED (SELECT x, 1 + abs(random()) % (SELECT count(*) FROM k) AS pick FROM n)
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT k.* FROM t JOIN k ON k.rowid = t.pick ORDER BY t.x;
         WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < {last}),
         t AS MATERIALIZED (SELECT x, 1 + abs(random()) % (SELECT count(*) FROM r) AS pick FROM n)
         INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT r.* FROM t JOIN r ON r.rowid = t.pick ORDER BY t.x;
         UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 1000 + rowid % 4, correlationId = rowid,
             start = (rowid / 4) * 1000 + 300, end = (rowid / 4) * 1000 + 300 + min(end - start, 900);
         UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = rowid,
             globalTid = (SELECT globalTid FROM src.CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1),
             start = rowid * 250, end = rowid * 250 + min(end - start, 200);",
        src = source.display(),
        last = half.saturating_sub(1)
    );
    run_cmd(Command::new("sqlite3").arg(&partial).arg(sql))?;
    std::fs::rename(&partial, &path)?;
    Ok(path)
}

/// The reference: the same columns of the same rows read by the sqlite3 CLI.
fn reference(input: &Path) -> Result<Measured> {
    let sql = "SELECT rowid, start, end, globalTid, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME; \
               SELECT rowid, start, end, deviceId, contextId, streamId, shortName \
               FROM CUPTI_ACTIVITY_KIND_KERNEL;";
    let m = measure(
        Path::new("/bin/sh"),
        &[
            "-c",
            &format!(
                "sqlite3 -readonly '{}' '{sql}' > /dev/null",
                input.display()
            ),
        ],
        None,
    )?;
    Ok(m)
}

pub fn timeline(layout: &Layout, events: u64) -> Result<()> {
    let testdata = std::env::var_os("NSIGHT_TESTDATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| layout.root.join("../shared/testdata/nsys"));
    let real = testdata.join("gtls/report1.sqlite");
    if !real.exists() {
        bail!("{} missing: set NSIGHT_TESTDATA_DIR", real.display());
    }
    let synthetic = synthetic(layout, &real, events)?;
    let bin = build_release(
        layout,
        &["-p", "nsight-analysis", "--bin", "nsight-timeline-index"],
    )?
    .join("nsight-timeline-index");
    println!(
        "| input | file | events | tracks | ours: index built | ours: peak RSS | (ref) sqlite3 reads the rows | build s per GB | tile p50 / p99 / max | largest tile |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for input in [real.as_path(), synthetic.as_path()] {
        let file_mib = std::fs::metadata(input)?.len() as f64 / 1048576.0;
        let ours = measure(&bin, &[&input.display().to_string()], None)?;
        let stats: Value = serde_json::from_str(ours.stdout.lines().last().unwrap_or(""))
            .with_context(|| format!("nsight-timeline-index printed {}", ours.stdout))?;
        let reference = reference(input)?;
        let build_s = stats["build_ms"].as_f64().unwrap_or(0.0) / 1000.0;
        println!(
            "| {} | {file_mib:.1} MiB | {} | {} | {build_s:.2} s (process {:.2} s) | {:.0} MiB ({:.2}x the file) | {:.2} s, {:.0} MiB | {:.1} s | {:.2} / {:.2} / {:.2} ms | {:.0} KiB |",
            input.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
            stats["events"],
            stats["tracks"],
            ours.secs,
            ours.rss_mib,
            ours.rss_mib / file_mib,
            reference.secs,
            reference.rss_mib,
            build_s / (file_mib / 1024.0),
            stats["tile_ms_p50"].as_f64().unwrap_or(0.0),
            stats["tile_ms_p99"].as_f64().unwrap_or(0.0),
            stats["tile_ms_max"].as_f64().unwrap_or(0.0),
            stats["tile_max_kib"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(())
}
