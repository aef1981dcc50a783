//! The `diff` recipe (multi-recipe world: map over two reports, reduce) against an oracle in
//! SQL (tests/oracle/diff.sql) run in current SQLite on report A with report B attached: the
//! same rows in the same order, integers equal, each one-decimal value exactly the double
//! nearest to the oracle's. Pairs of real exports from shared/testdata/nsys, a report against
//! itself, a side without kernels, `--name base`, `--timeunit usec`, and the wrong number of
//! reports.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;

use std::path::{Path, PathBuf};

use common::{host, recipe, short, sqlite3_json, testdata_dir};
use nsight_analysis::{RecipeHostError, RecipeKind, RecipeOutput, Table, Value};

const ORACLE: &str = include_str!("oracle/diff.sql");
const EMPTY_SIDE: &str = "@X@ AS (SELECT NULL AS name, NULL AS total, NULL AS num, NULL AS avg10, \
     NULL AS med10, NULL AS mn, NULL AS mx, NULL AS sd10 WHERE 0)";

fn data(rel: &str) -> PathBuf {
    testdata_dir().join(rel)
}

/// Pairs (A, B) of real exports: before/after runs of one program and unrelated ones.
fn pairs() -> Vec<(PathBuf, PathBuf)> {
    [
        (
            "nsys-ai/mfu_2gpu_before.sqlite",
            "nsys-ai/mfu_2gpu_after.sqlite",
        ),
        (
            "extrap/concurrent/profile1.sqlite",
            "extrap/concurrent/profile16.sqlite",
        ),
        (
            "extrap/sampled_callchains/ex-gpu.s10.sqlite",
            "extrap/sampled_callchains/ex-gpu.s1000.sqlite",
        ),
        ("gtls/report1.sqlite", "nsys-ai/h100_2gpu_1s.sqlite"),
        ("extrap/con_kernel.sqlite", "nsys-ai/mock.sqlite"),
    ]
    .into_iter()
    .map(|(a, b)| (data(a), data(b)))
    .collect()
}

fn run(a: &Path, b: &Path, args: &[(&str, &str)]) -> Result<RecipeOutput, RecipeHostError> {
    let args: Vec<(String, String)> = args
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    host().run_reports(&recipe("diff"), &[a.to_path_buf(), b.to_path_buf()], &args)
}

/// The oracle's SQL for A and B; a side given as `None` has no kernel table.
fn oracle_sql(b: &Path, name_column: &str, a_has: bool, b_has: bool) -> String {
    let (template, join) = ORACLE
        .split_once("-- @@ join")
        .expect("diff.sql has a `-- @@ join` line");
    let side = |db: &str, x: &str, has: bool| {
        if has { template.trim_end() } else { EMPTY_SIDE }
            .replace("@DB@", db)
            .replace("@X@", x)
            .replace("NAME_COLUMN", name_column)
    };
    let uri = format!("file:{}?mode=ro", b.display());
    format!(
        "ATTACH '{}' AS b;\nWITH {},\n{}\n{join}",
        uri.replace('\'', "''"),
        side("main", "a", a_has),
        side("b", "b", b_has)
    )
}

