//! The timeline index on every real nsys export (../shared/testdata/nsys): events per track equal
//! SQL counts per thread and per CUDA stream, every tile level accounts for every event once, a
//! kernel's details are its row and the API call that launched it (and back), a selection's
//! aggregates equal SQL over the same range, the track tree of a tiny export exactly; and the
//! REST routes of the real `nsight-analysis` binary: JSON, binary tiles with ETag/304, clear
//! refusals.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;

use std::collections::BTreeSet;

use common::{
    kernels_in_range, reports,
    service::{problem, seed, testdata, Service},
    short,
};
use nsight_analysis::timeline::{detail, index::Source, load, Index};
use nsight_contracts::timeline::{tile_span_ns, Tile, TrackKind};
use nsight_e2e::{http, TempDir};
use rusqlite::Connection;

fn counts(db: &Connection, sql: &str) -> Vec<u64> {
    let mut out: Vec<u64> = db
        .prepare(sql)
        .unwrap()
        .query_map([], |r| r.get::<_, i64>(0))
        .unwrap()
        .map(|c| c.unwrap() as u64)
        .collect();
    out.sort_unstable();
    out
}

fn has(db: &Connection, table: &str) -> bool {
    db.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .unwrap()
        > 0
}

fn track_counts(idx: &Index, kind: TrackKind) -> Vec<u64> {
    let mut out: Vec<u64> = idx
        .tracks
        .iter()
        .filter(|t| t.kind == kind)
        .map(|t| t.events)
        .collect();
    out.sort_unstable();
    out
}

