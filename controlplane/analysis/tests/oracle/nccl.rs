//! `nccl_sum` and `nccl_gpu_time_util_map` on every real nsys export against their oracles
//! (tests/oracle/nccl_sum.sql, nccl_kern_sum.sql and nccl_gpu_time_util_map.sql, run in
//! current SQLite): the same rows in the same order, integers equal, every rounded value
//! exactly the double nearest to the oracle's; unfiltered, with `--filter-time` (the middle
//! half of the report's kernel span), another `--name`, `--bins` and time unit. The two
//! `mfu_2gpu` exports have NCCL (kernels and NCCL's NVTX ranges); every other export must give
//! the notes, empty tables and no figure. Included in recipe_oracle.rs.

use std::path::Path;

use nsight_analysis::{RecipeOutput, Value};

use super::common::{
    has_table, host,
    oracle::{assert_matches, run, Case, Kind},
    recipe, reports, short, sqlite3_json,
};

const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
const MAP_SQL: &str = include_str!("nccl_gpu_time_util_map.sql");
/// The exports of shared/testdata/nsys with NCCL kernels and NCCL NVTX ranges.
const WITH_NCCL: usize = 2;

fn demangled(_: &Path, sql: &str) -> String {
    sql.replace("NAME_COLUMN", "demangledName")
}

fn base(_: &Path, sql: &str) -> String {
    sql.replace("NAME_COLUMN", "shortName")
}

fn as_is(_: &Path, sql: &str) -> String {
    sql.to_owned()
}

const FUNCTIONS: Case = Case {
    recipe: "nccl_sum",
    oracle: include_str!("nccl_sum.sql"),
    tables: &["NVTX_EVENTS"],
    labels: &["name"],
    kind: Kind::Time,
    fill: as_is,
};
const KERNELS: Case = Case {
    recipe: "nccl_sum",
    oracle: include_str!("nccl_kern_sum.sql"),
    tables: &[KERNEL],
    labels: &["name"],
    kind: Kind::Time,
    fill: demangled,
};
const KERNELS_BASE: Case = Case {
    fill: base,
    ..KERNELS
};

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

fn unit_nanos(args: &[(&str, &str)]) -> f64 {
    match args.iter().find(|(k, _)| *k == "timeunit").map(|(_, v)| *v) {
        None | Some("nsec") => 1.0,
        Some("usec") => 1e3,
        Some("msec") => 1e6,
        Some(other) => panic!("unit {other}"),
    }
}

const ALL: (i64, i64) = (i64::MIN, i64::MAX);

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Real(x), Value::Real(y)) => x == y,
        (Value::Text(x), Value::Text(y)) => x == y,
        _ => false,
    }
}

/// Checks one `nccl_sum` run; returns the rows of (functions, kernels).
fn check_sum(
    report: &Path,
    args: &[(&str, &str)],
    window: (i64, i64),
    kernels: &Case,
) -> (usize, usize) {
    let out = run("nccl_sum", report, args);
    let at = format!("nccl_sum {args:?} on {}", short(report));
    assert_eq!(out.tables.len(), 2, "{at}: {:?}", out.notes);
    assert_eq!(out.tables[0].name, "nccl_sum");
    assert_eq!(out.tables[1].name, "nccl_kern_sum");
    let names: Vec<&str> = out.tables[0]
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let u = match args.iter().find(|(k, _)| *k == "timeunit").map(|(_, v)| *v) {
        Some("usec") => "us",
        Some("msec") => "ms",
        _ => "ns",
    };
    assert_eq!(
        names,
        [
            "Time (%)".to_owned(),
            format!("Total Time ({u})"),
            "Instances".to_owned(),
            format!("Avg ({u})"),
            format!("Med ({u})"),
            format!("Min ({u})"),
            format!("Max ({u})"),
            format!("StdDev ({u})"),
            "Name".to_owned(),
        ],
        "{at}"
    );
    let unit = unit_nanos(args);
    let f = if has_table(report, "NVTX_EVENTS") {
        assert_matches(
            &FUNCTIONS,
            report,
            &out.tables[0],
            FUNCTIONS.oracle,
            window,
            unit,
        )
    } else {
        assert!(out.tables[0].rows.is_empty(), "{at}");
        0
    };
    let k = assert_matches(
        kernels,
        report,
        &out.tables[1],
        kernels.oracle,
        window,
        unit,
    );
    if f == 0 {
        assert!(
            out.notes
                .iter()
                .any(|n| n.starts_with("no NCCL NVTX ranges")
                    || n.contains("table NVTX_EVENTS not in this report")),
            "{at}: {:?}",
            out.notes
        );
    }
    if k == 0 {
        assert!(
            out.notes.iter().any(|n| n.starts_with("no NCCL kernels")),
            "{at}: {:?}",
            out.notes
        );
    }
    assert_eq!(
        out.figures.len(),
        usize::from(f > 0) + usize::from(k > 0),
        "{at}"
    );
    (f, k)
}

