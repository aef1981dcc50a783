//! Correctness of the summary recipes on every real nsys export in shared/testdata/nsys: each
//! recipe component, run by the host, must produce exactly what an independent oracle computes
//! (SQL in tests/oracle/, run by the sqlite3 CLI): the same rows in the same order, integers
//! equal, and each rounded value exactly the double nearest to the oracle's rounded value.
//! Reports that lack a recipe's table must give an empty table and the note saying so.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;

use std::path::Path;

use common::{has_column, has_table, recipe, reports, short, sqlite3_json};
use nsight_analysis::{RecipeOutput, Table, Value};

/// One summary recipe and its oracle.
struct Case {
    recipe: &'static str,
    oracle: &'static str,
    table: &'static str,
    /// The JSON keys of the label columns, in column order.
    labels: &'static [&'static str],
}

const NVTX: Case = Case {
    recipe: "nvtx_sum",
    oracle: include_str!("oracle/nvtx_sum.sql"),
    table: "NVTX_EVENTS",
    labels: &["style", "name"],
};
const KERN: Case = Case {
    recipe: "cuda_gpu_kern_sum",
    oracle: include_str!("oracle/cuda_gpu_kern_sum.sql"),
    table: "CUPTI_ACTIVITY_KIND_KERNEL",
    labels: &["name"],
};
const API: Case = Case {
    recipe: "cuda_api_sum",
    oracle: include_str!("oracle/cuda_api_sum.sql"),
    table: "CUPTI_ACTIVITY_KIND_RUNTIME",
    labels: &["name"],
};

