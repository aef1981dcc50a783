//! `cuda_kern_exec_sum` on every report against its oracle (tests/oracle/cuda_kern_exec_sum.sql,
//! run in current SQLite): the launches joined in SQL, every statistic of the four phases, the
//! same rows in the same order; unfiltered, with `--filter-time` (the middle half of the kernel
//! span), with `--name base` and `--timeunit usec`.

use std::path::Path;

use nsight_analysis::Value;
use serde_json::{Map, Value as Json};

use super::common::{
    has_column, has_table,
    oracle::{run, ALL},
    reports, short, sqlite3_json,
};

const ORACLE: &str = include_str!("cuda_kern_exec_sum.sql");
const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";

fn oracle(report: &Path, name_column: &str, (lo, hi): (i64, i64)) -> Vec<Map<String, Json>> {
    sqlite3_json(
        report,
        &format!(
            ".parameter set :lo {lo}\n.parameter set :hi {hi}\n{}",
            ORACLE.replace("NAME_COLUMN", name_column)
        ),
    )
}

/// Values equal, reals bit for bit.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Real(x), Value::Real(y)) => x == y,
        (Value::Text(x), Value::Text(y)) => x == y,
        _ => false,
    }
}

/// The row the recipe must give for one oracle row; `unit`: ns per time unit.
fn expected(o: &Map<String, Json>, unit: f64) -> Vec<Value> {
    let int = |k: &str| o[k].as_i64().unwrap_or_else(|| panic!("{k} in {o:?}"));
    let mut row = vec![
        Value::Int(int("pid")),
        Value::Int(int("tid")),
        Value::Int(int("dev")),
        Value::Int(int("count")),
        Value::Int(int("qcount")),
    ];
    for phase in ["t", "a", "q", "k"] {
        for stat in ["avg10", "med10", "min", "max", "sd10"] {
            let key = format!("{phase}_{stat}");
            row.push(match o[&key].as_i64() {
                None => Value::Null,
                Some(v) if stat.ends_with("10") => Value::Real(v as f64 / 10.0 / unit),
                Some(v) if unit == 1.0 => Value::Int(v),
                Some(v) => Value::Real(v as f64 / unit),
            });
        }
    }
    for k in ["api", "kern"] {
        row.push(Value::Text(o[k].as_str().unwrap().to_owned()));
    }
    row
}

/// Runs the recipe with `args` and compares with the oracle; the row count.
fn check(report: &Path, args: &[(&str, &str)], name_column: &str, window: (i64, i64)) -> usize {
    let unit = match args.iter().find(|(k, _)| *k == "timeunit") {
        Some((_, "usec")) => 1e3,
        _ => 1.0,
    };
    let out = run("cuda_kern_exec_sum", report, args);
    assert_eq!(out.tables.len(), 1);
    let table = &out.tables[0];
    assert_eq!(table.columns.len(), 27);
    if !(has_table(report, KERNEL) && has_table(report, RUNTIME)) {
        assert!(table.rows.is_empty());
        assert!(out.notes.iter().any(|n| n.contains("not in this report")));
        return 0;
    }
    let want = oracle(report, name_column, window);
    let at = format!("cuda_kern_exec_sum {args:?} on {}", short(report));
    assert_eq!(table.rows.len(), want.len(), "{at}: row count");
    for (i, (got, want)) in table.rows.iter().zip(&want).enumerate() {
        let want = expected(want, unit);
        let equal = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {got:?}\n  want {want:?}");
    }
    if !table.rows.is_empty() {
        assert_eq!(out.figures.len(), 1, "{at}");
    }
    want.len()
}

#[test]
fn cuda_kern_exec_sum_matches_the_oracle_on_every_report() {
    let mut with_rows = 0;
    for report in reports() {
        let n = check(&report, &[], "demangledName", ALL);
        println!("cuda_kern_exec_sum {:<45} {n} rows", short(&report));
        with_rows += usize::from(n > 0);
        let base = if has_column(&report, KERNEL, "shortName") {
            "shortName"
        } else {
            "demangledName"
        };
        check(
            &report,
            &[("name", "base"), ("timeunit", "usec")],
            base,
            ALL,
        );
        // The middle half of the kernels' span.
        let span = sqlite3_json(
            &report,
            &format!("SELECT min(start) AS lo, max(\"end\") AS hi FROM {KERNEL}"),
        );
        let (lo, hi) = (
            span[0]["lo"].as_i64().unwrap(),
            span[0]["hi"].as_i64().unwrap(),
        );
        let (lo, hi) = (lo + (hi - lo) / 4, hi - (hi - lo) / 4);
        let filter = format!("{lo}/{hi}");
        check(
            &report,
            &[("filter-time", &filter)],
            "demangledName",
            (lo, hi),
        );
    }
    // Every report in testdata has kernels launched through the CUDA runtime.
    assert_eq!(with_rows, reports().len());
}

#[test]
fn cuda_kern_exec_sum_refuses_bad_arguments() {
    let report = super::common::testdata_dir().join("nsys-ai/mock.sqlite");
    let host = super::common::host();
    for (args, want) in [
        (vec![("name", "nvtx-name")], "--name nvtx-name"),
        (vec![("timeunit", "weeks")], "--timeunit weeks"),
        (vec![("bogus", "1")], "unknown argument --bogus"),
    ] {
        let args: Vec<(String, String)> = args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let err = host
            .run(&super::common::recipe("cuda_kern_exec_sum"), &report, &args)
            .unwrap_err();
        assert!(err.to_string().contains(want), "{err}");
    }
}