#[test]
fn nccl_sum_matches_the_oracles_on_every_report() {
    let (mut functions, mut kernels) = (0, 0);
    for report in reports() {
        let (f, k) = check_sum(&report, &[], ALL, &KERNELS);
        println!("nccl_sum {:<45} {f} functions, {k} kernels", short(&report));
        functions += usize::from(f > 0);
        kernels += usize::from(k > 0);
        let (filter, window) = middle_half(&report);
        let args = [
            ("name", "base"),
            ("timeunit", "usec"),
            ("filter-time", filter.as_str()),
        ];
        let (f, k) = check_sum(&report, &args, window, &KERNELS_BASE);
        println!("  in the middle half, base names, usec: {f} functions, {k} kernels");
    }
    assert_eq!((functions, kernels), (WITH_NCCL, WITH_NCCL));
}

/// Checks one `nccl_gpu_time_util_map` run against the oracle; returns the row count.
fn check_map(report: &Path, args: &[(&str, &str)], window: (i64, i64)) -> usize {
    let bins = args
        .iter()
        .find(|(k, _)| *k == "bins")
        .map_or("30", |(_, v)| v);
    let nanos = unit_nanos(args);
    let out = run("nccl_gpu_time_util_map", report, args);
    let script = format!(
        ".parameter set :lo {}\n.parameter set :hi {}\n.parameter set :bins {bins}\n{MAP_SQL}",
        window.0, window.1
    );
    let int = |r: &serde_json::Map<String, serde_json::Value>, k: &str| {
        r[k].as_i64().unwrap_or_else(|| panic!("{k} in {r:?}"))
    };
    let time = |ns: i64| {
        if nanos == 1.0 {
            Value::Int(ns)
        } else {
            Value::Real(ns as f64 / nanos)
        }
    };
    let want: Vec<Vec<Value>> = sqlite3_json(report, &script)
        .iter()
        .map(|r| {
            let mut row = vec![
                Value::Int(int(r, "pid")),
                Value::Int(int(r, "dev")),
                Value::Int(int(r, "bin")),
                time(int(r, "start")),
                time(int(r, "end")),
            ];
            row.extend(
                ["all10", "nccl10", "compute10", "overlap10"]
                    .iter()
                    .map(|k| Value::Real(int(r, k) as f64 / 10.0)),
            );
            row
        })
        .collect();
    assert_map(report, &out, &want, args)
}

fn assert_map(
    report: &Path,
    out: &RecipeOutput,
    want: &[Vec<Value>],
    args: &[(&str, &str)],
) -> usize {
    let at = format!("nccl_gpu_time_util_map {args:?} on {}", short(report));
    assert_eq!(out.tables.len(), 1, "{at}: {:?}", out.notes);
    let table = &out.tables[0];
    assert_eq!(table.name, "nccl_gpu_time_util_map");
    let headers: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        &headers[5..],
        ["All (%)", "NCCL (%)", "Compute (%)", "Overlap (%)"]
    );
    assert_eq!(table.rows.len(), want.len(), "{at}: row count");
    for (i, (row, want)) in table.rows.iter().zip(want).enumerate() {
        let equal = row.len() == want.len() && row.iter().zip(want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {row:?}\n  want {want:?}");
    }
    if want.is_empty() {
        assert!(out.figures.is_empty(), "{at}");
        assert!(
            out.notes.iter().any(|n| n.starts_with("no NCCL kernels")),
            "{at}: {:?}",
            out.notes
        );
    } else {
        let names: Vec<&str> = out.figures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "nccl_gpu_time_util_map_all",
                "nccl_gpu_time_util_map_nccl",
                "nccl_gpu_time_util_map_compute",
                "nccl_gpu_time_util_map_overlap",
            ],
            "{at}"
        );
    }
    want.len()
}

#[test]
fn nccl_gpu_time_util_map_matches_the_oracle_on_every_report() {
    for args in [
        &[][..],
        &[("bins", "7"), ("timeunit", "usec")],
        &[("bins", "1")],
        &[("bins", "1000"), ("timeunit", "msec")],
    ] {
        let mut with_rows = 0;
        for report in reports() {
            let n = check_map(&report, args, ALL);
            let (filter, window) = middle_half(&report);
            let mut filtered = args.to_vec();
            filtered.push(("filter-time", &filter));
            let m = check_map(&report, &filtered, window);
            println!(
                "nccl_gpu_time_util_map {args:?} {:<42} {n} rows, {m} in the middle half",
                short(&report)
            );
            with_rows += usize::from(n > 0);
        }
        assert_eq!(with_rows, WITH_NCCL, "{args:?}");
    }
}

#[test]
fn the_nccl_recipes_refuse_bad_arguments() {
    let report = &reports()[0];
    let refused = |name: &str, args: &[(&str, &str)], want: &str| {
        let args: Vec<(String, String)> = args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let err = host()
            .run(&recipe(name), report, &args)
            .expect_err("refused")
            .to_string();
        assert!(err.contains(want), "{name} {args:?}: {err}");
    };
    refused(
        "nccl_sum",
        &[("name", "short")],
        "expected demangled, base or mangled",
    );
    refused("nccl_sum", &[("timeunit", "days")], "days");
    refused("nccl_sum", &[("bins", "3")], "bins");
    refused("nccl_gpu_time_util_map", &[("bins", "0")], "--bins 0");
    refused(
        "nccl_gpu_time_util_map",
        &[("bins", "10001")],
        "--bins 10001",
    );
    refused("nccl_gpu_time_util_map", &[("name", "base")], "name");
}