fn run(recipe_name: &str, report: &Path, args: &[(&str, &str)]) -> RecipeOutput {
    let args: Vec<(String, String)> = args
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    common::host()
        .run(&recipe(recipe_name), report, &args)
        .unwrap_or_else(|e| panic!("{recipe_name} on {}: {e:?}", short(report)))
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

/// The row the recipe must produce for one oracle row, with time columns in `unit` (ns per
/// unit; 1 for nsec, where Total, Min and Max stay integers).
fn expected_row(
    oracle: &serde_json::Map<String, serde_json::Value>,
    case: &Case,
    unit: f64,
) -> Vec<Value> {
    let int = |k: &str| {
        oracle[k]
            .as_i64()
            .unwrap_or_else(|| panic!("{k} in {oracle:?}"))
    };
    let tenths = |k: &str| int(k) as f64 / 10.0;
    let whole = |k: &str| {
        if unit == 1.0 {
            Value::Int(int(k))
        } else {
            Value::Real(int(k) as f64 / unit)
        }
    };
    let mut row = vec![
        if oracle["pct10"].is_null() {
            Value::Null
        } else {
            Value::Real(tenths("pct10"))
        },
        whole("total"),
        Value::Int(int("num")),
        Value::Real(tenths("avg10") / unit),
        Value::Real(tenths("med10") / unit),
        whole("min"),
        whole("max"),
        Value::Real(tenths("sd10") / unit),
    ];
    row.extend(
        case.labels
            .iter()
            .map(|k| Value::Text(oracle[*k].as_str().unwrap().to_owned())),
    );
    row
}

/// Asserts that `table` equals the oracle's rows, row by row; returns the row count.
fn assert_matches(case: &Case, report: &Path, table: &Table, oracle_sql: &str, unit: f64) -> usize {
    let oracle = sqlite3_json(report, oracle_sql);
    let at = format!("{} on {}", case.recipe, short(report));
    assert_eq!(table.rows.len(), oracle.len(), "{at}: row count");
    for (i, (row, want)) in table.rows.iter().zip(&oracle).enumerate() {
        let want = expected_row(want, case, unit);
        assert_eq!(row.len(), want.len(), "{at}: row {i} width");
        let equal = row.iter().zip(&want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {row:?}\n  want {want:?}");
    }
    oracle.len()
}

/// Runs `case` on every report; returns how many had rows.
fn check_every_report(case: &Case, args: &[(&str, &str)], unit: f64) -> usize {
    let mut with_rows = 0;
    for report in reports() {
        let out = run(case.recipe, &report, args);
        assert_eq!(out.tables.len(), 1, "{}: {:?}", short(&report), out.notes);
        let table = &out.tables[0];
        assert_eq!(table.name, case.recipe);
        if !has_table(&report, case.table) {
            let note = format!("table {} not in this report", case.table);
            assert!(
                out.notes.iter().any(|n| n.contains(&note)),
                "{} on {}: expected the note {note:?}, got {:?}",
                case.recipe,
                short(&report),
                out.notes
            );
            assert!(table.rows.is_empty());
            println!("{:<20} {:<45} note: {note}", case.recipe, short(&report));
            continue;
        }
        let sql = case.oracle.replace("NAME_COLUMN", "demangledName");
        let n = assert_matches(case, &report, table, &sql, unit);
        println!(
            "{:<20} {:<45} {n} rows match the oracle",
            case.recipe,
            short(&report)
        );
        if n > 0 {
            with_rows += 1;
        }
    }
    with_rows
}

#[test]
fn nvtx_sum_matches_the_oracle_on_every_report() {
    // 5 extrap/concurrent runs and 3 nsys-ai traces have NVTX ranges.
    assert!(check_every_report(&NVTX, &[], 1.0) >= 8);
}

#[test]
fn cuda_gpu_kern_sum_matches_the_oracle_on_every_report() {
    assert_eq!(check_every_report(&KERN, &[], 1.0), reports().len());
}

#[test]
fn cuda_api_sum_matches_the_oracle_on_every_report() {
    assert_eq!(check_every_report(&API, &[], 1.0), reports().len());
}

#[test]
fn cuda_api_sum_notes_the_backtrace_rows_it_leaves_out() {
    for report in reports() {
        let rows = sqlite3_json(
            &report,
            "SELECT count(*) AS n FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 67",
        );
        let noted = run("cuda_api_sum", &report, &[])
            .notes
            .iter()
            .any(|n| n.contains("event class 67"));
        assert_eq!(noted, rows[0]["n"].as_i64() > Some(0), "{}", short(&report));
    }
}

#[test]
fn kernel_names_base_and_mangled_match_the_oracle() {
    for (variant, column) in [("base", "shortName"), ("mangled", "mangledName")] {
        for report in reports() {
            let out = run("cuda_gpu_kern_sum", &report, &[("name", variant)]);
            let present = has_column(&report, KERN.table, column);
            let note = format!("column {}.{column} not in this report", KERN.table);
            assert_eq!(
                out.notes.iter().any(|n| n.contains(&note)),
                !present,
                "{variant} on {}: {:?}",
                short(&report),
                out.notes
            );
            let sql = KERN.oracle.replace(
                "NAME_COLUMN",
                if present { column } else { "demangledName" },
            );
            let n = assert_matches(&KERN, &report, &out.tables[0], &sql, 1.0);
            println!(
                "cuda_gpu_kern_sum --name {variant:<8} {:<40} {n} rows",
                short(&report)
            );
        }
    }
}

#[test]
fn timeunit_divides_the_rounded_nanosecond_statistics() {
    let reports = reports();
    for (i, report) in reports.iter().enumerate() {
        // Every report in one unit or another, cycling through the three.
        let (unit, nanos, header) = [
            ("usec", 1e3, "(us)"),
            ("msec", 1e6, "(ms)"),
            ("sec", 1e9, "(s)"),
        ][i % 3];
        for case in [&NVTX, &KERN, &API] {
            let out = run(case.recipe, report, &[("timeunit", unit)]);
            let table = &out.tables[0];
            assert_eq!(table.columns[1].name, format!("Total Time {header}"));
            assert_eq!(
                table.columns[3].unit.as_deref(),
                Some(&header[1..header.len() - 1])
            );
            if has_table(report, case.table) {
                let sql = case.oracle.replace("NAME_COLUMN", "demangledName");
                assert_matches(case, report, table, &sql, nanos);
            }
        }
    }
}

#[test]
fn bad_arguments_are_the_recipes_error() {
    let report = common::testdata_dir().join("nsys-ai/mock.sqlite");
    let host = common::host();
    for (recipe_name, args, want) in [
        (
            "nvtx_sum",
            vec![("timeunit", "minutes")],
            "--timeunit minutes",
        ),
        (
            "cuda_api_sum",
            vec![("bogus", "1")],
            "unknown argument --bogus",
        ),
        ("cuda_gpu_kern_sum", vec![("name", "short")], "--name short"),
    ] {
        let args: Vec<(String, String)> = args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let err = host.run(&recipe(recipe_name), &report, &args).unwrap_err();
        assert!(err.to_string().contains(want), "{recipe_name}: {err}");
    }
}
