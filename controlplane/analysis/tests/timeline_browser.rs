//! The timeline page in a real browser against the real local platform (gateway with API-key
//! auth, the analysis service, the UI): a real nsys export (gtls/report1.sqlite, 23,419 kernels)
//! put in the platform's report store is opened by its deep link in headless Chromium, driven
//! by npm playwright-core (`timeline_browser.mjs`). A kernel clicked on the canvas shows the
//! numbers SQL gives for it and links to the API call that launched it; W and D change the
//! range and the level drawn; a dragged selection's aggregates equal SQL over the same range;
//! a reload restores the view from the URL. Screenshots: `<target>/ui-screenshots/timeline*.png`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;

use std::{path::PathBuf, process::Command};

use common::{kernels_in_range, service::testdata};
use nsight_analysis::timeline::{flows, index::Source, load, perfetto::Export};
use nsight_contracts::timeline::TrackKind;
use nsight_e2e::{chromium_bin, demo::LocalPlatform, required_path, TempDir};
use rusqlite::Connection;
use serde_json::{json, Value};

/// The page's layout (ui/src/pages/timeline/layout.rs): axis, group line, row heights.
const AXIS_H: f64 = 22.0;
const GROUP_H: f64 = 18.0;
const ROW_H: f64 = 16.0;

const KEY: &str = "default/timeline/1/report1_default_0_gtls.sqlite";

fn close(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance
}