/// The recipe's row for one oracle row; `unit` is ns per time unit.
fn expected(o: &serde_json::Map<String, serde_json::Value>, unit: f64) -> Vec<Value> {
    let int = |k: &str| o[k].as_i64();
    let whole = |k: &str| match int(k) {
        None => Value::Null,
        Some(v) if unit == 1.0 => Value::Int(v),
        Some(v) => Value::Real(v as f64 / unit),
    };
    let tenths = |k: &str| int(k).map_or(Value::Null, |v| Value::Real(v as f64 / 10.0 / unit));
    let count = |k: &str| int(k).map_or(Value::Null, Value::Int);
    let mut row = vec![whole("a_total"), whole("b_total"), whole("d_total")];
    row.push(int("pct10").map_or(Value::Null, |v| Value::Real(v as f64 / 10.0)));
    row.extend([count("a_num"), count("b_num"), count("d_num")]);
    for s in ["avg10", "med10"] {
        row.extend(["a_", "b_", "d_"].map(|p| tenths(&format!("{p}{s}"))));
    }
    for s in ["min", "max"] {
        row.extend(["a_", "b_", "d_"].map(|p| whole(&format!("{p}{s}"))));
    }
    row.extend(["a_", "b_", "d_"].map(|p| tenths(&format!("{p}sd10"))));
    for k in ["side", "name"] {
        row.push(Value::Text(o[k].as_str().unwrap().to_owned()));
    }
    row
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

/// Asserts the diff table equals the oracle's rows; returns the row count.
fn assert_matches(
    at: &str,
    table: &Table,
    oracle: &[serde_json::Map<String, serde_json::Value>],
    unit: f64,
) -> usize {
    assert_eq!(table.columns.len(), 24, "{at}: columns");
    assert_eq!(table.rows.len(), oracle.len(), "{at}: row count");
    for (i, (row, want)) in table.rows.iter().zip(oracle).enumerate() {
        let want = expected(want, unit);
        let equal = row.len() == want.len() && row.iter().zip(&want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {row:?}\n  want {want:?}");
    }
    table.rows.len()
}

fn check_pair(a: &Path, b: &Path, args: &[(&str, &str)], name_column: &str, unit: f64) -> usize {
    let at = format!("diff {} {} {args:?}", short(a), short(b));
    let out = run(a, b, args).unwrap_or_else(|e| panic!("{at}: {e:?}"));
    let table = out
        .table("diff")
        .unwrap_or_else(|| panic!("{at}: no diff table"));
    let oracle = sqlite3_json(a, &oracle_sql(b, name_column, true, true));
    assert!(
        out.notes
            .iter()
            .any(|n| n.starts_with("A is ") && n.contains("B is ")),
        "{at}: notes {:?}",
        out.notes
    );
    assert_matches(&at, table, &oracle, unit)
}

#[test]
fn diff_is_a_multi_report_recipe() {
    let component = recipe("diff");
    assert_eq!(host().kind(&component), RecipeKind::Multi);
    assert_eq!(
        host().kind(&recipe("cuda_gpu_kern_sum")),
        RecipeKind::Single
    );
    let info = host().describe(&component).unwrap();
    assert_eq!(info.name, "diff");
    let names: Vec<&str> = info.arguments.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["timeunit", "name"]);
}

#[test]
fn diff_matches_the_sql_oracle_on_pairs_of_real_exports() {
    let mut rows = 0;
    let mut one_sided = 0;
    for (a, b) in pairs() {
        rows += check_pair(&a, &b, &[], "demangledName", 1.0);
        let out = run(&a, &b, &[]).unwrap();
        one_sided += out
            .table("diff")
            .unwrap()
            .rows
            .iter()
            .filter(|r| !same(&r[22], &Value::Text("both".into())))
            .count();
    }
    assert!(rows > 50, "the pairs gave only {rows} rows");
    assert!(one_sided > 0, "no pair had a kernel on one side only");
}

#[test]
fn a_report_against_itself_changes_nothing() {
    let a = data("nsys-ai/mfu_2gpu_before.sqlite");
    let out = run(&a, &a, &[]).unwrap();
    let table = out.table("diff").unwrap();
    assert!(!table.rows.is_empty());
    for row in &table.rows {
        for d in [2, 6, 9, 12, 15, 18, 21] {
            assert!(
                matches!(row[d], Value::Int(0)) || matches!(row[d], Value::Real(x) if x == 0.0),
                "Δ column {d} of {row:?}"
            );
        }
        assert!(same(&row[22], &Value::Text("both".into())));
    }
    // The same file name twice: the labels are the whole paths.
    let label = a.display().to_string();
    assert!(out.notes[0].contains(&label), "{:?}", out.notes);
    check_pair(&a, &a, &[], "demangledName", 1.0);
}

#[test]
fn name_variants_and_time_units_match_the_oracle() {
    let a = data("nsys-ai/mfu_2gpu_before.sqlite");
    let b = data("nsys-ai/mfu_2gpu_after.sqlite");
    assert!(check_pair(&a, &b, &[("name", "base")], "shortName", 1.0) > 0);
    assert!(check_pair(&a, &b, &[("name", "mangled")], "mangledName", 1.0) > 0);
    assert!(check_pair(&a, &b, &[("timeunit", "usec")], "demangledName", 1e3) > 0);
    let out = run(&a, &b, &[("timeunit", "msec")]).unwrap();
    let headers: Vec<&str> = out
        .table("diff")
        .unwrap()
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(headers[0], "Total Time A (ms)");
    assert_eq!(headers[3], "Total Time Δ (%)");
    assert_eq!(&headers[22..], ["In", "Name"]);
}

#[test]
fn a_side_without_kernels_lists_the_other_side_only() {
    let dir = std::env::temp_dir().join(format!("nsight-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stripped = dir.join("no_kernels.sqlite");
    std::fs::copy(data("nsys-ai/mock.sqlite"), &stripped).unwrap();
    let status = std::process::Command::new("sqlite3")
        .arg(&stripped)
        .arg("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;")
        .status()
        .unwrap();
    assert!(status.success());
    let b = data("extrap/con_kernel.sqlite");
    let out = run(&stripped, &b, &[]).unwrap();
    let table = out.table("diff").unwrap();
    let oracle = sqlite3_json(&stripped, &oracle_sql(&b, "demangledName", false, true));
    assert!(assert_matches("diff without kernels in A", table, &oracle, 1.0) > 0);
    assert!(table
        .rows
        .iter()
        .all(|r| same(&r[22], &Value::Text("B only".into()))));
    assert!(
        out.notes
            .iter()
            .any(|n| n.starts_with("no_kernels.sqlite: ")
                && n.contains("CUPTI_ACTIVITY_KIND_KERNEL")),
        "{:?}",
        out.notes
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn diff_needs_exactly_two_reports_and_known_arguments() {
    let a = data("nsys-ai/mock.sqlite");
    let one = host().run_reports(&recipe("diff"), std::slice::from_ref(&a), &[]);
    let err = format!("{}", one.unwrap_err());
    assert!(
        err.contains("exactly two reports") && err.contains("got 1"),
        "{err}"
    );
    let three = host().run_reports(&recipe("diff"), &[a.clone(), a.clone(), a.clone()], &[]);
    assert!(format!("{}", three.unwrap_err()).contains("got 3"));
    let bad = run(&a, &a, &[("timeunit", "weeks")]).unwrap_err();
    assert!(format!("{bad}").contains("--timeunit weeks"), "{bad}");
    let unknown = run(&a, &a, &[("filter-time", "1/2")]).unwrap_err();
    assert!(matches!(unknown, RecipeHostError::Recipe(_)), "{unknown:?}");
    // A one-report recipe given two reports says so.
    let kern = host().run_reports(&recipe("cuda_gpu_kern_sum"), &[a.clone(), a], &[]);
    assert!(format!("{}", kern.unwrap_err()).contains("one report at a time"));
}