/// The GPU tables' rows per (device, context, stream), as one UNION.
fn gpu_counts(db: &Connection) -> Vec<u64> {
    let tables: Vec<&str> = [
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
    ]
    .into_iter()
    .filter(|t| has(db, t))
    .collect();
    if tables.is_empty() {
        return Vec::new();
    }
    let union = tables
        .iter()
        .map(|t| format!("SELECT deviceId, contextId, streamId FROM {t}"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    counts(
        db,
        &format!("SELECT count(*) FROM ({union}) GROUP BY deviceId, contextId, streamId"),
    )
}

fn per_thread(db: &Connection, table: &str, filter: &str) -> Vec<u64> {
    if !has(db, table) {
        return Vec::new();
    }
    counts(
        db,
        &format!("SELECT count(*) FROM {table} WHERE end IS NOT NULL {filter} GROUP BY globalTid"),
    )
}

#[test]
fn events_per_track_equal_sql_on_every_export() {
    for path in reports() {
        let name = short(&path);
        let idx = load::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let db = Connection::open(&path).unwrap();
        let nvtx_types = if has(&db, "ENUM_NSYS_EVENT_TYPE") {
            "AND eventType IN (SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN \
             ('NvtxPushPopRange', 'NvtxStartEndRange', 'NvtxtPushPopRange', 'NvtxtStartEndRange'))"
        } else {
            "AND eventType IN (59, 60)"
        };
        assert_eq!(
            track_counts(&idx, TrackKind::Stream),
            gpu_counts(&db),
            "{name}: streams"
        );
        assert_eq!(
            track_counts(&idx, TrackKind::CudaApi),
            per_thread(&db, "CUPTI_ACTIVITY_KIND_RUNTIME", ""),
            "{name}: CUDA API"
        );
        assert_eq!(
            track_counts(&idx, TrackKind::OsRuntime),
            per_thread(&db, "OSRT_API", ""),
            "{name}: OS runtime"
        );
        assert_eq!(
            track_counts(&idx, TrackKind::Nvtx),
            per_thread(&db, "NVTX_EVENTS", nvtx_types),
            "{name}: NVTX"
        );
        // Every event track sits below a group, and a parent comes before its children.
        for t in &idx.tracks {
            match t.parent {
                Some(p) => assert!(p < t.id, "{name}: {t:?}"),
                None => assert!(t.kind.is_group(), "{name}: {t:?}"),
            }
        }
        // Rows never overlap (below the row cap) and events are numbered by start.
        for ev in &idx.events {
            assert!(ev.start.windows(2).all(|w| w[0] <= w[1]), "{name}");
            let mut last_end = std::collections::HashMap::new();
            for i in 0..ev.len() {
                let row = ev.row[i];
                if usize::from(row) + 1 < nsight_analysis::timeline::index::MAX_ROWS {
                    let end = last_end.insert(row, ev.end[i]).unwrap_or(i64::MIN);
                    assert!(
                        end <= ev.start[i],
                        "{name}: row {row} overlaps at event {i}"
                    );
                }
            }
        }
    }
}

#[test]
fn nvtx_projections_equal_sql_on_every_export() {
    let mut projected_somewhere = false;
    for path in reports() {
        let name = short(&path);
        let db = Connection::open(&path).unwrap();
        let ops: Vec<String> = [
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET",
        ]
        .into_iter()
        .filter(|t| has(&db, t))
        .map(|t| format!("SELECT start, end, deviceId, correlationId, globalPid FROM {t}"))
        .collect();
        if ops.is_empty() || !has(&db, "NVTX_EVENTS") || !has(&db, "CUPTI_ACTIVITY_KIND_RUNTIME") {
            continue;
        }
        let types = if has(&db, "ENUM_NSYS_EVENT_TYPE") {
            "SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ('NvtxPushPopRange', \
             'NvtxStartEndRange', 'NvtxtPushPopRange', 'NvtxtStartEndRange')"
        } else {
            "VALUES (59), (60)"
        };
        // Independent of the loader: one query from the definition.
        let sql = format!(
            "WITH ops AS ({}), \
             ranges AS (SELECT rowid AS rid, start AS rs, end AS re, globalTid AS gtid \
                        FROM NVTX_EVENTS WHERE end IS NOT NULL AND eventType IN ({types})), \
             calls AS (SELECT r.globalTid AS gtid, r.start AS cs, r.end AS ce, o.deviceId AS dev, \
                              o.start AS os, o.end AS oe \
                       FROM ops AS o JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r \
                         ON o.correlationId = r.correlationId \
                        AND o.globalPid = (r.globalTid & 0xFFFFFFFFFF000000)) \
             SELECT rg.rid, min(c.os), max(c.oe) FROM ranges AS rg JOIN calls AS c \
               ON c.gtid = rg.gtid AND rg.rs <= c.cs AND rg.re >= c.ce \
             GROUP BY rg.rid, c.dev",
            ops.join(" UNION ALL ")
        );
        let mut want: Vec<(i64, i64, i64)> = db
            .prepare(&sql)
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        want.sort_unstable();
        let idx = load::load(&path).unwrap();
        let mut got: Vec<(i64, i64, i64)> = idx
            .tracks
            .iter()
            .filter(|t| t.kind == TrackKind::NvtxProjected)
            .flat_map(|t| {
                let ev = &idx.events[t.id as usize];
                (0..ev.len()).map(move |i| (ev.rowid[i], ev.start[i], ev.end[i]))
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got.len(), want.len(), "{name}");
        assert_eq!(got, want, "{name}");
        projected_somewhere |= !got.is_empty();
    }
    assert!(projected_somewhere, "no export had a projection to compare");
}

/// Sums a level's tiles of one track: events counted in buckets plus events drawn (each once).
fn accounted(idx: &Index, track: u32, level: u8) -> u64 {
    let tiles = ((idx.end_ns - idx.start_ns) / tile_span_ns(level) + 1) as u64;
    let mut counted = 0u64;
    let mut drawn = BTreeSet::new();
    for index in 0..tiles {
        let tile = idx.tile(track, level, index).unwrap();
        let tile = Tile::decode(&tile.encode()).unwrap();
        for row in &tile.rows {
            counted += row.buckets.iter().map(|b| u64::from(b.count)).sum::<u64>();
            drawn.extend(row.events.iter().map(|e| e.event));
        }
    }
    counted + drawn.len() as u64
}

#[test]
fn every_level_accounts_for_every_event_once() {
    for path in reports() {
        let name = short(&path);
        let idx = load::load(&path).unwrap();
        for t in idx.tracks.iter().filter(|t| !t.kind.is_group()) {
            for level in [idx.top_level, idx.top_level.saturating_sub(6)] {
                assert_eq!(
                    accounted(&idx, t.id, level),
                    t.events,
                    "{name}: track {} ({}) at level {level}",
                    t.id,
                    t.label
                );
            }
        }
    }
}

#[test]
fn a_kernels_details_are_its_row_and_its_launch() {
    let path = testdata("gtls/report1.sqlite");
    let idx = load::load(&path).unwrap();
    let db = load::open(&path).unwrap();
    let (track, ev) = idx
        .tracks
        .iter()
        .filter(|t| t.kind == TrackKind::Stream)
        .map(|t| (t.id, &idx.events[t.id as usize]))
        .max_by_key(|(_, ev)| ev.len())
        .unwrap();
    let e = (0..ev.len())
        .filter(|&i| ev.source[i] == Source::Kernel)
        .nth(1000)
        .unwrap();
    let d = detail::detail(&db, &idx, track, e as u32).unwrap().unwrap();
    let (grid, correlation, kernel, pid): (i64, i64, String, i64) = db
        .query_row(
            "SELECT gridX, correlationId, s.value, (globalPid >> 24) & 16777215 \
             FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName \
             WHERE k.rowid = ?1",
            [ev.rowid[e]],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(d.name, kernel);
    assert_eq!((d.start_ns, d.end_ns), (ev.start[e], ev.end[e]));
    let field = |name: &str| {
        d.fields
            .iter()
            .find(|f| f.name == name)
            .unwrap()
            .value
            .clone()
    };
    assert_eq!(field("gridX"), grid.to_string());
    assert_eq!(field("shortName"), kernel, "string ids are shown as text");
    let (api_start, api_end): (i64, i64) = db
        .query_row(
            "SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = ?1 \
             AND ((globalTid >> 24) & 16777215) = ?2",
            [correlation, pid],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(d.related.len(), 1, "{:?}", d.related);
    let launch = &d.related[0];
    assert_eq!((launch.start_ns, launch.end_ns), (api_start, api_end));
    assert_eq!(launch.relation, "launched by");
    assert!(launch.name.starts_with("cuda"), "{}", launch.name);
    // And back: the API call lists the kernel it launched.
    let back = detail::detail(&db, &idx, launch.track, launch.event)
        .unwrap()
        .unwrap();
    assert!(back
        .related
        .iter()
        .any(|l| l.track == track && l.event == e as u32 && l.relation == "launched"));
}

#[test]
fn a_selections_aggregates_equal_sql() {
    for rel in ["nsys-ai/h100_2gpu_1s.sqlite", "gtls/report1.sqlite"] {
        let path = testdata(rel);
        let idx = load::load(&path).unwrap();
        let db = Connection::open(&path).unwrap();
        let third = (idx.end_ns - idx.start_ns) / 3;
        let (s, e) = (idx.start_ns + third, idx.start_ns + 2 * third);
        let streams: Vec<u32> = idx
            .tracks
            .iter()
            .filter(|t| t.kind == TrackKind::Stream)
            .map(|t| t.id)
            .collect();
        let summary = idx.range(s, e, &streams);
        let oracle = kernels_in_range(&db, s, e);
        assert!(oracle.len() > 3, "{rel}: too few kernels in the range");
        for (name, count, total) in oracle {
            let got = summary
                .names
                .iter()
                .find(|n| n.name == name)
                .unwrap_or_else(|| panic!("{rel}: {name} missing"));
            assert_eq!(
                (got.count as i64, got.total_ns),
                (count, total),
                "{rel}: {name}"
            );
            assert!(
                got.busy_ns <= got.total_ns && got.busy_ns > 0,
                "{rel}: {name}"
            );
            assert!(got.p50_ns <= got.p95_ns, "{rel}: {name}");
        }
    }
}

#[test]
fn the_tiny_export_gives_this_track_tree() {
    let idx = load::load(&testdata("nsys-ai/mock.sqlite")).unwrap();
    let tree: Vec<String> = idx
        .tracks
        .iter()
        .map(|t| {
            format!(
                "{}{:?} {} ({} events, {} rows)",
                "  ".repeat(depth(&idx, t.id)),
                t.kind,
                t.label,
                t.events,
                t.rows
            )
        })
        .collect();
    let want: &[&str] = &include!("timeline_mock_tree.txt");
    assert_eq!(tree, want, "\n{}", tree.join("\n"));
}

fn depth(idx: &Index, id: u32) -> usize {
    match idx.tracks[id as usize].parent {
        Some(p) => 1 + depth(idx, p),
        None => 0,
    }
}

fn tile_path(key: &str, track: u32, level: u8, index: u64) -> String {
    format!("/analysis/v1/timeline/tiles?report={key}&track={track}&level={level}&index={index}")
}

#[test]
fn the_service_serves_the_timeline_tiles_details_and_ranges() {
    let dir = TempDir::new("analysis-timeline");
    let key = "default/s1/1/app_default_0_a.sqlite";
    seed(dir.path(), key, &testdata("gtls/report1.sqlite"));
    let svc = Service::start(dir.path(), None, &[]);

    let (status, tl) = svc.get(&format!("/analysis/v1/timeline?report={key}"));
    assert_eq!(status, 200, "{tl}");
    let expected = load::load(&testdata("gtls/report1.sqlite")).unwrap();
    assert_eq!(
        tl["tracks"].as_array().unwrap().len(),
        expected.tracks.len()
    );
    assert_eq!(tl["startNs"], expected.start_ns);
    let top = tl["topLevel"].as_u64().unwrap() as u8;
    let stream = expected
        .tracks
        .iter()
        .find(|t| t.kind == TrackKind::Stream)
        .unwrap()
        .id;

    let (r, bytes) = http::get_bytes(svc.http, &tile_path(key, stream, top, 0), &[]).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    let tile = Tile::decode(&bytes).unwrap();
    assert_eq!(tile, expected.tile(stream, top, 0).unwrap());
    let etag = r.header("etag").unwrap().to_owned();
    let (again, body) = http::get_bytes(
        svc.http,
        &tile_path(key, stream, top, 0),
        &[("If-None-Match", &etag)],
    )
    .unwrap();
    assert_eq!((again.status, body.len()), (304, 0));

    // One kernel's details through REST equal the library's.
    let (status, d) = svc.get(&format!(
        "/analysis/v1/timeline/event?report={key}&track={stream}&event=0"
    ));
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["startNs"], expected.events[stream as usize].start[0]);
    let (status, range) = svc.get(&format!(
        "/analysis/v1/timeline/range?report={key}&start={}&end={}&tracks={stream}",
        expected.start_ns, expected.end_ns
    ));
    assert_eq!(status, 200, "{range}");
    let total: u64 = range["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["count"].as_u64().unwrap())
        .sum();
    assert_eq!(total, expected.tracks[stream as usize].events);
    // Search through REST: from the stream's first event, the next event of the same name.
    let first = &expected.events[stream as usize];
    let name = &expected.names[first.name[0] as usize];
    let (status, found) = svc.get(&format!(
        "/analysis/v1/timeline/search?report={key}&q={}&from={stream}.0",
        percent(&name.to_uppercase())
    ));
    assert_eq!(status, 200, "{found}");
    // The stream repeats its first kernel's name later: there is a next one.
    let repeats = first.name.iter().skip(1).any(|&n| n == first.name[0]);
    assert!(
        !repeats || found["hit"].is_object(),
        "no next match: {found}"
    );
    if let Some(hit) = found["hit"].as_object() {
        assert!(
            hit["name"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains(&name.to_lowercase()),
            "{found}"
        );
        assert!(hit["startNs"].as_i64() >= Some(first.start[0]), "{found}");
    }
    let (status, none) = svc.get(&format!(
        "/analysis/v1/timeline/search?report={key}&q=no-such-name-zz"
    ));
    assert_eq!((status, &none), (200, &serde_json::json!({"hit": null})));

    // Refusals a person can act on.
    problem(
        400,
        &svc.raw("/analysis/v1/timeline"),
        "`report` is required",
    );
    problem(
        400,
        &svc.raw("/analysis/v1/timeline?report=not-a-key"),
        "is not a report key",
    );
    problem(
        404,
        &svc.raw("/analysis/v1/timeline?report=default/s1/1/nothing_default_0_x.sqlite"),
        "no report",
    );
    problem(404, &svc.raw(&tile_path(key, 9999, 0, 0)), "no track 9999");
    problem(
        400,
        &svc.raw(&tile_path(key, stream, 60, 0)),
        "above the report's top level",
    );
    problem(
        404,
        &svc.raw(&tile_path(key, stream, top, 5)),
        "tiles 0 to 0",
    );
    problem(
        400,
        &svc.raw(&format!(
            "/analysis/v1/timeline/tiles?report={key}&track=x&level=0&index=0"
        )),
        "`track=x` is not a valid number",
    );
    problem(
        400,
        &svc.raw(&format!(
            "/analysis/v1/timeline/range?report={key}&start=10&end=5"
        )),
        "the range is empty",
    );
    problem(
        404,
        &svc.raw(&format!(
            "/analysis/v1/timeline/event?report={key}&track={stream}&event=99999999"
        )),
        "has no event",
    );
    for (query, says) in [
        ("", "`q` is required"),
        ("&q=a&from=0", "`from=0` is not an event"),
        ("&q=a&dir=up", "`dir=up` is neither"),
        (&*format!("&q={}", "a".repeat(257)), "longer than 256"),
    ] {
        problem(
            400,
            &svc.raw(&format!("/analysis/v1/timeline/search?report={key}{query}")),
            says,
        );
    }
    problem(
        404,
        &svc.raw(&format!(
            "/analysis/v1/timeline/search?report={key}&q=a&from={stream}.99999999"
        )),
        "has no event",
    );
    // A file that is not SQLite: refused with the reason, and the service stays up.
    let junk = dir.path().join("junk.sqlite");
    std::fs::write(&junk, b"this is not a database").unwrap();
    seed(dir.path(), "default/s1/1/junk_default_0_b.sqlite", &junk);
    let r = svc.raw("/analysis/v1/timeline?report=default/s1/1/junk_default_0_b.sqlite");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("cannot read the report"), "{}", r.body);
    assert_eq!(svc.get("/healthz").0, 200);
}

#[test]
fn a_restarted_service_reads_its_saved_index_not_the_report() {
    let dir = TempDir::new("analysis-timeline-restart");
    let key = "default/s1/1/app_default_0_a.sqlite";
    seed(dir.path(), key, &testdata("nsys-ai/h100_2gpu_1s.sqlite"));
    let state = dir.path().join("state");
    let mut svc = Service::start(dir.path(), Some(&state), &[]);
    let path = format!("/analysis/v1/timeline?report={key}");
    let (status, first) = svc.get(&path);
    assert_eq!(status, 200, "{first}");
    let tile = tile_path(key, 1, first["topLevel"].as_u64().unwrap() as u8, 0);
    let (_, first_tile) = http::get_bytes(svc.http, &tile, &[]).unwrap();
    assert!(svc.process.log().contains("timeline indexed"));
    svc.process.kill();

    let svc = Service::start(dir.path(), Some(&state), &[]);
    let (status, again) = svc.get(&path);
    assert_eq!(status, 200, "{again}");
    assert_eq!(again, first);
    let (_, again_tile) = http::get_bytes(svc.http, &tile, &[]).unwrap();
    assert_eq!(again_tile, first_tile);
    let log = svc.process.log();
    assert!(log.contains("timeline index read from disk"), "{log}");
    assert!(!log.contains("timeline indexed"), "{log}");
    // Details still come from the report fetched before the restart.
    let (status, d) = svc.get(&format!(
        "/analysis/v1/timeline/event?report={key}&track=2&event=0"
    ));
    assert_eq!(status, 200, "{d}");
}

/// Every byte but letters and digits as `%XX` (a query value).
fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
