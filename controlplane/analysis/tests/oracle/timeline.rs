//! Correctness of the GPU timeline recipes (`cuda_gpu_kern_hist`, `gpu_time_util`,
//! `gpu_gaps`) on every real nsys export: each recipe's table must equal its oracle
//! (tests/oracle/<recipe>.sql, run in current SQLite) row by row, integers equal and every
//! rounded value exactly the double nearest to the oracle's, unfiltered, with `--filter-time`
//! (the middle half of the report's kernel span), in other time units and with other
//! arguments. Included in recipe_oracle.rs.

use std::path::Path;

use nsight_analysis::{RecipeOutput, Value};

use super::common::{
    has_table, host, oracle::run, recipe, reports, short, sqlite3_json, testdata_dir,
};

const HIST_SQL: &str = include_str!("cuda_gpu_kern_hist.sql");
const UTIL_SQL: &str = include_str!("gpu_time_util.sql");
const GAPS_SQL: &str = include_str!("gpu_gaps.sql");
const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
const GPU_TABLES: [&str; 3] = [
    KERNEL,
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
];

/// Runs `sql` on `report` with `params` set (`.parameter set`).
fn oracle(
    report: &Path,
    sql: &str,
    params: &[(&str, String)],
) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let mut script = String::new();
    for (k, v) in params {
        script.push_str(&format!(".parameter set :{k} {v}\n"));
    }
    script.push_str(sql);
    sqlite3_json(report, &script)
}

fn window_params((lo, hi): (i64, i64)) -> Vec<(&'static str, String)> {
    vec![("lo", lo.to_string()), ("hi", hi.to_string())]
}

/// The middle half of the report's kernel span, as `--filter-time` and as `(lo, hi)`.
fn middle_half(report: &Path) -> (String, (i64, i64)) {
    let r = sqlite3_json(
        report,
        &format!("SELECT min(start) AS a, max(\"end\") AS b FROM {KERNEL}"),
    );
    let (a, b) = (r[0]["a"].as_i64().unwrap(), r[0]["b"].as_i64().unwrap());
    let (lo, hi) = (a + (b - a) / 4, b - (b - a) / 4);
    (format!("{lo}/{hi}"), (lo, hi))
}

fn int(row: &serde_json::Map<String, serde_json::Value>, k: &str) -> i64 {
    row[k].as_i64().unwrap_or_else(|| panic!("{k} in {row:?}"))
}

/// A time in ns as the recipe shows it in a unit of `nanos` ns.
fn time(ns: i64, nanos: f64) -> Value {
    if nanos == 1.0 {
        Value::Int(ns)
    } else {
        Value::Real(ns as f64 / nanos)
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Real(x), Value::Real(y)) => x == y,
        (Value::Text(x), Value::Text(y)) => x == y,
        _ => false,
    }
}

