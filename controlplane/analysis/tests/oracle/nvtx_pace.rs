//! `nvtx_pace` on every report against its oracles (tests/oracle/nvtx_pace.sql and
//! cuda_gpu_kern_pace_stats.sql, run in current SQLite): the same iterations in the same
//! order with every field equal, and the same statistics; for the report's most frequent
//! range text, with `--timeunit usec` and with `--filter-time`; reports without NVTX give the
//! note; a missing or unknown `--name` (the error lists the ranges).

use std::path::Path;

use nsight_analysis::Value;
use serde_json::{Map, Value as Json};

use super::common::{
    has_column, has_table,
    oracle::{run, ALL},
    reports, short, sqlite3_json,
};

const ORACLE: &str = include_str!("nvtx_pace.sql");
const STATS: &str = include_str!("cuda_gpu_kern_pace_stats.sql");
const NVTX: &str = "NVTX_EVENTS";

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Real(x), Value::Real(y)) => x == y,
        (Value::Text(x), Value::Text(y)) => x == y,
        _ => false,
    }
}

/// The range text over `e`, for the columns `report` has.
fn text(report: &Path) -> &'static str {
    match (
        has_column(report, NVTX, "textId"),
        has_column(report, NVTX, "text"),
    ) {
        (true, true) => "coalesce((SELECT value FROM StringIds WHERE id = e.textId), e.text)",
        (true, false) => "(SELECT value FROM StringIds WHERE id = e.textId)",
        (false, true) => "e.text",
        (false, false) => "NULL",
    }
}

fn oracle(report: &Path) -> String {
    let types = if has_table(report, "ENUM_NSYS_EVENT_TYPE") {
        "SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ('NvtxPushPopRange', \
         'NvtxtPushPopRange', 'NvtxStartEndRange', 'NvtxtStartEndRange')"
    } else {
        "VALUES (59), (70), (60), (71)"
    };
    ORACLE
        .replace("@TYPES@", types)
        .replace("@TEXT@", text(report))
}

fn script(name: &str, (lo, hi): (i64, i64), sql: &str) -> String {
    format!(".parameter set :lo {lo}\n.parameter set :hi {hi}\n.parameter set :name {name}\n{sql}")
}

fn time(o: &Map<String, Json>, k: &str, unit: f64) -> Value {
    match o[k].as_i64() {
        None => Value::Null,
        Some(v) if unit == 1.0 => Value::Int(v),
        Some(v) => Value::Real(v as f64 / unit),
    }
}

fn int(o: &Map<String, Json>, k: &str) -> Value {
    o[k].as_i64().map_or(Value::Null, Value::Int)
}

