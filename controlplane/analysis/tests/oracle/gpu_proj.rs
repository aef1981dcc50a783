//! `nvtx_gpu_proj_sum` on every report against its oracle
//! (tests/oracle/nvtx_gpu_proj_sum.sql, run in current SQLite): NVIDIA's documented projection
//! computed in SQL, the same rows in the same order; unfiltered on every report, and with
//! `--timeunit usec` and `--filter-time` (the middle half of the kernels) on the smaller ones.

use std::path::Path;

use nsight_analysis::Value;
use serde_json::{Map, Value as Json};

use super::common::{
    has_table,
    oracle::{run, ALL},
    reports, short, sqlite3_json,
};

const ORACLE: &str = include_str!("nvtx_gpu_proj_sum.sql");
const GPU_TABLES: [&str; 3] = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
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

fn oracle(report: &Path, (lo, hi): (i64, i64)) -> Vec<Map<String, Json>> {
    let mut ops = vec!["SELECT NULL, NULL, NULL, NULL WHERE 0".to_owned()];
    for t in GPU_TABLES.iter().filter(|t| has_table(report, t)) {
        ops.push(format!(
            "SELECT start, \"end\", correlationId, globalPid FROM {t}"
        ));
    }
    sqlite3_json(
        report,
        &format!(
            ".parameter set :lo {lo}\n.parameter set :hi {hi}\n{}",
            ORACLE.replace("@OPS@", &ops.join(" UNION ALL "))
        ),
    )
}

fn expected(o: &Map<String, Json>, unit: f64) -> Vec<Value> {
    let int = |k: &str| o[k].as_i64().unwrap_or_else(|| panic!("{k} in {o:?}"));
    let whole = |k: &str| {
        if unit == 1.0 {
            Value::Int(int(k))
        } else {
            Value::Real(int(k) as f64 / unit)
        }
    };
    let tenths = |k: &str| Value::Real(int(k) as f64 / 10.0 / unit);
    let real = |k: &str| Value::Real(o[k].as_f64().unwrap());
    let text = |k: &str| Value::Text(o[k].as_str().unwrap().to_owned());
    vec![
        text("name"),
        text("style"),
        whole("total"),
        whole("rtotal"),
        Value::Int(int("num")),
        tenths("avg10"),
        tenths("med10"),
        whole("min"),
        whole("max"),
        tenths("sd10"),
        Value::Int(int("ops")),
        real("avg_ops"),
        real("avg_lvl"),
        real("avg_kids"),
    ]
}

fn check(report: &Path, args: &[(&str, &str)], window: (i64, i64)) -> usize {
    let unit = if args.contains(&("timeunit", "usec")) {
        1e3
    } else {
        1.0
    };
    let out = run("nvtx_gpu_proj_sum", report, args);
    let table = &out.tables[0];
    assert_eq!(table.columns.len(), 14);
    let at = format!("nvtx_gpu_proj_sum {args:?} on {}", short(report));
    for t in ["NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME"] {
        if !has_table(report, t) {
            assert!(table.rows.is_empty(), "{at}");
            let note = format!("table {t} not in this report");
            assert!(
                out.notes.iter().any(|n| n.contains(&note)),
                "{at}: {:?}",
                out.notes
            );
            return 0;
        }
    }
    let want = oracle(report, window);
    assert_eq!(table.rows.len(), want.len(), "{at}: row count");
    for (i, (got, want)) in table.rows.iter().zip(&want).enumerate() {
        let want = expected(want, unit);
        let equal = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {got:?}\n  want {want:?}");
    }
    assert_eq!(out.figures.len(), usize::from(!want.is_empty()), "{at}");
    want.len()
}

#[test]
fn nvtx_gpu_proj_sum_matches_the_oracle_on_every_report() {
    let mut with_rows = 0;
    for report in reports() {
        let n = check(&report, &[], ALL);
        println!("nvtx_gpu_proj_sum {:<45} {n} rows", short(&report));
        with_rows += usize::from(n > 0);
        // The oracle's level and children are quadratic in the ranges of a thread (about 20 s
        // for the 19,000 ranges of mfu_2gpu_before): the other variants run on the smaller
        // reports and on the 1 s H100 trace only.
        if n == 0 {
            continue;
        }
        let ranges = sqlite3_json(&report, "SELECT count(*) AS n FROM NVTX_EVENTS")[0]["n"]
            .as_i64()
            .unwrap_or(0);
        if ranges > 1_000 && !short(&report).contains("h100") {
            continue;
        }
        check(&report, &[("timeunit", "usec")], ALL);
        let span = sqlite3_json(
            &report,
            "SELECT min(start) AS lo, max(\"end\") AS hi FROM CUPTI_ACTIVITY_KIND_KERNEL",
        );
        let (lo, hi) = (
            span[0]["lo"].as_i64().unwrap(),
            span[0]["hi"].as_i64().unwrap(),
        );
        let (lo, hi) = (lo + (hi - lo) / 4, hi - (hi - lo) / 4);
        check(&report, &[("filter-time", &format!("{lo}/{hi}"))], (lo, hi));
    }
    // The 5 extrap/concurrent runs and the 3 nsys-ai traces launch GPU work inside ranges.
    assert_eq!(with_rows, 8);
}
