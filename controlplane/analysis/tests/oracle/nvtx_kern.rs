//! `nvtx_kern_sum` on every report against its oracle (tests/oracle/nvtx_kern_sum.sql, run in
//! current SQLite): kernels joined to their launch calls and to every NVTX range around the
//! call in SQL, the same rows in the same order; unfiltered, with `--name base --timeunit
//! usec`, and with `--filter-time` over the middle half of the kernels. Reports without NVTX
//! give the note and an empty table.

use std::path::Path;

use nsight_analysis::Value;
use serde_json::{Map, Value as Json};

use super::common::{
    has_column, has_table,
    oracle::{run, ALL},
    reports, short, sqlite3_json,
};

const ORACLE: &str = include_str!("nvtx_kern_sum.sql");
const TABLES: [&str; 3] = [
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
];

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
    let text = |k: &str| {
        o[k].as_str()
            .map_or(Value::Null, |s| Value::Text(s.to_owned()))
    };
    let opt = |k: &str| o[k].as_i64().map_or(Value::Null, Value::Int);
    let int = |k: &str| o[k].as_i64().unwrap_or_else(|| panic!("{k} in {o:?}"));
    let whole = |k: &str| {
        if unit == 1.0 {
            Value::Int(int(k))
        } else {
            Value::Real(int(k) as f64 / unit)
        }
    };
    let tenths = |k: &str| Value::Real(int(k) as f64 / 10.0 / unit);
    vec![
        text("name"),
        text("style"),
        opt("pid"),
        opt("tid"),
        Value::Int(int("nvtx_inst")),
        Value::Int(int("kern_inst")),
        whole("total"),
        tenths("avg10"),
        tenths("med10"),
        whole("min"),
        whole("max"),
        tenths("sd10"),
        text("kern"),
    ]
}

/// Runs the recipe and compares with the oracle; the row count.
fn check(report: &Path, args: &[(&str, &str)], name_column: &str, (lo, hi): (i64, i64)) -> usize {
    let unit = if args.contains(&("timeunit", "usec")) {
        1e3
    } else {
        1.0
    };
    let out = run("nvtx_kern_sum", report, args);
    let table = &out.tables[0];
    assert_eq!(table.columns.len(), 13);
    let at = format!("nvtx_kern_sum {args:?} on {}", short(report));
    if let Some(missing) = TABLES.iter().find(|t| !has_table(report, t)) {
        assert!(table.rows.is_empty(), "{at}");
        let note = format!("table {missing} not in this report");
        assert!(
            out.notes.iter().any(|n| n.contains(&note)),
            "{at}: {:?}",
            out.notes
        );
        return 0;
    }
    let want = sqlite3_json(
        report,
        &format!(
            ".parameter set :lo {lo}\n.parameter set :hi {hi}\n{}",
            ORACLE.replace("NAME_COLUMN", name_column)
        ),
    );
    assert_eq!(table.rows.len(), want.len(), "{at}: row count");
    for (i, (got, want)) in table.rows.iter().zip(&want).enumerate() {
        let want = expected(want, unit);
        let equal = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {got:?}\n  want {want:?}");
    }
    let in_ranges = table.rows.iter().any(|r| !matches!(r[0], Value::Null));
    assert_eq!(out.figures.len(), usize::from(in_ranges), "{at}");
    want.len()
}

#[test]
fn nvtx_kern_sum_matches_the_oracle_on_every_report() {
    let mut in_ranges = 0;
    for report in reports() {
        let n = check(&report, &[], "demangledName", ALL);
        println!("nvtx_kern_sum {:<45} {n} rows", short(&report));
        if n > 0 {
            let ranged = sqlite3_json(
                &report,
                &ORACLE
                    .replace("NAME_COLUMN", "demangledName")
                    .replace(":lo", "-9223372036854775808")
                    .replace(":hi", "9223372036854775807"),
            )
            .iter()
            .any(|r| !r["name"].is_null());
            in_ranges += usize::from(ranged);
        }
        let base = if has_column(&report, "CUPTI_ACTIVITY_KIND_KERNEL", "shortName") {
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
        let span = sqlite3_json(
            &report,
            "SELECT min(start) AS lo, max(\"end\") AS hi FROM CUPTI_ACTIVITY_KIND_KERNEL",
        );
        if let (Some(lo), Some(hi)) = (span[0]["lo"].as_i64(), span[0]["hi"].as_i64()) {
            let (lo, hi) = (lo + (hi - lo) / 4, hi - (hi - lo) / 4);
            check(
                &report,
                &[("filter-time", &format!("{lo}/{hi}"))],
                "demangledName",
                (lo, hi),
            );
        }
    }
    // The 5 extrap/concurrent runs and the 3 nsys-ai traces launch kernels inside NVTX ranges.
    assert!(in_ranges >= 8, "{in_ranges}");
}
