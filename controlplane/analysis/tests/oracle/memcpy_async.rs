//! `cuda_memcpy_async` on every report against its oracle
//! (tests/oracle/cuda_memcpy_async.sql, run in current SQLite): the same copies in the same
//! order, every field equal; with `--rows`, `--timeunit usec` and `--filter-time`; bad `--rows`.

use std::path::Path;

use nsight_analysis::Value;
use serde_json::{Map, Value as Json};

use super::common::{
    has_column, has_table,
    oracle::{run, ALL},
    reports, short, sqlite3_json,
};

const ORACLE: &str = include_str!("cuda_memcpy_async.sql");
/// nsys's memory kinds, for exports without ENUM_CUDA_MEM_KIND.
const KINDS: &str = "VALUES (0, 'Pageable'), (1, 'Pinned'), (2, 'Device'), (3, 'Array'), \
    (4, 'Managed'), (5, 'Device Static'), (6, 'Managed Static'), (7, 'Unknown')";

pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Real(x), Value::Real(y)) => x == y,
        (Value::Text(x), Value::Text(y)) => x == y,
        _ => false,
    }
}

fn oracle(report: &Path, window: (i64, i64)) -> Vec<Map<String, Json>> {
    oracle_rows(report, ORACLE, window)
}

/// The rows of a copy-listing oracle (`cuda_memcpy_async.sql`, `cuda_memcpy_sync.sql`) with
/// its `@KINDS@` and `@GREEN@` filled in for `report`.
pub fn oracle_rows(report: &Path, sql: &str, (lo, hi): (i64, i64)) -> Vec<Map<String, Json>> {
    let kinds = if has_table(report, "ENUM_CUDA_MEM_KIND") {
        "SELECT id, label FROM ENUM_CUDA_MEM_KIND"
    } else {
        KINDS
    };
    let green = if has_column(report, "CUPTI_ACTIVITY_KIND_MEMCPY", "greenContextId") {
        "NULLIF(m.greenContextId, 0)"
    } else {
        "NULL"
    };
    sqlite3_json(
        report,
        &format!(
            ".parameter set :lo {lo}\n.parameter set :hi {hi}\n{}",
            sql.replace("@KINDS@", kinds).replace("@GREEN@", green)
        ),
    )
}

pub fn expected(o: &Map<String, Json>, unit: f64) -> Vec<Value> {
    let int = |k: &str| o[k].as_i64().map_or(Value::Null, Value::Int);
    let text = |k: &str| {
        o[k].as_str()
            .map_or(Value::Null, |s| Value::Text(s.to_owned()))
    };
    let time = |k: &str| {
        let v = o[k].as_i64().unwrap();
        if unit == 1.0 {
            Value::Int(v)
        } else {
            Value::Real(v as f64 / unit)
        }
    };
    vec![
        time("dur"),
        time("start"),
        text("src"),
        text("dst"),
        o["mb"].as_f64().map_or(Value::Null, Value::Real),
        int("pid"),
        int("device"),
        int("context"),
        int("green"),
        int("stream"),
        text("api"),
    ]
}

fn check(report: &Path, args: &[(&str, &str)], window: (i64, i64), rows: Option<usize>) -> usize {
    let unit = if args.contains(&("timeunit", "usec")) {
        1e3
    } else {
        1.0
    };
    let out = run("cuda_memcpy_async", report, args);
    let table = &out.tables[0];
    assert_eq!(table.columns.len(), 11);
    let at = format!("cuda_memcpy_async {args:?} on {}", short(report));
    let tables = ["CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME"];
    if let Some(missing) = tables.iter().find(|t| !has_table(report, t)) {
        assert!(table.rows.is_empty(), "{at}");
        let note = format!("table {missing} not in this report");
        assert!(
            out.notes.iter().any(|n| n.contains(&note)),
            "{at}: {:?}",
            out.notes
        );
        return 0;
    }
    let all = oracle(report, window);
    let want: Vec<_> = all.iter().take(rows.unwrap_or(usize::MAX)).collect();
    assert_eq!(table.rows.len(), want.len(), "{at}: row count");
    for (i, (got, want)) in table.rows.iter().zip(want).enumerate() {
        let want = expected(want, unit);
        let equal = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {got:?}\n  want {want:?}");
    }
    let advice = out.notes.iter().any(|n| n.contains("use PINNED memory"));
    assert_eq!(advice, !all.is_empty(), "{at}: {:?}", out.notes);
    check_time_figure(&out, &all, unit, &at);
    all.len()
}

/// The copies' bar chart: one bar per API and memory kinds (at most 20, largest first), each
/// the total duration of the oracle's copies of that group, from every copy (not only the
/// listed rows); no figure without copies.
pub fn check_time_figure(
    out: &nsight_analysis::RecipeOutput,
    all: &[Map<String, Json>],
    unit: f64,
    at: &str,
) {
    if all.is_empty() {
        assert!(out.figures.is_empty(), "{at}: {:?}", out.figures);
        return;
    }
    let mut totals = std::collections::BTreeMap::<String, i64>::new();
    for o in all {
        let label = format!(
            "{}: {} to {}",
            o["api"].as_str().unwrap(),
            o["src"].as_str().unwrap_or("unknown"),
            o["dst"].as_str().unwrap_or("unknown")
        );
        *totals.entry(label).or_default() += o["dur"].as_i64().unwrap();
    }
    let mut want: Vec<(String, i64)> = totals.into_iter().collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    want.truncate(20);
    assert_eq!(out.figures.len(), 1, "{at}");
    let bars = super::common::figure_bars(&out.figures[0].svg);
    let want: Vec<(String, f64)> = want
        .into_iter()
        .map(|(label, ns)| (label, ns as f64 / unit))
        .collect();
    assert_eq!(bars, want, "{at}: the figure's bars");
}

#[test]
fn cuda_memcpy_async_matches_the_oracle_on_every_report() {
    let mut with_rows = 0;
    for report in reports() {
        let n = check(&report, &[], ALL, None);
        println!("cuda_memcpy_async {:<45} {n} rows", short(&report));
        with_rows += usize::from(n > 0);
        check(
            &report,
            &[("rows", "2"), ("timeunit", "usec")],
            ALL,
            Some(2),
        );
        if !has_table(&report, "CUPTI_ACTIVITY_KIND_MEMCPY") {
            continue;
        }
        let span = sqlite3_json(
            &report,
            "SELECT min(start) AS lo, max(\"end\") AS hi FROM CUPTI_ACTIVITY_KIND_MEMCPY",
        );
        let (lo, hi) = (
            span[0]["lo"].as_i64().unwrap(),
            span[0]["hi"].as_i64().unwrap(),
        );
        let (lo, hi) = (lo + (hi - lo) / 4, hi - (hi - lo) / 4);
        check(
            &report,
            &[("filter-time", &format!("{lo}/{hi}"))],
            (lo, hi),
            None,
        );
    }
    // The three nsys-ai training traces copy from pageable memory with cudaMemcpyAsync.
    assert_eq!(with_rows, 3);
}

#[test]
fn cuda_memcpy_async_refuses_bad_row_limits() {
    let report = super::common::testdata_dir().join("nsys-ai/mock.sqlite");
    for bad in ["0", "-2", "x", "1.5"] {
        let args = vec![("rows".to_owned(), bad.to_owned())];
        let err = super::common::host()
            .run(&super::common::recipe("cuda_memcpy_async"), &report, &args)
            .unwrap_err();
        assert!(err.to_string().contains(&format!("--rows {bad}")), "{err}");
    }
}
