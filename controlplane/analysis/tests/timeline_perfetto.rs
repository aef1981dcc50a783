//! The Perfetto export of every real nsys export (../shared/testdata/nsys), read back with
//! Perfetto's own schema (PyPI `perfetto`, `tests/perfetto_read.py`): every slice closes on the
//! track it opened on, each track holds as many slices as the report has events for it, the GPU
//! streams hold what SQL counts per stream, the first kernel is there with SQL's start and
//! duration, and every CUDA launch whose GPU work was traced is one flow. Also the REST route of
//! the real `nsight-analysis` binary.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;

use std::{collections::HashMap, path::Path, process::Command};

use common::{
    reports,
    service::{seed, testdata, Service},
    short,
};
use nsight_analysis::timeline::{flows, load, perfetto::Export, Index};
use nsight_contracts::timeline::TrackKind;
use nsight_e2e::{http, required_path, TempDir};
use rusqlite::Connection;
use serde_json::Value;

/// Row tracks (a track whose events overlap) have uuids from here.
const ROW_UUIDS: u64 = 1 << 40;

fn read_back(trace: &Path, slices: bool) -> Value {
    let python = required_path("NSIGHT_CACHE_DIR", "cargo xtask setup").join("venv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_read.py");
    let mut c = Command::new(&python);
    c.arg(&script).arg(trace);
    if slices {
        c.arg("slices");
    }
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        out.status.success(),
        "Perfetto's schema could not read the trace (or the `perfetto` package is missing: \
         `cargo xtask setup python`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Slices per index track: its own Perfetto track plus its row tracks.
fn slices_per_track(read: &Value) -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    for (uuid, t) in read["tracks"].as_object().unwrap() {
        let uuid: u64 = uuid.parse().unwrap();
        let owner = if uuid >= ROW_UUIDS {
            t["parent"].as_u64().unwrap()
        } else {
            uuid
        };
        *out.entry(owner).or_default() += t["slices"].as_u64().unwrap();
    }
    out
}

fn has(db: &Connection, table: &str) -> bool {
    db.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get(0),
    )
    .unwrap()
}

const GPU_TABLES: [&str; 3] = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
];