fn assert_rows(at: &str, got: &[Vec<Value>], want: &[Vec<Value>]) {
    assert_eq!(got.len(), want.len(), "{at}: row count");
    for (i, (got, want)) in got.iter().zip(want).enumerate() {
        let equal = got.len() == want.len() && got.iter().zip(want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {got:?}\n  want {want:?}");
    }
}

fn check(report: &Path, name: &str, args: &[(&str, &str)], window: (i64, i64)) -> usize {
    let unit = if args.contains(&("timeunit", "usec")) {
        1e3
    } else {
        1.0
    };
    let mut all = vec![("name", name)];
    all.extend_from_slice(args);
    let out = run("nvtx_pace", report, &all);
    let at = format!("nvtx_pace {all:?} on {}", short(report));
    assert_eq!(out.tables.len(), 2, "{at}");
    let sql = oracle(report);
    let rows = sqlite3_json(report, &script(name, window, &sql));
    let want: Vec<Vec<Value>> = rows
        .iter()
        .map(|o| {
            vec![
                int(o, "it"),
                time(o, "start", unit),
                time(o, "fin", unit),
                time(o, "dur", unit),
                time(o, "gap", unit),
                time(o, "accum", unit),
                int(o, "pid"),
                int(o, "tid"),
                int(o, "domain"),
            ]
        })
        .collect();
    assert_rows(&at, &out.tables[0].rows, &want);
    let ctes = sql
        .rsplit_once("SELECT * FROM pace")
        .expect("the oracle ends with SELECT * FROM pace")
        .0;
    let stats = sqlite3_json(report, &script(name, window, &format!("{ctes}\n{STATS}")));
    let tenths =
        |o: &Map<String, Json>, k: &str| Value::Real(o[k].as_i64().unwrap() as f64 / 10.0 / unit);
    let want: Vec<Vec<Value>> = stats
        .iter()
        .map(|o| {
            vec![
                Value::Text(o["measure"].as_str().unwrap().to_owned()),
                int(o, "num"),
                tenths(o, "avg10"),
                tenths(o, "med10"),
                time(o, "min", unit),
                time(o, "max", unit),
                tenths(o, "sd10"),
            ]
        })
        .collect();
    assert_rows(&format!("{at} (stats)"), &out.tables[1].rows, &want);
    assert_eq!(
        out.figures.len(),
        usize::from(rows.len() > 1),
        "{at}: figures"
    );
    rows.len()
}

/// The most frequent range text (ties: the smaller text).
fn most_frequent(report: &Path) -> Option<String> {
    let types = if has_table(report, "ENUM_NSYS_EVENT_TYPE") {
        "SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ('NvtxPushPopRange', \
         'NvtxtPushPopRange', 'NvtxStartEndRange', 'NvtxtStartEndRange')"
    } else {
        "VALUES (59), (70), (60), (71)"
    };
    let rows = sqlite3_json(
        report,
        &format!(
            "SELECT {} AS name, count(*) AS n FROM {NVTX} AS e \
             WHERE e.eventType IN ({types}) AND e.\"end\" IS NOT NULL AND name IS NOT NULL \
             GROUP BY name ORDER BY n DESC, name LIMIT 1",
            text(report)
        ),
    );
    rows.first()
        .and_then(|r| r["name"].as_str())
        .map(str::to_owned)
}

#[test]
fn nvtx_pace_matches_the_oracle_on_every_report() {
    let mut checked = 0;
    for report in reports() {
        if !has_table(&report, NVTX) {
            let out = run("nvtx_pace", &report, &[("name", "x")]);
            assert!(out.tables.iter().all(|t| t.rows.is_empty()));
            assert!(
                out.notes
                    .iter()
                    .any(|n| n.contains("table NVTX_EVENTS not in this report")),
                "{}: {:?}",
                short(&report),
                out.notes
            );
            continue;
        }
        let Some(name) = most_frequent(&report) else {
            continue;
        };
        let n = check(&report, &name, &[], ALL);
        println!("nvtx_pace {:<45} {n} iterations of {name}", short(&report));
        assert!(n > 0, "{}", short(&report));
        checked += 1;
        check(&report, &name, &[("timeunit", "usec")], ALL);
        let span = sqlite3_json(
            &report,
            &format!("SELECT min(start) AS lo, max(\"end\") AS hi FROM {NVTX}"),
        );
        let (lo, hi) = (
            span[0]["lo"].as_i64().unwrap(),
            span[0]["hi"].as_i64().unwrap(),
        );
        let (lo, hi) = (lo + (hi - lo) / 4, hi - (hi - lo) / 4);
        check(
            &report,
            &name,
            &[("filter-time", &format!("{lo}/{hi}"))],
            (lo, hi),
        );
    }
    assert!(checked >= 5, "only {checked} reports with NVTX ranges");
}

#[test]
fn nvtx_pace_refuses_a_missing_or_unknown_name_and_lists_the_ranges() {
    let report = reports()
        .into_iter()
        .find(|r| short(r).contains("concurrent/profile1"))
        .expect("extrap/concurrent/profile1.sqlite in testdata");
    let component = super::common::recipe("nvtx_pace");
    let host = super::common::host();
    let err = |args: &[(&str, &str)]| {
        let args: Vec<(String, String)> = args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        host.run(&component, &report, &args)
            .expect_err("the recipe must refuse")
            .to_string()
    };
    let listed = "the report's NVTX ranges, most instances first: \"main\" (1)";
    let missing = err(&[]);
    assert!(missing.contains("needs --name RANGE"), "{missing}");
    assert!(missing.contains(listed), "{missing}");
    let unknown = err(&[("name", "nope")]);
    assert!(
        unknown.contains("no NVTX range named \"nope\" in this report"),
        "{unknown}"
    );
    assert!(unknown.contains(listed), "{unknown}");
    let out = run(
        "nvtx_pace",
        &report,
        &[("name", "main"), ("filter-time", "0/1")],
    );
    assert!(out.tables.iter().all(|t| t.rows.is_empty()), "{out:?}");
    assert!(
        out.notes
            .iter()
            .any(|n| n.contains("has no instance inside the time window")),
        "{:?}",
        out.notes
    );
}