#[test]
fn a_person_reads_a_reports_timeline_in_the_browser() {
    let playwright = required_path("NSIGHT_PLAYWRIGHT_DIR", "cargo xtask setup playwright");
    let dir = TempDir::new("ui-timeline");
    let (platform, options) = LocalPlatform::start_for_tests(dir.path()).unwrap();
    let source = testdata("gtls/report1.sqlite");
    let store = PathBuf::from(platform.description["reportsDir"].as_str().unwrap());
    let dest = store.join(KEY);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(&source, &dest).unwrap();

    // The kernel to click: the longest on the busiest stream, shown in the middle third.
    let idx = load::load(&source).unwrap();
    let stream = idx
        .tracks
        .iter()
        .filter(|t| t.kind == TrackKind::Stream)
        .max_by_key(|t| t.events)
        .unwrap()
        .id;
    let ev = &idx.events[stream as usize];
    let e = (0..ev.len())
        .filter(|&i| ev.source[i] == Source::Kernel)
        .max_by_key(|&i| ev.end[i] - ev.start[i])
        .unwrap();
    let (start, end) = (ev.start[e], ev.end[e]);
    let dur = end - start;
    let range = [start - dur, end + dur];
    let line_y: f64 = idx.tracks[..stream as usize]
        .iter()
        .map(|t| {
            if t.kind.is_group() {
                GROUP_H
            } else {
                f64::from(t.rows) * ROW_H + 2.0
            }
        })
        .sum();
    let y = AXIS_H + line_y + f64::from(ev.row[e]) * ROW_H + 1.0 + ROW_H / 2.0;
    assert!(y < 800.0, "the stream's line is below the canvas: {y}");
    let plan = json!({
        "report": KEY,
        "range": range,
        "click": { "x_ns": (start + end) as f64 / 2.0, "y": y },
        "width": 1600,
        "search": search_text(&idx.names[ev.name[e] as usize]),
    });

    let shots = required_path("NSIGHT_BIN_DIR", "cargo build --workspace")
        .parent()
        .unwrap()
        .join("ui-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let out = Command::new("node")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/timeline_browser.mjs"))
        .env("PW_DIR", &playwright)
        .env("CHROMIUM", chromium_bin())
        .env("URL", format!("{}/", platform.gateway_url))
        .env("API_KEY", &platform.api_key)
        .env("SHOTS", &shots)
        .env("PLAN", plan.to_string())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser flow failed (screenshot {}/timeline-failure.png):\n{}\n{stdout}\n{}",
        shots.display(),
        String::from_utf8_lossy(&out.stderr),
        platform_log(&options.state_dir),
    );
    let found: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    eprintln!(
        "timeline: first frame complete {} ms after the deep link; frames while panning \
         (ms): {}",
        found["firstTimelineMs"], found["panFrameMs"]
    );
    assert_eq!(found["pageErrors"], json!([]), "{found:#}");

    // What the page says the report holds.
    let events: u64 = idx.tracks.iter().map(|t| t.events).sum();
    let summary = found["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(&format!("{} tracks, {events} events", idx.tracks.len())),
        "{summary}"
    );
    let shown = found["range"].as_array().unwrap();
    assert!(
        close(shown[0].as_f64().unwrap(), range[0] as f64, 1.0),
        "{found:#}"
    );
    assert!(
        close(shown[1].as_f64().unwrap(), range[1] as f64, 1.0),
        "{found:#}"
    );
    assert!(found["drawnAtStart"].as_u64().unwrap() > 0, "{found:#}");

    // The kernel clicked: SQL's name, start and duration.
    let db = Connection::open(&source).unwrap();
    let (name, sql_start, sql_dur, correlation, pid): (String, i64, i64, i64, i64) = db
        .query_row(
            "SELECT s.value, k.start, k.end - k.start, k.correlationId, \
             (k.globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL k \
             JOIN StringIds s ON s.id = k.shortName WHERE k.rowid = ?1",
            [ev.rowid[e]],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    assert_eq!(found["detailName"], name.as_str(), "{found:#}");
    assert_eq!(found["detailStart"], sql_start, "{found:#}");
    assert_eq!(found["detailDurationNs"], sql_dur, "{found:#}");
    let url = found["urlAfterClick"].as_str().unwrap();
    assert!(url.contains(&format!("event={stream}.{e}")), "{url}");

    // The link to its launch: the API call with the same correlation id.
    let api: String = db
        .query_row(
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId \
             WHERE r.correlationId = ?1 AND ((r.globalTid >> 24) & 16777215) = ?2",
            [correlation, pid],
            |r| r.get(0),
        )
        .unwrap();
    let api = load::api_name(&api).to_owned();
    assert_eq!(found["relatedName"], api.as_str(), "{found:#}");
    assert_eq!(found["afterFollow"], api.as_str(), "{found:#}");

    // Zoom (W x3 = 0.7^3 of the span) and pan (D = 15% of the span).
    let ratio = found["zoomRatio"].as_f64().unwrap();
    assert!(close(ratio, 0.343, 0.002), "zoom ratio {ratio}");
    assert!(
        found["levelAfterZoom"].as_u64() < found["levelBeforeZoom"].as_u64(),
        "{found:#}"
    );
    let shift = found["panShiftNs"].as_f64().unwrap() / found["panSpanNs"].as_f64().unwrap();
    assert!(close(shift, 0.15, 0.005), "pan {shift}");
    let out_range = found["zoomedOut"].as_array().unwrap();
    assert!(
        close(out_range[0].as_f64().unwrap(), idx.start_ns as f64, 1.0),
        "{found:#}"
    );
    assert!(
        close(out_range[1].as_f64().unwrap(), idx.end_ns as f64, 1.0),
        "{found:#}"
    );

    // The selection's kernels equal SQL over the same range.
    let (a, b) = found["sel"].as_str().unwrap().split_once('_').unwrap();
    let (a, b): (i64, i64) = (a.parse().unwrap(), b.parse().unwrap());
    let rows = found["rangeRows"].as_array().unwrap();
    let oracle = kernels_in_range(&db, a, b);
    assert!(!oracle.is_empty(), "no kernels in the selection {a}..{b}");
    for (kernel, count, total) in &oracle {
        let row = rows
            .iter()
            .find(|r| r["name"] == kernel.as_str())
            .unwrap_or_else(|| panic!("{kernel} is not in the selection's table: {rows:?}"));
        assert_eq!(row["count"], *count, "{kernel}");
        assert_eq!(row["totalNs"], *total, "{kernel}");
    }

    // The reload found the same view in the URL.
    let before = found["rangeBeforeReload"].as_array().unwrap();
    let after = found["reloadRange"].as_array().unwrap();
    for i in 0..2 {
        assert!(
            close(before[i].as_f64().unwrap(), after[i].as_f64().unwrap(), 1.0),
            "{found:#}"
        );
    }
    assert_eq!(found["reloadDetail"], api.as_str(), "{found:#}");
    assert_eq!(found["reloadRangeRows"], rows.len(), "{found:#}");
    assert!(shots.join("timeline.png").is_file());

    // Next / previous match: what a brute-force walk over every event in (start, track, event)
    // order gives from the selected event, the view moved onto it; no match leaves the
    // selection and says so.
    let text = search_text(&idx.names[ev.name[e] as usize]).to_lowercase();
    let mut matches: Vec<(i64, u32, u32)> = Vec::new();
    for t in idx.tracks.iter().filter(|t| !t.kind.is_group()) {
        let te = &idx.events[t.id as usize];
        for i in 0..te.len() {
            if idx.names[te.name[i] as usize]
                .to_lowercase()
                .contains(&text)
            {
                matches.push((te.start[i], t.id, i as u32));
            }
        }
    }
    matches.sort_unstable();
    let key_of = |param: &Value| -> (i64, u32, u32) {
        let (t, i) = param.as_str().unwrap().split_once('.').unwrap();
        let (t, i): (u32, u32) = (t.parse().unwrap(), i.parse().unwrap());
        (idx.events[t as usize].start[i as usize], t, i)
    };
    let from = key_of(&found["searchFrom"]);
    let next = *matches.iter().find(|m| **m > from).expect("a later match");
    assert_eq!(key_of(&found["searchNext"]), next, "{found:#}");
    let prev = *matches
        .iter()
        .rev()
        .find(|m| **m < next)
        .expect("an earlier match");
    assert_eq!(key_of(&found["searchPrev"]), prev, "{found:#}");
    let view = found["searchNextView"].as_array().unwrap();
    let (vf, vt) = (view[0].as_f64().unwrap(), view[1].as_f64().unwrap());
    assert!(
        vf <= next.0 as f64 && (next.0 as f64) < vt,
        "the view {vf}..{vt} does not show the match at {}",
        next.0
    );
    assert!(
        found["searchNextStatus"]
            .as_str()
            .is_some_and(|s| s.contains("from the start")),
        "{found:#}"
    );
    assert!(
        found["searchNone"]
            .as_str()
            .is_some_and(|s| s.contains("no-such-name-zz")),
        "{found:#}"
    );
    assert_eq!(found["searchNoneEvent"], found["searchPrev"], "{found:#}");

    // "Download for Perfetto" saved exactly the trace the encoder makes of the report.
    assert_eq!(
        found["perfettoName"], "report1_default_0_gtls.perfetto-trace",
        "{found:#}"
    );
    let saved = std::fs::read(found["perfettoPath"].as_str().unwrap()).unwrap();
    let flows = flows::read(&load::open(&source).unwrap()).unwrap();
    let expected: Vec<u8> = Export::new(&idx, &flows).flatten().collect();
    assert!(
        saved == expected,
        "the saved trace ({} bytes) differs from the export ({} bytes)",
        saved.len(),
        expected.len()
    );
    assert!(
        found["perfettoStatus"]
            .as_str()
            .unwrap()
            .contains("ui.perfetto.dev"),
        "{found:#}"
    );
    platform.stop();
}

/// What the test types into the search box: the clicked kernel's name, first 24 characters, in
/// capitals (the search ignores case).
fn search_text(name: &str) -> String {
    name.chars().take(24).collect::<String>().to_uppercase()
}

fn platform_log(state: &std::path::Path) -> String {
    std::fs::read_to_string(state.join("controlplane.log"))
        .map(|l| l.lines().rev().take(30).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}
