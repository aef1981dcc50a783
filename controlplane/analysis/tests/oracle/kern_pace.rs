//! `cuda_gpu_kern_pace` on every report against its oracles (tests/oracle/cuda_gpu_kern_pace.sql
//! and cuda_gpu_kern_pace_stats.sql, run in current SQLite): the same iterations in the same
//! order with every field equal, and the same statistics; for the report's most frequent
//! kernel by demangled name and by short name, with `--timeunit usec` and with
//! `--filter-time`; the figure; a missing or unknown `--name` (the error lists the kernels).

use std::path::Path;

use nsight_analysis::Value;
use serde_json::{Map, Value as Json};

use super::common::{
    has_table,
    oracle::{run, ALL},
    reports, short, sqlite3_json,
};

const ORACLE: &str = include_str!("cuda_gpu_kern_pace.sql");
const STATS: &str = include_str!("cuda_gpu_kern_pace_stats.sql");
const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Real(x), Value::Real(y)) => x == y,
        (Value::Text(x), Value::Text(y)) => x == y,
        _ => false,
    }
}

/// The iteration oracle without its last line: the CTEs the statistics oracle continues.
fn ctes() -> &'static str {
    ORACLE
        .rsplit_once("SELECT * FROM pace")
        .expect("the iteration oracle ends with SELECT * FROM pace")
        .0
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

/// Runs the recipe for kernel `name` and compares both tables with the oracles; returns the
/// number of iterations.
fn check(report: &Path, name: &str, args: &[(&str, &str)], window: (i64, i64)) -> usize {
    let unit = if args.contains(&("timeunit", "usec")) {
        1e3
    } else {
        1.0
    };
    let mut all = vec![("name", name)];
    all.extend_from_slice(args);
    let out = run("cuda_gpu_kern_pace", report, &all);
    let at = format!("cuda_gpu_kern_pace {all:?} on {}", short(report));
    assert_eq!(out.tables.len(), 2, "{at}");
    let rows = sqlite3_json(report, &script(name, window, ORACLE));
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
                int(o, "device"),
                int(o, "stream"),
            ]
        })
        .collect();
    assert_rows(&at, &out.tables[0].rows, &want);
    let stats = sqlite3_json(
        report,
        &script(name, window, &format!("{}\n{STATS}", ctes())),
    );
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
    if let Some(f) = out.figures.first() {
        assert!(
            f.svg.starts_with("<svg ") && f.svg.ends_with("</svg>"),
            "{at}"
        );
    }
    rows.len()
}

/// The most frequent kernel name of `column` (ties: the smaller name).
fn most_frequent(report: &Path, column: &str) -> Option<String> {
    let rows = sqlite3_json(
        report,
        &format!(
            "SELECT s.value AS name, count(*) AS n FROM {KERNEL} AS k \
             JOIN StringIds AS s ON s.id = k.{column} GROUP BY s.value ORDER BY n DESC, name \
             LIMIT 1"
        ),
    );
    rows.first()
        .and_then(|r| r["name"].as_str())
        .map(str::to_owned)
}

#[test]
fn cuda_gpu_kern_pace_matches_the_oracle_on_every_report() {
    let mut checked = 0;
    for report in reports() {
        if !has_table(&report, KERNEL) {
            continue;
        }
        let Some(name) = most_frequent(&report, "demangledName") else {
            continue;
        };
        let n = check(&report, &name, &[], ALL);
        println!(
            "cuda_gpu_kern_pace {:<45} {n} iterations of {name}",
            short(&report)
        );
        assert!(n > 0, "{}", short(&report));
        checked += 1;
        check(&report, &name, &[("timeunit", "usec")], ALL);
        if let Some(base) = most_frequent(&report, "shortName") {
            let m = check(&report, &base, &[], ALL);
            assert!(m > 0, "{}: short name {base}", short(&report));
        }
        let span = sqlite3_json(
            &report,
            &format!("SELECT min(start) AS lo, max(\"end\") AS hi FROM {KERNEL}"),
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
    assert!(checked >= 10, "only {checked} reports with kernels");
}

#[test]
fn cuda_gpu_kern_pace_refuses_a_missing_or_unknown_name_and_lists_the_kernels() {
    let report = reports()
        .into_iter()
        .find(|r| short(r).contains("con_kernel"))
        .expect("extrap/con_kernel.sqlite in testdata");
    let component = super::common::recipe("cuda_gpu_kern_pace");
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
    let listed = "the report's kernels, most instances first: \
                  \"test0(double *, unsigned long long, unsigned long long)\" (3)";
    let missing = err(&[]);
    assert!(missing.contains("needs --name KERNEL"), "{missing}");
    assert!(missing.contains(listed), "{missing}");
    let unknown = err(&[("name", "nope")]);
    assert!(
        unknown.contains("no kernel named \"nope\" in this report"),
        "{unknown}"
    );
    assert!(unknown.contains(listed), "{unknown}");
    let bad_unit = err(&[("name", "test0"), ("timeunit", "years")]);
    assert!(bad_unit.contains("years"), "{bad_unit}");
    let unknown_arg = err(&[("name", "test0"), ("bins", "3")]);
    assert!(unknown_arg.contains("bins"), "{unknown_arg}");
    let name = "test0(double *, unsigned long long, unsigned long long)";
    let out = run(
        "cuda_gpu_kern_pace",
        &report,
        &[("name", name), ("filter-time", "0/1")],
    );
    assert!(out.tables.iter().all(|t| t.rows.is_empty()), "{out:?}");
    assert!(out.figures.is_empty());
    assert!(
        out.notes
            .iter()
            .any(|n| n.contains("has no instance inside the time window")),
        "{:?}",
        out.notes
    );
}