/// Asserts the only table of `out` is `name` with exactly the rows `want`; returns the count.
fn assert_rows(name: &str, report: &Path, out: &RecipeOutput, want: &[Vec<Value>]) -> usize {
    let at = format!("{name} on {}", short(report));
    assert_eq!(out.tables.len(), 1, "{at}: {:?}", out.notes);
    let table = &out.tables[0];
    assert_eq!(table.name, name);
    assert_eq!(table.rows.len(), want.len(), "{at}: row count");
    for (i, (row, want)) in table.rows.iter().zip(want).enumerate() {
        let equal = row.len() == want.len() && row.iter().zip(want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {row:?}\n  want {want:?}");
    }
    want.len()
}

fn check_hist(report: &Path, args: &[(&str, &str)], window: (i64, i64)) -> usize {
    let bins = args
        .iter()
        .find(|(k, _)| *k == "bins")
        .map_or("30", |(_, v)| v);
    let nanos = unit_nanos(args);
    let out = run("cuda_gpu_kern_hist", report, args);
    let mut params = window_params(window);
    params.push(("bins", bins.to_owned()));
    let want: Vec<Vec<Value>> = oracle(report, HIST_SQL, &params)
        .iter()
        .map(|r| {
            vec![
                Value::Int(int(r, "bin")),
                time(int(r, "min"), nanos),
                time(int(r, "max"), nanos),
                Value::Int(int(r, "num")),
                Value::Real(int(r, "pct10") as f64 / 10.0),
            ]
        })
        .collect();
    assert_eq!(out.figures.len(), usize::from(!want.is_empty()));
    assert_rows("cuda_gpu_kern_hist", report, &out, &want)
}

fn check_util(report: &Path, args: &[(&str, &str)], window: (i64, i64)) -> usize {
    let arg = |name: &str, default: &'static str| {
        args.iter()
            .find(|(k, _)| *k == name)
            .map_or(default, |(_, v)| v)
            .to_owned()
    };
    let nanos = unit_nanos(args);
    let out = run("gpu_time_util", report, args);
    let mut params = window_params(window);
    params.push(("chunks", arg("chunks", "30")));
    params.push(("threshold", arg("threshold", "50")));
    let want: Vec<Vec<Value>> = oracle(report, UTIL_SQL, &params)
        .iter()
        .map(|r| {
            vec![
                Value::Int(int(r, "pid")),
                Value::Int(int(r, "device")),
                Value::Int(int(r, "chunk")),
                time(int(r, "start"), nanos),
                time(int(r, "end"), nanos),
                time(int(r, "dur"), nanos),
                Value::Real(int(r, "use10") as f64 / 10.0),
            ]
        })
        .collect();
    assert_rows("gpu_time_util", report, &out, &want)
}

fn check_gaps(report: &Path, args: &[(&str, &str)], window: (i64, i64)) -> usize {
    let gap = args
        .iter()
        .find(|(k, _)| *k == "gap")
        .map_or("500", |(_, v)| v);
    let nanos = unit_nanos(args);
    let out = run("gpu_gaps", report, args);
    let mut ops = vec!["SELECT NULL, NULL, NULL, NULL WHERE 0".to_owned()];
    for t in GPU_TABLES {
        if has_table(report, t) {
            ops.push(format!(
                "SELECT globalPid, deviceId, start, \"end\" FROM {t}"
            ));
        } else {
            let note = format!("table {t} not in this report");
            assert!(
                out.notes.iter().any(|n| n.contains(&note)),
                "gpu_gaps on {}: {:?}",
                short(report),
                out.notes
            );
        }
    }
    let sql = GAPS_SQL.replace("@OPS@", &ops.join(" UNION ALL "));
    let mut params = window_params(window);
    params.push(("gap", gap.to_owned()));
    let want: Vec<Vec<Value>> = oracle(report, &sql, &params)
        .iter()
        .map(|r| {
            vec![
                Value::Int(int(r, "pid")),
                Value::Int(int(r, "device")),
                time(int(r, "start"), nanos),
                time(int(r, "end"), nanos),
                time(int(r, "dur"), nanos),
            ]
        })
        .collect();
    assert_rows("gpu_gaps", report, &out, &want)
}

fn unit_nanos(args: &[(&str, &str)]) -> f64 {
    match args.iter().find(|(k, _)| *k == "timeunit").map(|(_, v)| *v) {
        None | Some("nsec") => 1.0,
        Some("usec") => 1e3,
        Some("msec") => 1e6,
        Some("sec") => 1e9,
        Some(other) => panic!("unit {other}"),
    }
}

const ALL: (i64, i64) = (i64::MIN, i64::MAX);

type Check = fn(&Path, &[(&str, &str)], (i64, i64)) -> usize;

/// Runs `check` on every report with `args`, unfiltered and with the middle half of the
/// kernel span; returns how many reports had rows unfiltered.
fn every_report(name: &str, check: Check, args: &[(&str, &str)]) -> usize {
    let mut with_rows = 0;
    for report in reports() {
        let n = check(&report, args, ALL);
        let (filter, window) = middle_half(&report);
        let mut filtered = args.to_vec();
        filtered.push(("filter-time", &filter));
        let m = check(&report, &filtered, window);
        println!(
            "{name:<20} {args:?} {:<42} {n} rows, {m} in the middle half",
            short(&report)
        );
        with_rows += usize::from(n > 0);
    }
    with_rows
}