/// Rows per (device, context, stream) of the GPU tables, sorted.
fn sql_stream_counts(db: &Connection) -> Vec<u64> {
    let union = GPU_TABLES
        .iter()
        .filter(|t| has(db, t))
        .map(|t| format!("SELECT deviceId, contextId, streamId FROM {t}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    if union.is_empty() {
        return Vec::new();
    }
    let mut stmt = db
        .prepare(&format!(
            "SELECT count(*) FROM ({union}) GROUP BY deviceId, contextId, streamId"
        ))
        .unwrap();
    let mut out: Vec<u64> = stmt
        .query_map([], |r| r.get::<_, i64>(0))
        .unwrap()
        .map(|n| n.unwrap() as u64)
        .collect();
    out.sort_unstable();
    out
}

/// Distinct (process, correlation id) of CUDA API calls whose GPU work is in the report.
fn sql_launches(db: &Connection) -> u64 {
    if !has(db, "CUPTI_ACTIVITY_KIND_RUNTIME") {
        return 0;
    }
    let gpu = GPU_TABLES
        .iter()
        .filter(|t| has(db, t))
        .map(|t| format!("SELECT correlationId AS c, (globalPid >> 24) & 16777215 AS p FROM {t}"))
        .collect::<Vec<_>>()
        .join(" UNION ");
    if gpu.is_empty() {
        return 0;
    }
    let n: i64 = db
        .query_row(
            &format!(
                "SELECT count(*) FROM (SELECT DISTINCT r.correlationId, g.p \
                 FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN ({gpu}) g \
                 ON g.c = r.correlationId AND g.p = (r.globalTid >> 24) & 16777215)"
            ),
            [],
            |r| r.get(0),
        )
        .unwrap();
    n as u64
}

fn export(idx: &Index, path: &Path, out: &Path) {
    let flows = flows::read(&load::open(path).unwrap()).unwrap();
    let bytes: Vec<u8> = Export::new(idx, &flows).flatten().collect();
    std::fs::write(out, bytes).unwrap();
}

#[test]
fn every_export_reads_back_in_perfetto_with_the_reports_events() {
    let dir = TempDir::new("perfetto-export");
    for path in reports() {
        let name = short(&path);
        let idx = load::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let db = Connection::open(&path).unwrap();
        let trace = dir
            .path()
            .join(format!("{}.perfetto-trace", name.replace('/', "_")));
        export(&idx, &path, &trace);
        let read = read_back(&trace, false);
        assert_eq!(read["errors"], Value::Array(vec![]), "{name}");

        let per_track = slices_per_track(&read);
        for t in &idx.tracks {
            let uuid = u64::from(t.id) + 1;
            let declared = &read["tracks"][uuid.to_string()];
            assert_eq!(declared["name"], t.label.as_str(), "{name}: track {}", t.id);
            assert_eq!(
                declared["parent"].as_u64(),
                t.parent.map(|p| u64::from(p) + 1),
                "{name}: parent of track {}",
                t.id
            );
            assert_eq!(
                per_track.get(&uuid).copied().unwrap_or(0),
                t.events,
                "{name}: slices of track {} ({})",
                t.id,
                t.label
            );
        }

        let mut streams: Vec<u64> = idx
            .tracks
            .iter()
            .filter(|t| t.kind == TrackKind::Stream)
            .map(|t| per_track[&(u64::from(t.id) + 1)])
            .collect();
        streams.sort_unstable();
        assert_eq!(streams, sql_stream_counts(&db), "{name}: slices per stream");
        assert_eq!(
            read["flows"].as_u64().unwrap(),
            sql_launches(&db),
            "{name}: flows"
        );
        assert_eq!(read["one_sided_flows"], 0, "{name}");
    }
}

#[test]
fn the_first_kernel_has_sqls_start_and_duration() {
    let dir = TempDir::new("perfetto-kernel");
    let mut checked = 0;
    for path in reports() {
        let db = Connection::open(&path).unwrap();
        if !has(&db, "CUPTI_ACTIVITY_KIND_KERNEL") {
            continue;
        }
        let name = short(&path);
        let (start, end): (i64, i64) = db
            .query_row(
                "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start, end DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let idx = load::load(&path).unwrap();
        let trace = dir
            .path()
            .join(format!("{}.perfetto-trace", name.replace('/', "_")));
        export(&idx, &path, &trace);
        let read = read_back(&trace, true);
        let origin = idx.start_ns.min(0);
        let found = idx
            .tracks
            .iter()
            .filter(|t| t.kind == TrackKind::Stream)
            .flat_map(|t| {
                read["tracks"]
                    .as_object()
                    .unwrap()
                    .values()
                    .filter(move |p| {
                        p["parent"].as_u64() == Some(u64::from(t.id) + 1)
                            || p["name"] == t.label.as_str()
                    })
                    .flat_map(|p| p["list"].as_array().unwrap().iter())
            })
            .any(|s| s[0].as_i64() == Some(start - origin) && s[1].as_i64() == Some(end - start));
        assert!(
            found,
            "{name}: no GPU slice at {start} lasting {}",
            end - start
        );
        checked += 1;
    }
    assert!(checked > 0, "no export with kernels");
}

#[test]
fn the_service_streams_a_reports_perfetto_trace() {
    let dir = TempDir::new("analysis-perfetto");
    let key = "default/s1/1/app_default_0_a.sqlite";
    seed(dir.path(), key, &testdata("gtls/report1.sqlite"));
    let svc = Service::start(dir.path(), None, &[]);

    let (r, bytes) = http::get_bytes(
        svc.http,
        &format!("/analysis/v1/timeline/perfetto?report={key}"),
        &[],
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(
        r.header("content-disposition"),
        Some("attachment; filename=\"app_default_0_a.perfetto-trace\"")
    );
    let trace = dir.path().join("downloaded.perfetto-trace");
    std::fs::write(&trace, &bytes).unwrap();
    let read = read_back(&trace, false);
    assert_eq!(read["errors"], Value::Array(vec![]));
    let idx = load::load(&testdata("gtls/report1.sqlite")).unwrap();
    let total: u64 = slices_per_track(&read).values().sum();
    assert_eq!(total, idx.tracks.iter().map(|t| t.events).sum::<u64>());

    let missing =
        svc.raw("/analysis/v1/timeline/perfetto?report=default/s1/9/app_default_0_b.sqlite");
    assert_eq!(missing.status, 404, "{}", missing.body);
}