#[test]
fn cuda_gpu_kern_hist_matches_the_oracle_on_every_report() {
    let all = reports().len();
    assert_eq!(every_report("cuda_gpu_kern_hist", check_hist, &[]), all);
    for args in [
        &[("bins", "7"), ("timeunit", "usec")][..],
        &[("bins", "1")],
        &[("bins", "500"), ("timeunit", "msec")],
    ] {
        assert_eq!(every_report("cuda_gpu_kern_hist", check_hist, args), all);
    }
}

#[test]
fn gpu_time_util_matches_the_oracle_on_every_report() {
    let all = reports().len();
    every_report("gpu_time_util", check_util, &[]);
    // Every part shown: each report has kernels, so rows.
    assert_eq!(
        every_report("gpu_time_util", check_util, &[("threshold", "1000")]),
        all
    );
    for args in [
        &[("chunks", "7"), ("threshold", "12.5"), ("timeunit", "msec")][..],
        &[("chunks", "1"), ("threshold", "101"), ("timeunit", "sec")],
        &[("chunks", "1000"), ("threshold", "80")],
    ] {
        every_report("gpu_time_util", check_util, args);
    }
}

#[test]
fn gpu_gaps_matches_the_oracle_on_every_report() {
    every_report("gpu_gaps", check_gaps, &[]);
    // 10 us: every report but extrap/con_kernel (its operations follow each other closer).
    assert_eq!(
        every_report("gpu_gaps", check_gaps, &[("gap", "0.01")]),
        reports().len() - 1
    );
    for args in [
        &[("gap", "1"), ("timeunit", "usec")][..],
        &[("gap", "0"), ("timeunit", "sec")],
    ] {
        every_report("gpu_gaps", check_gaps, args);
    }
}

#[test]
fn gpu_timeline_recipes_note_what_a_report_lacks() {
    // A SQLite file with StringIds and nothing else: notes and empty tables, no failure.
    let db =
        std::env::temp_dir().join(format!("nsight-empty-export-{}.sqlite", std::process::id()));
    let _ = std::fs::remove_file(&db);
    let status = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg("CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT);")
        .status()
        .unwrap();
    assert!(status.success());
    for (name, tables) in [
        ("cuda_gpu_kern_hist", &GPU_TABLES[..1]),
        ("gpu_time_util", &GPU_TABLES[..1]),
        ("gpu_gaps", &GPU_TABLES[..]),
    ] {
        let out = run(name, &db, &[]);
        assert_eq!(out.tables.len(), 1, "{name}");
        assert!(out.tables[0].rows.is_empty(), "{name}");
        for t in tables {
            let note = format!("table {t} not in this report");
            assert!(
                out.notes.iter().any(|n| n.contains(&note)),
                "{name}: {:?}",
                out.notes
            );
        }
    }
    std::fs::remove_file(&db).unwrap();
}

#[test]
fn gpu_timeline_recipes_refuse_bad_arguments() {
    let report = testdata_dir().join("nsys-ai/mock.sqlite");
    for (name, arg, value, want) in [
        ("cuda_gpu_kern_hist", "bins", "0", "--bins 0"),
        ("cuda_gpu_kern_hist", "bins", "many", "--bins many"),
        ("gpu_time_util", "chunks", "-3", "--chunks -3"),
        ("gpu_time_util", "threshold", "half", "--threshold half"),
        ("gpu_gaps", "gap", "-1", "--gap -1"),
        ("gpu_gaps", "timeunit", "hours", "--timeunit hours"),
        ("gpu_gaps", "filter-time", "9/1", "--filter-time 9/1"),
    ] {
        let args = vec![(arg.to_owned(), value.to_owned())];
        let err = host().run(&recipe(name), &report, &args).unwrap_err();
        assert!(err.to_string().contains(want), "{name}: {err}");
    }
}
